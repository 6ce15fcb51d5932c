"""The shapes every model provider shares: what goes in, what streams out, how it fails.

A provider turns a chat history (and the tools the model may call) into a stream of `TextDelta`
(the reply, in order), `ToolCall` (each call whole, once its arguments are complete), at most one
`Reasoning` (thinking the provider wants handed back on the next step) and at most one `Usage`
(token counts, last). Anything that goes wrong is a `ProviderError` whose message a person can act
on and that never carries the API key.

Tool calls and their results travel in the history as provider-neutral messages (an assistant
`ChatMessage` with `tool_calls`, then one `role="tool"` message per result); each provider module
turns them into its own wire format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .redact import REDACTED, display_url, scrub

# A tool call's arguments beyond this many characters are not kept (the call is answered with an
# error instead): a model streaming megabytes of arguments must not fill the server's memory.
MAX_TOOL_ARGUMENT_CHARS = 256 * 1024


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: `arguments` is the JSON text as it arrived (possibly malformed);
    `oversize` when it passed MAX_TOOL_ARGUMENT_CHARS (then `arguments` is empty); `extra` is
    provider state to hand back with the call (Gemini's `thoughtSignature`)."""

    id: str
    name: str
    arguments: str = "{}"
    oversize: bool = False
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reasoning:
    """Thinking blocks a provider requires back on the next step of a tool loop (Anthropic's
    `thinking` / `redacted_thinking` blocks, signatures included), opaque to everything else."""

    blocks: tuple = ()


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: derived from its declaration (protocol/agent/tool_registry.py)."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: bytes


@dataclass(frozen=True)
class ChatMessage:
    role: str  # 'system' | 'user' | 'assistant' | 'tool'
    content: str
    images: tuple[Image, ...] = ()  # a user message's attached images (models that accept them)
    tool_calls: tuple[ToolCall, ...] = ()     # assistant: the calls of this step
    tool_call_id: str = ""                     # tool: the call this result answers
    name: str = ""                             # tool: the tool's name (Gemini wants it back)
    is_error: bool = False                     # tool: the result is an error
    reasoning: tuple = ()                      # assistant: Reasoning.blocks of this step


@dataclass(frozen=True)
class ProviderSpec:
    type: str
    base_url: str | None = None
    api_key: str | None = None
    model_defaults: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        # The key must not leak through logs of the spec either.
        key = REDACTED if self.api_key else None
        url = display_url(self.base_url) if self.base_url else None   # userinfo/query may hold keys
        return (
            f"ProviderSpec(type={self.type!r}, base_url={url!r}, "
            f"api_key={key!r}, model_defaults={self.model_defaults!r})"
        )


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Usage:
    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0

    def to_wire(self) -> dict:
        """The `meta.usage` / `patch.usage` shape of the contract (camelCase keys)."""
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }


class ProviderError(Exception):
    """A provider call failed; `message` says what failed, in words a person can act on.

    Pass the API key as `secret`: it is scrubbed from the message here, whatever text (URLs,
    response bodies, library error strings) the message was built from.
    """

    def __init__(
        self,
        message: str,
        *,
        secret: str | None = None,
        status: int | None = None,
    ) -> None:
        self.message = scrub(message, [secret])
        self.status = status  # the HTTP status when the provider answered with one
        super().__init__(self.message)


class ProviderNotFound(ProviderError):
    """The account has no provider of that name (a 404 where an action names it)."""


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str

    def to_wire(self) -> dict:
        return {"id": self.id, "name": self.name}


@runtime_checkable
class Provider(Protocol):
    """A model backend. `name` is the provider type, reported as `meta.provider`."""

    name: str

    def stream(self, model: str, messages: list[ChatMessage],
               tools: tuple[ToolSpec, ...] = ()) -> AsyncIterator[TextDelta | ToolCall | Reasoning | Usage]:
        """Yield the reply as TextDelta in order and ToolCall as each completes, then at most one
        Reasoning and one Usage; raise ProviderError."""
        ...

    async def list_models(self) -> list[ModelInfo]:
        """The provider's own model list; raise ProviderError."""
        ...
