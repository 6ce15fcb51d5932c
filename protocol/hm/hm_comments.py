"""Seed hypermedia comments, byte for byte as `@seed-hypermedia/client` (0.0.83) builds them
(`createComment`, `commentRecordIdFromBlob`): what the `write hm://… {action: "comment"}` verb
publishes, as the reference's `writeCommentCreate`.

A comment is one signed DAG-CBOR blob: `{type: "Comment", body, space, path, version,
replyParent?, threadRoot?, signer, ts, sig, visibility?}`. `body` is the comment's blocks in the
library's publishable form (`blocksToPublishable`: each block's attributes spread into it, its
children nested, empty paragraphs dropped); `version` is the commented document's version as
CIDs; a reply names its parent comment's version (`replyParent`) and its thread's root
(`threadRoot`). Its record id is `<author uid>/<tsid>`, the tsid being the time's low 48 bits
and the blob's SHA-256 prefix, base58btc. Pure: the time is an argument.
Proven against the library's bytes: tests/hm_vectors/comments.json, tests/protocol/test_hm_comments.py.
"""

from __future__ import annotations

import hashlib
from typing import Callable

from multiformats import CID

from ..wire import dagcbor
from .hm_blobs import SIG_SIZE, Blob, blob_cid
from .hm_markdown import parse_markdown, random_block_id, to_hm_nodes
from ..wire.keys import Keypair
from ..wire.principals import _base58btc, principal_from_string

__all__ = ["UnsupportedBlock", "comment_blocks", "blocks_to_publishable", "comment_blob",
           "comment_record_id", "comment_url"]

_EXCLUSIVE = ("TextColor", "BackgroundColor", "TextSize", "TextFamily")
_VALUED = ("TextColor", "BackgroundColor", "TextSize", "TextFamily")


class UnsupportedBlock(ValueError):
    """A block or annotation a comment cannot hold (the library throws on it too)."""


def comment_blocks(markdown: str, new_id: Callable[[], str] = random_block_id) -> list[dict]:
    """A comment's Markdown as blocks (the reference's `commentMarkdownToBlocks`; front matter is
    not part of a comment)."""
    tree, _ = parse_markdown(markdown, new_id)
    return to_hm_nodes(tree)


def _annotations(annotations: list[dict]) -> list[dict]:
    for kind in _EXCLUSIVE:   # validateExclusiveAnnotations
        same = [a for a in annotations if a.get("type") == kind]
        for i, a in enumerate(same):
            for b in same[i + 1:]:
                va, vb = (a.get("attributes") or {}).get("value"), (b.get("attributes") or {}).get("value")
                if va and vb and va == vb:
                    continue
                if any(s1 < e2 and s2 < e1 for s1, e1 in zip(a.get("starts", []), a.get("ends", []))
                       for s2, e2 in zip(b.get("starts", []), b.get("ends", []))):
                    raise UnsupportedBlock(f"{kind} annotations with different values have overlapping ranges")
    out = []
    for a in annotations:
        kind = a.get("type")
        base = {"type": kind, "starts": a.get("starts"), "ends": a.get("ends")}
        if kind in ("Bold", "Italic", "Underline", "Strike", "Code"):
            out.append(base)
        elif kind in ("Link", "Embed"):
            out.append({**base, "link": a.get("link") or ""})
        elif kind in _VALUED:
            out.append({**base, "attributes": {"value": (a.get("attributes") or {}).get("value") or ""}})
        else:
            raise UnsupportedBlock(f"Unsupported annotation type: {kind}")
    return out


def _strip(value):
    """deepStripUndefined: JavaScript's undefined is our None inside the block (never a value)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _publishable(node: dict) -> dict | None:
    block = node["block"]
    kind = block.get("type")
    attrs = block.get("attributes") or {}
    children = blocks_to_publishable(node.get("children") or [])
    text = block.get("text") or ""   # cleanContentOfUndefined: a block without text has ""
    if kind == "Paragraph":
        if text == "" and not node.get("children") and "childrenType" not in attrs:
            return None
        return {"id": block["id"], "type": kind, "text": text,
                "annotations": _annotations(block.get("annotations") or []), **attrs, "children": children}
    if kind in ("Heading", "Math", "Code"):
        return {"id": block["id"], "type": kind, "text": text,
                "annotations": _annotations(block.get("annotations") or []), **attrs, "children": children}
    if kind == "Image":
        return {"id": block["id"], "type": kind, "text": text, "link": block.get("link"),
                "annotations": _annotations(block.get("annotations") or []), **attrs, "children": children}
    if kind == "Video":
        return {"id": block["id"], "type": kind, "text": "", "link": block.get("link"), **attrs,
                "children": children}
    if kind == "Button":
        return {"id": block["id"], "type": kind, "text": text, "link": block.get("link"), **attrs,
                "children": children}
    if kind in ("File", "Embed", "WebEmbed"):
        return {"id": block["id"], "type": kind, "link": block.get("link"), **attrs, "children": children}
    raise UnsupportedBlock(f"a comment cannot hold a {kind} block")


def blocks_to_publishable(nodes: list[dict]) -> list[dict]:
    """The library's `blocksToPublishable`."""
    return [p for p in (_publishable(n) for n in nodes) if p is not None]


