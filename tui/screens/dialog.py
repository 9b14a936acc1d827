"""The question a person answers once more before money may be spent: yes or no."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class AskScreen(ModalScreen[bool]):
    """Asks once more; dismissed with True only by the confirm button or ``y``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, body: Text, *, warning: str | None = None, yes: str = "Confirm") -> None:
        super().__init__()
        self.question = title
        self.body = body
        self.warning = warning
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Static(Text(self.question, style="bold"), id="ask-title")
            yield Static(self.body, id="ask-body")
            if self.warning:
                yield Static(Text(f"⚠ {self.warning}"), id="ask-warning")
            with Horizontal(id="ask-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error" if self.warning else "primary")
                yield Button("Back (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
