"""The WebSocket endpoint and the plain HTTP routes, on one port (websockets' asyncio server)."""
from __future__ import annotations

import http
import json
import logging

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

from server.connection import V2, Connection
from server.wsconn import BatchingServerConnection

log = logging.getLogger("seed_agents.transport")

WS_PATH = "/agents/ws"
HEALTH_PATHS = ("/api/health", "/agents/api/health")
VERSION = "0.1.0"


def _http(status: int, body: bytes, content_type: str) -> Response:
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                       ("Connection", "close")])
    return Response(status, http.HTTPStatus(status).phrase, headers, body)


def _select_subprotocol(_connection, offered):
    # v2 when offered; otherwise v1, which is what the Seed desktop speaks today.
    return V2 if V2 in offered else None


def make_routes(app):
    def process_request(connection, request):
        path = request.path.split("?", 1)[0]
        if path in HEALTH_PATHS:
            body = json.dumps({"status": "ok", "ok": True, "uptime": round(app.uptime(), 3),
                               "version": VERSION, "schemaVersion": app.db.schema_version}).encode()
            return _http(200, body, "application/json")
        if path == "/metrics":
            return _http(200, app.metrics.render(), app.metrics.content_type)
        if path != WS_PATH:
            return _http(404, b'{"status":"error","message":"not found"}', "application/json")
        if len(app.connections) >= app.config.limits.max_connections:
            # Accounts are free to make, so per-account limits alone do not bound the sockets.
            return _http(503, b'{"status":"error","message":"the server is at its connection limit; '
                              b'retry later"}', "application/json")
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return _http(426, b'{"status":"error","message":"use a WebSocket at /agents/ws"}', "application/json")
        return None

    return process_request


async def start_transport(app):
    config = app.config

    async def handler(ws):
        await Connection(app, ws).serve()

    return await serve(
        handler, config.host, config.port,
        process_request=make_routes(app),
        select_subprotocol=_select_subprotocol,
        subprotocols=[V2],
        max_size=4 * config.limits.max_frame,   # past the 413 range the socket closes with 1009
        max_queue=32,
        ping_interval=config.ping_interval or None,
        ping_timeout=config.ping_timeout or None,
        close_timeout=5,
        compression=None,   # per-message deflate costs CPU and memory per socket for little gain here
        create_connection=BatchingServerConnection,
    )
