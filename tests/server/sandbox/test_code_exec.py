"""`execute` and authored (lambda) tools through a server child process, with a scripted fake
model (issue 34): code in each runtime the server offers changes memory files that
ReadAgentMemoryFile then returns; a lambda saved by SaveAgentTool (the desktop's shape) is called
by the model; a tool the agent writes itself (`write ~/tools/<name>`) is called in the same turn;
both gates hold (the runtime offered, the `execute` grant); health says what runs.
"""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.procs import ServerProcess
from tests.server.runtime.test_tool_loop import agent_session, call, run_turn
from tests.waiting import until
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="the bubblewrap sandbox runs on Linux only")


def health(srv: ServerProcess) -> dict:
    return httpx.get(f"http://127.0.0.1:{srv.port}/api/health", timeout=5).json()


async def code_server(tmp_path, *extra: str) -> ServerProcess:
    srv = ServerProcess(tmp_path / "srv", extra=["--allow-provider-base-url", "true", "--code-exec", "bubblewrap",
                                                 *extra]).start()
    def checked() -> bool:
        h = health(srv)
        return h["codeExec"] or h["codeExecReason"] != "The code sandbox is still running its self-check"

    await until(checked, 30, step=0.05, what="the sandbox's self-check")
    return srv


@pytest.fixture(params=["sqlite", "postgresql"])
async def server(tmp_path, request):
    extra = []
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        extra = ["--storage-url", url]
    srv = await code_server(tmp_path, *extra)
    try:
        yield srv
    finally:
        srv.kill()


def results(appends: list[dict]) -> dict[str, dict]:
    return {a["event"]["toolCallId"]: a["event"] for a in appends if a["event"].get("type") == "tool_result"}


async def read_file(c, kp, agent_id: str, path: str) -> dict:
    """The AgentMemoryFile ReadAgentMemoryFile answers, or the Error."""
    r = await c.call(kp, {"_": "ReadAgentMemoryFile", "agentId": agent_id, "path": path})
    return r["file"] if r["_"] == "ReadAgentMemoryFileResponse" else r


async def test_health_says_what_runs(server):
    h = health(server)
    assert h["codeExec"] is True, h
    assert {"python", "shell"} <= set(h["codeExecRuntimes"]), h
    assert h["codeExecReason"] == "" and h["codeExecBackend"] == "bubblewrap"
    if "ts" in h["codeExecRuntimes"]:
        assert "Node" in h["codeExecRuntimeNotes"]["ts"], h


