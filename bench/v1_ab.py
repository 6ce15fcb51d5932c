"""The desktop's v1 socket before and after a change, in one run: replay over v1 and fan-out to
v1 sockets, beside the figures that must not regress.

    python -m bench.v1_ab --tree before=/path/a --tree after=. [--tree after2=.] \\
        [--rounds 3] [--turns 5] [--fanout 200] [--no-regress] [--json FILE]

Each tree runs as its own child server (that tree's `seed_agents.server.main`, its code first on
the path, pinned to the server CPU) under `bench.timed_server` (this tree's copy, put into the
tree: the fan-out timings are bench code and the server code is untouched), on a copy of one
data dir built once by this tree's `bench.dbsetup`: one echo agent, sessions of 20, 10,000 and
100,000 events (~430-byte SessionEvents, as bench/replay.py). Naming a tree twice gives an A/A
pair: the machine's noise. Every round starts each tree's server afresh, in an order that
rotates each round, and runs one load process (pinned to the load CPU; this tree's load code):

1. v1 replay, as the desktop subscribes: a raw v1 socket (JSON text frames, no subprotocol) sends
   `Subscribe {key, afterSeq: 0}` and reads as fast as it can (frame heads scanned in place,
   nothing decoded). Times from the send to the first and to the last `append` frame, by the
   kernel's receive stamp (SO_TIMESTAMPNS; on loopback, when the server's write landed). The
   server's first replay of the 100,000 (`cold`, nothing derived yet), then a warm-up and three
   timed replays of each size (median); the RSS growth at the peak of the timed 100,000 and
   what stays after them (what any cache of the server holds).
2. v1 fan-out: `--fanout` v1 sockets subscribed to one session; `--turns` echo turns sent over
   one more (v2) socket; when each v1 socket has the durable assistant append (kernel stamp,
   from the MessageSession's send: p50, p99), and on the server (bench.timed_server), from the
   append's publication to the last socket write, with its parts and the loop thread's CPU
   time over it. Then the same with v2 sockets on another session of the same server, beside it.
3. Unless `--no-regress`: three v2 replays of the 100,000 events (time and the server's CPU for
   each: median), then bench.front_ab's load (GetSession at 64 HTTP connections, the server's
   CPU per action, RSS per idle subscribed socket) against the same server.

With `--cold`, a round is only the server's first replay of the 100,000 and one warm replay after
it (about 10 s a tree), for many interleaved rounds of the cold figure.

`--interleave N` writes the data as a live server does (bench.dbsetup): N more sessions of
100,000 events, every session's turns taking turns. `--own-data` gives each tree a file built
by its own bench.dbsetup at its own schema, where by default one file (this tree's) is copied to
each: a tree that changes the storage layout would otherwise migrate this tree's file at start
and replay the result of its migration, not what its own appends leave. Together they compare
layouts on histories written live (docs/performance.md, "The cold replay in each layout").

Server CPU is every thread's time on a CPU (`/proc/PID/task/*/schedstat`, nanoseconds), which a
neighbour taking the server's core moves much less than wall time; on a shared machine read
those rows first.

Reported: per tree and figure the median over rounds, and each tree's median against the first
tree's, with the load average at start and end. Every phase is bounded in count and time;
nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench.processes as processes
from bench import dbsetup
from bench.litesocket import SO_TIMESTAMPNS, recv_stamped
from bench.load import keypair
from bench.trees import medians_table, tree_env

LABEL = "front"        # bench.front_ab's keypair: its load runs against the same data
EVENT_CHARS = 200      # ~430-byte stored SessionEvents (bench/replay.py)
SIZES = {"10k": 10_000, "100k": 100_000}
_APPEND = b'{"_":"append"'
_CHANGE = b'{"_":"change"'
_ASSISTANT = b'"role":"assistant"'


# -- the load side: a v1 socket read from a loop reader callback ---------------------------------
class V1Socket:
    """A raw v1 WebSocket (no subprotocol: the desktop's JSON text frames) for the load side:
    frame heads scanned in place, `append` frames counted, nothing decoded. Stamps (perf_counter
    when read, kernel receive time on time.time's clock) of the first and last append; with
    `watch` armed, of the first append holding it (the fan-out's assistant reply). `v2=True`:
    the same over a v2 socket (binary CBOR frames; ready at `replayed`), for comparison."""

    def __init__(self, sock, v2: bool = False) -> None:
        self.sock = sock
        self.v2 = v2
        if v2:
            from bench.load import _APPEND as append, _ASSISTANT as assistant, _REPLAYED as ready
            self.opcode, self.append, self.ready, self.assistant, self.at = 2, append, ready, assistant, 1
        else:
            self.opcode, self.append, self.ready, self.assistant, self.at = 1, _APPEND, _CHANGE, _ASSISTANT, 0
        self.loop = asyncio.get_running_loop()
        self.buf = b""
        self.closed = False
        self.appends = 0
        self.target = 0
        self.first: tuple[float, float | None] | None = None
        self.last: tuple[float, float | None] | None = None
        self.changed = asyncio.Event()
        self.done: asyncio.Future | None = None
        self.watch = False
        self.seen: tuple[float, float | None] | None = None

    @classmethod
    async def connect(cls, host: str, port: int, v2: bool = False) -> "V1Socket":
        from seed_agents.clients.raw import V2, tcp_handshake

        sock, rest = await tcp_handshake(host, port, subprotocol=V2 if v2 else None)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self = cls(sock, v2)
        if rest:
            self._feed(rest, time.perf_counter(), None)
        self.loop.add_reader(sock.fileno(), self._readable)
        return self

    def expect(self, appends: int) -> asyncio.Future:
        self.appends, self.target, self.first, self.last = 0, appends, None, None
        self.done = self.loop.create_future()
        return self.done

    def send(self, envelope: bytes) -> None:
        from seed_agents.clients.raw import client_frame, signed_request_frame

        payload = signed_request_frame(1, envelope) if self.v2 else envelope
        self.sock.sendall(client_frame(payload, 0x2))   # small frames only (a signed Subscribe)

    def _readable(self) -> None:
        got = recv_stamped(self.sock, 1 << 20)
        if got is None:
            return
        data, t_user, t_kernel = got
        if not data:
            self.close()
            return
        self._feed(data, t_user, t_kernel)

    def _feed(self, data: bytes, t_user: float, t_kernel: float | None) -> None:
        buf = self.buf + data if self.buf else data
        n, pos, appends = len(buf), 0, 0
        stamp = (t_user, t_kernel)
        while n - pos >= 2:
            size, hdr = buf[pos + 1] & 0x7F, 2
            if size == 126:
                if n - pos < 4:
                    break
                size, hdr = (buf[pos + 2] << 8) | buf[pos + 3], 4
            elif size == 127:
                if n - pos < 10:
                    break
                size, hdr = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            end = pos + hdr + size
            if end > n:
                break
            opcode = buf[pos] & 0x0F
            if opcode == self.opcode:
                if buf.startswith(self.append, pos + hdr + self.at):
                    appends += 1
                    if self.watch and self.seen is None and buf.find(self.assistant, pos + hdr, end) >= 0:
                        self.seen = stamp
                elif buf.startswith(self.ready, pos + hdr + self.at):
                    self.changed.set()
            elif opcode == 9:
                from seed_agents.clients.raw import client_frame

                self.sock.sendall(client_frame(bytes(buf[pos + hdr:end]), 0xA))
            elif opcode == 8:
                self.close()
                return
            pos = end
        self.buf = buf[pos:]
        if appends:
            if self.first is None:
                self.first = stamp
            self.last = stamp
            self.appends += appends
            if self.done is not None and not self.done.done() and self.appends >= self.target:
                self.done.set_result(None)
        if self.watch and self.seen is not None and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.loop.remove_reader(self.sock.fileno())
        except (ValueError, OSError):
            pass
        self.sock.close()
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("closed"))


def server_cpu_s(pid: int) -> float:
    """CPU seconds of every thread of the server, exact (schedstat's nanoseconds on a CPU, where
    /proc's stat counts 10 ms ticks): a replay of 10,000 events takes about one tick."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            continue
    return total / 1e9


def server_faults(pid: int) -> int:
    """Minor page faults of the server so far (/proc/PID/stat): new memory touched for the first
    time (a cold replay's kept frames), ~2-3 us each on this VM."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])


def _since(stamp: tuple[float, float | None], t0: float, t0_wall: float) -> float:
    """Seconds from the send to a stamp: the kernel's when there is one, else the read time."""
    return stamp[1] - t0_wall if stamp[1] is not None else stamp[0] - t0


async def v1_replay(host: str, port: int, kp, session_id: str, expected: int, timeout: float = 120.0,
                    pid: int | None = None) -> dict:
    """One replay on a fresh v1 socket. With `pid`: the server's CPU time during it (all its
    threads), which a neighbour's load on the shared machine moves much less than wall time."""
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    from bench.meters import CpuMeter

    ws = await V1Socket.connect(host, port)
    try:
        env = sign_envelope(kp, {"_": "Subscribe", "key": f"sessions/{session_id}", "afterSeq": 0}, ts=unique_ts())
        done = ws.expect(expected)
        s0 = server_cpu_s(pid) if pid else 0.0
        f0 = server_faults(pid) if pid else 0
        with CpuMeter(pid) as cpu:
            t0_wall, t0 = time.time(), time.perf_counter()
            ws.send(env)
            await asyncio.wait_for(done, timeout)
        c = cpu.result
        return {"first_s": _since(ws.first, t0, t0_wall), "total_s": _since(ws.last, t0, t0_wall),
                "read_total_s": ws.last[0] - t0, "events": ws.appends,
                "server_cpu_s": (server_cpu_s(pid) - s0) if pid else 0.0,
                "server_faults": (server_faults(pid) - f0) if pid else 0,
                "foreign": c.get("server_cpu_foreign", 0.0), "load_busy": c["load_busy"]}
    finally:
        ws.close()


def _timings(path: str, since: int) -> tuple[list[dict], int]:
    try:
        with open(path, "rb") as f:
            f.seek(since)
            data = f.read()
    except OSError:
        return [], since
    end = data.rfind(b"\n") + 1
    return [json.loads(line) for line in data[:end].splitlines() if line], since + end


async def v1_fanout(host: str, port: int, url: str, kp, sockets: int, turns: int, timings: str,
                    v2: bool = False) -> dict:
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    from bench.load import Rpc

    sender = await Rpc.open(url)
    agent = await sender.call(kp, {"_": "CreateAgent", "definition": {
        "name": "fanout-v1", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})
    session_id = (await sender.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]}))["sessionId"]
    subs: list[V1Socket] = []

    async def one() -> V1Socket:
        ws = await V1Socket.connect(host, port, v2)
        ws.send(sign_envelope(kp, {"_": "Subscribe", "key": f"sessions/{session_id}"}, ts=unique_ts()))
        await asyncio.wait_for(ws.changed.wait(), 60)   # v1: the session's change; v2: replayed
        return ws

    try:
        for i in range(0, sockets, 100):
            subs += await asyncio.gather(*(one() for _ in range(min(100, sockets - i))))
        rows = []
        offset = _timings(timings, 0)[1]
        for turn in range(turns + 1):   # turn 0 is the warm-up
            env = sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                     "content": [{"type": "text", "text": f"v1 fan out turn {turn}"}],
                                     "clientMessageId": f"fanout-{session_id}-{turn}"}, ts=unique_ts())
            futures = []
            for ws in subs:
                ws.seen, ws.watch = None, True
                futures.append(ws.expect(1 << 30))   # resolved by the watched append
            t0_wall, t0 = time.time(), time.perf_counter()
            await sender.request(env)
            await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 30)
            lat = sorted(_since(ws.seen, t0, t0_wall) * 1000 for ws in subs if ws.seen is not None)
            for ws in subs:
                ws.watch = False
            await asyncio.sleep(0.3)   # the turn's trailing changes drain
            records, offset = _timings(timings, offset)
            reply = [r for r in records if r["kind"] == "append" and r["role"] == "assistant"]
            if turn == 0:
                continue
            row = {"p50_ms": lat[len(lat) // 2] if lat else float("nan"),
                   "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan"),
                   "missing": len(subs) - len(lat)}
            if reply:
                r = reply[-1]
                row |= {f"server_{k}": r[k] for k in ("total_us", "cpu_us", "build_us", "encode_us", "deliver_us",
                                                       "write_us", "sockets", "paused")}
            row["server_publications"] = len(records)
            row["server_deliver_all_us"] = sum(r["deliver_us"] for r in records)
            rows.append(row)
    finally:
        for ws in subs:
            ws.close()
        await sender.close()
    return {k: statistics.median(r[k] for r in rows) for k in rows[0] if all(k in r for r in rows)}


