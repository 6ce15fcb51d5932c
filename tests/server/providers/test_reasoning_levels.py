"""Reasoning levels: which models take which (the Seed protocol's reasoning.ts), refusals that
name the levels a model does take, and a level reaching each provider family in its own terms
through a real server, with the thinking the fakes stream back never shown as the answer."""
from __future__ import annotations

import httpx
import pytest

from seed_agents.protocol.agent.reasoning import model_reasoning_support

from tests.conftest import make_config, running_server
from tests.fakes import anthropic_server, google_server, openai_server
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.sse_base import Script
from tests.httpraw import act, base_url
from tests.waiting import until
from tests.wsraw import keypair

KEY = "sk-reasoning-test"


@pytest.mark.parametrize("kind, model, levels, off", [
    ("openai", "gpt-5", ("minimal", "low", "medium", "high"), "default"),
    ("openai", "gpt-5-mini-2025", ("minimal", "low", "medium", "high"), "default"),
    ("openai", "gpt-5.1", ("low", "medium", "high"), "off"),
    ("openai", "gpt-5.2-pro", ("low", "medium", "high", "xhigh"), "off"),
    ("openai", "gpt-6", ("low", "medium", "high", "xhigh"), "off"),
    ("openai", "o3-mini", ("low", "medium", "high"), "default"),
    ("anthropic", "claude-3-7-sonnet-20250219", ("minimal", "low", "medium", "high"), "off"),
    ("anthropic", "claude-sonnet-4-5", ("minimal", "low", "medium", "high"), "off"),
    ("google", "gemini-2.5-flash", ("minimal", "low", "medium", "high"), "off"),
    ("google", "gemini-2.5-pro", ("minimal", "low", "medium", "high"), "default"),
])
def test_the_levels_each_model_takes_are_the_references(kind, model, levels, off):
    support = model_reasoning_support(kind, model)
    assert support.levels == levels and support.off_behavior == off
    assert support.supports_effort_none == (kind == "openai" and off == "off")


@pytest.mark.parametrize("kind, model", [
    ("openai", "gpt-4o"), ("openai", "gpt-5-chat-latest"), ("anthropic", "claude-3-5-sonnet"),
    ("google", "gemini-2.0-flash"), ("openrouter", "openai/gpt-5"), ("echo", "echo"),
])
def test_models_without_controllable_reasoning(kind, model):
    assert model_reasoning_support(kind, model) is None


@pytest.fixture
async def server(tmp_path):
    async with running_server(make_config(tmp_path, allow_provider_base_url=True)) as running:
        yield running


async def reply_of(http, base, kp, session_id: str) -> dict:
    """The durable assistant event of the session's first turn (waits for it to be written)."""
    async def answered():
        status, value = await act(http, base, kp, {"_": "GetSession", "sessionId": session_id})
        assert status == 200, value
        found = [e["event"] for e in value["events"] if e["event"].get("role") == "assistant"
                 or e["event"].get("type") == "error"]
        return found[-1] if found else None
    return await until(answered, 10)


