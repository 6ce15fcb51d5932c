"""The MCP worker's side (server/mcp/listing.py starts it as
`python -m seed_agents.server.mcp.listing_worker`): requests in on stdin, a discovery or a tool
call each in this process, frames out on stdout. Apart from listing.py because it runs the discovery (remote.py),
which asks listing.py for the pool: one module holding both halves made an import circle."""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys

from .listing import _HEAD, WORKER_MEMORY
from .remote import McpError, McpLimits, Remote


def _write(out, frame: list) -> None:  # noqa: ANN001
    # UTF-8 as is (no \u escapes): a call's text result is read back in one short step. (Text
    # with a lone surrogate has no UTF-8: escaped then.)
    try:
        data = json.dumps(frame, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        data = json.dumps(frame).encode()
    out.write(_HEAD.pack(len(data)) + data)
    out.flush()


def _serve() -> None:
    """The worker: requests in on stdin, frames out on stdout, until stdin closes."""
    import resource

    from ..providers.network import NetworkPolicy

    # Everything a discovery imports, loaded before the first request (not on its clock).
    import mcp.client.streamable_http  # noqa: F401
    from mcp import Client  # noqa: F401

    from . import network  # noqa: F401 - httpx2 and httpcore2

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _write(stdout, ["ready"])
    while True:
        head = stdin.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return
        request = json.loads(stdin.read(_HEAD.unpack(head)[0]))
        remote = Remote(request["url"], request["headers"],
                        NetworkPolicy.parse(request["networks"], request["flag"]), float(request["timeout"]),
                        McpLimits(int(request.get("tools", 0)), int(request.get("schemaBytes", 0))))
        calling = request.get("op") == "call"
        what = f"calling {request['name']} failed" if calling else "listing its tools failed"
        try:
            if calling:
                output, error = asyncio.run(remote.call_here(request["name"], request["arguments"]))
            else:
                tools, skipped = asyncio.run(remote.discover_here())
        except McpError as exc:
            _write(stdout, ["error", exc.message])
            continue
        except MemoryError:
            _write(stdout, ["error", f"{what}: the answer needs more memory than one may take"])
            continue
        except Exception:  # noqa: BLE001 - one bad answer must not end the worker
            _write(stdout, ["error", f"{what}: the MCP server's answer was not valid MCP"])
            continue
        if calling:
            _write(stdout, ["result", output, error])
            continue
        for tool in tools:
            _write(stdout, ["tool", tool])
        _write(stdout, ["done", skipped])


if __name__ == "__main__":
    _serve()
