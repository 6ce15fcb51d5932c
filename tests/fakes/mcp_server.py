"""Remote MCP servers for the tests, as child processes on loopback: one made with the official
SDK (`mcp.server.MCPServer`, Streamable HTTP), and the hostile kinds.

    python -m tests.fakes.mcp_server PORT calc KEY   # tools add (works) and fail (raises);
                                                     # every request must carry x-api-key: KEY
    python -m tests.fakes.mcp_server PORT many N     # lists N tools
    python -m tests.fakes.mcp_server PORT fat N      # lists N tools, each schema 55 KB of properties
    python -m tests.fakes.mcp_server PORT huge N      # lists N tools on one page, each described in 15 KB
    python -m tests.fakes.mcp_server PORT bulky MB   # tools huge (answers MB megabytes of text) and
                                                     # slow (answers after 120 s)
    python -m tests.fakes.mcp_server PORT hang       # accepts, reads, never answers
    python -m tests.fakes.mcp_server PORT garbage    # answers every request with bytes that are not MCP

It prints "ready" once it listens. `McpFake` runs the same servers inside the test's own event
loop (no child process to start: the SDK's import alone takes seconds on a busy machine).
"""
from __future__ import annotations

import asyncio
import sys

from .loopback import LoopbackFake, send, serve_until_signal
from tests.waiting import until


def calc_app(key: str):  # noqa: ANN201
    from mcp.server import MCPServer

    server = MCPServer("calc")

    @server.tool(description="Add two integers and return their sum.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Always fails, to show a tool-level error.")
    def fail(reason: str = "no") -> str:
        raise ValueError(f"the tool failed on purpose: {reason}")

    inner = server.streamable_http_app()

    async def app(scope, receive, send):  # noqa: ANN001
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"x-api-key", b"").decode() != key:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no key"})
                return
        await inner(scope, receive, send)

    return app


def many_app(count: int):  # noqa: ANN201
    from mcp.server import MCPServer
    from mcp_types import Tool

    class Many(MCPServer):
        async def list_tools(self):  # noqa: ANN202
            return [Tool(name=f"t{i}", description=f"tool number {i}",
                         input_schema={"type": "object", "properties": {"x": {"type": "integer"}}})
                    for i in range(count)]

    return Many("many").streamable_http_app()


def fat_schema(tool: int) -> dict:
    """A flat schema of some 55 KB (900 properties): valid, and costly to check (jsonschema's
    meta-schema check takes about a millisecond per property)."""
    return {"type": "object", "properties": {f"p{tool}_{i}": {"type": "string", "description": "x" * 20,
                                                               "enum": ["a", "b"]} for i in range(900)}}


def fat_app(count: int):  # noqa: ANN201
    from mcp.server import MCPServer
    from mcp_types import Tool

    tools = [Tool(name=f"fat{i}", description="a tool with a large schema", input_schema=fat_schema(i))
             for i in range(count)]   # made once: the listing itself is quick to serve

    class Fat(MCPServer):
        async def list_tools(self):  # noqa: ANN202
            return tools

    return Fat("fat").streamable_http_app()


def huge_app(count: int):  # noqa: ANN201
    """One listing page of some 15 MB (1,000 tools) with small schemas: nothing costly to check,
    all of it costly to parse (the SDK's pydantic parse of a page is one call under the GIL)."""
    from mcp.server import MCPServer
    from mcp_types import Tool

    tools = [Tool(name=f"wide{i}", description=f"tool {i} " + "y" * 15_000,
                  input_schema={"type": "object", "properties": {"x": {"type": "integer"}}})
             for i in range(count)]

    class Huge(MCPServer):
        async def list_tools(self):  # noqa: ANN202
            return tools

    return Huge("huge").streamable_http_app()


def bulky_app(megabytes: int):  # noqa: ANN201
    """Hostile tool results: `huge` answers some MB of text (the SDK parses the whole answer in
    one call that holds the GIL), `slow` answers only after two minutes."""
    from mcp.server import MCPServer

    server = MCPServer("bulky")
    text = "z" * (megabytes * 1_000_000)

    @server.tool(description="Answers a great deal of text.")
    def huge() -> str:
        return text

    @server.tool(description="Answers after two minutes.")
    async def slow() -> str:
        await asyncio.sleep(120)
        return "late"

    return server.streamable_http_app()


class NotMcp(LoopbackFake):
    """A socket that takes MCP requests and answers garbage (200, bytes that are not JSON-RPC),
    or never answers."""

    def __init__(self, garbage: bool, *, port: int = 0) -> None:
        super().__init__(port=port)
        self.garbage = garbage

    async def _respond(self, request, reader, writer) -> bool:  # noqa: ANN001
        if not self.garbage:
            await asyncio.Event().wait()   # hang, until close() ends the connection
        await send(writer, 200, "application/json", b"\x00\xffthis is not json-rpc {{{")
        return False


class McpFake:
    """async with McpFake("calc", "KEY") as fake: fake.url — in this process, on a free port."""

    def __init__(self, kind: str, arg: str = "", *, port: int = 0) -> None:
        self.kind, self.arg, self.port = kind, arg, port
        self.url = ""
        self._stop = None

    async def __aenter__(self) -> "McpFake":
        if self.kind in ("hang", "garbage"):
            raw = await NotMcp(self.kind == "garbage", port=self.port).start()
            port = raw.port
            self._stop = raw.close
        else:
            import uvicorn

            app = (calc_app(self.arg) if self.kind == "calc" else fat_app(int(self.arg)) if self.kind == "fat"
                   else huge_app(int(self.arg)) if self.kind == "huge"
                   else bulky_app(int(self.arg)) if self.kind == "bulky" else many_app(int(self.arg)))
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                   lifespan="on"))
            task = asyncio.create_task(server.serve())
            await until(lambda: server.started, 10, step=0.01, what="the MCP server started")
            port = server.servers[0].sockets[0].getsockname()[1]

            async def stop() -> None:
                server.should_exit = True
                await task
            self._stop = stop
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def stop(self) -> None:
        if self._stop is not None:
            stop, self._stop = self._stop, None
            await stop()

    async def __aexit__(self, *exc) -> None:  # noqa: ANN002
        await self.stop()


async def _serve(port: int, kind: str, arg: str) -> None:
    async with McpFake(kind, arg, port=port):
        await serve_until_signal("ready")


def main() -> None:
    asyncio.run(_serve(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""))


if __name__ == "__main__":
    main()
