"""Running a job end to end: prepare its run in the store, build its provider, run the engine.

The CLI and the notebook API both go through here.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack

import httpx

from . import jobs
from .engine import Clock, Engine, Outcome, SystemClock
from .errors import JobError
from .jobs import Job
from .providers.openai_chat import OpenAIChat
from .store import Store


def prepare(store: Store, job: Job, *, now: float) -> int:
    """Create or continue the job's run and add its items; bad input leaves the store untouched."""
    return store.prepare_run(job, jobs.items(job), now=now)


def api_key(job: Job) -> str | None:
    """The key from the job's ``api_key_env`` variable; None when the job names none."""
    name = job.provider.api_key_env
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise JobError(f"environment variable {name} is not set ([provider] api_key_env of job {job.name!r})")
    return key


async def execute(
    store: Store,
    job: Job,
    *,
    client: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
    wait_for_person: bool = False,
) -> Outcome:
    """Run a prepared job's run until it is done or needs a person (or, waiting, until done)."""
    key = api_key(job)
    clock = clock or SystemClock()
    async with AsyncExitStack() as stack:
        if client is None:
            limits = httpx.Limits(max_connections=job.batch.concurrency)
            client = await stack.enter_async_context(httpx.AsyncClient(limits=limits))
        provider = OpenAIChat(
            job.provider, job.prompt, job.output_schema, client=client, api_key=key
        )
        engine = Engine(store, job, provider, clock=clock, wait_for_person=wait_for_person)
        return await engine.run()
