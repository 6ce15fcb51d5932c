"""A turn as a loop, through a real server, for each provider family with a scripted fake model:
the model writes and reads its memory, searches it, reads a local web page with `navigate`,
keeps a plan, and answers. What the desktop renders is checked: the durable tool_call /
tool_result events (actor, meta), the live `activity` patches, the run's usage, the session's
plan, and GetSession's replay; and what each provider was handed back (its own format)."""
from __future__ import annotations

import asyncio
import json

import pytest

from seed_agents.server.main import start_server

from tests.conftest import server_config
from tests.fakes import sse_base
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.hm_server import FakeHmServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Script as OpenAIScript
from tests.fakes.web_server import FakeWeb
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.wsraw import V2Client, flatten, keypair

FAMILIES = [
    pytest.param(FakeOpenAI, OpenAIScript, "custom", 9, id="openai"),
    pytest.param(FakeAnthropic, sse_base.Script, "anthropic", 26, id="anthropic"),
    pytest.param(FakeGoogle, sse_base.Script, "google", 22, id="google"),
]


@pytest.fixture
async def web():
    async with FakeWeb() as w:
        yield w


@pytest.fixture
async def hm():
    async with FakeHmServer() as h:
        yield h


@pytest.fixture
async def server(tmp_path, web, hm, storage, request):
    # The fake web is on loopback: the operator lets the web tools reach it (--web-networks).
    running = await start_server(server_config(tmp_path, storage, request, allow_provider_base_url=True,
                                               searxng_url=web.url(""), hm_server_url=hm.base_url,
                                               web_networks="loopback"))
    try:
        yield running
    finally:
        await running.stop()


async def agent_session(c, kp, type_, base_url, *, model="m", signing_key=None):
    r = await c.call(kp, {"_": "SetSecret", "name": "k", "value": b"sk-test"})
    assert r["_"] == "SetSecretResponse", r
    provider = {"type": type_, "baseUrl": base_url, "secretRefs": {"apiKey": "k"}}
    r = await c.call(kp, {"_": "SetModelProvider", "name": "p", "provider": provider})
    assert r["_"] == "SetModelProviderResponse", r
    definition = {"name": "Looper", "systemPrompt": "You use tools.", "modelProvider": "p", "model": model}
    if signing_key:
        definition["signingKey"] = signing_key
    r = await c.call(kp, {"_": "CreateAgent", "definition": definition})
    agent_id = r["agentId"]
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    await c.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
    await c.event_where(lambda e: e.get("_") == "replayed")
    return agent_id, sid


def call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


async def run_turn(c, kp, sid, text="go", timeout=30):
    """Send a message; every event until the session settles: (patches, durable events)."""
    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    patches, appends = [], []
    async with asyncio.timeout(timeout):
        while True:
            e = await c.event()
            if e["_"] == "appendPartial":
                patches.append(e["patch"])
            appends += flatten(e)
            if e["_"] == "change" and e["key"] == f"sessions/{sid}" and e["value"]["status"] != "streaming" \
                    and any(a["event"].get("type") in ("message", "error") and a["event"].get("role") != "user"
                            for a in appends):
                return patches, appends


