"""Plain columns for a terminal: widths from the data, numbers to the right, long text wrapped to fit.

What ``runner status`` and ``runner failures`` print, without rich (whose
import alone costs these commands more than the rest of their work). Every
width is a display width, counted in terminal cells: a wide character
(Chinese, Japanese, Korean, an emoji: East Asian width W or F) takes two, a
mark (Mn, Me: an accent, a Thai vowel sign, a variation selector) or a
format character (Cf: a zero-width joiner) none, anything else one, so
Chinese, Cyrillic and Thai keys line up as Latin ones do; the characters a
zero-width joiner joins (an emoji sequence such as 👩‍💻) are one character,
as wide as the first, and a line is never cut inside one. A table wider
than the terminal wraps its text columns, each line under its own column:
at spaces, and inside a run of wide characters between any two of them
(Chinese has no spaces), never before punctuation;
a Latin word is kept whole while the table fits with it, and cut only when
it alone is wider than its column. A header is never wrapped, and a wrapped
column never narrower than its header or ``FLOOR`` cells: when even that
does not fit, the rows are wider than the terminal (a wide row still reads;
a column one character wide does not). Without a terminal (a pipe, a file)
nothing wraps: a row is one line. Outside text is shown as it is, its
control characters (a newline, an escape sequence, a bidirectional
override) as spaces, so that nothing it holds can move the cursor or
reorder a line; only the joiners (U+200C, U+200D) are kept.
"""

from __future__ import annotations

import shutil
import unicodedata  # a C module: no cost to a cold start
from collections.abc import Collection, Iterator, Sequence

import click

#: Between two columns.
GAP = "  "
#: What a terminal draws in no cells of its own: marks (Mn, Me) and format characters (Cf).
NO_CELLS = ("Mn", "Me", "Cf")
#: The zero-width joiner: the character after it is drawn as one with the one before it.
ZWJ = "\u200d"
#: The format characters outside text keeps: the joiners (non-joining, joining).
JOINERS = "\u200c" + ZWJ
#: The fewest cells a wrapped column narrows to (or its header's width, if wider): a word this long stays whole.
FLOOR = 10


def shown(text: str) -> str:
    """``text`` on one line, as it is, every run of whitespace or control characters one space (joiners kept)."""
    return " ".join("".join(ch if ch.isprintable() or ch in JOINERS else " " for ch in text).split())


