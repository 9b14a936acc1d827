"""A job's ``[provider]`` checked: its kind, URL, price, key variable and shared queue's name.

The checks a type cannot make (``job_values.typed`` made those), each a
JobError saying what and where, before the store is touched.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx

from . import pricing, words
from .errors import JobError

if TYPE_CHECKING:
    from .jobs import ProviderConfig

#: Providers that call (one request, one answer) and those that submit a task and poll it.
PROVIDER_KINDS = ("openai-chat", "openai-batch", "anthropic-messages", "anthropic-batch")
#: A shared queue's name: what ``runner queue`` commands take, one word.
QUEUE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.:-]*"


def check(provider: ProviderConfig, where: str) -> None:
    """Refuse a provider whose values cannot work (a JobError naming the key)."""
    if provider.kind not in PROVIDER_KINDS:
        raise JobError(f"{where}: {words.unknown('kind', provider.kind, PROVIDER_KINDS)}")
    try:
        httpx.URL(provider.base_url)
    except httpx.InvalidURL as exc:  # raised later when the run builds its client, as a traceback
        raise JobError(f"{where}: 'base_url' is not a URL ({exc})") from exc
    pricing.read(provider.price, where)
    # A name that the shell could not export is a typo (or a pasted key), never a variable.
    if provider.api_key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", provider.api_key_env):
        raise JobError(
            f"{where}: 'api_key_env' must be the name of the environment variable that holds the key "
            "(letters, digits, _), not the key or anything else (its value is not shown)"
        )
    if provider.queue and not re.fullmatch(QUEUE_NAME, provider.queue):
        raise JobError(f"{where}: 'queue' must be one word of letters, digits and _ . : - (say \"openai-main\"), "
                       f"not {provider.queue!r}")
