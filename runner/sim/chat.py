"""Chat completion bodies: what a request carries, and the answer to it.

Shared by the chat completions route and the batches, so that a batch line
is answered exactly as the same body sent to ``/v1/chat/completions``.
"""

from __future__ import annotations

from typing import Any

from runner import protocol
from runner.sim import answers
from runner.sim.faults import Fault
from runner.sim.replies import Reply

NO_ITEMS = "no batch items found in the user message"
NOT_CHAT = "the body needs a 'model' string and a non-empty 'messages' list"


def is_chat_body(body: Any) -> bool:
    """Whether ``body`` has a ``model`` string and a non-empty list of message objects."""
    if not isinstance(body, dict):
        return False
    messages = body.get("messages")
    return (
        isinstance(body.get("model"), str)
        and isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) for m in messages)
    )


def items_of(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The batch items in the last user message of a chat body, if any."""
    user = [m for m in body["messages"] if m.get("role") == "user"]
    return protocol.find_items(text(user[-1].get("content"))) if user else None


def completion(
    number: int,
    body: dict[str, Any],
    items: list[dict[str, Any]],
    fault: Fault | None,
    *,
    created: float,
) -> Reply:
    """The 200 answer to a well-formed batch request, billing all its items."""
    response_format = body.get("response_format")
    content, finish_reason = answers.reply(
        items, response_format if isinstance(response_format, dict) else None, fault
    )
    prompt_tokens = tokens(sum(len(text(m.get("content"))) for m in body["messages"]))
    completion_tokens = tokens(len(text(content)))
    payload = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(created),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_runner_sim",
    }
    bill = tuple(item["id"] for item in items)
    return Reply(200, payload, headers={"x-request-id": f"req_{number}"}, bill=bill)


def text(content: Any) -> str:
    """A message's text: a plain string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def tokens(chars: int) -> int:
    """Roughly four characters to a token, as OpenAI's rule of thumb has it."""
    return -(-chars // 4)
