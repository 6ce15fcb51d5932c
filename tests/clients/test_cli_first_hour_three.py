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
from tests.clients.test_cli_commands import cli_env, run_cli
from tests.clients.test_cli_first_hour import cli, ok
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
    shown = (await ok(env, "send", session, "colors please")).splitlines()
    # one send shows the whole run: every answer, and the server's reminders as the server's
    assert [line for line in shown if line.startswith("Answer")] == [f"Answer {n}." for n in range(1, 5)]
    assert sum(line.startswith(f"server: {CONTINUATION}") for line in shown) == 3
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
    secret = re.search(r"(whsec_[A-Za-z0-9_-]+)", err).group(1)
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
    """Finding 9: the model is offered every mode this server runs (script children too, since
    the workflow engine: tests/server/runtime/test_workflows.py), and a call mixing two modes is refused in one
    grammatical sentence."""
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    fake.enqueue(Script(chunks=[], tool_calls=[tool_call("d1", "delegate", {"script": "export default async () => 1", "brief": "go"})]),
                 Script(chunks=["I will do it myself."]))
    session = (await ok(env, "sessions", "create", "bot")).strip()
    await ok(env, "send", session, "split this")
    tools = {t["function"]["name"]: t["function"] for t in fake.requests[0].body["tools"]}
    delegate = tools["delegate"]
    assert set(delegate["parameters"]["properties"]) == {"title", "brief", "tools", "output", "agentId", "prompt",
                                                            "await", "script", "input"}
    assert "script child" in delegate["description"].lower()
    raw = json.loads(await ok(env, "history", session, "--json"))
    errors = [e["event"]["error"] for e in raw if e["event"].get("type") == "tool_result"]
    assert errors == ["give exactly one of brief (a model child) or script (a script child)"]


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


# -- changing an agent ------------------------------------------------------------------------------
async def test_agents_update_changes_any_field_and_shows_before_and_after(server, tmp_path):
    """Finding 4: an MCP server attached, an imported identity given (and taken away, so it can be
    deleted), a tool revoked, the model and prompt changed, any other field set; each change shown
    before and after; the Python client's partial definition merges with the stored one."""
    from tests.fakes.mcp_server import McpFake

    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    agent = (await ok(env, "agents", "create", "--name", "llama", "--system-prompt", "Be kind.")).strip()
    async with McpFake("calc", "s3cret-key") as calc:
        (tmp_path / "key.txt").write_text("s3cret-key\n")
        await ok(env, "mcp", "add", "calc", calc.url, "--secret-header", f"x-api-key={tmp_path / 'key.txt'}")
        out = await ok(env, "agents", "update", "llama", "--add-mcp", "calc", "--system-prompt", "Be brief.",
                       "--model", "echo-2", "--revoke", "navigate", "--set", 'metadata={"team": "a"}')
    lines = out.splitlines()
    assert lines[:5] == [
        f"agent {agent}:",
        '  mcpServers: (none) → ["calc"]',
        '  metadata: (none) → {"team": "a"}',
        "  model: echo → echo-2",
        "  systemPrompt: Be kind. → Be brief.",
    ]
    # no list granted every configurable tool: revoking one lists the others
    assert lines[5].startswith('  tools: (none) → ["search", "web_search"') and "navigate" not in lines[5]
    assert len(lines) == 6
    (tmp_path / "seed.hex").write_text(bytes(range(1, 33)).hex())
    imported = (await ok(env, "identities", "import", "--seed-file", str(tmp_path / "seed.hex"),
                         "--label", "Mine")).strip()
    out = await ok(env, "agents", "update", agent[:8], "--identity", "Mine")
    assert f"  signingKey: hm-account-" in out and f"→ {imported}" in out
    code, _, err = await cli(env, "identities", "delete", imported)
    assert code == 1 and "still used by agent 'llama'" in err
    await ok(env, "agents", "update", "llama", "--remove-identity", imported)
    await ok(env, "identities", "delete", imported)
    shown = json.loads(await ok(env, "agents", "show", "llama", "--json"))["definition"]
    assert shown["mcpServers"] == ["calc"] and shown["model"] == "echo-2" and imported not in shown["signingKeys"]
    assert shown["signingKey"] == shown["signingKeys"][0] and shown["name"] == "llama"
    code, _, err = await cli(env, "agents", "update", "llama")
    assert code == 2 and "nothing to change" in err

    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        answer = await client.update_agent(agent, {"model": "echo", "metadata": None})
    definition = answer["agent"]["definition"]
    assert definition["model"] == "echo" and "metadata" not in definition and definition["systemPrompt"] == "Be brief."


