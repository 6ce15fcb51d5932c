"""The SQLite driver before and after a change, in one run (the SQLite path should keep
its speed, within 5%, through a change):

    python -m bench.sqlite_ab [--before REF] [--after REF|.] [--quick] [--rounds N] [--aa]
                              [--fresh-servers] [--steady-malloc] [--wait-quiet SECONDS]
                              [--profile DIR] [--json FILE]

Two source trees: `--before` (default b319136, main before the storage port) and `--after`
(default `.`, this working tree as it is on disk; a git ref is extracted like the before tree,
with `git archive` into a temporary directory). Each tree runs as its own child server
(`python -m seed_agents.server.main` of that tree, pinned to the server CPU, on loopback, limits raised as
in bench.processes) on a fresh SQLite data dir seeded by that tree's own `bench.dbsetup` (so
the file is what that tree's store writes): one echo agent and a session of 20 events of
~630 bytes (the `rpc` benchmark's ~12.7 KB GetSession answer), all for one account.

Both servers run for the whole benchmark. With `--fresh-servers`
each tree's seeded data dir is kept as a template instead, and every round starts a new server
process per tree on a fresh copy of it (the SQLite file with its WAL and SHM, whatever the dir
holds), stopped and its copy deleted after the round. That is for a noise this machine shows: one
server process can stay slower than its twin for its whole life (the A/A of a run at 0.96 in one
run, 1.23 in the next, the same ratio in every round, mostly in the system time of the database
writer's thread), and more rounds with the same processes cannot average that out; a process per
round spreads that luck over the rounds, where the per-round ratios and their interval show it.
The figures name the luck: the slow process's writer thread takes ~90-140 minor page faults a
turn, its twin's under 1, and reads nothing from the disk (so not a page cache the kernel
dropped): glibc malloc, whose thresholds move with what a process has freed, giving memory back
and faulting it in again. `--steady-malloc` runs the servers with those thresholds fixed
(STEADY_MALLOC), so no process does: the code's CPU without the allocator's luck, which a
production server does not have.

Only one server is loaded at a time. Each round is one load process (pinned to the load CPU;
this tree's load code for both trees; envelopes pre-signed before each timed chunk). For each cell it opens its sockets (and sessions) on both trees,
warms both up, then sends CHUNKS timed chunks to each tree, alternating A B B A A B ... where A
is the tree that goes first in this round (before in even rounds, after in odd ones): drift of
the shared machine at any scale longer than a chunk (0.1-0.5 s) falls on both trees alike.
The cells:

- `GetSession c1` and `GetSession c16`: v2 GetSession of the 20-event session, closed loop with
  1 or 16 requests outstanding (over 1 or 16 sockets);
- `turns c1` and `turns c8`: MessageSession to the echo agent on 1 or 8 sessions (a socket
  subscribed to each, one turn at a time per session), each turn timed from the send until the
  durable assistant append arrives.

Figures per cell: throughput (actions or turns per second), p50 latency, and the server's CPU
time per action (all its threads, exact, from /proc/PID/task/*/schedstat): the work an action
costs, which a neighbour's load moves much less than it moves wall time; beside it the same
CPU split into user and system time (all threads, and the database writer's thread alone), from
the utime and stime of /proc/PID/task/TID/stat: those are in clock ticks (10 ms here), good to
about a tick a timed chunk, so a round's figure needs some hundred ticks of that thread (the
`turns` cells' default sizes give the writer ~30 ticks a round at c1 and ~65 at c8, the whole
server ~70 and ~160: read the writer's split over the rounds, not in one round); the minor page
faults per action (all threads, and the writer's) and the writer's bytes read from the disk
(shown when not 0), which tell where a system time comes from. Reported: the median
over the rounds for each tree, after/before of those medians, and the per-round ratios (a
round's after against the same round's before): median, min and max. Also the CPU that other
processes took from the server's and the load's CPU during the timed chunks (`foreign`) and the
load average at start and end; the event loop's share of the server's CPU (its main thread:
the rest is the database writer's and readers' threads). `--aa` runs a second server of the
before tree in the same rounds (the three take turns going first) and shows its ratios too: the
A/A beside the A/B, the noise of this run. `--wait-quiet SECONDS` makes each round first wait (bounded)
until both CPUs are less than 20% busy. Every phase is bounded in count and in time
(CELL_CAP_S), every process by a timeout. Nothing is asserted.

`--profile DIR` runs both servers under pyinstrument (bench.profiled_server of each tree,
sampling only during the timed chunks) and writes DIR/{before,after}.{txt,top.txt,pyisession};
the profiler slows the servers, so its ratios mean nothing, only its shares do.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.bench_bounds import extract
from bench.conditions import ROOT, SERVER_CPU, machine_info, pin_prefix
from bench.meters import TICK_S, thread_stat
from bench.processes import RAISED_LIMITS, _raise_nofile_child, free_port, run_load
from bench.trees import server_module, tree_env

DEFAULT_BEFORE = "b319136"
LABEL = "sqlite-ab"
EVENTS, EVENT_CHARS = 20, 400        # as bench.rpc: ~630-byte events, a ~12.7 KB answer
CELLS = ("GetSession c1", "GetSession c16", "turns c1", "turns c8")
CELL_CAP_S = 60.0                    # no timed phase runs longer than this
CHUNKS = 4                           # timed chunks per tree, cell and round


def sizes(quick: bool) -> tuple[int, dict[str, int]]:
    """(rounds, requests or turns per tree, cell and round; split into CHUNKS chunks of
    0.1-0.5 s each on this machine)."""
    if quick:
        return 5, {"GetSession c1": 800, "GetSession c16": 2000, "turns c1": 160, "turns c8": 480}
    return 10, {"GetSession c1": 1600, "GetSession c16": 4000, "turns c1": 320, "turns c8": 960}


# -- the servers ---------------------------------------------------------------------------------

def seed(tree: Path, data_dir: Path, account_id: str) -> dict:
    """The agent and the 20-event session, written by `tree`'s own store code before its server
    starts (a tree's server may refuse a file another tree's schema wrote)."""
    code = ("import json, sys\nfrom bench import dbsetup\n"
            "a = json.loads(sys.argv[1])\n"
            "print(json.dumps(dbsetup.build(a[0], a[1], {'get': (a[2], a[3])})))")
    args = json.dumps([str(data_dir), account_id, EVENTS, EVENT_CHARS])
    out = subprocess.run([sys.executable, "-c", code, args], cwd=str(tree), capture_output=True,
                         text=True, timeout=120, env=tree_env(tree))
    if out.returncode != 0:
        raise RuntimeError(f"seeding with {tree}/bench/dbsetup.py failed:\n{out.stderr[-2000:]}")
    built = json.loads(out.stdout.strip().splitlines()[-1])
    return {"session_id": built["sessions"]["get"], "agent_id": built["agentId"],
            "event_bytes": built["event_bytes"]["get"]}


class TreeServer:
    """`python -m seed_agents.server.main` of one source tree (cwd and PYTHONPATH set to it), pinned to the
    server CPU, on a free loopback port, with its data dir (seeded before)."""

    def __init__(self, name: str, tree: Path, data_dir: Path, profile_dir: str | None,
                 extra_env: dict[str, str] | None = None) -> None:
        self.name, self.tree, self.data_dir = name, tree, data_dir
        self.extra_env = extra_env or {}
        self.port = free_port()
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(data_dir),
                "--log-level", "WARNING", *RAISED_LIMITS]
        if profile_dir:
            os.makedirs(profile_dir, exist_ok=True)
            prefix = os.path.join(os.path.abspath(profile_dir), name)
            self.cmd = [sys.executable, "-m", "bench.profiled_server", prefix, "--window", "--", *args]
        else:
            self.cmd = [sys.executable, "-m", server_module(tree), *args]
        self.log_path = data_dir / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agents/ws"

    def start(self, timeout: float = 30.0) -> "TreeServer":
        with open(self.log_path, "ab") as log:
            # taskset execs the command, so the child's pid is the server's own (for /proc).
            self.proc = subprocess.Popen([*pin_prefix(SERVER_CPU), *self.cmd], cwd=str(self.tree),
                                         env={**tree_env(self.tree), **self.extra_env},
                                         stdout=log, stderr=log, preexec_fn=_raise_nofile_child)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/health", timeout=0.5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} server did not start: {self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)   # SIGTERM: a profiled server writes its profile
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


TEMPLATE_CAP_BYTES = 256 << 20   # a seeded data dir is well under 1 MB; more means something else is in it


def fresh_copy(template: Path, into: Path) -> Path:
    """A new data dir `into` holding a copy of the seeded `template` (the SQLite file with its
    WAL and SHM, whatever the seeding left there; no server has run on it), for a server of its
    own (`--fresh-servers`): the same files, of the same sizes, checked."""
    size = sum(f.stat().st_size for f in template.rglob("*") if f.is_file())
    if size > TEMPLATE_CAP_BYTES:
        raise RuntimeError(f"{template} holds {size:,} bytes, more than a seeded data dir should")
    shutil.copytree(template, into, ignore=shutil.ignore_patterns("server.log"))
    if _listing(into) != _listing(template, skip="server.log"):   # (copytree raises on a failed copy)
        raise RuntimeError(f"{into} is not a whole copy of {template}")
    return into


def _listing(folder: Path, skip: str = "") -> list[tuple[str, int]]:
    return sorted((str(f.relative_to(folder)), f.stat().st_size) for f in folder.rglob("*")
                  if f.is_file() and f.name != skip)


def start_fresh(trees: dict[str, Path], templates: dict[str, Path], into: Path, round_no: int,
                profile_dir: str | None, extra_env: dict[str, str] | None = None) -> dict[str, TreeServer]:
    """This round's servers (`--fresh-servers`): for each tree, in the order given, a copy of
    its template in a data dir of its own under `into` and a new server process on it; all
    stopped again if one fails to start."""
    servers: dict[str, TreeServer] = {}
    try:
        for name, tree in trees.items():
            data = fresh_copy(templates[name], into / f"round{round_no + 1}-{name}")
            # (the round in the name: a profiled server's profile per round, not overwritten)
            servers[name] = TreeServer(f"{name}-round{round_no + 1}" if profile_dir else name, tree, data,
                                       profile_dir, extra_env).start()
    except BaseException:
        stop_fresh(servers)
        raise
    return servers


def stop_fresh(servers: dict[str, TreeServer]) -> None:
    """Stop a round's servers and delete their data dirs (kept with BENCH_KEEP set)."""
    for srv in servers.values():
        srv.stop()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(srv.data_dir, ignore_errors=True)


