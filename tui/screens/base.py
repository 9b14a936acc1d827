"""A screen over the store: it polls with a thread worker and renders the data the worker posts.

Reads and a person's commands run in ``@work(thread=True)`` workers that hand
them to the app's one store thread, then post a message with plain data (or
the core's error as text); the screen renders it on the UI thread. Nothing
here blocks the UI, and a ``RunnerError`` becomes a notification.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from textual import work
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from runner import words
from runner.errors import RunnerError
from runner.store import Store, views

if TYPE_CHECKING:
    from tui.app import RunnerApp

T = TypeVar("T")
U = TypeVar("U")

#: Seconds between two reads of the store while a screen is shown.
REFRESH_SECONDS = 0.5

#: A read of the store at a time: ``read(store, now)``.
Read = Callable[[Store, float], T]
#: A person's command: ``act(store, now)`` returns what to tell them.
Act = Callable[[Store, float], str]


def unless_obeyed(store: Store, name: str, now: float, *, does: str, the_next: str = "") -> str:
    """After a command: nothing while an engine works on the run; else the command that goes on, and what it does."""
    if views.engine_alive(store, name, now=now):
        return ""
    return f". No engine is running: {the_next}`{words.go_on(store.job(name), store.path)}` {does}"


class StoreScreen(Screen[None], Generic[T]):
    """Polls the store about twice a second while shown, and renders what it read."""

    class Loaded(Message):
        """A worker read the screen's data."""

        def __init__(self, data: Any) -> None:
            super().__init__()
            self.data = data

    class Done(Message):
        """A command was written to the store; ``text`` tells the person what it did."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Failed(Message):
        """The core refused a read or a command; ``error`` says why."""

        def __init__(self, error: str, *, command: bool) -> None:
            super().__init__()
            self.error = error
            self.command = command

    def __init__(self) -> None:
        super().__init__()
        self._timer: Timer | None = None
        #: A read is under way; ``_again``: read once more when it ends (a command changed the store).
        self._reading = False
        self._again = False
        #: The last read failure told, so that a failing read is told once, not twice a second.
        self._told: str | None = None

    @property
    def runner(self) -> RunnerApp:
        return cast("RunnerApp", self.app)

    def read(self) -> Read[T]:
        """What this screen reads, as a function of the store and the time; called on the UI thread."""
        raise NotImplementedError

    def show(self, data: T) -> None:
        """Render what a worker read."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self._timer = self.set_interval(REFRESH_SECONDS, self.reload)
        self.reload()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
        self.reload()

    def reload(self) -> None:
        """Read the store again, unless a read is under way (then once more after it)."""
        if self._reading:
            self._again = True
            return
        self._reading = True
        self._load(self.read())

    def command(self, act: Act) -> None:
        """Write a person's command to the store on a worker; tell them the outcome."""
        self._command(act)

    def ask(self, read: Read[U], question: Callable[[U], ModalScreen[bool]],
            then: Callable[[bool | None], None]) -> None:
        """Read what a question shows (a re-run's plan) on a worker, then ask it; ``then`` gets the answer."""
        self._ask(read, question, lambda _, yes: then(yes))

    def ask_about(self, read: Read[U], question: Callable[[U], ModalScreen[bool] | str],
                  then: Callable[[U, bool | None], None]) -> None:
        """As :meth:`ask`, and ``then`` gets what was read with the answer (to do what was shown); a question that
        is a text (nothing to ask about) is told, with no dialog."""
        self._ask(read, question, then)

    @work(thread=True, group="load")
    def _load(self, read: Read[T]) -> None:
        app = self.runner
        try:
            data = app.connection.call(lambda store: read(store, app.clock()))
        except RunnerError as exc:
            self.post_message(self.Failed(str(exc), command=False))
        else:
            self.post_message(self.Loaded(data))

    @work(thread=True, group="command")
    def _command(self, act: Act) -> None:
        app = self.runner
        try:
            text = app.connection.call(lambda store: act(store, app.clock()), write=True)
        except RunnerError as exc:
            self.post_message(self.Failed(str(exc), command=True))
        else:
            self.post_message(self.Done(text))

    @work(thread=True, group="ask")
    def _ask(self, read: Read[U], question: Callable[[U], ModalScreen[bool] | str],
             then: Callable[[U, bool | None], None]) -> None:
        app = self.runner
        try:
            data = app.connection.call(lambda store: read(store, app.clock()))
        except RunnerError as exc:
            self.post_message(self.Failed(str(exc), command=True))
            return

        def show() -> None:
            asked = question(data)
            if isinstance(asked, str):
                self.notify(asked, title="runner")
            else:
                app.push_screen(asked, lambda yes: then(data, yes))

        app.call_from_thread(show)

    def on_store_screen_loaded(self, message: Loaded) -> None:
        self._told = None
        self.show(cast(T, message.data))
        self._reload_if_asked()

    def on_store_screen_failed(self, message: Failed) -> None:
        if message.command or message.error != self._told:
            self.notify(message.error, title="runner", severity="error", timeout=8)
        if not message.command:
            self._told = message.error
            self._reload_if_asked()

    def on_store_screen_done(self, message: Done) -> None:
        self.notify(message.text, title="runner")
        self.reload()

    def _reload_if_asked(self) -> None:
        self._reading = False
        if self._again:
            self._again = False
            self.reload()
