"""What each provider kind gets by default for the ``[provider]`` keys a job leaves out: OpenAI's API or Anthropic's.

A job's (or a stage's) ``base_url`` and ``model``, given nowhere, are its
kind's: OpenAI's (``ProviderConfig``'s own defaults) for the ``openai-*``
kinds, Anthropic's for ``anthropic-messages`` and ``anthropic-batch``. Their
batching defaults are :mod:`runner.batch_api`'s, applied here too (:func:`applied`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from . import batch_api

if TYPE_CHECKING:
    from .jobs import ProviderConfig

#: The kinds whose upstream is not OpenAI's, and the host and model they default to.
OWN = {
    kind: {"base_url": "https://api.anthropic.com", "model": "claude-haiku-4-5"}
    for kind in ("anthropic-messages", "anthropic-batch")
}


def defaults(provider: ProviderConfig, kind: str, *, given: Collection[str]) -> ProviderConfig:
    """``provider`` of ``kind``, its ``base_url`` and ``model`` not ``given`` the kind's own (OpenAI's by default)."""
    plain = type(provider)()
    own = OWN.get(kind, {"base_url": plain.base_url, "model": plain.model})
    return dataclasses.replace(provider, base_url=provider.base_url if "base_url" in given else own["base_url"],
                               model=provider.model if "model" in given else own["model"])


def applied(sections: Mapping[str, Any], data: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A job's sections, its ``[provider]`` and ``[batch]`` keys not given in ``data`` (the job file's tables) its
    kind's own; ``where`` names the ``[batch]`` in a refusal (:func:`runner.batch_api.limits_for`)."""
    kind = sections["provider"].kind
    provider = defaults(sections["provider"], kind, given=data.get("provider", {}))
    return {**sections, "provider": provider,
            "batch": batch_api.limits_for(kind, sections["batch"], given=data.get("batch", {}), where=where)}
