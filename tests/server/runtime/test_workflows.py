"""Issue 34, workflows: a delegated script child runs in the embedded engine, every effect through
`ctx` and journaled; the parent's delegate call is answered with what the script returned.

A server child process on a real socket (SQLite and PostgreSQL), a scripted fake model that
delegates a script; what is checked is what a client sees: the run (kind, source, plan), its
journal (GetRunJournal), the script child's session (each ctx.call a tool_call/tool_result pair),
the memory a call wrote, the `runs/` events (journal appends, progress partials)."""
from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

TOOLS_SCRIPT = """
export default async function (input, ctx) {
  await ctx.plan({title: 'notes', steps: [{id: 'w', label: 'write'}, {id: 'r', label: 'read back'}]});
  const when = await ctx.now();
  await ctx.step('write', async () => {
    await ctx.call('write', {address: '~/memory/notes/' + input.name + '.md', content: 'hello ' + input.name},
                   {description: 'write the note'});
  });
  ctx.progress({fraction: 0.5, label: 'half way'});
  const back = await ctx.step('read back', () => ctx.call('read', {address: '~/memory/notes/' + input.name + '.md'}));
  await ctx.log('info', 'read it back', {chars: JSON.stringify(back).length});
  let refused = null;
  try { await ctx.call('write', {address: '~/self', content: 'x'}); } catch (e) { refused = e.code; }
  return {wrote: input.name, sawHello: JSON.stringify(back).includes('hello ' + input.name), refused, when: typeof when};
}
"""


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


def delegating_model(script: str, script_input, *, then: str = "all done"):  # noqa: ANN001
    """The parent delegates the script once, then answers; any other run answers its brief."""
    def model(request) -> Script:
        body = request.body or {}
        if first_user(body) == "run the script":
            if not tool_messages(body):
                return Script(chunks=[], tool_calls=[call("d1", "delegate", {
                    "title": "notes script", "script": script, "input": script_input})])
            return Script(chunks=[then])
        return Script(chunks=[first_user(body).split(":")[0] + " done"])
    return model


async def start_script(c, kp, sid, fake, script: str, script_input) -> str:  # noqa: ANN001
    fake.default = delegating_model(script, script_input)
    return (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("run the script")}))["runId"]


async def tree_of(c, kp, root: str) -> list[dict]:  # noqa: ANN001
    return (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]


async def journal_of(c, kp, run_id: str) -> list[dict]:  # noqa: ANN001
    return [e["entry"] for e in (await c.call(kp, {"_": "GetRunJournal", "runId": run_id}))["entries"]]


