"""Widgets that render what a worker read; none of them reads the store or holds a rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.padding import Padding
from rich.cells import cell_len
from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable, Footer
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import CursorType

from runner.store.answers import STATES, BatchInFlight, LogLine, StageTally
from runner.store.worker_rows import WorkerShown

from . import format

#: A table row: its key and its cells (plain strings are shown as they are, never as markup).
Row = tuple[str, Sequence[str | Text]]


class Table(DataTable[RenderableType]):
    """A table that renders rows from data, only when the data or its width changed, keeping the cursor on its row.

    Columns get the width of their widest cell, set when the rows are, so that
    a header never shows the widths of the rows before. One space, not
    DataTable's two, parts two columns: the group table's nine columns fit
    in 80 cells. A cell of lines (a ``Text`` with a newline) makes its row
    as tall as it; a label of lines, the header. The ``WRAP`` column (a message) takes the width the others
    leave, at least ``WRAP_MIN``, and its text wraps at spaces: a row grows
    as tall as its message, and a message reads whole, never cut mid-word.
    """

    COLUMNS: ClassVar[Sequence[str]] = ()
    CURSOR: ClassVar[CursorType] = "none"
    WRAP: ClassVar[str | None] = None
    WRAP_MIN: ClassVar[int] = 20

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type=self.CURSOR, cell_padding=0)
        #: The columns shown: the class's, unless a table shows more for some data (a pipeline's batches).
        self.columns_shown: Sequence[str] = self.COLUMNS
        self._shown: tuple[object, int] | None = None
        self._rows: Sequence[Row] = ()
        self._widths: list[int] = []

    def label(self, column: str) -> Text:
        return Text(column)

    def on_mount(self) -> None:
        self._set_columns([_width(self._label(c)) for c in self.columns_shown])

    def on_resize(self) -> None:
        if self._shown is not None:
            self.fill(self._shown[0], self._rows)

    def _label(self, column: str) -> Text:
        return _spaced(self.label(column))

    def fill(self, data: object, rows: Sequence[Row]) -> None:
        room = self.scrollable_content_region.width
        if (data, room) == self._shown and self.row_count == len(rows):
            return
        self._shown, self._rows = (data, room), rows
        keep = self.cursor_key
        texts = [(key, [c if isinstance(c, Text) else Text(c.replace("\n", " ")) for c in cells]) for key, cells in rows]
        widths = [
            max([_width(self._label(column)), *(_width(cells[i]) + 1 for _, cells in texts)])
            for i, column in enumerate(self.columns_shown)
        ]
        wrap = None if self.WRAP is None else self.columns_shown.index(self.WRAP)
        if wrap is not None:
            others = sum(widths) - widths[wrap]
            widths[wrap] = min(widths[wrap], max(room - others, self.WRAP_MIN))
        if widths != self._widths:
            self._set_columns(widths)
        else:
            self.clear()
        for key, cells in texts:
            shown: list[RenderableType] = [_spaced(c) for c in cells]
            if wrap is not None:
                shown[wrap] = _wrapped(cells[wrap])
            tall = wrap is not None or any("\n" in c.plain for c in cells)
            self.add_row(*shown, key=key, height=None if tall else 1)
        if keep is not None and keep in {key for key, _ in rows}:
            self.move_cursor(row=self.get_row_index(keep), animate=False)

    def _set_columns(self, widths: list[int]) -> None:
        self.clear(columns=True)
        labels = [self._label(column) for column in self.columns_shown]
        for column, label, width in zip(self.columns_shown, labels, widths, strict=True):
            self.add_column(label, key=column, width=width)
        self.header_height = max(len(label.split("\n")) for label in labels)
        self._widths = widths

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor, if there is one."""
        if not self.row_count or self.cursor_row >= self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return None if key is None else str(key)


def _width(cell: Text) -> int:
    """The cells its widest line takes (a cell of lines shows each on its own)."""
    return max(line.cell_len for line in cell.split("\n"))


def _wrapped(cell: Text) -> Padding:
    """A cell that wraps at spaces (a word longer than the column folds), every line one space in."""
    text = cell.copy()
    text.no_wrap, text.overflow = False, "fold"
    return Padding(text, (0, 0, 0, 1))


def _spaced(cell: Text) -> Text:
    """A cell with the one space that parts it from the column before, on each of its lines."""
    if "\n" in cell.plain:
        return Text("\n").join(_spaced(line) for line in cell.split("\n"))
    spaced = cell.copy()
    spaced.pad_left(1)
    return spaced


class StateBar(Widget):
    """The seven counts as one bar, a colour per state, with the numbers beneath."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._counts: dict[str, int] = {}

    def show(self, counts: Mapping[str, int]) -> None:
        if dict(counts) != self._counts:
            self._counts = dict(counts)
            self.refresh(layout=True)

    def render(self) -> Text:
        width = max(self.size.width, len(STATES))
        bar = Text()
        total = sum(self._counts.values())
        if total:
            for state, cells in bar_cells(self._counts, width).items():
                bar.append("█" * cells, style=format.STATE_STYLE[state])
        else:
            bar.append("░" * width, style="grey30")
        entries = [
            Text.assemble(("■ ", format.STATE_STYLE[state]), f"{state} ", (f"{self._counts.get(state, 0):,}", "bold"))
            for state in STATES
        ]
        return Text("\n").join([bar, *legend_lines(entries, width)])


def legend_lines(entries: Sequence[Text], width: int) -> list[Text]:
    """The legend's entries two spaces apart, in as many lines of ``width`` as they need, none split."""
    lines = [Text()]
    for entry in entries:
        if lines[-1].cell_len and lines[-1].cell_len + 2 + entry.cell_len > width:
            lines.append(Text())
        if lines[-1].cell_len:
            lines[-1].append("  ")
        lines[-1].append_text(entry)
    return lines


