"""A job: what to run over which items, from a TOML file or from Python.

A job file looks like this (every section but the top keys is optional)::

    name = "posts"
    input = "posts.jsonl"            # or { path = "posts.db", table = "posts" }
    key = "id"
    group = "month"
    version = "1"

    [batch]                          # openai-batch: 50000, 50000000, 16; anthropic-batch: 100000, 64000000, 16
    max_items = 25
    max_chars = 20000
    concurrency = 2
    priority_field = "priority"      # higher first (runner.job_queue)

    [schedule]
    field = "send_at"                # ISO 8601 with an offset, or epoch seconds: waits until then

    [budget]                         # a batch starts only within it (runner.rules.budget; runner budget raises it)
    max_cost = 5.0                   # USD: spent + in flight + unknown charges + the next batch, estimated
    max_tokens = 2_000_000           # tokens, counted the same way

    [provider]
    kind = "openai-chat"
    base_url = "https://api.openai.com/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    queue = "openai-main"            # shared with every run naming it (runner.rules.queues)

    [prompt]
    instructions = "Classify each post."
    fields = ["title", "body"]

    [output]
    schema = { type = "object", required = ["label"] }   # or a path to a JSON file

    [retry]
    max_attempts = 3                 # tries, counted from the first

    [retry.rate_limited]             # and [retry.transport]: a kind's own limits, unset keys as [retry]
    max_attempts = 6

    [retention]                      # finished items older than this go to the run's archive (runner.retention)
    completed = "30d"                # and failed = "90d"; applied by runner archive and at runner run's end
    [cache]
    reuse = true                     # an item whose same work has a validated result in this store takes it:
                                     # no call, not billed (runner.reusing); default false

    [[stage]]                        # optional, a pipeline (runner.job_stages): each stage the sections
    name = "classify"                # above, overridden key by key by its own [stage.prompt] etc.

Unknown keys and values of the wrong type are errors (``job_values.typed``); paths are relative to the job file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, get_args

from . import job_budget, job_provider, job_toml, kinds, protocol, words
from .errors import JobError
from .inputs import Format, InputSpec, format_of
from .job_provider import PROVIDER_KINDS as PROVIDER_KINDS
from .job_queue import Cache, RetryLimits as RetryLimits, Schedule
from .job_values import TYPE_NAMES as TYPE_NAMES, typed
from .retention import Retention
from .rules.budget import Budget
from .validation import compile_schema

if TYPE_CHECKING:
    from .job_stages import When

#: The kind of a run whose provider is a user's Python handler: given from Python, never in a job file.
PYTHON = "python"
#: The kind of a stage where a person decides (no call).
DECIDE = "decide"
#: The kind of a stage where a fanned-out item waits for its sub-items and gathers their results (no call).
JOIN = "join"
#: The stage kinds that make no call.
NO_CALL = (DECIDE, JOIN)


@dataclass(frozen=True)
class BatchLimits:
    """How items are grouped into upstream calls, and how many run at once."""

    max_items: int = 25
    max_chars: int = 20_000
    concurrency: int = 2
    #: The input field holding an item's priority (higher first; "": every item 0).
    priority_field: str = ""


@dataclass(frozen=True)
class ProviderConfig:
    """Which upstream to call and how."""

    kind: str = "openai-chat"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    #: The environment variable holding the key; empty for servers that need none.
    api_key_env: str = ""
    timeout: float = 120.0
    #: Seconds past ``timeout`` that a task's create whose answer was lost may still land upstream:
    #: only after both is "nothing was created" concluded.
    create_margin: float = 60.0
    max_tokens: int = 4096  #: The most tokens an answer may take (anthropic kinds: Anthropic's API requires it).
    #: USD per ``per`` tokens (:mod:`runner.pricing`); empty: the built-in table's price for the model, if any.
    price: dict[str, float] = field(default_factory=dict)
    #: Output tokens an item is expected to take, for the estimate before any answer (``runner.rules.estimate``).
    expected_output_tokens: int = 200
    #: A ``python`` run's handler by qualified name, for people to read, set from Python; a job file's ``python``
    #: stage's ``handler`` label (``[[stage]] handler``, its fingerprint's part), never in ``[provider]``.
    handler: str = field(default="", metadata={"job_file": False})
    #: Served by ``runner demo``'s own simulator, which stops with the demo: the run goes on by ``runner demo``.
    demo: bool = field(default=False, metadata={"job_file": False})
    #: The shared queue whose limit, quiet time and breaker the run shares with every run naming it ("": none).
    queue: str = ""
    #: Among a queue's runs waiting for a slot, the highest ``queue_priority`` gets the next one.
    queue_priority: int = 0

    def describe(self) -> str:
        """The kind and what it calls, as the UIs show it: ``openai-chat · gpt-4o-mini``, ``python · my.classify``."""
        return f"{self.kind} · {self.handler if self.kind == PYTHON else self.model}"


@dataclass(frozen=True)
class Prompt:
    """What the model is told; ``fields`` picks the record fields sent (default all)."""

    instructions: str = "Process each record."
    system: str = protocol.DEFAULT_SYSTEM
    template: str = protocol.DEFAULT_USER
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage:
    """One stage of a pipeline: its kind (a provider kind, ``python`` or ``decide``) and what it runs with."""

    name: str
    kind: str
    provider: ProviderConfig
    prompt: Prompt
    output_schema: dict[str, Any] | None
    batch: BatchLimits
    retry: RetryLimits
    when: When | None = None
    cache: Cache = field(default_factory=Cache)
    #: The field of this stage's result whose list fans the item out: one sub-item per element ("": none).
    fan_out: str = ""
    #: A fan-out's guards: at most this many sub-items, and an item's state at most this many bytes (JSON).
    max_fan_out: int = 1_000
    max_state_bytes: int = 1_000_000
    #: A join: the parent completes with its failed sub-items listed, instead of failing ``sub_item_failed``.
    allow_failures: bool = False

    def fingerprint(self, version: str) -> str:
        """A hash of what determines this stage's result beside the item's input and the results it reads: not
        how the stage is worked (its ``kind``, a handler's name), so switching to the Batch API sends nothing again.

        A job file's ``python`` stage has no model: its ``handler`` label stands for it (a new label, say
        ``extract-v2``, sends its items to the new handler again), beside its prompt and schema."""
        import hashlib  # here: the light commands never hash

        made_by = self.provider.handler if self.kind == PYTHON else self.provider.model
        sent = ([made_by, dataclasses.asdict(self.prompt), self.output_schema, version]
                if self.kind not in NO_CALL else [self.kind, version])  # no call: a person decides, or a join
        if self.fan_out:  # only then: the stages of older stores keep their fingerprints
            sent.append(self.fan_out)
        return hashlib.sha256(json.dumps(sent, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """One job over a set of items; running it again continues the run of the same name."""

    name: str
    input: InputSpec
    key: str = "id"
    group: str | None = None
    version: str = "1"
    batch: BatchLimits = field(default_factory=BatchLimits)
    provider: ProviderConfig = field(default_factory=ProviderConfig)
    prompt: Prompt = field(default_factory=Prompt)
    output_schema: dict[str, Any] | None = None
    retry: RetryLimits = field(default_factory=RetryLimits)
    schedule: Schedule = field(default_factory=Schedule)
    retention: Retention = field(default_factory=Retention)
    #: What the run may commit to (``[budget]``); a person's ``runner budget`` replaces it in the store.
    budget: Budget = field(default_factory=Budget)
    cache: Cache = field(default_factory=Cache)
    #: A Python job's own check of one result: a message saying what is wrong, or None.
    #: It is not saved in the store; give it again when continuing the run from Python.
    check: Callable[[dict[str, Any]], str | None] | None = field(default=None, compare=False)
    #: The run was given a Python check (saved as ``python_check``, the function itself is not): a job read from
    #: the store without its check cannot check results as the run does (revalidating refuses it).
    python_check: bool = field(default=False, compare=False)
    #: The stages in order; a job without ``[[stage]]`` has one, named after its provider kind (see ``__post_init__``).
    stages: tuple[Stage, ...] = ()
    #: The stages were given (``[[stage]]``): the item's whole record is kept, each stage picking its fields.
    staged: bool = False

    def __post_init__(self) -> None:
        if not self.staged:  # the one stage is the top-level sections, whatever they were replaced by
            object.__setattr__(self, "stages", (Stage(
                self.provider.kind, self.provider.kind, self.provider, self.prompt, self.output_schema, self.batch,
                self.retry, cache=self.cache),))

    @property
    def checked_in_python(self) -> bool:
        """Its results are checked by a Python function: ``check`` given, or (read from the store) ``python_check``."""
        return self.check is not None or self.python_check

    def stage(self, name: str) -> Stage:
        """The stage of this name (a KeyError for none)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    def with_provider(self, **changes: Any) -> Job:
        """The job with ``changes`` made to its provider and to every stage's (a simulator's base_url, say).

        A job file's ``python`` stage keeps its kind and handler label: its function is given for it alone."""
        kept = ("kind", "handler")
        stages = tuple(
            dataclasses.replace(s, provider=dataclasses.replace(
                s.provider, **{k: v for k, v in changes.items() if k not in kept}))
            if self.staged and s.kind == PYTHON else
            dataclasses.replace(s, provider=dataclasses.replace(s.provider, **changes),
                                kind=changes.get("kind", s.kind) if s.kind not in NO_CALL else s.kind)
            for s in self.stages)
        return dataclasses.replace(self, provider=dataclasses.replace(self.provider, **changes), stages=stages)

    def to_json(self) -> str:
        """The resolved job as saved in the store (no secret, no Python check: only that there is one)."""
        data = dataclasses.asdict(dataclasses.replace(self, check=None))
        del data["check"], data["python_check"]
        if self.checked_in_python:
            data["python_check"] = True
        data["input"]["path"] = str(self.input.path)
        return json.dumps(data, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        staged = data.get("staged", False)
        return cls(
            stages=_stages_from_json(data["stages"]) if staged else (), staged=staged, name=data["name"],
            input=InputSpec(Path(data["input"]["path"]), data["input"]["format"], data["input"]["table"]),
            key=data["key"], group=data["group"], version=data["version"],
            batch=BatchLimits(**data["batch"]), provider=ProviderConfig(**data["provider"]),
            prompt=_prompt_from_json(data["prompt"]), output_schema=data["output_schema"],
            retry=RetryLimits(**data["retry"]),
            schedule=Schedule(**data.get("schedule", {})), retention=Retention(**data.get("retention", {})),
            budget=Budget(**data.get("budget", {})),
            cache=Cache(**data.get("cache", {})), python_check=data.get("python_check", False),
        )


def _prompt_from_json(data: dict[str, Any]) -> Prompt:
    return Prompt(**{**data, "fields": tuple(data["fields"])})


def _stages_from_json(data: list[dict[str, Any]]) -> tuple[Stage, ...]:
    from . import job_stages  # here: a pipeline's alone

    return tuple(job_stages.from_json(stage) for stage in data)


def load(path: str | Path) -> Job:
    """Read and check a TOML job file; every problem is one JobError saying what and where."""
    path = Path(path)
    return from_dict(job_toml.read(path), base=path.parent, where=str(path))


SECTIONS = {"batch": BatchLimits, "provider": ProviderConfig, "prompt": Prompt, "retry": RetryLimits, "cache": Cache}
TOP_KEYS = {"name", "input", "key", "group", "version", "output", "stage", "schedule", "retention", "budget", *SECTIONS}


def from_dict(data: Mapping[str, Any], *, base: Path, where: str) -> Job:
    """Build a job from parsed TOML (or an equivalent dict), paths relative to ``base``."""
    _refuse_unknown(data, sorted(TOP_KEYS), where)
    for required in ("name", "input"):
        if required not in data:
            raise JobError(f"{where}: missing key {required!r}")
    sections = {name: _section(cls, data.get(name, {}), f"{where} [{name}]") for name, cls in SECTIONS.items()}
    sections = kinds.applied(sections, data, where=f"{where} [batch]")
    job = Job(
        name=_text(data, "name", where),
        input=_input(data["input"], base, where),
        key=_text(data, "key", where, "id"),
        group=_text(data, "group", where) if "group" in data else None,
        version=_text(data, "version", where, "1"),
        output_schema=_output(data.get("output", {}), base, f"{where} [output]"),
        schedule=_section(Schedule, data.get("schedule", {}), f"{where} [schedule]"),
        retention=_section(Retention, data.get("retention", {}), f"{where} [retention]").checked(where),
        budget=_section(Budget, data.get("budget", {}), f"{where} [budget]"),
        **sections,
    )
    _check_values(job, where)
    if "stage" in data:
        from . import job_stages  # here: it builds on this module's readers

        job = dataclasses.replace(job, staged=True, stages=job_stages.read(job, data, base=base, where=where))
    job_budget.check(job, f"{where} [budget]")
    return job


def _refuse_unknown(table: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    known = list(known)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise JobError(f"{where}: {words.unknown('key', unknown[0], known)}")


def _text(data: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value: str = typed(data.get(key, default), str, key, where)
    if not value:
        raise JobError(f"{where}: {key!r} must not be empty")
    return value


def _input(value: Any, base: Path, where: str) -> InputSpec:
    if isinstance(value, str):
        value = {"path": value}
    if not isinstance(value, dict):
        raise JobError(f"{where}: 'input' must be a path or a table {{ path, format, table }}")
    _refuse_unknown(value, ("path", "format", "table"), f"{where} input")
    given = _text(value, "path", f"{where} input")
    if not given.isprintable():  # messages name the input file, and must stay one line
        raise JobError(f"{where} input: 'path' must be a printable file name, not {given!r}")
    path = (base / given).resolve()
    fmt = _text(value, "format", f"{where} input") if "format" in value else format_of(path)
    if fmt not in get_args(Format):
        raise JobError(f"{where}: input format must be jsonl, csv or sqlite, not {fmt!r}")
    table = _text(value, "table", f"{where} input") if "table" in value else None
    return InputSpec(path, cast(Format, fmt), table)


def file_keys(cls: type[Any]) -> list[str]:
    """The keys a job file may set in a section: its dataclass's fields, but those set from Python only."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("job_file", True)]


def _section(cls: type[Any], value: Any, where: str) -> Any:
    """A section dataclass from a TOML table: unknown keys and wrong types are errors."""
    if not isinstance(value, dict):
        raise JobError(f"{where}: must be a table")
    _refuse_unknown(value, file_keys(cls), where)
    defaults, fields = cls(), {f.name: f for f in dataclasses.fields(cls)}
    return cls(**{name: _value(getattr(defaults, name), given, name, where, fields[name].metadata.get("type"))
                  for name, given in value.items()})


def _value(default: Any, given: Any, name: str, where: str, wanted: type[Any] | None = None) -> Any:
    """A section's value, as its default's type (or ``wanted``); a table in it (``[retry.transport]``) a section."""
    if dataclasses.is_dataclass(default):
        return _section(type(default), given, f"{where.removesuffix(']')}.{name}]")
    return typed(given, wanted or type(default), name, where)


def _output(value: Any, base: Path, where: str) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        raise JobError(f"{where}: must be a table")
    _refuse_unknown(value, ["schema"], where)
    schema = value.get("schema")
    if isinstance(schema, str):
        path = base / schema
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:  # ValueError: not UTF-8, not JSON
            raise JobError(f"{where}: cannot read schema {path}: {exc}") from exc
    if schema is None:
        return None
    if not isinstance(schema, dict):
        raise JobError(f"{where}: 'schema' must be a table or a path to a JSON file")
    compile_schema(schema, where)
    return schema


def _check_values(job: Job | Stage, where: str) -> None:
    for section, name, least in [
        ("batch", "max_items", 1), ("batch", "max_chars", 1), ("batch", "concurrency", 1),
        ("retry", "max_attempts", 1), ("retry", "request_retries", 0), ("retry", "backoff", 0),
        ("retry", "max_backoff", 0), ("retry", "max_refusals", 1), ("provider", "timeout", 0),
        ("provider", "create_margin", 0), ("provider", "max_tokens", 1), ("provider", "expected_output_tokens", 0),
    ]:
        if getattr(getattr(job, section), name) < least:
            raise JobError(f"{where} [{section}]: {name!r} must be at least {least}")
    job.retry.check(where)
    if getattr(job, "kind", None) not in (*NO_CALL, PYTHON):  # a python stage calls no provider of its own
        job_provider.check(job.provider, f"{where} [provider]")
