"""A fake web on a real 127.0.0.1 socket, for the agents' web tools: pages (HTML, text), redirects,
a page far larger than any bound (streamed, never held), a page that never answers, and a SearXNG
JSON search API (`GET /search?format=json&q=...`, the shape SearXNG answers).

    async with FakeWeb() as web:
        web.page("/a.html", "<html>...</html>")
        web.redirect("/r", "http://169.254.169.254/latest/meta-data/")
        web.huge("/big", 50 << 20)             # bytes actually sent: web.sent["/big"]
        web.hang("/stuck")
        web.slow("/slow", 5.0, "text")         # answers after 5 s
        web.trickle("/drip", 1.0)              # a 1 MB body, one byte a second
        web.search_results = [{"title": ..., "url": ..., "content": ...}]
        web.url("/a.html"); web.requests       # [(method, path)]

From another process: `python -m tests.fakes.web_server --port 0` prints
`FAKE_WEB_LISTENING http://127.0.0.1:PORT` (it serves /page.html and /search).
"""
from __future__ import annotations

import argparse
import asyncio
import json
from urllib.parse import parse_qs, urlsplit

from .loopback import LoopbackFake, chunk_frame, pause, response_head, send, serve_until_signal

ARTICLE = """<!doctype html><html><head><title>Kites of the world</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Kites of the world</h1>
<p>The red kite is a bird of prey with a forked tail. It soars over open country and
is often seen above fields in the middle of the day.</p>
<p>Kites were nearly gone from many regions a century ago, and have come back since,
helped by protection and by people feeding them in winter.</p>
<h2>Where to see them</h2><p>Look for the forked tail over hills and farmland.</p>
</article><footer>Copyright nobody</footer></body></html>"""


class FakeWeb(LoopbackFake):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.routes: dict[str, tuple] = {"/page.html": ("page", ARTICLE.encode(), "text/html; charset=utf-8")}
        self.requests: list[tuple[str, str]] = []
        self.sent: dict[str, int] = {}
        self.search_results: list[dict] = [
            {"title": "Red kite", "url": "https://example.org/red-kite", "content": "A bird of prey.",
             "engine": "fake"}]

    def page(self, path: str, body: str, content_type: str = "text/html; charset=utf-8") -> None:
        self.routes[path] = ("page", body.encode(), content_type)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.routes[path] = ("redirect", location, status)

    def huge(self, path: str, size: int) -> None:
        self.routes[path] = ("huge", size)

    def hang(self, path: str) -> None:
        self.routes[path] = ("hang",)

    def slow(self, path: str, seconds: float, body: str = "slow text") -> None:
        """A page that answers after `seconds` (or never, if the client goes first)."""
        self.routes[path] = ("slow", seconds, body.encode())

    def trickle(self, path: str, every: float) -> None:
        """A page that announces a megabyte and sends one byte every `every` seconds."""
        self.routes[path] = ("trickle", every)

    async def _respond(self, request, reader, writer) -> bool:  # noqa: ANN001
        self.requests.append((request.method, request.path))
        return await self._answer(urlsplit(request.path).path, request.path, reader, writer)

    async def _answer(self, path: str, target: str, reader, writer) -> bool:
        if path == "/search":
            query = parse_qs(urlsplit(target).query)
            if query.get("format") != ["json"]:
                return await send(writer, 403, "text/plain", b"format not allowed")
            body = {"query": query.get("q", [""])[0], "results": self.search_results,
                    "unresponsive_engines": []}
            return await send(writer, 200, "application/json", json.dumps(body).encode())
        route = self.routes.get(path)
        if route is None:
            return await send(writer, 404, "text/plain", b"not found")
        kind = route[0]
        if kind == "page":
            return await send(writer, 200, route[2], route[1])
        if kind == "redirect":
            location, status = route[1], route[2]
            writer.write(f"HTTP/1.1 {status} Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode())
            await writer.drain()
            return True
        if kind == "hang":
            await pause(reader, None)
            return False
        if kind == "trickle":
            writer.write(response_head(200, "text/plain; charset=utf-8", length=1 << 20))
            for _ in range(1 << 20):
                writer.write(b"x")
                await writer.drain()
                self.sent[path] = self.sent.get(path, 0) + 1
                if await pause(reader, route[1]):
                    return False   # the client went away
            return True
        if kind == "slow":
            if await pause(reader, route[1]):
                return False
            return await send(writer, 200, "text/plain; charset=utf-8", route[2])
        # huge: streamed in 64 KiB chunks until the client stops reading or closes
        writer.write(response_head(200, "text/html; charset=utf-8", chunked=True))
        piece = (b"<p>" + b"kite " * 13000 + b"</p>\n")[:65536]
        sent = 0
        while sent < route[1]:
            writer.write(chunk_frame(piece))
            sent += len(piece)
            self.sent[path] = sent
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _serve(args: argparse.Namespace) -> None:
    async with FakeWeb(args.host, args.port) as web:
        await serve_until_signal(f"FAKE_WEB_LISTENING {web.base_url}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake web pages and SearXNG")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
