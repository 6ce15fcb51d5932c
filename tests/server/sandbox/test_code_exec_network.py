"""Issue 34, `--exec-network` under a narrow policy: sandboxed code reaches out only through the
server's proxy for its run (server/sandbox/egress.py), which applies the web tools' network policy
(`--web-networks`) after resolving the name itself. On a server child process, with a fake web
server on loopback in this process: the code's fetch through the proxy reaches it only when the
policy allows loopback; a LAN address is refused with the policy's reason; a connection that
skips the proxy has no route; and without `--exec-network` nothing leaves. No traffic goes beyond
127.0.0.1 (the LAN address is refused before any connection is tried)."""
from __future__ import annotations

import json

import pytest

from tests.fakes.web_server import FakeWeb
from tests.server.sandbox.test_code_exec import code_server
from tests.wsraw import V2Client, keypair, setup_session

pytestmark = pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="the bubblewrap sandbox runs on Linux only")

# Python's urllib follows HTTP_PROXY / HTTPS_PROXY as most tools do; the CONNECT tunnel is what
# an https:// URL uses, here opened by hand (no TLS on the fake) to show the tunnel itself.
FETCH = """
import http.client, json, os, socket, urllib.request
out = {"proxy": os.environ.get("HTTP_PROXY", "")}
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except Exception as e:
        return ["error", type(e).__name__]
out["loopback"] = get("http://127.0.0.1:%(port)d/page.html")
out["lan"] = get("http://192.168.77.1:%(port)d/page.html")
try:
    t = http.client.HTTPConnection("127.0.0.1", 3128, timeout=15)
    t.set_tunnel("127.0.0.1", %(port)d)
    t.request("GET", "/tunnel.html")
    r = t.getresponse()
    out["tunnel"] = [r.status, r.read().decode()]
except Exception as e:
    out["tunnel"] = ["error", str(e)[:200]]
try:
    socket.create_connection(("127.0.0.1", %(port)d), timeout=3)
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = "no route"
print(json.dumps(out))
"""


async def execute(srv, code: str) -> dict:
    kp = keypair("egress")
    c = await V2Client.open(srv.url)
    try:
        _, sid = await setup_session(c, kp)
        r = await c.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                              "input": {"tool": "execute", "input": {"runtime": "python", "code": code,
                                                                     "timeout_secs": 60}}}, timeout=120)
        assert r["_"] == "InvokeSessionToolResponse", r
        return r["output"]
    finally:
        await c.close()


async def fetches(srv, web: FakeWeb) -> dict:
    out = await execute(srv, FETCH % {"port": web.port})
    assert out["exitCode"] == 0, out
    return json.loads(out["stdout"].strip().splitlines()[-1])


async def test_code_reaches_a_loopback_service_only_when_the_policy_allows_it(tmp_path):
    async with FakeWeb() as web:
        web.page("/page.html", "<p>through the proxy</p>")
        web.page("/tunnel.html", "<p>through the tunnel</p>")
        srv = await code_server(tmp_path / "open", "--exec-network", "true", "--web-networks", "loopback")
        try:
            got = await fetches(srv, web)
        finally:
            srv.kill()
        assert got["proxy"] == "http://127.0.0.1:3128", got
        assert got["loopback"] == [200, "<p>through the proxy</p>"], got
        assert got["tunnel"] == [200, "<p>through the tunnel</p>"], got
        # A LAN address is refused by the policy, with its reason, before any connection.
        assert got["lan"][0] == 403 and "private; --web-networks" in got["lan"][1], got
        # Around the proxy there is no route: the sandbox's network holds only its own loopback.
        assert got["direct"] == "no route", got
        assert sorted(path for _, path in web.requests) == ["/page.html", "/tunnel.html"], web.requests

        # The default policy (public only) refuses the loopback service too: it sees nothing more.
        web.requests.clear()
        srv = await code_server(tmp_path / "default", "--exec-network", "true")
        try:
            got = await fetches(srv, web)
        finally:
            srv.kill()
        assert got["loopback"][0] == 403 and "loopback; --web-networks" in got["loopback"][1], got
        assert got["tunnel"][0] == "error" and "403" in got["tunnel"][1], got
        assert got["lan"][0] == 403 and got["direct"] == "no route", got
        assert web.requests == []


async def test_without_exec_network_nothing_leaves(tmp_path):
    async with FakeWeb() as web:
        srv = await code_server(tmp_path / "closed", "--web-networks", "loopback")
        try:
            got = await fetches(srv, web)
        finally:
            srv.kill()
        assert got["proxy"] == "" and got["direct"] == "no route", got
        assert got["loopback"][0] == "error" and got["tunnel"][0] == "error", got
        assert web.requests == []


async def test_a_run_s_traffic_is_bounded_in_bytes(tmp_path):
    """A run's proxy carries at most 64 MiB: a download past it is cut, and the call still ends."""
    async with FakeWeb() as web:
        web.huge("/huge.bin", 200 << 20)
        srv = await code_server(tmp_path / "huge", "--exec-network", "true", "--web-networks", "loopback")
        try:
            code = ("import urllib.request\nn = 0\ntry:\n"
                    f"    r = urllib.request.urlopen('http://127.0.0.1:{web.port}/huge.bin', timeout=30)\n"
                    "    while True:\n        chunk = r.read(1 << 20)\n        if not chunk:\n            break\n"
                    "        n += len(chunk)\nexcept Exception as e:\n    print(type(e).__name__)\nprint(n)\n")
            out = await execute(srv, code)
        finally:
            srv.kill()
        received = int(out["stdout"].strip().splitlines()[-1])
        assert 0 < received <= 64 << 20, out
