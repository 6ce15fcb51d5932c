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
A document version (`document_blobs`) is what the reference's `write` verb publishes: a new
document's genesis, change and ref, or an update's change (the block diff, hm_diff.py) and ref.
Pure: the time is an argument, and block ids come from a caller-given `new_id`.
Proven against the library's own bytes: tests/hm_vectors/, tests/protocol/test_hm_blobs.py.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from multiformats import CID, varint

from ..wire import dagcbor
from .hm_diff import blocks_map, compute_replace_ops, from_api_node, rebind_table_identities, to_api_node
from .hm_markdown import flatten_to_operations, hm_nodes_to_operations, parse_markdown, random_block_id, to_hm_nodes
from ..wire.keys import Keypair
from ..wire.principals import principal_from_string

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
    "tombstone_ref_blob",
    "redirect_ref_blob",
    "new_account_blobs",
    "profile_blobs",
    "metadata_operations",
    "DocumentBase",
    "NoChanges",
    "document_blobs",
    "document_base",
    "draft_document_blobs",
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
    raw = bytes((0x01,)) + varint.encode(codec) + b"\x12\x20" + digest
    return str(CID.decode(raw).set(base="base32"))


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


def tombstone_ref_blob(seed: bytes, space: str, path: str, genesis: str, generation: int, ts_ms: int) -> Blob:
    """`createTombstoneRef({space, path, genesis, generation})`: the document at `path` deleted
    (a Ref with no heads)."""
    return _headless_ref(seed, space, path, genesis, generation, ts_ms, None)


def redirect_ref_blob(seed: bytes, space: str, path: str, genesis: str, generation: int, ts_ms: int, *,
                      target_space: str, target_path: str, republish: bool = False) -> Blob:
    """`createRedirectRef({space, path, genesis, generation, targetSpace, targetPath,
    republish})`: the document at `path` now redirects to `target_space` + `target_path`."""
    redirect: dict = {"path": target_path}
    if target_space and target_space != space:
        redirect["space"] = principal_from_string(target_space)
    if republish:
        redirect["republish"] = True
    return _headless_ref(seed, space, path, genesis, generation, ts_ms, redirect)


def _headless_ref(seed: bytes, space: str, path: str, genesis: str, generation: int, ts_ms: int,
                  redirect: dict | None) -> Blob:
    kp = _keypair(seed)
    value: dict = {"type": "Ref", "signer": kp.principal, "ts": ts_ms, "genesisBlob": CID.decode(genesis)}
    if generation != 0:
        value["generation"] = generation
    if space != kp.account_id:
        value["space"] = principal_from_string(space)
    if path:
        value["path"] = path
    value["heads"] = []
    if redirect is not None:
        value["redirect"] = redirect
    return _signed(kp, value)


def metadata_operations(metadata: dict) -> list[dict]:
    """Document metadata as one SetAttributes operation (none when empty), as the reference's
    `metadataToWriteSetAttributes` (a None value is JavaScript's null, and is set)."""
    attrs = [{"key": [k], "value": v} for k, v in metadata.items()]
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




@dataclass(frozen=True)
class DocumentBase:
    """A published document to update in place: its genesis, its current heads and their
    depth (from ListChanges), and its blocks and metadata as Resource answers them."""

    genesis: str
    heads: tuple[str, ...]
    depth: int
    content: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


class NoChanges(ValueError):
    """The Markdown says exactly what the document already says."""