def width() -> int:
    """The terminal's width (``COLUMNS`` first), or 0 without a terminal: nothing wraps."""
    return shutil.get_terminal_size((0, 0)).columns


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes: two for a wide character, none for a mark or a format character."""
    return sum(map(_cells, _characters(text)))


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "", caption: str = "",
    numbers: Collection[int] = (), wraps: Collection[int] = (), bold: Collection[int] = (), within: int = 0,
) -> list[str]:
    """The lines of a table: its title, header, a rule, its rows (``bold`` by index) and caption, centred on it.

    ``numbers``: the columns aligned right; ``wraps``: the columns wrapped
    when the table is wider than ``within`` (0: never), as is a title or a
    caption wider than ``within``.
    """
    texts = [[shown(cell) for cell in row] for row in rows]
    widths = _fit([max(map(cells, column)) for column in zip(header, *texts)], [list(header), *texts], wraps, within)
    across = sum(widths) + len(GAP) * (len(widths) - 1)
    lines = _centred(title, across, within)
    lines.append(click.style(_row(header, widths, numbers), bold=True))  # a header is never wrapped
    lines.append("─" * across)
    for index, row in enumerate(texts):
        for line in _wrapped(row, widths, wraps, numbers):
            lines.append(click.style(line, bold=True) if index in bold else line)
    lines += [click.style(line, dim=True) for line in _centred(caption, across, within)]
    return lines


def _characters(text: str) -> Iterator[str]:
    """``text`` as a terminal draws it, character by character: each with the marks and format characters after
    it, and with whatever a zero-width joiner joins on."""
    character = ""
    for ch in text:
        if character and (character[-1] == ZWJ or unicodedata.category(ch) in NO_CELLS):
            character += ch
            continue
        if character:
            yield character
        character = ch
    if character:
        yield character


def _cells(character: str) -> int:
    """A character's cells (as :func:`_characters` makes them): its first code point's."""
    if unicodedata.category(character[0]) in NO_CELLS:
        return 0
    return 2 if unicodedata.east_asian_width(character[0]) in ("W", "F") else 1


def _fit(natural: list[int], rows: list[list[str]], wraps: Collection[int], within: int) -> list[int]:
    """Column widths: as the data asks, the ``wraps`` columns narrowed (by their share) to fit ``within``.

    Each keeps its longest unbreakable piece (a Latin word, a wide
    character) whole if the table then fits; if not, it may go down to its
    floor (its header's width, and at least ``FLOOR`` cells), where a
    longer word is cut. It goes no narrower: when even the floors do not
    fit, the rows are wider than ``within``.
    """
    across = sum(natural) + len(GAP) * (len(natural) - 1)
    if not within or not wraps or across <= within:
        return natural
    room = max(within - (across - sum(natural[i] for i in wraps)), 0)
    share = sum(natural[i] for i in wraps)
    floors = {i: max(cells(rows[0][i]), FLOOR) for i in wraps}
    for keep in (True, False):
        widths = list(natural)
        for i in wraps:
            least = max([floors[i], *(_longest_piece(row[i]) for row in rows[1:])]) if keep else floors[i]
            widths[i] = min(natural[i], max(room * natural[i] // share, least))
        if sum(widths) - sum(natural) + across <= within:
            break
    return widths


def _longest_piece(text: str) -> int:
    return max((cells(piece) for word in text.split() for piece in _pieces(word)), default=0)


def _pieces(word: str) -> Iterator[str]:
    """``word`` cut where a line may break inside it: before or after a wide character, never before punctuation."""
    characters = list(_characters(word))
    piece = characters[0]
    for before, character in zip(characters, characters[1:]):
        if (_cells(before) == 2 or _cells(character) == 2) and not unicodedata.category(character[0]).startswith("P"):
            yield piece
            piece = ""
        piece += character
    yield piece


def _lines(text: str, width: int) -> list[str]:
    """``text`` in lines at most ``width`` cells wide: words joined by a space, a word's pieces by nothing."""
    lines: list[str] = []
    line, used = "", 0
    for word in text.split():
        for k, piece in enumerate(_pieces(word)):
            space = 1 if line and k == 0 else 0
            size = cells(piece)
            if used + space + size <= width:
                line, used = line + " " * space + piece, used + space + size
                continue
            if line:
                lines.append(line)
            *whole, line = _cut(piece, width)
            lines += whole
            used = cells(line)
    return [*lines, line]


def _cut(piece: str, width: int) -> list[str]:
    """A piece wider than ``width`` in parts that fit (a character at least, however narrow the column)."""
    parts, used = [""], 0
    for character in _characters(piece):
        size = _cells(character)
        if parts[-1] and used + size > width:
            parts.append("")
            used = 0
        parts[-1] += character
        used += size
    return parts


def _wrapped(row: Sequence[str], widths: Sequence[int], wraps: Collection[int], numbers: Collection[int]) -> list[str]:
    """A row as one or more lines, its ``wraps`` cells wrapped to their column's width."""
    parts = [_lines(cell, widths[i]) if i in wraps and cells(cell) > widths[i] else [cell] for i, cell in enumerate(row)]
    return [_row([part[k] if k < len(part) else "" for part in parts], widths, numbers)
            for k in range(max(map(len, parts)))]


def _row(texts: Sequence[str], widths: Sequence[int], numbers: Collection[int]) -> str:
    return GAP.join(_padded(text, width, right=i in numbers) for i, (text, width) in enumerate(zip(texts, widths))).rstrip()


def _padded(text: str, width: int, *, right: bool) -> str:
    space = " " * max(width - cells(text), 0)
    return space + text if right else text + space


def _centred(text: str, across: int, within: int) -> list[str]:
    """A title or caption centred on the table (as ``str.center`` would), in lines that fit ``within`` (0: any).

    A table wider than ``within`` (its rows overflow) has it centred on ``within`` instead.
    """
    if not text:
        return []
    across = min(across, within or across)
    lines = _lines(text, within) if within and cells(text) > within else [text]
    return [(" " * _left(across - cells(line), across) + line).rstrip() for line in lines]


def _left(margin: int, across: int) -> int:
    return max(margin // 2 + (margin & across & 1), 0)
