"""A person's word on which items go first: ``runner prioritize``, one transaction, read by the next claim.

An item's ``priority`` is no state (its statement is the items module's, the
one writer of ``items``): it orders the claim (the claim index
holds it, :mod:`runner.store.migrations_queue`), so raising it moves no item
and logs no event of an item; the command is logged in ``commands``. Items
in a batch already formed keep their place in it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..errors import RunError
from . import items
from .commands import LOG_COMMAND, Commands

class Priorities(Commands):
    """The verb that gives items a priority."""

    def prioritize(self, run_id: int, *, keys: Sequence[str], group: str | None, to: int, now: float) -> int:
        """Give the items named by ``keys`` (and in ``group``, when given) the priority ``to``; how many.

        Neither keys nor a group is refused (it would name every item), as is
        a key the run does not have (``RunError``); nothing changes then.
        """
        if not keys and group is None:
            raise RunError("name the items to prioritize: KEYS, --group, or both")
        params = {"run": run_id, "keys": json.dumps(list(keys)), "group": group, "to": to}
        with self.write() as conn:
            self.refuse_unknown(run_id, keys)
            changed = conn.execute(items.PRIORITIZE, params).rowcount
            asked = {"keys": list(keys), "group": group, "to": to}
            conn.execute(LOG_COMMAND, (run_id, "prioritize", json.dumps(asked), now, now, f"{changed} items"))
        return int(changed)
