"""Running a job end to end: prepare its run in the store, build its provider, run the engine.

The CLI and the notebook API both go through here.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path

import httpx

from . import jobs, lease, preparing, python_stages, words
from .clock import Clock, SystemClock
from .engine import Engine, Outcome
from .errors import JobError
from .jobs import Job, Stage
from .location import files_beside
from .providers import Provider, TaskProvider
from .providers import lanes
from .providers.handler import PythonHandler, PythonTasks
from .providers.anthropic_batch import AnthropicBatch
from .providers.anthropic_messages import AnthropicMessages
from .providers.openai_batch import OpenAIBatch
from .providers.openai_chat import OpenAIChat
from .store.protocol import RunStore

def prepare(
    store: RunStore, job: Job, *, now: float | Callable[[], float], chunk_rows: int = preparing.CHUNK_ROWS
) -> int:
    """Create or continue the job's run and add its items, under the run's lease; ``now``: a time or a clock.

    Bad input leaves the store untouched; a live engine on the run refuses it.
    """
    clock = now if callable(now) else lambda: now
    token = secrets.token_hex(8)
    lease.acquire(store, job.name, token=token, now=clock())
    try:
        return preparing.prepare(store, job, lease_token=token, now=clock, chunk_rows=chunk_rows)
    finally:
        lease.release(store, job.name, token=token)


def defined_with(job: Job, provider: Provider | TaskProvider | None) -> Job:
    """The job as its run is saved when ``provider`` replaces the one it names.

    With a user's Python handler (or submit/poll pair) that is kind ``python``
    and the handler's name: the run can only go on from Python.
    """
    if not isinstance(provider, PythonHandler | PythonTasks):
        return job
    return job.with_provider(kind=jobs.PYTHON, handler=provider.name)


def refuse_without_python(job: Job, provider: Provider | TaskProvider | None, db: Path | str) -> None:
    """Refuse (a JobError) to go on with a run defined in Python without what the store does not keep: its handler
    (a ``python`` run given no ``provider``), its check (a job read from the store with ``python_check``, given no
    ``check``): it would run without it, saying nothing. The message says the call that goes on."""
    if provider is None and job.provider.kind == jobs.PYTHON or job.python_check and job.check is None:
        defined = [f"a Python handler ({job.provider.handler})"] if job.provider.kind == jobs.PYTHON else []
        defined += ["a Python check (check=)"] if job.python_check else []
        raise JobError(f"run {job.name!r} was defined with {' and '.join(defined)} and is continued from Python: "
                       f"{words.python_go_on(job, db)}")


def api_key(job: Job, stage: Stage | None = None) -> str | None:
    """The key from the job's (or ``stage``'s) ``api_key_env`` variable; None when it names none."""
    name = (stage or job).provider.api_key_env
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise JobError(f"environment variable {name} is not set ([provider] api_key_env of job {job.name!r})")
    return key


def _provider(stage: Stage, client: httpx.AsyncClient, key: str | None, spool: Path) -> Provider | TaskProvider:
    """The provider a stage names, over ``client``."""
    upstream = stage.provider, stage.prompt, stage.output_schema
    if stage.kind == "openai-batch":
        return OpenAIBatch(*upstream, client=client, api_key=key, spool=spool)
    if stage.kind == "anthropic-messages":
        return AnthropicMessages(*upstream, client=client, api_key=key)
    if stage.kind == "anthropic-batch":
        return AnthropicBatch(*upstream, client=client, api_key=key)
    return OpenAIChat(*upstream, client=client, api_key=key)


async def execute(
    store: RunStore,
    job: Job,
    *,
    client: httpx.AsyncClient | None = None,
    provider: Provider | TaskProvider | None = None,
    handlers: Mapping[str, Provider | TaskProvider] | None = None,
    clock: Clock | None = None,
    wait_for_person: bool = False,
    read_input: bool = True,
    started: Callable[[Engine], None] | None = None,
    reading: Callable[[int], None] | None = None,
    adding: Callable[[int, int], None] | None = None,
) -> Outcome:
    """Run a job until it is done or needs a person (or, waiting for one, until done).

    With ``read_input`` the job's input is read first (new items added,
    changed ones marked), under the engine's lease; without, the run goes on
    with the items the store has, unless a prepare of the run was cut short:
    then its input is read again. ``provider`` (say, a ``PythonHandler``)
    replaces the one the job names; a ``python`` run needs it, and a job read
    from the store with ``python_check`` its ``check`` (:func:`refuse_without_python`). ``handlers``
    give a pipeline's ``python`` stages their functions, by stage: given,
    every python stage needs one (:func:`runner.python_stages.checked`);
    without, the run stops where its items reach a python stage, saying so.
    ``started`` receives the engine, to stop it; while the input is read,
    ``reading`` how many records were checked so far, and ``adding`` how
    many items were added, of how many.
    """
    refuse_without_python(job, provider, store.path)
    handled = python_stages.checked(job, handlers or {})
    job = defined_with(job, provider)
    called = [stage for stage in job.stages if stage.kind in jobs.PROVIDER_KINDS] if provider is None else []
    keys = {stage.name: api_key(job, stage) for stage in called}
    clock = clock or SystemClock()
    async with AsyncExitStack() as stack:
        stage_providers: dict[str, Provider | TaskProvider] = {}
        clients = {} if client is None else {job.provider.base_url: client}
        for stage in called:
            base_url = stage.provider.base_url
            if base_url not in clients:
                clients[base_url] = await stack.enter_async_context(lanes.client(base_url, job.batch.concurrency))
            stage_providers[stage.name] = _provider(stage, clients[base_url], keys.get(stage.name),
                                                 files_beside(store.path))
        engine = Engine(store, job, provider, clock=clock, wait_for_person=wait_for_person,
                        stage_providers={**stage_providers, **handled})
        if started is not None:
            started(engine)
        if not (read_input or store.preparing(job.name)):
            return await engine.run()
        now = clock.now
        return await engine.run(
            lambda token: preparing.prepare(store, job, lease_token=token, now=now, reading=reading, adding=adding)
        )