async def test_a_script_child_calls_tools_through_a_journaled_ctx(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("workflow owner")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = await start_script(c, kp, sid, fake, TOOLS_SCRIPT, {"name": "ada"})
            await c.call(kp, {"_": "Subscribe", "key": f"runs/{root}"})

            async def ended() -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 90, step=0.1, what="the parent's end")
            child = next(r for r in await tree_of(c, kp, root) if r["id"] != root)
            assert child["kind"] == "workflow" and child["status"] == "succeeded", (child, await journal_of(c, kp, child["id"]))
            assert child["sourceText"] == TOOLS_SCRIPT and child["title"] == "notes script"
            assert child["plan"]["title"] == "notes"
            assert [(s["id"], s["label"], s["status"]) for s in child["plan"]["steps"]] == [
                ("w", "write", "done"), ("r", "read back", "done")]

            # the parent's delegate call is answered with what the script returned
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answer = next(e for e in events if e["type"] == "tool_result" and e["toolCallId"] == "d1")["output"]
            assert answer["status"] == "succeeded" and answer["runId"] == child["id"]
            assert answer["output"] == {"wrote": "ada", "sawHello": True, "refused": "tool-error", "when": "number"}

            # the memory the script's call wrote is there
            read = await c.call(kp, {"_": "ReadAgentMemoryFile", "agentId": agent_id, "path": "notes/ada.md"})
            assert read["_"] == "ReadAgentMemoryFileResponse", read

            # the journal: every effect, with its content key, in one order a replay can match
            journal = await journal_of(c, kp, child["id"])
            kinds = [(e["kind"], e.get("op") or e.get("phase") or e.get("level") or "") for e in journal
                     if "callSeq" in e]
            assert kinds == [("plan", ""), ("now", ""), ("step", "start"), ("call", "tool"), ("result", ""),
                             ("step", "end"), ("step", "start"), ("call", "tool"), ("result", ""), ("step", "end"),
                             ("log", "info"), ("call", "tool"), ("result", "")], kinds
            calls = [e for e in journal if e["kind"] == "call"]
            assert calls[0]["description"] == "write the note" and calls[0]["tool"] == "write"
            assert all(e["key"].startswith(("plan|", "now", "step|", "tool|", "log|")) for e in journal if "key" in e)
            results = [e for e in journal if e["kind"] == "result"]
            assert [r["status"] for r in results] == ["succeeded", "succeeded", "failed"]

            # the script child's session: each ctx.call a tool_call / tool_result pair
            wf_events = [e["event"] for e in (await c.call(kp, {"_": "GetSession",
                                                                "sessionId": child["sessionId"]}))["events"]]
            pairs = [(e["type"], e.get("name")) for e in wf_events if e["type"] in ("tool_call", "tool_result")]
            assert pairs == [("tool_call", "write"), ("tool_result", "write"), ("tool_call", "read"),
                             ("tool_result", "read"), ("tool_call", "write"), ("tool_result", "write")]

            # runs/ subscribers saw the journal as it was written, and the live progress
            progress = await c.event_where(lambda e: e.get("_") == "appendPartial" and e.get("key") == f"runs/{root}",
                                           timeout=5)
            assert progress["runId"] == child["id"] and progress["patch"]["progress"] == {"fraction": 0.5,
                                                                                           "label": "half way"}
    finally:
        srv.kill()


async def test_a_script_that_breaks_the_rules_is_refused_in_the_same_turn(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("workflow lint")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            bad = "export default async function (input, ctx) { return Math.random() + Date.now(); }"
            root = await start_script(c, kp, sid, fake, bad, None)

            async def ended() -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 60, step=0.1, what="the parent's end")
            assert [r["id"] for r in await tree_of(c, kp, root)] == [root]   # nothing was spawned
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            error = next(e for e in events if e["type"] == "tool_result")["error"]
            assert "Math.random is not available" in error and "use `await ctx.now()`" in error
    finally:
        srv.kill()


def test_the_delegate_contract_offers_script_children():
    from seed_agents.protocol.agent import tool_registry as registry
    from seed_agents.server.tools.delegation_tools import offered
    tool = registry.VERBS["delegate"]
    name, description, params = offered(tool.name, tool.description, tool.input_schema)
    assert {"script", "input"} <= set(params["properties"]) and "script child" in description
    assert json.dumps(params)   # a plain JSON schema


FLOW_SCRIPT = """
export default async function (input, ctx) {
  await ctx.call('write', {address: '~/memory/flow/' + input.tag + '.md', content: 'started'}, {description: 'mark'});
  const [left, right] = await ctx.parallel([
    () => ctx.step('left work', () => ctx.delegate({title: 'left', brief: 'child left: go'})),
    () => ctx.delegate({title: 'right', brief: 'child right: go'}),
  ]);
  await ctx.sleep(input.sleepMs);
  const answer = await ctx.waitForEvent({signal: 'approve'}, {label: 'approve the notes?'});
  const back = await ctx.call('read', {address: '~/memory/flow/' + input.tag + '.md'});
  return {left, right, answer, back: JSON.stringify(back).includes('started')};
}
"""
VOLATILE = {"wakeAt", "waitId", "timeoutAt", "childRunId", "sessionId", "runId", "_at"}


def comparable(journal: list[dict], tag: str) -> list:
    """A workflow's journal without what differs between two runs of one script: ids, times, and
    the tag each run was given."""
    def strip(value):  # noqa: ANN001, ANN202
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    kept = [e for e in journal if "callSeq" in e or (e["kind"] == "result" and e.get("tool") == "delegate")]
    return sorted(json.dumps(strip(e), sort_keys=True).replace(tag, "TAG") for e in kept)


