"""Every benchmark, one after the other, each with its table; then how many targets were met.

    python bench/run.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: python bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import batch_api, cold_start, concurrency, end_to_end, large_input, scale, store  # noqa: E402
from bench.common import Row, machine, options, report, table  # noqa: E402


def main() -> None:
    args = options(__doc__.splitlines()[0] if __doc__ else "")
    print(f"Machine: {machine()}{' (--quick)' if args.quick else ''}")
    rows: list[Row] = []
    sections = (("Store transitions", store), ("End to end", end_to_end), ("High concurrency", concurrency),
                ("Batch API", batch_api), ("Scale", scale), ("Large input", large_input), ("Cold start", cold_start))
    for title, module in sections:
        section = module.run(quick=args.quick)
        report(title, section)
        rows.extend(section)
    judged = [row for row in rows if row.target]
    met = sum(row.met is True for row in judged)
    print(f"\n## All, on {machine()}\n\n{table(rows)}\n\n{met} of {len(judged)} targets met.")


if __name__ == "__main__":
    main()