# -- one resolver ----------------------------------------------------------------------------------
async def test_every_command_takes_a_name_or_a_prefix(server, tmp_path):
    """Finding 5: memory, triggers and identities take an agent's name or id prefix like the rest,
    and a missing id does not blame the key."""
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    agent = (await ok(env, "agents", "create", "--name", "llama")).strip()
    (tmp_path / "note.md").write_text("hello memory")
    await ok(env, "memory", "put", "llama", "notes/a.md", str(tmp_path / "note.md"))
    await ok(env, "memory", "put", agent[:6], "top.md", str(tmp_path / "note.md"))
    assert await run_cli(env, "memory", "cat", "llama", "notes/a.md") == (0, "hello memory", "")   # (bytes)
    code, out, err = await cli(env, "memory", "ls", "llama", "notes")
    assert code == 0 and out.splitlines()[0].split() == ["SIZE", "PATH"], err
    assert "notes/a.md" in out and "top.md" not in out
    assert err == "12 B in 1 file under notes/\n"
    assert [e["path"] for e in json.loads(await ok(env, "memory", "ls", agent[:4], "--json"))] == [
        "notes", "notes/a.md", "top.md"]
    assert "notes/a.md" in await ok(env, "memory", "search", "llama", "hello")
    await ok(env, "memory", "rm", "llama", "top.md")

    trigger = (await ok(env, "triggers", "add", "llama", "hourly", "--prompt", "tick", "--every", "1m")).strip()
    listing = (await ok(env, "triggers", "ls", agent[:5])).splitlines()
    assert listing[0].split() == ["ID", "STATE", "NAME", "SOURCE", "NEXT", "FIRING", "LAST", "FIRED", "LAST", "ERROR"]
    assert "every 1 minute " in listing[1] and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", listing[1])
    assert [t["id"] for t in json.loads(await ok(env, "triggers", "ls", "llama", "--json"))] == [trigger]
    assert json.loads(await ok(env, "triggers", "show", trigger, "--json"))["trigger"]["nextFireAt"] > 0
    await ok(env, "triggers", "add", "llama", "after", "--prompt", "p", "--after-run", "llama")
    for flags, wrong in ((["--every", "5m", "--tz", "Europe/Berlin"], "--tz goes with --weekly or --cron"),
                         (["--webhook", "--status", "failed"], "--status goes with --after-run")):
        code, _, err = await cli(env, "triggers", "add", "llama", "x", "--prompt", "p", *flags)
        assert code == 2 and wrong in err, err

    assert json.loads(await ok(env, "identities", "list", "--agent", "llama", "--json"))[0]["label"] == "llama"
    code, _, err = await cli(env, "memory", "ls", "nobody")
    assert (code, err) == (1, "seed-agents: no agent is named 'nobody' or has an id starting with it; "
                              "`seed-agents agents list` shows yours\n")
    missing = "00000000-0000-4000-8000-000000000000"
    code, _, err = await cli(env, "memory", "ls", missing)
    assert code == 1 and "key" not in err and "nothing this account owns or shares has that id" in err


async def test_every_listing_has_a_header_row_and_json(server, tmp_path):
    """Low: identities, triggers, mcp, memory and history listings: a header row, and --json."""
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "agents", "create", "--name", "llama")
    session = (await ok(env, "sessions", "create", "llama")).strip()
    await ok(env, "send", session, "hi")
    await ok(env, "triggers", "add", "llama", "t", "--prompt", "p", "--webhook")
    (tmp_path / "n").write_text("x")
    await ok(env, "memory", "put", "llama", "n.md", str(tmp_path / "n"))
    for args, header in ((["identities", "list"], "NAME"), (["triggers", "ls", "llama"], "ID"),
                         (["memory", "ls", "llama"], "SIZE")):
        assert (await ok(env, *args)).split()[0] == header, args
        assert isinstance(json.loads(await ok(env, *args, "--json")), list), args
    code, out, err = await cli(env, "mcp", "ls")
    assert (code, out) == (0, "") and "no MCP servers yet" in err
    assert json.loads(await ok(env, "mcp", "ls", "--json")) == []
    assert [e["event"]["type"] for e in json.loads(await ok(env, "history", session, "--json"))] == ["message"] * 2


