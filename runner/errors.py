"""The one error tree of runner.

    RunnerError                 root: everything runner raises on purpose
    ├── JobError                a job file or job definition is wrong
    │   └── InputError          the job's input cannot be read (file, line)
    │       └── InputChanged    the input file changed while it was read; the run stays unprepared
    ├── RunError                a run cannot be found or started as asked
    │   └── UnknownStage        a stage named that the run does not have (the CLI's usage error)
    ├── ExportError             an export cannot be written as asked (format, file, pyarrow)
    ├── MissingPackage          an optional package a notebook call needs (pandas) is not installed
    ├── StoreError              the run store cannot be opened, read or written
    │   ├── StoreBusy           another process held its write lock too long; nothing was written
    │   ├── GroupLost           a transaction carrying several steps ended with none written
    │   ├── NotARunStore        a SQLite database of another program; left as it was
    │   ├── SpoolError          a requests file cannot be written in the store's folder (full, read-only)
    │   └── StoreOutdated       a store of an older schema, which only a writing command upgrades
    └── UpstreamError           a classified failure of an upstream call
        ├── TransportError      connection error, timeout, 5xx: worth a request retry
        ├── RateLimited         429 with a time to wait
        ├── OutputInvalid       the answer cannot be used as a whole
        ├── AuthError           the credentials were refused (401)
        ├── BillingError        balance, quota or spend limit exhausted (402, insufficient_quota)
        ├── PermissionDenied    not allowed (403)
        ├── BadRequest          the upstream refused the request as malformed (400)
        ├── NotFound            the model, resource or task is not known (404)
        ├── SubmitUnknown       a create whose answer was lost: it may or may not exist
        ├── TaskUnreachable     a submitted task cannot be polled or found for now
        └── SkipRetry           a handler's word: fail these items now, never re-attempt them

An error says whether the upstream ``refused`` the call (a 4xx or 429
answer: nothing ran, nothing was billed) or may have run it
(``maybe_billed``: the answer was lost after sending); a 5xx claims neither.

Foreign exceptions (``httpx``, ``sqlite3``, ``tomllib``, ``json``) are
translated where they enter, with ``raise ... from exc``. The CLI turns these
errors into one-line messages and exit codes. User handlers raise the
``UpstreamError`` subclasses to classify their own failures.
"""

from __future__ import annotations

from .model import FailureKind


class RunnerError(Exception):
    """Root of every error runner raises on purpose."""


class JobError(RunnerError):
    """A job file or job definition is wrong; the message says what and where."""


class InputError(JobError):
    """The job's input cannot be read; the message names the file and line."""


class InputChanged(InputError):
    """The input file changed while it was read (checked, then added): the run stays unprepared."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where}: changed while it was read; run again to read it as it is now")


class RunError(RunnerError):
    """A run cannot be found, or cannot be started as asked."""


class UnknownStage(RunError):
    """A stage was named that the run does not have; the message names the stages it has."""


class ExportError(RunnerError):
    """An export cannot be written as asked: an unknown format or state, a file that cannot be written, no pyarrow."""


class MissingPackage(RunnerError):
    """An optional package that a notebook call needs (pandas for ``frame=True``) is not installed."""


class StoreError(RunnerError):
    """The run store cannot be opened, read or written."""


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than this one waits; nothing was written."""


class GroupLost(StoreError):
    """A transaction carrying several steps ended with none of them written (a failure SQLite rolled back)."""


class NotARunStore(StoreError):
    """The file is another program's SQLite database: refused, and left byte for byte as it was."""


class SpoolError(StoreError):
    """A batch's requests file cannot be written beside the store (its folder full or read-only): nothing was sent.

    A store failure, not an upstream one: the folder the run records in is in
    trouble, so the run stops with the breaker open (reason store).
    """


class StoreOutdated(StoreError):
    """A store of an older schema, read by a view that cannot migrate it; a writing command upgrades it."""


