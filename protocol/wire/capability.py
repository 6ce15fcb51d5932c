"""Capability blobs (RegisterSigner): an issuer lets a delegate sign for the issuer's account.

    {type: "Capability", signer: <issuer principal>, delegate: <principal>,
     role: "AGENT" | "WRITER", ts: <int ms>, sig: 64 bytes, label?: text, expiresAt?: <int ms>}

Signed like an envelope: Ed25519 by the issuer over the DAG-CBOR encoding with `sig` zeroed. The
CID is CIDv1, dag-cbor (0x71), sha2-256 over the blob bytes as given, in base32 ('bafy...').

What `role` and `ts` mean here (the contract is silent; docs/protocol.md, "Capabilities"): both
roles let the delegate sign every action for the issuer's account (this server has no finer
permissions; the Seed desktop delegates with AGENT). `ts` is when the issuer signed it, in Unix
ms: a safe integer, and not later than the server's clock plus the clock window, since a
capability from the future is a forged or broken clock. `expiresAt` (optional, Unix ms, after
`ts`) ends it: past it the server no longer takes the delegate's signature; without it the
capability lasts until the account unregisters the signer (UnregisterSigner).
"""

from __future__ import annotations

from dataclasses import dataclass

from nacl.bindings import crypto_sign_open
from nacl.exceptions import CryptoError

from .cids import cid_bytes, cid_text
from .dagcbor import decode, encode
from .errors import ProtocolError, quote
from .keys import Keypair
from .principals import check_principal, principal_to_string

CAPABILITY_TYPE = "Capability"
ROLES = frozenset({"AGENT", "WRITER"})
ZERO_SIG = bytes(64)
MAX_CAPABILITY_SIZE = 64 * 1024  # a capability is a few hundred bytes; refuse anything absurd
MAX_LABEL_LENGTH = 1000
MAX_TS = 2**53 - 1  # Unix ms as a JavaScript number can carry it exactly


@dataclass(frozen=True)
class Capability:
    issuer: bytes
    delegate: bytes
    issuer_id: str
    delegate_id: str
    role: str
    ts: int
    label: str | None
    cid: str
    blob: bytes
    expires_at: int | None = None


def capability_cid(blob: bytes) -> str:
    """CIDv1 (dag-cbor, sha2-256) of the blob bytes, as the base32 string ('bafy...')."""
    return cid_text(cid_bytes(blob))


def make_capability(
    issuer: Keypair, delegate: bytes, role: str, ts: int, label: str | None = None,
    expires_at: int | None = None,
) -> bytes:
    """The signed blob, byte for byte as `blobs.createCapability` of the Seed client makes it."""
    check_principal(delegate, "delegate")
    if type(role) is not str or role not in ROLES:
        raise ProtocolError(400, f"capability role must be one of {sorted(ROLES)}, got {quote(role)}")
    body: dict = {"type": CAPABILITY_TYPE, "signer": issuer.principal, "delegate": delegate,
                  "role": role, "ts": ts, "sig": ZERO_SIG}
    if label is not None:
        body["label"] = label
    if expires_at is not None:
        body["expiresAt"] = expires_at
    body["sig"] = issuer.sign(encode(body))
    return encode(body)


def parse_capability(blob: bytes, *, now_ms: int | None = None, window_ms: int = 30_000) -> Capability:
    """Decode and check a capability blob; any fault is ProtocolError(400) saying which.

    With `now_ms`, a capability dated more than `window_ms` after it is refused too (400)."""
    if type(blob) is not bytes:
        raise ProtocolError(400, "capability must be a byte string (the signed blob)")
    try:
        value = decode(blob, max_size=MAX_CAPABILITY_SIZE, max_depth=4)
    except ProtocolError as e:
        raise ProtocolError(400, f"capability is not valid DAG-CBOR: {e.message}") from None
    if type(value) is not dict:
        raise ProtocolError(400, "capability must be a map {type, signer, delegate, role, ts, "
                                 "sig}")
    if value.get("type") != CAPABILITY_TYPE:
        raise ProtocolError(400, f"capability type must be {CAPABILITY_TYPE!r}, got "
                                 f"{quote(value.get('type'))}")
    for field in ("signer", "delegate", "role", "ts", "sig"):
        if field not in value:
            raise ProtocolError(400, f"capability field {field!r} is missing")
    issuer = check_principal(value["signer"], "capability signer (issuer)")
    delegate = check_principal(value["delegate"], "capability delegate")
    role = value["role"]
    if type(role) is not str or role not in ROLES:
        raise ProtocolError(400, f"capability role must be 'AGENT' or 'WRITER', got {quote(role)}")
    ts = value["ts"]
    if type(ts) is not int or not 0 <= ts <= MAX_TS:
        raise ProtocolError(400, "capability ts must be an integer between 0 and "
                                 f"{MAX_TS} (Unix ms), got {quote(ts)}")
    label = value.get("label")
    if label is not None and (type(label) is not str or len(label) > MAX_LABEL_LENGTH):
        raise ProtocolError(400, f"capability label must be text of at most {MAX_LABEL_LENGTH} "
                                 "characters")
    expires_at = value.get("expiresAt")
    if expires_at is not None and (type(expires_at) is not int or not ts < expires_at <= MAX_TS):
        raise ProtocolError(400, "capability expiresAt must be an integer after ts and at most "
                                 f"{MAX_TS} (Unix ms), got {quote(expires_at)}")
    sig = value["sig"]
    if type(sig) is not bytes or len(sig) != 64:
        raise ProtocolError(400, "capability sig must be a 64-byte Ed25519 signature")
    try:
        crypto_sign_open(sig + encode({**value, "sig": ZERO_SIG}), issuer[2:])
    except (CryptoError, ValueError):
        raise ProtocolError(400, "capability signature does not verify: it must be the issuer's "
                                 "(signer's) Ed25519 signature over the DAG-CBOR encoding with "
                                 "sig zeroed") from None
    if now_ms is not None and ts > now_ms + window_ms:
        raise ProtocolError(400, f"capability ts is {ts - now_ms} ms ahead of server time "
                                 f"(allowed: {window_ms} ms); it must be dated when the issuer "
                                 "signed it: check the issuing device's clock")
    if now_ms is not None and expires_at is not None and expires_at <= now_ms:
        raise ProtocolError(400, f"capability expired {now_ms - expires_at} ms ago (expiresAt); "
                                 "ask the account for a new one")
    return Capability(issuer, delegate, principal_to_string(issuer),
                      principal_to_string(delegate), role, ts, label, capability_cid(blob), blob,
                      expires_at)
