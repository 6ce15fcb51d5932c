"""The one exception a client caller handles: `AgentsError(status, message)`.

`status` is the contract status of an `{_: "Error"}` response (400, 401, 403, 404, 409, 413,
429, 500), or `0` when no answer came from the server at all. For status 0, `reason` says why,
so a program (or the CLI) can word it for a person:

- `"unreachable"`: the server could not be reached at `url` (refused, timed out, not a v2 server);
- `"lost"`: the connection dropped while the request was in flight; the request may or may not
  have been applied, so retry writes with the same idempotency id (`clientRequestId`,
  `clientMessageId`) and they take effect at most once;
- `"closed"`: the client was closed.
"""
from __future__ import annotations

NO_RESPONSE = 0


class AgentsError(Exception):
    def __init__(self, status: int, message: str, *, reason: str | None = None,
                 url: str | None = None, cause: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.url = url
        # For "unreachable": "refused", "unknown-host", "timeout", "http-<status>", "scheme",
        # "subprotocol", "os" or "other", so a caller can word each mistake for a person.
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.status}: {self.message}" if self.status else self.message

    def __repr__(self) -> str:
        return f"AgentsError({self.status}, {self.message!r})"

    @classmethod
    def from_response(cls, response: dict) -> "AgentsError":
        status = response.get("status")
        return cls(status if isinstance(status, int) else 500, str(response.get("message", "")))

    @classmethod
    def unreachable(cls, url: str, detail: object = None, *, cause: str | None = None) -> "AgentsError":
        text = f"the Seed Agents server is not reachable at {url}"
        if detail:
            text += f" ({detail})"
        return cls(NO_RESPONSE, text, reason="unreachable", url=url, cause=cause)

    @classmethod
    def lost(cls, url: str) -> "AgentsError":
        return cls(NO_RESPONSE, f"the connection to {url} was lost before the server answered; "
                   "the request may or may not have been applied (retry writes with the same "
                   "idempotency id)", reason="lost", url=url)

    @classmethod
    def closed(cls, url: str) -> "AgentsError":
        return cls(NO_RESPONSE, f"the client for {url} is closed", reason="closed", url=url)


class HistoryError(AgentsError):
    """The history the server sent does not verify against its signed head (reason "history"):
    an event was edited, dropped or reordered, or the head is not signed by the pinned server
    key. `seq` names the first event found wrong, when the check could tell."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(NO_RESPONSE, message, reason="history")
        self.seq = seq
