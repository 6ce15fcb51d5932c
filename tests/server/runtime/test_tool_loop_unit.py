"""The tool loop (server/runtime/tool_loop.py) driven by a scripted provider, with no server, no
socket and no database: the smallest fakes of what runner.py hands it.

- `Provider`: each `stream` plays the next scripted step (text, tool calls, usage) and keeps a copy
  of the messages it was handed, so a test sees what the model was told back.
- `Surface`: the tools; each call is answered by a function of the test.
- `Store`: the storage. The loop's one write path is `tool_events.record` inside a `db.write` job
  (plus the run's usage and spent tokens); those three store functions are replaced by ones that
  keep the payloads in commit order, so a test reads the session's log as the loop left it.
- `Publisher`: what was published, in order.

The end-to-end behaviour (real providers' formats, a real server and database) is
tests/server/runtime/test_tool_loop.py; this layer pins the loop's own decisions fast.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from seed_agents.server.providers.base import ChatMessage, TextDelta, ToolCall, Usage
from seed_agents.server.runtime import tool_loop
from seed_agents.server.runtime.tool_loop import MAX_CALLS_PER_STEP, Budgets, BudgetSpent, ToolLoop, TurnGone
from seed_agents.server.store import delegation as delegation_q
from seed_agents.server.store import runs as runs_q
from seed_agents.server.store import sessions as sessions_q
from seed_agents.server.store import tool_events
from seed_agents.server.store.errors import NotFound
from seed_agents.server.store.turns import Effects
from seed_agents.server.tools.context import Park, ToolResult

SID, RUN_ID = "s1", "r1"


class Provider:
    def __init__(self, steps: list[list]) -> None:
        self.steps = list(steps)
        self.seen: list[list[ChatMessage]] = []   # the messages of each step, as handed

    async def stream(self, model: str, messages: list[ChatMessage], tools):  # noqa: ANN001
        assert model == "m" and tools == ("read", "write")
        self.seen.append(list(messages))
        assert self.steps, "the loop asked for a step the script does not have"
        for item in self.steps.pop(0):
            yield item


def call(call_id: str, name: str, **arguments) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def answer(text: str, tokens: int = 10) -> list:
    return [TextDelta(text), Usage(tokens, 1, total=tokens + 1)]


class Surface:
    finished = False
    delegating = None

    def __init__(self, tools: dict, store: "Store") -> None:
        self._tools = tools
        self.store = store
        self.ran: list[tuple[str, dict]] = []

    def provider_tools(self) -> tuple:
        return ("read", "write")

    async def run(self, c: ToolCall) -> ToolResult:
        self.ran.append((c.name, json.loads(c.arguments)))
        return await self._tools[c.name](c)


class Store:
    """The session's log as committed, and the run's row; `gone` makes every later write fail
    as a deleted session does."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.usage: dict | None = None
        self.spent: int | None = None
        self.gone = False
        self.plan: dict | None = None

    def record(self, conn, session_id: str, payloads: list[dict], now: int, new_id, *, run=None,  # noqa: ANN001
               max_bytes=None, **_) -> Effects:
        assert conn is self and session_id == SID and run["id"] == RUN_ID
        if self.gone:
            raise NotFound("session gone")
        out = Effects()
        for payload in payloads:
            event = {"id": new_id(), "sessionId": SID, "seq": len(self.events) + 1, "event": payload, "createdAt": now}
            self.events.append(payload)
            out.appended.append((SID, event, b"body"))
        return out

    def record_spent(self, conn, run_id: str, spent: int) -> None:  # noqa: ANN001
        self.spent = spent

    def set_usage(self, conn, run_id: str, usage: dict) -> None:  # noqa: ANN001
        self.usage = usage   # (None: no RunInfo to publish)

    # -- the storage port, as the loop uses it --
    def read(self, fn, *args):  # noqa: ANN001, ANN201
        assert fn is sessions_q.get_plan, fn
        return self.plan

    async def write(self, job):  # noqa: ANN001, ANN201
        return job(self)


class Publisher:
    def __init__(self) -> None:
        self.appended: list[dict] = []
        self.partials: list[dict] = []

    def publish_append(self, session_id: str, event: dict, body: bytes) -> None:
        self.appended.append(event["event"])

    def publish_partial(self, session_id: str, partial_id: str, patch: dict) -> None:
        assert (session_id, partial_id) == (SID, RUN_ID)
        self.partials.append(patch)

    def publish_run(self, run: dict) -> None:
        raise AssertionError("the fake store returns no RunInfo")


class History:
    def __init__(self, open_calls: list | None = None) -> None:
        self._open = open_calls or []

    def call_ids(self) -> set[str]:
        return set()

    def open_calls(self, run_id: str) -> list:
        return self._open


@pytest.fixture
def store(monkeypatch) -> Store:
    s = Store()
    monkeypatch.setattr(tool_events, "record", s.record)
    monkeypatch.setattr(delegation_q, "record_spent", s.record_spent)
    monkeypatch.setattr(runs_q, "set_usage", s.set_usage)
    return s


