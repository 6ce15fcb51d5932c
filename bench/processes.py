"""The processes of a benchmark: the real server (`Server`), the fake model provider
(`FakeProvider`) and load processes (`run_load`), each pinned to its CPU (bench.conditions).

`run_load("bench.rpc:load", params)` starts `python -m bench.processes child bench.rpc:load` on
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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.conditions import LOAD_CPU, ROOT, SERVER_CPU, pin_prefix, pinning, raise_nofile
from bench.meters import rss_kb

PY = sys.executable

# The benchmarked server runs with its per-account limits raised, so the limits are not what
# is measured (CONTRACT section 6 defaults are 100 actions/s, 64 sockets, 256 subs, 64 inflight).
RAISED_LIMITS = ["--rate-limit", "1000000", "--rate-burst", "1000000",
                 "--max-sockets-per-account", "100000", "--max-subscriptions", "100000",
                 "--max-inflight", "1024"]
# Every load socket comes from 127.0.0.1, and idle ones may act late. Apart from RAISED_LIMITS,
# which bench/sqlite_ab.py also gives to older trees that know none of these flags.
RAISED_BOUNDS = ["--max-connections-per-address", "100000", "--first-action-timeout", "3600"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



class Server:
    """The real server (`python -m seed_agents.server.main`) pinned to the server CPU, on a free loopback
    port, with a fresh data dir unless one is given (e.g. one prepared by a setup step)."""

    def __init__(self, label: str, *, data_dir: str | None = None, extra: list[str] | None = None,
                 limits: bool = True, log_level: str = "WARNING") -> None:
        self.label = label
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix=f"bench-{label}-")
        self.port = free_port()
        self.extra = (RAISED_LIMITS + RAISED_BOUNDS if limits else []) + list(extra or [])
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
        return [PY, "-m", "seed_agents.server.main", *args]

    def start(self, timeout: float = 30.0) -> "Server":
        # BENCH_SERVER_TREE: run another source tree's server (bench/cluster.py --before).
        root = os.environ.get("BENCH_SERVER_TREE") or str(ROOT)
        env = dict(os.environ, PYTHONPATH=root, SEED_AGENTS_HM_SERVER_URL="")   # benches stay on 127.0.0.1
        env.setdefault("SEED_AGENTS_SESSION_TITLE_GENERATION", "false")   # no titling calls among the timed ones
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(self.log_path, "ab")
        # taskset execs the command, so the child's pid is the server's own pid (for /proc).
        self.proc = subprocess.Popen([*pin_prefix(SERVER_CPU), *self.command()], cwd=root,
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
        proc = subprocess.Popen([*pin_prefix(cpu), PY, "-m", "bench.processes", "child", target],
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


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "child":
        _child(argv[1])
        return 0
    print("usage: python -m bench.processes child module:function  (params as JSON on stdin)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
