"""The engine: forms batches, holds the slots, and moves items through their states.

It reads as a turn, then a slot:

- the turn (:mod:`.loop`): beat the lease, read the run's controls, ask the
  gate (:mod:`runner.rules.gate`) how many batches may start, form them and
  give each a slot; with nothing in flight, wait for what the store says is
  still to come, or stop;
- the slot (:mod:`.slot`): start (``running``, attempts + 1, committed
  *before* the call), call or submit, receive (the output committed as
  ``received`` before validation), judge (:mod:`runner.rules.judge`), save.

Every store step is all or nothing (a savepoint of its own), written on
the event loop in line with the other slots' steps asked for meanwhile, in
one transaction and one commit for all (:mod:`runner.busy`: group commit): a step's slot goes on
only once that commit is made, so a batch's call starts only once its own
``running`` is durable and an answer is judged only once it is ``received``.
What a slot reads of the run (stopped, breaker, controls) just before its
start is written still holds when it is. While another process holds the
store's write lock, the steps wait their turn in order without holding up
the loop, and a start asks the gate again before it is written.

Progress and the end of the run are read from the store, never from the
in-memory line of formed batches. Time comes from an injected clock.
"""

from __future__ import annotations

from .loop import Engine
from .outcome import Outcome

__all__ = ["Engine", "Outcome"]