def bar_cells(counts: Mapping[str, int], width: int) -> dict[str, int]:
    """Cells per state, in proportion, summing to ``width``; a state with items gets at least one."""
    total = sum(counts.values())
    shares = {state: width * counts.get(state, 0) / total for state in STATES}
    cells = {state: max(int(share), 1 if counts.get(state, 0) else 0) for state, share in shares.items()}
    by_remainder = sorted((s for s in STATES if counts.get(s, 0)), key=lambda s: cells[s] - shares[s])
    i = 0
    while sum(cells.values()) < width:
        cells[by_remainder[i % len(by_remainder)]] += 1
        i += 1
    while sum(cells.values()) > width:
        cells[max(cells, key=lambda s: cells[s])] -= 1
    return cells


class CountTable(Table):
    """Items by one thing (the first column) and state, a row each, with their total."""

    def label(self, column: str) -> Text:
        return format.state(column)

    def show(self, counted: Mapping[str, Mapping[str, int]]) -> None:
        rows: list[Row] = []
        for name, counts in counted.items():
            cells = [Text(format.count(counts[s]), justify="right") for s in STATES]
            rows.append((name, [name, *cells, Text(f"{sum(counts.values()):,}", justify="right")]))
        self.fill(counted, rows)


class GroupTable(CountTable):
    """Items by group and state."""

    COLUMNS = ("group", *STATES, "total")


class StageTable(Table):
    """A pipeline's stages in order, a row each: the items at it now by state (``completed``: past the stages
    left, counted where they ended), and those that passed it (their result saved there) and skipped it (its
    ``when`` false), so that a stage every item passed is not blank. Four columns: it fits 80 cells."""

    COLUMNS = ("stage", "at it now", "passed", "skipped")
    WRAP = "at it now"
    WRAP_MIN = 16
    #: Never focused: it sits in the run's summary, and the groups below keep the keyboard as before.
    can_focus = False

    def show(self, tallies: Sequence[StageTally]) -> None:
        self.fill(tallies, [
            (t.stage, [
                t.stage, Text("  ").join(Text(f"{n:,} {s}", style=format.STATE_STYLE[s]) for s, n in t.here),
                Text(f"{t.passed:,}", justify="right"), Text(format.count(t.skipped), justify="right"),
            ])
            for t in tallies
        ])


class BatchTable(Table):
    """The batches formed or sent and not yet settled; a pipeline's with the stage each calls for."""

    COLUMNS = ("batch", "group", "state", "items", "age", "upstream id", "retries")

    def show(self, batches: Sequence[BatchInFlight], *, staged: bool = False) -> None:
        self.columns_shown = ("batch", "stage", *self.COLUMNS[1:]) if staged else self.COLUMNS
        self.fill((batches, staged), [
            (str(b.id), [
                str(b.id) + ("" if not b.round else f" (split {b.round})"), *([b.stage] if staged else []), b.group,
                format.state(b.state), Text(str(b.size), justify="right"),
                Text(format.duration(b.age), justify="right"), b.upstream_id or "", format.count(b.retries),
            ])
            for b in batches
        ])


class WorkerTable(Table):
    """The run's workers when several work it (issue 20), a row each: where it runs, its last heartbeat, whether it
    lives, and the batches and items it holds. A dead one (its heartbeat late) holds its batches until a live
    worker notices and takes them over."""

    COLUMNS = ("worker", "heartbeat", "state", "batches", "items")
    can_focus = False

    def show(self, workers: Sequence[WorkerShown]) -> None:
        self.fill(workers, [
            (str(i), [
                f"{w.host}:{w.pid}", Text(format.ago(w.heartbeat_age), justify="right"),
                Text("alive", style="green") if w.alive else Text("dead", style="bold red"),
                Text(f"{w.batches:,}", justify="right"), Text(f"{w.items:,}", justify="right"),
            ])
            for i, w in enumerate(workers)
        ])


class EventLog(Table):
    """The run's last state changes and commands, newest first."""

    COLUMNS = ("ago", "what", "detail")
    WRAP = "detail"

    def show(self, lines: Sequence[LogLine]) -> None:
        self.fill(lines, [
            (str(i), [
                Text(format.duration(line.age), justify="right"),
                Text(line.what, style="bold" if line.tone == "person" else format.STATE_STYLE.get(line.tone, "")),
                line.detail,
            ])
            for i, line in enumerate(lines)
        ])


class KeysFooter(Footer):
    """A compact footer that shows its keys in their order while they fit beside the palette's key, and none cut:
    a key with no room is left out (the command palette has it)."""

    def __init__(self) -> None:
        super().__init__(compact=True)

    def compose(self) -> Iterable[Widget]:
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey) and not w.has_class("-command-palette")]
        room = (self.size.width or self.app.size.width) - sum(
            _key_width(w) + 1 for w in widgets if isinstance(w, FooterKey) and w.has_class("-command-palette"))
        for key in keys:
            room -= _key_width(key) + 1  # a key and the space after it
            key.display = room >= 0
        return widgets


def _key_width(key: FooterKey) -> int:
    """The cells a compact footer's key takes: its key, a space, its description."""
    return cell_len(key.key_display) + 1 + cell_len(key.description)
