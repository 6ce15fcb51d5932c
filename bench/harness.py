"""Shared bench machinery: pinned server and load processes, RSS sampling, statistics, and the
raw v2 load client.

Conditions are the same for every benchmark (see docs/performance.md):
- the server runs as its own process pinned to CPU 0 (`taskset -c 0`), on a free loopback port,
  with a fresh data dir (fresh database) and the per-account limits raised (`RAISED_LIMITS`);
- the load runs in a separate process pinned to CPU 1 (`run_load`), as does any fake provider;
- when taskset is missing (or there are fewer than two CPUs) everything runs unpinned and the
  results say so (`pinning()`).

`run_load("bench.rpc:load", params)` starts `python -m bench.harness child bench.rpc:load` on
the load CPU, hands it `params` as JSON on stdin, and returns the dict the coroutine returned
(printed by the child as one `BENCH_RESULT <json>` line). The child is killed past its timeout,
so no benchmark can hang the run.

Profiling: with `BENCH_PROFILE=<dir>` in the environment, every server a benchmark starts runs
under pyinstrument (bench.profiled_server), sampling only during the load's timed phases
(`profile_window`, optionally narrowed with BENCH_PROFILE_FOCUS), and writes
`<dir>/<label>.{pyisession,txt,top.txt}` when it stops. This hook is bench code only; the
server itself is untouched.
"""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SERVER_CPU, LOAD_CPU = 0, 1
V2 = "seed-agents.v2"

# The benchmarked server runs with its per-account limits raised, so the limits are not what
# is measured (CONTRACT section 6 defaults are 100 actions/s, 64 sockets, 256 subs, 64 inflight).
RAISED_LIMITS = ["--rate-limit", "1000000", "--rate-burst", "1000000",
                 "--max-sockets-per-account", "100000", "--max-subscriptions", "100000",
                 "--max-inflight", "1024"]

_TASKSET = shutil.which("taskset")


# -- conditions --------------------------------------------------------------------------------
def pinning() -> dict:
    cpus = os.cpu_count() or 1
    try:
        usable = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = list(range(cpus))
    inherited = os.environ.get("BENCH_PINNED")   # set for load processes (pinned themselves)
    if inherited is not None:
        pinned = inherited == "1"
    else:
        pinned = bool(_TASKSET) and SERVER_CPU in usable and LOAD_CPU in usable
    if pinned:
        note = f"server on CPU {SERVER_CPU}, load client and fake provider on CPU {LOAD_CPU} (taskset -c)"
    elif not _TASKSET:
        note = "UNPINNED: taskset is missing; server and load share whatever CPUs the OS picks"
    else:
        note = f"UNPINNED: CPUs {SERVER_CPU} and {LOAD_CPU} are not both available (have {usable})"
    return {"pinned": pinned, "taskset": _TASKSET, "server_cpu": SERVER_CPU if pinned else None,
            "load_cpu": LOAD_CPU if pinned else None, "usable_cpus": usable, "note": note}


def pin_prefix(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if pinning()["pinned"] else []


def machine_info() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import platform

    return {"nproc": os.cpu_count(), "cpu_model": model, "python": sys.version.split()[0],
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pinning": pinning(),
            "data_dir_root": tempfile.gettempdir(), "nofile_limit": resource.getrlimit(resource.RLIMIT_NOFILE),
            "git": git_state()}


def git_state() -> dict:
    """The commit measured and any uncommitted changes to the server's code (others may be
    editing the same checkout while the bench runs)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = [line[3:] for line in git("status", "--porcelain", "--", "server", "protocol", "schema").splitlines()]
    return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s"),
            "uncommitted_server_changes": dirty}


def raise_nofile(want: int = 65536) -> int:
    """Raise the open-files soft limit as far as the hard limit allows; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- statistics --------------------------------------------------------------------------------
def percentile(values, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 100]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def summary(values, digits: int = 3) -> dict:
    """{median, min, max, runs} of one figure measured once per run."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "runs": []}
    return {"median": round(statistics.median(vals), digits), "min": round(min(vals), digits),
            "max": round(max(vals), digits), "runs": [round(v, digits) for v in vals]}


def latency_figures(latencies_s: list[float]) -> dict:
    ms = [x * 1000.0 for x in latencies_s]
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
            "max_ms": max(ms) if ms else float("nan")}


# -- memory --------------------------------------------------------------------------------------
def rss_kb(pid: int) -> int:
    """VmRSS of a process in kB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def thread_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of the main thread, of all other threads) of a process, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    main = other = 0.0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        secs = (int(fields[11]) + int(fields[12])) / tick   # utime + stime
        if int(tid) == pid:
            main += secs
        else:
            other += secs
    return main, other


