"""Servers and fakes as real child processes, for tests that SIGKILL them."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.waiting import until_sync

ROOT = Path(__file__).resolve().parents[1]
# One client for every health probe: a new one per probe builds an SSL context each time (the CA
# bundle parsed, 20 ms of CPU), and a start polls some ten times. No keep-alive, so a probe never
# meets a connection to a server killed since.
_PROBE = httpx.Client(timeout=0.5, limits=httpx.Limits(max_keepalive_connections=0))
# And one for the fakes' scripts: `httpx.post` builds a client, and so an SSL context, per call
# (130 ms on a loaded machine, spent in the test's event loop while it measures).
_SCRIPTS = httpx.Client(timeout=5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    host = "127.0.0.1"

    def __init__(self, data_dir: Path, port: int | None = None, extra: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        # The sandbox's self-check costs CPU at every start: only where a test asks for it.
        self.extra = [*(extra or []), *([] if "--code-exec" in (extra or []) else ["--code-exec", "off"])]
        self.proc: subprocess.Popen | None = None
        self.log = self.data_dir / "server.log"

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agents/ws"

    def start(self, timeout: float = 20.0) -> "ServerProcess":
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seed_agents.server.main", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(self.data_dir), *self.extra],
            cwd=str(ROOT), env=env, stdout=logf, stderr=logf)

        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                return _PROBE.get(f"http://127.0.0.1:{self.port}/api/health").status_code == 200
            except httpx.HTTPError:
                return False

        try:
            until_sync(healthy, timeout, step=0.05)
        except TimeoutError:
            raise RuntimeError("server did not start: " + self.log.read_text()[-2000:]) from None
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)


class FakeProcess:
    """`python -m tests.fakes.openai_server` in a child process."""

    def __init__(self, mode: str = "plain") -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", "--port", "0",
                                      "--mode", mode], cwd=str(ROOT), stdout=subprocess.PIPE,
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))
        line = self.proc.stdout.readline().decode()
        assert line.startswith("FAKE_OPENAI_LISTENING"), line
        self.base_url = line.split()[1]

    def script(self, **fields) -> None:
        _SCRIPTS.post(self.base_url.rsplit("/v1", 1)[0] + "/_fake/script", json=fields).raise_for_status()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
