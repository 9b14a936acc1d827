"""The notebook-first Python API: define a run, await it or start it in the background, look at it.

A thin layer over the core (:mod:`runner.runs`, :mod:`runner.store.views`,
:mod:`runner.control`, :mod:`runner.recovery`); it holds no rule of its own::

    from runner.notebook import Run

    run = Run("posts", items=records, db="runs.db", group="month",
              base_url="http://127.0.0.1:8765/v1", prompt="Classify each post.")
    outcome = await run.go()          # in the kernel's running loop
    background = run.start()          # or in the background: returns at once
    run.panel()                       # the live ipywidgets panel (imported only here)
    run.failures(), run.results(), run.events("p001")
    run.cancel()                      # unfinished items fail as cancelled; on_cancel=f compensates each
    run.budget(max_cost=10)           # a new budget (Run(..., budget={"max_cost": 5})); a run stopped at it goes on
    run.decisions(), run.decide("p001", approve=True, data={...})   # a decide stage's items
    print(run.plan_retry(kind="item_invalid")); run.retry(kind="item_invalid", yes=True)   # the plan, then act
    run.add(more_records, at="in 1h"), run.archive(older="30d"), run.restore()            # items in and out
    Run.from_job_file("triage.toml", handlers={"extract": extract})   # a pipeline's python stage's function

Items come from a list of dicts, a pandas DataFrame, or a file (JSONL, CSV,
SQLite with ``table=``). The core streams items from a file, so records given in Python are written as
JSONL beside the store (``<db>.inputs/<run>.jsonl``, :mod:`runner.records`) and the job points at it. The
upstream is a built-in provider kind (``"openai-chat"``, ``"openai-batch"``), your own async handler, or your
own ``(submit, poll)`` / ``(submit, poll, find)`` pair (:mod:`runner.providers.handler`).

Running the cell again reattaches: a second ``start()`` of a run whose engine is still live in this
process returns the same handle (:class:`~runner.background.Background`), and ``go()`` awaits it, so one
run never gets two engines. Everything else reads the store, so it works as well on a run that another kernel
or a CLI process executes. This module imports no UI library; :meth:`Run.panel` imports :mod:`runner.widgets`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from . import compensation, control, export, jobs, location, python_stages, records, runs
from .background import Background, launch, live
from .clock import Clock, SystemClock
from .compensation import Compensated, OnCancel
from .engine import Outcome
from .errors import JobError, MissingPackage, RunError
from .jobs import Job
from .notebook_controls import Controls
from .notebook_decisions import Decisions
from .notebook_items import Items
from .panel_html import where
from .providers import Provider, TaskProvider
from .providers.handler import Find, Handler, Poll, PythonHandler, PythonTasks, Submit
from .store import Store, views

if TYPE_CHECKING:
    from .widgets import RunPanel

#: A built-in provider kind, your async handler, your submit/poll pair, or a provider object.
ProviderSpec = str | Handler | tuple[Submit, Poll] | tuple[Submit, Poll, Find] | Provider | TaskProvider

class Run(Controls, Decisions, Items):
    """A job and its run in a store, defined from Python.

    ``items``: a list (or iterable) of dicts, a pandas DataFrame, or a path to
    a JSONL, CSV or SQLite file (``table=`` for SQLite). ``provider``: a
    built-in kind, an async handler ``(items) -> results``, or a ``(submit,
    poll[, find])`` pair; ``model`` and ``base_url``, when not given, are the
    kind's own (OpenAI's, or for ``"anthropic-messages"`` and ``"anthropic-batch"``
    Anthropic's); ``price`` is ``[provider] price``. ``prompt`` is the instructions;
    ``fields`` picks the record fields sent (default all). ``schema`` is the
    JSON Schema each result must pass; ``check`` an extra Python check of one
    result (a message, or None when it is fine). ``batch``, ``retry`` and ``budget`` take the keys of
    the job file's ``[batch]``, ``[retry]`` and ``[budget]`` (``retry={"transport": {"max_attempts": 5}}``
    for a kind's own limits; ``budget={"max_cost": 5.0}``). ``schedule`` names the field
    holding when each item may be sent (ISO 8601 with an offset, or epoch
    seconds: ``[schedule] field``); ``priority`` the field holding its priority
    (higher first: ``[batch] priority_field``). ``queue`` names the shared queue whose limit, rate limit and
    breaker the run shares with every run naming it, ``queue_priority`` its rank there (``[provider] queue``);
    ``reuse=True`` takes the results of the same work saved in the store, with no call (``[cache] reuse``).
    The job is checked as a job file is: unknown keys and bad limits raise :class:`~runner.errors.JobError`.

    ``on_cancel``: a function called once per item a person cancels, with
    the item's state, after the cancel is committed (Queuety's compensation,
    :mod:`runner.compensation`). It belongs to the run's definition, not to
    :meth:`cancel`: a cancel may come from the TUI or the shell, and items in
    flight are cancelled when their batch ends, so this run calls it in :meth:`cancel` and again when its
    engine here ends, for every cancelled item not yet compensated. Once is at most once: the items are claimed
    in the store before the calls, so no two processes call it for one item; a process that stops between the
    claim and the calls leaves the rest of its items uncalled (its ``on_cancel`` command in the log has no end).
    """

    def __init__(
        self,
        name: str,
        items: object,
        *,
        db: str | Path = "runs.db",
        key: str = "id",
        group: str | None = None,
        table: str | None = None,
        provider: ProviderSpec = "openai-chat",
        model: str | None = None,
        base_url: str | None = None,
        price: Mapping[str, float] | None = None,
        api_key_env: str = "",
        prompt: str | None = None,
        fields: Sequence[str] = (),
        system: str | None = None,
        template: str | None = None,
        schema: Mapping[str, Any] | str | None = None,
        check: Callable[[dict[str, Any]], str | None] | None = None,
        batch: Mapping[str, Any] | None = None,
        retry: Mapping[str, Any] | None = None,
        budget: Mapping[str, Any] | None = None,
        schedule: str | None = None,
        priority: str | None = None,
        queue: str = "", queue_priority: int = 0,
        reuse: bool = False,
        version: str = "1",
        clock: Clock | None = None,
        on_cancel: OnCancel | None = None,
    ) -> None:
        self.db = location.resolved(db)
        self.on_cancel = on_cancel
        kind = provider if isinstance(provider, str) else "openai-chat"
        self.provider: Provider | TaskProvider | None = None if isinstance(provider, str) else _provider(provider)
        self.handlers: dict[str, Provider | TaskProvider] = {}
        prompt_section: dict[str, Any] = {"fields": list(fields)}
        for field, value in (("instructions", prompt), ("system", system), ("template", template)):
            if value is not None:
                prompt_section[field] = value
        data: dict[str, Any] = {
            "name": name, "input": records.job_input(items, name, self.db, key, table),
            "key": key, "version": version,
            "batch": {**(batch or {}), **({"priority_field": priority} if priority is not None else {})},
            "retry": dict(retry or {}), "budget": dict(budget or {}),
            "schedule": {"field": schedule} if schedule is not None else {}, "cache": {"reuse": reuse},
            # A model or base URL not given is the kind's own default (OpenAI's, or Anthropic's).
            "provider": {"kind": kind, "api_key_env": api_key_env, "queue": queue, "queue_priority": queue_priority,
                         **{k: v for k, v in (("model", model), ("base_url", base_url), ("price", price)) if v is not None}},
            "prompt": prompt_section,
            "output": {"schema": dict(schema) if isinstance(schema, Mapping) else schema} if schema else {},
            **({"group": group} if group is not None else {}),
        }
        job = jobs.from_dict(data, base=Path.cwd(), where=f"Run({name!r})")
        self.job = runs.defined_with(dataclasses.replace(job, check=check), self.provider)
        self.clock = clock or SystemClock()
        self._read_input = True

    @classmethod
    def from_job(
        cls, job: Job, *, db: str | Path = "runs.db", provider: ProviderSpec | None = None,
        handlers: Mapping[str, ProviderSpec] | None = None, clock: Clock | None = None, read_input: bool = True,
        on_cancel: OnCancel | None = None,
    ) -> Run:
        """A run of a ready :class:`~runner.jobs.Job`; ``provider`` replaces the one it names.

        ``handlers`` give a pipeline's ``python`` stages their functions, by stage name (each an async handler,
        a submit/poll pair or a provider): given, every python stage needs one. For a pipeline, one handler
        given as ``provider`` is its one python stage's; a pipeline of several python stages takes ``handlers``.
        A handler that names no python stage, or a python stage left without one, raises a JobError here.
        """
        run = cls.__new__(cls)
        run.db = location.resolved(db)
        run.on_cancel = on_cancel
        run.provider = None if provider is None or isinstance(provider, str) else _provider(provider)
        given = {name: _provider(spec) for name, spec in (handlers or {}).items()}
        # one handler for a pipeline: its one python stage's (unless it was the whole job's when the run was made)
        if job.staged and run.provider is not None and job.provider.kind != jobs.PYTHON:
            if given:
                raise JobError("give a pipeline's python stages their functions by handlers= alone, not provider=")
            given, run.provider = python_stages.single(job, run.provider), None
        run.handlers = python_stages.checked(job, given)
        run.job = runs.defined_with(job, run.provider)
        if isinstance(provider, str):
            run.job = job.with_provider(kind=provider, handler="")
        run.clock = clock or SystemClock()
        run._read_input = read_input
        return run

    @classmethod
    def from_job_file(
        cls, path: str | Path, *, db: str | Path = "runs.db", name: str | None = None,
        base_url: str | None = None, provider: ProviderSpec | None = None,
        handlers: Mapping[str, ProviderSpec] | None = None, clock: Clock | None = None,
        on_cancel: OnCancel | None = None,
    ) -> Run:
        """A run of a TOML job file; ``name`` and ``base_url`` replace the file's (say, a simulator's);
        ``handlers``: its python stages' functions (:meth:`from_job`)."""
        job = jobs.load(path)
        if base_url is not None:
            job = job.with_provider(base_url=base_url)
        if name is not None:
            job = dataclasses.replace(job, name=name)
        return cls.from_job(job, db=db, provider=provider, handlers=handlers, clock=clock, on_cancel=on_cancel)

    @classmethod
    def attach(
        cls, name: str, *, db: str | Path = "runs.db", provider: ProviderSpec | None = None,
        handlers: Mapping[str, ProviderSpec] | None = None, check: Callable[[dict[str, Any]], str | None] | None = None,
        clock: Clock | None = None, on_cancel: OnCancel | None = None,
    ) -> Run:
        """The run ``name`` as the store has it (the CLI's, another kernel's...): its saved job; ``handlers``: its
        python stages' functions (:meth:`from_job`); ``check``: its Python check, not kept (without, ``go`` refuses)."""
        with Store(db, create=False) as store:
            job = dataclasses.replace(store.job(name), check=check)
        return cls.from_job(job, db=db, provider=provider, handlers=handlers, clock=clock, read_input=False,
                            on_cancel=on_cancel)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def background(self) -> Background | None:
        """The live background engine of this run in this process, if any."""
        return live(self.db, self.name)

    def __repr__(self) -> str:
        return f"<Run {self.name!r} in {where(self.db)}>"

    # Running ----------------------------------------------------------------

    async def go(self, *, wait_for_person: bool = False) -> Outcome:
        """Run until done or a person is needed, in the running loop; await it.

        A background engine of this run in this process is awaited instead of
        starting a second one. With ``wait_for_person`` the engine stays
        while the run is paused, its breaker open or items held for
        confirmation, obeying resume, step and confirm.
        """
        live = self.background
        if live is not None:
            return await live
        return await self._execute(wait_for_person=wait_for_person, read_input=self._read_input)

    def start(self, *, wait_for_person: bool = True) -> Background:
        """Run in the background and return at once: a task on the running loop (a kernel's), else a thread.

        The input is read first, here, so bad input, a run held by another engine or a run defined in Python
        given without its handler or check raises in the cell. A second start while this run's engine is live
        returns the same handle. By default the engine stays while the run is paused, its breaker open or items
        held for confirmation, so that the panel's Resume, Step and Confirm (or a CLI's) move it on.
        """
        handle = self.background
        if handle is not None:
            return handle
        runs.refuse_without_python(self.job, self.provider, self.db)  # here, in the cell: not in the background
        if self._read_input:
            with self._store() as store:
                runs.prepare(store, self.job, now=self.clock.now)
        return launch(
            self.db, self.name,
            lambda handle: self._execute(wait_for_person=wait_for_person, read_input=False, handle=handle),
        )

    async def _execute(self, *, wait_for_person: bool, read_input: bool, handle: Background | None = None) -> Outcome:
        with self._store() as store:
            outcome = await runs.execute(
                store, self.job, provider=self.provider, handlers=self.handlers, clock=self.clock,
                wait_for_person=wait_for_person, read_input=read_input,
                started=handle.attach if handle is not None else None,
            )
            self._compensate(store)  # items whose batch was in flight at a cancel, and cancels from elsewhere
        return outcome

    # Where it stands -------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The status contract (``runner status NAME --json``), read from the store."""
        with self._store(read_only=True) as store:
            return views.status(store, self.name, now=self.clock.now())

    @overload
    def results(self, *, state: str = ..., archived: bool = ..., frame: Literal[False] = False
                ) -> list[dict[str, Any]]: ...
    @overload
    def results(self, *, state: str = ..., archived: bool = ..., frame: Literal[True]) -> Any: ...

    def results(self, *, state: str = "completed", archived: bool = False, frame: bool = False) -> Any:
        """Items in ``state`` (completed, failed or all) with the columns of ``runner export --format csv``.

        ``key``, ``group``, ``state``, the result's fields, the input sent
        (``input.<field>``), then ``kind``, ``message``, ``attempts``,
        ``paid_calls`` and ``maybe_paid``; in input order (a DataFrame with ``frame``); ``archived``: the
        items of the run's archive instead (:meth:`archive`, ``runner export --archived``).
        """
        with self._store(read_only=True) as store:
            rows = [export.flat(row) for row in export.rows(store, self.name, state=state, archived=archived)]
        return to_frame(rows) if frame else rows

    @overload
    def failures(self, *, frame: Literal[False] = False) -> list[dict[str, Any]]: ...
    @overload
    def failures(self, *, frame: Literal[True]) -> Any: ...

    def failures(self, *, frame: bool = False) -> Any:
        """Failed items as ``runner failures NAME --json`` lists them: key, group, kind, message, attempts, retryable,
        and the stage each failed at."""
        with self._store(read_only=True) as store:
            rows = views.failures(store, self.name)
        return to_frame(rows) if frame else rows

    @overload
    def events(self, key: str | None = None, *, frame: Literal[False] = False) -> list[dict[str, Any]]: ...
    @overload
    def events(self, key: str | None = None, *, frame: Literal[True]) -> Any: ...

    def events(self, key: str | None = None, *, frame: bool = False) -> Any:
        """State changes, oldest first: the whole run's, or one item's history.

        Each row says how many ``items`` it moved: a batch's move (queued,
        running, received, completed) is one row with no ``key`` for all its
        items; any other change (pending, waiting, failed) is the item's own
        row. An item's history holds its own rows and its batches' moves
        (``batch_move`` 1).
        """
        with self._store(read_only=True) as store:
            run_id = store.run_id(self.name)
            if key is None:
                rows = views.history(store, run_id)
            else:
                item = views.item(store, run_id, key)
                if item is None:
                    raise RunError(f"run {self.name!r} has no item {key!r}")
                rows = [{"key": key, **row} for row in views.item_history(store, item["id"])]
        return to_frame(rows) if frame else rows

    def item(self, key: str) -> dict[str, Any]:
        """One item as the store keeps it: input, raw output, result, error, attempts, paid calls, history."""
        with self._store(read_only=True) as store:
            found = views.item(store, store.run_id(self.name), key)
            if found is None:
                raise RunError(f"run {self.name!r} has no item {key!r}")
            return {**found, "history": views.item_history(store, found["id"])}

    # A person's hand (and :class:`~runner.notebook_controls.Controls`) -------------------------

    def cancel(self, keys: Sequence[str] | None = None) -> Compensated:
        """Fail unfinished items (all, or ``keys``) as ``cancelled``; batches in flight finish first.

        Items not in flight fail at once; those in a batch in flight when it
        ends (one its answer completes stays completed). Then ``on_cancel``
        is called for each item cancelled and not yet compensated; what it
        raised is in the report's ``errors``, by key. ``keys=[]`` cancels
        nothing (only ``None`` means every item). ``retry(kind="cancelled")``
        sends them again.
        """
        if keys is not None and not keys:
            return Compensated()
        with self._store() as store:
            done = control.cancel(store, self.name, now=self.clock.now(), keys=keys or ())
            return self._compensate(store)._replace(failed=done.failed, finishing=done.finishing)

    def _compensate(self, store: Store) -> Compensated:
        if self.on_cancel is None:
            return Compensated()
        return compensation.compensate(store, self.name, self.job.key, self.on_cancel, now=self.clock.now())

    def panel(self, *, interval: float = 0.5) -> RunPanel:
        """The live ipywidgets panel over this run's store (imports ipywidgets now, not before)."""
        from .widgets import RunPanel

        return RunPanel(self.db, self.name, interval=interval, now=self.clock.now, job=self.job)

    @contextmanager
    def _store(self, *, read_only: bool = False) -> Iterator[Store]:
        # A connection per call: cheap, and safe from whichever thread calls. What only
        # reads opens the store read-only, so it works where this process cannot write.
        with Store(self.db, read_only=read_only) as store:
            yield store


def panel(name: str, *, db: str | Path = "runs.db", interval: float = 0.5) -> RunPanel:
    """The live panel of any run in a store, whoever executes it (a CLI, another kernel)."""
    from .widgets import RunPanel

    return RunPanel(db, name, interval=interval)


def to_frame(rows: list[dict[str, Any]]) -> Any:
    """Rows as a pandas DataFrame; pandas is optional, so its absence is one error that says how to install it."""
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        raise MissingPackage("frame=True needs pandas, which is not installed: pip install pandas (or the notebook "
                             "extra: pip install -e '.[notebook]'), or leave out frame=True for the rows") from None
    return pandas.DataFrame(rows)


def _provider(spec: ProviderSpec) -> Provider | TaskProvider:
    if isinstance(spec, Provider | TaskProvider):
        return spec
    if isinstance(spec, tuple):
        return PythonTasks(*spec)
    if callable(spec):
        return PythonHandler(spec)
    raise JobError(f"provider must be a kind, an async handler or a (submit, poll) pair, not {spec!r}")