async def load(host: str, port: int, url: str, pid: int, sessions: dict, session_20: str, agent_id: str,
               timings: str, turns: int, fanout: int, regress: bool, requests: int, idle: int,
               cold_only: bool = False) -> dict:
    from bench.meters import RssSampler, rss_kb

    kp = keypair(LABEL)
    out: dict = {}
    await asyncio.sleep(0.5)
    rss_start = rss_kb(pid)
    cold = await v1_replay(host, port, kp, sessions["100k"], SIZES["100k"], pid=pid)
    out["v1_replay_100k_cold_s"] = cold["total_s"]
    out["v1_replay_100k_cold_first_s"] = cold["first_s"]
    out["v1_replay_100k_cold_cpu_s"] = cold["server_cpu_s"]
    out["v1_replay_100k_cold_faults"] = float(cold["server_faults"])
    if cold_only:   # --cold: the first replay, then one warm one beside it (many cheap rounds)
        warm = await v1_replay(host, port, kp, sessions["100k"], SIZES["100k"], pid=pid)
        out["v1_replay_100k_s"] = warm["total_s"]
        out["v1_replay_100k_first_s"] = warm["first_s"]
        out["v1_replay_100k_cpu_s"] = warm["server_cpu_s"]
        out["v1_replay_100k_cold_complete"] = cold["events"] == warm["events"] == SIZES["100k"]
        await asyncio.sleep(0.5)
        out["v1_replays_rss_kept_mb"] = (rss_kb(pid) - rss_start) / 1024
        return out
    for name in ("10k", "100k"):
        await v1_replay(host, port, kp, sessions[name], SIZES[name])   # warm-up
        await asyncio.sleep(0.3)
        before = rss_kb(pid)
        sampler = RssSampler(pid, 0.01).start()
        runs = [await v1_replay(host, port, kp, sessions[name], SIZES[name], pid=pid) for _ in range(3)]
        sampler.stop()
        out[f"v1_replay_{name}_s"] = statistics.median(r["total_s"] for r in runs)
        out[f"v1_replay_{name}_first_s"] = statistics.median(r["first_s"] for r in runs)
        out[f"v1_replay_{name}_cpu_s"] = statistics.median(r["server_cpu_s"] for r in runs)
        out[f"v1_replay_{name}_complete"] = all(r["events"] == SIZES[name] for r in runs)
        if name == "100k":
            out["v1_replay_100k_read_s"] = statistics.median(r["read_total_s"] for r in runs)
            out["v1_replay_100k_foreign"] = statistics.median(r["foreign"] for r in runs)
            out["v1_replay_100k_load_busy"] = statistics.median(r["load_busy"] for r in runs)
            out["v1_replay_100k_rss_growth_mb"] = (max((kb for _t, kb in sampler.samples), default=before)
                                                   - before) / 1024
    await asyncio.sleep(1.0)
    out["v1_replays_rss_kept_mb"] = (rss_kb(pid) - rss_start) / 1024
    fan = await v1_fanout(host, port, url, kp, fanout, turns, timings)
    out |= {f"v1_fanout_{k}": v for k, v in fan.items()}
    fan = await v1_fanout(host, port, url, kp, fanout, turns, timings, v2=True)   # the same over v2, beside it
    out |= {f"v2_fanout_{k}": v for k, v in fan.items()}
    if regress:
        from bench.front_ab import load as front_load

        from bench.replay import replay_once

        v2 = []
        for _ in range(3):   # v2's replay of the same 100,000 events, with the server's CPU for it
            s0 = server_cpu_s(pid)
            res = await replay_once(url, kp, sessions["100k"], SIZES["100k"])
            v2.append((server_cpu_s(pid) - s0, res["seconds"]))
        out["v2_replay_100k_cpu_s"] = statistics.median(c for c, _s in v2)
        out["v2_replay_100k_s"] = statistics.median(s for _c, s in v2)
        front = await front_load(host, port, url, pid, session_20, sessions["100k"], agent_id, requests, idle)
        out |= {k: v for k, v in front.items() if k != "http_errors"} | {"http_errors": front["http_errors"]}
    return out


