"""`hm://` addresses of Seed hypermedia resources, as `@seed-hypermedia/client` packs and unpacks
them (`packHmId`, `unpackHmId`): `hm://<account uid>/<path…>?v=<version>#<block>`.

Only what the agents' documents need: the account, the path, a version, a block reference. An
address that names no account, or another scheme, is refused with a sentence that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from .principals import principal_from_string

__all__ = ["HmId", "parse_hm_id", "MAX_ADDRESS_LENGTH"]

MAX_ADDRESS_LENGTH = 2048


@dataclass(frozen=True)
class HmId:
    uid: str
    path: tuple[str, ...] = ()
    version: str | None = None
    block_ref: str | None = None

    @property
    def base(self) -> str:
        """`packBaseId`: hm://uid/path, no version."""
        rest = "/".join(p for p in self.path if p)
        return f"hm://{self.uid}" + (f"/{rest}" if rest else "")

    def pack(self) -> str:
        """`packHmId`: the base id, `?v=` when a version is set, `#block` when one is named."""
        out = self.base + (f"?v={self.version}" if self.version else "")
        return out + (f"#{self.block_ref}" if self.block_ref else "")

    @property
    def api_path(self) -> str:
        """The path as the API and Ref blobs spell it: "" for the home document, else "/a/b"."""
        rest = "/".join(p for p in self.path if p)
        return f"/{rest}" if rest else ""

    def unpacked(self) -> dict:
        """The library's UnpackedHypermediaId, as answers carry it."""
        return {
            "id": self.base, "uid": self.uid, "path": list(self.path), "version": self.version,
            "blockRef": self.block_ref, "blockRange": None, "hostname": None, "scheme": "hm",
            "latest": self.version is None,
        }


def parse_hm_id(address: str) -> HmId:
    """An `hm://` address (or a web `https://host/hm/<uid>/…` link) → HmId; ValueError says why not."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("a Seed document address is required (hm://<account>/<path>)")
    address = address.strip()
    if len(address) > MAX_ADDRESS_LENGTH:
        raise ValueError(f"a Seed document address is at most {MAX_ADDRESS_LENGTH} characters")
    scheme, sep, rest = address.partition("://")
    if not sep or not rest:
        raise ValueError("a Seed document address starts with hm://")
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    parts = rest.split("/")
    if scheme in ("http", "https"):
        if len(parts) < 3 or parts[1] != "hm":
            raise ValueError("a web link to a Seed document has the form https://<host>/hm/<account>/<path>")
        parts = parts[2:]
    elif scheme != "hm":
        raise ValueError(f"a Seed document address starts with hm://, not {scheme}://")
    uid, path = parts[0], tuple(p for p in parts[1:] if p)
    try:
        principal_from_string(uid)
    except Exception:
        raise ValueError("a Seed document address names an account id (z6Mk…) after hm://") from None
    versions = parse_qs(query).get("v")
    version = versions[0] if versions and versions[0] else None
    block_ref = fragment.split("[", 1)[0].rstrip("+") or None
    return HmId(uid, path, version, block_ref)
