"""The HTTP framing (CONTRACT section 3): routes, the checks made on a request's head before its
body is read, and the bytes of every answer. Pure: no sockets; `server/transport/httpconn.py` moves the bytes.

An action is `POST /api/message` (or `/agents/api/message`) with one DAG-CBOR envelope as the
body; its answer is the CBOR response value, with the HTTP status equal to an Error's `status`.
Every answer carries the CORS headers, so the Seed web app can call from its own origin.
"""
from __future__ import annotations

import http
import json
from dataclasses import dataclass

from . import dagcbor
from .events import error_response
from .frame_limits import envelope_limit, frame_limit, largest
from .framing_types import Refusal, Request
from .v2 import peek_action_name
from .wire_values import encode_pieces, encode_value

MESSAGE_PATHS = frozenset({"/api/message", "/agents/api/message"})
HEALTH_PATHS = frozenset({"/api/health", "/agents/api/health"})
VERSION_PATHS = frozenset({"/api/version", "/agents/api/version"})
METRICS_PATH = "/metrics"
WS_PATH = "/agents/ws"
CBOR = "application/cbor"

CORS_HEADERS = (
    b"Access-Control-Allow-Origin: *\r\n"
    b"Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
    b"Access-Control-Allow-Headers: Content-Type, Accept\r\n"
)
CORS_PAIRS = (("Access-Control-Allow-Origin", "*"),
              ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
              ("Access-Control-Allow-Headers", "Content-Type, Accept"))
PREFLIGHT_MAX_AGE = 600   # seconds a browser may reuse a preflight answer


INDEX_PATH = "/"


@dataclass(frozen=True, slots=True)
class Route:
    """What a request's method and path ask for: `kind` is one of message, health, version,
    metrics, ws, index, preflight, not_found, bad_method. `json`: the client asked for JSON
    (`Accept: application/json`, not CBOR), so refusals on the message path are JSON too;
    `host`: its Host header (the front page tells the desktop that address)."""
    kind: str
    path: str
    json: bool = False
    host: str = ""


def _known(path: str) -> bool:
    return path in MESSAGE_PATHS or path in HEALTH_PATHS or path in VERSION_PATHS \
        or path == METRICS_PATH or path == WS_PATH


def wants_json(accept: str | None) -> bool:
    """An Accept header that names JSON and not CBOR (`*/*` and none ask for nothing)."""
    types = {part.split(";", 1)[0].strip().lower() for part in (accept or "").split(",")}
    return "application/json" in types and CBOR not in types


