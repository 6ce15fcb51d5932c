"""The tokens a model step is counted for against the run's budget: the provider's own figures
when they are plausible, else our estimate.

Our estimate is UTF-8 bytes / 4, rounded up, for what the step was sent (the messages' text,
tool calls and results; images are left out) and for what it answered (text, tool calls with
their arguments, reasoning blocks). Four bytes a token is what the common BPE tokenizers give
for English prose and code; denser scripts give more tokens per byte, so the estimate is low
rather than high for them. A real tokenizer does not fit here: each provider family has its own
(and tiktoken, OpenAI's, fetches its tables from the network at first use), and the budget needs
an order of magnitude that an endpoint cannot talk down, not an exact count.

The rule, per direction (sent, answered):
- the provider gave no usage: the estimate;
- the estimate is at least PLAUSIBLE_FLOOR tokens and the provider's figure is under a quarter
  of it (fewer than one token per 16 bytes: zero, or absurdly small for a long reply): the
  estimate;
- otherwise the provider's figure (short exchanges are the provider's to count).
The step is counted for the larger of that sum and the provider's own total when both
directions were believed.
"""
from __future__ import annotations

import json

from ..providers.base import MAX_TOOL_ARGUMENT_CHARS, ChatMessage, Reasoning, ToolCall, Usage

BYTES_PER_TOKEN = 4
PLAUSIBLE_FLOOR = 1_000     # tokens: below this an estimate does not overrule the provider


def estimate(n_bytes: int) -> int:
    return -(-n_bytes // BYTES_PER_TOKEN)


def _calls_bytes(calls) -> int:  # noqa: ANN001
    return sum(len(c.name) + (MAX_TOOL_ARGUMENT_CHARS if c.oversize else len(c.arguments.encode()))
               for c in calls)


def sent_bytes(messages: list[ChatMessage]) -> int:
    # Every model step counts its whole window: ASCII text is its length (no copy to encode),
    # and a message without calls costs no generator.
    total = 0
    for m in messages:
        content = m.content
        total += len(content) if content.isascii() else len(content.encode())
        if m.tool_calls:
            total += _calls_bytes(m.tool_calls)
    return total


def answered_bytes(text: str, calls: list[ToolCall], reasoning: Reasoning | None) -> int:
    size = len(text.encode()) + _calls_bytes(calls)
    if reasoning is not None and reasoning.blocks:
        size += len(json.dumps(reasoning.blocks, default=str).encode())
    return size


def _believed(reported: int, estimated: int) -> bool:
    return estimated < PLAUSIBLE_FLOOR or reported * 4 >= estimated


def step_tokens(usage: Usage | None, messages: list[ChatMessage], text: str, calls: list[ToolCall],
                reasoning: Reasoning | None) -> int:
    """The step's tokens as the budget counts them (see the module doc)."""
    est_in, est_out = estimate(sent_bytes(messages)), estimate(answered_bytes(text, calls, reasoning))
    if usage is None:
        return est_in + est_out
    reported_out = max(0, usage.output)
    reported_in = max(0, usage.total - usage.output, usage.input)
    counted_in = reported_in if _believed(reported_in, est_in) else est_in
    counted_out = reported_out if _believed(reported_out, est_out) else est_out
    if counted_in == reported_in and counted_out == reported_out:
        return max(counted_in + counted_out, usage.total)
    return counted_in + counted_out
