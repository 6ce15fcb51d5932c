"""The model's view of a session: system prompt, then user and assistant messages in seq order,
with context lines attached to the user message they came with."""
from __future__ import annotations

from server.providers.base import ChatMessage


def user_text(payload: dict) -> str:
    text = payload.get("content", "")
    lines = payload.get("contextLines")
    if lines:
        text = f"{text}\n\nContext:\n" + "\n".join(lines)
    return text


def build_messages(system_prompt: str, events: list[dict], upto_event_id: str, *,
                   include_context: bool = True) -> list[ChatMessage]:
    """Messages up to and including the run's own user event (later ones wait their turn).

    The built-in echo provider answers the user event's content exactly (CONTRACT section 4),
    so it is given the messages without their context lines."""
    messages = [ChatMessage("system", system_prompt)] if system_prompt else []
    for event in events:
        payload = event.get("event") or {}
        if payload.get("type") == "message" and isinstance(payload.get("content"), str):
            role = payload.get("role")
            if role == "user":
                text = user_text(payload) if include_context else payload["content"]
                messages.append(ChatMessage("user", text))
            elif role == "assistant":
                messages.append(ChatMessage("assistant", payload["content"]))
        if event.get("id") == upto_event_id:
            break
    return messages
