"""Verifiable history on the client side (docs/protocol.md, "Verifiable history"): following a
session's chain as pages and replays arrive, naming the event a failed check is about, and
exporting a session as a CAR file that `seed-agents verify` checks offline.

The rules themselves are seed_agents.protocol.api.history's; here they meet the client's calls.
"""
from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.api import history
from seed_agents.protocol.api.actions_history import MAX_CHAIN_LIMIT
from seed_agents.protocol.wire.car import header, section
from seed_agents.protocol.wire.principals import principal_from_string, public_key_of

from .errors import HistoryError

Call = Callable[[dict], Awaitable[dict]]


def server_public_key(key_id: str) -> bytes:
    """The Ed25519 public key of a server key id (`z6Mk...`, as health and /api/version show it)."""
    return public_key_of(principal_from_string(key_id))


def event_bytes(event: dict) -> bytes:
    """A decoded SessionEvent's stored bytes: stored events are canonical DAG-CBOR, so encoding
    the decoded value again gives back exactly what the server hashed."""
    return dagcbor.encode(event)


class Follower:
    """One session's chain as this client has seen it: pages and replays extend it, and each
    signed head that comes with them is checked against it (and against the pinned key)."""

    def __init__(self, session_id: str, server_key: bytes | None) -> None:
        self.session_id = session_id
        self.server_key = server_key
        self.check = history.ChainCheck(session_id)
        self.pending: list[bytes] = []   # bodies since the last head that held
        self.start = 1
        self.prev: bytes | None = None

    @property
    def seq(self) -> int:
        return self.check.seq

    def add(self, event: dict, body: bytes | None = None) -> None:
        """`body`: the event's bytes as received, when the frame's strict decoder kept them
        (clients/wire.read_frame: `event` is what they say); otherwise the decoded event is
        encoded again, which gives the same bytes."""
        try:
            if body is None or type(event) is not dict:
                body = event_bytes(event) if body is None else body
                self.check.add(body)
            else:
                self.check.add_decoded(body, event)
        except history.HistoryError as exc:
            raise HistoryError(str(exc), exc.seq) from None
        self.pending.append(body)

    def head(self, value: dict) -> None:
        """Check a signed head; on a mismatch the error's seq is None until `locate` names it."""
        try:
            self.check.check_head(history.read_head(value), self.server_key)
        except history.HistoryError as exc:
            raise HistoryError(str(exc), exc.seq) from None
        self.start, self.prev, self.pending = self.check.seq + 1, self.check.link, []

    async def locate(self, call: Call, error: HistoryError) -> HistoryError:
        """The same error with the seq named: the links the server recorded for the events since
        the last head that held, compared with the events as they arrived."""
        if error.seq is not None or not self.pending:
            return error
        links: list[bytes | None] = []
        after = self.start - 1
        while len(links) < len(self.pending):
            page = await call({"_": "GetSessionChain", "sessionId": self.session_id, "afterSeq": after,
                               "limit": min(len(self.pending) - len(links), MAX_CHAIN_LIMIT)})
            entries = page.get("links") or []
            if not entries:
                break
            links += [history.cid_from_text(e["link"]) if "link" in e else None for e in entries]
            after = entries[-1]["seq"]
        bad = history.first_bad_seq(self.session_id, self.pending, links, start=self.start, prev=self.prev)
        if bad is None:
            return error
        return HistoryError(f"event {bad} of session {self.session_id} was edited, dropped or reordered: {error}", bad)


async def export_session(call: Call, session_id: str, path: str) -> history.Proof:
    """Write the session as a CAR file at `path` (via a temporary file, renamed when whole), and
    return what it proves, checked as `seed-agents verify` checks it."""
    head = await call({"_": "GetSessionHead", "sessionId": session_id})
    if not head.get("seq"):
        raise HistoryError(f"session {session_id} has no events to export")
    key_id = head.get("serverKey")
    if type(key_id) is not str:
        raise HistoryError("the server did not name the key that signs its heads")
    signed = {k: head[k] for k in ("sessionId", "seq", "head", "ts", "sig")}
    root = history.manifest(signed, key_id)
    root_cid = history.cid_bytes(root)
    tmp = f"{path}.partial"
    with open(tmp, "wb") as out:
        out.write(header([root_cid]))
        out.write(section(root_cid, root))
        after, links, envelopes = 0, {}, {}
        while after < signed["seq"]:   # the links (and envelopes) the server recorded, up to the head
            page = await call({"_": "GetSessionChain", "sessionId": session_id, "afterSeq": after})
            entries = [e for e in page.get("links") or [] if e["seq"] <= signed["seq"]]
            if not entries:
                break
            for entry in entries:
                links[entry["seq"]] = history.cid_from_text(entry["link"]) if "link" in entry else None
                if "envelope" in entry:
                    envelopes[entry["seq"]] = entry["envelope"]
            after = entries[-1]["seq"]
        # Blocks as the server holds the rows: the k-th event served is event k's block, whatever
        # it says of itself, so a row that went missing or moved shows in the export as it is.
        after, position = 0, 0
        while position < signed["seq"]:
            page = await call({"_": "GetSession", "sessionId": session_id, "afterSeq": after})
            events = page.get("events") or []
            if not events:
                break
            for event in events[:signed["seq"] - position]:
                position += 1
                body = event_bytes(event)
                block = history.block(session_id, position, links.get(position - 1), body, event["createdAt"])
                out.write(section(history.cid_bytes(block), block))
                envelope = envelopes.get(position)
                if envelope is not None:
                    out.write(section(history.cid_bytes(envelope), envelope))
            after = page.get("nextAfterSeq") or events[-1]["seq"]
    os.replace(tmp, path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return history.verify_export(data, key_id)
    except history.HistoryError as exc:
        raise HistoryError(f"the export does not verify: {exc}", exc.seq) from None


def verify_file(path: str, server_key: str | None = None) -> history.Proof:
    """Check an export offline (no server): HistoryError naming the seq when it does not hold."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return history.verify_export(data, server_key)
    except history.HistoryError as exc:
        raise HistoryError(str(exc), exc.seq) from None
