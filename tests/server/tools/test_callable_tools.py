"""The callables of `call` as a table (server/tools/surface.CALLABLE_TOOLS): what is offered,
what is read-only and how `call` answers each case are read from the rows; `navigate` opens the
address forms NAVIGATES names. Unit tests: a ToolContext with fakes, no server."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.protocol.agent import tool_registry as registry
from seed_agents.server.tools import surface
from seed_agents.server.tools.authority import Authority
from seed_agents.server.tools.context import ToolContext, ToolFailure, ToolResult
from seed_agents.server.tools.memory_tools import SEARCH_MEMORY


def _surface(callables: tuple[str, ...], web=None, hm=None) -> surface.ToolSurface:
    agent = {"id": "a1", "account": "acc", "definition": {}}
    ctx = ToolContext(None, None, lambda: 42, "acc", agent, "s1", "r1", web=web, hm=hm, callables=callables,
                      authority=Authority.of_agent(agent, "model", callables, False))
    return surface.ToolSurface(ctx)


def test_the_rows_say_what_is_offered_and_what_is_read_only():
    assert surface.offered_callables(False) == ("search", "navigate")
    assert surface.offered_callables(True) == ("search", "web_search", "navigate")
    assert surface.offered_callables(True, True) == ("search", "web_search", "navigate", "execute")
    assert surface.READ_ONLY_CALLABLES == {"search", SEARCH_MEMORY, "web_search", "navigate", "wait"}
    for name, row in surface.CALLABLE_TOOLS.items():
        assert row.own or name in registry.CALLABLES or name == "execute", name   # a record for each
        assert surface.side_effects("call", f'{{"tool": "{name}"}}') is not row.read_only


class _Web:
    def for_account(self, account: str) -> "_Web":
        return self

    async def read_page(self, url: str) -> ToolResult:
        return ToolResult({"page": url})


class _Hm:
    pass


def test_navigate_opens_the_forms_navigates_names(monkeypatch):
    s = _surface(surface.offered_callables(False), web=_Web())
    got = asyncio.run(s._call({"tool": "navigate", "input": {"url": " https://example.org/a "}}))
    assert got.output == {"page": "https://example.org/a"}
    got = asyncio.run(s._call({"tool": "navigate", "input": {"url": "http://example.org/b"}}))
    assert got.output == {"page": "http://example.org/b"}
    read = []

    async def hm_read(ctx, address):
        read.append(address)
        return ToolResult({"doc": address})

    monkeypatch.setattr(surface.hm_tools, "read", hm_read)
    got = asyncio.run(s._call({"tool": "navigate", "input": {"url": "hm://z6Mk/doc"}}))
    assert got.output == {"doc": "hm://z6Mk/doc"} and read == ["hm://z6Mk/doc"]
    for url in ("~/memory/notes.md", "ipfs://bafy", "thread:", "ftp://example.org/"):
        with pytest.raises(ToolFailure, match="navigate opens https:// pages and hm:// documents"):
            asyncio.run(s._call({"tool": "navigate", "input": {"url": url}}))


def test_a_row_not_offered_here_answers_its_sentence_or_the_listing():
    s = _surface(surface.offered_callables(False))
    with pytest.raises(ToolFailure, match="execute is not enabled for this agent"):
        asyncio.run(s._call({"tool": "execute", "input": {"code": "1"}}))
    got = asyncio.run(s._call({"tool": "web_search", "input": {"query": "x"}}))
    assert "No callable tool named web_search" in str(got.output)
    # wait is the server's own only where the surface delegates; elsewhere it is no tool at all
    got = asyncio.run(s._call({"tool": "wait", "input": {}}))
    assert "No callable tool named wait" in str(got.output)


def test_a_checked_input_reaches_the_rows_adapter_and_a_bad_one_gets_the_contract(monkeypatch):
    seen = []

    async def search(ctx, tool_input):
        seen.append(tool_input)
        return ToolResult({"hits": []})

    monkeypatch.setattr(surface.hm_tools, "search", search)
    s = _surface(surface.offered_callables(False))
    assert asyncio.run(s._call({"tool": "search", "input": {"query": "seed"}})).output == {"hits": []}
    assert seen == [{"query": "seed"}]
    bad = asyncio.run(s._call({"tool": "search", "input": {"nope": 1}}))
    assert bad.output["validationErrors"] and len(seen) == 1
