"""What the model sees, built from a session's events (pure: no server)."""
from __future__ import annotations

from seed_agents.server.providers.base import ChatMessage
from seed_agents.server.runtime.history import SessionHistory


def ev(seq, role, content, lines=None):
    payload = {"type": "message", "role": role, "content": content}
    if lines:
        payload["contextLines"] = lines
    return {"id": f"e{seq}", "seq": seq, "event": payload}


def test_queued_messages_wait_and_earlier_replies_come_first():
    h = SessionHistory(500)
    # A sent, B sent while A's turn ran (queued), then A's reply landed.
    h.extend([ev(1, "user", "A"), ev(2, "user", "B", ["ctx"])])
    assert h.messages("sys", "e1", include_context=True) == [
        ChatMessage("system", "sys"), ChatMessage("user", "A")]
    h.extend([ev(3, "assistant", "re A")])
    assert h.messages("", "e2", include_context=True) == [
        ChatMessage("user", "A"), ChatMessage("assistant", "re A"),
        ChatMessage("user", "B\n\nContext:\nctx")]
    assert h.messages("", "e2", include_context=False)[-1] == ChatMessage("user", "B")


def test_extend_skips_seen_events_and_non_messages_and_keeps_the_window():
    h = SessionHistory(3)
    h.extend([ev(1, "user", "a"), {"id": "x", "seq": 2, "event": {"type": "error", "message": "boom"}}])
    h.extend([ev(1, "user", "a"), ev(3, "assistant", "b"), ev(4, "user", "c"), ev(5, "assistant", "d")])
    assert h.last_seq == 5
    assert [e.content for e in h.entries] == ["b", "c", "d"]


def test_the_window_ends_at_the_turns_own_message_and_moves_down_the_queue():
    """Messages 1-4 queued at once, then the replies: the turn of message 2 sees message 1 and
    its reply, not messages 3 and 4; the window moves on to message 3 without reading anew."""
    events = [ev(1, "user", "one"), ev(2, "user", "two"), ev(3, "user", "three"), ev(4, "user", "four"),
              {"id": "e5", "seq": 5, "event": {"type": "message", "role": "assistant", "content": "re one",
                                               "meta": {"runId": "r1"}}}]
    h = SessionHistory(2, upto=2, anchor="e2")
    h.extend(events)
    assert [e.content for e in h.head] == ["one", "two"] and [e.content for e in h.tail] == ["re one"]
    assert h.messages("", "e2", include_context=True, run_id="r2") == [
        ChatMessage("user", "one"), ChatMessage("assistant", "re one"), ChatMessage("user", "two")]
    before = h.bytes
    h.extend([{"id": "e6", "seq": 6, "event": {"type": "message", "role": "assistant", "content": "re two",
                                               "meta": {"runId": "r2"}}}])
    h.advance(3, events[2:3])
    assert h.upto == 3 and h.last_seq == 6 and h.bytes > before
    assert [e.content for e in h.head] == ["two", "three"]   # the head keeps its last 2
    assert h.messages("", "e3", include_context=True, run_id="r3") == [
        ChatMessage("user", "two"), ChatMessage("assistant", "re one"), ChatMessage("assistant", "re two"),
        ChatMessage("user", "three")]
    h.advance(6, events[3:] + [{"id": "e6", "seq": 6, "event": {"type": "message", "role": "assistant",
                                                                 "content": "re two", "meta": {"runId": "r2"}}}])
    assert [e.content for e in h.head] == ["re one", "re two"] and not h.tail   # what passed the end moved up