# -- the README --------------------------------------------------------------------------------------
def test_the_readme_lists_every_command_once():
    """Finding 7: the command table names every command and subcommand of the parser, each once
    (`mcp` was missing, `send` was there twice)."""
    import argparse
    from collections import Counter
    from pathlib import Path

    from seed_agents.clients.cli import build_parser

    def choices(parser: argparse.ArgumentParser) -> dict:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    commands = choices(build_parser())
    wanted = Counter()
    for name, sub in commands.items():
        subs = choices(sub)
        for pair in ([(name, s) for s in subs] if subs else [(name, "")]):
            wanted[pair] = 1
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = text[text.index("| command | does |"):].split("\n\n", 1)[0].splitlines()[2:]
    seen: Counter = Counter()
    for row in table:
        current, in_row = None, set()
        for span in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            words = span.removeprefix("seed-agents ").split()
            if not words or words[0].startswith("-"):
                continue
            if words[0] in commands:
                current = words[0]
                sub = words[1] if choices(commands[current]) and len(words) > 1 else ""
            else:
                sub = words[0]
            in_row.add((current, sub))   # (`completion bash` / `completion zsh`: one command)
        seen.update(in_row)
    assert seen == wanted, (set(wanted) - set(seen), set(seen) - set(wanted),
                            [pair for pair, n in seen.items() if n > 1])


def test_skip_lines_name_nothing_outside_the_repository():
    """Low: `make test` ends with one line per skip reason; none names a folder beside the clone."""
    from pathlib import Path

    import tests.repo.test_contract_references as contract
    import tests.protocol.test_vectors_copy as vectors

    outside = str(Path(__file__).resolve().parents[3])
    for test in (contract.test_the_copy_equals_the_original, vectors.test_the_copy_equals_the_original):
        [reason] = [m.kwargs["reason"] for m in test.pytestmark if m.name == "skipif"]
        assert outside not in reason and "../" not in reason and "beside this clone" not in reason, reason


async def test_history_shows_attachments(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "agents", "create", "--name", "llama")
    session = (await ok(env, "sessions", "create", "llama", "--title", "files")).strip()
    (tmp_path / "report.txt").write_text("twelve bytes")
    await ok(env, "send", session, "read this", "--attach", str(tmp_path / "report.txt"))
    assert (await ok(env, "history", "files")).splitlines()[0] == "#1 user: read this [attached: report.txt (12 bytes)]"


async def test_a_schedule_trigger_fires_by_hand(server, tmp_path):
    """Low: `triggers fire` tries a schedule now (FireAgentTrigger): its prompt starts a session; a
    retried request fires once; a trigger that is off is 409; another account cannot fire it."""
    from seed_agents.clients import AgentsError
    from seed_agents.protocol.wire.keys import Keypair

    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "agents", "create", "--name", "llama")
    trigger = (await ok(env, "triggers", "add", "llama", "weekly", "--prompt", "Plan the week",
                        "--weekly", "mon 09:00")).strip()
    code, out, err = await cli(env, "triggers", "fire", trigger)
    assert code == 0 and re.fullmatch(r"\S+ created session \S+\n", out), (out, err)
    session = out.split()[-1]
    history = (await ok(env, "history", session)).splitlines()
    assert history[0] == "#1 user: Plan the week"
    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        first = await client.fire_agent_trigger(trigger, "again-1")
        assert (await client.fire_agent_trigger(trigger, "again-1"))["firingId"] == first["firingId"]
        await client.update_agent_trigger(trigger, {"enabled": False})
        try:
            await client.fire_agent_trigger(trigger)
            raise AssertionError("a trigger that is off fired")
        except AgentsError as exc:
            assert exc.status == 409 and "is off" in exc.message
    async with AgentsClient.connect(server.url, Keypair.generate()) as stranger:
        try:
            await stranger.fire_agent_trigger(trigger)
            raise AssertionError("another account fired the trigger")
        except AgentsError as exc:
            assert exc.status == 404
    shown = json.loads(await ok(env, "triggers", "show", trigger, "--json"))
    assert [f["activityKey"].split(":")[0] for f in shown["firings"]] == ["manual", "manual"]