def cpu_busy_seconds() -> dict[int, float]:
    """Busy (non-idle, non-iowait) CPU seconds per CPU since boot, from /proc/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("cpu") and line[3].isdigit():
                    name, *vals = line.split()
                    v = [int(x) for x in vals]
                    out[int(name[3:])] = (sum(v[:8]) - v[3] - v[4]) / tick
    except OSError:
        pass
    return out


class CpuMeter:
    """CPU use over a phase: the server's event-loop (main) thread, its other threads (the
    database writer, SQLite work), this (load) process, and what everything else on the
    machine took from the server's CPU and the load's CPU (other users' jobs on a shared box):
    `with CpuMeter(pid) as m: ...; m.result`. A main-thread share near 1.0 means the server's
    loop set the pace; a large `server_cpu_foreign` means a neighbour took the server's core."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.result: dict = {}

    def __enter__(self) -> "CpuMeter":
        self._t0 = time.perf_counter()
        self._p0 = time.process_time()
        self._s0 = cpu_busy_seconds()
        self._c0 = thread_cpu(self.pid) if self.pid else (0.0, 0.0)
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        load = (time.process_time() - self._p0) / wall
        stat = cpu_busy_seconds()
        busy = {c: (stat[c] - self._s0.get(c, 0.0)) / wall for c in stat}
        main, other = thread_cpu(self.pid) if self.pid else (0.0, 0.0)
        main = (main - self._c0[0]) / wall
        other = (other - self._c0[1]) / wall
        self.result = {"wall_s": round(wall, 3), "main_busy": main, "other_threads_busy": other,
                       "load_busy": load}
        if pinning()["pinned"]:
            self.result["server_cpu_foreign"] = max(0.0, busy.get(SERVER_CPU, 0.0) - main - other)
            self.result["load_cpu_foreign"] = max(0.0, busy.get(LOAD_CPU, 0.0) - load)


CPU_KEYS = ("main_busy", "other_threads_busy", "load_busy", "server_cpu_foreign", "load_cpu_foreign")


def cpu_summary(results: list[dict]) -> dict:
    """Median/min/max of each CpuMeter figure over runs (fractions of one CPU)."""
    return {k: summary([r[k] for r in results if k in r], 2) for k in CPU_KEYS
            if any(k in r for r in results)}


class RssSampler:
    """Samples a process's RSS every `interval` seconds on a thread (so a busy event loop in the
    load process does not delay the samples)."""

    def __init__(self, pid: int, interval: float = 0.01) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "RssSampler":
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), rss_kb(self.pid)))
            self._stop.wait(self.interval)

    def stop(self) -> "RssSampler":
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.samples.append((time.perf_counter(), rss_kb(self.pid)))
        return self

    @property
    def peak_kb(self) -> int:
        return max((kb for _, kb in self.samples), default=0)


