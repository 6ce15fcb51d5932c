"""The signed action envelope (CONTRACT section 2): building, signing and steps 1-4 of checking.

    {type: "AgentsAction", signer: Principal, sig: 64 bytes, account: Principal,
     action: {_: "<ActionName>", ts: <int Unix ms>, ...fields}}

The signing input is the DAG-CBOR encoding of the envelope with `sig` set to 64 zero bytes, and
the check is always made over that canonical re-encoding, never over the bytes received. Steps 5
(delegation) and 6 (replay) need state and live in the server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from nacl.bindings import crypto_sign_open
from nacl.exceptions import CryptoError

from .dagcbor import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_SIZE,
    STRICT_MAX_SIZE,
    check_items,
    decode_canonical,
    decode_if_canonical,
    encode,
)
from .errors import ProtocolError, quote
from .keys import Keypair
from .principals import PRINCIPAL_LENGTH, PRINCIPAL_PREFIX, _principal_to_string, check_principal

ZERO_SIG = bytes(64)
ENVELOPE_TYPE = "AgentsAction"
DEFAULT_WINDOW_MS = 30_000

# Layout of a canonical five-field envelope. Keys sort by encoded length then bytewise:
# sig, type, action, signer, account. So the frame is
#   a5 | 63 "sig" 58 40 <64-byte sig> | 64 "type" 6c "AgentsAction" | 66 "action" <action>
#      | 66 "signer" 58 22 <34 bytes> | 67 "account" 58 22 <34 bytes>
# and the signing input is the same bytes with the sig zeroed: nothing needs re-encoding.
_SIG_KEY_AND_HEAD = b"\x63sig\x58\x40"
_SIG_START, _SIG_END = 7, 71
_FRAME_HEAD = b"\xa5" + _SIG_KEY_AND_HEAD
_TYPE_AND_ACTION_KEY = b"\x64type\x6cAgentsAction\x66action"
_ACTION_START = _SIG_END + len(_TYPE_AND_ACTION_KEY)
_SIGNER_KEY = b"\x66signer\x58\x22"
_ACCOUNT_KEY = b"\x67account\x58\x22"
_SIGNER_AT = len(_SIGNER_KEY)  # offsets from the start of the signer key
_SIGNER_END = _SIGNER_AT + 34
_ACCOUNT_AT = _SIGNER_END + len(_ACCOUNT_KEY)
_TAIL = _ACCOUNT_AT + 34  # signer and account fields, the end of the frame


def five_fields(raw: bytes) -> tuple[bytes, bytes, bytes, bytes] | None:
    """(sig, action bytes, signer, account) of an envelope in the canonical five-field layout
    above, cut by offsets; None for any other layout. `join_five_fields` is its inverse."""
    tail = len(raw) - _TAIL
    if (tail > _ACTION_START
            and raw[:_SIG_START] == _FRAME_HEAD
            and raw[_SIG_END:_ACTION_START] == _TYPE_AND_ACTION_KEY
            and raw[tail:tail + _SIGNER_AT] == _SIGNER_KEY
            and raw[tail + _SIGNER_END:tail + _ACCOUNT_AT] == _ACCOUNT_KEY):
        return (raw[_SIG_START:_SIG_END], raw[_ACTION_START:tail],
                raw[tail + _SIGNER_AT:tail + _SIGNER_END], raw[tail + _ACCOUNT_AT:])
    return None


def join_five_fields(sig: bytes, action: bytes, signer: bytes, account: bytes) -> bytes:
    """The envelope's bytes around its parts, in the five-field layout (`five_fields`' inverse)."""
    return b"".join((_FRAME_HEAD, sig, _TYPE_AND_ACTION_KEY, action, _SIGNER_KEY, signer, _ACCOUNT_KEY, account))


@dataclass(frozen=True, slots=True)
class VerifiedEnvelope:
    """An envelope that passed steps 1-4: well formed, fresh, and signed by `signer`."""

    account: bytes
    signer: bytes
    account_id: str
    signer_id: str
    action: dict
    name: str
    ts: int
    sig: bytes
    # The envelope's canonical DAG-CBOR bytes (what was signed, sig included), when the check
    # had them at hand: a user event's stored envelope and its CID reuse them instead of
    # encoding the envelope again. None when the layout was unusual (then encode the fields).
    raw: bytes | None = None


def _make_verified() -> object:
    # A frozen dataclass __init__ pays an object.__setattr__ per field (~1.3 us for eight here),
    # a visible share of the per-envelope budget; the slot descriptors set the fields directly.
    new = object.__new__
    cls = VerifiedEnvelope
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = (getattr(cls, f).__set__ for f in cls.__slots__)

    def make(account, signer, account_id, signer_id, action, name, ts, sig, raw):  # noqa: ANN001
        obj = new(cls)
        s0(obj, account)
        s1(obj, signer)
        s2(obj, account_id)
        s3(obj, signer_id)
        s4(obj, action)
        s5(obj, name)
        s6(obj, ts)
        s7(obj, sig)
        s8(obj, raw)
        return obj

    return make


_verified = _make_verified()


def signing_input(envelope_map: dict) -> bytes:
    """The bytes Ed25519 signs: DAG-CBOR of the envelope with `sig` replaced by 64 zero bytes."""
    return encode({**envelope_map, "sig": ZERO_SIG})


class _ExplicitNull:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL"


# An action field sent as CBOR null rather than dropped (None means "absent"): the contract's
# one use is UpdateSession.modelOverride = null, which clears the override (and this server's
# UpdateSession.thoroughness = null, likewise).
NULL = _ExplicitNull()


def build_envelope(
    keypair: Keypair,
    action: dict,
    *,
    account: bytes | None = None,
    ts: int | None = None,
    now_ms: int | None = None,
) -> dict:
    """A signed envelope map, built the way the Seed desktop builds it.

    `ts` wins over the action's own `ts`; without either, `now_ms` or else the current time is
    used (the only clock read in this package, and only on the signing side). Fields set to None
    are dropped, like the desktop's omitUndefined: absent optional fields are omitted, not null;
    a field set to NULL is sent as null.
    """
    body = {k: (None if v is NULL else v) for k, v in action.items() if v is not None}
    if ts is not None:
        body["ts"] = ts
    elif "ts" not in body:
        body["ts"] = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    envelope = {
        "type": ENVELOPE_TYPE,
        "signer": keypair.principal,
        "sig": ZERO_SIG,
        "account": keypair.principal if account is None else account,
        "action": body,
    }
    envelope["sig"] = keypair.sign(encode(envelope))
    return envelope


def sign_envelope(
    keypair: Keypair,
    action: dict,
    *,
    account: bytes | None = None,
    ts: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """The complete DAG-CBOR frame of a signed envelope (see `build_envelope`)."""
    return encode(build_envelope(keypair, action, account=account, ts=ts, now_ms=now_ms))


def verify_envelope(
    envelope: bytes | dict,
    *,
    now_ms: int | None,
    window_ms: int = DEFAULT_WINDOW_MS,
    max_size: int = DEFAULT_MAX_SIZE,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> VerifiedEnvelope:
    """Steps 1-4 of CONTRACT section 2, in order, each failing with its status.

    `envelope` is the frame bytes (v1) or an already decoded map (v2 frames are decoded whole).
    `now_ms=None` turns the clock window off (for fixed test vectors only).
    """
    if type(envelope) is bytes and len(envelope) <= max_size:
        # Fast path, taken by every request: a canonical five-field envelope (`five_fields`)
        # that passes. The signature is checked over the received bytes first (in this layout
        # they are the signing input once the sig is zeroed), so an unsigned frame costs no
        # decoding; then only the action is decoded and re-encoded (the rest is fixed layout).
        # Anything unusual falls through to the general path, which also words every error.
        data = envelope
        parts = five_fields(data)
        if parts is not None and parts[2][:2] == PRINCIPAL_PREFIX:
            sig, action_bytes, signer, account = parts
            try:
                crypto_sign_open(sig + data[:_SIG_START] + ZERO_SIG + data[_SIG_END:], signer[2:])
                signed = True
            except (CryptoError, ValueError):
                signed = False
                if len(data) > STRICT_MAX_SIZE:
                    # Only a non-canonical form could still verify (over its re-encoding),
                    # and inputs this long must be canonical: refused without decoding.
                    _check_signature(sig, b"", signer)
            if signed:
                if len(action_bytes) > max_items:
                    check_items(action_bytes, max_items)
                action, canonical = decode_if_canonical(action_bytes, max_depth=max_depth - 1)
                if canonical and type(action) is dict:
                    name = action.get("_")
                    ts = action.get("ts")
                    if (type(name) is str and name and type(ts) is int
                            and account[:2] == PRINCIPAL_PREFIX
                            and (now_ms is None or -window_ms <= ts - now_ms <= window_ms)):
                        return _verified(account, signer, _principal_to_string(account),
                                         _principal_to_string(signer), action, name, ts, sig, data)
    if isinstance(envelope, (bytes, bytearray, memoryview)):
        if len(envelope) <= max_size and envelope and not 0xA0 <= envelope[0] <= 0xBB:
            # Not a map, whatever follows: refuse before paying to decode up to max_size bytes.
            raise ProtocolError(400, "the envelope must be a DAG-CBOR map {type, signer, sig, "
                                     f"account, action}}; this frame starts with "
                                     f"0x{envelope[0]:02x}")
        value, canonical = decode_canonical(envelope, max_size=max_size, max_depth=max_depth)
        return verify_decoded(value, bytes(envelope) if canonical else None,
                              now_ms=now_ms, window_ms=window_ms)
    if type(envelope) is dict:
        return verify_decoded(envelope, None, now_ms=now_ms, window_ms=window_ms)
    raise ProtocolError(400, "an envelope is DAG-CBOR bytes or a decoded map, "
                             f"not {type(envelope).__name__}")


def verify_decoded(
    value: object, canonical: bytes | None, *, now_ms: int | None, window_ms: int
) -> VerifiedEnvelope:
    """Steps 1-4 for an envelope already decoded. `canonical`, when given, must be the exact
    canonical encoding of `value` (as `decode_canonical` reports it); it saves a re-encode."""
    raw = canonical
    if (canonical is not None and 0xA0 <= canonical[0] < 0xB8
            and canonical[1:_SIG_START] == _SIG_KEY_AND_HEAD):
        message = None  # cut from `canonical` below, once the fields are known to be sound
    elif type(value) is dict:
        # Step 1 for a map passed in: it must be encodable at all (anything else is a 400).
        message = signing_input(value)
        canonical = None
    else:
        message = canonical = None

    signer, sig, account, action, name, ts = _check_fields(value)  # step 2
    _check_clock(ts, now_ms, window_ms)  # step 3
    if message is None:
        message = canonical[:_SIG_START] + ZERO_SIG + canonical[_SIG_END:]
    _check_signature(sig, message, signer)  # step 4
    if raw is None and 0xA0 <= message[0] < 0xB8 and message[1:_SIG_START] == _SIG_KEY_AND_HEAD:
        raw = message[:_SIG_START] + sig + message[_SIG_END:]   # (a decoded map: sig is its first key)
    return _verified(account, signer, _principal_to_string(account),
                     _principal_to_string(signer), action, name, ts, sig, raw)


def _check_signature(sig: bytes, message: bytes, signer: bytes) -> None:
    try:
        crypto_sign_open(sig + message, signer[2:])
    except (CryptoError, ValueError):
        raise ProtocolError(
            401, "signature does not verify over the canonical encoding (DAG-CBOR of the "
                 "envelope with sig set to 64 zero bytes); sign that encoding with the signer's "
                 "key and do not change the envelope after signing") from None


def _check_fields(value: object) -> tuple[bytes, bytes, bytes, dict, str, object]:
    if type(value) is not dict:
        raise ProtocolError(400, "the envelope must be a map {type, signer, sig, account, "
                                 f"action}}, got {_kind(value)}")
    kind = value.get("type")
    if kind != ENVELOPE_TYPE:
        if "type" not in value:
            raise ProtocolError(400, "envelope field 'type' is missing; it must be "
                                     f"{ENVELOPE_TYPE!r}")
        raise ProtocolError(400, f"envelope type must be {ENVELOPE_TYPE!r}, got {quote(kind)}")
    signer = value.get("signer")
    account = value.get("account")
    # Inline fast test; check_principal names the fault when it fails.
    if not (type(signer) is bytes and len(signer) == PRINCIPAL_LENGTH
            and signer[:2] == PRINCIPAL_PREFIX):
        _require(value, "signer", "a principal (34 bytes: 0xed01 + Ed25519 key)")
        check_principal(signer, "envelope signer")
    if not (type(account) is bytes and len(account) == PRINCIPAL_LENGTH
            and account[:2] == PRINCIPAL_PREFIX):
        _require(value, "account", "a principal (34 bytes: 0xed01 + Ed25519 key)")
        check_principal(account, "envelope account")
    sig = value.get("sig")
    if type(sig) is not bytes or len(sig) != 64:
        _require(value, "sig", "a 64-byte Ed25519 signature")
        size = f"{len(sig)} bytes" if type(sig) is bytes else _kind(sig)
        raise ProtocolError(400, f"envelope sig must be a 64-byte Ed25519 signature, got {size}")
    action = value.get("action")
    if type(action) is not dict:
        _require(value, "action", "a map {_: <ActionName>, ts, ...}")
        raise ProtocolError(400, f"envelope action must be a map, got {_kind(action)}")
    name = action.get("_")
    if type(name) is not str or not name:
        raise ProtocolError(400, "envelope action needs a text field '_' naming the action, "
                                 f"got {_kind(name) if '_' in action else 'none'}")
    return signer, sig, account, action, name, action.get("ts")


def _check_clock(ts: object, now_ms: int | None, window_ms: int) -> None:
    if type(ts) is not int:  # bool and float are not Unix ms
        if ts is None:
            raise ProtocolError(401, "action.ts is missing; set it to the current Unix time in "
                                     "milliseconds before signing")
        raise ProtocolError(401, f"action.ts must be an integer (Unix ms), got {_kind(ts)} "
                                 f"{quote(ts)}")
    if now_ms is not None and not -window_ms <= ts - now_ms <= window_ms:
        skew = ts - now_ms
        where = "ahead of" if skew > 0 else "behind"
        raise ProtocolError(401, f"action.ts is {abs(skew)} ms {where} server time (allowed: "
                                 f"{window_ms} ms); check the device clock")


def _require(value: dict, field: str, what: str) -> None:
    if field not in value:
        raise ProtocolError(400, f"envelope field {field!r} is missing; it must be {what}")


def _kind(v: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a text string",
            bytes: "a byte string", list: "an array", dict: "a map",
            type(None): "null"}.get(type(v), type(v).__name__)
