"""A real headless Chromium, on a page from another loopback origin, calls the server the way the
Seed web app does: signed envelopes POSTed as `application/cbor` (CORS preflight included), CBOR
answers read as bytes, and the v1 WebSocket followed for a turn's events; the operator has
listed the page's origin (`--allowed-origins`), as for a web app served from its own origin.

And a page the operator did not list, on a server with default flags (issue 32, finding 7): it
tries what a hostile site would, making an agent and a session for a key of its own and reading
a loopback-only service through InvokeSessionTool, and is refused at every step; even from an
allowed origin, the read is refused by the web tools' own network policy.

The test signs the envelopes and hands them to the page as byte arrays; the page posts what it
got back to the test's own little server (same origin as the page), and the test decodes it.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.conftest import make_config, running_server
from tests.httpraw import act, base_url
from tests.wsraw import keypair

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)

PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
const base = %(base)s, wsUrl = %(ws)s, envs = %(envs)s;
const report = {answers: {}, events: [], errors: []};
function b64(buf) { let s = ""; for (const x of new Uint8Array(buf)) s += String.fromCharCode(x); return btoa(s); }
async function post(name) {
  const r = await fetch(base + "/api/message", {method: "POST", body: new Uint8Array(envs[name]),
    headers: {"Content-Type": "application/cbor", "Accept": "application/cbor"}});
  report.answers[name] = {status: r.status, type: r.headers.get("content-type"), body: b64(await r.arrayBuffer())};
}
async function main() {
  try {
    await post("list");
    await post("get");
    let sent = null;
    await new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl);
      ws.binaryType = "arraybuffer";
      ws.onerror = () => reject(new Error("websocket error"));
      ws.onmessage = (m) => {
        const v = JSON.parse(m.data);
        report.events.push(v);
        if (v._ === "connected") ws.send(new Uint8Array(envs.subscribe));
        if (v._ === "subscribed") sent = post("message");
        if (v._ === "append" && v.event.event.role === "assistant") { ws.close(); resolve(); }
      };
    });
    await sent;
  } catch (e) { report.errors.push(String(e)); }
  await fetch("/result", {method: "POST", body: JSON.stringify(report)});
  document.getElementById("out").textContent = "done";
}
main();
</script></body></html>"""


class PageServer:
    """The other origin: serves the page and receives the page's report."""

    def __init__(self, page: str = "") -> None:
        self.page = page.encode()
        self.report: dict | None = None
        self.got = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):   # quiet
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(outer.page)))
                self.end_headers()
                self.wfile.write(outer.page)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.report = json.loads(body)
                outer.got.set()
                self.send_response(204)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def chromium_or_skip() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing, and under CI the browser test must run (.ci/run installs it)")
        pytest.skip("chromium is not installed (Debian package `chromium`): the browser test did not run")
    return CHROMIUM


async def run_page(pages: PageServer, page: str) -> dict:
    """Chromium opens `page` (served by `pages`) and the page's report comes back."""
    chromium = chromium_or_skip()
    pages.page = page.encode()
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"http://127.0.0.1:{pages.port}/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got = await asyncio.to_thread(pages.got.wait, 60)
        if not got:
            proc.kill()
            err = proc.stderr.read().decode(errors="replace")[-2000:]
            raise AssertionError(f"the page never reported (chromium stderr: {err})")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
    return pages.report


@pytest.fixture
async def pages():
    served = PageServer()
    yield served
    served.close()


@pytest.fixture
async def listed(tmp_path, pages):
    """A server whose operator lists the page's origin, as for a web app on its own origin."""
    async with running_server(make_config(tmp_path, allowed_origins=f"http://127.0.0.1:{pages.port}")) as running:
        yield running


