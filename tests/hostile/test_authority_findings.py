"""Issue 32's findings about whose authority a tool call runs with, each shown over real sockets
against a server child process (SQLite and PostgreSQL), each failing on the code before the
authority work (docs/architecture.md "Whose authority a tool call runs with"):

- 1: a reader's InvokeSessionTool reads only what the reader may see, leaves nothing in the
  owner's log, and its output is cut to the tool output cap;
- 6: a writer cannot point the shared agent at the owner's MCP server (nor reach its secret
  header through it);
- 9: memory written through the tool obeys --file-quota-bytes and --memory-max-files;
- 10: triggers act on their own agent only (wake, run-completed);
- 11: a writer publishes as the owner's identity only with the owner's say-so, and the owner hears
  of it;
- 16: a reader's `read activity:` asks the feed as the reader;
- and issue 33's trigger tool-context bug: a trigger's `tool` continuation reaches the HM server.
"""
from __future__ import annotations

import json
import os

import pytest

from tests.authority_world import SECRET, World, pg_schema_url, start_world, until
from tests.fakes.mcp_server import McpFake
from tests.pg import PG_URL_ENV
from tests.wsraw import V2Client, keypair

OUTPUT_CAP = 10_000
QUOTA = 100_000
MAX_FILES = 5
FLAGS = ("--max-tool-output-chars", str(OUTPUT_CAP), "--file-quota-bytes", str(QUOTA),
         "--memory-max-files", str(MAX_FILES))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request, tmp_path_factory):
    url, drop = None, None
    if request.param == "postgresql":
        if not os.environ.get(PG_URL_ENV):
            request.getfixturevalue("postgres_base_url")   # skips (or fails under CI) with the reason
        url, drop = pg_schema_url()
    w = start_world(tmp_path_factory.mktemp(f"findings-{request.param}"), request.param, url, flags=FLAGS,
                    label=f"findings {request.param}")
    try:
        yield w
    finally:
        w.close()
        if drop is not None:
            drop()


def event_count(w: World, session_id: str) -> int:
    return len(w.api.events(w.kp("owner"), session_id))


def test_finding_1_a_reader_reads_only_what_the_reader_may_see_and_leaves_nothing(world):
    w = world
    reader = w.kp("reader")
    before = event_count(w, w.ids["sa"])
    # The owner's conversations with an agent never shared: not listed, not readable.
    listed = w.invoke("reader", "read", {"address": "thread:"})
    assert "error" not in listed, listed
    ids = [t["id"] for t in listed["output"]["threads"]]
    assert w.ids["sa"] in ids and w.ids["sb"] not in ids
    for address in (f"thread:{w.ids['sb']}", f"run:{w.ids['rb']}"):
        r = w.invoke("reader", "read", {"address": address})
        assert "error" in r and "output" not in r, r
        assert SECRET not in json.dumps(r)
    # ... as GetSession answers them the same session.
    assert w.api.call(reader, {"_": "GetSession", "sessionId": w.ids["sb"]})["status"] == 404
    # A read of the shared agent's own session works.
    r = w.invoke("reader", "read", {"address": f"thread:{w.ids['sa']}"})
    assert "error" not in r and "hello shared" in r["output"]["markdown"]
    # A reader's reads leave nothing in the owner's log.
    assert r["resultEventId"] == ""
    assert event_count(w, w.ids["sa"]) == before
    # And a large result is cut to the tool output cap.
    w.api.ok(w.kp("owner"), {"_": "WriteAgentMemoryFile", "agentId": w.ids["a"], "path": "big.md",
                            "content": b"kite " * 10_000})
    big = w.invoke("reader", "read", {"address": "~/memory/big.md"})
    assert big["output"]["truncated"] is True and len(big["output"]["content"]) == OUTPUT_CAP, \
        {k: (v if k != "output" else str(v)[:200]) for k, v in big.items()}
    assert event_count(w, w.ids["sa"]) == before
    # A writer's call is recorded (with the same bound), as before.
    written = w.invoke("writer", "read", {"address": "~/memory/big.md"})
    assert written["resultEventId"] and event_count(w, w.ids["sa"]) == before + 2
    recorded = [e for e in w.api.events(w.kp("owner"), w.ids["sa"]) if e.get("type") == "tool_result"][-1]
    assert recorded["output"]["truncated"] is True and len(json.dumps(recorded)) < OUTPUT_CAP * 2


