"""Seed hypermedia blobs, byte for byte as `@seed-hypermedia/client` (0.0.83) builds them.

Every blob is a DAG-CBOR map signed with Ed25519: `sig` is first 64 zero bytes, the canonical
encoding of that map is signed, and the signature replaces the zeros. Its CID is CIDv1
dag-cbor sha2-256 in base32 (`bafyrei…`), as the library prints it.

- Profile (`createProfile`): `{type: "Profile", signer, sig, ts, name, avatar?}`.
- Genesis change (`createGenesisChange`): `{type: "Change", signer, sig, ts: 0}`, the same for
  a key forever (so a home document's genesis is known from the key alone).
- Change (`createChangeOps` + `createChange`): `{type: "Change", body: {ops, opCount}, signer,
  sig, ts, genesis, deps, depth}`.
- Ref (`createVersionRef`): `{type: "Ref", signer, sig, ts, genesisBlob, heads, generation?,
  path?}`: which change heads are the document's version at that path.

What the reference agents server publishes: for a new account the profile, the home document's
genesis, one change (the name as metadata plus the paragraph "This is an agentic account.") and
its ref; for a rename or a new icon the profile alone (the icon as UnixFS first, see unixfs.py).
Pure: the time is an argument, and block ids come from a caller-given `new_id`.
Proven against the library's own bytes: tests/hm_vectors/, tests/test_hm_blobs.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

from multiformats import CID

from . import dagcbor
from .hm_markdown import flatten_to_operations, parse_markdown, random_block_id
from .keys import Keypair
from .principals import principal_from_string

__all__ = [
    "Blob",
    "DAG_CBOR",
    "HOME_TEXT",
    "account_id",
    "blob_cid",
    "change_blob",
    "genesis_blob",
    "profile_blob",
    "ref_blob",
    "new_account_blobs",
    "profile_blobs",
    "metadata_operations",
]

DAG_CBOR = 0x71
SIG_SIZE = 64
# The home document text the reference agents server writes for every new account.
HOME_TEXT = "This is an agentic account."


@dataclass(frozen=True)
class Blob:
    """One blob to publish: its CID as the library prints it, and its exact bytes."""

    cid: str
    data: bytes


def blob_cid(data: bytes, codec: int = DAG_CBOR) -> str:
    """CIDv1 (default dag-cbor) sha2-256 of `data`, base32."""
    digest = hashlib.sha256(data).digest()
    raw = bytes((0x01,)) + _varint(codec) + b"\x12\x20" + digest
    return str(CID.decode(raw).set(base="base32"))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _keypair(seed: bytes) -> Keypair:
    return Keypair.from_seed(seed)


def account_id(seed: bytes) -> str:
    """The Seed account id (`z6Mk…`) of an Ed25519 seed."""
    return _keypair(seed).account_id


def _signed(kp: Keypair, value: dict) -> Blob:
    value["sig"] = bytes(SIG_SIZE)
    value["sig"] = kp.sign(dagcbor.encode(value))
    data = dagcbor.encode(value)
    return Blob(blob_cid(data), data)


def profile_blob(seed: bytes, name: str, ts_ms: int, avatar: str | None = None,
                 description: str | None = None) -> Blob:
    """`createProfile(key, {name, avatar?, description?}, ts)`."""
    kp = _keypair(seed)
    value: dict = {"type": "Profile", "signer": kp.principal, "ts": ts_ms, "name": name}
    if avatar is not None:
        value["avatar"] = avatar
    if description is not None:
        value["description"] = description
    return _signed(kp, value)


def genesis_blob(seed: bytes) -> Blob:
    """`createGenesisChange(key)`: the empty change at ts 0 that starts a home document."""
    kp = _keypair(seed)
    return _signed(kp, {"type": "Change", "signer": kp.principal, "ts": 0})


def change_blob(seed: bytes, ops: list[dict], ts_ms: int, genesis: str, deps: list[str], depth: int) -> Blob:
    """`createChangeOps({ops, genesisCid, deps, depth, ts})` signed by `createChange`."""
    kp = _keypair(seed)
    value = {
        "type": "Change",
        "body": {"ops": ops, "opCount": len(ops)},
        "signer": kp.principal,
        "ts": ts_ms,
        "genesis": CID.decode(genesis),
        "deps": [CID.decode(d) for d in deps],
        "depth": depth,
    }
    return _signed(kp, value)


def ref_blob(seed: bytes, space: str, path: str, genesis: str, heads: list[str], generation: int,
             ts_ms: int) -> Blob:
    """`createVersionRef({space, path, genesis, version: heads, generation, ts})`."""
    kp = _keypair(seed)
    value: dict = {"type": "Ref", "signer": kp.principal, "ts": ts_ms, "genesisBlob": CID.decode(genesis)}
    if generation != 0:
        value["generation"] = generation
    if space != kp.account_id:

        value["space"] = principal_from_string(space)
    if path:
        value["path"] = path
    value["heads"] = [CID.decode(h) for h in heads]
    return _signed(kp, value)


def metadata_operations(metadata: dict) -> list[dict]:
    """Document metadata as one SetAttributes operation (none when empty), as the reference's
    `metadataToWriteSetAttributes`."""
    attrs = [{"key": [k], "value": v} for k, v in metadata.items() if v is not None]
    return [{"type": "SetAttributes", "attrs": attrs}] if attrs else []


def new_account_blobs(seed: bytes, name: str, ts_ms: int, icon_cid: str | None = None, *,
                      new_id: Callable[[], str] = random_block_id) -> list[Blob]:
    """A new account as the reference server publishes it for CreateSigningIdentity: the profile,
    the home document's genesis change, the change holding the name and the home text, and the
    version ref. With `icon_cid` (an icon already published as UnixFS) the profile's avatar is
    `ipfs://<icon_cid>`. The change and the ref carry `ts_ms` (generation = ts_ms)."""
    kp = _keypair(seed)
    profile = profile_blob(seed, name, ts_ms, _avatar(icon_cid))
    tree, _ = parse_markdown(HOME_TEXT, new_id)
    ops = metadata_operations({"name": name}) + flatten_to_operations(tree)
    genesis = genesis_blob(seed)
    change = change_blob(seed, ops, ts_ms, genesis.cid, [genesis.cid], 1)
    ref = ref_blob(seed, kp.account_id, "", genesis.cid, [change.cid], ts_ms, ts_ms)
    return [profile, genesis, change, ref]


def profile_blobs(seed: bytes, name: str, ts_ms: int, icon_cid: str | None = None) -> list[Blob]:
    """What a rename or a new icon republishes: the profile (avatar `ipfs://<icon_cid>`)."""
    return [profile_blob(seed, name, ts_ms, _avatar(icon_cid))]


def _avatar(icon_cid: str | None) -> str | None:
    if icon_cid is None:
        return None
    return icon_cid if icon_cid.startswith("ipfs://") else f"ipfs://{icon_cid}"


