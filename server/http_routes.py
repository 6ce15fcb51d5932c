"""The HTTP route table: every request on the one port that is not an action (`POST
/api/message`) nor the WebSocket upgrade is answered through it. Built once at start
(server/main.py): the transport registers its own answers (front page, health, version,
metrics: server/transport/http_answers.py) by route kind, and a feature that takes requests
under a path of its own registers an `Endpoint` for that prefix (webhooks:
server/triggers/webhook.py). The transport reads the request within the endpoint's body cap
and hands it over complete; it knows no route by name.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from seed_agents.protocol.wire.framing_http import HttpFraming, Route


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A complete request, as a route's answer sees it."""
    route: Route
    method: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes                  # empty unless the endpoint reads bodies (body_cap)
    address: str                 # the client's IP address
    keep_alive: bool
    framing: HttpFraming         # builds the answer's bytes (status, CORS headers, keep-alive)


Answer = Callable[[HttpRequest], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Requests under `prefix`: a POST is route kind `kind`, any other method `kind_method`
    (answered by the same function, whose body is not read)."""
    prefix: str
    kind: str
    answer: Answer
    body_cap: int = 0            # bytes of a POST body read; more is 413, declared or as it comes
    what: str = "request"        # in the 413's message: "<what> body of N bytes is over..."
    limited_alone: bool = False  # its POSTs have a rate limit of their own: not a probe


class HttpRoutes:
    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.endpoints: list[Endpoint] = []

    def answer(self, kind: str, answer: Answer) -> None:
        """The answer to a route kind the HTTP framing names (index, health, version, metrics)."""
        if kind in self.answers:
            raise ValueError(f"HTTP route kind {kind!r} is registered twice")
        self.answers[kind] = answer

    def add(self, endpoint: Endpoint) -> None:
        for other in self.endpoints:
            if endpoint.prefix.startswith(other.prefix) or other.prefix.startswith(endpoint.prefix):
                raise ValueError(f"HTTP prefix {endpoint.prefix!r} overlaps {other.prefix!r}")
        self.endpoints.append(endpoint)
        self.answers[endpoint.kind] = self.answers[endpoint.kind + "_method"] = endpoint.answer

    def route(self, framing: HttpFraming, method: str, target: str,
              headers: tuple[tuple[bytes, bytes], ...]) -> tuple[Route, Endpoint | None]:
        path = target.split("?", 1)[0]
        for endpoint in self.endpoints:
            if path.startswith(endpoint.prefix):
                return Route(endpoint.kind if method == "POST" else endpoint.kind + "_method", path), endpoint
        return framing.route_request(method, target, headers), None