async def test_execute_in_each_runtime_changes_memory_that_reading_returns(server):
    runtimes = health(server)["codeExecRuntimes"]
    programs = {
        "python": "import os\nprint('reading', open('seed.txt').read())\n"
                  "open('out/py.txt', 'w').write(open('seed.txt').read().upper()) if os.path.isdir('out') "
                  "else (os.makedirs('out'), open('out/py.txt', 'w').write(open('seed.txt').read().upper()))\n"
                  "os.remove('gone.txt')",
        "shell": "echo \"shell saw $(cat seed.txt)\" > sh.txt; printf 'changed' > seed.txt",
        "ts": "import fs from 'node:fs'\nfs.writeFileSync('ts.txt', 'node ' + process.versions.node)\n"
              "console.log('wrote ts.txt')",
    }
    async with FakeOpenAI() as fake:
        kp = keypair("exec-runtimes")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        for path, text in (("seed.txt", "kites"), ("gone.txt", "bye")):
            r = await c.call(kp, {"_": "WriteAgentMemoryFile", "agentId": agent_id, "path": path, "content": text})
            assert r["_"] == "WriteAgentMemoryFileResponse", r
        steps = [Script(chunks=[], tool_calls=[call(f"x-{rt}", "call", {
            "tool": "execute", "input": {"runtime": rt, "code": programs[rt]}})]) for rt in ("python", "shell", "ts")
            if rt in runtimes]
        fake.enqueue(*steps, Script(chunks=["done"]))
        patches, appends = await run_turn(c, kp, sid, timeout=60)
        got = results(appends)
        py = got["x-python"]["output"]
        assert py["success"] is True and py["exitCode"] == 0, py
        assert "reading kites" in py["stdout"]
        assert py["changedFiles"] == [{"path": "gone.txt", "change": "removed"},
                                      {"path": "out/py.txt", "change": "added"}], py
        assert py["summary"].startswith("Ran python code (exit 0, ") and "2 memory files changed" in py["summary"]
        assert set(py) == {"summary", "exitCode", "success", "stdout", "stderr", "truncated", "durationMs",
                           "changedFiles"}
        sh = got["x-shell"]["output"]
        assert sh["changedFiles"] == [{"path": "seed.txt", "change": "modified"},
                                      {"path": "sh.txt", "change": "added"}], sh
        assert (await read_file(c, kp, agent_id, "out/py.txt"))["content"] == "KITES"
        assert (await read_file(c, kp, agent_id, "sh.txt"))["content"] == "shell saw kites\n"
        assert (await read_file(c, kp, agent_id, "seed.txt"))["content"] == "changed"
        gone = await read_file(c, kp, agent_id, "gone.txt")
        assert gone["_"] == "Error" and gone["status"] == 404, gone
        if "ts" in runtimes:
            ts = got["x-ts"]["output"]
            assert ts["success"] and ts["stdout"] == "wrote ts.txt\n", ts
            assert (await read_file(c, kp, agent_id, "ts.txt"))["content"].startswith("node ")
        # The live output tail went out as an activity partial of the call.
        tails = [p["activity"] for p in patches if "activity" in p and p["activity"].get("outputTail")]
        assert any("reading kites" in t["outputTail"] and t["toolCallId"] == "x-python" for t in tails), tails
        # The model was offered execute with the runtimes this server runs, and told it has no network.
        first = fake.requests[0].body
        call_tool = next(t for t in first["tools"] if t["function"]["name"] == "call")
        assert "execute — Run " in call_tool["function"]["description"]
        await c.close()


async def test_a_failing_program_and_a_timeout_are_results_the_model_reads(server):
    async with FakeOpenAI() as fake:
        kp = keypair("exec-fail")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        fake.enqueue(
            Script(chunks=[], tool_calls=[call("f1", "call", {"tool": "execute", "input": {
                "runtime": "python", "code": "import sys\nopen('partial.txt','w').write('x')\nsys.exit(3)"}})]),
            Script(chunks=[], tool_calls=[call("f2", "call", {"tool": "execute", "input": {
                "runtime": "shell", "code": "echo before; sleep 600", "timeout_secs": 1}})]),
            Script(chunks=[], tool_calls=[call("f3", "call", {"tool": "execute", "input": {
                "runtime": "cobol", "code": "x"}})]),
            Script(chunks=["done"]))
        _, appends = await run_turn(c, kp, sid, timeout=60)
        got = results(appends)
        f1 = got["f1"]["output"]
        assert f1["exitCode"] == 3 and f1["success"] is False, f1
        assert f1["changedFiles"] == [{"path": "partial.txt", "change": "added"}]   # kept, as the reference
        f2 = got["f2"]["output"]
        assert f2["exitCode"] == -1 and not f2["success"] and "timed out after 1 s" in f2["stderr"], f2
        assert f2["stdout"] == "before\n"
        f3 = got["f3"]["output"]   # touch-expand: the contract with the runtimes this server runs
        assert "validationErrors" in f3 and '"python"' in f3["contract"] and "cobol" not in f3["contract"], f3
        await c.close()


LAMBDA_PY = {"name": "double", "description": "Doubles a number.", "runtime": "python",
             "input": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
             "output": {"type": "object", "properties": {"doubled": {"type": "number"}}, "required": ["doubled"]},
             "source": "def main(input):\n    print('doubling', input['n'])\n    return {'doubled': input['n'] * 2}\n"}


