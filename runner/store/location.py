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


def is_url(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL database (else a SQLite file)."""
    return isinstance(location, str) and location.startswith(SCHEMES)


def files_beside(location: str | Path) -> Path:
    """The folder of the files a run keeps beside its store (a batch's requests): a SQLite file's own folder;
    for a database on a server, the folder the command runs in."""
    return Path.cwd() if is_url(location) else Path(location).parent


def shown(url: str) -> str:
    """The URL as a person may see it: user, host, port and database, never the password or options."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{user}{host}{port}{parts.path}"
