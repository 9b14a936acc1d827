"""The simulator's clock: real time plus an offset that tests move forward.

Batch timestamps and transitions read this clock, so that a test can finish
a 24-hour batch by advancing it instead of sleeping. Waits are not on it:
the simulator's ``latency`` and the ``timeout`` and ``create_slow`` faults
wait real seconds, which advancing the clock does not cut short (a batch
that ``create_slow`` makes is dated by this clock when it is made).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class Clock:
    """Unix seconds from ``source`` (real time by default), plus an offset.

    The offset only grows, so the clock never runs backwards; it is moved
    under a lock and may be read from any thread.
    """

    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current simulated time, in Unix seconds."""
        with self._lock:
            return self._source() + self._offset

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward and return the new time.

        ValueError for a negative or non-finite number of seconds.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"the clock only moves forward, not by {seconds!r} seconds")
        with self._lock:
            self._offset += seconds
            return self._source() + self._offset
