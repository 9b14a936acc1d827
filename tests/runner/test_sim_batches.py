"""The simulator's Files and Batches APIs, its clock and its batch faults, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from runner import protocol
from runner.sim import Clock, Simulator

DAY = 24 * 3600
ITEMS = [{"id": f"p{n}", "body": f"post number {n}"} for n in range(1, 6)]
# Four lines of the batch protocol: p1 and p2 together, then one item a line.
LINES = [ITEMS[:2], ITEMS[2:3], ITEMS[3:4], ITEMS[4:5]]
ALL_BILLED = {item["id"]: 1 for item in ITEMS}


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator(batch_seconds=60).start() as sim:
        yield sim


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url) as client:
        yield client


@pytest.fixture
def sdk(sim: Simulator) -> Iterator[openai.OpenAI]:
    """The official SDK, without its retries unless a test asks for them."""
    with openai.OpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0) as client:
        yield client


def line(custom_id: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    user = protocol.user_message(protocol.DEFAULT_USER, "Classify.", protocol.encode(items))
    body = {"model": "sim-model", "messages": [{"role": "user", "content": user}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def jsonl(lines: list[Any]) -> bytes:
    return "".join(json.dumps(value) + "\n" for value in lines).encode()


REQUESTS = jsonl([line(f"c{n}", items) for n, items in enumerate(LINES, 1)])


def upload(client: httpx.Client, content: bytes = REQUESTS) -> str:
    response = client.post("/files", data={"purpose": "batch"}, files={"file": ("requests.jsonl", content)})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def create(client: httpx.Client, file_id: str) -> httpx.Response:
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    return client.post("/batches", json={**body, "metadata": {"group": "2024-03"}})


def sdk_create(sdk: openai.OpenAI) -> Any:
    uploaded = sdk.files.create(file=("requests.jsonl", REQUESTS), purpose="batch")
    return sdk.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"group": "2024-03"},
    )


def eventually(count: Callable[[], int], wanted: int, seconds: float = 10) -> None:
    """Wait until ``count()`` reaches ``wanted``: a batch made after its client gave up."""
    deadline = time.monotonic() + seconds
    while count() < wanted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count() == wanted


def start(client: httpx.Client) -> dict[str, Any]:
    response = create(client, upload(client))
    assert response.status_code == 200, response.text
    return dict(response.json())


def retrieve(client: httpx.Client, batch_id: str) -> dict[str, Any]:
    response = client.get(f"/batches/{batch_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def ended(sim: Simulator, client: httpx.Client, batch_id: str) -> dict[str, Any]:
    sim.advance(DAY)
    return retrieve(client, batch_id)


def rows(client: httpx.Client, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    response = client.get(f"/files/{file_id}/content")
    assert response.headers["content-type"] == "application/jsonl"
    return [json.loads(text) for text in response.text.splitlines()]


def custom_ids(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(row["custom_id"] for row in rows)


def test_a_batch_completes_on_the_clock_and_answers_every_line_by_the_protocol(
    sim: Simulator, client: httpx.Client
) -> None:
    file_id = upload(client)
    uploaded = client.get(f"/files/{file_id}").json()
    assert (uploaded["bytes"], uploaded["purpose"], uploaded["status"]) == (len(REQUESTS), "batch", "processed")
    assert client.get(f"/files/{file_id}/content").content == REQUESTS
    created = create(client, file_id).json()
    assert (created["status"], created["request_counts"], created["output_file_id"]) == (
        "validating", {"total": 0, "completed": 0, "failed": 0}, None)
    assert created["metadata"] == {"group": "2024-03"}
    sim.advance(30)
    assert retrieve(client, created["id"])["status"] == "in_progress"
    assert sim.ledger.snapshot()["billed"] == {}
    sim.advance(30)
    batch = retrieve(client, created["id"])
    assert (batch["status"], batch["request_counts"]) == ("completed", {"total": 4, "completed": 4, "failed": 0})
    assert None not in [batch[f"{state}_at"] for state in ("in_progress", "finalizing", "completed")]
    assert (batch["failed_at"], batch["error_file_id"]) == (None, None)
    output = rows(client, batch["output_file_id"])
    assert [row["custom_id"] for row in output] != ["c1", "c2", "c3", "c4"]  # shuffled
    for row in output:
        assert (row["response"]["status_code"], row["error"]) == (200, None)
        content = row["response"]["body"]["choices"][0]["message"]["content"]
        answered = [result["id"] for result in json.loads(content)["results"]]
        assert answered == [item["id"] for item in LINES[int(row["custom_id"][1:]) - 1]]
    snapshot = sim.ledger.snapshot()
    assert snapshot["billed"] == ALL_BILLED
    assert (snapshot["batches_created"], snapshot["files_uploaded"], snapshot["requests"]) == (1, 1, 0)
    assert client.delete(f"/files/{file_id}").json()["deleted"] is True
    assert client.get(f"/files/{file_id}").status_code == 404


def test_the_list_pages_newest_first(client: httpx.Client) -> None:
    ids = [start(client)["id"] for _ in range(3)]
    first = client.get("/batches", params={"limit": 2}).json()
    assert ([b["id"] for b in first["data"]], first["has_more"]) == ([ids[2], ids[1]], True)
    assert (first["object"], first["first_id"], first["last_id"]) == ("list", ids[2], ids[1])
    rest = client.get("/batches", params={"limit": 2, "after": first["last_id"]}).json()
    assert ([b["id"] for b in rest["data"]], rest["has_more"]) == ([ids[0]], False)


def test_the_sdk_pages_through_the_list_newest_first(sdk: openai.OpenAI) -> None:
    ids = [sdk_create(sdk).id for _ in range(5)]
    first = sdk.batches.list(limit=2)
    assert ([batch.id for batch in first.data], first.has_more) == (ids[:2:-1], True)
    assert [batch.id for batch in sdk.batches.list(limit=2)] == ids[::-1]  # every page, in turn


def test_a_cancelled_batch_is_listed_cancelling_then_cancelled() -> None:
    # A clock that stands still until moved: the cancel is seen as it happens.
    with Simulator(clock=Clock(lambda: 1_700_000_000.0), batch_seconds=60).start() as sim:
        with httpx.Client(base_url=sim.base_url) as client:
            ids = [start(client)["id"] for _ in range(2)]
            assert client.post(f"/batches/{ids[0]}/cancel").json()["status"] == "cancelling"
            statuses = [{b["id"]: b["status"] for b in client.get("/batches").json()["data"]}]
            sim.advance(10)
            statuses.append({b["id"]: b["status"] for b in client.get("/batches").json()["data"]})
    assert statuses == [{ids[1]: "validating", ids[0]: "cancelling"}, {ids[1]: "in_progress", ids[0]: "cancelled"}]


def test_a_cancelled_batch_bills_the_lines_it_ran_before_the_cancel_and_the_ledger_records_the_cancel(
    sim: Simulator, client: httpx.Client
) -> None:
    batch_id = start(client)["id"]
    sim.advance(30)  # half of its time in progress (6 s to 54 s): two of its four lines ran
    assert client.post(f"/batches/{batch_id}/cancel").json()["status"] == "cancelling"
    batch = ended(sim, client, batch_id)
    assert (batch["status"], batch["completed_at"]) == ("cancelled", None)
    assert sorted(row["custom_id"] for row in rows(client, batch["output_file_id"])) == ["c1", "c2"]
    assert {row["error"]["code"] for row in rows(client, batch["error_file_id"])} == {"batch_cancelled"}
    assert client.post(f"/batches/{batch_id}/cancel").status_code == 409
    ledger = sim.ledger.snapshot()
    assert ledger["billed"] == {"p1": 1, "p2": 1, "p3": 1}
    assert ledger["cancels"] == [{"batch": batch_id, "ran": ["p1", "p2", "p3"], "not_run": ["p4", "p5"]}]


def test_a_batch_cancelled_while_validating_bills_nothing(sim: Simulator, client: httpx.Client) -> None:
    batch_id = start(client)["id"]
    assert client.post(f"/batches/{batch_id}/cancel").json()["status"] == "cancelling"
    batch = ended(sim, client, batch_id)
    assert (batch["status"], batch["output_file_id"]) == ("cancelled", None)
    ledger = sim.ledger.snapshot()
    assert (ledger["billed"], ledger["cancels"]) == ({}, [{"batch": batch_id, "ran": [], "not_run": list(ALL_BILLED)}])


@pytest.mark.parametrize(
    "bad, code",
    [
        ("{not json", "invalid_json_line"),
        ({**line("c9", ITEMS[:1]), "url": "/v1/embeddings"}, "url_mismatch"),
        (line("c1", ITEMS[:1]), "duplicate_custom_id"),
        ({**line("c9", ITEMS[:1]), "body": {"messages": []}}, "missing_required_parameter"),
    ],
)
def test_an_invalid_line_fails_the_batch_at_validation(
    sim: Simulator, client: httpx.Client, bad: Any, code: str
) -> None:
    content = REQUESTS + (bad.encode() + b"\n" if isinstance(bad, str) else jsonl([bad]))
    batch = ended(sim, client, create(client, upload(client, content)).json()["id"])
    assert (batch["status"], batch["output_file_id"], batch["error_file_id"]) == ("failed", None, None)
    assert [(e["code"], e["line"]) for e in batch["errors"]["data"]] == [(code, 5)]
    assert sim.ledger.snapshot()["billed"] == {}


def test_a_batch_of_an_unknown_file_or_endpoint_is_refused(client: httpx.Client) -> None:
    assert create(client, "file-404").status_code == 404
    body = {"input_file_id": upload(client), "endpoint": "/v1/embeddings", "completion_window": "24h"}
    assert client.post("/batches", json=body).status_code == 400


def test_a_lost_upload_stored_the_file(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "upload_lost"}]})
    with pytest.raises(httpx.RemoteProtocolError):
        upload(client)
    assert client.get("/files/file-1").json()["bytes"] == len(REQUESTS)
    assert sim.ledger.snapshot()["files_uploaded"] == 1


@pytest.mark.parametrize("fault", ["create_lost", "create_500"])
def test_a_create_without_its_answer_still_runs_and_bills(sim: Simulator, client: httpx.Client, fault: str) -> None:
    file_id = upload(client)
    sim.set_faults({"rules": [{"fault": fault}]})
    if fault == "create_lost":
        with pytest.raises(httpx.RemoteProtocolError):
            create(client, file_id)
    else:
        assert create(client, file_id).json()["error"]["type"] == "server_error"
    [listed] = client.get("/batches").json()["data"]
    assert ended(sim, client, listed["id"])["status"] == "completed"
    assert sim.ledger.snapshot()["billed"] == ALL_BILLED


def test_a_slow_create_makes_its_batch_after_the_client_gave_up(sim: Simulator, client: httpx.Client) -> None:
    file_id = upload(client)
    sim.set_faults({"rules": [{"fault": "create_slow", "seconds": 1}]})
    with httpx.Client(base_url=sim.base_url, timeout=0.2) as impatient, pytest.raises(httpx.ReadTimeout):
        create(impatient, file_id)
    assert client.get("/batches").json()["data"] == []
    eventually(lambda: len(client.get("/batches").json()["data"]), 1)
    [landed] = client.get("/batches").json()["data"]
    assert (landed["input_file_id"], landed["metadata"]) == (file_id, {"group": "2024-03"})
    assert ended(sim, client, landed["id"])["status"] == "completed"
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["faults"]) == (ALL_BILLED, {"create_slow": 1})


def test_the_sdk_retrying_a_slow_create_on_its_own_pays_three_times(sim: Simulator) -> None:
    sim.set_faults({"rules": [{"fault": "create_slow", "seconds": 0.5}]})
    with openai.OpenAI(api_key="sk-test", base_url=sim.base_url, timeout=0.2) as sdk:  # its default 2 retries
        with pytest.raises(openai.APITimeoutError):
            sdk_create(sdk)
        eventually(lambda: len(sdk.batches.list().data), 3)
        assert {batch.metadata["group"] for batch in sdk.batches.list()} == {"2024-03"}
    sim.advance(DAY)
    assert sim.ledger.snapshot()["billed"] == {key: 3 for key in ALL_BILLED}


def test_create_twice_runs_two_batches_that_both_bill(sim: Simulator, sdk: openai.OpenAI) -> None:
    sim.set_faults({"rules": [{"fault": "create_twice", "times": 1}]})
    answered = sdk_create(sdk)
    listed = sdk.batches.list().data
    assert [batch.id for batch in listed][0] == answered.id  # the second, newest first
    assert [(batch.input_file_id, batch.metadata) for batch in listed] == [
        (answered.input_file_id, {"group": "2024-03"})] * 2
    sim.advance(DAY)
    assert [sdk.batches.retrieve(batch.id).status for batch in listed] == ["completed"] * 2
    snapshot = sim.ledger.snapshot()
    assert (snapshot["billed"], snapshot["batches_created"]) == ({key: 2 for key in ALL_BILLED}, 2)


def test_cancelling_the_duplicate_of_create_twice_pays_twice_only_for_the_lines_it_ran(
    sim: Simulator, sdk: openai.OpenAI
) -> None:
    sim.set_faults({"rules": [{"fault": "create_twice"}]})
    answered = sdk_create(sdk)
    [duplicate] = [batch for batch in sdk.batches.list() if batch.id != answered.id]
    sim.advance(30)
    assert sdk.batches.cancel(duplicate.id).status == "cancelling"
    assert sdk.batches.retrieve(duplicate.id).status == "cancelled"
    assert {batch.id: batch.status for batch in sdk.batches.list()} == {
        answered.id: "in_progress", duplicate.id: "cancelled"}
    sim.advance(DAY)
    assert sdk.batches.retrieve(answered.id).status == "completed"
    assert sim.ledger.snapshot()["billed"] == {**ALL_BILLED, "p1": 2, "p2": 2, "p3": 2}


def test_an_unknown_batch_is_404_unlisted_and_never_billed(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "batch_unknown", "keys": ["p3"]}]})
    batch_id = start(client)["id"]
    sim.advance(DAY)
    response = client.get(f"/batches/{batch_id}")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert client.get("/batches").json()["data"] == []
    assert sim.ledger.snapshot()["billed"] == {}


def test_an_expired_batch_bills_its_first_half_only(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "expire"}]})
    batch_id = start(client)["id"]
    sim.advance(DAY - 1)
    assert retrieve(client, batch_id)["status"] == "in_progress"
    batch = ended(sim, client, batch_id)
    assert (batch["status"], batch["request_counts"]) == ("expired", {"total": 4, "completed": 2, "failed": 2})
    assert custom_ids(rows(client, batch["output_file_id"])) == ["c1", "c2"]
    errors = rows(client, batch["error_file_id"])
    assert [(row["custom_id"], row["response"], row["error"]["code"]) for row in sorted(errors, key=str)] == [
        ("c3", None, "batch_expired"), ("c4", None, "batch_expired")]
    assert sim.ledger.snapshot()["billed"] == {"p1": 1, "p2": 1, "p3": 1}


@pytest.mark.parametrize("rule, kept", [({}, ["c1", "c2"]), ({"keys": ["p2"]}, ["c2", "c3", "c4"])])
def test_missing_rows_are_in_neither_file_and_unbilled(
    sim: Simulator, client: httpx.Client, rule: dict[str, Any], kept: list[str]
) -> None:
    sim.set_faults({"rules": [{"fault": "missing_rows", **rule}]})
    batch = ended(sim, client, start(client)["id"])
    assert batch["status"] == "completed"
    assert (custom_ids(rows(client, batch["output_file_id"])), batch["error_file_id"]) == (kept, None)
    billed = [item["id"] for n, items in enumerate(LINES, 1) if f"c{n}" in kept for item in items]
    assert sim.ledger.snapshot()["billed"] == dict.fromkeys(billed, 1)


def test_batch_failed_fails_validation_and_bills_nothing(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "batch_failed"}]})
    batch = ended(sim, client, start(client)["id"])
    assert (batch["status"], batch["in_progress_at"], batch["output_file_id"]) == ("failed", None, None)
    assert batch["errors"]["data"][0]["code"] == "token_limit_exceeded"
    assert sim.ledger.snapshot()["billed"] == {}


def test_chat_faults_and_batch_faults_keep_to_their_routes(sim: Simulator, client: httpx.Client) -> None:
    sim.set_faults({"rules": [{"fault": "create_500", "times": 1}, {"fault": "http_500"}]})
    chat = line("c1", ITEMS[:1])["body"]
    assert client.post("/chat/completions", json=chat).status_code == 500
    file_id = upload(client)
    assert [create(client, file_id).status_code for _ in range(2)] == [500, 200]
    assert client.post("/chat/completions", json=chat).status_code == 500
    assert sim.ledger.snapshot()["faults"] == {"http_500": 2, "create_500": 1}


def test_sim_clock_moves_forward_only(sim: Simulator, client: httpx.Client) -> None:
    clock_url = f"http://127.0.0.1:{sim.port}/_sim/clock"
    before = client.get(clock_url).json()["now"]
    moved = client.post(clock_url, json={"advance": DAY}).json()["now"]
    assert before + DAY <= moved <= sim.clock.now() < before + DAY + 60
    assert client.post(clock_url, json={"advance": -1}).status_code == 400
    assert client.get(clock_url).json()["now"] < moved + 60
