"""A newcomer's first hour, round three (issue 38): the whole run on screen (every assistant
message, tool calls as compact lines, children, the plan), `agents update`, one resolver for every
command, listings with header rows and --json, injected turns shown as the server's, webhook
refusals explained in the log, and `delegate` offering only what runs. Each test drives the real
CLI (`seed_agents.clients.cli.main`) against a real server over real sockets, with the scripted
fake model (tests/fakes/openai_server.py) where a model must call tools."""
from __future__ import annotations

import asyncio
import json
import logging
import re

import httpx
import pytest

from seed_agents.clients import AgentsClient
from seed_agents.clients.keyfile import read_key

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.test_cli_commands import cli_env
from tests.test_cli_first_hour import cli, ok
from tests.waiting import until

CONTINUATION = "This turn is ending with work you committed to still open"


@pytest.fixture
async def fake():
    async with FakeOpenAI() as server:
        yield server


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


async def with_model(env, fake, name: str = "bot") -> str:
    """A key, a provider on the fake model and an agent using it; the agent's id."""
    await ok(env, "keygen")
    await ok(env, "providers", "set", "fake", "--type", "custom", "--base-url", fake.base_url,
             "--api-key-env", "FAKE_KEY", "--model", "fake-model")
    return (await ok(env, "agents", "create", "--name", name, "--provider", "fake")).strip()


# -- the server's side ------------------------------------------------------------------------------
async def test_injected_turns_are_the_servers_not_the_users(server, tmp_path, fake):
    """Finding 8: the open-plan reminders and the final notice are stored with actor system, shown
    by `history` as the server's, and never move the session's "last message from" mark."""
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    plan = {"title": "Colors", "steps": [{"id": "s1", "label": "Name three colors", "status": "done"},
                                         {"id": "s2", "label": "Write the sentence", "status": "pending"}]}
    # A stubborn model: it leaves its plan open and keeps answering.
    fake.enqueue(Script(chunks=[], tool_calls=[tool_call("p1", "plan", plan)]),
                 *[Script(chunks=[f"Answer {n}."]) for n in range(1, 5)])
    session = (await ok(env, "sessions", "create", "bot", "--title", "stubborn")).strip()
    await ok(env, "send", session, "colors please")
    history = (await ok(env, "history", "stubborn")).splitlines()
    injected = [line for line in history if CONTINUATION in line]
    assert len(injected) == 3 and all(re.match(r"#\d+ server: ", line) for line in injected), history
    assert not any(re.match(r"#\d+ user: This", line) for line in history)
    assert any(re.match(r"#\d+ server: This run ended with work still open", line) for line in history)
    listed = json.loads(await ok(env, "sessions", "list", "--json"))
    assert [s["activity"]["messageFrom"] for s in listed if s["id"] == session] == ["assistant"]
    raw = json.loads(await ok(env, "history", "stubborn", "--json"))
    reminders = [e["event"] for e in raw if CONTINUATION in str(e["event"].get("content", ""))]
    assert [(e["role"], e["actor"]) for e in reminders] == [("user", "system")] * 3


async def test_a_refused_webhook_call_says_why_in_the_log(server, tmp_path, caplog):
    """Finding 7: every refusal is the same 404 to the caller, and an INFO line for the owner
    that says why, without the secret."""
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "agents", "create", "--name", "hooked")
    code, out, err = await cli(env, "triggers", "add", "hooked", "inbox", "--prompt", "read it", "--webhook")
    assert code == 0, err
    trigger = out.strip()
    secret = re.search(r"(whsec_\S+)", err).group(1)
    assert "Authorization: Bearer" in err   # how to send the secret
    url = f"http://127.0.0.1:{server.port}/agents/hooks/{trigger}"
    caplog.set_level(logging.INFO, logger="seed_agents.triggers")
    async with httpx.AsyncClient(timeout=10) as http:
        for headers, params in (({"Authorization": "Bearer whsec_wrong"}, None), ({"X-Secret": secret}, None),
                                ({}, {"secret": secret})):
            answer = await http.post(url, json={}, headers=headers, params=params)
            assert answer.status_code == 404
        assert (await http.post(url + "x", json={}, headers={"Authorization": f"Bearer {secret}"})).status_code == 404
        assert (await http.post(url, json={}, headers={"Authorization": f"Bearer {secret}"})).status_code == 202
    lines = [r.getMessage() for r in caplog.records if "webhook call" in r.getMessage()]
    assert len(lines) == 4, lines
    assert "the secret presented is not this trigger's" in lines[0]
    assert "no secret was presented" in lines[1] and "Authorization: Bearer" in lines[1]
    assert "a secret in the URL is not read" in lines[2]
    assert "no enabled webhook trigger has this id" in lines[3]
    assert all(secret not in line and "whsec_wrong" not in line for line in lines)


