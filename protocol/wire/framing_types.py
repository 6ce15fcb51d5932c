"""The framings' interface: what a framing reads out of a client's bytes (the same shapes for
HTTP, v1 and v2) and the `Framing` protocols the three implement (protocol/wire/framing_http.py,
framing_v1.py, framing_v2.py). A fourth framing implements `SocketFraming` (a WebSocket
subprotocol) or `Framing` (another transport); tests/protocol/test_framing_protocol.py checks each
against its protocol.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Request:
    """A signed action to run: `id` is v2's request id (None in v1); `envelope` is the frame's
    bytes, or the decoded envelope map when it could not be sliced out canonically."""
    id: int | None
    envelope: bytes | dict


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """v2's unsigned control frame."""
    id: int
    key: object


@dataclass(frozen=True, slots=True)
class Refusal:
    """A frame answered without running anything: `id` when the request's id could be read."""
    id: int | None
    value: dict


class Framing(Protocol):
    """Every framing: a request read out of what a client sent, and a refusal written back."""

    name: str

    def read(self, message: bytes | str, /) -> Request | Unsubscribe | Refusal:
        """What the client sent (a socket's message, an HTTP body): a signed action to run, v2's unsubscribe, or a refusal."""
        ...

    def refusal(self, refusal: Refusal) -> bytes | str:
        """The message refusing a request that ran nothing."""
        ...


class SocketFraming(Framing, Protocol):
    """A WebSocket subprotocol (v1: JSON text, v2: CBOR): the messages of one socket. Only a
    framing whose `read` gives `Unsubscribe` (v2) also has `unsubscribed(request)`."""

    subprotocol: str | None
    concurrent: bool        # requests on one socket may run concurrently (answered by id)
    replay_derives: bool    # a replayed event's frame is derived from its stored bytes (worth keeping)

    def connected(self, now_ms: int) -> bytes | str | None:
        """The greeting sent when the socket opens, if the framing has one."""
        ...

    def reply(self, request: Request, response: dict, action: str | None) -> bytes | str:
        """The message carrying an action's response to the request that asked for it."""
        ...

    def subscribed(self, request: Request, key: str, account_id: str, response: dict) -> bytes | str:
        """The message confirming a subscription."""
        ...

    def subscribe_failed(self, request: Request, error: dict) -> bytes | str:
        """The message refusing a subscription."""
        ...

    def error_event(self, message: str, status: int) -> bytes | str:
        """An error not tied to a request (the socket's own)."""
        ...

    def event(self, value: dict, body: bytes | None = None) -> bytes | str:
        """A live event (its stored bytes spliced in when given)."""
        ...

    def replay(self, key: str, rows: list) -> list:
        """Stored events of a key as messages [(message, last seq)], batched where the framing can."""
        ...

    def replayed(self, key: str, seq: int, head: dict | None = None) -> bytes | str | None:
        """The message marking the end of a key's replay, if the framing has one."""
        ...


class HttpMessages(Framing, Protocol):
    """HTTP: an action's response as a whole HTTP message, and the other answers of the port."""

    def response(self, value: dict, *, keep_alive: bool = True) -> bytes:
        """An action's response value as an HTTP message (status from an Error's status)."""
        ...

    @staticmethod
    def http_message(status: int, body: bytes, content_type: str | None, *, keep_alive: bool = True,
                     extra: bytes = b"") -> bytes:
        """Any HTTP message: status line, headers (CORS included) and body."""
        ...