def document_blobs(seed: bytes, markdown: str | None, ts_ms: int, *, path: str = "", base: DocumentBase | None = None,
                   defaults: dict | None = None, overrides: dict | None = None,
                   new_id: Callable[[], str] = random_block_id) -> tuple[str, list[Blob]]:
    """A document version from Markdown, as the reference publishes one: (version, blobs).

    `path` is the document's path in the signer's account ("" for the home document, else
    "/a/b"). Without `base` it is a new document: its genesis change, one change holding the
    front matter as metadata and every block, and the ref (generation = ts_ms). With `base` it
    is a new version in place: one change (deps = the current heads) holding the front matter
    and the block operations from the current blocks to the new ones, and the ref. Blocks keep
    their ids when the Markdown carries them (`<!-- id:… -->`, as blocks_to_markdown writes).
    `defaults` is metadata the front matter may override (e.g. a new document's name);
    `overrides` is metadata over the front matter (the write's `options.metadata`, then its
    `name`, as the reference's mergeWriteMetadata). `markdown` None: a metadata-only update of
    `base` (its blocks untouched; only `overrides` are set). NoChanges when an update would
    change nothing.
    """
    kp = _keypair(seed)
    if markdown is None:
        if base is None:
            raise ValueError("a metadata-only change needs the document it changes")
        if not overrides or all(base.metadata.get(k) == v for k, v in overrides.items()):
            raise NoChanges("the document already has this metadata")
        change = change_blob(seed, metadata_operations(dict(overrides)), ts_ms, base.genesis, list(base.heads),
                             base.depth + 1)
        ref = ref_blob(seed, kp.account_id, path, base.genesis, [change.cid], ts_ms, ts_ms)
        return change.cid, [change, ref]
    tree, metadata = parse_markdown(markdown, new_id)
    metadata = {**(defaults or {}), **metadata, **(overrides or {})}
    if base is None:
        ops = metadata_operations(metadata) + flatten_to_operations(tree)
        genesis = genesis_blob(seed)
        change = change_blob(seed, ops, ts_ms, genesis.cid, [genesis.cid], 1)
        ref = ref_blob(seed, kp.account_id, path, genesis.cid, [change.cid], ts_ms, ts_ms)
        return change.cid, [genesis, change, ref]
    old = [to_api_node(n) for n in base.content]
    new_tree = rebind_table_identities(old, [from_api_node(n) for n in to_hm_nodes(tree)])
    content_ops = compute_replace_ops(blocks_map(old), new_tree)
    if not content_ops and all(base.metadata.get(k) == v for k, v in metadata.items()):
        raise NoChanges("the document already says exactly this")
    # As the reference: the front matter is set again whole, changed or not.
    ops = metadata_operations(metadata) + content_ops
    change = change_blob(seed, ops, ts_ms, base.genesis, list(base.heads), base.depth + 1)
    ref = ref_blob(seed, kp.account_id, path, base.genesis, [change.cid], ts_ms, ts_ms)
    return change.cid, [change, ref]


def draft_document_blobs(seed: bytes, blocks: list[dict], metadata: dict, ts_ms: int, *,
                         path: str = "") -> tuple[str, list[Blob]]:
    """A new document from a draft's blocks (API block nodes) and metadata, as the reference's
    draft.publish of a draft with no edit target: writeDocumentCreate on the blocks as JSON, the
    operations the server's hmBlockNodesToOperations. (version, [genesis, change, ref])."""
    kp = _keypair(seed)
    ops = metadata_operations(metadata) + hm_nodes_to_operations(blocks)
    genesis = genesis_blob(seed)
    change = change_blob(seed, ops, ts_ms, genesis.cid, [genesis.cid], 1)
    ref = ref_blob(seed, kp.account_id, path, genesis.cid, [change.cid], ts_ms, ts_ms)
    return change.cid, [genesis, change, ref]


def document_base(changes: list, content: list, metadata: dict | None = None) -> DocumentBase:
    """A document's state from its ListChanges answer, as the library's `resolveDocumentState`:
    the genesis is the change without deps, the heads are the changes nothing depends on, and a
    change's depth is one more than its deepest dep's (the genesis is 0). ValueError when the
    list is empty or not a change list."""
    if not isinstance(changes, list) or not changes:
        raise ValueError("the document has no changes")
    deps_of: dict[str, list[str]] = {}
    for change in changes:
        cid, deps = change.get("id") if isinstance(change, dict) else None, (change or {}).get("deps") or []
        if not isinstance(cid, str) or not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise ValueError("a change has no id or malformed deps")
        deps_of[cid] = deps
    genesis = next((cid for cid, deps in deps_of.items() if not deps), None)
    if genesis is None:
        raise ValueError("no genesis change (a change without deps)")
    depended = {d for deps in deps_of.values() for d in deps}
    heads = tuple(cid for cid in deps_of if cid not in depended)
    if not heads:
        raise ValueError("no head changes")
    dependents: dict[str, list[str]] = {}
    for cid, deps in deps_of.items():
        for d in deps:
            dependents.setdefault(d, []).append(cid)
    depth: dict[str, int] = {cid: 0 for cid, deps in deps_of.items() if not deps}
    queue = deque(depth)
    while queue:  # breadth first from the genesis, as the library: a change once all its deps are
        for child in dependents.get(queue.popleft(), ()):
            if child not in depth and all(d in depth for d in deps_of[child]):
                depth[child] = max(depth[d] for d in deps_of[child]) + 1
                queue.append(child)
    return DocumentBase(genesis, heads, max(depth.get(h, 0) for h in heads), list(content or []),
                        dict(metadata or {}))