async def test_delegate_offers_only_what_this_server_runs(server, tmp_path, fake):
    """Finding 9: the model is not offered script, persona, other-agent or detached children, and a
    call naming one anyway is refused in one grammatical sentence."""
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    fake.enqueue(Script(chunks=[], tool_calls=[tool_call("d1", "delegate", {"agentId": "x", "brief": "go"})]),
                 Script(chunks=["I will do it myself."]))
    session = (await ok(env, "sessions", "create", "bot")).strip()
    await ok(env, "send", session, "split this")
    tools = {t["function"]["name"]: t["function"] for t in fake.requests[0].body["tools"]}
    delegate = tools["delegate"]
    assert set(delegate["parameters"]["properties"]) == {"title", "brief", "tools", "output"}
    assert "script" not in delegate["description"].lower() and "await" not in delegate["description"]
    raw = json.loads(await ok(env, "history", session, "--json"))
    errors = [e["event"]["error"] for e in raw if e["event"].get("type") == "tool_result"]
    assert errors == ["This server cannot run a child as another agent, so delegate with a brief and the "
                      "child runs as you."]


async def test_the_front_page_shows_code_not_backticks(server):
    async with httpx.AsyncClient(timeout=10) as http:
        page = (await http.get(f"http://127.0.0.1:{server.port}/", headers={"Accept": "text/html"})).text
    assert "`" not in page and "<code>seed-agents --help</code>" in page


# -- the whole run on screen ------------------------------------------------------------------------
def memory_turn(fake) -> None:
    """A first sentence, a write to memory and a plan, then the real answer after the tools."""
    plan = {"title": "Notes", "steps": [{"id": "s1", "label": "Write the note", "status": "done"}]}
    fake.enqueue(Script(chunks=["Let me ", "check that for you first."],
                        tool_calls=[tool_call("w1", "write", {"address": "~/memory/notes.md", "content": "x" * 27}),
                                    tool_call("p1", "plan", plan)]),
                 Script(chunks=["Your notes ", "hold 27 bytes."]))


async def test_send_shows_every_message_tool_and_plan_until_the_run_ends(server, tmp_path, fake):
    """Finding 1 and 2: the answer after a tool call appears; each call is one compact line with its
    result and duration; the plan is a checklist; --quiet is the answer alone, --json the raw events;
    `history` and `tail` show the same lines, numbered."""
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    session = (await ok(env, "sessions", "create", "bot", "--title", "notes")).strip()
    memory_turn(fake)
    lines = (await ok(env, "send", "notes", "look in your memory")).splitlines()
    assert lines[0] == "Let me check that for you first."
    assert re.fullmatch(r"· write ~/memory/notes\.md → 27 bytes \(\d+ ms\)", lines[1]), lines
    assert re.fullmatch(r"· plan \"Notes\" → .+ \(\d+ ms\)", lines[2]), lines
    assert lines[3:] == ["  [x] Write the note", "Your notes hold 27 bytes."]

    memory_turn(fake)
    assert await ok(env, "send", "--quiet", session, "again") == "Your notes hold 27 bytes.\n"
    memory_turn(fake)
    raw = [json.loads(line) for line in (await ok(env, "send", "--json", session, "once more")).splitlines()]
    kinds = [item["event"]["event"]["type"] for item in raw if item["_"] == "append"]
    assert kinds == ["message", "tool_call", "tool_call", "tool_result", "tool_result", "message"]
    assert raw[-1]["_"] == "change" and raw[-1]["value"]["status"] == "succeeded"

    history = (await ok(env, "history", "notes")).splitlines()
    assert re.fullmatch(r"#2 assistant: Let me check that for you first\.", history[1])
    assert sum(bool(re.fullmatch(r"#\d+ · write ~/memory/notes\.md → 27 bytes \(\d+ ms\)", h)) for h in history) == 3
    assert not any('"runId"' in h or "usage" in h for h in history)
    # the plan is shown once: it did not change in the later turns
    assert sum(h.strip() == "[x] Write the note" for h in history) == 1
    assert history[-1] == f"#{len(json.loads(await ok(env, 'history', 'notes', '--json')))} assistant: Your notes hold 27 bytes."


async def test_a_stopped_reply_is_marked_and_send_exits_1(server, tmp_path, fake):
    """Low: `[stopped]` in history (never a bare `Stopped.`), and `send` exits 1 however it was stopped."""
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    session = (await ok(env, "sessions", "create", "bot", "--title", "cut")).strip()
    fake.enqueue(Script(chunks=["word "] * 400, chunk_delay=0.05), Script(hang=True))

    async def stop_when_streaming(client) -> None:
        # (the CLI helper swaps sys.stdout: a second command at once goes through the client)
        await until(lambda: fake.requests, timeout=20)
        await until(streams(client, session), timeout=20)
        assert (await client.stop_session(session))["stopped"]

    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        for _ in range(2):   # once cut mid-words, once before any word
            stopper = asyncio.create_task(stop_when_streaming(client))
            code, out, err = await cli(env, "send", session, "talk")
            await stopper
            assert code == 1 and out.rstrip().endswith("[stopped]"), (code, out, err)
            assert "the run was stopped before it finished" in err
            fake.requests.clear()
    history = (await ok(env, "history", "cut")).splitlines()
    assert history[1].startswith("#2 assistant: word ") and history[1].endswith(" [stopped]")
    assert history[3] == "#4 assistant: [stopped]"


def streams(client, session: str):
    async def streaming() -> bool:
        return (await client.get_session(session, limit=1))["session"]["status"] == "streaming"
    return streaming
