"""Plain columns for a terminal: widths from the data, numbers to the right, long text wrapped at words.

What ``runner status`` and ``runner failures`` print, without rich (whose
import alone costs these commands more than the rest of their work). A
table wider than the terminal wraps its text columns at words, each line
under its own column; a word longer than its column overflows it, never
cut. Without a terminal (a pipe, a file) nothing wraps: a row is one line.
Outside text is shown as it is, its control characters (a newline, an
escape sequence) as spaces, so that nothing it holds can move the cursor.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Sequence

import click

#: Between two columns.
GAP = "  "


def shown(text: str) -> str:
    """``text`` on one line, as it is, every run of whitespace or control characters one space."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def width() -> int:
    """The terminal's width (``COLUMNS`` first), or 0 without a terminal: nothing wraps."""
    return shutil.get_terminal_size((0, 0)).columns


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "", caption: str = "",
    numbers: Collection[int] = (), wraps: Collection[int] = (), bold: Collection[int] = (), within: int = 0,
) -> list[str]:
    """The lines of a table: its title, header, a rule, its rows (``bold`` by index) and caption, centred on it.

    ``numbers``: the columns aligned right; ``wraps``: the columns wrapped
    at words when the table is wider than ``within`` (0: never).
    """
    cells = [[shown(cell) for cell in row] for row in rows]
    widths = _fit([max(map(len, column)) for column in zip(header, *cells)], [list(header), *cells], wraps, within)
    across = sum(widths) + len(GAP) * (len(widths) - 1)
    lines = [title.center(across).rstrip()] if title else []
    lines += [click.style(_row(header, widths, numbers), bold=True), "─" * across]
    for index, row in enumerate(cells):
        for line in _wrapped(row, widths, wraps, numbers):
            lines.append(click.style(line, bold=True) if index in bold else line)
    if caption:
        lines.append(click.style(caption.center(across).rstrip(), dim=True))
    return lines


def _fit(natural: list[int], cells: list[list[str]], wraps: Collection[int], within: int) -> list[int]:
    """Column widths: as the data asks, the ``wraps`` columns narrowed (by their share) to fit ``within``."""
    across = sum(natural) + len(GAP) * (len(natural) - 1)
    if not within or not wraps or across <= within:
        return natural
    room = max(within - (across - sum(natural[i] for i in wraps)), 0)
    share = sum(natural[i] for i in wraps)
    widths = list(natural)
    for i in wraps:
        longest_word = max(len(word) for row in cells for word in row[i].split() or [""])
        widths[i] = min(natural[i], max(room * natural[i] // share, longest_word))
    return widths


def _wrapped(row: Sequence[str], widths: Sequence[int], wraps: Collection[int], numbers: Collection[int]) -> list[str]:
    """A row as one or more lines, its ``wraps`` cells wrapped at words to their column's width."""
    parts = [_words(cell, widths[i]) if i in wraps and len(cell) > widths[i] else [cell] for i, cell in enumerate(row)]
    return [_row([part[k] if k < len(part) else "" for part in parts], widths, numbers)
            for k in range(max(map(len, parts)))]


def _words(text: str, width: int) -> list[str]:
    import textwrap  # only for a row that wraps

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _row(cells: Sequence[str], widths: Sequence[int], numbers: Collection[int]) -> str:
    return GAP.join(
        cell.rjust(width) if i in numbers else cell.ljust(width) for i, (cell, width) in enumerate(zip(cells, widths))
    ).rstrip()
