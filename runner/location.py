"""Where a run store is: a SQLite file's path, or a PostgreSQL database's URL, shown without its password.

``--db`` (and ``RUNNER_DB``) takes either; a URL is told by its scheme
(``postgresql://`` or ``postgres://``). A URL is shown as
``postgresql://user@host:port/dbname?options``: the password, and any other
secret of the connection string, is never printed, logged or saved; its
options (the schema it chooses, say) are shown, since they say which store.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

#: The schemes of a PostgreSQL URL.
SCHEMES = ("postgresql://", "postgres://")
#: The parameters of a URL never shown.
SECRETS = {"password", "sslpassword"}
#: The port at the end of a URL's host part (an IPv6 host in brackets), as written.
PORT = re.compile(r"(?:\]|^[^\[\]]*?):([^:\]]*)$")


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


def is_new_file(location: str | Path) -> bool:
    """Whether ``location`` names a SQLite file not made yet: one a command that fails midway should not leave."""
    return not is_url(location) and not Path(location).exists()


def files_beside(location: StoreLocation) -> Path:
    """The folder of the files a run keeps beside its store (a batch's requests): a SQLite file's own folder;
    for a database on a server, the folder the command runs in."""
    return Path.cwd() if is_url(location) else Path(location).parent


def shown(url: str) -> str:
    """The URL as a person may see it: user, host, port, database and options, never a password (a URL shown
    already is shown as it is); a port that is no number is shown as written, for the driver to refuse."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or "localhost"
    port = PORT.search(parts.netloc.rpartition("@")[2])
    options = urlencode([(key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True)
                         if key not in SECRETS])
    return (f"postgresql://{user}{f'[{host}]' if ':' in host else host}{f':{port[1]}' if port else ''}{parts.path}"
            f"{f'?{options}' if options else ''}")


def given_by_environment(location: str | Path) -> bool:
    """Whether ``RUNNER_DB`` names the store ``location``: a command run here finds it with no ``--db``."""
    from_environment = os.environ.get("RUNNER_DB")
    return bool(from_environment) and same_store(str(from_environment), location)


def same_store(one: str | Path, other: str | Path) -> bool:
    """Whether two locations name one store: one file (however its path is spelt), or one database and schema on
    one server (whatever password each gives)."""
    if is_url(one) or is_url(other):
        return is_url(one) and is_url(other) and _server_place(str(one)) == _server_place(str(other))
    return Path(one).resolve() == Path(other).resolve()


def _server_place(url: str) -> tuple[str, str, str, str, str]:
    """A URL's user, host, port, database and options (a schema is chosen there), its password left out."""
    parts = urlsplit(shown(url))
    port = PORT.search(parts.netloc.rpartition("@")[2])
    return parts.username or "", parts.hostname or "localhost", port[1] if port else "5432", parts.path, parts.query