def test_a_runs_tool_steps_replay_after_its_message_in_each_providers_format():
    """Read back from the events alone (as after a restart): the run's steps come after its own
    message, each call answered right after it, thinking blocks and thought signatures kept; a
    call without a result is answered as such; a later run's message waits."""
    from seed_agents.server.providers.anthropic import AnthropicProvider
    from seed_agents.server.providers.base import ProviderSpec
    from seed_agents.server.providers.google import GoogleProvider
    from seed_agents.server.providers.openai_compat import OpenAICompatProvider

    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    events = [
        ev(1, "user", "go"),
        ev(2, "user", "queued later"),
        {"id": "e3", "seq": 3, "event": {"type": "tool_call", "id": "a", "name": "read", "input": {"address": "x"},
                                         "actor": "agent", "meta": {"runId": "r1", "reasoning": [thinking],
                                                                    "providerState": {"thoughtSignature": "ts"}}}},
        {"id": "e4", "seq": 4, "event": {"type": "tool_call", "id": "b", "name": "write", "input": {},
                                         "actor": "agent", "meta": {"runId": "r1"}}},
        {"id": "e5", "seq": 5, "event": {"type": "tool_result", "toolCallId": "a", "name": "read",
                                         "output": {"content": "hi"}, "meta": {"runId": "r1"}}},
    ]
    h = SessionHistory(500)
    h.extend(events)
    assert [e.call_id for e in h.open_calls("r1")] == ["b"]
    messages = h.messages("sys", "e1", include_context=True, run_id="r1")
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    step = messages[2]
    assert [c.id for c in step.tool_calls] == ["a", "b"] and step.reasoning == (thinking,)
    assert messages[3].content == '{"content": "hi"}' and not messages[3].is_error
    assert messages[4].content == "(no result was recorded for this call)" and messages[4].is_error

    spec = ProviderSpec("x", base_url="http://127.0.0.1:1")
    body = AnthropicProvider(spec, None).request_body("m", messages)
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "tool_use", "tool_use"] and assistant[0] == thinking
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ["a", "b"]
    body = GoogleProvider(spec, None).request_body("m", messages)
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == "ts"
    body = OpenAICompatProvider(spec, None).request_body("m", messages)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert body["messages"][2]["content"] is None


class _Events:
    """A session's stored events behind `Runtime._history`'s reads (the store's functions as the
    dispatch keys), counting the events each read hands back."""

    def __init__(self, events):
        self.events = events
        self.handed = 0

    def read(self, fn, *args):
        from seed_agents.server.store import events as events_q
        if fn is events_q.events_after:
            _, after, limit = args
            page = [e for e in self.events if e["seq"] > after][:limit]
            self.handed += len(page)
            return page
        if fn is events_q.event_seq:
            return next(e["seq"] for e in self.events if e["id"] == args[0])
        if fn is events_q.last_seq:
            return self.events[-1]["seq"]
        raise AssertionError(fn)


def test_a_turn_deep_in_a_queue_reads_only_its_message_and_what_was_appended_since():
    """300 messages queued at once, the worker going down them: after the first turn, which reads
    the session once, each turn reads its own message and the reply just appended, not the
    queue behind it again (that was every turn reading the whole queue: 50,000 events a turn in
    bench.deep_queue)."""
    import functools

    from seed_agents.server.cache import ByteBudgetCache
    from seed_agents.server.runtime.runner import Runtime

    queued = 300
    store = _Events([ev(seq, "user", f"m{seq}") for seq in range(1, queued + 1)])
    runtime = type("R", (), {})()
    runtime.histories = ByteBudgetCache("histories", 1 << 24)
    runtime.known_seq = ("", None)
    runtime.db = store
    runtime._read_events = functools.partial(Runtime._read_events, runtime)
    handed = []
    for k in range(1, 41):
        before = store.handed
        history = Runtime._history(runtime, "s", f"e{k}")
        handed.append(store.handed - before)
        assert history.upto == k
        msgs = history.messages("", f"e{k}", include_context=False)
        assert [m.content for m in msgs if m.role == "user"][-1] == f"m{k}"
        if k > 1:
            assert f"re m{k - 1}" in [m.content for m in msgs]   # the last reply is in it
        assert f"m{k + 1}" not in [m.content for m in msgs]   # the queue ahead is not its history
        seq = store.events[-1]["seq"] + 1   # the turn's reply lands at the session's end
        store.events.append({"id": f"e{seq}", "seq": seq, "event": {
            "type": "message", "role": "assistant", "content": f"re m{k}", "meta": {"runId": f"r{k}"}}})
    assert handed[0] == queued
    assert max(handed[1:]) <= 3, handed
