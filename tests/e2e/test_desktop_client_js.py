"""The Seed desktop's own agents client (tests/desktop_client/desktop-client.bundle.mjs: client.ts,
the blobs and cbor it signs with, and the markdown-to-blocks its prompt editor starts from, all
from the reference commit unchanged) walks the desktop's screens against a real server under
Node: health, adding and removing providers, the create-agent dialog (providers, a signing
account, CreateAgent with a block-tree prompt), the rename, a session with attachments (one
action, and chunked) and a message answered by echo, memory, tools (a builtin switched off and on,
an authored tool saved, renamed and deleted), the user tool palette (InvokeSessionTool), Stop and
Retry against a fake OpenAI-compatible model (a slow reply stopped, a failed one retried), the
run card (GetRun, ListRuns, GetRunJournal, a SignalRun not delivered), a trigger, sharing with a
second desktop account (accept; decline; a reader's read-only view), the web app's
RegisterSigner-and-retry, and the deletes. The driver
asserts what each screen reads and prints what it saw; a failure names the step."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import running_server, server_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.httpraw import base_url

HERE = Path(__file__).resolve().parents[1] / "desktop_client"
NODE = shutil.which("node")

pytestmark = pytest.mark.storages("sqlite", "postgresql")

STEPS = [
    "health",
    "signed envelope",
    "ListAgents (empty)",
    "ListModelProviders/ListProviderModels",
    "add and remove model providers (providers screen)",
    "List/CreateSigningIdentity",
    "CreateAgent (block-tree prompt, identity)",
    "UpdateAgent (rename, as the agent page does)",
    "ListAgents/GetAgent",
    "CreateSession",
    "UploadSessionAttachment",
    "chunked upload (a file over 2 MiB)",
    "MessageSession to echo, GetSession until the reply",
    "UpdateSession (rename)",
    "ListSessions (sidebar)",
    "memory write/read/list",
    "ListAgentTools",
    "tools tab: a builtin off and on (UpdateAgent tools)",
    "SaveAgentTool (authored tool dialog)/DeleteAgentTool",
    "InvokeSessionTool (user tool palette)",
    "Execute switch and a custom tool that runs (codeExec)",
    "StopSession on a running reply, RetrySession after a failed one",
    "injected turns: the transcript shows them as the server's (agent-session-rows.ts)",
    "a workflow's run card: its source, plan, journal and parked wait, answered",
    "run tree: GetRun, ListRuns (rootRunId), GetRunJournal, SignalRun not delivered",
    "CreateAgentTrigger/ListAgentTriggers",
    "sharing: invite, accept, the collaborator sees the agent",
    "sharing: decline, then a reader sees the agent read-only",
    "web: RegisterSigner on first refusal, then the same agents",
    "errors reach the screen as the server says them",
    "DeleteSession/DeleteAgent",
]


@pytest.fixture
async def server(tmp_path, storage, request):
    """This test's server runs code (the sandbox's self-check done before the desktop looks)."""
    async with running_server(server_config(tmp_path, storage, request, code_exec="bubblewrap")) as running:
        await running.app.runtime.sandbox_checked()
        yield running


def node_or_skip() -> str:
    if NODE is None:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail("node is missing, and under CI the desktop client test must run", pytrace=False)
        pytest.skip("node is not installed: the Seed desktop's own client did not run against the server")
    return NODE


async def test_the_desktop_client_walks_its_screens(server):
    node = node_or_skip()
    account = hashlib.sha256(b"desktop-client-js account").hexdigest()
    device = hashlib.sha256(b"desktop-client-js device").hexdigest()
    # A model that answers "echo: <message>"; the driver queues a slow or failing reply for the
    # next request over the fake's own HTTP (POST /_fake/script) where a flow needs one.
    async with FakeOpenAI(Script(echo=True)) as fake:
        proc = await asyncio.create_subprocess_exec(
            node, str(HERE / "driver.mjs"), base_url(server), account, device, fake.base_url,
            cwd=str(HERE), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    lines = out.decode().strip().splitlines()
    assert lines, f"the driver printed nothing (exit {proc.returncode}): {err.decode()[-2000:]}"
    report = json.loads(lines[-1])
    assert report["ok"], f"failed at {report['failed']!r}: {report['error']}"
    assert proc.returncode == 0
    assert report["steps"] == STEPS
    seen = report["seen"]
    assert seen["transcript"] == [["user", "Summarize the attached numbers"],
                                  ["assistant", "echo: Summarize the attached numbers"]]
    assert seen["web"]["registered"] == 1
    assert ("notes/todo.md", "file") in {tuple(e) for e in seen["memory"]}
    # A stopped reply that had streamed nothing ends the thread with the assistant's "Stopped."
    # (as the reference's does), and no error row, so no retry is offered; a failed one ends in an
    # error row.
    assert (seen["afterStop"]["lastRow"], seen["afterStop"]["role"], seen["afterStop"]["content"]) == (
        "message", "assistant", "Stopped.")
    assert seen["failedRow"] == "error"
    # The desktop's own row builder: the person's message is theirs; the server's plan reminders
    # (three) and its closing notice are the server's (message-rendering.tsx draws them as such).
    assert seen["injected"] == [["user", "Plan the numbers"]] + [
        ["system", "This turn is ending with work you committed to still open:"]] * 3 + [
        ["system", "This run ended with work still open:"]]
    assert seen["runTree"]["roots"] == ["succeeded", "failed", "canceled"]
    assert seen["workflow"]["kind"] == "workflow" and seen["workflow"]["steps"] == ["done", "done"]
    assert {"plan", "step", "call", "result", "progress"} - set(seen["workflow"]["journal"]) == {"progress"}
    # The palette's search form left empty: the contract comes back and the form stays open.
    assert seen["palette"]["contractMiss"] is True
    assert seen["codeExec"] == {"sum": 5, "tsSum": 9, "memory": "from the palette\n"}
    assert set(seen["readerRefusals"]) == {"UpdateAgent", "SaveAgentTool", "MessageSession", "InvokeSessionTool"}
