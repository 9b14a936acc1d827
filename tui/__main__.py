"""``python -m tui [--db runs.db] [RUN]``: the terminal UI over a run store."""

from __future__ import annotations

import argparse
import os

from .app import run_tui


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tui", description="The runner TUI over a run store.")
    parser.add_argument("run", nargs="?", help="open this run (default: the list of runs)")
    parser.add_argument("--db", default=os.environ.get("RUNNER_DB", "runs.db"),
                        help="the run store: a file or a PostgreSQL URL (default: $RUNNER_DB, else runs.db)")
    args = parser.parse_args(argv)
    run_tui(args.db, args.run)


if __name__ == "__main__":
    main()
