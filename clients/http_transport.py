"""The client's HTTP transport: each action signed afresh and POSTed to `{base}/api/message` as
DAG-CBOR (keep-alive connections through httpx), the CBOR answer decoded; an Error value is
raised as AgentsError(status, message), like the WebSocket transport does.

HTTP carries actions only: subscriptions need the WebSocket (`ws://HOST:PORT/agents/ws`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from seed_agents.protocol.wire import dagcbor

from .errors import AgentsError

if TYPE_CHECKING:
    import httpx

_MAX_DEPTH = 256   # the server is trusted to this depth (see seed_agents.clients.wire)
HEADERS = {"Content-Type": "application/cbor", "Accept": "application/cbor"}


def is_http_url(url: str) -> bool:
    return url.startswith(("http://", "https://"))


class HttpTransport:
    def __init__(self, url: str, sign: Callable[[dict], dict], *, connect_timeout: float = 10.0,
                 request_timeout: float | None = None, **_ignored) -> None:
        base = url.rstrip("/")
        for suffix in ("/api/message", "/agents/api/message", "/agents/ws", "/agents"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        self.url = base
        self.message_url = base + "/api/message"
        self._sign = sign
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._http: httpx.AsyncClient | None = None

    async def open(self) -> None:
        # httpx (and what it pulls in) is a good part of a command's start, and most commands
        # go over the WebSocket: loaded only when an HTTP URL is opened.
        import httpx

        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.request_timeout, connect=self.connect_timeout),
            limits=httpx.Limits(max_keepalive_connections=8, keepalive_expiry=30.0))
        try:
            r = await self._http.get(self.url + "/agents/api/health")
        except httpx.HTTPError as exc:
            await self._http.aclose()
            raise AgentsError.unreachable(self.url, str(exc) or type(exc).__name__) from None
        if r.status_code != 200:
            await self._http.aclose()
            raise AgentsError.unreachable(self.url, f"health probe answered HTTP {r.status_code}")

    @property
    def connected(self) -> bool:
        return self._http is not None and not self._http.is_closed

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def request(self, action: dict) -> dict:
        if not self.connected:
            raise AgentsError.closed(self.url)
        import httpx  # loaded by open()

        body = dagcbor.encode(self._sign(action))
        try:
            r = await self._http.post(self.message_url, content=body, headers=HEADERS)
        except httpx.ConnectError as exc:
            raise AgentsError.unreachable(self.url, str(exc) or type(exc).__name__) from None
        except httpx.HTTPError:
            raise AgentsError.lost(self.url) from None
        try:
            response = dagcbor.decode(r.content, max_size=max(len(r.content), 1), max_depth=_MAX_DEPTH,
                                      max_items=None)
        except Exception:  # noqa: BLE001 - not our server, or a proxy's page
            raise AgentsError(r.status_code if r.status_code >= 400 else 500,
                              f"HTTP {r.status_code} with a body that is not CBOR") from None
        if not isinstance(response, dict) or response.get("_") == "Error" or not r.is_success:
            raise AgentsError.from_response(response if isinstance(response, dict) else {})
        return response

    async def subscribe(self, key: str, after_seq: int | None = None, follower=None):  # noqa: ANN001
        raise AgentsError(400, f"subscriptions need a WebSocket: connect to ws://HOST:PORT/agents/ws "
                               f"to follow {key} (this client talks HTTP to {self.url})")
