"""A large input: preparing 1,000,000 posts against raw sqlite3's ``executemany`` of the same rows.

Each side runs in a process of its own, the two taking turns (``ROUNDS``
each, ``QUICK_ROUNDS`` with ``--quick``; the fastest of each compared) on the same JSONL
(``sample_data/make_posts.py``), each into a new store:

- the runner: ``runs.prepare`` of the sample job over the file, as ``runner
  run`` reads an input (the whole input checked, then its items added in
  chunks, each its own transaction);
- raw sqlite3: a plain loop that parses each line, makes the same row (key,
  group, order, the JSON sent, its size and fingerprint) and inserts it with
  ``executemany`` into the same tables with the same indexes (not the
  store's triggers), in one transaction, with the same journal and
  durability (WAL, ``synchronous=FULL``).

For each: seconds, peak memory (the process's ``VmHWM``) and the longest
stretch the store's write lock was held, as another process saw it: it
tries ``BEGIN IMMEDIATE`` (a busy timeout of ``PROBE_WAIT``) in a loop, and
the longest time between two of its writes that got through is the
longest the lock was kept from it.

    python -m bench.large_input [--quick] [--posts FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, Row, Target, machine, make_posts, report

COUNT = 1_000_000
QUICK_COUNT = 100_000
#: Rounds of each side, taking turns: each side's fastest is compared (short rounds are the noisier).
ROUNDS = 2
QUICK_ROUNDS = 3
#: Seconds the probe's ``BEGIN IMMEDIATE`` waits for the lock before it counts as refused.
PROBE_WAIT = 0.05
#: Seconds between two of the probe's tries.
PROBE_PAUSE = 0.01
SPEED = Target("ratio", ">=", 0.6)
MEMORY = Target("value", "<", 150)
LOCK = Target("value", "<", 1)

#: The side of the runner, in a process that imports what ``runner run`` does.
RUNNER = """
import json, sys, time
from pathlib import Path
from runner import jobs, runs
from runner.inputs import InputSpec
from runner.store import Store
import dataclasses
source, path = Path(sys.argv[1]), Path(sys.argv[2])
job = jobs.load(Path("sample_data") / "job.toml")
job = dataclasses.replace(job, name="bench", input=InputSpec(source, "jsonl"))
start = time.perf_counter()
with Store(path) as store:
    runs.prepare(store, job, now=time.time)
seconds = time.perf_counter() - start
peak = int(Path("/proc/self/status").read_text().split("VmHWM:", 1)[1].split()[0]) / 1024
print(json.dumps({"seconds": seconds, "peak MB": peak}))
"""

#: The raw side: the same rows, by hand, in one transaction.
RAW = """
import hashlib, json, sqlite3, sys, time
from pathlib import Path
from runner import jobs, protocol
source, path = Path(sys.argv[1]), Path(sys.argv[2])
job = jobs.load(Path("sample_data") / "job.toml")
context = protocol.encode([job.provider.model, job.prompt.system, job.prompt.template, job.prompt.instructions,
                           job.version])
hashed_context = hashlib.sha256(f"{context}\\n".encode())
start = time.perf_counter()
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA synchronous = FULL")
def rows():
    with source.open("rb") as lines:
        for seq, line in enumerate(lines):
            record = json.loads(line)
            key = str(record["id"])
            text = protocol.encode(protocol.item_payload(key, {f: record.get(f) for f in job.prompt.fields}))
            digest = hashed_context.copy()
            digest.update(text.encode())
            yield seq + 1, key, record["month"], seq, text, digest.hexdigest()
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO runs (id, name, job, created_at, updated_at) VALUES (1, 'raw', '{}', 0, 0)")
batch = []
for row in rows():
    batch.append(row)
    if len(batch) == 10_000:
        conn.executemany("INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at) "
                         "VALUES (?, 1, ?, ?, ?, length(?), ?, 0)", [(i, k, g, s, t, d) for i, k, g, s, t, d in batch])
        conn.executemany("INSERT INTO inputs (item_id, input) VALUES (?, ?)", [(i, t) for i, _, _, _, t, _ in batch])
        batch.clear()
conn.executemany("INSERT INTO items (id, run_id, key, grp, seq, chars, fingerprint, updated_at) "
                 "VALUES (?, 1, ?, ?, ?, length(?), ?, 0)", [(i, k, g, s, t, d) for i, k, g, s, t, d in batch])