async def test_a_lambda_saved_by_the_desktop_is_called_by_the_model(server):
    runtimes = health(server)["codeExecRuntimes"]
    async with FakeOpenAI() as fake:
        kp = keypair("lambda-desktop")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": LAMBDA_PY})
        assert r["_"] == "SaveAgentToolResponse" and r["tool"]["granted"] is True, r
        bad = {**LAMBDA_PY, "name": "liar", "source": "def main(input):\n    return {'doubled': 'many'}\n"}
        assert (await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": bad}))["_"] == \
            "SaveAgentToolResponse"
        js = {**LAMBDA_PY, "name": "triple", "runtime": "typescript",
              "source": "export default async function (input) {\n  console.log('tripling')\n"
                        "  return {doubled: input.n * 3}\n}\n"}
        assert (await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": js}))["_"] == \
            "SaveAgentToolResponse"
        listed = await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id})
        assert next(t for t in listed["tools"] if t["name"] == "execute")["granted"] is True
        fake.enqueue(
            Script(chunks=[], tool_calls=[call("l1", "call", {"tool": "double", "input": {"n": 21}})]),
            Script(chunks=[], tool_calls=[call("l2", "call", {"tool": "double", "input": {"n": "x"}})]),
            Script(chunks=[], tool_calls=[call("l3", "call", {"tool": "liar", "input": {"n": 1}})]),
            Script(chunks=[], tool_calls=[call("l4", "call", {"tool": "triple", "input": {"n": 2}})]),
            Script(chunks=["done"]))
        _, appends = await run_turn(c, kp, sid, timeout=60)
        got = results(appends)
        l1 = got["l1"]["output"]
        assert l1["result"] == {"doubled": 42} and l1["logs"] == "doubling 21", l1
        assert l1["summary"].startswith("Ran double (")
        l2 = got["l2"]["output"]
        assert l2["validationErrors"] and "## Source" in l2["contract"], l2
        assert "its own output schema rejects" in got["l3"]["error"], got["l3"]
        if "ts" in runtimes:
            assert got["l4"]["output"]["result"] == {"doubled": 6}, got["l4"]
            assert got["l4"]["output"]["logs"] == "tripling"
        else:
            assert "cannot run" in got["l4"]["error"]
        # The desktop's palette: a person's call of the lambda runs it the same way.
        r = await c.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                              "input": {"tool": "double", "input": {"n": 5}}})
        assert r["output"]["result"] == {"doubled": 10}, r
        await c.close()


async def test_the_agent_writes_its_own_tool_and_calls_it_in_the_same_turn(server):
    async with FakeOpenAI() as fake:
        kp = keypair("lambda-self")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        tool = {"description": "Counts the words of a memory file.", "runtime": "python",
                "input": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                "source": "def main(input):\n    text = open(input['path']).read()\n"
                          "    open('count.txt', 'w').write(str(len(text.split())))\n"
                          "    return {'words': len(text.split())}\n"}
        r = await c.call(kp, {"_": "WriteAgentMemoryFile", "agentId": agent_id, "path": "essay.txt",
                              "content": "one two three four"})
        fake.enqueue(
            Script(chunks=[], tool_calls=[call("w1", "write", {"address": "~/tools/wordcount",
                                                               "content": json.dumps(tool)})]),
            Script(chunks=[], tool_calls=[call("r1", "read", {"address": "~/tools/wordcount"})]),
            Script(chunks=[], tool_calls=[call("c1", "call", {"tool": "wordcount", "input": {"path": "essay.txt"}})]),
            Script(chunks=[], tool_calls=[call("w2", "write", {"address": "~/tools/broken", "content": "{not json"})]),
            Script(chunks=["done"]))
        _, appends = await run_turn(c, kp, sid, timeout=60)
        got = results(appends)
        assert got["w1"]["output"]["summary"].startswith("Saved tool wordcount ("), got["w1"]
        assert "def main(input)" in got["r1"]["output"]["markdown"]
        c1 = got["c1"]["output"]
        assert c1["result"] == {"words": 4} and c1["changedFiles"] == [{"path": "count.txt", "change": "added"}], c1
        assert "expects JSON content" in got["w2"]["error"]
        assert (await read_file(c, kp, agent_id, "count.txt"))["content"] == "4"
        listed = await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id})
        assert any(t["name"] == "wordcount" and t["kind"] == "lambda" for t in listed["tools"]), listed
        await c.close()


