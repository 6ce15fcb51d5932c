"""An MCP server's tool listing fetched and checked in a worker process, never on the server's
event loop or under its GIL.

The SDK parses every answer with pydantic in one call that holds the GIL (a 15 MB listing page
costs seconds of CPU, and a thread of the server doing it stops the loop just as surely), and
checking the schemas is more CPU. So the whole discovery (`Remote.discover_here`: the SDK's
session, its paging, the checks, under the same network policy, byte bounds and deadline) runs in
one of at most `WORKERS` child processes (`python -m seed_agents.server.mcp.listing_worker`, started
on first use and kept, with an address-space cap; at the server's own CPU priority, since an
honest discovery must finish within --mcp-timeout on a busy host, and the server's loop is in
another process). One account lists one
server at a time, so another account's discovery finds a worker while one account refreshes a
hostile server. A discovery past its deadline (or whose caller went away) kills its worker; the
next starts a fresh one. A worker's start-up (the SDK's imports) is not charged to the remote
server's --mcp-timeout.

The pipe speaks length-prefixed JSON. In: `{url, headers, networks, flag, timeout, tools,
schemaBytes}`. Out: one `["tool", McpToolInfo]` frame per kept tool (each at most a schema's
bytes, so the server decodes it in one short step), then `["done", skipped]` or `["error",
phrase]`; `["ready"]` once, when a worker has loaded the SDK.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import sys
import weakref

from ..providers.outbound_slots import AccountSlots

WORKERS = 2                 # discoveries at once, all accounts together (per event loop)
PER_ACCOUNT = 1             # discoveries at once for one account
WORKER_MEMORY = 1 << 30     # address space of one worker (RLIMIT_AS), bytes
START_TIMEOUT = 60.0        # seconds a worker may take to load the SDK (not the remote's time)
GRACE = 1.0                 # seconds past the deadline the worker's own answer may take
FRAME_MAX = 4 << 20         # bytes of one frame from a worker (a tool's info is far less)
_HEAD = struct.Struct(">I")


class ListingFailed(Exception):
    """The discovery failed; `message` is a fixed phrase (safe to show)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "seed_agents.server.mcp.listing_worker",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            limit=FRAME_MAX)
        worker = cls(proc)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                if await worker.frame() != ["ready"]:
                    raise ValueError("no ready frame")
        except BaseException:
            worker.kill()
            raise
        return worker

    def send(self, request: dict) -> None:
        data = json.dumps(request).encode()
        self.proc.stdin.write(_HEAD.pack(len(data)) + data)

    async def frame(self) -> list:
        size = _HEAD.unpack(await self.proc.stdout.readexactly(_HEAD.size))[0]
        if size > FRAME_MAX:
            raise ValueError("frame too large")
        return json.loads(await self.proc.stdout.readexactly(size))

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


class ListingPool:
    """The workers of one event loop (see the module's docstring)."""

    def __init__(self, workers: int = WORKERS, per_account: int = PER_ACCOUNT) -> None:
        self._idle: list[_Worker] = []
        self._slots = asyncio.Semaphore(workers)
        self._accounts = AccountSlots(per_account)

    async def discover(self, account: str, request: dict) -> tuple[list[dict], int]:
        """(kept tools, how many were left out); ListingFailed with the worker's phrase, or when
        it did not answer within the request's timeout (waiting for a slot included)."""
        timeout = float(request["timeout"])
        late = ListingFailed("listing its tools failed: the MCP server did not answer in time (--mcp-timeout)")
        loop = asyncio.get_running_loop()
        asked = loop.time()
        try:
            async with self._accounts.slot(account, asked + timeout), self._slots:
                remaining = timeout - (loop.time() - asked)   # (waiting for a slot is charged)
                worker = self._idle.pop() if self._idle else await _Worker.start()   # (starting is not)
                if remaining <= 0:
                    self._idle.append(worker)
                    raise late
                return await self._run(worker, {**request, "timeout": remaining}, remaining + GRACE)
        except TimeoutError:
            raise late from None
        except (OSError, asyncio.IncompleteReadError, ValueError):
            raise ListingFailed("listing its tools failed: the listing worker stopped") from None

    async def _run(self, worker: _Worker, request: dict, within: float) -> tuple[list[dict], int]:
        done = False
        try:
            async with asyncio.timeout(within):
                worker.send(request)
                await worker.proc.stdin.drain()
                tools: list[dict] = []
                while True:
                    frame = await worker.frame()
                    if frame[0] == "tool":
                        tools.append(frame[1])
                        await asyncio.sleep(0)   # one tool at a time: others' requests in between
                        continue
                    done = True
                    if frame[0] == "done":
                        return tools, int(frame[1])
                    raise ListingFailed(str(frame[1]))
        finally:
            if done:
                self._idle.append(worker)
            else:   # cancelled, late or broken: its CPU is stopped with it
                worker.kill()


_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pool() -> ListingPool:
    """The running loop's pool (tests run several servers, each on its own loop)."""
    loop = asyncio.get_running_loop()
    found = _POOLS.get(loop)
    if found is None:
        found = _POOLS[loop] = ListingPool()
    return found
