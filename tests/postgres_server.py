"""The PostgreSQL server the tests of both backends use, and a fresh store's URL in it (issue 20).

The server is ``RUNNER_TEST_PG`` when set (a URL of a database the tests may
make schemas in); else one the session starts with ``.ci/postgres start``
(its own state file) and stops at its end. When neither works the test that
needs it fails, saying why: it is never skipped. Each store is a schema of
its own (``t_<n>``), chosen by the URL's ``options=-csearch_path=``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from support import ROOT

NO_SERVER = ("these tests need a PostgreSQL server: set RUNNER_TEST_PG=postgresql://user:password@host:port/db, "
             "or install PostgreSQL (initdb) so that .ci/postgres can start one")

_numbers = itertools.count(1)


@contextmanager
def server() -> Iterator[str]:
    """The URL of the test server's database: ``RUNNER_TEST_PG``'s, or a throwaway one's for the session."""
    given = os.environ.get("RUNNER_TEST_PG")
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="runner-test-pg-") as folder:
        env = {**os.environ, "RUNNER_PG_STATE": str(Path(folder) / "state")}
        started = subprocess.run([str(ROOT / ".ci" / "postgres"), "start"], capture_output=True, text=True, env=env)
        if started.returncode != 0:
            raise AssertionError(f"{NO_SERVER} ({started.stderr.strip().splitlines()[-1:] or 'no reason given'})")
        try:
            yield started.stdout.strip()
        finally:
            subprocess.run([str(ROOT / ".ci" / "postgres"), "stop"], capture_output=True, env=env, check=False)


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A store URL of an empty schema of its own in the server's database, dropped at the end."""
    import psycopg

    name = f"t_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        admin.execute(f"CREATE SCHEMA {name}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={name}')}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
