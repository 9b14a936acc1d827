"""A person's cancel while an engine runs: batches in flight finish, nothing more is sent, the run ends.

The cancel is given from the simulator's request hook, in its own thread and
on its own connection to the store, as another terminal would: while the
first call (or the Batch API batch) is in flight, before its answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from pipelines import calls_by_stage, pipeline
from scenes import location_of
from support import (
    KillAtFirstCall, StepClock, add_all, batch_job, commands_given, make_job, posts, runner_cli, write_jsonl,
)

from runner import control, runs
from runner.model import FailureKind, ItemState
from runner.sim import Simulator
from runner.sim.clock import Clock
from runner.store import Store, views


def cancel_on_first(
    db: Path, clock: StepClock, path: str, *, keys: Sequence[str] = (), run: str = "test"
) -> Callable[[str, str], None]:
    """A request hook that cancels ``run`` (or its ``keys``) once, when the first request to ``path`` arrives.

    The cancel is dated at the engine's last heartbeat: a step clock moves on
    between two turns of the engine's loop, which beats every 2 s of a real
    clock, without a beat.
    """
    done: list[control.Cancelled] = []

    def hook(method: str, called: str) -> None:
        if called == path and not done:
            with Store(db) as other:
                workers = other.workers(run)
                now = workers[0].heartbeat_at if workers else clock.now()
                done.append(control.cancel(other, run, now=now, keys=keys))

    return hook


def by_state(store: Store) -> dict[str, str]:
    return {row["key"]: row["state"] for row in views.items(store, store.run_id("test"))}


def kinds(store: Store) -> dict[str, str]:
    return {f["key"]: f["kind"] for f in views.failures(store, "test")}


async def test_cancel_with_a_chat_batch_in_flight_lets_it_finish_and_sends_nothing_else(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    hook = cancel_on_first(location_of(store), clock, "/v1/chat/completions")
    with Simulator(on_call=hook).start() as sim:
        sim.set_faults({"rules": [{"fault": "invalid_items", "keys": ["p001"]}]})
        job = make_job(tmp_path, sim.base_url, posts(6), max_items=2, concurrency=1, schema={"required": ["label"]})
        outcome = await runs.execute(store, job, clock=clock)
        ledger = sim.ledger.snapshot()
    assert ledger["requests"] == 1 and ledger["billed"] == {"p000": 1, "p001": 1}
    assert by_state(store) == {"p000": "completed", **{f"p00{i}": "failed" for i in range(1, 6)}}
    assert set(kinds(store).values()) == {FailureKind.CANCELLED}
    assert outcome.exit_code == 3 and outcome.status["cancelled"] == 5
    assert views.standing(store, "test", now=clock.now()).state.value == "cancelled by a person"
    assert "its batch finished" in views.failures(store, "test")[0]["message"]


async def test_cancel_of_some_keys_fails_them_and_the_run_goes_on_with_the_others(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    hook = cancel_on_first(location_of(store), clock, "/v1/chat/completions", keys=["p003", "p004"])
    with Simulator(on_call=hook).start() as sim:
        job = make_job(tmp_path, sim.base_url, posts(6), max_items=2, concurrency=1)
        outcome = await runs.execute(store, job, clock=clock)
        billed = sim.ledger.snapshot()["billed"]
    assert kinds(store) == {"p003": FailureKind.CANCELLED, "p004": FailureKind.CANCELLED}
    assert sorted(billed) == ["p000", "p001", "p002", "p005"]
    assert outcome.status["counts"][ItemState.COMPLETED] == 4 and outcome.exit_code == 3


async def test_cancel_with_an_upstream_batch_in_flight_cancels_it_upstream_and_counts_the_lines_it_ran_billed(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    began = clock.now()
    cancel = cancel_on_first(location_of(store), clock, "/v1/batches/batch_1")

    def half_way(method: str, path: str) -> None:  # a poll half way through the batch's time brings the cancel
        if clock.now() - began >= 50:
            cancel(method, path)

    # The simulator's clock is the engine's: the batch runs 100 s, in progress from 10 s to 90 s.
    with Simulator(batch_seconds=100.0, clock=Clock(clock.now), on_call=half_way).start() as sim:
        job = batch_job(tmp_path, sim, posts(8), max_items=8, concurrency=1)
        outcome = await runs.execute(store, job, clock=clock)
        ledger = sim.ledger.snapshot()
    (cancelled,) = ledger["cancels"]
    ran, not_run = cancelled["ran"], cancelled["not_run"]
    assert cancelled["batch"] == "batch_1" and ran and not_run and ledger["batches_created"] == 1
    assert sorted(ledger["billed"]) == sorted(ran)
    states, failed = by_state(store), kinds(store)
    assert {key: states[key] for key in ran} == {key: "completed" for key in ran}
    assert {key: failed[key] for key in not_run} == {key: FailureKind.CANCELLED for key in not_run}
    paid = {row["key"]: row["paid_calls"] for row in views.items(store, store.run_id("test"))}
    assert {key for key, calls in paid.items() if calls} == set(ran)
    assert "cancelled_upstream" in [line["kind"] for line in views.item_history(store, 1)]
    assert outcome.exit_code == 3


async def test_cancel_names_the_keys_it_does_not_know_exits_1_and_changes_nothing(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3))
    add_all(store, job, now=clock.now())
    cancelled = runner_cli("cancel", "test", "p001", "p404", cwd=tmp_path)
    assert (cancelled.returncode, cancelled.stdout) == (1, "")
    assert cancelled.stderr == "error: run 'test' has no item 'p404': nothing was changed\n"
    assert set(by_state(store).values()) == {"pending"} and commands_given(store) == []


async def test_cancel_from_the_shell_says_what_it_did_and_how_to_send_the_items_again(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    job = make_job(tmp_path, "http://127.0.0.1:9/v1", posts(3))
    add_all(store, job, now=clock.now())
    cancelled = runner_cli("cancel", "test", cwd=tmp_path)
    again = runner_cli("cancel", "test", cwd=tmp_path)
    retried = runner_cli("retry", "test", cwd=tmp_path)
    shown = runner_cli("status", "test", cwd=tmp_path)
    assert cancelled.stdout == ("3 items of run 'test' cancelled (failed, kind cancelled)\n"
                                "to send them again:\nrunner retry test --kind cancelled\n")
    assert again.stdout == "nothing to cancel: run 'test' has no unfinished item\n"
    assert retried.stdout == ("nothing to retry: run 'test' has no failed item\n3 items cancelled by a person are "
                              "retried only when named:\nrunner retry test --kind cancelled\n")
    assert "cancelled by a person (3 items cancelled)" in shown.stdout
    assert runner_cli("retry", "test", "--kind", "cancelled", cwd=tmp_path).returncode == 0
    assert set(by_state(store).values()) == {"pending"}


async def test_cancel_of_an_item_whose_batch_completes_its_stage_keeps_that_result_and_fails_it_at_the_next(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    hook = cancel_on_first(location_of(store), clock, "/v1/chat/completions", run="triage")
    with Simulator(on_call=hook).start() as sim:
        job = pipeline(tmp_path, sim.base_url, count=4, stages="classify summarize", max_items=4)
        outcome = await runs.execute(store, job, clock=clock)
        sent = calls_by_stage(sim.ledger.snapshot()["calls"])
    rows = views.export_page(store, store.run_id("triage"), state="all", after=0, limit=10, staged=True)
    assert sent == {"classify": ["p000", "p001", "p002", "p003"]}
    assert {row["key"]: (row["state"], row["stage"], row["kind"]) for row in rows} == {
        key: ("failed", "summarize", FailureKind.CANCELLED) for key in ("p000", "p001", "p002", "p003")}
    assert all("label" in json.loads(row["stages"])["classify"] for row in rows)
    assert outcome.exit_code == 3


def test_a_cancel_with_no_live_engine_leaves_its_upstream_task_to_the_next_run_which_cancels_it_and_pays_nothing(
    tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "posts.jsonl", posts(4))
    crash = KillAtFirstCall()

    def kill_at_first_poll(method: str, path: str) -> None:  # the task's id is saved before it is polled
        if path == "/v1/batches/batch_1":
            crash([path])

    with Simulator(batch_seconds=100.0, on_call=kill_at_first_poll).start() as sim:
        (tmp_path / "job.toml").write_text(f'name = "test"\ninput = "posts.jsonl"\n[batch]\nconcurrency = 1\n'
                                           f'[provider]\nkind = "openai-batch"\nbase_url = "{sim.base_url}"\n')
        crash.run("run", "job.toml", cwd=tmp_path)
        cancelled = runner_cli("cancel", "test", cwd=tmp_path)
        with Store(tmp_path / "runs.db") as store:
            left = by_state(store)
        retried = runner_cli("retry", "test", "--kind", "cancelled", cwd=tmp_path)
        again = runner_cli("run", "test", cwd=tmp_path)
        ledger = sim.ledger.snapshot()
    assert left == {f"p00{i}": "running" for i in range(4)}  # the task may still run: not failed as if it did not
    assert cancelled.stdout.splitlines()[:2] == [
        "4 items in flight when their engine stopped: settled when the run next runs (an upstream task of theirs is "
        "cancelled then, the lines it ran billed; a saved answer is validated); to go on:", "runner run test"]
    assert retried.stdout.startswith("nothing to retry")  # nothing sent twice
    assert again.returncode == 3, again.stderr
    assert ledger["batches_created"] == 1 and [c["batch"] for c in ledger["cancels"]] == ["batch_1"]
    with Store(tmp_path / "runs.db") as store:
        assert set(kinds(store).values()) == {FailureKind.CANCELLED} and len(kinds(store)) == 4


async def test_a_batch_all_of_whose_items_are_cancelled_before_its_task_is_created_is_never_created(
    tmp_path: Path, store: Store, clock: StepClock
) -> None:
    cancel = cancel_on_first(location_of(store), clock, "/v1/files")  # while its input is uploaded
    with Simulator(on_call=cancel).start() as sim:
        job = batch_job(tmp_path, sim, posts(4), max_items=4, concurrency=1)
        outcome = await runs.execute(store, job, clock=clock)
        ledger = sim.ledger.snapshot()
    assert (ledger["batches_created"], ledger["cancels"], ledger["billed"]) == (0, [], {})
    assert kinds(store) == {f"p00{i}": FailureKind.CANCELLED for i in range(4)} and outcome.exit_code == 3
    assert "nothing was sent" in views.failures(store, "test")[0]["message"]