conn.executemany("INSERT INTO inputs (item_id, input) VALUES (?, ?)", [(i, t) for i, _, _, _, t, _ in batch])
conn.execute("COMMIT")
conn.close()
seconds = time.perf_counter() - start
peak = int(Path("/proc/self/status").read_text().split("VmHWM:", 1)[1].split()[0]) / 1024
print(json.dumps({"seconds": seconds, "peak MB": peak}))
"""

#: Another process trying to write while one side works: the longest stretch it was kept out, on stdout.
PROBE = f"""
import json, sqlite3, sys, threading, time
conn = sqlite3.connect(sys.argv[1], timeout={PROBE_WAIT}, isolation_level=None)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("ready", flush=True)
last = time.perf_counter()
longest = refused = 0
while not done.is_set():
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError:
        refused += 1
    else:
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    time.sleep({PROBE_PAUSE})
print(json.dumps({{"longest": max(longest, time.perf_counter() - last), "refused": refused}}))
"""


def empty_store(path: Path, *, raw: bool) -> None:
    """A new store; for the raw side without the store's triggers (its tables and indexes are the same)."""
    code = (
        "import sys; from runner.store import Store\n"
        "with Store(sys.argv[1]) as store:\n"
        "    for (name,) in store.database.conn.execute(\"SELECT name FROM sqlite_master WHERE type = 'trigger'\").fetchall():\n"
        "        store.database.conn.execute(f'DROP TRIGGER {name}') if sys.argv[2] == 'raw' else None\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), "raw" if raw else "store"], check=True, cwd=ROOT)


def side(code: str, source: Path, path: Path) -> dict[str, float]:
    """One side's seconds and peak MB, with the longest stretch another process's write was kept out."""
    empty_store(path, raw=code is RAW)
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    probe.stdout.readline()  # "ready": it has the store open
    done = subprocess.run([sys.executable, "-c", code, str(source), str(path)], check=True, capture_output=True,
                          text=True, cwd=ROOT)
    held, _ = probe.communicate("")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    figures: dict[str, float] = json.loads(done.stdout)
    figures["lock held, s"] = json.loads(held)["longest"]
    return figures


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """A side's fastest round, with its largest peak memory and longest lock of all rounds."""
    return {"seconds": min(r["seconds"] for r in rounds), "peak MB": max(r["peak MB"] for r in rounds),
            "lock held, s": max(r["lock held, s"] for r in rounds)}


def run(*, quick: bool, posts: Path | None = None) -> list[Row]:
    count = QUICK_COUNT if quick else COUNT
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as name:
        folder = Path(name)
        source = posts or make_posts(count, folder / f"posts-{count}.jsonl")
        count = sum(1 for _ in source.open("rb"))
        rounds: dict[str, list[dict[str, float]]] = {"raw": [], "runner": []}
        for _ in range(QUICK_ROUNDS if quick else ROUNDS):  # taking turns: a load that comes and goes weighs on both
            for name, code in (("raw", RAW), ("runner", RUNNER)):
                rounds[name].append(side(code, source, folder / f"{name}.db"))
                print(f"{name}: {rounds[name][-1]}", flush=True)
        raw, ours = best(rounds["raw"]), best(rounds["runner"])
    n = f"{count:,} posts"
    return [
        Row(f"prepare {n}, speed", count / ours["seconds"], "items/s", count / raw["seconds"],
            "raw sqlite3 executemany, one transaction", SPEED),
        Row(f"prepare {n}, seconds", ours["seconds"], "s", raw["seconds"], "raw sqlite3"),
        Row(f"prepare {n}, peak memory", ours["peak MB"], "MB", raw["peak MB"], "raw sqlite3", MEMORY),
        Row(f"prepare {n}, longest write lock held", ours["lock held, s"], "s", raw["lock held, s"], "raw sqlite3",
            LOCK),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_COUNT:,} posts, not {COUNT:,}")
    parser.add_argument("--posts", type=Path, help="a JSONL of posts made already (make_posts.py)")
    args = parser.parse_args()
    print(f"Machine: {machine()}")
    report("Large input", run(quick=args.quick, posts=args.posts))


if __name__ == "__main__":
    main()
