"""The engine: forms batches, holds the slots, and moves items through their states.

It reads as a turn, then a slot:

- the turn (:mod:`.loop`): beat the lease, read the run's controls, ask the
  gate (:mod:`runner.rules.gate`) how many batches may start, form them and
  give each a slot; with nothing in flight, wait for what the store says is
  still to come, or stop;
- the slot (:mod:`.slot`): start (``running``, attempts + 1, committed
  *before* the call), call or submit, receive (the output committed as
  ``received`` before validation), judge (:mod:`runner.rules.judge`), save.

Every store step is one committed transaction, run on the event loop, so no
other step of the engine runs while one is being written: what a slot reads
of the run (stopped, breaker, controls) just before it starts a batch still
holds when it does. While another process holds the store's write lock, the
steps wait their turn in order without holding up the loop, and a start asks
the gate again after its wait (:mod:`runner.busy`). (A writer thread with its
own connection was measured slower on 2 cores: the commits rarely met, and
each waited for the GIL.)

Progress and the end of the run are read from the store, never from the
in-memory line of formed batches. Time comes from an injected clock.
"""

from __future__ import annotations

from .loop import Engine, Outcome

__all__ = ["Engine", "Outcome"]
