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
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from multiformats import CID
from nacl.bindings import crypto_sign_open
from nacl.exceptions import CryptoError

from ..wire.cids import PREFIX as CID_PREFIX
from ..wire.cids import cid_bytes, cid_text, sha256  # noqa: F401  (the chain's CIDs; callers import them from here too)
from ..wire.dagcbor import decode, decode_trusted, encode, encode_head
from ..wire.errors import ProtocolError
from ..wire.keys import Keypair

HEAD_TYPE = "SeedAgentsSessionHead"
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


def cid_from_text(text: str) -> bytes:
    try:
        cid = CID.decode(text)
    except (ValueError, KeyError) as exc:
        raise HistoryError(f"not a CID: {text[:80]!r}") from exc
    return bytes(cid)


def _uint(n: int) -> bytes:
    """DAG-CBOR of a non-negative integer (seq, createdAt), without the general encoder."""
    return encode_head(0, n) if n >= 0 else encode(n)


# The 41 bytes in front of a 36-byte CID link in a block: `prev`, tag 42, a byte string of 37.
_PREV_LINK = _K_PREV + _TAG42 + encode_head(2, 37) + b"\x00"
_SEQ_HEAD = b"\xa5" + _K_SEQ   # a block with `prev` (five keys), up to its seq
_SMALL_UINT = tuple(encode_head(0, n) for n in range(256))
_pack_u16 = struct.Struct(">BH").pack   # a seq from 256 to 65535: 0x19 and 2 bytes
_pack_u64 = struct.Struct(">BQ").pack   # a createdAt in ms (past 2^32): 0x1b and 8 bytes
# Fresh hash objects by copying (protocol/wire/cids.py says why not hashlib.sha256()).
_SHA256 = hashlib.sha256()


def block(session_id: str, seq: int, prev: bytes | None, body: bytes, created_at: int,
          session_bytes: bytes | None = None) -> bytes:
    """The canonical DAG-CBOR bytes of an event's block (`body`: the stored event's bytes;
    `session_bytes`: `session_id` already encoded, for a caller that links many events)."""
    tail = _K_EVENT + body + _K_CREATED + _uint(created_at) + _K_SESSION + (session_bytes or encode(session_id))
    if prev is None:
        return b"\xa4" + _K_SEQ + _uint(seq) + tail
    if len(prev) == 36:
        return b"\xa5" + _K_SEQ + _uint(seq) + _PREV_LINK + prev + tail
    link = b"\x00" + prev
    return b"\xa5" + _K_SEQ + _uint(seq) + _K_PREV + _TAG42 + encode_head(2, len(link)) + link + tail


def link(session_id: str, seq: int, prev: bytes | None, body: bytes, created_at: int,
         session_bytes: bytes | None = None) -> bytes:
    """The event's link: the binary CID of its block."""
    if prev is None or len(prev) != 36 or seq < 0 or created_at < 0 or created_at >> 64:
        return CID_PREFIX + sha256(block(session_id, seq, prev, body, created_at, session_bytes))
    return _link_after(prev, seq, body, created_at, _K_SESSION + (session_bytes or encode(session_id)))


def _link_after(prev: bytes, seq: int, body: bytes, created_at: int, tail: bytes) -> bytes:
    """`link` of an event after the first (`prev` a 36-byte CID; 0 <= created_at < 2^64; `tail`:
    the block's sessionId key and value). The block is hashed in three pieces around the stored
    event's bytes instead of being built: the same bytes as `block`'s, none of the event's
    copied (an append's and a verifying replay's path)."""
    h = _SHA256.copy()
    h.update(b"".join((_SEQ_HEAD, _SMALL_UINT[seq] if seq < 256 else _pack_u16(0x19, seq) if seq < 65536
                       else encode_head(0, seq), _PREV_LINK, prev, _K_EVENT)))
    h.update(body)
    h.update(b"".join((_K_CREATED, _pack_u64(0x1B, created_at) if created_at >> 32 else encode_head(0, created_at),
                       tail)))
    return CID_PREFIX + h.digest()


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


_BODY_HEAD = b"\xa5" + encode("id")   # a stored event: {id, seq, event, createdAt, sessionId}
_K_ID_SEQ = encode("seq")


def _fields_fast(body: bytes, session_tail: bytes) -> tuple[int, int] | None:
    """(seq, createdAt) read straight from a stored event's canonical layout, or None when the
    bytes are laid out otherwise (then the caller decodes). Whatever it reads only goes into the
    block being hashed, so a misreading can only fail a check, never pass a wrong event."""
    if not body.startswith(_BODY_HEAD) or not body.endswith(session_tail):
        return None
    head = body[4]
    if 0x60 <= head <= 0x77:          # the id: a text of at most 23 bytes
        pos = 5 + head - 0x60
    elif head == 0x78:
        pos = 6 + body[5]
    else:
        return None
    if body[pos:pos + 4] != _K_ID_SEQ:
        return None
    pos += 4
    first = body[pos]
    if first < 0x18:
        seq = first
    elif first == 0x18:
        seq = body[pos + 1]
    elif first == 0x19:
        seq = int.from_bytes(body[pos + 1:pos + 3], "big")
    elif first == 0x1a:
        seq = int.from_bytes(body[pos + 1:pos + 5], "big")
    else:
        return None
    end = len(body) - len(session_tail)
    if body[end - 9] != 0x1b or body[end - 19:end - 9] != _K_CREATED:   # createdAt: ms, past 2^32
        return None
    return seq, int.from_bytes(body[end - 8:end], "big")