# -- children, chat, Ctrl-C ------------------------------------------------------------------------
def delegating_model(request) -> Script:
    """The parent delegates once, then answers with what its child said; the child says hi."""
    messages = request.body.get("messages", [])
    first = next((m["content"] for m in messages if m.get("role") == "user"), "")
    results = [m for m in messages if m.get("role") == "tool"]
    if first.startswith("child A"):
        return Script(chunks=["hi from A"])
    if not results:
        return Script(chunks=["Asking a helper."],
                      tool_calls=[tool_call("d1", "delegate", {"title": "part A", "brief": "child A: say hi"})])
    return Script(chunks=["The helper said hi."])


async def test_children_show_as_they_start_and_end(server, tmp_path, fake):
    """Finding 2: a child run shows when it starts and when it ends, then the parent's answer."""
    fake.default = delegating_model
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    session = (await ok(env, "sessions", "create", "bot", "--title", "parent")).strip()
    lines = (await ok(env, "send", session, "get help")).splitlines()
    assert lines[0] == "Asking a helper."
    assert lines[1] == '↳ child "part A" started'
    assert re.fullmatch(r'↳ child "part A" succeeded( \(\d+(\.\d)? m?s\))?', lines[2]), lines
    assert lines[3:] == ["The helper said hi."]
    history = (await ok(env, "history", "parent")).splitlines()
    children = [re.sub(r"^#\d+ ", "", h) for h in history if "↳" in h]
    assert children[0] == '↳ child "part A" started' and children[1].startswith('↳ child "part A" succeeded')
    assert len(children) == 2


async def test_chat_makes_a_session_only_when_a_message_is_sent(server, tmp_path):
    """Low: chat, /new and /agent make no empty sessions; titles come from the first message, so
    two chats of the same minute can be told apart; /agent alone lists the agents."""
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "agents", "create", "--name", "llama")
    code, out, err = await run_cli(env, "chat", "--agent", "llama", stdin=b"/new\n/agent\n/agent llama\n/quit\n")
    assert code == 0 and out == "", err
    assert "unknown chat command" not in err and "usage: /agent NAME" in err and "llama" in err
    assert json.loads(await ok(env, "sessions", "list", "--json")) == []
    for text in ("first question", "second question"):
        code, out, err = await run_cli(env, "chat", "--agent", "llama", stdin=f"{text}\n".encode())
        assert (code, out) == (0, f"echo: {text}\n"), err
    titles = sorted(s["title"] for s in json.loads(await ok(env, "sessions", "list", "--json")))
    assert titles == ["first question", "second question"]


async def test_send_stops_the_run_on_ctrl_c(server, tmp_path, fake):
    """What must hold: Ctrl-C stops everything: `send` interrupted stops the run on the server,
    shows `[stopped]` and exits 130."""
    import signal
    import sys

    from tests.clients.test_cli_commands import ROOT

    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await with_model(env, fake)
    session = (await ok(env, "sessions", "create", "bot")).strip()
    fake.enqueue(Script(chunks=["word "] * 400, chunk_delay=0.05))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seed_agents.server.console", "send", session, "talk", cwd=str(ROOT), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        first = await asyncio.wait_for(proc.stdout.readexactly(5), 20)   # the first word is on screen
        assert first == b"word "
        proc.send_signal(signal.SIGINT)
        rest, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert rest.decode().rstrip().endswith("[stopped]")
    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        runs = (await client.list_runs(session_id=session))["runs"]
        assert [r["status"] for r in runs] == ["canceled"]


def test_a_transcript_read_by_an_agent_shows_injected_turns_as_the_servers():
    """Finding 8, the agent's side: `read thread:<id>` names the server, not the user."""
    from seed_agents.server.tools.session_tools import _event_line

    injected = {"type": "message", "role": "user", "actor": "system", "content": CONTINUATION + ": x"}
    assert _event_line(injected).startswith("**server**: ")
    assert _event_line({"type": "message", "role": "user", "content": "hi"}) == "**user**: hi"
