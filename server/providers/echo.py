"""The built-in `echo` provider: deterministic, no network, for tests and first runs.

The reply is exactly `"echo: " + <content of the last user message>` (CONTRACT section 4),
streamed one word per delta with the whitespace after each word kept, so the deltas
concatenate to the reply byte for byte. Any model name is accepted.

Usage is a word count, not a token count (there is no tokenizer here): `input` is the number of
whitespace-separated words across all prompt messages (system, user and assistant), `output`
the number of words in the reply (including `echo:`), `total` their sum, caches 0.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from .base import ChatMessage, ModelInfo, TextDelta, Usage

PREFIX = "echo: "

_WORD = re.compile(r"\S+\s*")
_LEADING_SPACE = re.compile(r"\s*")


def echo_reply(messages: list[ChatMessage]) -> str:
    """The full reply the echo provider streams for `messages`."""
    last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return PREFIX + last_user


def echo_deltas(content: str) -> list[str]:
    """Split `PREFIX + content` into per-word pieces whose concatenation is exact."""
    # Leading whitespace of the content has no word to ride on, so it rides on the prefix.
    lead = _LEADING_SPACE.match(content).end()
    pieces = [PREFIX + content[:lead]]
    pieces.extend(m.group() for m in _WORD.finditer(content, lead))
    return pieces


def _word_count(text: str) -> int:
    return len(text.split())


_DELTAS_PER_TURN = 64


class EchoProvider:
    name = "echo"

    async def stream(
        self, model: str, messages: list[ChatMessage], tools=()  # noqa: ANN001 - never calls them
    ) -> AsyncIterator[TextDelta | Usage]:
        reply = echo_reply(messages)
        for i, piece in enumerate(echo_deltas(reply[len(PREFIX):])):
            if i and i % _DELTAS_PER_TURN == 0:
                # No sleeping (echo must be fast), but a long reply gives the loop a turn now
                # and then, so a cancellation or another session can get in. A short reply
                # goes out in one loop iteration: subscribers get its partials in one write.
                await asyncio.sleep(0)
            yield TextDelta(piece)
        prompt_words = sum(_word_count(m.content) for m in messages)
        reply_words = _word_count(reply)
        yield Usage(input=prompt_words, output=reply_words, total=prompt_words + reply_words)

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo("echo", "echo")]   # any name works; this is the one to offer