async def waiting_on(c, kp, run_id: str, reason: str) -> bool:  # noqa: ANN001
    run = (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]
    return run["status"] == "waiting" and run.get("wait", {}).get("reason") == reason


async def test_a_workflow_delegates_sleeps_past_a_restart_waits_for_a_signal_and_replays_its_journal(
        tmp_path, storage_flags):
    extra = [*storage_flags, "--workflow-park-after-ms", "500"]
    srv = ServerProcess(tmp_path / "srv", extra=extra).start()
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("workflow flow")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            sid2 = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            journals = []
            for tag, session, restart in (("calm", sid, False), ("restarted", sid2, True)):
                root = await start_script(c, kp, session, fake, FLOW_SCRIPT, {"tag": tag, "sleepMs": 2500})

                async def the_child() -> dict | None:
                    runs = [r for r in await tree_of(c, kp, root) if r["kind"] == "workflow"]  # noqa: B023
                    return runs[0] if runs else None

                child = await until(the_child, 60, step=0.1, what="the script child")
                await until(lambda: waiting_on(c, kp, child["id"], "timer"), 60, step=0.1,  # noqa: B023
                            what="the script parked on its sleep")
                parked = (await c.call(kp, {"_": "GetRun", "runId": child["id"]}))["run"]
                assert parked["wait"]["wakeAt"] > parked["updatedAt"]
                if restart:   # the server dies while the run sleeps; the next one wakes it
                    srv.kill()
                    srv.start()
                    c = await V2Client.open(srv.url)
                await until(lambda: waiting_on(c, kp, child["id"], "event"), 60, step=0.1,  # noqa: B023
                            what="the script parked on its wait")
                wait = (await c.call(kp, {"_": "GetRun", "runId": child["id"]}))["run"]["wait"]
                assert wait["label"] == "approve the notes?" and wait["answerWith"] == "approve"
                wrong = await c.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "nope"})
                assert wrong["delivered"] is False
                sent = await c.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "approve",
                                         "payload": {"ok": True}})
                assert sent["delivered"] is True
                again = await c.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "approve"})
                assert again["delivered"] is False   # woken once

                async def ended() -> bool:
                    return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"  # noqa: B023

                await until(ended, 90, step=0.1, what="the parent's end")
                tree = await tree_of(c, kp, root)
                done = next(r for r in tree if r["id"] == child["id"])
                assert done["status"] == "succeeded", done
                kids = {r["title"]: r for r in tree if r.get("parentRunId") == child["id"]}
                assert set(kids) == {"left", "right"} and all(k["status"] == "succeeded" for k in kids.values())
                assert kids["left"]["stepLabel"] == "left work" and "stepLabel" not in kids["right"]
                events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": session}))["events"]]
                answer = next(e for e in events if e["type"] == "tool_result" and e["toolCallId"] == "d1")["output"]
                assert answer["output"] == {"left": {"text": "child left done"}, "right": {"text": "child right done"},
                                            "answer": {"source": "signal", "signal": "approve", "payload": {"ok": True}},
                                            "back": True}, answer
                journals.append(comparable(await journal_of(c, kp, child["id"]), tag))
            assert journals[0] == journals[1]
            # each child ran once, each write once
            briefs = [first_user(r.body or {}) for r in fake.requests]
            assert briefs.count("child left: go") == 2 and briefs.count("child right: go") == 2
    finally:
        srv.kill()


CONTINUING = """
export default async function (input, ctx) {
  await ctx.log('info', 'lap ' + input.n);
  if (input.n < 2) await ctx.continueAsNew({n: input.n + 1});
  return {done: input.n};
}
"""
WAITING = "export default async function (input, ctx) { return await ctx.waitForEvent({signal: 'never'}); }"
TICKING = """
export default async function (input, ctx) {
  for (let i = 0; ; i++) { await ctx.sleep(50); await ctx.log('info', 'tick ' + i); }
}
"""