FAMILIES = {
    # type: (fake class, model, level, the request's terms of it, thinking text of the fake)
    "openai": (FakeOpenAI, "gpt-5", "minimal", lambda b: b["reasoning_effort"] == "minimal",
               openai_server.THINKING_TEXT),
    "anthropic": (FakeAnthropic, "claude-sonnet-4-5", "medium",
                  lambda b: b["thinking"] == {"type": "enabled", "budget_tokens": 8192}
                  and b["max_tokens"] > 8192, anthropic_server.THINKING_TEXT),
    "google": (FakeGoogle, "gemini-2.5-flash", "high",
               lambda b: b["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 24576},
               google_server.THINKING_TEXT),
}


@pytest.mark.parametrize("kind", sorted(FAMILIES))
async def test_a_level_reaches_each_family_in_its_terms_and_thinking_is_not_the_answer(server, kind):
    fake_class, model, level, in_terms, thinking = FAMILIES[kind]
    fake = FakeOpenAI(openai_server.Script(chunks=["The ", "answer."])) if kind == "openai" else \
        fake_class(Script(chunks=["The ", "answer."]), key=KEY)
    async with fake, httpx.AsyncClient() as http:
        base, kp = base_url(server), keypair(f"reasoning-{kind}")
        for action in ({"_": "SetSecret", "name": "k", "value": KEY.encode()},
                       {"_": "SetModelProvider", "name": "p", "provider": {
                           "type": kind, "baseUrl": fake.base_url, "secretRefs": {"apiKey": "k"}}}):
            status, value = await act(http, base, kp, action)
            assert status == 200, value
        definition = {"name": "Thinker", "systemPrompt": "Be brief.", "modelProvider": "p",
                      "model": model, "reasoningLevel": level}
        status, value = await act(http, base, kp, {"_": "CreateAgent", "definition": definition})
        assert status == 200, value
        agent_id = value["agentId"]
        status, value = await act(http, base, kp, {"_": "CreateSession", "agentId": agent_id})
        session_id = value["sessionId"]
        status, value = await act(http, base, kp, {"_": "MessageSession", "sessionId": session_id,
                                                  "content": [{"type": "text", "text": "Think."}]})
        assert status == 200, value
        reply = await reply_of(http, base, kp, session_id)
        assert reply.get("content") == "The answer.", reply   # the thinking streamed first: not shown
        assert thinking not in repr(reply)
        [request] = fake.requests
        assert in_terms(request.body), request.body

        # A level the model does not take: 400 naming those it does; nothing changes.
        status, value = await act(http, base, kp, {"_": "UpdateAgent", "agentId": agent_id, "definition": {
            **definition, "reasoningLevel": "xhigh"}})
        assert status == 400, value
        levels = ", ".join(model_reasoning_support(kind, model).levels)
        assert f"(it supports: {levels})" in value["message"] and "'xhigh'" in value["message"], value
        status, value = await act(http, base, kp, {"_": "GetAgent", "agentId": agent_id})
        assert value["agent"]["definition"]["reasoningLevel"] == level


async def test_a_sessions_override_brings_its_own_level_and_absent_means_off(server):
    async with FakeOpenAI(openai_server.Script(chunks=["ok"])) as fake, httpx.AsyncClient() as http:
        base, kp = base_url(server), keypair("reasoning-override")
        for action in ({"_": "SetSecret", "name": "k", "value": KEY.encode()},
                       {"_": "SetModelProvider", "name": "p", "provider": {
                           "type": "openai", "baseUrl": fake.base_url, "secretRefs": {"apiKey": "k"}}}):
            assert (await act(http, base, kp, action))[0] == 200
        status, value = await act(http, base, kp, {"_": "CreateAgent", "definition": {
            "name": "A", "systemPrompt": "", "modelProvider": "p", "model": "gpt-5.1",
            "reasoningLevel": "low"}})
        agent_id = value["agentId"]
        session_id = (await act(http, base, kp, {"_": "CreateSession", "agentId": agent_id}))[1]["sessionId"]
        # The override's model takes xhigh; the agent's own (gpt-5.1) would not.
        status, value = await act(http, base, kp, {"_": "UpdateSession", "sessionId": session_id, "modelOverride": {
            "provider": "p", "model": "gpt-5.4", "reasoningLevel": "xhigh"}})
        assert status == 200, value
        status, value = await act(http, base, kp, {"_": "UpdateSession", "sessionId": session_id, "modelOverride": {
            "provider": "p", "model": "gpt-5", "reasoningLevel": "xhigh"}})
        assert status == 400 and "(it supports: minimal, low, medium, high)" in value["message"], value
        await act(http, base, kp, {"_": "MessageSession", "sessionId": session_id,
                                   "content": [{"type": "text", "text": "one"}]})
        await reply_of(http, base, kp, session_id)
        assert fake.requests[-1].body["reasoning_effort"] == "xhigh"
        assert fake.requests[-1].body["model"] == "gpt-5.4"
        # An override without a level means off: gpt-5.1+ are told "none" explicitly.
        await act(http, base, kp, {"_": "UpdateSession", "sessionId": session_id, "modelOverride": {
            "provider": "p", "model": "gpt-5.1"}})
        await act(http, base, kp, {"_": "MessageSession", "sessionId": session_id,
                                   "content": [{"type": "text", "text": "two"}]})
        await fake.wait_for_requests(2)
        assert fake.requests[-1].body["reasoning_effort"] == "none"


def test_each_family_in_its_terms_without_a_server():
    from seed_agents.server.providers import reasoning as r

    # OpenAI: the level itself; none for no level where the model takes it; nothing otherwise.
    assert r.apply_openai({}, "openai", "gpt-5.2", "xhigh") == {"reasoning_effort": "xhigh"}
    assert r.apply_openai({}, "openai", "gpt-5.1", None) == {"reasoning_effort": "none"}
    assert r.apply_openai({}, "openai", "gpt-5", None) == {}
    assert r.apply_openai({}, "openai", "gpt-5", "xhigh") == {}   # no longer taken: left out
    assert r.apply_openai({}, "groq", "gpt-5", "low") == {}
    # Anthropic: a budget, room for the answer kept, sampling settings thinking refuses dropped.
    body = r.apply_anthropic({"max_tokens": 4096, "temperature": 0.2, "top_p": 0.99}, "anthropic",
                             "claude-opus-4-1", "high")
    assert body == {"max_tokens": 4096 + 16384, "top_p": 0.99,
                    "thinking": {"type": "enabled", "budget_tokens": 16384}}
    assert r.apply_anthropic({"max_tokens": 10}, "anthropic", "claude-3-5-haiku", "high") == {"max_tokens": 10}
    # Google: budgets for 2.5 (0 = off where allowed), levels for 3 (Pro: low or high).
    assert r.apply_google({}, "google", "gemini-2.5-pro", None) == {}
    assert r.apply_google({"generationConfig": {"thinkingConfig": {"includeThoughts": False}}}, "google",
                          "models/gemini-2.5-flash-lite", "minimal") == {
        "generationConfig": {"thinkingConfig": {"includeThoughts": False, "thinkingBudget": 512}}}
    assert r.apply_google({}, "google", "gemini-3-pro-preview", "minimal") == {
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}}
    assert r.apply_google({}, "google", "gemini-3-flash", "medium") == {
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "medium"}}}