# -- the server process --------------------------------------------------------------------------
class Server:
    """The real server (`python -m server.main`) pinned to the server CPU, on a free loopback
    port, with a fresh data dir unless one is given (e.g. one prepared by a setup step)."""

    def __init__(self, label: str, *, data_dir: str | None = None, extra: list[str] | None = None,
                 limits: bool = True, log_level: str = "WARNING") -> None:
        self.label = label
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix=f"bench-{label}-")
        self.port = free_port()
        self.extra = (RAISED_LIMITS if limits else []) + list(extra or [])
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.data_dir, "server.log")
        self.profile_path: str | None = None
        self.start_rss_kb = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agents/ws"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--data-dir", self.data_dir,
                "--log-level", self.log_level, *self.extra]
        profile_dir = os.environ.get("BENCH_PROFILE")
        if profile_dir:
            os.makedirs(profile_dir, exist_ok=True)
            self.profile_path = os.path.join(os.path.abspath(profile_dir), self.label)
            return [PY, "-m", "bench.profiled_server", self.profile_path, "--window", "--", *args]
        return [PY, "-m", "server.main", *args]

    def start(self, timeout: float = 30.0) -> "Server":
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(self.log_path, "ab")
        # taskset execs the command, so the child's pid is the server's own pid (for /proc).
        self.proc = subprocess.Popen([*pin_prefix(SERVER_CPU), *self.command()], cwd=str(ROOT),
                                     env=env, stdout=log, stderr=log, preexec_fn=_raise_nofile_child)
        log.close()
        deadline = time.monotonic() + timeout
        import urllib.request

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.http}/api/health", timeout=0.5) as r:
                    if r.status == 200:
                        time.sleep(0.2)  # let start-up garbage settle before the first RSS reading
                        self.start_rss_kb = rss_kb(self.pid)
                        if self.profile_path:
                            _profiled.append(self.pid)
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("server did not start: " + self.log_tail())

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def metrics(self) -> str:
        import urllib.request

        with urllib.request.urlopen(f"{self.http}/metrics", timeout=5) as r:
            return r.read().decode()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is not None and self.proc.pid in _profiled:
            _profiled.remove(self.proc.pid)
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def cleanup(self) -> None:
        self.stop()
        if self.own_dir and not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


_profiled: list[int] = []   # pids of running servers started under the profiler


class profile_window:
    """Around a timed phase in a load process: `with profile_window("GetSession_c64"): ...`.
    When the server runs under the profiler (BENCH_PROFILE), its sampling is switched on for
    the phase (SIGUSR1) and off after it (SIGUSR2); BENCH_PROFILE_FOCUS=<substring> limits this
    to the phases whose tag contains it. Without profiling it does nothing."""

    def __init__(self, tag: str) -> None:
        pid = os.environ.get("BENCH_PROFILE_PID")
        focus = os.environ.get("BENCH_PROFILE_FOCUS", "")
        self.pid = int(pid) if pid and focus in tag else None

    def __enter__(self) -> "profile_window":
        if self.pid:
            os.kill(self.pid, signal.SIGUSR1)
        return self

    def __exit__(self, *exc) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGUSR2)


def _raise_nofile_child() -> None:
    try:
        raise_nofile()
    except (ValueError, OSError):
        pass


class FakeProvider:
    """tests/fakes/openai_server.py as a process pinned to the load CPU, answering at once."""

    def __init__(self, mode: str = "plain", text: str = "Hello from the fake") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [*pin_prefix(LOAD_CPU), PY, "-m", "tests.fakes.openai_server", "--port", "0",
             "--mode", mode, "--text", text],
            cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("FAKE_OPENAI_LISTENING"):
            self.close()
            raise RuntimeError(f"fake provider did not start: {line!r}")
        self.base_url = line.split()[1]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "FakeProvider":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- the load process ----------------------------------------------------------------------------
class LoadError(RuntimeError):
    pass


