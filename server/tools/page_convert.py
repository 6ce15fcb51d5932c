"""HTML pages turned into Markdown (trafilatura) in worker processes: a bounded pool whose work
can be cancelled.

trafilatura is pure CPU under the GIL, and its time and memory grow with the page: a 1 MB page of
links costs seconds of CPU and 150 MiB. In a thread of the server it takes the GIL from the event
loop (every client slows down), and a thread cannot be stopped once the deadline has passed. So
it runs in at most `PAGE_WORKERS` child processes (`python -m
seed_agents.server.tools.page_convert`, started on first use and kept), at a lower CPU priority,
with an address-space cap; one account converts one page at a time, so another account's page
always finds a worker while one account reads many. A conversion past its deadline (or whose
caller went away) kills its worker, and the next page starts a fresh one.

The pipe speaks length-prefixed JSON: `[html, url]` in, `["ok", markdown, title]` or `["error",
reason]` out.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
import sys

from ..providers.outbound_slots import AccountSlots

PAGE_WORKERS = 2                     # conversions at once, all accounts together
PER_ACCOUNT = 1                      # conversions at once for one account
WORKER_NICE = 5                      # the workers yield the CPU to the server (not starved by it)
WORKER_MEMORY = 1 << 30              # address space of one worker (RLIMIT_AS), bytes
_HEAD = struct.Struct(">I")


class ConversionFailed(Exception):
    """The page could not be converted (the worker's reason, or its deadline)."""


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "seed_agents.server.tools.page_convert",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        return cls(proc)

    async def call(self, html: str, url: str) -> list:
        data = json.dumps([html, url]).encode()
        self.proc.stdin.write(_HEAD.pack(len(data)) + data)
        await self.proc.stdin.drain()
        size = _HEAD.unpack(await self.proc.stdout.readexactly(_HEAD.size))[0]
        return json.loads(await self.proc.stdout.readexactly(size))

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


class PageConverter:
    """The pool (see the module's docstring); one per runtime."""

    def __init__(self, workers: int = PAGE_WORKERS, per_account: int = PER_ACCOUNT) -> None:
        self.workers, self.per_account = workers, per_account
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._slots: asyncio.Semaphore | None = None
        self._accounts = AccountSlots(per_account)

    async def convert(self, html: str, url: str, account: str, timeout: float) -> tuple[str, str]:
        """(markdown, title) of the page; ConversionFailed past `timeout` (waiting included)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        try:
            async with asyncio.timeout(timeout), self._accounts.slot(account), self._slots:
                return await self._run(html, url)
        except TimeoutError:
            raise ConversionFailed(f"turning the page into text took longer than {timeout:g} s") from None

    async def _run(self, html: str, url: str) -> tuple[str, str]:
        worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = await _Worker.start()
            self._all.add(worker)
        done = False
        try:
            answer = await worker.call(html, url)
            done = True
        except (OSError, asyncio.IncompleteReadError, ValueError):
            raise ConversionFailed("the page converter stopped (the page was too much for it)") from None
        finally:
            if done:
                self._idle.append(worker)
            else:   # cancelled, timed out or broken: a thread could not be stopped, a process can
                worker.kill()
                self._all.discard(worker)
        if answer[0] != "ok":
            raise ConversionFailed(f"the page could not be turned into text ({answer[1]})")
        return answer[1], answer[2]

    async def close(self) -> None:
        for worker in list(self._all):
            worker.kill()
            with contextlib.suppress(Exception):
                await worker.proc.wait()
        self._all.clear()
        self._idle.clear()


def page_markdown(html: str, url: str) -> tuple[str, str]:
    """(markdown, title) of an HTML page: its main text by trafilatura, with links and tables."""
    import trafilatura  # heavy import: only where pages are converted

    markdown = trafilatura.extract(html, url=url, output_format="markdown", include_links=True,
                                   include_tables=True, include_comments=False, favor_recall=True) or ""
    title = ""
    try:
        meta = trafilatura.extract_metadata(html)
        title = (meta.title or "") if meta is not None else ""
    except Exception:  # noqa: BLE001 - metadata is a nicety; a page that breaks it still reads
        pass
    return markdown, title


def _serve() -> None:
    """The worker: pages in on stdin, answers out on stdout, until stdin closes."""
    import resource

    import trafilatura  # noqa: F401 - loaded before the first page (at the server's priority)

    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return
        html, url = json.loads(stdin.read(_HEAD.unpack(head)[0]))
        try:
            answer = ["ok", *page_markdown(html, url)]
        except MemoryError:
            answer = ["error", "it needs more memory than a page may take"]
        except Exception as exc:  # noqa: BLE001 - one bad page must not end the worker
            answer = ["error", type(exc).__name__]
        data = json.dumps(answer).encode()
        stdout.write(_HEAD.pack(len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    _serve()