async def test_without_the_execute_grant_neither_execute_nor_a_lambda_runs(server):
    async with FakeOpenAI() as fake:
        kp = keypair("no-grant")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        got = await c.call(kp, {"_": "GetAgent", "agentId": agent_id})
        definition = {**got["agent"]["definition"], "tools": ["search"]}
        r = await c.call(kp, {"_": "UpdateAgent", "agentId": agent_id, "definition": definition})
        assert r["_"] != "Error", r
        await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": LAMBDA_PY})
        listed = await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id})
        assert next(t for t in listed["tools"] if t["name"] == "execute")["granted"] is False
        fake.enqueue(
            Script(chunks=[], tool_calls=[call("e1", "call", {"tool": "execute", "input": {
                "runtime": "shell", "code": "echo hi > hi.txt"}})]),
            Script(chunks=[], tool_calls=[call("e2", "call", {"tool": "double", "input": {"n": 1}})]),
            Script(chunks=["done"]))
        _, appends = await run_turn(c, kp, sid, timeout=60)
        got = results(appends)
        assert "not enabled for this agent" in got["e1"]["error"], got["e1"]
        assert "not enabled for this agent" in got["e2"]["error"], got["e2"]
        hi = await read_file(c, kp, agent_id, "hi.txt")
        assert hi["_"] == "Error" and hi["status"] == 404
        call_tool = next(t for t in fake.requests[0].body["tools"] if t["function"]["name"] == "call")
        assert "execute —" not in call_tool["function"]["description"]
        await c.close()


async def test_code_exec_off_is_said_in_health_and_nothing_runs(tmp_path):
    srv = ServerProcess(tmp_path / "off", extra=["--allow-provider-base-url", "true", "--code-exec", "off"]).start()
    try:
        h = health(srv)
        assert h["codeExec"] is False and h["codeExecReasonCode"] == "config-disabled" and h["codeExecRuntimes"] == []
        assert "--code-exec off" in h["codeExecReason"]
        async with FakeOpenAI() as fake:
            kp = keypair("exec-off")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": LAMBDA_PY})
            fake.enqueue(Script(chunks=[], tool_calls=[call("o1", "call", {"tool": "double", "input": {"n": 1}})]),
                         Script(chunks=["done"]))
            _, appends = await run_turn(c, kp, sid, timeout=30)
            assert "code execution is not available" in results(appends)["o1"]["error"]
            await c.close()
    finally:
        srv.kill()


async def test_sigkill_during_a_commit_leaves_all_or_nothing(tmp_path):
    """The server is killed at moments around an execute that writes 200 files: after a restart
    memory holds all of them or none, and the call is answered as interrupted, never run again."""
    srv = await code_server(tmp_path)
    try:
        async with FakeOpenAI() as fake:
            for i, delay in enumerate((0.0, 0.15, 0.3, 0.45)):
                kp = keypair(f"commit-kill-{i}")
                c = await V2Client.open(srv.url)
                agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
                code = "for i in range(200):\n    open(f'f{i:03}.txt', 'w').write('x' * 2000)\nprint('ok')"
                fake.enqueue(Script(chunks=[], tool_calls=[call(f"k{i}", "call", {"tool": "execute", "input": {
                    "runtime": "python", "code": code}})]), Script(chunks=["done"]))
                await c.call(kp, {"_": "MessageSession", "sessionId": sid,
                                  "content": [{"type": "text", "text": "go"}]})
                await c.event_where(lambda e: e.get("_") == "append" and e["event"]["event"]["type"] == "tool_call",
                                    timeout=15)
                await asyncio.sleep(delay)   # a moment within the run or its commit (no condition to wait on)
                srv.kill()
                await c.close()
                srv.start()
                c = await V2Client.open(srv.url)
                listing = await c.call(kp, {"_": "ListAgentMemory", "agentId": agent_id})
                files = [e for e in listing["entries"] if e["type"] == "file"]
                assert len(files) in (0, 200), len(files)
                print(f"killed {delay:g} s after the call was recorded: {len(files)} files")
                assert all(e["size"] == 2000 for e in files)

                async def settled():
                    got = await c.call(kp, {"_": "GetSession", "sessionId": sid})
                    ev = [e["event"] for e in got["events"]]
                    return ev if ev[-1]["type"] == "message" and ev[-1].get("role") == "assistant" else None
                events = await until(settled, 30, step=0.05, what="the turn settled")
                result = next(e for e in events if e["type"] == "tool_result")
                if "error" in result:
                    assert "interrupted" in result["error"], result
                await c.close()
    finally:
        srv.kill()