def _trim_trailing_empty(nodes: list[dict]) -> list[dict]:
    end = len(nodes)
    while end > 0:
        node = nodes[end - 1]
        block = node["block"]
        if node.get("children") or block.get("type") not in ("Paragraph", "Heading") \
                or (block.get("text") or "").strip():
            break
        end -= 1
    return nodes[:end]


def comment_blob(seed: bytes, content: list[dict], space: str, path: str, version: str, ts_ms: int, *,
                 reply_parent: str | None = None, thread_root: str | None = None,
                 visibility: str = "") -> Blob:
    """`createComment({content, docId, docVersion, replyCommentVersion, rootReplyCommentVersion,
    visibility})`: the comment on `space` + `path` ("" or "/a/b") at `version` ("cid" or
    "cid1.cid2"), a reply when `reply_parent` (the parent's version) is given."""
    kp = Keypair.from_seed(seed)
    value: dict = {
        "type": "Comment",
        "body": _strip(blocks_to_publishable(_trim_trailing_empty(content))),
        "space": principal_from_string(space),
        "version": [CID.decode(v) for v in version.split(".")],
        "signer": kp.principal,
        "ts": ts_ms,
        "sig": bytes(SIG_SIZE),
        "path": path,
    }
    if reply_parent:
        value["replyParent"] = CID.decode(reply_parent)
    if thread_root:
        value["threadRoot"] = CID.decode(thread_root)
    if visibility:
        value["visibility"] = visibility
    value["sig"] = kp.sign(dagcbor.encode(value))
    data = dagcbor.encode(value)
    return Blob(blob_cid(data), data)


def _tsid(comment_id: str) -> str:
    tsid = comment_id.split("/")[1] if comment_id.count("/") == 1 else ""
    if not tsid:
        raise ValueError(f"{comment_id[:100]!r} is not a comment id (<author>/<tsid>)")
    return tsid


def comment_update_blob(seed: bytes, comment_id: str, content: list[dict], space: str, path: str, version: str,
                        ts_ms: int, *, reply_parent: str | None = None, thread_root: str | None = None,
                        visibility: str = "") -> Blob:
    """`updateComment`: a new body for the comment `comment_id` (`<author>/<tsid>`, signed by its
    author), on the same target, version and thread as the comment it replaces: the comment blob
    with the record's `id` (the tsid)."""
    kp = Keypair.from_seed(seed)
    value: dict = {
        "type": "Comment",
        "id": _tsid(comment_id),
        "body": _strip(blocks_to_publishable(_trim_trailing_empty(content))),
        "space": principal_from_string(space),
        "path": path,
        "version": [CID.decode(v) for v in version.split(".")],
        "signer": kp.principal,
        "ts": ts_ms,
        "sig": bytes(SIG_SIZE),
    }
    if reply_parent:
        value["replyParent"] = CID.decode(reply_parent)
    if thread_root:
        value["threadRoot"] = CID.decode(thread_root)
    if visibility:
        value["visibility"] = visibility
    value["sig"] = kp.sign(dagcbor.encode(value))
    data = dagcbor.encode(value)
    return Blob(blob_cid(data), data)


def comment_delete_blob(seed: bytes, comment_id: str, space: str, path: str, version: str, ts_ms: int, *,
                        visibility: str = "") -> Blob:
    """`deleteComment`: the comment's tombstone, an empty body under the record's `id`, its
    thread references dropped."""
    kp = Keypair.from_seed(seed)
    value: dict = {
        "type": "Comment",
        "id": _tsid(comment_id),
        "body": [],
        "space": principal_from_string(space),
        "path": path,
        "version": [CID.decode(v) for v in version.split(".")],
        "signer": kp.principal,
        "ts": ts_ms,
        "sig": bytes(SIG_SIZE),
    }
    if visibility:
        value["visibility"] = visibility
    value["sig"] = kp.sign(dagcbor.encode(value))
    data = dagcbor.encode(value)
    return Blob(blob_cid(data), data)


def comment_record_id(data: bytes) -> str:
    """`commentRecordIdFromBlob`: `<author uid>/<tsid>` of a comment blob's bytes."""
    value = dagcbor.decode(data)
    if not isinstance(value, dict) or value.get("type") != "Comment":
        raise ValueError("not a Comment blob")
    ts = int(value["ts"]) & 0xFFFFFFFFFFFFFFFF
    tsid = ts.to_bytes(8, "big")[2:] + hashlib.sha256(data).digest()[:4]
    return f"z{_base58btc(bytes(value['signer']))}/z{_base58btc(tsid)}"


def comment_url(target_url: str, comment_id: str) -> str:
    """The reference's `appendCommentViewToTargetUrl`: `<target>/:comments/<id>`, the target's
    query kept after it."""
    base = target_url.split("#", 1)[0]
    head, sep, query = base.partition("?")
    return f"{head}/:comments/{comment_id}" + (f"?{query}" if sep else "")
