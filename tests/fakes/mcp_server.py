"""Remote MCP servers for the tests, as child processes on loopback: one made with the official
SDK (`mcp.server.MCPServer`, Streamable HTTP), and the hostile kinds.

    python -m tests.fakes.mcp_server PORT calc KEY   # tools add (works) and fail (raises);
                                                     # every request must carry x-api-key: KEY
    python -m tests.fakes.mcp_server PORT many N     # lists N tools
    python -m tests.fakes.mcp_server PORT hang       # accepts, reads, never answers
    python -m tests.fakes.mcp_server PORT garbage    # answers every request with bytes that are not MCP

It prints "ready" once it listens. `McpFake` runs the same servers inside the test's own event
loop (no child process to start: the SDK's import alone takes seconds on a busy machine).
"""
from __future__ import annotations

import asyncio
import sys


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


async def raw_server(port: int, garbage: bool) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            if garbage:
                body = b"\x00\xffthis is not json-rpc {{{"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
            else:
                await asyncio.Event().wait()   # hang
        except Exception:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


class McpFake:
    """async with McpFake("calc", "KEY") as fake: fake.url — in this process, on a free port."""

    def __init__(self, kind: str, arg: str = "") -> None:
        self.kind, self.arg = kind, arg
        self.url = ""
        self._stop = None

    async def __aenter__(self) -> "McpFake":
        if self.kind in ("hang", "garbage"):
            garbage = self.kind == "garbage"

            async def handle(reader, writer):  # noqa: ANN001
                try:
                    await reader.readuntil(b"\r\n\r\n")
                    if garbage:
                        body = b"\x00\xffthis is not json-rpc {{{"
                        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                                     + str(len(body)).encode() + b"\r\n\r\n" + body)
                        await writer.drain()
                    else:
                        await asyncio.Event().wait()
                except Exception:
                    pass
                finally:
                    writer.close()

            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]

            async def stop() -> None:
                server.close()
            self._stop = stop
        else:
            import uvicorn

            app = calc_app(self.arg) if self.kind == "calc" else many_app(int(self.arg))
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                                   lifespan="on"))
            task = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
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


def main() -> None:
    port, kind = int(sys.argv[1]), sys.argv[2]
    if kind in ("hang", "garbage"):
        asyncio.run(raw_server(port, kind == "garbage"))
        return
    import uvicorn

    app = calc_app(sys.argv[3]) if kind == "calc" else many_app(int(sys.argv[3]))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
