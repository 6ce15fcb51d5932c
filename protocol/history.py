"""Verifiable history: each session is a hash-linked chain of its events, with signed heads.

Pure: bytes in, values out. docs/protocol.md, "Verifiable history", is the text a verifier is
written from; this module is that text in code, used by the server (links at append, heads)
and by clients (checking replays, exports, `seed-agents verify`).

Every durable event has a link: the CID (CIDv1, dag-cbor, sha2-256) of the block

    {sessionId, seq, prev: <link of seq - 1, absent at seq 1>, event: <the stored event>, createdAt}

where `event` is the stored SessionEvent exactly as the server keeps and replays it
({id, sessionId, seq, event, createdAt}). A head `{sessionId, seq, head: <link at seq>, ts}` is
signed by the server's Ed25519 key over its DAG-CBOR encoding with the domain field
`type: "SeedAgentsSessionHead"`, so the signature cannot be mistaken for any other signed value.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from multiformats import CID
from nacl.bindings import crypto_sign_open
from nacl.exceptions import CryptoError

from .dagcbor import decode, decode_trusted, encode, encode_head
from .errors import ProtocolError
from .keys import Keypair

HEAD_TYPE = "SeedAgentsSessionHead"
_CID_PREFIX = b"\x01\x71\x12\x20"   # CIDv1, dag-cbor, sha2-256, 32-byte digest
_TAG42 = b"\xd8\x2a"

# The block's keys in DAG-CBOR order (length first, then bytes): seq, prev, event, createdAt,
# sessionId. Each key's encoding is fixed, so a block is built by concatenation around the
# stored event's bytes, which are already canonical: no decode and re-encode per append.
_K_SEQ = encode("seq")
_K_PREV = encode("prev")
_K_EVENT = encode("event")
_K_CREATED = encode("createdAt")
_K_SESSION = encode("sessionId")


class HistoryError(ValueError):
    """A chain or head that does not verify; `seq` names the first event found wrong (or None)."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


def cid_bytes(data: bytes) -> bytes:
    """The binary CID (dag-cbor, sha2-256) of a block's bytes."""
    return _CID_PREFIX + hashlib.sha256(data).digest()


def cid_text(cid: bytes) -> str:
    """A binary CID as its base32 text ('bafy...')."""
    return str(CID.decode(cid))


def cid_from_text(text: str) -> bytes:
    try:
        cid = CID.decode(text)
    except (ValueError, KeyError) as exc:
        raise HistoryError(f"not a CID: {text[:80]!r}") from exc
    return bytes(cid)


def block(session_id: str, seq: int, prev: bytes | None, body: bytes, created_at: int) -> bytes:
    """The canonical DAG-CBOR bytes of an event's block (`body`: the stored event's bytes)."""
    parts = [b"\xa4" if prev is None else b"\xa5", _K_SEQ, encode(seq)]
    if prev is not None:
        link = b"\x00" + prev
        parts += [_K_PREV, _TAG42, encode_head(2, len(link)), link]
    parts += [_K_EVENT, body, _K_CREATED, encode(created_at), _K_SESSION, encode(session_id)]
    return b"".join(parts)


def link(session_id: str, seq: int, prev: bytes | None, body: bytes, created_at: int) -> bytes:
    """The event's link: the binary CID of its block."""
    return cid_bytes(block(session_id, seq, prev, body, created_at))


def head_payload(session_id: str, seq: int, head: bytes, ts: int) -> bytes:
    """The bytes a head's signature covers."""
    return encode({"type": HEAD_TYPE, "sessionId": session_id, "seq": seq, "head": CID.decode(head), "ts": ts})


def sign_head(key: Keypair, session_id: str, seq: int, head: bytes, ts: int) -> dict:
    """A signed head as the wire carries it: {sessionId, seq, head: CID text, ts, sig}."""
    sig = key.sign(head_payload(session_id, seq, head, ts))
    return {"sessionId": session_id, "seq": seq, "head": cid_text(head), "ts": ts, "sig": sig}


@dataclass(frozen=True)
class Head:
    session_id: str
    seq: int
    head: bytes      # binary CID
    ts: int
    sig: bytes