# `--steady-malloc`: glibc's malloc with fixed thresholds in the servers. By default it moves
# its mmap threshold (and with it the trim threshold) by what the process has freed so far, so
# one server process can end up giving memory back to the kernel and faulting it in again at
# every turn (its writer thread's minor faults: ~90-140 a turn at c8, against under 1 for its
# twin, for the process's whole life; ~250 us of system time a turn), another not. Setting
# either threshold turns that off: no process then returns its free memory below 256 MiB.
# Not what a production server runs with: the CPU it measures is the code's, without that luck.
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(4 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


# -- the load (runs in a load process, bench.processes.run_load) ---------------------------------

def loop_cpu_ns(pid: int) -> int:
    """CPU time of the server's main thread (the event loop's) so far, in ns: the rest of
    `server_cpu_ns` is the database writer and the reader threads."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def server_cpu_ns(pid: int) -> int:
    """CPU time of all the server's threads so far, in ns (/proc/PID/task/*/schedstat: exact,
    unlike the 10 ms ticks of /proc/PID/stat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


COUNTERS = 10   # the fields of a thread_counters tuple


def thread_counters(pid: int) -> dict[int, tuple[int, ...]]:
    """Per thread of the server: (CPU ns, write calls, bytes written, context switches, of which
    involuntary, read calls, user ticks, system ticks, minor page faults, bytes read from the
    disk) so far, from
    /proc/PID/task/TID/{schedstat,io,status,stat} (the ticks: bench.meters.thread_stat, whose
    granularity says how many turns a figure needs). The bytes read from the disk are the reads
    the page cache did not answer: a file page the kernel dropped while the server sat idle
    comes back from there, at the cost of system time. Read calls
    are the database pages a thread read from the file or the WAL (socket reads are not counted
    there): a reader's page cache starts empty after each commit, so its reads per action follow
    the depth of the B-trees it walks. The writer thread is
    told apart by its writes: the event loop's socket writes go through `send`, which /proc
    counts as well, so the writer is the other thread with the most bytes written (the WAL's)."""
    out: dict[int, tuple[int, ...]] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/schedstat") as f:
                cpu = int(f.read().split()[0])
            io = dict(line.split(": ") for line in open(f"{base}/io").read().splitlines())
            status = dict(line.split(":\t", 1) for line in open(f"{base}/status").read().splitlines()
                          if ":\t" in line)
            vol, invol = int(status["voluntary_ctxt_switches"]), int(status["nonvoluntary_ctxt_switches"])
            stat = thread_stat(pid, tid)
            if stat is None:
                continue
            out[tid] = (cpu, int(io["syscw"]), int(io["wchar"]), vol + invol, invol, int(io["syscr"]), *stat,
                        int(io["read_bytes"]))
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return out


def db_counters(http_url: str) -> tuple[int, int] | None:
    """(commits, write jobs) of the server's database so far, from /metrics
    (seed_agents_db_commits, seed_agents_db_write_jobs); None from a tree without them."""
    try:
        with urllib.request.urlopen(http_url + "/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("seed_agents_db_commits", "seed_agents_db_write_jobs"):
            found[name] = int(float(value))
    if len(found) < 2:
        return None
    return found["seed_agents_db_commits"], found["seed_agents_db_write_jobs"]


def _thread_deltas(pid: int, before: dict, after: dict) -> dict:
    """What the server's threads did between two `thread_counters`: the loop's (the main
    thread), the writer's (the other thread that wrote the most bytes) and all threads' context
    switches; and the user and system ticks and minor page faults of all threads and of the writer's."""
    d = {tid: tuple(a - b for a, b in zip(after[tid], before.get(tid, (0,) * COUNTERS))) for tid in after}
    others = [tid for tid in d if tid != pid]
    writer = max(others, key=lambda t: d[t][2], default=None)
    w = d[writer] if writer is not None else (0,) * COUNTERS
    return {"writer_ns": w[0], "writer_calls": w[1], "writer_bytes": w[2], "writer_reads": w[5],
            "writer_user_ticks": w[6], "writer_sys_ticks": w[7], "writer_faults": w[8], "writer_disk_bytes": w[9],
            "loop_reads": d.get(pid, (0,) * COUNTERS)[5],
            "user_ticks": sum(v[6] for v in d.values()), "sys_ticks": sum(v[7] for v in d.values()),
            "faults": sum(v[8] for v in d.values()),
            "switches": sum(v[3] for v in d.values()), "involuntary": sum(v[4] for v in d.values())}


class _Window:
    """Around a timed phase: the profiled server samples only inside it (SIGUSR1/SIGUSR2)."""

    def __init__(self, pid: int, on: bool) -> None:
        self.pid, self.on = pid, on

    def __enter__(self) -> "_Window":
        if self.on:
            os.kill(self.pid, signal.SIGUSR1)
        return self

    def __exit__(self, *exc) -> None:
        if self.on:
            os.kill(self.pid, signal.SIGUSR2)


class _GetSessions:
    """GetSession of the seeded session on one tree: `c` requests outstanding over min(c, 16)
    sockets, each bound to the account before anything is timed."""

    def __init__(self, kp, target: dict, c: int, tag: str) -> None:
        self.kp, self.target, self.c = kp, target, c
        self.sockets: list = []

    async def open(self) -> None:
        from bench.load import Rpc

        for _ in range(min(self.c, 16)):
            self.sockets.append(await Rpc.open(self.target["url"]))
            await self.sockets[-1].call(self.kp, {"_": "ListModelProviders"})

    def sign(self, count: int) -> list[bytes]:
        from seed_agents.clients.raw import now_ms
        from seed_agents.protocol.wire.envelope import sign_envelope

        # Every frame distinct: one ts per batch (past the last one), limits 21..9999 (every
        # answer carries the same 20 events).
        ts = max(now_ms(), self.target["last_ts"] + 2)
        self.target["last_ts"] = ts + count // 9979 + 1
        return [sign_envelope(self.kp, {"_": "GetSession", "sessionId": self.target["session_id"],
                                        "limit": 21 + i % 9979}, ts=ts + i // 9979)
                for i in range(count)]

    async def run(self, frames: list[bytes]) -> dict:
        from bench.load import closed_loop

        res = await closed_loop(self.sockets, frames, self.c, timeout=CELL_CAP_S)
        return {"latencies": res["latencies"], "seconds": res["seconds"], "errors": res["errors"],
                "first_error": res["first_error"]}

    async def close(self) -> None:
        for s in self.sockets:
            await s.close()


class TurnLanes:
    """MessageSession turns to the echo agent on one tree: `c` fresh sessions, each on its own
    socket subscribed to it, one turn at a time per session; a turn ends when the durable
    assistant append arrives."""

    def __init__(self, kp, target: dict, c: int, tag: str) -> None:
        self.kp, self.target, self.c, self.tag = kp, target, c, tag
        self.lanes: list = []   # (socket, session id, arrivals) per concurrent session
        self.signed = 0

    async def open(self) -> None:
        from bench.load import Rpc, is_assistant_append, is_error_event

        for _ in range(self.c):
            arrivals: asyncio.Queue = asyncio.Queue()

            def on_event(frame: bytes, q=arrivals) -> None:
                if is_assistant_append(frame):
                    q.put_nowait((time.perf_counter(), is_error_event(frame)))

            rpc = await Rpc.open(self.target["url"], on_event=on_event)
            self.lanes.append((rpc, None, arrivals))
            sid = (await rpc.call(self.kp, {"_": "CreateSession", "agentId": self.target["agent_id"]}))["sessionId"]
            await rpc.call(self.kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
            self.lanes[-1] = (rpc, sid, arrivals)

    def sign(self, count: int) -> list[list[bytes]]:
        from seed_agents.clients.raw import unique_ts
        from seed_agents.protocol.wire.envelope import sign_envelope

        first, self.signed = self.signed, self.signed + count
        return [[sign_envelope(self.kp, {"_": "MessageSession", "sessionId": sid,
                                         "content": [{"type": "text", "text": f"turn {i} says hello world"}],
                                         "clientMessageId": f"{self.tag}-{i}"}, ts=unique_ts())
                 for i in range(first + k, first + count, self.c)]
                for k, (_, sid, _) in enumerate(self.lanes)]

    async def run(self, per_lane: list[list[bytes]]) -> dict:
        from seed_agents.clients.raw import signed_request_frame

        from bench.load import is_error_response

        latencies: list[float] = []
        errors = [0]
        deadline = time.perf_counter() + CELL_CAP_S

        async def lane(rpc, arrivals, frames) -> None:
            for env in frames:
                if time.perf_counter() > deadline:
                    return
                req_id, fut = rpc.register()
                t0 = time.perf_counter()
                await rpc.ws.send(signed_request_frame(req_id, env))
                response = await asyncio.wait_for(fut, 30)
                arrived, failed = await asyncio.wait_for(arrivals.get(), 30)
                latencies.append(arrived - t0)
                errors[0] += bool(failed or is_error_response(response))

        started = time.perf_counter()
        await asyncio.gather(*(lane(rpc, q, frames) for (rpc, _, q), frames in zip(self.lanes, per_lane)))
        return {"latencies": latencies, "seconds": time.perf_counter() - started, "errors": errors[0],
                "first_error": None}

    async def close(self) -> None:
        for rpc, _, _ in self.lanes:
            await rpc.close()


async def _timed(driver, count: int, profile: bool) -> dict:
    """One timed chunk on one tree: frames signed first, then sent; the server's CPU time
    (exact, all threads) and the CpuMeter figures around it."""
    from bench.meters import CpuMeter

    frames = driver.sign(count)
    pid = driver.target["pid"]
    http_url = driver.target["url"].replace("ws://", "http://").removesuffix("/agents/ws")
    db0 = db_counters(http_url)
    threads0 = thread_counters(pid)
    cpu0, loop0 = server_cpu_ns(pid), loop_cpu_ns(pid)
    with _Window(pid, profile), CpuMeter(pid) as meter:
        res = await driver.run(frames)
    res["cpu_ns"] = server_cpu_ns(pid) - cpu0
    res["loop_ns"] = loop_cpu_ns(pid) - loop0
    res.update(_thread_deltas(pid, threads0, thread_counters(pid)))
    db1 = db_counters(http_url) if db0 is not None else None
    if db0 is not None and db1 is not None:   # (the scrape itself is no write job)
        res["commits"], res["jobs"] = db1[0] - db0[0], db1[1] - db0[1]
    res["meter"] = meter.result
    return res


def _combine(chunks: list[dict]) -> dict:
    """One tree's figures for a cell in a round, from its chunks."""
    from bench.stats import latency_figures

    latencies = [x for ch in chunks for x in ch["latencies"]]
    seconds = sum(ch["seconds"] for ch in chunks)
    lat = latency_figures(latencies)
    wall = sum(ch["meter"]["wall_s"] for ch in chunks) or 1.0
    keys = [k for k in chunks[0]["meter"] if k != "wall_s"]
    return {"per_s": lat["n"] / seconds, "p50_ms": lat["p50_ms"], "p99_ms": lat["p99_ms"],
            "cpu_us": sum(ch["cpu_ns"] for ch in chunks) / 1000 / max(1, lat["n"]),
            "loop_cpu_us": sum(ch.get("loop_ns", 0) for ch in chunks) / 1000 / max(1, lat["n"]),
            **_per_action(chunks, lat["n"]),
            "n": lat["n"], "errors": sum(ch["errors"] for ch in chunks),
            "first_error": next((ch["first_error"] for ch in chunks if ch["first_error"]), None),
            "chunk_per_s": [round(len(ch["latencies"]) / ch["seconds"], 1) for ch in chunks],
            "cpu": {k: sum(ch["meter"][k] * ch["meter"]["wall_s"] for ch in chunks) / wall for k in keys}}


def _per_action(chunks: list[dict], n: int) -> dict:
    """The writer thread's CPU, write calls and bytes, the context switches, and the commits and
    jobs per action; and the jobs a commit carried (the group commit's batch). The user and
    system CPU (all threads', and the writer's) come from clock ticks (bench.meters.thread_stat):
    good to about a tick a chunk, so a round's figure is as good as its ticks are many."""
    n = max(1, n)
    us_a_tick = TICK_S * 1e6 / n
    out = {"user_cpu_us": sum(ch["user_ticks"] for ch in chunks) * us_a_tick,
           "sys_cpu_us": sum(ch["sys_ticks"] for ch in chunks) * us_a_tick,
           "writer_user_us": sum(ch["writer_user_ticks"] for ch in chunks) * us_a_tick,
           "writer_sys_us": sum(ch["writer_sys_ticks"] for ch in chunks) * us_a_tick,
           "writer_cpu_us": sum(ch["writer_ns"] for ch in chunks) / 1000 / n,
           "writer_calls": sum(ch["writer_calls"] for ch in chunks) / n,
           "writer_kib": sum(ch["writer_bytes"] for ch in chunks) / 1024 / n,
           "writer_reads": sum(ch["writer_reads"] for ch in chunks) / n,
           "writer_disk_kib": sum(ch["writer_disk_bytes"] for ch in chunks) / 1024 / n,
           "faults": sum(ch["faults"] for ch in chunks) / n,
           "writer_faults": sum(ch["writer_faults"] for ch in chunks) / n,
           "loop_reads": sum(ch["loop_reads"] for ch in chunks) / n,
           "switches": sum(ch["switches"] for ch in chunks) / n,
           "involuntary": sum(ch["involuntary"] for ch in chunks) / n}
    if all("commits" in ch for ch in chunks):
        commits = sum(ch["commits"] for ch in chunks)
        out["commits"] = commits / n
        out["jobs_per_commit"] = sum(ch["jobs"] for ch in chunks) / max(1, commits)
    return out


async def round_load(targets: dict, order: list[str], counts: dict, chunks: int, round_no: int,
                     profile: bool = False, cells: list[str] = CELLS) -> dict:
    """One round, cell by cell. For each cell both trees get their sockets (and sessions) and a
    warm-up, then `chunks` timed chunks each, alternating A B B A A B ... from `order`, so drift
    at the scale of a chunk (a fraction of a second) falls on both. `targets` maps a tree's name
    to {url, pid, session_id, agent_id}."""
    from bench.load import keypair

    kp = keypair(LABEL)
    for t in targets.values():
        t["last_ts"] = 0
    out: dict = {name: {} for name in targets}
    for cell in cells:
        kind, conc = cell.split(" c")
        make = _GetSessions if kind == "GetSession" else TurnLanes
        drivers = {name: make(kp, targets[name], int(conc), f"r{round_no}-{name}-c{conc}") for name in order}
        try:
            for name in order:
                await drivers[name].open()
                await _timed(drivers[name], max(4 * int(conc), counts[cell] // 10), False)   # warm-up
            timed: dict = {name: [] for name in order}
            for j in range(chunks):
                for name in (order if j % 2 == 0 else order[::-1]):
                    timed[name].append(await _timed(drivers[name], counts[cell] // chunks, profile))
            for name in order:
                out[name][cell] = _combine(timed[name])
        finally:
            for d in drivers.values():
                await d.close()
    return out


# -- the run and its summary ---------------------------------------------------------------------

# Throughput and p50 latency are what the issue asks for; the server's CPU time per action (all
# its threads, from /proc) is the work each costs, which a neighbour's load moves much less.
# The user/system split (from clock ticks) sits beside the exact totals it splits.
FIGURES = ("per_s", "p50_ms", "p99_ms", "cpu_us", "user_cpu_us", "sys_cpu_us", "loop_cpu_us", "writer_cpu_us",
           "writer_user_us", "writer_sys_us", "faults", "writer_faults", "writer_calls", "writer_kib",
           "writer_reads", "writer_disk_kib", "loop_reads", "switches", "involuntary", "commits", "jobs_per_commit")


def _spread(values: list[float], digits: int = 3) -> dict:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


# Two-sided 95% quantiles of Student's t by degrees of freedom (1-30; 1.96 beyond).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def geomean_ci(ratios: list[float]) -> dict:
    """The geometric mean of per-round ratios and its 95% confidence interval (t on the logs):
    where the true after/before lies, given how much the rounds scatter."""
    logs = [math.log(r) for r in ratios if r > 0]
    if not logs:
        return {"geomean": None, "ci95": None}
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return {"geomean": round(math.exp(mean), 3), "ci95": None}
    half = (_T95[len(logs) - 2] if len(logs) - 1 <= len(_T95) else 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {"geomean": round(math.exp(mean), 3), "ci95": [round(math.exp(mean - half), 3), round(math.exp(mean + half), 3)]}


def summarize(rounds: list[dict], other: str = "after") -> dict:
    """`other` (the after tree, or `same`: the before tree's second server, the A/A) against
    the before tree."""
    measured = [c for c in CELLS if c in rounds[0]["before"]]
    cells = {}
    for cell in measured:
        for fig in FIGURES:
            if any(fig not in r[name][cell] for r in rounds for name in ("before", other)):
                continue
            b = [r["before"][cell][fig] for r in rounds]
            a = [r[other][cell][fig] for r in rounds]
            pairs = [x / y for x, y in zip(a, b) if y]
            mb, ma = statistics.median(b), statistics.median(a)
            cells[f"{cell} {fig}"] = {
                "before_median": round(mb, 3), "after_median": round(ma, 3),
                "ratio_of_medians": round(ma / mb, 3) if mb else None,
                # (no ratio in a round whose before is 0: a count that is mostly 0, as the disk reads)
                "pair_ratios": {**_spread(pairs), **geomean_ci(pairs)} if pairs else dict.fromkeys(
                    ("median", "min", "max", "geomean", "ci95")), "better": "higher" if fig == "per_s" else "lower",
                "before_runs": [round(x, 3) for x in b], "after_runs": [round(x, 3) for x in a]}
    noise = {}
    for name in ("before", other):
        phases = [r[name][cell]["cpu"] for r in rounds for cell in measured]
        noise[name] = {k: _spread([p[k] for p in phases if k in p], 2)
                       for k in ("main_busy", "server_cpu_foreign", "load_cpu_foreign", "load_busy")
                       if any(k in p for p in phases)}
    errors = {name: sum(r[name][cell]["errors"] for r in rounds for cell in measured) for name in ("before", other)}
    return {"cells": cells, "cpu_during_timed_phases": noise, "errors": errors}


TICKS = f"{TICK_S * 1000:g} ms ticks"


def table(summary: dict) -> str:
    lines = ["| cell | figure | before (median) | after (median) | after / before (medians) "
             "| per-round ratios: median [min..max] | geometric mean (95% CI) |",
             "|---|---|---|---|---|---|---|"]
    for key, c in summary["cells"].items():
        cell, fig = key.rsplit(" ", 1)
        unit, name, digits = {"per_s": ("/s", "turns/s" if cell.startswith("turns") else "actions/s", 0),
                              "p50_ms": (" ms", "p50", 2), "p99_ms": (" ms", "p99", 2), "cpu_us": (" us", "server CPU per action", 0),
                              "user_cpu_us": (" us", f"its user time, all threads ({TICKS})", 0),
                              "sys_cpu_us": (" us", f"its system time, all threads ({TICKS})", 0),
                              "loop_cpu_us": (" us", "of which the event loop's thread", 0),
                              "writer_cpu_us": (" us", "of which the database writer's thread", 0),
                              "writer_user_us": (" us", f"the writer's user time ({TICKS})", 0),
                              "writer_sys_us": (" us", f"the writer's system time ({TICKS})", 0),
                              "faults": ("", "minor page faults per action (all threads)", 2),
                              "writer_faults": ("", "of which the writer's", 2),
                              "writer_calls": ("", "the writer's write calls per action", 2),
                              "writer_kib": (" KiB", "the writer's bytes written per action", 2),
                              "writer_reads": ("", "the writer's read calls per action", 2),
                              "writer_disk_kib": (" KiB", "the writer's bytes read from the disk per action", 2),
                              "loop_reads": ("", "the event loop's read calls per action", 2),
                              "switches": ("", "context switches per action (all threads)", 2),
                              "involuntary": ("", "of which involuntary", 2),
                              "commits": ("", "commits per action", 3),
                              "jobs_per_commit": ("", "write jobs per commit", 2)}[fig]
        if not c["before_median"] and not c["after_median"]:
            continue   # (a count the cell never moves: a GetSession writes nothing)
        p = c["pair_ratios"]
        ci = f"{p['geomean']:.3f} ({p['ci95'][0]:.3f}..{p['ci95'][1]:.3f})" if p["ci95"] else "-"
        spread = f"{p['median']:.3f} [{p['min']:.3f}..{p['max']:.3f}]" if p["median"] is not None else "-"
        lines.append(f"| {cell} | {name} | {c['before_median']:,.{digits}f}{unit} | {c['after_median']:,.{digits}f}{unit} "
                     f"| {c['ratio_of_medians'] or 0:.3f} | {spread} | {ci} |")
    return "\n".join(lines)


def resolve(ref: str, into: Path) -> tuple[Path, str]:
    """A tree for `ref` (`.` is this working tree as it is) and the commit it names."""
    if ref == ".":
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "server", "protocol", "schema"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return ROOT, f"working tree at {head}" + (" (uncommitted server changes)" if dirty else "")
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    into.mkdir(parents=True)
    return extract(ref, into), commit


def main(before_ref: str, after_ref: str, quick: bool, rounds: int | None, profile_dir: str | None,
         quiet_s: float = 0.0, cells: list[str] = CELLS, aa: bool = False, fresh_servers: bool = False,
         steady_malloc: bool = False) -> dict:
    """The run (the module's docstring). `fresh_servers`: every round starts a new server
    process for each tree on a fresh copy of that tree's seeded data dir, stopped and deleted
    after the round, instead of one server per tree for the whole run. `steady_malloc`: the
    servers run with STEADY_MALLOC in their environment."""
    from bench.load import keypair
    from bench.run import wait_quiet

    n_rounds, counts = sizes(quick)
    n_rounds = rounds or n_rounds
    started = time.monotonic()
    out: dict = {"machine": machine_info(), "loadavg_start": os.getloadavg(), "quick": quick,
                 "rounds": n_rounds, "chunks": CHUNKS, "counts": counts, "cells": list(cells),
                 "fresh_servers": fresh_servers, "steady_malloc": steady_malloc}
    extra_env = STEADY_MALLOC if steady_malloc else None
    account = keypair(LABEL).account_id
    tmp = Path(tempfile.mkdtemp(prefix="bench-sqlite-ab-"))
    servers: dict[str, TreeServer] = {}
    try:
        trees = {}
        for name, ref in (("before", before_ref), ("after", after_ref)):
            tree, described = resolve(ref, tmp / f"tree-{name}")
            trees[name] = tree
            out[f"{name}_tree"] = {"ref": ref, "commit": described}
        if aa:   # the A/A beside: a second server of the before tree, in the same rounds
            trees["same"] = trees["before"]
            out["same_tree"] = out["before_tree"]
        names = list(trees)
        targets, templates = {}, {}
        for name, tree in trees.items():
            data = tmp / f"data-{name}"
            targets[name] = seed(tree, data, account)
            templates[name] = data   # with fresh_servers, each round's servers start on copies of it
            if not fresh_servers:
                servers[name] = TreeServer(name, tree, data, profile_dir, extra_env).start()
        out["event_bytes"] = {n: t.pop("event_bytes") for n, t in targets.items()}
        print(f"before: {out['before_tree']['commit']}, after: {out['after_tree']['commit']}; "
              f"{n_rounds} rounds{', fresh servers each round' if fresh_servers else ''}"
              f"{', steady malloc' if steady_malloc else ''}", flush=True)
        out["rounds_data"] = []
        for r in range(n_rounds):
            order = (["before", "after"] if r % 2 == 0 else ["after", "before"]) if not aa else \
                names[r % 3:] + names[:r % 3]   # each tree first, second and third in turn
            if fresh_servers:
                servers = start_fresh({n: trees[n] for n in order}, templates, tmp, r, profile_dir, extra_env)
            for name, srv in servers.items():
                targets[name].update(url=srv.url, pid=srv.proc.pid)
            try:
                busy = wait_quiet(quiet_s) if quiet_s else None   # both servers idle: others' load
                res = run_load("bench.sqlite_ab:round_load",
                               {"targets": targets, "order": order, "counts": counts, "chunks": CHUNKS,
                                "round_no": r, "profile": bool(profile_dir), "cells": list(cells)},
                               timeout=len(CELLS) * len(names) * (CHUNKS + 1) * CELL_CAP_S + 120)
                for name, srv in servers.items():
                    if not srv.alive():
                        raise RuntimeError(f"the {name} server died: {srv.log_tail()}")
            finally:
                if fresh_servers:
                    stop_fresh(servers)
            res["order"], res["cpus_busy_before_round"] = order, busy
            res["servers"] = {n: {"pid": srv.proc.pid, "data_dir": str(srv.data_dir)} for n, srv in servers.items()}
            out["rounds_data"].append(res)
            print(f"round {r + 1}/{n_rounds} ({' then '.join(order)}): " + "; ".join(
                f"{cell} " + "/".join(f"{res[n][cell]['per_s']:.0f}" for n in names)
                for cell in cells) + f" per s ({'/'.join(names)})", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    out["loadavg_end"] = os.getloadavg()
    out["seconds"] = round(time.monotonic() - started, 1)
    out["summary"] = summarize(out["rounds_data"])
    if aa:
        out["summary_aa"] = summarize(out["rounds_data"], "same")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=DEFAULT_BEFORE, help=f"git ref of the before tree (default {DEFAULT_BEFORE})")
    parser.add_argument("--after", default=".", help="git ref of the after tree, or . for this working tree (default)")
    parser.add_argument("--quick", action="store_true", help="5 rounds of smaller phases (default: 10 rounds)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (each tree once per round; at least 1)")
    parser.add_argument("--profile", metavar="DIR", default=None,
                        help="run both servers under pyinstrument, profiles in DIR (ratios then mean nothing)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="before each round wait (at most SECONDS) until both CPUs are less than 20%% busy")
    parser.add_argument("--cells", nargs="+", choices=CELLS, default=list(CELLS), metavar="CELL",
                        help=f"measure only these cells (quoted: {', '.join(repr(c) for c in CELLS)})")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the whole result to FILE")
    parser.add_argument("--aa", action="store_true",
                        help="an A/A beside: a second server of the before tree in the same rounds, its ratios shown too")
    parser.add_argument("--fresh-servers", action="store_true",
                        help="a new server process per tree and round, on a fresh copy of its seeded data dir "
                             "(per-process luck spread over the rounds; default: one server per tree for the run)")
    parser.add_argument("--steady-malloc", action="store_true",
                        help="the servers' glibc malloc with fixed mmap and trim thresholds (STEADY_MALLOC): "
                             "no server process left faulting its freed memory in again at every turn")
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = main(args.before, args.after, args.quick, args.rounds, args.profile, args.wait_quiet,
                  [c for c in CELLS if c in args.cells], args.aa, args.fresh_servers, args.steady_malloc)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print()
    print(table(result["summary"]))
    if "summary_aa" in result:
        print("\nA/A (the before tree's second server against the first, in the same rounds):\n")
        print(table(result["summary_aa"]))
    print(f"\nload average at start / end: {result['loadavg_start'][0]:.1f} / {result['loadavg_end'][0]:.1f}")
    print()
    print(json.dumps({k: v for k, v in result.items() if k != "rounds_data"}, indent=2))