def test_finding_6_a_writer_cannot_reach_the_owners_mcp_server(world):
    w = world
    owner, writer = w.kp("owner"), w.kp("writer")
    mcp = McpFake("calc", "the-owners-secret-key")
    w.fakes.run(mcp.__aenter__(), timeout=60)
    try:
        # (a server of its own: the world's `calc` is one the owner gave agent A)
        r = w.api.ok(owner, {"_": "SetMcpServer", "name": "vault", "url": mcp.url,
                             "secretHeaders": {"X-Api-Key": "the-owners-secret-key"}})
        assert r["server"]["status"]["state"] == "ok", r
        # The owner's private agent uses it; the writer tries to point the shared agent at it.
        b = w.api.ok(owner, {"_": "GetAgent", "agentId": w.ids["b"]})["agent"]
        w.api.ok(owner, {"_": "UpdateAgent", "agentId": w.ids["b"],
                         "definition": {**b["definition"], "mcpServers": ["vault"]}})
        a = w.api.ok(writer, {"_": "GetAgent", "agentId": w.ids["a"]})["agent"]
        refused = w.api.call(writer, {"_": "UpdateAgent", "agentId": w.ids["a"],
                                      "definition": {**a["definition"], "mcpServers": [*a["definition"]["mcpServers"], "vault"]}})
        assert refused["_"] == "Error" and refused["status"] == 403 and "mcpServers" in refused["message"], refused
        tools = w.api.ok(writer, {"_": "ListAgentTools", "agentId": w.ids["a"]})["tools"]
        assert not [t for t in tools if t["name"].startswith("vault__")]
        called = w.invoke("writer", "call", {"tool": "vault__add", "input": {"a": 2, "b": 40}})
        assert "42" not in json.dumps(called.get("output")), called
        # The writer's other edits still go through.
        assert w.api.call(writer, {"_": "UpdateAgent", "agentId": w.ids["a"],
                                   "definition": {**a["definition"], "description": "edited"}})["_"] == "GetAgentResponse"
    finally:
        w.fakes.run(mcp.stop(), timeout=30)