def read_head(value: object) -> Head:
    """A signed head from its wire form (checked for shape, not yet for its signature)."""
    if not isinstance(value, dict):
        raise HistoryError("a head must be a map")
    sid, seq, head, ts, sig = (value.get(k) for k in ("sessionId", "seq", "head", "ts", "sig"))
    if type(sid) is not str or type(seq) is not int or seq < 0 or type(ts) is not int:
        raise HistoryError("a head needs sessionId (text), seq and ts (integers)")
    if type(sig) is not bytes or len(sig) != 64:
        raise HistoryError("a head's sig must be 64 bytes")
    if isinstance(head, CID):
        raw = bytes(head)
    elif type(head) is str:
        raw = cid_from_text(head)
    else:
        raise HistoryError("a head's head must be a CID")
    return Head(sid, seq, raw, ts, sig)


def verify_head(head: Head, server_key: bytes) -> None:
    """Raises HistoryError unless `server_key` (32-byte Ed25519 public key) signed `head`."""
    try:
        crypto_sign_open(head.sig + head_payload(head.session_id, head.seq, head.head, head.ts), server_key)
    except (CryptoError, ValueError) as exc:
        raise HistoryError(f"the head at seq {head.seq} is not signed by the server key", head.seq) from exc


def event_fields(body: bytes) -> tuple[str, int, int]:
    """(sessionId, seq, createdAt) of a stored event's bytes."""
    event = decode_trusted(body)
    if not isinstance(event, dict):
        raise HistoryError("a stored event is not a map")
    sid, seq, created = event.get("sessionId"), event.get("seq"), event.get("createdAt")
    if type(sid) is not str or type(seq) is not int or type(created) is not int:
        raise HistoryError("a stored event lacks sessionId, seq or createdAt")
    return sid, seq, created


class ChainCheck:
    """Follows one session's chain as events arrive (a replay, pages, an export), from seq 1 or
    from a link the caller already trusts; `check_head` compares a signed head with it."""

    def __init__(self, session_id: str, seq: int = 0, link: bytes | None = None) -> None:
        self.session_id = session_id
        self.seq = seq
        self.link = link

    def add(self, body: bytes) -> bytes:
        sid, seq, created = event_fields(body)
        if sid != self.session_id:
            raise HistoryError(f"event {seq} belongs to session {sid}, not {self.session_id}", seq)
        if seq != self.seq + 1:
            raise HistoryError(f"expected event {self.seq + 1}, got event {seq}: the history has a gap "
                               "or is out of order", self.seq + 1)
        self.link = link(sid, seq, self.link, body, created)
        self.seq = seq
        return self.link

    def extend(self, bodies: Iterable[bytes]) -> None:
        for body in bodies:
            self.add(body)

    def check_head(self, head: Head, server_key: bytes | None) -> None:
        """The head names this chain where it now stands, and (with a key) the server signed it."""
        if head.session_id != self.session_id:
            raise HistoryError(f"the head is for session {head.session_id}, not {self.session_id}")
        if head.seq != self.seq:
            raise HistoryError(f"the head covers event {head.seq} but the history received ends at {self.seq}",
                               min(head.seq, self.seq) + 1)
        if head.head != self.link:
            raise HistoryError(f"the history does not hash to the signed head at seq {head.seq}: an event "
                               "was edited, dropped or reordered", None)
        if server_key is not None:
            verify_head(head, server_key)


def first_bad_seq(session_id: str, bodies: list[bytes], links: list[bytes | None]) -> int | None:
    """Where a stored chain stops holding: the first seq whose body or recorded link is wrong
    (recomputed from seq 1); None when every link is right. Used to name the seq a tamper hit."""
    prev = None
    for i, body in enumerate(bodies, start=1):
        try:
            sid, seq, created = event_fields(body)
        except HistoryError:
            return i
        if sid != session_id or seq != i:
            return i
        mine = link(sid, seq, prev, body, created)
        if links[i - 1] is not None and links[i - 1] != mine:
            return i
        prev = mine
    return None


def envelope_cid(envelope: dict) -> str:
    """The CID text of a signed envelope's canonical bytes (what a user event records)."""
    return cid_text(cid_bytes(encode(envelope)))


def decode_strict(data: bytes) -> object:
    try:
        return decode(data)
    except ProtocolError as exc:
        raise HistoryError(f"not DAG-CBOR: {exc.message}") from exc