def media_type(content_type: str | None) -> str:
    """`application/cbor; x=y` -> `application/cbor` (lower case)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


class HttpFraming:
    """One per server: it holds the limits the head checks need."""

    name = "http"

    def __init__(self, *, max_frame: int, max_depth: int, metrics: bool = True) -> None:
        self.max_frame = max_frame
        self.max_depth = max_depth
        self.metrics = metrics   # /metrics on this port (--metrics-listen same)

    # -- reading ---------------------------------------------------------------------------
    def route(self, method: str, target: str) -> Route:
        path = target.split("?", 1)[0]
        if not _known(path):
            return Route("not_found", path)
        if method == "OPTIONS":
            return Route("preflight", path)
        if path in MESSAGE_PATHS:
            return Route("message" if method == "POST" else "bad_method", path)
        if method != "GET":
            return Route("bad_method", path)
        if path in HEALTH_PATHS:
            return Route("health", path)
        if path in VERSION_PATHS:
            return Route("version", path)
        if path == METRICS_PATH:
            return Route("metrics", path)
        return Route("ws", path)

    def route_request(self, method: str, target: str, headers=()) -> Route:
        """`route`, plus what the request's head says about the client (`headers`: its
        (name, value) byte pairs; only Accept and Host are read), the front page, and /metrics
        when it is served elsewhere or not at all (--metrics-listen)."""
        accept = host = b""
        for name, value in headers:
            lname = name.lower()
            if lname == b"accept":
                accept = value
            elif lname == b"host":
                host = value
        path = target.split("?", 1)[0]
        if path == INDEX_PATH:
            route = Route("index" if method == "GET" else "preflight" if method == "OPTIONS" else "bad_method", path)
        else:
            route = self.route(method, target)
            if route.path == METRICS_PATH and not self.metrics:
                route = Route("not_found", path)
        return Route(route.kind, route.path, wants_json(accept.decode("latin-1")), host.decode("latin-1"))

    def check_head(self, content_type: str | None, content_length: int | None) -> Refusal | None:
        """The checks made before any of the body is read: 415, then 413 on the declared size
        (a chunked body is cut at the limit as it arrives, see `body_too_large`)."""
        if media_type(content_type) != CBOR:
            return Refusal(None, error_response(415, f"the body must be {CBOR} (a DAG-CBOR SignedActionEnvelope); "
                                               f"got {content_type or 'no Content-Type'}"))
        if content_length is not None and content_length > largest(self.max_frame):
            return self.body_too_large(content_length)   # (its action's own limit: `read`)
        return None

    def body_too_large(self, size: int, head: bytes = b"") -> Refusal:
        limit = envelope_limit(head, self.max_frame) if head else self.max_frame
        return Refusal(None, error_response(413, f"body of {size} bytes is over the limit of {limit}"))

    def body_limit(self, pieces: list[bytes]) -> int:
        """The limit of a body whose first pieces are `pieces`: its action's (an upload may be
        larger), read from its first bytes."""
        head = bytearray()
        for piece in pieces:
            head += piece[:256 - len(head)]
            if len(head) >= 256:
                break
        return envelope_limit(bytes(head), self.max_frame)

    def read(self, body: bytes) -> Request | Refusal:
        """A complete body: an envelope for the pipeline, or Subscribe's 400 (a subscription
        needs a socket to deliver on). Anything else, garbage included, goes to the pipeline,
        which answers with the contract's statuses."""
        name = peek_action_name(body)
        if len(body) > self.max_frame and len(body) > frame_limit(name, self.max_frame):
            return self.body_too_large(len(body))
        if name is None:
            try:   # not canonical: decode to learn the action's name (verification decodes again)
                value = dagcbor.decode(body, max_size=self.max_frame, max_depth=self.max_depth)
                name = value["action"]["_"] if type(value) is dict and type(value.get("action")) is dict else None
            except Exception:  # noqa: BLE001 - the pipeline reports what is wrong with it
                name = None
        if name == "Subscribe":
            return Refusal(None, error_response(400, "Subscribe is not available over HTTP: open a WebSocket at "
                                               f"{WS_PATH} and send it there"))
        return Request(None, body)

    # -- writing ---------------------------------------------------------------------------
    def response(self, value: dict, *, keep_alive: bool = True) -> bytes:
        """A response value as a complete HTTP answer: CBOR, status = an Error's status."""
        status = value.get("status", 500) if value.get("_") == "Error" else 200
        if type(status) is not int or not 200 <= status <= 599:
            status = 500
        return self.http_message(status, encode_value(value), CBOR, keep_alive=keep_alive)

    def response_pieces(self, value: dict, *, keep_alive: bool = True) -> list[bytes]:
        """`response` as pieces to write in turn: the head first (CORS lines included), then
        the body's pieces as encoded (a session's stored events are not joined into one copy)."""
        status = value.get("status", 500) if value.get("_") == "Error" else 200
        if type(status) is not int or not 200 <= status <= 599:
            status = 500
        body = encode_pieces(value)
        return [self.http_head(status, sum(map(len, body)), CBOR, keep_alive=keep_alive), *body]

    def refusal(self, refusal: Refusal, *, keep_alive: bool = True, route: Route | None = None) -> bytes:
        """A refusal before the pipeline (415, 413, 403, Subscribe's 400): CBOR, or JSON
        (`{"status": "error", "code": 415, "message": ...}`) when the client asked for JSON."""
        if route is not None and route.json:
            value = refusal.value
            return self.json(value["status"], {"status": "error", "code": value["status"],
                                               "message": value["message"]}, keep_alive=keep_alive)
        return self.response(refusal.value, keep_alive=keep_alive)

    def json(self, status: int, value: dict, *, keep_alive: bool = True, extra: bytes = b"") -> bytes:
        body = json.dumps(value, separators=(",", ":")).encode()
        return self.http_message(status, body, "application/json", keep_alive=keep_alive, extra=extra)

    def not_found(self, path: str, *, keep_alive: bool = True) -> bytes:
        return self.json(404, {"status": "error", "message": f"not found: {path}"}, keep_alive=keep_alive)

    def bad_method(self, route: Route, method: str, *, keep_alive: bool = True) -> bytes:
        allow = "POST, OPTIONS" if route.path in MESSAGE_PATHS else "GET, OPTIONS"
        message = f"{method} is not allowed on {route.path} (allowed: {allow})"
        extra = f"Allow: {allow}\r\n".encode()
        if route.path in MESSAGE_PATHS and not route.json:
            return self.http_message(405, encode_value(error_response(405, message)), CBOR,
                               keep_alive=keep_alive, extra=extra)
        return self.json(405, {"status": "error", "message": message}, keep_alive=keep_alive, extra=extra)

    def preflight(self, *, keep_alive: bool = True) -> bytes:
        return self.http_message(204, b"", None, keep_alive=keep_alive,
                           extra=f"Access-Control-Max-Age: {PREFLIGHT_MAX_AGE}\r\n".encode())

    def too_many_probes(self, *, keep_alive: bool = False) -> bytes:
        """A GET probe past its connection's or its address's rate (docs/operations.md
        "Security"); the connection closes after it, so a pipelined flood ends there."""
        return self.json(429, {"status": "error", "message": "rate limit: too many requests that are not "
                                                             "actions; slow down"},
                         keep_alive=keep_alive, extra=b"Retry-After: 1\r\n")

    def continue_(self) -> bytes:
        """The interim answer to `Expect: 100-continue` once the head checks passed."""
        return b"HTTP/1.1 100 Continue\r\n\r\n"

    @staticmethod
    def http_message(status: int, body: bytes, content_type: str | None, *, keep_alive: bool = True,
               extra: bytes = b"") -> bytes:
        return HttpFraming.http_head(status, len(body), content_type, keep_alive=keep_alive, extra=extra,
                                     body=body)

    @staticmethod
    def http_head(status: int, length: int, content_type: str | None, *, keep_alive: bool = True,
                  extra: bytes = b"", body: bytes = b"") -> bytes:
        """The head of an answer whose body is `length` bytes (followed by `body`, when given)."""
        head = [f"HTTP/1.1 {status} {_phrase(status)}\r\n".encode()]
        if content_type is not None:
            head.append(f"Content-Type: {content_type}\r\n".encode())
        if status != 204:
            head.append(f"Content-Length: {length}\r\n".encode())
        head.append(CORS_HEADERS)
        head.append(extra)
        head.append(b"Connection: keep-alive\r\n\r\n" if keep_alive else b"Connection: close\r\n\r\n")
        head.append(body)
        return b"".join(head)


_ANY_ORIGIN = b"Access-Control-Allow-Origin: *\r\n"


def with_origin(answer: bytes, origin: str | None) -> bytes:
    """An answer whose CORS headers name `origin` (the request's, matched against
    `--allowed-origins`; `*` for a request from no page) instead of `*`, with `Vary: Origin` so
    caches keep them apart; None (a page the list refuses) leaves the allow-origin line out. The line
    replaced is the head's: it comes before the body."""
    line = (b"Access-Control-Allow-Origin: " + origin.encode("latin-1") + b"\r\nVary: Origin\r\n"
            if origin else b"Vary: Origin\r\n")
    return answer.replace(_ANY_ORIGIN, line, 1)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Status"
