"""A real headless Chromium, on a page from another loopback origin, calls the server the way the
Seed web app does: signed envelopes POSTed as `application/cbor` (CORS preflight included), CBOR
answers read as bytes, and the v1 WebSocket followed for a turn's events.

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

from seed_agents.protocol import dagcbor
from seed_agents.protocol.envelope import sign_envelope

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

    def __init__(self, page: str) -> None:
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


async def test_a_browser_on_another_origin_posts_cbor_and_follows_a_session(server):
    chromium = chromium_or_skip()
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
    pages = PageServer(page)
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
        pages.close()
        shutil.rmtree(profile, ignore_errors=True)
    report = pages.report
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