def test_finding_9_memory_writes_through_the_tool_obey_the_quota_and_the_file_count(world):
    w = world
    kp = keypair(f"quota owner {w.storage}")
    agent_id = w.api.ok(kp, {"_": "CreateAgent", "definition": {
        "name": "Q", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})["agentId"]
    session_id = w.api.ok(kp, {"_": "CreateSession", "agentId": agent_id})["sessionId"]

    def write(path: str, size: int) -> dict:
        return w.api.call(kp, {"_": "InvokeSessionTool", "sessionId": session_id, "verb": "write",
                               "input": {"address": f"~/memory/{path}", "content": "x" * size}})

    assert "error" not in write("q1.txt", 60_000)
    over = write("q2.txt", 60_000)
    assert "quota" in over.get("error", ""), over                     # the account's bytes
    for n in range(MAX_FILES - 1):
        assert "error" not in write(f"f{n}.txt", 10), n
    many = write("one-too-many.txt", 10)
    assert "error" in many and str(MAX_FILES) in many["error"], many   # the agent's files
    listed = w.api.ok(kp, {"_": "ListAgentMemory", "agentId": agent_id})
    assert len([e for e in listed["entries"] if e["type"] == "file"]) == MAX_FILES


def _park_model(w: World, text: str) -> None:
    w.model.plans[text] = [[{"id": "wait-1", "name": "call",
                             "arguments": json.dumps({"tool": "wait", "input": {"signal": "go"}})}]]


def test_finding_10_triggers_act_on_their_own_agent_only(world):
    w = world
    owner, writer = w.kp("owner"), w.kp("writer")
    # A run of the owner's private agent W waits for the signal "go".
    w_agent = w.api.ok(owner, {"_": "CreateAgent", "definition": {**w.base_definition, "name": "Waiter"}})["agentId"]
    w_session = w.api.ok(owner, {"_": "CreateSession", "agentId": w_agent})["sessionId"]
    _park_model(w, "wait for go")
    parked = w.api.ok(owner, {"_": "MessageSession", "sessionId": w_session,
                              "content": [{"type": "text", "text": "wait for go"}]})["runId"]
    until("the run parked", lambda: w.api.ok(owner, {"_": "GetRun", "runId": parked})["run"]["status"] == "waiting")

    def fire(trigger_id: str, kp) -> dict:  # noqa: ANN001
        hook = w.api.ok(kp, {"_": "GetAgentTrigger", "triggerId": trigger_id})["webhook"]
        r = w.api.http.post(w.api.base + hook["path"], json={}, headers={"Authorization": f"Bearer {hook['secret']}"})
        assert r.status_code == 202, r.text
        return r.json()

    # The writer's wake triggers on the shared agent: by signal alone, and naming the run.
    for n, extra in enumerate(({}, {"runId": parked})):
        trigger = w.api.ok(writer, {"_": "CreateAgentTrigger", "agentId": w.ids["a"], "trigger": {
            "name": f"wake-{n}", "source": {"type": "webhook"}, "prompt": "p",
            "continuation": {"kind": "wake", "signal": "go", "payload": {"from": "the writer"}, **extra}}})["trigger"]
        fired = fire(trigger["id"], writer)
        assert fired["firingStatus"] == "error", fired
        assert w.api.ok(owner, {"_": "GetRun", "runId": parked})["run"]["status"] == "waiting"
    # The owner's wake trigger on W itself wakes it.
    own = w.api.ok(owner, {"_": "CreateAgentTrigger", "agentId": w_agent, "trigger": {
        "name": "wake-own", "source": {"type": "webhook"}, "prompt": "p",
        "continuation": {"kind": "wake", "signal": "go"}}})["trigger"]
    assert fire(own["id"], owner)["firingStatus"] == "created"
    until("the run woken", lambda: w.api.ok(owner, {"_": "GetRun", "runId": parked})["run"]["status"] != "waiting")

    # A writer's run-completed trigger without agentId fires for the shared agent's runs only.
    watcher = w.api.ok(writer, {"_": "CreateAgentTrigger", "agentId": w.ids["a"], "trigger": {
        "name": "watch", "source": {"type": "run-completed"}, "prompt": "p",
        "continuation": {"kind": "tool", "tool": "read", "input": {"address": "~/self"}}}})["trigger"]
    private_run = w.api.ok(owner, {"_": "MessageSession", "sessionId": w.ids["sb"],
                                   "content": [{"type": "text", "text": "another private message"}]})["runId"]
    w.wait_idle(w.ids["sb"])
    shared_run = w.api.ok(owner, {"_": "MessageSession", "sessionId": w.ids["sa"],
                                  "content": [{"type": "text", "text": "hello again"}]})["runId"]
    w.wait_idle(w.ids["sa"])
    firings = until("the watcher fired", lambda: w.api.ok(writer, {"_": "GetAgentTrigger", "triggerId": watcher["id"]})[
        "firings"])
    keys = [f["activityKey"] for f in firings]
    assert shared_run in " ".join(keys) and private_run not in " ".join(keys), keys
    # ... and naming the owner's other agent is the owner's alone.
    named = w.api.call(writer, {"_": "CreateAgentTrigger", "agentId": w.ids["a"], "trigger": {
        "name": "watch-b", "source": {"type": "run-completed", "agentId": w.ids["b"]}, "prompt": "p"}})
    assert named["_"] == "Error" and named["status"] == 403, named


async def test_finding_11_a_writer_publishes_as_the_owner_only_with_the_owners_say_so(world):
    w = world
    owner, writer = w.kp("owner"), w.kp("writer")
    published = len(w.hm.published)
    doc = f"hm://{w.ids['identity_account']}/by-the-writer"
    refused = w.invoke("writer", "write", {"address": doc, "content": "Published by a collaborator."})
    assert "collaboratorsPublish" in refused.get("error", ""), refused
    assert len(w.hm.published) == published
    # ... nor through a trigger of the agent that publishes with no model involved.
    hook = w.api.call(writer, {"_": "CreateAgentTrigger", "agentId": w.ids["a"], "trigger": {
        "name": "publisher", "source": {"type": "webhook"}, "prompt": "p",
        "continuation": {"kind": "tool", "tool": "write", "input": {"address": doc, "content": "By a hook."}}}})
    assert hook["_"] == "Error" and hook["status"] == 403 and "collaboratorsPublish" in hook["message"], hook
    # The writer cannot give themself the say-so.
    a = w.api.ok(writer, {"_": "GetAgent", "agentId": w.ids["a"]})["agent"]
    self_granted = w.api.call(writer, {"_": "UpdateAgent", "agentId": w.ids["a"],
                                       "definition": {**a["definition"], "collaboratorsPublish": True}})
    assert self_granted["_"] == "Error" and self_granted["status"] == 403, self_granted
    # The owner gives it, and hears of the publication.
    w.api.ok(owner, {"_": "UpdateAgent", "agentId": w.ids["a"],
                     "definition": {**a["definition"], "collaboratorsPublish": True}})
    watcher = await V2Client.open(w.server.url)
    try:
        await watcher.call(owner, {"_": "Subscribe", "key": f"account/{owner.account_id}"})
        done = w.invoke("writer", "write", {"address": doc, "content": "Published by a collaborator."})
        assert "error" not in done, done
        assert len(w.hm.published) > published
        notice = await watcher.event_where(lambda e: e.get("_") == "change"
                                           and (e.get("value") or {}).get("reason") == "agent-published")
        assert notice["value"]["agentId"] == w.ids["a"] and notice["value"]["sessionId"] == w.ids["sa"]
    finally:
        await watcher.close()
        w.api.ok(owner, {"_": "UpdateAgent", "agentId": w.ids["a"], "definition": a["definition"]})


def test_finding_16_a_readers_activity_read_asks_the_feed_as_the_reader_and_search_likewise(world):
    w = world
    asked = len(w.hm.feed_queries)
    r = w.invoke("reader", "read", {"address": "activity:"})
    assert "error" not in r, r
    queries = w.hm.feed_queries[asked:]
    assert [q.get("currentAccount") for q in queries] == [w.kp("reader").account_id]
    # Seed search, the same: from the perspective of the one who asks.
    searched = len(w.hm.search_queries)
    r = w.invoke("writer", "call", {"tool": "search", "input": {"query": "kites"}})
    assert "error" not in r, r
    assert [q.get("perspectiveAccountUid") for q in w.hm.search_queries[searched:]] == [w.kp("writer").account_id]


def test_a_triggers_tool_continuation_reaches_the_hm_server(world):
    """Issue 33: the trigger's tool context was built without the HM client (nor the secrets
    box), so `read hm://…` run by a trigger said the server had no HM server."""
    w = world
    owner = w.kp("owner")
    trigger = w.api.ok(owner, {"_": "CreateAgentTrigger", "agentId": w.ids["a"], "trigger": {
        "name": "read-doc", "source": {"type": "webhook"}, "prompt": "p",
        "continuation": {"kind": "tool", "tool": "read", "input": {"address": w.ids["doc"]}}}})["trigger"]
    hook = w.api.ok(owner, {"_": "GetAgentTrigger", "triggerId": trigger["id"]})["webhook"]
    fired = w.api.http.post(w.api.base + hook["path"], json={}, headers={"Authorization": f"Bearer {hook['secret']}"})
    session_id = fired.json()["sessionId"]
    result = until("the trigger's tool result", lambda: next(
        (e for e in w.api.events(owner, session_id) if e.get("type") == "tool_result"), None))
    assert "error" not in result, result
    assert "Matrix doc." in json.dumps(result["output"])

