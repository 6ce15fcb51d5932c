"""A user message's images in each provider family's request format (base64 inline data):
OpenAI-compatible `image_url` data URLs, Anthropic `image` blocks, Google `inline_data` parts.
The text comes first, then the images, in the order attached."""
from __future__ import annotations

import base64

from .base import ChatMessage


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def openai_content(m: ChatMessage):
    if not m.images:
        return m.content
    return [{"type": "text", "text": m.content}] + [
        {"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{_b64(i.data)}"}} for i in m.images]


def anthropic_blocks(m: ChatMessage):
    if not m.images:
        return m.content
    return [{"type": "text", "text": m.content}] + [
        {"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": _b64(i.data)}}
        for i in m.images]


def anthropic_join(a, b):
    """Two turns of one role as one (Anthropic wants roles to alternate): text joined by a blank
    line; block lists concatenated."""
    if isinstance(a, str) and isinstance(b, str):
        return a + "\n\n" + b
    as_blocks = lambda c: [{"type": "text", "text": c}] if isinstance(c, str) else c  # noqa: E731
    return as_blocks(a) + as_blocks(b)


def google_parts(m: ChatMessage) -> list[dict]:
    return [{"text": m.content}] + [{"inline_data": {"mime_type": i.mime_type, "data": _b64(i.data)}}
                                    for i in m.images]
