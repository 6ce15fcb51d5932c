"""The server's one port: HTTP/1.1 first (server/transport/httpconn.py), and a WebSocket upgrade on
`/agents/ws` handed to a normal websockets server connection.

websockets stays the WebSocket implementation: the upgraded socket gets websockets' sans-I/O
`ServerProtocol` (public, sans-I/O) inside our `WsConnection` (server/transport/wsconn.py, the
asyncio protocol that keeps the time, the bytes in and the one writer out), is fed the request
bytes already read, and from then on reads and writes the transport itself. The listening server is websockets' own `Server` object (close,
wait_closed, sockets), created around our protocol factory.
"""
from __future__ import annotations

import asyncio
import logging

from websockets.asyncio.server import Server
from websockets.http11 import SERVER
from websockets.protocol import OPEN
from websockets.server import ServerProtocol

from seed_agents.protocol.wire.frame_limits import largest
from seed_agents.protocol.wire.framing_http import CORS_PAIRS, WS_PATH, HttpFraming

from ..http_routes import HttpRoutes
from ..operations.version import build_commit
from . import http_answers
from .connection import V2, Connection
from .httpconn import HttpConnection
from .origins import DUPLICATE, REFUSED, policy
from .peers import AddressTable, address_of
from .wsconn import WsConnection

log = logging.getLogger("seed_agents.transport")

__all__ = ["WS_PATH", "start_transport"]

OPEN_TIMEOUT = 10.0   # the WebSocket opening handshake, once handed over
# websockets' inbound queue, in frames (high, low); it is also bounded in bytes (wsconn.py).
MAX_QUEUE_FRAMES = 32
MAX_QUEUE = (MAX_QUEUE_FRAMES, MAX_QUEUE_FRAMES // 4)


def _select_subprotocol(_protocol, offered):
    # v2 when offered; otherwise v1, which is what the Seed desktop uses to follow sessions.
    return V2 if V2 in offered else None


def _cors_on_refusal(origins):
    """websockets' own refusals of a bad upgrade (400, 426) carry the CORS headers too; with
    a list of `--allowed-origins` they name the request's origin when it is allowed, none when it
    is refused (and `*` to a request from no page)."""
    def process_response(_connection, request, response):
        if response.status_code != 101:
            for name, value in CORS_PAIRS:
                if name == "Access-Control-Allow-Origin" and not origins.any:
                    given = request.headers.get_all("Origin")
                    value = origins.cors(given[0] if given else None) if len(given) <= 1 else None
                    response.headers["Vary"] = "Origin"
                    if value is None:
                        continue
                response.headers[name] = value
        return None
    return process_response


class AgentsServer(Server):
    """websockets' Server, which also closes idle HTTP keep-alive connections when it stops."""

    def __init__(self, create_server, handler, logger=None) -> None:
        super().__init__(create_server, handler, logger)
        self.http_connections: set[HttpConnection] = set()

    def close(self, close_connections: bool = True, code: int = 1001, reason: str = "") -> None:
        super().close(close_connections, code, reason)
        for conn in list(self.http_connections):
            conn.shutdown()


async def start_transport(app, routes: HttpRoutes | None = None, start_serving: bool = True) -> AgentsServer:
    """Bind the port; with `start_serving=False` nothing is accepted (nor listened for) until
    `await server.start_serving()`, so a taken port is found before anything is written.
    `routes`: the HTTP route table with what others registered (webhooks); the transport adds
    its own answers (server/transport/http_answers.py)."""
    config = app.config
    routes = routes if routes is not None else HttpRoutes()
    http_answers.register(routes, app)
    limits = config.limits
    framing = HttpFraming(max_frame=limits.max_frame, max_depth=limits.max_depth,
                          metrics=config.metrics_listen == "same")
    build_commit()   # once, at start: it may run git
    origins = policy(config.allowed_origins, config.host)
    cors_on_refusal = _cors_on_refusal(origins)

    def check_origin(ws: WsConnection, request):
        """A web page from an origin the operator did not allow gets 403, not a socket."""
        given = request.headers.get_all("Origin")
        if len(given) > 1:
            return ws.respond(400, DUPLICATE + "\n")
        if not origins.allows(given[0] if given else None):
            return ws.respond(403, REFUSED + "\n")
        return None

    async def run_socket(ws: WsConnection) -> None:
        """As websockets' own per-connection handler does: handshake, then our Connection."""
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                await ws.handshake(check_origin, cors_on_refusal, SERVER)
            if ws.protocol.state is not OPEN:
                ws.transport.abort()
                return
            server.all_connections.add(ws)
            ws.start_keepalive()
            try:
                async with ws:
                    await Connection(app, ws).serve()
            except Exception:  # noqa: BLE001 - logged; the socket is closed by `async with`
                log.exception("connection handler failed")
            finally:
                server.all_connections.discard(ws)
        except Exception:  # noqa: BLE001 - a handshake that failed or timed out
            ws.transport.abort()
        finally:
            server.addresses.release(address_of(ws.transport))   # counted since the HTTP accept
            server.handler_tasks.discard(asyncio.current_task())

    def upgrade(transport: asyncio.Transport, data: bytes) -> None:
        protocol = ServerProtocol(
            subprotocols=[V2],
            select_subprotocol=_select_subprotocol,
            # past the 413 range (4x the limit, or an upload chunk's frame) the socket closes with 1009
            max_size=max(4 * limits.max_frame, largest(limits.max_frame)),
            # compression off: per-message deflate costs CPU and memory per socket for little gain
        )
        ws = WsConnection(
            protocol, server,
            ping_interval=config.ping_interval or None,
            ping_timeout=config.ping_timeout or None,
            close_timeout=5,
            max_queue=MAX_QUEUE,
            inbound_bytes=limits.max_frame,   # queued client frames, in bytes, before reading stops
            write_timeout=config.write_timeout,
        )
        transport.set_protocol(ws)
        ws.connection_made(transport)   # starts run_socket (server.handler) as a task
        transport.resume_reading()
        ws.data_received(data)

    def factory() -> HttpConnection:
        return HttpConnection(app, framing, routes, server, upgrade)

    async def create_server() -> asyncio.Server:
        return await asyncio.get_running_loop().create_server(factory, config.host, config.port,
                                                              start_serving=start_serving)

    server = AgentsServer(create_server, run_socket, logging.getLogger("websockets.server"))
    app.metrics.watch_http(server.http_connections)
    server.addresses = AddressTable(limits.connections_per_address, limits.probe_rate,
                                    max(1, int(2 * limits.probe_rate)), limits.unverified_burst, app.rate_clock)
    return await server
