"""The simulator: an OpenAI-compatible upstream on loopback, for demos and tests.

It answers chat completions that follow the batch protocol
(:mod:`runner.protocol`), with optional latency and a seedable fault plan
(:mod:`runner.sim.faults`), and keeps a charge ledger of billable requests
per item key, so that tests can prove nothing was paid twice. It also plays
OpenAI's Files and Batches APIs (:mod:`runner.sim.batch_routes`), whose
batches run on the simulator's clock (:mod:`runner.sim.clock`). Besides the
OpenAI routes it serves ``GET /_sim/ledger``, ``POST /_sim/reset``, ``GET``
and ``PUT /_sim/faults``, and ``GET`` and ``POST /_sim/clock``.
"""

from __future__ import annotations

from runner.sim.answers import answer
from runner.sim.clock import Clock
from runner.sim.faults import FAULTS, SCOPES, Scope, load_plan, validate_plan
from runner.sim.ledger import Call, Ledger
from runner.sim.server import Simulator

__all__ = [
    "FAULTS",
    "SCOPES",
    "Call",
    "Clock",
    "Ledger",
    "Scope",
    "Simulator",
    "answer",
    "load_plan",
    "validate_plan",
]
