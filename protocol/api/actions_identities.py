"""Signing identities: List/Create/Import/Update/DeleteSigningIdentity (CONTRACT section 8).

Each action: its frozen dataclass, its parser (written with seed_agents.protocol.api.fields) and one line in
`ACTIONS`, which protocol/api/actions.py merges into the one table the server routes by.

Shapes are the Seed protocol's (`agents/protocol/src/index.ts`): an identity is named by
`name` (`hm-account-<first 16 characters of its account id>`, what an agent definition's
`signingKey` / `signingKeys` hold), and carries a display `label`.
"""
from __future__ import annotations

from dataclasses import dataclass

from nacl.bindings import crypto_core_ed25519_is_valid_point

from .fields import MAX_ID, MAX_NAME, ActionKind, Fields, kind_of, read, write
from ..wire.keys import Keypair

SEED_SIZE = 32              # an Ed25519 seed (RFC 8032)
MAX_LABEL = MAX_NAME        # characters of a label (the profile name published with it)
# An avatar image. The frame limit (1 MiB, CONTRACT section 6) bounds it first; this keeps the
# bound when an operator raises --max-frame-bytes.
MAX_ICON_BYTES = 1 << 20
MAX_MIME_TYPE = 200
MAX_FILE_NAME = 1_000


@dataclass(frozen=True)
class ListSigningIdentities:
    ts: int
    agent_id: str | None = None   # list what this agent's definition names (a collaborator's view)


@dataclass(frozen=True)
class CreateSigningIdentity:
    ts: int
    label: str | None = None
    client_request_id: str | None = None


@dataclass(frozen=True)
class ImportSigningIdentity:
    ts: int
    seed: bytes = b""
    label: str | None = None
    client_request_id: str | None = None

    def __repr__(self) -> str:   # never show the seed (logs, tracebacks)
        return f"ImportSigningIdentity(ts={self.ts}, label={self.label!r})"


@dataclass(frozen=True)
class SigningIdentityIcon:
    data: bytes
    mime_type: str | None = None
    file_name: str | None = None


@dataclass(frozen=True)
class UpdateSigningIdentity:
    ts: int
    name: str
    label: str
    icon: SigningIdentityIcon | None = None


@dataclass(frozen=True)
class DeleteSigningIdentity:
    ts: int
    name: str


def label_of(f: Fields, *, required: bool) -> str | None:
    """A label: text of at most MAX_LABEL characters, not blank, without control characters
    (it becomes a published profile name and is shown in lists), trimmed."""
    value = f.text("label", MAX_LABEL, required=required)
    if value is None:
        return None
    if any(not ch.isprintable() for ch in value):
        raise f.fail("label", "must not contain control characters")
    return value.strip()


def _create(f: Fields, ts: int) -> CreateSigningIdentity:
    return CreateSigningIdentity(ts, label_of(f, required=False),
                                 f.text("clientRequestId", MAX_ID, required=False))


def weak_seed_problem(seed: bytes) -> str:
    """Why a seed must not become a signing identity ("" when it may): the all-zero seed (what
    an unset key holds, and public knowledge, so anyone could sign as it), or one whose public
    key is not a point of the prime-order group (the identity or another low-order point, whose
    signatures prove nothing). A seed from a random source is never either."""
    if not any(seed):
        return ("is all zeros, a key anyone can sign with (an unset or wiped key?); "
                "import a seed made from a random source")
    if not crypto_core_ed25519_is_valid_point(Keypair.from_seed(seed).public_key):
        return "gives a low-order public key, whose signatures anyone can forge; import another seed"
    return ""


def _import(f: Fields, ts: int) -> ImportSigningIdentity:
    seed = f.get("seed", True)
    if type(seed) is not bytes:
        raise f.fail("seed", f"must be the 32 bytes of an Ed25519 seed, got {kind_of(seed)}")
    if len(seed) != SEED_SIZE:
        raise f.fail("seed", f"must be exactly {SEED_SIZE} bytes, got {len(seed)}")
    problem = weak_seed_problem(seed)
    if problem:
        raise f.fail("seed", problem)
    return ImportSigningIdentity(ts, seed, label_of(f, required=False),
                                 f.text("clientRequestId", MAX_ID, required=False))


def _icon(f: Fields) -> SigningIdentityIcon | None:
    raw = f.mapping("icon", required=False)
    if raw is None:
        return None
    i = Fields(raw, f"{f.name}.icon")
    data = i.get("data", True)
    if type(data) is not bytes:
        raise i.fail("data", f"must be the bytes of an image, got {kind_of(data)}")
    if not data:
        raise i.fail("data", "must not be empty")
    if len(data) > MAX_ICON_BYTES:
        raise i.fail("data", f"must be at most {MAX_ICON_BYTES} bytes, got {len(data)}")
    return SigningIdentityIcon(data, i.text("mimeType", MAX_MIME_TYPE, required=False),
                               i.text("fileName", MAX_FILE_NAME, required=False))


def _update(f: Fields, ts: int) -> UpdateSigningIdentity:
    return UpdateSigningIdentity(ts, f.text("name", MAX_NAME), label_of(f, required=True), _icon(f))


def _list(f: Fields, ts: int) -> ListSigningIdentities:
    return ListSigningIdentities(ts, f.text("agentId", MAX_ID, required=False))


def signing_keys_of(definition: dict) -> list[str]:
    """The identity names an agent definition signs with: `signingKey` and every `signingKeys`
    entry, in that order, each once (the definition's parser has checked their types)."""
    names: list[str] = []
    key = definition.get("signingKey")
    for name in ([key] if isinstance(key, str) else []) + list(definition.get("signingKeys") or ()):
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


# The desktop's "Publish Seed content" grant: the pseudo-tool `publish` in `definition.tools`, or
# one of the pre-verbs write tools, which meant the same.
PUBLISH_GRANT = "publish"
LEGACY_PUBLISH_GRANTS = ("write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs")


def publish_granted(definition: dict) -> bool:
    """Does the definition allow publishing (the reference's `publishGrantEnabled`)? No `tools`
    list at all publishes."""
    tools = definition.get("tools")
    if type(tools) is not list:
        return True
    return any(t == PUBLISH_GRANT or t in LEGACY_PUBLISH_GRANTS for t in tools)


MAX_SIGNING_KEYS = 32


def check_signing_keys(d: Fields) -> None:
    """`signingKey?: text`, `signingKeys?: [text]` (at most MAX_SIGNING_KEYS) of a definition."""
    d.text("signingKey", MAX_NAME, required=False)
    keys = d.get("signingKeys", False)
    if keys is None:
        return
    if type(keys) is not list:
        raise d.fail("signingKeys", f"must be an array of identity names, got {kind_of(keys)}")
    if len(keys) > MAX_SIGNING_KEYS:
        raise d.fail("signingKeys", f"must name at most {MAX_SIGNING_KEYS} identities, got {len(keys)}")
    for i, key in enumerate(keys):
        if type(key) is not str:
            raise d.fail(f"signingKeys[{i}]", f"must be text, got {kind_of(key)}")
        if not key.strip() or len(key) > MAX_NAME:
            raise d.fail(f"signingKeys[{i}]", f"must be text of 1 to {MAX_NAME} characters")


ACTIONS: dict[str, ActionKind] = {
    "ListSigningIdentities": read(_list),
    "CreateSigningIdentity": write(_create),
    "ImportSigningIdentity": write(_import),
    "UpdateSigningIdentity": write(_update),
    "DeleteSigningIdentity": write(lambda f, ts: DeleteSigningIdentity(ts, f.text("name", MAX_NAME))),
}