# -- the runner -----------------------------------------------------------------------------------
class TimedTreeServer(processes.Server):
    """bench.processes.Server, started from another source tree under bench.timed_server."""

    def __init__(self, tree: Path, label: str, data_dir: str, timings: str) -> None:
        super().__init__(label, data_dir=data_dir)
        self.tree = tree
        self.timings = timings

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("seed_agents.server.main")
        return [*cmd[:i], "bench.timed_server", self.timings, "--", *cmd[i + 1:]]

    def start(self, timeout: float = 240.0) -> "TimedTreeServer":   # a loaded machine starts slowly
        own = self.tree / "bench" / "timed_server.py"
        mine = Path(__file__).with_name("timed_server.py")
        if own.resolve() != mine.resolve():
            shutil.copyfile(mine, own)   # a scratch tree of an older commit lacks it
        saved = processes.ROOT
        processes.ROOT = self.tree
        try:
            super().start(timeout)
        finally:
            processes.ROOT = saved
        return self


FIGURES = (
    ("v1_replay_100k_s", "v1 replay of 100,000 events: time to last event", "ms", 1000),
    ("v1_replay_100k_first_s", "v1 replay of 100,000 events: time to first event", "ms", 1000),
    ("v1_replay_100k_cold_s", "v1 replay of 100,000, the server's first (cold): last event", "ms", 1000),
    ("v1_replay_100k_cold_first_s", "v1 replay of 100,000, the server's first (cold): first event", "ms", 1000),
    ("v1_replay_100k_cpu_s", "v1 replay of 100,000 events: server CPU (all threads)", "ms", 1000),
    ("v1_replay_100k_cold_cpu_s", "v1 replay of 100,000, the server's first (cold): server CPU", "ms", 1000),
    ("v1_replay_100k_cold_faults", "v1 replay of 100,000, the server's first (cold): minor page faults", "", 1),
    ("v1_replay_100k_foreign", "v1 replay of 100,000: share of the server's CPU others took", "", 1),
    ("v1_replay_100k_load_busy", "v1 replay of 100,000: the load process's CPU share", "", 1),
    ("v1_replay_10k_s", "v1 replay of 10,000 events: time to last event", "ms", 1000),
    ("v1_replay_10k_cpu_s", "v1 replay of 10,000 events: server CPU", "ms", 1000),
    ("v1_replay_10k_first_s", "v1 replay of 10,000 events: time to first event", "ms", 1000),
    ("v1_replay_100k_rss_growth_mb", "v1 replay of 100,000: RSS growth at peak", "MB", 1),
    ("v1_replays_rss_kept_mb", "RSS kept after the v1 replays", "MB", 1),
    ("v1_fanout_p50_ms", "v1 fan-out: assistant append on every socket, p50 (client)", "ms", 1),
    ("v1_fanout_p99_ms", "v1 fan-out: p99 (client)", "ms", 1),
    ("v1_fanout_server_total_us", "v1 fan-out on the server: publication to last socket write", "us", 1),
    ("v1_fanout_server_cpu_us", "  the loop thread's CPU over that time", "us", 1),
    ("v1_fanout_server_build_us", "  of which: the event map and routing", "us", 1),
    ("v1_fanout_server_deliver_us", "  of which: deliver to every socket (encode included)", "us", 1),
    ("v1_fanout_server_encode_us", "    of which: the frame's encode (once)", "us", 1),
    ("v1_fanout_server_write_us", "  of which: the socket writes", "us", 1),
    ("v1_fanout_server_publications", "v1 fan-out: publications in a turn (each to every socket)", "", 1),
    ("v1_fanout_server_deliver_all_us", "v1 fan-out: deliver time of all of a turn's publications", "us", 1),
    ("v2_fanout_p50_ms", "v2 fan-out (same server, after v1's): p50 (client)", "ms", 1),
    ("v2_fanout_server_total_us", "v2 fan-out on the server: publication to last socket write", "us", 1),
    ("v2_fanout_server_cpu_us", "  the loop thread's CPU over that time", "us", 1),
    ("v2_fanout_server_write_us", "  of which: the socket writes", "us", 1),
    ("http_c64_actions_per_s", "HTTP GetSession c64 actions/s", "/s", 1),
    ("http_c64_cpu_us_per_action", "HTTP GetSession c64 server CPU per action", "us", 1),
    ("v2_replay_100k_s", "v2 replay of 100,000 events: time to last event", "ms", 1000),
    ("v2_replay_100k_cpu_s", "v2 replay of 100,000 events: server CPU", "ms", 1000),
    ("idle_kb_per_socket", "RSS per idle subscribed socket", "KB", 1),
)


