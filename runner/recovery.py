"""What a person is asked after a crash, and what confirming releases.

When an engine starts on a run that a dead engine left, items it had sent
(``running``, no output) may or may not have reached the upstream. They are
held, never re-sent on their own; each is shown with its case:

- ``poll``: the upstream task id was saved: confirming polls that task, no
  new task, no new charge; a task the upstream no longer knows fails the
  items (``not_found``), never replaced by a new one.
- ``adopt``: a task's create was sent but its id was not saved:
  confirming looks for it by its reference and polls it; if the upstream
  has none once a create sent then can no longer land (``lands_by``: the
  provider's timeout and ``create_margin`` after it was sent, saved then;
  the engine keeps looking until then), nothing was created and the items are
  sent again, which cannot charge twice.
- ``resubmit``: a call was made and its answer lost: confirming sends the
  items again, which may run and charge twice.

Items whose input changed are never restored (``input_changed``, see
``RunStore.add_items``), and saved outputs are completed locally with no call
(``Engine``); neither needs a person. The order of all these cases is
:func:`runner.rules.triage.triage`'s; a held item's case is what it says
confirming does.
"""

from __future__ import annotations

from collections.abc import Sequence
from .model import Case, HeldItem
from .store.protocol import RunStore
from .store.views import held

__all__ = ["Case", "HeldItem", "confirm", "held"]

def confirm(store: RunStore, name: str, *, now: float, keys: Sequence[str] = ()) -> dict[Case, int]:
    """Release held items (all, or ``keys``) for the engine: poll, adopt, or send again.

    Returns how many of each case were released. One transaction.
    """
    polled, adopted, resent = store.confirm(store.run_id(name), keys=keys, now=now)
    return {Case.POLL: polled, Case.ADOPT: adopted, Case.RESUBMIT: resent}