class UpstreamError(RunnerError):
    """A classified failure of an upstream call."""

    kind: FailureKind = FailureKind.TRANSPORT
    #: Whether a person may usefully retry the item later.
    retryable: bool = True
    #: Whether every further call would fail too, so the run must stop for a person.
    stops_run: bool = False
    #: The upstream answered with a refusal before running anything: nothing ran, nothing was billed.
    refused: bool = False

    def __init__(
        self, message: str, *, retry_after: float | None = None, maybe_billed: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        #: Seconds the upstream asked us to wait, when it said so.
        self.retry_after = retry_after
        #: The request was sent and its answer lost: the upstream may have run and billed it.
        self.maybe_billed = maybe_billed


class TransportError(UpstreamError):
    """Connection error, timeout or 5xx: short network trouble, worth a request retry."""

    kind = FailureKind.TRANSPORT


class RateLimited(UpstreamError):
    """429: the upstream asks us to wait, ``retry_after`` seconds when it says."""

    kind = FailureKind.RATE_LIMITED
    refused = True


class OutputInvalid(UpstreamError):
    """The answer came back but cannot be used as a whole (not JSON, no results)."""

    kind = FailureKind.BATCH_INVALID


class AuthError(UpstreamError):
    """The credentials were refused (401): every call would fail."""

    kind = FailureKind.AUTH
    retryable = False
    stops_run = True
    refused = True


class BillingError(UpstreamError):
    """Balance, quota or spend limit exhausted (402, or a billing code such as insufficient_quota at any status)."""

    kind = FailureKind.BILLING
    retryable = False
    stops_run = True
    refused = True


class PermissionDenied(UpstreamError):
    """The key may not do this (403)."""

    kind = FailureKind.PERMISSION
    retryable = False
    stops_run = True
    refused = True


class BadRequest(UpstreamError):
    """The upstream refused the request as malformed (400)."""

    kind = FailureKind.BAD_REQUEST
    retryable = False
    refused = True

    def __init__(
        self, message: str, *, reason: str | None = None, splittable: bool = False, too_long: bool = False,
        parts: int = 0,
    ) -> None:
        super().__init__(message)
        #: The refusal's gist, the same each time the upstream refuses for the same cause.
        self.reason = gist(message) if reason is None else reason
        #: A smaller batch might pass (its input was too long); False when every call would be refused alike.
        self.splittable = splittable
        #: The input was too long for the model: about the items sent, never a sign that every call would fail.
        self.too_long = too_long
        #: Refused for its size alone (a requests file too large): split in this many parts, whatever its rounds.
        self.parts = parts


class NotFound(UpstreamError):
    """The model, resource or upstream task is not known (404)."""

    kind = FailureKind.NOT_FOUND
    retryable = False
    refused = True


class SubmitUnknown(UpstreamError):
    """A create call whose answer was lost: the task may exist; look for it, never create another blindly."""

    kind = FailureKind.TRANSPORT

    def __init__(self, message: str, *, cause: UpstreamError | None = None) -> None:
        super().__init__(message)
        #: The create's own failure (a refusal after a proxy sent it on, say), for when none turns up.
        self.cause = cause


class TaskUnreachable(UpstreamError):
    """A submitted task cannot be polled or found for now: its items are held, never sent again on their own."""

    kind = FailureKind.TRANSPORT


class SkipRetry(UpstreamError):
    """A Python handler's word that its items must not be re-attempted: they fail at once (``skipped_retry``).

    Asynq's ``SkipRetry``: for an error no later try can mend (a record the
    handler cannot use). A person may still retry them (``runner retry``).
    Raised by a handler, so whatever it called may have run (not ``refused``).
    """

    kind = FailureKind.SKIPPED_RETRY

    def __init__(self, reason: str) -> None:
        super().__init__(reason)


def gist(message: str) -> str:
    """A message without what varies between repeats of one failure.

    Lower case, each word with a digit in it (a count, a size, an id) as
    ``#``, at most 200 characters.
    """
    words = ("#" if any(c.isdigit() for c in word) else word for word in message.lower().split())
    return " ".join(words)[:200]
