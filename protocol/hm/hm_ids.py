"""`hm://` addresses of Seed hypermedia resources, as `@seed-hypermedia/client` packs and unpacks
them (`packHmId`, `unpackHmId`): `hm://<account uid>/<path…>?v=<version>#<block>`.

Only what the agents' documents need: the account, the path, a version, a block reference. An
address that names no account, or another scheme, is refused with a sentence that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from ..wire.principals import principal_from_string

__all__ = ["HmId", "parse_hm_id", "MAX_ADDRESS_LENGTH", "VIEWS", "split_view"]

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


# The view terms a read may end with, as the reference's reader branches on them: `:directory`
# (the child documents), `:attributes` (metadata only), `:profile` (an account's profile),
# `:comments` (the comments on a document, or `:comments/<author>/<tsid>` one of them) and
# `:versions` (the document's changes).
VIEWS = ("directory", "attributes", "profile", "comments", "versions")


def split_view(hm_id: HmId) -> tuple[HmId, str | None, str | None]:
    """(the resource, its view term or None, the view's argument or None). `hm://<uid>/:profile`
    (or `hm://<uid>/:profile/<other uid>`) names an account's profile; the other terms follow the
    resource they apply to. ValueError for a view term this reader does not know."""
    path = hm_id.path
    for i, segment in enumerate(path):
        if not segment.startswith(":"):
            continue
        term, rest = segment[1:], path[i + 1:]
        if term not in VIEWS:
            raise ValueError(f"unknown view :{term} (known: {', '.join(':' + v for v in VIEWS)})")
        if term == "profile":
            if i != 0 or len(rest) > 1:
                raise ValueError("a profile is read as hm://<account>/:profile")
            return HmId(rest[0] if rest else hm_id.uid), term, None
        if term == "comments":
            if rest and len(rest) != 2:
                raise ValueError("one comment is read as hm://<document>/:comments/<author>/<id>")
            arg = "/".join(rest) if rest else None
        elif rest:
            raise ValueError(f":{term} ends the address")
        else:
            arg = None
        return HmId(hm_id.uid, path[:i], hm_id.version, None), term, arg
    return hm_id, None, None


def content_links(nodes: list) -> list[str]:
    """Every `hm:` link in a block tree, in order, each once: Link/Embed annotations and
    link-bearing blocks (the reference's `collectHmContentLinks`)."""
    links: dict[str, None] = {}
    todo = list(reversed(nodes if isinstance(nodes, list) else []))
    while todo:
        node = todo.pop()
        block = node.get("block") if isinstance(node, dict) else None
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("link"), str) and block["link"].startswith("hm:"):
            links.setdefault(block["link"])
        for a in block.get("annotations") or ():
            if isinstance(a, dict) and isinstance(a.get("link"), str) and a["link"].startswith("hm:"):
                links.setdefault(a["link"])
        todo.extend(reversed(node.get("children") or ()))
    return list(links)


def malformed_link(link: str) -> bool:
    """A link that can never resolve: not an hm:// id, or its account is not an Ed25519 principal."""
    try:
        parse_hm_id(link if link.startswith("hm://") else link.replace("hm:", "hm://", 1))
    except ValueError:
        return True
    return False
