"""The breaker's first address, kept for the code that imports it from here: :mod:`runner.rules.breaker` holds it."""

from __future__ import annotations

from .rules.breaker import OPEN_AFTER, Control, after_success, after_transport_failure, opened, resumed

__all__ = ["OPEN_AFTER", "Control", "after_success", "after_transport_failure", "opened", "resumed"]
