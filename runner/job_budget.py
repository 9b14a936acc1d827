"""A job's ``[budget]`` checked as it is loaded: each limit more than 0, a cost budget only where calls have a price.

A model with no price (neither ``[provider] price`` nor the built-in table)
cannot keep a cost budget: such a job is refused at load, not stopped at its
first batch; a budget of tokens alone (``max_tokens``) needs no price.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import pricing
from .errors import JobError

if TYPE_CHECKING:
    from .jobs import Job


def check(job: Job, where: str) -> None:
    """Refuse a bad ``[budget]`` of ``job`` (a JobError saying what and where)."""
    problem = job.budget.problem()
    if problem:
        raise JobError(f"{where}: {problem}")
    if job.budget.max_cost is None:
        return
    from .jobs import PROVIDER_KINDS  # here: jobs reads its [budget] with this module

    for stage in job.stages:
        if stage.kind in PROVIDER_KINDS and pricing.price_of(stage.provider.price, stage.provider.model) is None:
            raise JobError(f"{where}: max_cost needs a price, and {stage.provider.model} has none; set "
                           "[provider] price, or keep a budget of tokens alone (max_tokens)")