async def test_continue_as_new_and_cancel(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("workflow laps")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)

            # continueAsNew: each lap a run of its own in the same place; the parent answered once
            root = await start_script(c, kp, sid, fake, CONTINUING, {"n": 0})

            async def ended(run_id: str, status: str = "succeeded") -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]["status"] == status

            await until(lambda: ended(root), 90, step=0.1, what="the parent's end")
            laps = [r for r in await tree_of(c, kp, root) if r["kind"] == "workflow"]
            assert len(laps) == 3 and all(r["status"] == "succeeded" and r["parentRunId"] == root for r in laps)
            assert "continuedFromRunId" not in laps[0]
            assert laps[1]["continuedFromRunId"] == laps[0]["id"] and laps[2]["continuedFromRunId"] == laps[1]["id"]
            assert {r["sessionId"] for r in laps} == {laps[0]["sessionId"]}
            assert [e["kind"] for e in await journal_of(c, kp, laps[0]["id"])] == ["log", "continued"]
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answers = [e["output"] for e in events if e["type"] == "tool_result" and e.get("name") == "delegate"]
            assert len(answers) == 1 and answers[0]["output"] == {"done": 2} and answers[0]["runId"] == laps[2]["id"]

            # a cancel reaches a parked script: canceled, and its parent answered so
            sid2 = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            root2 = await start_script(c, kp, sid2, fake, WAITING, None)

            async def parked_child() -> dict | None:
                runs = [r for r in await tree_of(c, kp, root2) if r["kind"] == "workflow"]
                return runs[0] if runs and runs[0]["status"] == "waiting" else None

            waiting = await until(parked_child, 60, step=0.1, what="the script parked on its wait")
            assert waiting["wait"]["answerWith"] == "never"
            done = await c.call(kp, {"_": "CancelRun", "runId": waiting["id"]})
            assert done["canceled"] is True
            await until(lambda: ended(root2), 60, step=0.1, what="the parent's end after the cancel")
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid2}))["events"]]
            answer = next(e["output"] for e in events if e["type"] == "tool_result" and e.get("name") == "delegate")
            assert answer["status"] == "canceled"
            assert (await c.call(kp, {"_": "SignalRun", "runId": waiting["id"], "signal": "never"}))["delivered"] is False

            # ... and a running one (short sleeps held in memory), within a moment
            sid3 = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            root3 = await start_script(c, kp, sid3, fake, TICKING, None)

            async def ticking() -> dict | None:
                runs = [r for r in await tree_of(c, kp, root3) if r["kind"] == "workflow"]
                if not runs:
                    return None
                logs = [e for e in await journal_of(c, kp, runs[0]["id"]) if e["kind"] == "log"]
                return runs[0] if len(logs) >= 3 else None

            running = await until(ticking, 60, step=0.1, what="the script ticking")
            assert running["status"] == "running"
            await c.call(kp, {"_": "CancelRun", "runId": running["id"]})
            await until(lambda: ended(running["id"], "canceled"), 10, step=0.05, what="the script canceled")
            count = len(await journal_of(c, kp, running["id"]))
            await until(lambda: ended(root3), 60, step=0.1, what="the parent's end")
            assert len(await journal_of(c, kp, running["id"])) == count   # nothing more was journaled
    finally:
        srv.kill()