def make_loop(store: Store, script: list[list], tools: dict, **budget) -> tuple[ToolLoop, Provider, Surface, Publisher]:
    provider, surface, publisher = Provider(script), Surface(tools, store), Publisher()
    budgets = Budgets(**{"steps": 10, "tokens": 1_000_000, "seconds": 60, "output_chars": 10_000,
                         "tool_timeout": 60, **budget})
    messages = [ChatMessage("system", "sys"), ChatMessage("user", "what is in notes?")]
    clock = iter(range(1000, 10**6))
    loop = ToolLoop(db=store, publisher=publisher, now_ms=lambda: next(clock), run={"id": RUN_ID, "sessionId": SID},
                    agent={"id": "a1"}, provider=provider, model="m", provider_type="custom", history=History(),
                    messages=messages, surface=surface, budgets=budgets, still_ours=None, gone=lambda: False,
                    rebuild=lambda: list(messages))
    return loop, provider, surface, publisher


async def read_notes(c: ToolCall) -> ToolResult:
    return ToolResult(output={"text": "the notes say 42"})


def kinds(events: list[dict]) -> list[tuple]:
    return [(e["type"], e.get("role") or e.get("id") or e.get("toolCallId"), "error" in e) for e in events]


async def run(loop: ToolLoop):  # noqa: ANN201
    return await asyncio.wait_for(loop.run_turn(), 10)


async def test_a_tool_call_is_run_its_result_handed_back_and_the_answer_ends_the_turn(store):
    steps = [[TextDelta("Let me look."), call("c1", "read", address="notes"), Usage(10, 5, total=15)],
             answer("It is 42.")]
    loop, provider, surface, publisher = make_loop(store, steps, {"read": read_notes})
    out = await run(loop)
    assert out.text == "It is 42." and provider.steps == []
    assert surface.ran == [("read", {"address": "notes"})]
    # The log: what the step said, its call, the call's result (the final answer is the runner's).
    assert kinds(store.events) == [("message", "assistant", False), ("tool_call", "c1", False),
                                   ("tool_result", "c1", False)]
    assert store.events[1]["input"] == {"address": "notes"} and store.events[1]["actor"] == "agent"
    assert store.events[2]["output"] == {"text": "the notes say 42"}
    assert publisher.appended == store.events   # each committed event published, in order
    # The second step was handed the first step's call and its result.
    second = provider.seen[1]
    assert [m.role for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2].content == "Let me look." and [(c.id, c.name) for c in second[2].tool_calls] == [("c1", "read")]
    assert second[3].tool_call_id == "c1" and not second[3].is_error and "42" in second[3].content
    # Live: the text streamed, the tool shown while it ran, the usage so far.
    assert {"textDelta": "Let me look."} in publisher.partials and {"textDelta": "It is 42."} in publisher.partials
    assert any(p.get("activity", {}).get("toolName") == "read" for p in publisher.partials)
    assert {"usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "total": 15}} in publisher.partials
    assert out.usage == Usage(20, 6, total=26) and out.step_usage == Usage(10, 1, total=11)
    assert store.usage == Usage(10, 5, total=15).to_wire() and store.spent == 15   # saved with the calls


async def test_a_failing_tool_is_answered_with_an_error_and_the_run_goes_on(store):
    async def broken(c: ToolCall) -> ToolResult:
        raise RuntimeError("bug in the tool")

    async def refuses(c: ToolCall) -> ToolResult:
        return ToolResult(error="no such address")

    steps = [[call("c1", "read", address="x")], [call("c2", "write", address="y")], answer("Sorry.")]
    loop, provider, surface, _ = make_loop(store, steps, {"read": broken, "write": refuses})
    out = await run(loop)
    assert out.text == "Sorry." and len(surface.ran) == 2
    results = [e for e in store.events if e["type"] == "tool_result"]
    assert [(r["toolCallId"], r["error"]) for r in results] == [
        ("c1", "read failed: internal error (RuntimeError)"), ("c2", "no such address")]
    told = [m for m in provider.seen[2] if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error, m.content) for m in told] == [
        ("c1", True, "read failed: internal error (RuntimeError)"), ("c2", True, "no such address")]


async def test_a_tool_that_hangs_is_stopped_at_the_tool_timeout(store):
    async def hangs(c: ToolCall) -> ToolResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    loop, provider, _, _ = make_loop(store, [[call("c1", "read")], answer("ok")], {"read": hangs}, tool_timeout=0.01)
    out = await run(loop)
    assert out.text == "ok"
    assert store.events[-1]["error"] == "read did not finish within 0.01 s (--tool-timeout); it was stopped"


