"""The sample data's maker: deterministic, to the file named or to stdout, never over the committed sample unasked."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
MAKER = ROOT / "sample_data" / "make_posts.py"
SAMPLE = ROOT / "sample_data" / "posts.jsonl"


def make(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(MAKER), *args], cwd=cwd, capture_output=True, check=True)


def test_without_out_the_posts_go_to_stdout_and_the_committed_sample_is_left_as_it_is(tmp_path: Path) -> None:
    before = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    made = make("--count", "3", cwd=tmp_path)
    assert [json.loads(line)["id"] for line in made.stdout.decode("utf-8").splitlines()] == ["post-00001", "post-00002", "post-00003"]
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() == before and list(tmp_path.iterdir()) == []


def test_the_same_arguments_give_the_same_bytes_and_the_defaults_give_the_committed_sample(tmp_path: Path) -> None:
    make("--out", str(tmp_path / "again.jsonl"), cwd=tmp_path)
    assert (tmp_path / "again.jsonl").read_bytes() == SAMPLE.read_bytes()
    assert make("--count", "50", "--seed", "7", cwd=tmp_path).stdout == make("--count", "50", "--seed", "7", cwd=tmp_path).stdout


def test_help_says_where_the_posts_go(tmp_path: Path) -> None:
    said = make("--help", cwd=tmp_path).stdout.decode()
    assert "--out" in said and "standard output" in said