@pytest.mark.storages("sqlite", "postgresql")
@pytest.mark.parametrize("fake_cls, script_cls, type_, step_total", FAMILIES)
async def test_a_turn_that_uses_every_kind_of_tool(server, web, hm, fake_cls, script_cls, type_, step_total):
    kp = keypair("loop-" + type_)
    page = web.url("/page.html")
    c = await V2Client.open(server.url)
    identity = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Kite Watcher"}))["identity"]
    doc = f"hm://{identity['accountId']}/kites"
    steps = [
        # 1: write a memory file (Anthropic: after a signed thinking block, handed back next step)
        script_cls(chunks=["Let me note that."], tool_calls=[{**call("c1", "write", {
            "address": "~/memory/notes/kites.md", "content": "The red kite has a forked tail."}),
            "signature": "gemini-sig-1"}],   # (Gemini: a thought signature to hand back)
            **({"thinking": "I should write it down."} if type_ == "anthropic" else {})),
        # 2: two calls at once: read it back, and search memory
        script_cls(chunks=[], tool_calls=[
            call("c2", "read", {"address": "~/memory/notes/kites.md"}),
            call("c3", "call", {"tool": "search_memory", "input": {"query": "forked"}})]),
        # 3: read a local web page
        script_cls(chunks=[], tool_calls=[call("c4", "call", {"tool": "navigate", "input": {"url": page}})]),
        # 4: search the web (the fake SearXNG)
        script_cls(chunks=[], tool_calls=[call("c5", "call", {"tool": "web_search", "input": {"query": "kites"}})]),
        # 5, 6: publish a document as the agent's identity, and read it back from the HM server
        script_cls(chunks=[], tool_calls=[call("h1", "write", {
            "address": doc, "content": "Red kites soar over the hills.", "options": {"name": "Kites"}})]),
        script_cls(chunks=[], tool_calls=[call("h2", "read", {"address": doc})]),
        # 7: a plan, all done
        script_cls(chunks=[], tool_calls=[call("c6", "plan", {"title": "Kites", "steps": [
            {"id": "s1", "label": "Take notes", "status": "done"},
            {"id": "s2", "label": "Read about kites", "status": "done"}]})]),
        # 6: the answer
        script_cls(chunks=["Red kites ", "have forked tails."]),
    ]
    async with fake_cls() as fake:
        fake.enqueue(*steps)
        agent_id, sid = await agent_session(c, kp, type_, fake.base_url, signing_key=identity["name"])
        watcher = await V2Client.open(server.url)   # follows the account: its runs' changes
        await watcher.call(kp, {"_": "Subscribe", "key": f"account/{kp.account_id}"})
        patches, appends = await run_turn(c, kp, sid)

        events = [a["event"] for a in appends]
        kinds = [(e["type"], e.get("name") or e.get("role")) for e in events]
        assert events[1]["type"] != "error", events[1]
        assert kinds == [
            ("message", "user"),
            ("message", "assistant"), ("tool_call", "write"), ("tool_result", "write"),
            ("tool_call", "read"), ("tool_call", "call"), ("tool_result", "read"), ("tool_result", "call"),
            ("tool_call", "call"), ("tool_result", "call"),
            ("tool_call", "call"), ("tool_result", "call"),
            ("tool_call", "write"), ("tool_result", "write"),
            ("tool_call", "read"), ("tool_result", "read"),
            ("tool_call", "plan"), ("tool_result", "plan"),
            ("message", "assistant"),
        ], kinds
        assert events[1]["content"] == "Let me note that."
        calls = [e for e in events if e["type"] == "tool_call"]
        results = {e["toolCallId"]: e for e in events if e["type"] == "tool_result"}
        for e in calls:
            assert e["actor"] == "agent" and e["meta"]["model"] == "m" and e["meta"]["provider"] == type_
            assert e["id"] in results, e
        for e in results.values():
            assert e["actor"] == "agent" and isinstance(e["meta"]["durationMs"], int) and "error" not in e, e
        by_input = {json.dumps(e["input"], sort_keys=True): results[e["id"]] for e in calls}

        def result_of(**input_):
            return by_input[json.dumps(input_, sort_keys=True)]["output"]

        assert result_of(address="~/memory/notes/kites.md")["content"] == "The red kite has a forked tail."
        found = result_of(tool="search_memory", input={"query": "forked"})
        assert [r["url"] for r in found["results"]] == ["~/memory/notes/kites.md"]
        read_page = result_of(tool="navigate", input={"url": page})
        assert "forked tail" in read_page["markdown"] and "Copyright nobody" not in read_page["markdown"]
        searched = result_of(tool="web_search", input={"query": "kites"})
        assert searched["results"][0]["url"] == "https://example.org/red-kite"
        assert ("GET", "/search?q=kites&format=json&categories=general&language=en") in web.requests
        published = result_of(address=doc, content="Red kites soar over the hills.", options={"name": "Kites"})
        assert published["signer"]["name"] == identity["name"] and published["version"]
        assert published["command"] == "document.create" and published["type"] == "hypermedia_write_result"
        read_back = result_of(address=doc)["markdown"]
        assert "Red kites soar over the hills." in read_back and "name: Kites" in read_back
        assert len(hm.published) == 2   # the identity's account, then the agent's document

        reply = events[-1]
        assert reply["content"] == "Red kites have forked tails."
        assert reply["meta"]["usage"]["total"] == step_total   # the step that wrote it
        assert reply["meta"]["provider"] == type_ and isinstance(reply["meta"]["durationMs"], int)

        # Live: activity phases in order, each tool announced with its name and call id; usage grows.
        phases = [p["activity"]["phase"] for p in patches if "activity" in p]
        assert phases[0] == "starting" and phases[-1] == "finalizing" and "responding" in phases
        tools = [(p["activity"]["toolName"], p["activity"]["toolCallId"]) for p in patches
                 if p.get("activity", {}).get("phase") == "tool"]
        assert [name for name, _ in tools] == ["write", "read", "call", "call", "call", "write", "read", "plan"]
        assert {cid for _, cid in tools} == {e["id"] for e in calls}
        usages = [p["usage"]["total"] for p in patches if "usage" in p]
        assert usages == sorted(usages) and usages[-1] == 8 * step_total
        assert patches[-1]["done"] is True

        # The run's usage, the session's plan, and the replay a desktop gets on opening it.
        runs = (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
        assert runs[0]["status"] == "succeeded" and runs[0]["usage"]["total"] == 8 * step_total
        run_changes = []
        while not run_changes or run_changes[-1]["status"] != "succeeded":
            e = await watcher.event_where(lambda e: e.get("_") == "change" and e["key"] == f"runs/{runs[0]['id']}")
            run_changes.append(e["value"])
        # The settled plan is frozen on the run in a change of its own (RunInfo.plan); the others
        # carry each step's usage, then the end.
        planned = [i for i, r in enumerate(run_changes) if "plan" in r]
        assert planned and run_changes[planned[0]]["plan"]["steps"][0]["id"] == "s1"
        totals = [r["usage"]["total"] for i, r in enumerate(run_changes) if "usage" in r and i != planned[0]]
        assert totals == [step_total * n for n in range(1, 8)] + [8 * step_total], totals   # each step, then the end
        await watcher.close()
        detail = await c.call(kp, {"_": "GetSession", "sessionId": sid})
        assert [e["event"] for e in detail["events"]] == events
        plan = detail["session"]["plan"]
        assert [(s["id"], s["status"]) for s in plan["steps"]] == [("s1", "done"), ("s2", "done")]
        assert plan["ownerRunId"] == runs[0]["id"] and isinstance(plan["settledAt"], int)

        # Each step handed the model its earlier calls and results, in the provider's own format.
        bodies = [r.body for r in fake.requests if isinstance(r.body, dict)]
        assert len(bodies) == 8
        last = bodies[-1]
        if type_ == "custom":
            assert [t["function"]["name"] for t in last["tools"]] == ["read", "write", "call", "plan", "status", "delegate",
                                                                       "continue_session"]
            tool_msgs = [m for m in last["messages"] if m["role"] == "tool"]
            assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2", "c3", "c4", "c5", "h1", "h2", "c6"]
            step2 = next(m for m in last["messages"] if m.get("tool_calls") and len(m["tool_calls"]) == 2)
            assert [tc["function"]["name"] for tc in step2["tool_calls"]] == ["read", "call"]
            first = next(m for m in last["messages"] if m.get("tool_calls"))
            assert first["content"] == "Let me note that."
        elif type_ == "anthropic":
            assert [t["name"] for t in last["tools"]] == ["read", "write", "call", "plan", "status", "delegate",
                                                                       "continue_session"]
            first = next(m for m in last["messages"] if m["role"] == "assistant")
            assert [b["type"] for b in first["content"]] == ["thinking", "text", "tool_use"]
            assert first["content"][0]["signature"] == "sig-23"
            results_blocks = [b for m in last["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                              for b in m["content"] if b["type"] == "tool_result"]
            assert [b["tool_use_id"] for b in results_blocks] == ["c1", "c2", "c3", "c4", "c5", "h1", "h2", "c6"]
        else:
            assert [d["name"] for d in last["tools"][0]["functionDeclarations"]] == \
                ["read", "write", "call", "plan", "status", "delegate",
                                                                       "continue_session"]
            responses = [p["functionResponse"] for content in last["contents"] if content["role"] == "user"
                         for p in content["parts"] if "functionResponse" in p]
            assert [r["name"] for r in responses] == ["write", "read", "call", "call", "call", "write", "read", "plan"]
            assert responses[1]["response"]["output"]["content"] == "The red kite has a forked tail."
            first_call = next(p for content in last["contents"] if content["role"] == "model"
                              for p in content["parts"] if "functionCall" in p)
            assert first_call["thoughtSignature"] == "gemini-sig-1"
        await c.close()


@pytest.mark.parametrize("fake_cls, script_cls, type_, step_total", FAMILIES)
async def test_a_mis_called_tool_is_answered_with_its_contract(server, fake_cls, script_cls, type_, step_total):
    """Malformed arguments, an unknown tool, wrong input, a verb not here yet: each is answered
    (the contract, the listing, a clear sentence) and the run goes on to its answer."""
    kp = keypair("miscall-" + type_)
    broken = [call("b1", "plan", {"steps": [{"id": "s1"}]}),          # missing label and status
              call("b2", "teleport", {"to": "mars"}),                   # no such tool
              call("b3", "delegate", {"script": "export default async () => Math.random()"})]   # not deterministic
    if type_ != "google":   # Gemini sends arguments as a parsed object: they cannot be malformed
        broken.append(call("b4", "read", '{"address": "~/self"'))       # cut JSON
    async with fake_cls() as fake:
        fake.enqueue(script_cls(chunks=[], tool_calls=broken), script_cls(chunks=["Sorry."]))
        c = await V2Client.open(server.url)
        _, sid = await agent_session(c, kp, type_, fake.base_url)
        _, appends = await run_turn(c, kp, sid)
        results = [a["event"] for a in appends if a["event"]["type"] == "tool_result"]
        assert "did not match its contract" in results[0]["output"]["summary"]
        assert "# plan" in results[0]["output"]["contract"]
        assert any("label" in v for v in results[0]["output"]["validationErrors"])
        assert "No tool named 'teleport'" in results[1]["output"]["summary"]
        assert results[2]["error"] == ("the script was not started: Math.random is not available: take "
                                       "randomness as workflow input")
        if type_ != "google":
            assert results[3]["output"]["validationErrors"] == [
                "the arguments were not valid JSON (cut off, or malformed)"]
        assert appends[-1]["event"]["content"] == "Sorry."
        await c.close()


@pytest.mark.parametrize("fake_cls, script_cls, type_, step_total", FAMILIES)
async def test_a_call_cut_off_mid_stream_fails_the_run_visibly(server, fake_cls, script_cls, type_, step_total):
    kp = keypair("cut-" + type_)
    async with fake_cls() as fake:
        fake.enqueue(script_cls(chunks=["Reading"], tool_calls=[call("x1", "read", {"address": "~/self"})],
                                cut_tool_call=True))
        c = await V2Client.open(server.url)
        _, sid = await agent_session(c, kp, type_, fake.base_url)
        _, appends = await run_turn(c, kp, sid)
        events = [a["event"] for a in appends]
        assert [e["type"] for e in events] == ["message", "error"]   # nothing half-recorded
        assert "cut off" in events[-1]["message"]
        await c.close()


async def test_the_agent_publishes_only_as_the_identities_it_names(server, hm):
    kp = keypair("publisher")
    c = await V2Client.open(server.url)
    mine = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Mine"}))["identity"]
    other = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Not named"}))["identity"]
    async with FakeOpenAI() as fake:
        fake.enqueue(OpenAIScript(chunks=[], tool_calls=[
            call("p1", "write", {"address": f"hm://{other['accountId']}/x", "content": "hi",
                                 "options": {"signer": other["name"]}}),
            call("p2", "write", {"address": f"hm://{other['accountId']}/x", "content": "hi"}),
            call("p3", "write", {"address": f"hm://{mine['accountId']}/x", "content": "hi",
                                 "options": {"bogus": True}}),
            call("p4", "write", {"address": "~/memory/../../etc/passwd", "content": "x"})]),
            OpenAIScript(chunks=["ok"]))
        _, sid = await agent_session(c, kp, "custom", fake.base_url, signing_key=mine["name"])
        published_before = len(hm.published)
        _, appends = await run_turn(c, kp, sid)
        errors = [a["event"]["error"] for a in appends if a["event"]["type"] == "tool_result"]
        assert "you can publish only as " + mine["name"] in errors[0]
        assert "can only publish in its own account" in errors[1]
        assert "refused, not ignored" in errors[2]
        assert '".."' in errors[3]
        assert len(hm.published) == published_before
    await c.close()


async def test_attachments_are_read_and_saved_to_memory(server):
    """`attachment:<id>` reads a file of this conversation (and only this one); `write` saves one
    to memory with fromAttachment."""
    from seed_agents.server.store import attachments as attachments_q

    kp = keypair("attachments")
    async with FakeOpenAI() as fake:
        c = await V2Client.open(server.url)
        _, sid = await agent_session(c, kp, "custom", fake.base_url)
        _, other_sid = await agent_session(c, kp, "custom", fake.base_url)
        db = server.app.db
        info = await db.write(lambda conn: attachments_q.save(conn, sid, kp.account_id, "notes.txt", "text/plain",
                                                              b"kites eat worms", 1))
        other = await db.write(lambda conn: attachments_q.save(conn, other_sid, kp.account_id, "x.txt", "text/plain",
                                                               b"elsewhere", 1))
        fake.enqueue(OpenAIScript(chunks=[], tool_calls=[
            call("a1", "read", {"address": f"attachment:{info['id']}"}),
            call("a2", "read", {"address": f"attachment:{other['id']}"}),
            call("a3", "write", {"address": "~/memory/saved.txt", "options": {"fromAttachment": info["id"]}}),
            call("a4", "read", {"address": "~/memory/"})]), OpenAIScript(chunks=["ok"]))
        _, appends = await run_turn(c, kp, sid)
        r1, r2, r3, r4 = [a["event"] for a in appends if a["event"]["type"] == "tool_result"]
        assert r1["output"]["content"] == "kites eat worms"
        assert "Attachment not found" in r2["error"]   # another conversation's file is not here
        assert r3["output"]["size"] == 15
        assert r4["output"]["entries"] == [{"path": "saved.txt", "type": "file", "size": 15}]
        await c.close()


async def test_the_activity_feed_is_read(tmp_path):
    """`activity:` reads the HM server's feed (ListEvents), filters by author and event type."""
    from tests.fakes.hm_activity import FakeHMActivity, comment_event, doc_update_event

    kp = keypair("feed")
    alice, bob = "z6MkAlice", "z6MkBob"
    async with FakeHMActivity() as feed, FakeOpenAI() as fake:
        feed.publish(doc_update_event("bafy1", alice, "notes", 1000), comment_event("bafy2", bob, alice, 2000))
        running = await start_server(server_config(tmp_path, "sqlite", None, allow_provider_base_url=True,
                                                   hm_server_url=feed.base_url))
        try:
            c = await V2Client.open(running.url)
            fake.enqueue(OpenAIScript(chunks=[], tool_calls=[
                call("f1", "read", {"address": "activity:", "options": {"pageSize": 10}}),
                call("f2", "read", {"address": "activity:", "options": {"authors": [bob]}}),
                call("f3", "read", {"address": "activity:", "options": {"eventTypes": ["doc-update"]}})]),
                OpenAIScript(chunks=["ok"]))
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            _, appends = await run_turn(c, kp, sid)
            every, by_bob, updates = [a["event"]["output"] for a in appends if a["event"]["type"] == "tool_result"]
            assert [e["id"] for e in every["events"]] == ["bafy2", "bafy1"] and every["summary"].startswith("Loaded 2")
            assert [e["id"] for e in by_bob["events"]] == ["bafy2"]
            assert [e["id"] for e in updates["events"]] == ["bafy1"]
            assert feed.list_requests()[0] == {"pageSize": "10", "currentAccount": kp.account_id}
            await c.close()
        finally:
            await running.stop()
