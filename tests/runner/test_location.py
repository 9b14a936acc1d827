"""Where a run store is, as a person is shown it and as the commands the CLI suggests name it (issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.location import shown
from runner.words import command


@pytest.mark.parametrize("url, seen", [
    ("postgresql://me:secret@db.example.com:5432/runs", "postgresql://me@db.example.com:5432/runs"),
    ("postgres://me:secret@db.example.com/runs", "postgresql://me@db.example.com/runs"),
    ("postgresql://me:secret@db/runs?options=-csearch_path%3Dmine",
     "postgresql://me@db/runs?options=-csearch_path%3Dmine"),
    ("postgresql://me@db/runs?password=secret&sslpassword=key&sslmode=require",
     "postgresql://me@db/runs?sslmode=require"),
    ("postgresql://me:secret@[::1]:5433/runs", "postgresql://me@[::1]:5433/runs"),
    ("postgresql://me:secret@127.0.0.1:notaport/runs", "postgresql://me@127.0.0.1:notaport/runs"),
    ("postgresql://me:secret@127.0.0.1:99999/runs", "postgresql://me@127.0.0.1:99999/runs"),
])
def test_a_url_is_shown_with_the_schema_it_chooses_and_never_a_password(url: str, seen: str) -> None:
    assert (shown(url), shown(seen)) == (seen, seen)


URL = "postgresql://me:secret@db/runs?options=-csearch_path%3Dmine"


@pytest.mark.parametrize("environment, db, said", [
    (None, "runs.db", "runner status x"),
    (None, "other.db", "runner status x --db other.db"),
    (None, URL, "runner status x --db 'postgresql://me@db/runs?options=-csearch_path%3Dmine'"),
    (URL, URL, "runner status x"),
    ("postgresql://me:other@db/runs?options=-csearch_path%3Dmine", URL, "runner status x"),
    ("postgresql://me:secret@db/runs", URL, "runner status x --db 'postgresql://me@db/runs?options=-csearch_path%3Dmine'"),
    (URL, "runs.db", "runner status x --db runs.db"),
])
def test_a_suggested_command_names_the_store_unless_it_is_found_there_without_db(
    environment: str | None, db: str, said: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    if environment is None:
        monkeypatch.delenv("RUNNER_DB", raising=False)
    else:
        monkeypatch.setenv("RUNNER_DB", environment)
    assert command("status", "x", db=db) == said
