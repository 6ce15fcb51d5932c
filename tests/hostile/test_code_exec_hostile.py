"""Hostile code in the sandbox (issue 34, "Bad input and faults"), one turn per case on a server
child process, while a second, honest client calls GetSession on its own socket: code that forks
without end, fills the disk, fills memory, prints a gigabyte, sleeps forever (and leaves daemons
behind), tries the network, the host's files and another agent's memory. Each ends within its
bound with a result the model can read, nothing of it outlives the call, nothing of the host or
of another agent is visible, and the honest client is served throughout (its latencies printed;
the bounds are loose, for a shared 2-core machine)."""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.fakes.web_server import FakeWeb
from tests.hostile_measure import percentile
from tests.procs import ROOT
from tests.server.sandbox.test_code_exec import code_server, results
from tests.server.runtime.test_tool_loop import agent_session, call, run_turn
from tests.wsraw import V2Client, keypair, setup_session

pytestmark = pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="the bubblewrap sandbox runs on Linux only")


def leftovers(marker: str) -> list[int]:
    """Host processes whose command line carries `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


@pytest.fixture
async def world(tmp_path):
    # A quota, so a workspace filled to its bound is not kept as memory.
    srv = await code_server(tmp_path, "--file-quota-bytes", str(64 << 20))
    try:
        async with FakeOpenAI() as fake, FakeWeb() as web:
            honest_kp = keypair("hostile-honest")
            honest = await V2Client.open(srv.url)
            _, honest_sid = await setup_session(honest, honest_kp)
            kp = keypair("hostile-coder")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            yield {"srv": srv, "fake": fake, "web": web, "c": c, "kp": kp, "agent": agent_id, "sid": sid,
                   "honest": (honest, honest_kp, honest_sid), "data_dir": tmp_path}
            await c.close()
            await honest.close()
    finally:
        srv.kill()


async def hostile_turn(w, runtime: str, code: str, timeout_secs: int | None = None) -> dict:
    """One execute call of `code`: its tool_result event (the honest client measured meanwhile)."""
    value = {"runtime": runtime, "code": code, **({"timeout_secs": timeout_secs} if timeout_secs else {})}
    w["turns"] = call_id = f"h{int(w.get('turns', '0')[1:] or 0) + 1}" if w.get("turns") else "h1"
    w["fake"].enqueue(Script(chunks=[], tool_calls=[call(call_id, "call", {"tool": "execute", "input": value})]),
                      Script(chunks=["noted"]))
    honest, hkp, hsid = w["honest"]
    latencies: list[float] = []
    stop = asyncio.Event()

    async def measure() -> None:
        n = 0
        while not stop.is_set() and n < 10_000:
            t = time.perf_counter()
            r = await honest.call(hkp, {"_": "GetSession", "sessionId": hsid, "n": n}, timeout=10)
            latencies.append(time.perf_counter() - t)
            assert r["_"] == "GetSessionResponse", r
            n += 1
            await asyncio.sleep(0.02)

    task = asyncio.create_task(measure())
    try:
        _, appends = await run_turn(w["c"], w["kp"], w["sid"], timeout=90)
    finally:
        stop.set()
        await task
    result = results(appends)[call_id]
    print(f"\n{code[:50]!r}: honest GetSession x{len(latencies)} p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms; call {result['meta'].get('durationMs')} ms")
    assert latencies and percentile(latencies, 0.5) < 0.5 and max(latencies) < 5.0, latencies
    return result


async def test_hostile_code_ends_within_its_bounds_and_the_server_keeps_serving(world):
    w = world
    c, kp, agent_id = w["c"], w["kp"], w["agent"]

    # A fork bomb: forks fail at the process limit; the call ends at its time, every process gone.
    out = (await hostile_turn(w, "shell", "bomb() { bomb | bomb & }; bomb; sleep 876543", timeout_secs=3))["output"]
    assert out["exitCode"] == -1 and not out["success"] and "timed out after 3 s" in out["stderr"], out
    assert out["durationMs"] < 10_000
    assert leftovers("876543") == []

    # Sleeping forever, with daemons left behind in new sessions: all stopped with the call.
    out = (await hostile_turn(w, "shell", "setsid sleep 765432 & nohup sleep 765432 & (sleep 765432 &); sleep 765432",
                              timeout_secs=2))["output"]
    assert out["exitCode"] == -1 and "timed out" in out["stderr"], out
    assert leftovers("765432") == []
    out = (await hostile_turn(w, "shell", "setsid sleep 765431 & echo left"))["output"]   # ends at once
    assert out["success"] and out["durationMs"] < 10_000 and leftovers("765431") == [], out

    # Memory: an allocation past --exec-memory-bytes fails inside the program.
    out = (await hostile_turn(w, "python", "a = []\nwhile True:\n    a.append(bytearray(32 << 20))"))["output"]
    assert out["exitCode"] == 1 and "MemoryError" in out["stderr"], out

    # A gigabyte printed: 64 KiB of it comes back, marked truncated, and the call ends.
    out = (await hostile_turn(w, "python", "import sys\nfor _ in range(16384):\n    sys.stdout.write('x' * 65536)\n"
                                           "sys.stderr.write('e' * 200000)", timeout_secs=50))["output"]
    assert out["truncated"] is True and out["success"], {k: v for k, v in out.items() if k not in ("stdout", "stderr")}
    assert len(out["stdout"].encode()) <= 64 * 1024 + 100 and len(out["stderr"].encode()) <= 64 * 1024 + 100

    # The disk: the workspace and /tmp are bounded; the full workspace is not kept (over quota).
    out = (await hostile_turn(w, "shell", "dd if=/dev/zero of=/tmp/fill bs=1M 2>/dev/null; df -m /tmp | tail -1; "
                                          "dd if=/dev/zero of=fill bs=1M 2>&1 | tail -1; ls -la fill",
                              timeout_secs=50))["output"]
    assert "100% /tmp" in out["stdout"], out   # /tmp full at its 64 MiB
    assert int(out["stdout"].splitlines()[-1].split()[4]) <= 256 << 20, out   # the workspace at its 256 MiB
    assert "memory was not changed" in out["stderr"] and out["changedFiles"] == [], out
    listing = await c.call(kp, {"_": "ListAgentMemory", "agentId": agent_id})
    assert all(e["path"] != "fill" for e in listing["entries"]), listing

    # The network: nothing reaches the host's loopback (a fake web server there sees no request),
    # and no name resolves.
    port = w["web"].url("").split(":")[2].split("/")[0]
    code = ("import socket, urllib.request\n"
            "for target in (('127.0.0.1', %s), ('1.1.1.1', 53)):\n"
            "    try:\n        socket.create_connection(target, timeout=2); print('CONNECTED', target)\n"
            "    except OSError as e:\n        print('refused', target, e)\n"
            "try:\n    urllib.request.urlopen('http://example.com', timeout=2); print('FETCHED')\n"
            "except Exception as e:\n    print('no fetch', e)\n") % port
    out = (await hostile_turn(w, "python", code))["output"]
    assert "CONNECTED" not in out["stdout"] and "FETCHED" not in out["stdout"] and "no fetch" in out["stdout"], out
    assert w["web"].requests == []

    # The host's files: the data dir, the repository, /root, /work, the server's database and
    # its secrets key are not there; /etc holds only the few files named in the docs.
    paths = [str(w["data_dir"]), str(ROOT), "/root", "/work", "/home", str(w["data_dir"] / "srv" / "agents.sqlite"),
             "/etc/shadow", "/etc/passwd", "/proc/1/root/work"]
    code = "import os\nfor p in %r:\n    print(p, os.path.exists(p))\nprint(sorted(os.listdir('/')))" % (paths,)
    out = (await hostile_turn(w, "python", code))["output"]
    assert all(line.endswith("False") for line in out["stdout"].splitlines()[:len(paths)]), out["stdout"]
    top = eval(out["stdout"].splitlines()[-1])   # noqa: S307 (a list literal the sandbox printed)
    assert set(top) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr",
                        "workspace"}, top

    # Another agent's memory: its secret is nowhere in this sandbox.
    other = keypair("hostile-other")
    oc = await V2Client.open(w["srv"].url)
    other_agent, _ = await setup_session(oc, other)
    r = await oc.call(other, {"_": "WriteAgentMemoryFile", "agentId": other_agent, "path": "b-secret.txt",
                              "content": "SECRET-OF-B-4242"})
    assert r["_"] == "WriteAgentMemoryFileResponse", r
    code = ("import os\nhits = []\n"
            "for top in ('/workspace', '/tmp', '/etc'):\n"
            "    for root, dirs, files in os.walk(top):\n"
            "        for f in files:\n"
            "            try:\n"
            "                if b'SECRET-OF-B' in open(os.path.join(root, f), 'rb').read(1 << 20): hits.append(f)\n"
            "            except OSError:\n                pass\n"
            "print('hits', hits, os.path.exists('/workspace/b-secret.txt'))")
    out = (await hostile_turn(w, "python", code))["output"]
    assert out["stdout"].strip() == "hits [] False", out
    await oc.close()