class ChainCheck:
    """Follows one session's chain as events arrive (a replay, pages, an export), from seq 1 or
    from a link the caller already trusts; `check_head` compares a signed head with it."""

    def __init__(self, session_id: str, seq: int = 0, link: bytes | None = None) -> None:
        self.session_id = session_id
        self.seq = seq
        self.link = link
        self._session = encode(session_id)
        self._tail = _K_SESSION + self._session

    def add(self, body: bytes) -> bytes:
        fast = _fields_fast(body, self._tail)
        if fast is None:
            sid, seq, created = event_fields(body)
            if sid != self.session_id:
                raise HistoryError(f"event {seq} belongs to session {sid}, not {self.session_id}", seq)
        else:
            seq, created = fast
        if seq != self.seq + 1:
            raise HistoryError(f"expected event {self.seq + 1}, got event {seq}: the history has a gap "
                               "or is out of order", self.seq + 1)
        self.link = link(self.session_id, seq, self.link, body, created, self._session)
        self.seq = seq
        return self.link

    def add_decoded(self, body: bytes, event: dict) -> bytes:
        """`add` for a caller that holds `body` decoded by a strict decoder (`event`: what the
        bytes say, as clients/wire.read_frame gives both), so seq and createdAt come from the
        decoded map instead of the bytes. Only the block's bytes are hashed, so a caller's
        mismatch could only fail the chain, never pass a wrong event; anything unexpected goes
        to `add`, which names it."""
        seq, created = event.get("seq"), event.get("createdAt")
        prev = self.link
        if (type(seq) is not int or type(created) is not int or seq != self.seq + 1 or created < 0 or created >> 64
                or event.get("sessionId") != self.session_id or prev is None or len(prev) != 36):
            return self.add(body)
        self.link = _link_after(prev, seq, body, created, self._tail)
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


def first_bad_seq(session_id: str, bodies: list[bytes], links: list[bytes | None], *,
                  start: int = 1, prev: bytes | None = None) -> int | None:
    """Where a stored chain stops holding: the first seq (from `start`, after `prev`) whose body
    is out of place or does not hash to the link the server recorded for it; None when all
    hold. What names the seq a tamper hit."""
    for i, body in enumerate(bodies):
        expected = start + i
        try:
            sid, seq, created = event_fields(body)
        except HistoryError:
            return expected
        if sid != session_id or seq != expected:
            return expected
        mine = link(sid, seq, prev, body, created)
        if i >= len(links) or links[i] != mine:
            return expected
        prev = mine
    return None


def decode_strict(data: bytes) -> object:
    try:
        return decode(data)
    except ProtocolError as exc:
        raise HistoryError(f"not DAG-CBOR: {exc.message}") from exc


# -- exports ---------------------------------------------------------------------------------
# A session export is a CAR file (protocol/wire/car.py) whose root is a manifest block
#   {type: "SeedAgentsSessionExport", version: 1, sessionId, serverKey, head: <signed head, its
#    `head` a CID link>}
# followed by every event's block (its `prev` the link the server stored for the event before)
# and the canonical bytes of every user envelope the events name.

EXPORT_TYPE = "SeedAgentsSessionExport"


def manifest(signed: dict, server_key_id: str) -> bytes:
    """The export's root block for a signed head (its wire form) and the server key's id."""
    head = {**signed, "head": CID.decode(cid_from_text(signed["head"]))}
    return encode({"type": EXPORT_TYPE, "version": 1, "sessionId": signed["sessionId"],
                   "serverKey": server_key_id, "head": head})


@dataclass(frozen=True)
class Proof:
    """What a verified export proves (`seed-agents verify` prints it)."""

    session_id: str
    events: int
    user_events: int          # user messages whose envelope the export holds, each checked
    unsigned_user_events: int  # user messages from before envelopes were kept (not provable)
    accounts: tuple[str, ...]  # the accounts that signed those envelopes
    server_key: str
    head: str
    head_ts: int