def run_load(target: str, params: dict, *, cpu: int = LOAD_CPU, timeout: float = 300.0,
             log_dir: str | None = None) -> dict:
    """Run `target` ("module:function", a coroutine function or a plain one taking **params) in
    a fresh process pinned to `cpu`; return what it returned. Bounded by `timeout` seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("BENCH_PROFILE", None)  # the load process is never profiled
    env.pop("BENCH_PROFILE_PID", None)
    env["BENCH_PINNED"] = "1" if pinning()["pinned"] else "0"
    if _profiled:
        env["BENCH_PROFILE_PID"] = str(_profiled[-1])
    log_dir = log_dir or tempfile.gettempdir()
    log_path = os.path.join(log_dir, f"bench-load-{target.replace(':', '.')}-{os.getpid()}.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*pin_prefix(cpu), PY, "-m", "bench.harness", "child", target],
                                cwd=str(ROOT), env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log)
        try:
            out, _ = proc.communicate(json.dumps(params).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise LoadError(f"{target} did not finish within {timeout:.0f} s (log: {log_path})")
    for line in reversed(out.decode(errors="replace").splitlines()):
        if line.startswith("BENCH_RESULT "):
            if proc.returncode == 0 and not os.environ.get("BENCH_KEEP"):
                os.unlink(log_path)   # kept only when something went wrong (or BENCH_KEEP)
            return json.loads(line[len("BENCH_RESULT "):])
    tail = Path(log_path).read_text(errors="replace")[-3000:]
    raise LoadError(f"{target} exited with {proc.returncode} and no result:\n{tail}")


def _child(target: str) -> None:
    raise_nofile()
    params = json.loads(sys.stdin.read() or "{}")
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    result = func(**params)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    sys.stdout.write("BENCH_RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


# -- raw v2 frames (load side) ------------------------------------------------------------------
def cbor_uint(n: int) -> bytes:
    if n < 24:
        return bytes((n,))
    if n < 0x100:
        return bytes((24, n))
    if n < 0x10000:
        return b"\x19" + n.to_bytes(2, "big")
    if n < 0x100000000:
        return b"\x1a" + n.to_bytes(4, "big")
    return b"\x1b" + n.to_bytes(8, "big")


_REQ_HEAD = b"\xa2\x62id"
_ENVELOPE_KEY = b"\x68envelope"
_RESPONSE_KEY = b"\x68response"
_ERROR_HEAD = b"\x61_\x65Error"


def request_frame(req_id: int, envelope_bytes: bytes) -> bytes:
    """Canonical {id, envelope} around an already signed envelope (DAG-CBOR bytes)."""
    return b"".join((_REQ_HEAD, cbor_uint(req_id), _ENVELOPE_KEY, envelope_bytes))


def response_id(frame: bytes) -> tuple[int, bool] | None:
    """(id, is_error) of a v2 response frame, without decoding the rest; None for an event."""
    if not frame.startswith(_REQ_HEAD):
        return None
    head = frame[4]
    info = head & 0x1F
    if info < 24:
        req_id, pos = info, 5
    else:
        width = {24: 1, 25: 2, 26: 4, 27: 8}[info]
        req_id, pos = int.from_bytes(frame[5:5 + width], "big"), 5 + width
    if frame[pos:pos + 9] != _RESPONSE_KEY:
        return None
    return req_id, frame[pos + 10:pos + 10 + len(_ERROR_HEAD)] == _ERROR_HEAD


def decode(frame: bytes):
    from protocol import dagcbor

    return dagcbor.decode(frame, max_size=len(frame) + 1, max_depth=256)


_APPEND = b"\x61_\x66append"
_ASSISTANT = b"\x69assistant"
_ERROR_EVENT = b"\x64type\x65error"


def is_append(frame: bytes) -> bool:
    return frame.startswith(_APPEND, 1)


def is_assistant_append(frame: bytes) -> bool:
    """A durable assistant reply (or a durable error event) for a session."""
    return frame.startswith(_APPEND, 1) and (_ASSISTANT in frame or _ERROR_EVENT in frame)


def keypair(label: str):
    import hashlib

    from protocol.keys import Keypair

    return Keypair.from_seed(hashlib.sha256(f"bench:{label}".encode()).digest())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_last_ts = [0]


def unique_ts() -> int:
    """A ts never handed out before in this process (Ed25519 is deterministic: two identical
    actions signed in one millisecond would be byte-identical, and the second a replay)."""
    ts = max(now_ms(), _last_ts[0] + 1)
    _last_ts[0] = ts
    return ts


async def connect(url: str, **kw):
    """A raw v2 socket: no compression, no size limit, no client pings unless asked."""
    from websockets.asyncio.client import connect as ws_connect

    options = {"subprotocols": [V2], "max_size": None, "compression": None,
               "ping_interval": None, "open_timeout": 30, "close_timeout": 2, "proxy": None}
    options.update(kw)
    ws = await ws_connect(url, **options)
    assert ws.subprotocol == V2, ws.subprotocol
    return ws


_SO_TIMESTAMPNS = 35   # Linux: the kernel stamps each received segment (CLOCK_REALTIME, ns)


class LiteSocket:
    """A minimal v2 WebSocket client for fan-out, where one load process must watch thousands
    of sockets: a raw non-blocking socket read with recvmsg from an event-loop reader callback,
    server frames (never masked) parsed in place, each binary message handed to
    `on_frame(payload, t_user, t_kernel)`; pings answered; binary frames sent masked.

    `t_kernel` is the kernel's receive timestamp of the data (SO_TIMESTAMPNS, on time.time()'s
    clock): on loopback the segment lands in the socket while the *server* sends it, so this is
    the server's delivery time whatever the load process is doing; `t_user` (perf_counter) is
    when this process got to read it. A websockets client costs ~30-50 us of Python per frame;
    this costs a few, plus the recv syscall."""

    def __init__(self, sock, on_frame) -> None:
        self.sock = sock
        self.on_frame = on_frame
        self.buf = b""
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.kernel_stamps = False

    @classmethod
    async def connect(cls, url: str, on_frame) -> "LiteSocket":
        import base64
        import socket as socket_mod
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        sock = socket_mod.socket(socket_mod.AF_INET, socket_mod.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket_mod.IPPROTO_TCP, socket_mod.TCP_NODELAY, 1)
        await loop.sock_connect(sock, (parts.hostname, parts.port))
        key = base64.b64encode(os.urandom(16)).decode()
        await loop.sock_sendall(sock, (
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {V2}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 4096), 30)
            if not chunk:
                raise ConnectionError("closed during the WebSocket handshake")
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        text = head.decode("latin-1")
        if not text.startswith("HTTP/1.1 101") or V2 not in text:
            sock.close()
            raise ConnectionError(text.splitlines()[0])
        self = cls(sock, on_frame)
        try:
            sock.setsockopt(socket_mod.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self.kernel_stamps = True
        except OSError:
            pass
        if rest:
            self._feed(rest, time.perf_counter(), time.time())
        loop.add_reader(sock.fileno(), self._readable)
        return self

    def _readable(self) -> None:
        import socket as socket_mod

        try:
            data, anc, _flags, _addr = self.sock.recvmsg(1 << 18, socket_mod.CMSG_SPACE(16))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        t_user = time.perf_counter()
        if not data:
            self.close()
            return
        t_kernel = None
        for level, kind, payload in anc:
            if level == socket_mod.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                t_kernel = int.from_bytes(payload[:8], "little") + int.from_bytes(payload[8:16], "little") / 1e9
        self._feed(data, t_user, t_kernel)

    def _feed(self, data: bytes, t_user: float, t_kernel: float | None) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        while n - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            size, hdr = b1 & 0x7F, 2
            if size == 126:
                if n - pos < 4:
                    break
                size, hdr = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif size == 127:
                if n - pos < 10:
                    break
                size, hdr = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            if n - pos < hdr + size:
                break
            payload = buf[pos + hdr:pos + hdr + size]
            pos += hdr + size
            opcode = b0 & 0x0F
            if opcode == 2:
                self.on_frame(payload, t_user, t_kernel)
            elif opcode == 9:
                self._send(0xA, payload)
            elif opcode == 8:
                self.close()
                return
        self.buf = buf[pos:]

    def _send(self, opcode: int, payload: bytes) -> None:
        from websockets.utils import apply_mask

        n = len(payload)
        if n < 126:
            head = bytes((0x80 | opcode, 0x80 | n))
        elif n < 65536:
            head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        if not self.closed:
            self.sock.sendall(head + mask + apply_mask(payload, mask))  # small frames only

    def send(self, payload: bytes) -> None:
        self._send(0x2, payload)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._send(0x8, (1000).to_bytes(2, "big"))
        except OSError:
            pass
        self.closed = True
        try:
            self.loop.remove_reader(self.sock.fileno())
        except (ValueError, OSError):
            pass
        self.sock.close()


class Rpc:
    """A raw v2 socket that matches responses by id; events go to `on_event` (or are counted)."""

    def __init__(self, ws, on_event=None) -> None:
        self.ws = ws
        self.next_id = 1
        self.pending: dict[int, asyncio.Future] = {}
        self.on_event = on_event
        self.events = 0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str, on_event=None, **kw) -> "Rpc":
        return cls(await connect(url, **kw), on_event)

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                rid = response_id(frame)
                if rid is None:
                    self.events += 1
                    if self.on_event is not None:
                        self.on_event(frame)
                    continue
                fut = self.pending.pop(rid[0], None)
                if fut is not None and not fut.done():
                    fut.set_result(frame)
        except Exception as exc:  # noqa: BLE001 - the socket closed: fail what waits
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"socket closed: {exc!r}"))

    def register(self) -> tuple[int, asyncio.Future]:
        """A fresh request id and the future its response will resolve."""
        req_id = self.next_id
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[req_id] = fut
        return req_id, fut

    async def request(self, envelope_bytes: bytes, timeout: float = 30.0) -> bytes:
        req_id, fut = self.register()
        await self.ws.send(request_frame(req_id, envelope_bytes))
        return await asyncio.wait_for(fut, timeout)

    async def call(self, kp, action: dict, timeout: float = 30.0, **kw) -> dict:
        """Sign now and send; returns the decoded response (raises on an Error)."""
        from protocol.envelope import sign_envelope

        kw.setdefault("ts", unique_ts())
        frame = await self.request(sign_envelope(kp, action, **kw), timeout)
        response = decode(frame)["response"]
        if response.get("_") == "Error":
            raise LoadError(f"{action['_']}: {response.get('status')} {response.get('message')}")
        return response

    async def close(self) -> None:
        self.reader.cancel()
        try:
            await asyncio.wait_for(self.ws.close(), 5)
        except Exception:  # noqa: BLE001
            pass


def presign(kp, actions: list[dict], *, base_ts: int | None = None) -> list[bytes]:
    """Signed envelopes, each with a distinct ts (base_ts, base_ts - 1, ...), so no two are
    byte-identical (the server refuses a repeated write as a replay, 409). Keep len(actions)
    well under the 30 000 ms clock window, and use them within ~20 s."""
    from protocol.envelope import sign_envelope

    base = base_ts if base_ts is not None else now_ms()
    return [sign_envelope(kp, a, ts=base - i) for i, a in enumerate(actions)]


async def closed_loop(sockets: list[Rpc], frames: list[bytes], concurrency: int,
                      timeout: float = 60.0) -> dict:
    """Send every frame, keeping `concurrency` requests outstanding spread over the sockets;
    returns {seconds, latencies (s), errors, first_error}."""
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None
    it = iter(frames)
    deadline = time.perf_counter() + timeout

    async def worker(sock: Rpc) -> None:
        nonlocal errors, first_error
        for env in it:
            if time.perf_counter() > deadline:
                return
            t0 = time.perf_counter()
            frame = await sock.request(env, timeout)
            latencies.append(time.perf_counter() - t0)
            rid = response_id(frame)
            if rid is None or rid[1]:
                errors += 1
                if first_error is None:
                    first_error = repr(decode(frame).get("response"))[:300]

    started = time.perf_counter()
    await asyncio.gather(*(worker(sockets[i % len(sockets)]) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "latencies": latencies, "errors": errors, "first_error": first_error}


def cpu_seconds() -> float:
    return time.process_time()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "child":
        _child(argv[1])
        return 0
    print("usage: python -m bench.harness child module:function  (params as JSON on stdin)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
