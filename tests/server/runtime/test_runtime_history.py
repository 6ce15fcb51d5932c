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
