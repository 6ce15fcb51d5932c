"""The built-in echo provider: exact reply, one delta per word, word-count usage, no blocking."""

import asyncio
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from seed_agents.server.providers.base import ChatMessage, Provider, TextDelta, Usage
from seed_agents.server.providers.echo import EchoProvider


async def _collect(messages):
    return [item async for item in EchoProvider().stream("any-model", messages)]


def _split(items):
    deltas = [i.text for i in items if isinstance(i, TextDelta)]
    usages = [i for i in items if isinstance(i, Usage)]
    return deltas, usages


async def test_one_delta_per_word_with_spaces_kept():
    deltas, usages = _split(await _collect([ChatMessage("user", "hello world")]))
    assert deltas == ["echo: ", "hello ", "world"]
    assert usages == [Usage(input=2, output=3, total=5)]


async def test_replies_to_the_last_user_message_and_counts_every_prompt_word():
    messages = [
        ChatMessage("system", "be brief"),
        ChatMessage("user", "first question"),
        ChatMessage("assistant", "echo: first question"),
        ChatMessage("user", "second  one\n"),
    ]
    items = await _collect(messages)
    deltas, usages = _split(items)
    assert "".join(deltas) == "echo: second  one\n"
    assert deltas == ["echo: ", "second  ", "one\n"]
    assert items[-1] == usages[0]  # usage comes last
    assert usages == [Usage(input=2 + 2 + 3 + 2, output=3, total=12)]


async def test_empty_content_and_no_user_message_still_reply_with_the_prefix():
    assert _split(await _collect([ChatMessage("user", "")]))[0] == ["echo: "]
    assert _split(await _collect([ChatMessage("system", "hi")]))[0] == ["echo: "]


def test_is_a_provider_named_echo():
    provider = EchoProvider()
    assert isinstance(provider, Provider)
    assert provider.name == "echo"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_deltas_concatenate_to_the_exact_reply(text):
    deltas, usages = _split(asyncio.run(_collect([ChatMessage("user", text)])))
    assert "".join(deltas) == "echo: " + text
    # The first delta is the prefix (plus any leading whitespace), then exactly one word each.
    assert re.fullmatch(r"echo: \s*", deltas[0])
    assert all(re.fullmatch(r"\S+\s*", d) for d in deltas[1:])
    words = len(text.split())
    assert len(deltas) == 1 + words
    assert usages == [Usage(input=words, output=words + 1, total=2 * words + 1)]


async def test_yields_control_so_a_long_reply_can_be_cancelled():
    got = []

    async def consume():
        async for item in EchoProvider().stream("m", [ChatMessage("user", "w " * 10_000)]):
            got.append(item)

    task = asyncio.create_task(consume())
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert task.cancelled()
    assert 0 < len(got) < 10_000