def verify_export(data: bytes, server_key: str | None = None) -> Proof:
    """Check an export offline; raises HistoryError naming the first seq found wrong.
    `server_key` (`z6Mk...`): the key the head must be signed by; None trusts the one the
    export names (the proof then says which key that is, for the reader to recognise)."""
    from ..wire.car import CarError, read  # (only exports need the archive format)
    from ..wire.principals import principal_from_string, public_key_of

    try:
        roots, blocks_in = read(data)
        blocks = dict(blocks_in)
    except CarError as exc:
        raise HistoryError(f"not a usable session export: {exc}") from exc
    if len(roots) != 1 or roots[0] not in blocks:
        raise HistoryError("not a session export: its root block is missing")
    root = decode_strict(blocks[roots[0]])
    if not isinstance(root, dict) or root.get("type") != EXPORT_TYPE or root.get("version") != 1:
        raise HistoryError("not a session export: the root is not a SeedAgentsSessionExport manifest")
    key_id = server_key or root.get("serverKey")
    if type(key_id) is not str:
        raise HistoryError("the export names no server key")
    if server_key is not None and root.get("serverKey") != server_key:
        raise HistoryError(f"the export was signed by {root.get('serverKey')}, not by the key given ({server_key})")
    try:
        public = public_key_of(principal_from_string(key_id))
    except ProtocolError as exc:
        raise HistoryError(f"the server key {key_id[:80]!r} is not an Ed25519 key id") from exc
    head = read_head(root.get("head"))
    session_id = head.session_id
    if root.get("sessionId") != session_id:
        raise HistoryError("the manifest and its head name different sessions")
    verify_head(head, public)

    _check_places(blocks, session_id, head.seq)
    user_events = unsigned = 0
    accounts: set[str] = set()
    want = head.head
    for seq in range(head.seq, 0, -1):
        named_by = "the signed head" if seq == head.seq else f"event {seq + 1}"
        raw = blocks.get(want)
        if raw is None:
            raise HistoryError(f"event {seq} was altered or dropped: no block of the export hashes to the "
                               f"link {named_by} names", seq)
        block = decode_strict(raw)
        if not isinstance(block, dict):
            raise HistoryError(f"event {seq}'s block is not a map", seq)
        event = block.get("event")
        if (not isinstance(event, dict) or block.get("seq") != seq or block.get("sessionId") != session_id
                or event.get("seq") != seq or event.get("sessionId") != session_id
                or event.get("createdAt") != block.get("createdAt")):
            raise HistoryError(f"event {seq}'s block does not hold event {seq} of session {session_id}", seq)
        payload = event.get("event")
        if isinstance(payload, dict) and payload.get("type") == "message" and payload.get("role") == "user":
            signer = _check_user_event(seq, session_id, payload, blocks)
            if signer is None:
                unsigned += 1
            else:
                user_events += 1
                accounts.add(signer)
        prev = block.get("prev")
        if seq == 1:
            if prev is not None:
                raise HistoryError("event 1 links to an earlier event: the history does not start at 1", 1)
            break
        if not isinstance(prev, CID):
            raise HistoryError(f"event {seq} has no link to event {seq - 1}", seq)
        want = bytes(prev)
    return Proof(session_id, head.seq, user_events, unsigned, tuple(sorted(accounts)), key_id,
                 cid_text(head.head), head.ts)


def _check_places(blocks: dict[bytes, bytes], session_id: str, last: int) -> None:
    """Every event 1..last has a block, and each block holds the event of its place: names the
    first event missing or out of place before the walk along the links names a changed one."""
    held: dict[int, bool] = {}
    for raw in blocks.values():
        try:
            block = decode_strict(raw)
        except HistoryError:
            continue
        if not isinstance(block, dict) or block.get("sessionId") != session_id or type(block.get("seq")) is not int:
            continue   # (the manifest, envelopes)
        event = block.get("event")
        in_place = isinstance(event, dict) and event.get("seq") == block["seq"]
        held[block["seq"]] = held.get(block["seq"], True) and in_place
    for seq in range(1, last + 1):
        if seq not in held:
            raise HistoryError(f"event {seq} is missing: the export has no block for it", seq)
        if not held[seq]:
            raise HistoryError(f"event {seq} is out of place: its block holds another event", seq)


def _check_user_event(seq: int, session_id: str, payload: dict, blocks: dict[bytes, bytes]) -> str | None:
    """The account that signed a user message, checked against its envelope; None when the
    message predates envelopes (no envelopeCid)."""
    from .actions import parse_action
    from ..wire.envelope import verify_envelope

    named = payload.get("envelopeCid")
    if named is None:
        return None
    if type(named) is not str:
        raise HistoryError(f"event {seq}'s envelopeCid is not a CID", seq)
    raw = blocks.get(cid_from_text(named))
    if raw is None:
        raise HistoryError(f"event {seq}'s signed envelope is not in the export", seq)
    try:
        env = verify_envelope(raw, now_ms=None)
        action = parse_action(env.action)
    except ProtocolError as exc:
        raise HistoryError(f"event {seq}'s envelope does not verify: {exc.message}", seq) from exc
    if env.name != "MessageSession" or getattr(action, "session_id", None) != session_id:
        raise HistoryError(f"event {seq}'s envelope is not a message to this session", seq)
    meta = payload.get("meta")
    if payload.get("content") != getattr(action, "text", None) or not isinstance(meta, dict) or meta.get("accountId") != env.account_id:
        raise HistoryError(f"event {seq} is not what account {env.account_id} signed: its text or sender "
                           "differs from the envelope", seq)
    return env.account_id