async def test_the_tool_steps_are_capped(store):
    steps = [[call(f"c{n}", "read")] for n in range(4)]
    loop, provider, surface, _ = make_loop(store, steps, {"read": read_notes}, steps=2)
    with pytest.raises(BudgetSpent, match="more than 2 tool steps"):
        await run(loop)
    assert len(surface.ran) == 2 and len(provider.seen) == 3   # the third step's calls never ran
    assert [e["type"] for e in store.events] == ["tool_call", "tool_result"] * 2


async def test_a_step_runs_at_most_its_cap_of_calls_and_answers_the_rest(store):
    many = [call(f"c{n}", "read", n=n) for n in range(MAX_CALLS_PER_STEP + 2)]
    loop, provider, surface, _ = make_loop(store, [many, answer("done")], {"read": read_notes})
    assert (await run(loop)).text == "done"
    assert len(surface.ran) == MAX_CALLS_PER_STEP
    results = [e for e in store.events if e["type"] == "tool_result"]
    assert len(results) == MAX_CALLS_PER_STEP + 2
    assert all("error" not in r for r in results[:MAX_CALLS_PER_STEP])
    assert all(r["error"].startswith("not run: a step may make at most") for r in results[MAX_CALLS_PER_STEP:])


async def test_the_token_budget_stops_the_run_before_the_next_step(store):
    steps = [[call("c1", "read"), Usage(900, 200, total=1100)], answer("never")]
    loop, provider, surface, _ = make_loop(store, steps, {"read": read_notes}, tokens=1000)
    with pytest.raises(BudgetSpent, match="the run used 1100 tokens"):
        await run(loop)
    assert len(provider.seen) == 1 and provider.steps == [answer("never")]


async def test_a_step_that_uses_the_budget_exactly_ends_its_tools_but_no_step_follows(store):
    """Reaching the budget is allowed for the step under way (its calls run and are recorded);
    the next model step is refused."""
    steps = [[call("c1", "read"), Usage(800, 200, total=1000)], answer("never")]
    loop, provider, surface, _ = make_loop(store, steps, {"read": read_notes}, tokens=1000)
    with pytest.raises(BudgetSpent, match="the run used 1000 tokens, at or past the 1000"):
        await run(loop)
    assert len(surface.ran) == 1 and len(provider.seen) == 1
    assert [e["type"] for e in store.events] == ["tool_call", "tool_result"]


async def test_an_answer_that_uses_the_budget_exactly_is_kept(store):
    loop, *_ = make_loop(store, [[TextDelta("All done."), Usage(800, 200, total=1000)]], {}, tokens=1000)
    assert (await run(loop)).text == "All done."


async def test_a_call_with_side_effects_is_on_record_before_its_tool_runs(store):
    seen_at_run: list[list] = []

    async def write(c: ToolCall) -> ToolResult:
        seen_at_run.append(kinds(store.events))
        return ToolResult(output={"ok": True})

    steps = [[TextDelta("Saving."), call("w1", "write", address="notes", content="x")], answer("Saved.")]
    loop, *_ = make_loop(store, steps, {"write": write})
    await run(loop)
    assert seen_at_run == [[("message", "assistant", False), ("tool_call", "w1", False)]]


async def test_a_parking_tool_ends_the_turn_with_its_call_open(store):
    async def delegate(c: ToolCall) -> ToolResult:
        return ToolResult(park=Park("delegated", {"children": ["r2"]}))

    steps = [[call("c1", "read"), call("d1", "write")]]
    loop, provider, _, _ = make_loop(store, steps, {"read": read_notes, "write": delegate})
    out = await run(loop)
    assert out.park == Park("delegated", {"children": ["r2"]}) and out.text == ""
    assert len(provider.seen) == 1   # no further model step
    assert kinds(store.events) == [("tool_call", "c1", False), ("tool_call", "d1", False),
                                   ("tool_result", "c1", False)]   # d1's result comes later


async def test_a_session_deleted_mid_turn_ends_the_turn_writing_nothing_more(store):
    async def deletes(c: ToolCall) -> ToolResult:
        store.gone = True
        return ToolResult(output="x")

    loop, provider, _, _ = make_loop(store, [[call("w1", "write")], answer("never")], {"write": deletes})
    with pytest.raises(TurnGone):
        await run(loop)
    # (The result's write is not waited for before the next step, so the model may be asked once
    # more; what it answers is never returned as the turn's answer.)
    assert kinds(store.events) == [("tool_call", "w1", False)]


async def test_a_run_past_its_wall_time_is_stopped(store):
    async def hangs(c: ToolCall) -> ToolResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    loop, *_ = make_loop(store, [[call("c1", "read")]], {"read": hangs}, seconds=0.01)
    with pytest.raises(BudgetSpent, match="still working after 0.01 s"):
        await run(loop)


def test_the_fakes_replace_what_the_loop_calls():
    """The store functions replaced above are the ones the loop reaches (a rename fails here)."""
    assert tool_loop.tool_events is tool_events and tool_loop.delegation_q is delegation_q
    assert tool_loop.runs_q is runs_q
