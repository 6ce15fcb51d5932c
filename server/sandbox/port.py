"""What a code sandbox backend does, said once (`Sandbox`), and the values that cross the port.

A backend runs one program over a workspace of files and hands back its output and the files
that changed. It is chosen at start and self-checked there (`available`), so health and the
tool contract say only what really runs.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

RUNTIMES = ("ts", "python", "shell")   # the reference's order (code-exec.ts CODE_EXEC_RUNTIMES)


class SandboxError(Exception):
    """The sandbox could not run the program at all (not the program failing): one sentence."""


@dataclass(frozen=True)
class Limits:
    """Per run. CPU time per process is the run's own timeout (RLIMIT_CPU)."""

    memory_bytes: int = 512 << 20      # address space per process (RLIMIT_AS; node: its heap)
    processes: int = 64                # processes and threads of the sandbox's user (RLIMIT_NPROC)
    workspace_bytes: int = 256 << 20   # the working folder (a tmpfs of this size)
    tmp_bytes: int = 64 << 20          # /tmp (a tmpfs of this size)
    output_bytes: int = 64 * 1024      # stdout and stderr, each (the reference's 64 KiB)
    max_files: int = 10_000            # files in the workspace handed back


@dataclass(frozen=True)
class Job:
    runtime: str                       # one of RUNTIMES
    code: str                          # the program's text
    timeout_s: float
    files: dict[str, bytes]            # the workspace, by relative path
    # called with the recent output (at most every 250 ms, the reference's EXEC_PROGRESS_INTERVAL_MS)
    progress: Callable[[str], None] | None = None
    module: str | None = None          # ts: a module the program imports as `/tmp/tool.<ext>` (lambdas)


@dataclass
class Outcome:
    exit_code: int
    stdout: bytes                      # at most output_bytes + 1 (one more byte says it was cut)
    stderr: bytes
    duration_ms: int
    timed_out: bool = False
    signal: int = 0
    stdout_total: int = 0              # bytes the program wrote, cut or not
    stderr_total: int = 0
    # the workspace after the run: path -> size, and the bytes of those written since the
    # checkout (maybe with the same bytes); None when the sandbox handed nothing back (it was
    # killed, or the workspace broke a bound)
    files: dict[str, int] | None = None
    changed: dict[str, bytes] = field(default_factory=dict)
    workspace_note: str = ""           # why `files` is None


@dataclass(frozen=True)
class Availability:
    available: bool
    runtimes: tuple[str, ...] = ()
    reason: str = ""                   # one sentence when not available
    code: str = ""                     # the reference's machine-readable cause
    backend: str = ""
    notes: dict[str, str] = field(default_factory=dict)   # runtime -> how it runs, when it matters


class Sandbox(Protocol):
    name: str
    availability: Availability

    async def run(self, job: Job) -> Outcome:
        """Runs `job`; raises SandboxError when the sandbox itself fails. Cancelling the caller
        kills the whole process tree before it returns."""
        ...