def seed_data(trees: list[tuple[str, Path]], base: str, account_id: str, interleave: int,
             per_tree: bool) -> dict[Path, tuple[str, dict]]:
    """Each tree's (seed data dir, bench.dbsetup's answer): one file built here for all, or with
    `per_tree` one per distinct tree, built by that tree's own code in a child process."""
    spec = {"get": (20, 400), **{k: (n, EVENT_CHARS) for k, n in SIZES.items()}}
    if not per_tree:
        seed_dir = str(Path(base) / "seed")
        built = dbsetup.build(seed_dir, account_id, spec, interleave)
        return {tree: (seed_dir, built) for _, tree in trees}
    out: dict[Path, tuple[str, dict]] = {}
    for tree in dict.fromkeys(tree for _, tree in trees):
        seed_dir = str(Path(base) / f"seed-{len(out)}")
        done = subprocess.run([processes.PY, "-m", "bench.dbsetup", seed_dir, account_id, json.dumps(spec),
                               str(interleave)], cwd=str(tree), env=tree_env(tree), capture_output=True,
                              text=True, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: its bench.dbsetup failed (a tree from before --own-data has no"
                             f" command line):\n{done.stderr[-2000:]}")
        out[tree] = (seed_dir, json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.v1_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--fanout", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--idle", type=int, default=1000, help="idle sockets (RSS per socket)")
    parser.add_argument("--no-regress", action="store_true", help="v1 figures only")
    parser.add_argument("--cold", action="store_true",
                        help="only the server's first 100,000 replay and one warm one (cheap rounds)")
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="the data as a live server writes it: N more sessions taking turns")
    parser.add_argument("--own-data", action="store_true",
                        help="each tree's data built by its own bench.dbsetup, at its own schema")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    kp = keypair(LABEL)
    base = tempfile.mkdtemp(prefix="bench-v1ab-")
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    load_start = os.getloadavg()
    try:
        seeds = seed_data(trees, base, kp.account_id, args.interleave, args.own_data)
        print(f"data built in {sum(b['seconds'] for _, b in seeds.values()):.1f} s; load average {load_start}", flush=True)
        for r in range(args.rounds):
            order = trees[r % len(trees):] + trees[:r % len(trees)]
            for name, tree in order:
                data_dir = str(Path(base) / f"{name}-{r}")
                seed_dir, built = seeds[tree]
                shutil.copytree(seed_dir, data_dir)
                timings = str(Path(base) / f"{name}-{r}.timings")
                started = time.monotonic()
                with TimedTreeServer(tree, f"v1ab-{name}", data_dir, timings) as srv:
                    row = processes.run_load("bench.v1_ab:load", {
                        "host": "127.0.0.1", "port": srv.port, "url": srv.url, "pid": srv.pid,
                        "sessions": {k: built["sessions"][k] for k in SIZES}, "session_20": built["sessions"]["get"],
                        "agent_id": built["agentId"], "timings": timings, "turns": args.turns,
                        "fanout": args.fanout, "regress": not args.no_regress, "requests": args.requests,
                        "idle": args.idle, "cold_only": args.cold}, timeout=900)
                shutil.rmtree(data_dir, ignore_errors=True)
                row["loadavg_1m"] = os.getloadavg()[0]
                results[name].append(row)
                print(f"round {r} {name}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items()
                                                        if isinstance(v, float))
                      + f" ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(medians_table(trees, results, FIGURES))
    print(f"load average at start {load_start}, at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"trees": {n: str(p) for n, p in trees}, "rounds": results,
                                               "loadavg": [load_start, os.getloadavg()]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
