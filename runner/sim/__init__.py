"""The simulator: an OpenAI-compatible upstream on loopback, for demos and tests.

It answers chat completions that follow the batch protocol
(:mod:`runner.protocol`), with optional latency and a seedable fault plan
(:mod:`runner.sim.faults`), and keeps a charge ledger of billable requests
per item key, so that tests can prove nothing was paid twice. Besides the
OpenAI routes it serves ``GET /_sim/ledger``, ``POST /_sim/reset``, and
``GET`` and ``PUT /_sim/faults``.
"""

from __future__ import annotations

from runner.sim.answers import answer
from runner.sim.faults import FAULTS, load_plan, validate_plan
from runner.sim.ledger import Call, Ledger
from runner.sim.server import Simulator

__all__ = ["FAULTS", "Call", "Ledger", "Simulator", "answer", "load_plan", "validate_plan"]
