"""When to poll a submitted task again: its end noticed within max(10 s, 10 % of the time waited so far).

A Batch API batch takes what it takes: seconds on the simulator, up to 24 h
upstream. Polls that double their pause (at 0, 1, 3, 7, 15 s...) see a batch
up to twice its time late. Here the pause before the next poll, ``waited``
seconds after the wait began (the first poll is at once), is

    pause(waited) = min(max(FIRST, GROWTH · waited), max(FLOOR, SHARE · waited))

| waited     | pause                     | polls (at 0, 1, 2, 3, 4.5, 6.75, 10.1 s...) |
|------------|---------------------------|---------------------------------------------|
| 0 - 2 s    | 1 s                       | a short batch is seen about a second late   |
| 2 - 20 s   | half the time waited      | at most half its time late                  |
| 20 - 100 s | 10 s (``FLOOR``)          | at most 10 s late                           |
| past 100 s | 10 % of the time waited   | at most 10 % late; 24 h take ~90 polls      |

A task that ends between two polls is noticed by the second, whose pause
was at most max(``FLOOR``, ``SHARE`` · waited) after a poll made when less
than the task's time had passed: at most max(10 s, 10 % of its time) late.

After a failed poll (or look-up) the pause is at least the request back-off,
doubling with each failure in a row up to ``max_backoff``: an upstream that
keeps failing is not asked faster than the job's retry limits say.

Pure: the time waited and the failures in a row are passed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bounds import Backoff

#: The shortest pause between two polls, in seconds.
FIRST = 1.0
#: Early on, the pause grows with the time waited: at most this share of it late.
GROWTH = 0.5
#: A task's end is noticed at most this many seconds late, or ...
FLOOR = 10.0
#: ... at most this share of the time waited so far, whichever is longer.
SHARE = 0.1


def lag_bound(waited: float) -> float:
    """How late a task's end may be noticed, ``waited`` seconds into the wait: max(``FLOOR``, ``SHARE`` · waited)."""
    return max(FLOOR, SHARE * waited)


def pause(waited: float, *, failures: int = 0, limits: Backoff | None = None) -> float:
    """Seconds until the next poll, ``waited`` seconds after the wait began, ``failures`` polls failed in a row."""
    scheduled = min(max(FIRST, GROWTH * waited), lag_bound(waited))
    if failures == 0 or limits is None:
        return scheduled
    return max(scheduled, min(limits.backoff * 2.0 ** min(failures - 1, 30), limits.max_backoff))


def schedule(until: float) -> list[float]:
    """The times of the polls of a wait of ``until`` seconds, the first at 0 (none failing)."""
    times = [0.0]
    while times[-1] < until:
        times.append(times[-1] + pause(times[-1]))
    return times