async def test_an_activity_event_wakes_a_script_waiting_on_the_feed(tmp_path, request):
    """ctx.waitForEvent({eventType, resource}): the activity monitor polls the account's feed while
    the run waits (no trigger needed); a matching event wakes it once, with the event as payload;
    one that does not match leaves it parked. In process (the monitor's pass is driven)."""
    from tests.fakes.hm_activity import FakeHMActivity, comment_event
    from tests.server.triggers.test_triggers_activity import AUTHOR, DOC_OWNER, now_ms, start

    script = ("export default async function (input, ctx) {\n"
              "  const got = await ctx.waitForEvent({eventType: 'comment', resource: 'hm://" + DOC_OWNER + "'},"
              " {label: 'a comment on the doc'});\n"
              "  return {source: got.source, id: got.payload.feedEventId};\n}")
    async with FakeHMActivity() as hm, FakeOpenAI() as fake:
        server = await start(tmp_path, request, hm)
        try:
            kp = keypair("workflow feed")
            c = await V2Client.open(server.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = await start_script(c, kp, sid, fake, script, None)

            async def parked() -> dict | None:
                runs = [r for r in await tree_of(c, kp, root) if r["kind"] == "workflow"]
                return runs[0] if runs and runs[0]["status"] == "waiting" else None

            child = await until(parked, 60, step=0.05, what="the script parked on the feed")
            assert child["wait"]["label"] == "a comment on the doc" and "answerWith" not in child["wait"]
            monitor = server.app.triggers.activity
            hm.publish(comment_event("bafyelse", AUTHOR, "z6MkOtherDoc", now_ms() + 5))
            await monitor.poll_once()
            assert (await c.call(kp, {"_": "GetRun", "runId": child["id"]}))["run"]["status"] == "waiting"
            hm.publish(comment_event("bafydoc", AUTHOR, DOC_OWNER, now_ms() + 10))
            await monitor.poll_once()
            await monitor.poll_once()   # seen again: nothing more

            async def ended() -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 60, step=0.05, what="the parent's end")
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answer = next(e["output"] for e in events if e["type"] == "tool_result" and e["toolCallId"] == "d1")
            assert answer["output"] == {"source": "activity", "id": "blob-bafydoc"}, answer
            journal = await journal_of(c, kp, child["id"])
            assert len([e for e in journal if e["kind"] == "event"]) == 1
            await c.close()
        finally:
            await server.stop()


async def test_a_replay_that_no_longer_matches_its_journal_fails_before_anything_new_runs(tmp_path, request):
    """The journal of a parked script no longer matches what the script asks (here: one recorded
    effect's content changed under it): the wake's replay fails `nondeterministic-replay`, naming
    the effect it did not ask for again, and nothing new is journaled, called or spawned."""
    from seed_agents.server.store import codec

    from tests.conftest import running_server, server_config

    script = """
export default async function (input, ctx) {
  await ctx.log('info', 'first');
  await ctx.waitForEvent({signal: 'go'});
  await ctx.call('write', {address: '~/memory/after.md', content: 'must not happen'});
  return 'done';
}
"""
    async with FakeOpenAI() as fake, running_server(server_config(tmp_path, "sqlite", request)) as server:
        kp = keypair("workflow divergence")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        root = await start_script(c, kp, sid, fake, script, None)

        async def parked() -> dict | None:
            runs = [r for r in await tree_of(c, kp, root) if r["kind"] == "workflow"]
            return runs[0] if runs and runs[0]["status"] == "waiting" else None

        child = await until(parked, 60, step=0.05, what="the script parked")
        before = await journal_of(c, kp, child["id"])
        log = next(e for e in before if e["kind"] == "log")
        assert log["key"] == "log|info|first"

        def alter(conn):   # as if the script had logged something else then
            row = conn.execute("SELECT seq, entry FROM run_journal WHERE run_id = ?", (child["id"],)).fetchall()
            for seq, body in row:
                entry = codec.decode(body)
                if entry.get("kind") == "log":
                    entry.update(key="log|info|other", message="other")
                    conn.execute("UPDATE run_journal SET entry = ? WHERE run_id = ? AND seq = ?",
                                 (codec.encode(entry), child["id"], seq))

        await server.app.db.write(alter)
        assert (await c.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "go"}))["delivered"] is True

        async def failed() -> dict | None:
            run = (await c.call(kp, {"_": "GetRun", "runId": child["id"]}))["run"]
            return run if run["status"] == "failed" else None

        run = await until(failed, 60, step=0.05, what="the replay's failure")
        assert run["error"]["code"] == "nondeterministic-replay", run["error"]
        assert "log|info|other" in run["error"]["message"] and "nothing new was run" in run["error"]["message"]
        after = await journal_of(c, kp, child["id"])
        assert [e["kind"] for e in after] == [e["kind"] for e in before] + ["event"]   # the wake's, nothing more
        listing = await c.call(kp, {"_": "ListAgentMemoryFiles", "agentId": agent_id})
        assert "after.md" not in str(listing)
        await c.close()