async def test_a_browser_on_another_origin_posts_cbor_and_follows_a_session(listed, pages):
    chromium_or_skip()
    server = listed
    base = base_url(server)
    a = keypair("browser")
    async with httpx.AsyncClient() as http:
        _, value = await act(http, base, a, {"_": "CreateAgent", "definition": {
            "name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}})
        agent_id = value["agentId"]
        _, value = await act(http, base, a, {"_": "CreateSession", "agentId": agent_id})
        session_id = value["sessionId"]
    key = f"sessions/{session_id}"
    envs = {
        "list": sign_envelope(a, {"_": "ListAgents"}),
        "get": sign_envelope(a, {"_": "GetSession", "sessionId": session_id}),
        "subscribe": sign_envelope(a, {"_": "Subscribe", "key": key, "afterSeq": 0}),
        "message": sign_envelope(a, {"_": "MessageSession", "sessionId": session_id,
                                     "content": [{"type": "text", "text": "hi from a browser"}]}),
    }
    page = PAGE % {"base": json.dumps(base), "ws": json.dumps(server.url),
                   "envs": json.dumps({k: list(v) for k, v in envs.items()})}
    report = await run_page(pages, page)
    assert report["errors"] == []
    answers = {name: (v["status"], v["type"], dagcbor.decode(base64.b64decode(v["body"])))
               for name, v in report["answers"].items()}
    assert answers["list"][:2] == (200, "application/cbor")
    assert [x["id"] for x in answers["list"][2]["agents"]] == [agent_id]
    assert answers["get"][0] == 200 and answers["get"][2]["session"]["id"] == session_id
    assert answers["message"][0] == 200 and answers["message"][2]["_"] == "MessageSessionResponse"
    kinds = [e["_"] for e in report["events"]]
    assert kinds[:3] == ["connected", "subscribed", "change"]
    assert "appendPartial" in kinds
    appends = [e["event"]["event"] for e in report["events"] if e["_"] == "append"]
    assert [x["content"] for x in appends] == ["hi from a browser", "echo: hi from a browser"]


HOSTILE = """<!doctype html><html><body><pre id="out">running</pre><script>
const base = %(base)s, wsUrl = %(ws)s, envs = %(envs)s, order = %(order)s;
const report = {answers: {}, refused: {}, ws: null};
function b64(buf) { let s = ""; for (const x of new Uint8Array(buf)) s += String.fromCharCode(x); return btoa(s); }
async function main() {
  for (const name of order) {
    try {
      const r = await fetch(base + "/api/message", {method: "POST", body: new Uint8Array(envs[name]),
        headers: {"Content-Type": "application/cbor", "Accept": "application/cbor"}});
      report.answers[name] = {status: r.status, body: b64(await r.arrayBuffer())};
    } catch (e) { report.refused[name] = String(e); }
  }
  report.ws = await new Promise((resolve) => {
    const ws = new WebSocket(wsUrl);
    ws.onopen = () => { ws.close(); resolve("open"); };
    ws.onerror = () => resolve("error");
  });
  await fetch("/result", {method: "POST", body: JSON.stringify(report)});
  document.getElementById("out").textContent = "done";
}
main();
</script></body></html>"""


async def test_a_page_the_operator_did_not_list_reaches_nothing_through_the_server(tmp_path, pages):
    """Issue 32, finding 7, in a real browser against a server child process with default flags:
    a page from another loopback origin makes its own key and tries to create an agent and a
    session, and to read a loopback-only service through InvokeSessionTool. Every request fails
    in the browser (the preflight names no origin; the socket is 403), nothing is created, the
    service is never asked. With its origin listed, the read is still refused: the web tools
    reach public addresses only (--web-networks), whatever the server listens on."""
    from tests.fakes.web_server import FakeWeb
    from tests.procs import ServerProcess

    chromium_or_skip()
    page_key = keypair("a hostile page")
    async with FakeWeb() as secret:
        secret.page("/pin", "<html><body><p>The bank PIN is 4321.</p></body></html>")
        for listed in (False, True):
            extra = ["--allowed-origins", f"http://127.0.0.1:{pages.port}"] if listed else []
            srv = ServerProcess(tmp_path / f"srv-{listed}", extra=extra).start()
            try:
                base = f"http://127.0.0.1:{srv.port}"
                async with httpx.AsyncClient() as http:   # as if the page had got this far
                    _, made = await act(http, base, page_key, {"_": "CreateAgent", "definition": {
                        "name": "held", "systemPrompt": "x", "modelProvider": "echo", "model": "echo-1"}})
                    _, session = await act(http, base, page_key, {"_": "CreateSession", "agentId": made["agentId"]})
                envs = {
                    "createAgent": sign_envelope(page_key, {"_": "CreateAgent", "definition": {
                        "name": "spy", "systemPrompt": "x", "modelProvider": "echo", "model": "echo-1"}}),
                    "createSession": sign_envelope(page_key, {"_": "CreateSession", "agentId": made["agentId"]}),
                    "read": sign_envelope(page_key, {"_": "InvokeSessionTool", "sessionId": session["sessionId"],
                                                     "verb": "read", "input": {"address": secret.url("/pin")}}),
                }
                order = ["createAgent", "createSession", "read"]
                page = HOSTILE % {"base": json.dumps(base), "ws": json.dumps(srv.url),
                                  "envs": json.dumps({k: list(v) for k, v in envs.items()}),
                                  "order": json.dumps(order)}
                pages.got.clear()
                report = await run_page(pages, page)
                async with httpx.AsyncClient() as http:
                    _, agents = await act(http, base, page_key, {"_": "ListAgents"})
                    _, events = await act(http, base, page_key, {"_": "GetSession", "sessionId": session["sessionId"]})
            finally:
                srv.kill()
            assert secret.requests == [], "the loopback service was reached"
            if not listed:
                assert sorted(report["refused"]) == order and report["answers"] == {}, report
                assert report["ws"] == "error"
                assert [a["definition"]["name"] for a in agents["agents"]] == ["held"]
                assert not [e for e in events["events"] if e["event"].get("type") == "tool_call"]
            else:
                assert report["refused"] == {} and report["ws"] == "open", report
                answer = dagcbor.decode(base64.b64decode(report["answers"]["read"]["body"]))
                assert report["answers"]["read"]["status"] == 200
                assert "--web-networks" in answer["error"] and "4321" not in json.dumps(answer)
