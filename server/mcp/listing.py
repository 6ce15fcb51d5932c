"""An MCP server's work for us, a tool listing or a tool call, done in a worker process, never
on the server's event loop or under its GIL.

The SDK parses every answer with pydantic in one call that holds the GIL (a 15 MB listing page
costs seconds of CPU, and a thread of the server doing it stops the loop just as surely), and
checking the schemas is more CPU; a tool call's answer is parsed the same way (up to the 16 MiB
response bound before it is cut to what the model may see). So the whole exchange (the SDK's
session, a discovery's paging and checks, or one `tools/call`; the same network policy, byte
bounds and deadline) runs in a child process (`python -m seed_agents.server.mcp.listing_worker`,
started on first use, at most `IDLE_KEPT` kept between uses, with an address-space cap; at the
server's own CPU priority, since an honest exchange must finish within --mcp-timeout on a busy
host, and the server's loop is in another process). Listings: at most `WORKERS` at once, one
per account, so another account's discovery finds a worker while one account refreshes a
hostile server. Calls: at most `CALL_WORKERS` at once, `CALLS_PER_ACCOUNT` per account, apart
from the listings. An exchange past its deadline (or whose caller went away, e.g. a cancelled
run) kills its worker, which ends the remote request with it; the next starts a fresh one. A
worker's start-up (the SDK's imports) is not charged to the remote server's --mcp-timeout.

The pipe speaks length-prefixed JSON. In: `{url, headers, networks, flag, timeout, tools,
schemaBytes}` for a listing, with `op: "call", name, arguments` for a call. Out, for a listing:
one `["tool", McpToolInfo]` frame per kept tool (each at most a schema's bytes, so the server
decodes it in one short step), then `["done", skipped]`; for a call: `["result", output, error]`
(the output already cut to what one call may hand the model); either may be `["error",
phrase]`. `["ready"]` once, when a worker has loaded the SDK.
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
CALL_WORKERS = 4            # tool calls at once, all accounts together (per event loop)
CALLS_PER_ACCOUNT = 2       # tool calls at once for one account
IDLE_KEPT = 2               # workers kept started between uses (each holds the SDK, ~60 MB)
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

    def __init__(self, workers: int = WORKERS, per_account: int = PER_ACCOUNT,
                 call_workers: int = CALL_WORKERS, calls_per_account: int = CALLS_PER_ACCOUNT) -> None:
        self._idle: list[_Worker] = []
        self._slots = asyncio.Semaphore(workers)
        self._accounts = AccountSlots(per_account)
        self._call_slots = asyncio.Semaphore(call_workers)
        self._call_accounts = AccountSlots(calls_per_account)

    async def discover(self, account: str, request: dict) -> tuple[list[dict], int]:
        """(kept tools, how many were left out); ListingFailed with the worker's phrase, or when
        it did not answer within the request's timeout (waiting for a slot included)."""
        return await self._exchange(self._accounts, self._slots, account, request, "listing its tools failed")

    async def call(self, account: str, request: dict) -> tuple[object, str | None]:
        """(output, error) of one tool call (`request` names the tool and its arguments);
        ListingFailed as `discover`."""
        return await self._exchange(self._call_accounts, self._call_slots, account, {**request, "op": "call"},
                                    f"calling {request['name']} failed")

    async def _exchange(self, accounts: AccountSlots, slots: asyncio.Semaphore, account: str, request: dict,
                        what: str):  # noqa: ANN202
        timeout = float(request["timeout"])
        late = ListingFailed(f"{what}: the MCP server did not answer in time (--mcp-timeout)")
        loop = asyncio.get_running_loop()
        asked = loop.time()
        try:
            async with accounts.slot(account, asked + timeout), slots:
                remaining = timeout - (loop.time() - asked)   # (waiting for a slot is charged)
                worker = self._idle.pop() if self._idle else await _Worker.start()   # (starting is not)
                if remaining <= 0:
                    self._keep(worker)
                    raise late
                return await self._run(worker, {**request, "timeout": remaining}, remaining + GRACE)
        except TimeoutError:
            raise late from None
        except (OSError, asyncio.IncompleteReadError, ValueError):
            raise ListingFailed(f"{what}: the MCP worker stopped") from None

    async def _run(self, worker: _Worker, request: dict, within: float):  # noqa: ANN202
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
                    if frame[0] == "result":
                        return frame[1], (None if frame[2] is None else str(frame[2]))
                    raise ListingFailed(str(frame[1]))
        finally:
            if done:
                self._keep(worker)
            else:   # cancelled, late or broken: its CPU (and its remote request) is stopped with it
                worker.kill()

    def _keep(self, worker: _Worker) -> None:
        if len(self._idle) < IDLE_KEPT:
            self._idle.append(worker)
        else:
            worker.kill()


_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pool() -> ListingPool:
    """The running loop's pool (tests run several servers, each on its own loop)."""
    loop = asyncio.get_running_loop()
    found = _POOLS.get(loop)
    if found is None:
        found = _POOLS[loop] = ListingPool()
    return found
