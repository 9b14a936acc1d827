"""Where a run store is: a SQLite file's path, or a PostgreSQL database's URL, shown without its password.

``--db`` (and ``RUNNER_DB``) takes either; a URL is told by its scheme
(``postgresql://`` or ``postgres://``). A URL is shown as
``postgresql://user@host:port/dbname``: the password, and any other secret
of the connection string, is never printed, logged or saved.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

#: The schemes of a PostgreSQL URL.
SCHEMES = ("postgresql://", "postgres://")


#: Where a store is: a SQLite file's path, or a PostgreSQL URL (kept whole, password and all, to connect).
StoreLocation = Path | str


def located(given: str | Path) -> StoreLocation:
    """A location as given (``--db``, ``RUNNER_DB``, ``Run(db=...)``): a URL as it is, else a path."""
    return given if is_url(given) else Path(given)


def resolved(given: str | Path) -> StoreLocation:
    """A location as given, a file's path made absolute (the run's files are kept beside it); a URL as it is."""
    return given if is_url(given) else Path(given).resolve()


def named(location: str | Path) -> str:
    """A location as a person may see it: a path as it is, a URL without its password."""
    return shown(str(location)) if is_url(location) else str(location)


def is_url(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL database (else a SQLite file)."""
    return isinstance(location, str) and location.startswith(SCHEMES)


def files_beside(location: StoreLocation) -> Path:
    """The folder of the files a run keeps beside its store (a batch's requests): a SQLite file's own folder;
    for a database on a server, the folder the command runs in."""
    return Path.cwd() if is_url(location) else Path(location).parent


def shown(url: str) -> str:
    """The URL as a person may see it: user, host, port and database, never the password or options (a URL shown
    already is shown as it is)."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{user}{host}{port}{parts.path}"


def same_store(one: str | Path, other: str | Path) -> bool:
    """Whether two locations name one store: one file (however its path is spelt), or one database and schema on
    one server (whatever password each gives)."""
    if is_url(one) or is_url(other):
        return is_url(one) and is_url(other) and _server_place(str(one)) == _server_place(str(other))
    return Path(one).resolve() == Path(other).resolve()


def _server_place(url: str) -> tuple[str, str, int, str, str]:
    """A URL's user, host, port, database and options (a schema is chosen there), its password left out."""
    parts = urlsplit(url)
    return parts.username or "", parts.hostname or "localhost", parts.port or 5432, parts.path, parts.query
