"""A fake Seed hypermedia (HM) server on a real 127.0.0.1 socket, speaking the web API that
`@seed-hypermedia/client` speaks (server/hypermedia/client.py is our client of it).

    async with FakeHmServer() as hm:
        await client.publish_blobs(blobs)     # POST /api/PublishBlobs (DAG-CBOR body)
        hm.published[-1]                      # the blobs of each call, decoded and checked
        hm.profile(account_id)                # the latest Profile blob of an account
        hm.fail("refuse")                     # the next request: 500 (also hang, garbage, huge, drop)

`PublishBlobs` decodes every blob, checks that its CID is the hash of its bytes and that every
signed blob's Ed25519 signature holds, and stores all of them or none (a refusal is a 400 that
names the first bad blob). The reads `GET /api/Resource`, `Account`, `ResourceMetadata` and
`ListChanges` are answered from what it holds: a document is its latest Ref's heads and every
change reachable from them, their operations applied in (depth, ts) order. Answers are JSON in
superjson's envelope, as the real server's.

For synchronous tests (a CLI in a subprocess, say), `with fake_hm_in_thread() as hm:` runs it
on its own event loop in a thread, same object, same inspection.

From another process (`FakeHmProcess()` starts one):

    python -m tests.fakes.hm_server --port 0 [--vectors]

prints `FAKE_HM_LISTENING http://127.0.0.1:PORT`; `--vectors` preloads the blobs of
tests/hm_vectors/*.json. Over HTTP, `GET /_fake/published` lists what was published (each call's
CIDs, blob types and decoded values, bytes in base64) and `POST /_fake/fail` (JSON
`{"kind": ..., "times": n}`) queues failures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from multiformats import CID
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm.hm_comments import comment_record_id
from seed_agents.protocol.hm.hm_ids import HmId, parse_hm_id
from seed_agents.protocol.wire.principals import principal_to_string

from .loopback import (
    LoopbackFake,
    RecordedRequest,
    chunk_frame,
    pause,
    response_head,
    send,
    send_json,
    serve_until_signal,
)

__all__ = ["FakeHmServer", "FakeHmProcess", "fake_hm_in_thread", "StoredBlob", "FAILURES", "REFUSAL_SECRET"]

FAILURES = ("refuse", "reject", "hang", "garbage", "huge", "huge-stream", "drop", "wrong-shape", "deep", "slow-drip")
# What a refusal's body says: a client error must never repeat it.
REFUSAL_SECRET = "internal trace 7f3a: token=hm-secret-do-not-echo"
HUGE_ANSWER_BYTES = 9 * 1024 * 1024
_RAW, _DAG_PB, _DAG_CBOR = 0x55, 0x70, 0x71
_BLOCK_KEYS = ("type", "id", "text", "annotations", "link", "revision")


@dataclass
class StoredBlob:
    cid: str  # the CID the fake keys it by (true codec)
    data: bytes
    value: object = None  # decoded DAG-CBOR, None for raw / dag-pb blocks

    @property
    def type(self) -> str:
        if isinstance(self.value, dict):
            return str(self.value.get("type", ""))
        return "raw" if CID.decode(self.cid).codec.code == _RAW else "dag-pb"


class BlobRefused(Exception):
    pass


@dataclass
class _Failure:
    kind: str
    times: int = 1


@dataclass
class _Doc:
    account: str
    path: str
    ref: StoredBlob
    changes: list[StoredBlob] = field(default_factory=list)


def _iso(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _json_safe(value):
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, CID):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


class FakeHmServer(LoopbackFake):
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.blobs: dict[bytes, StoredBlob] = {}  # by multihash digest
        self.published: list[list[StoredBlob]] = []  # each accepted PublishBlobs call
        self.requests: list[tuple[str, str]] = []  # (method, target) of every request
        self.failures: deque[_Failure] = deque()

    def fail(self, kind: str, times: int = 1) -> None:
        """Answer the next `times` requests badly: refuse (500), reject (400), hang (never answer), garbage
        (200, not JSON), huge (200, 9 MiB), huge-stream (the same, chunked), drop (close the connection), wrong-shape (200, JSON
        of another shape), deep (200, a document nested 3000 levels), slow-drip (200, a byte every
        0.2 s)."""
        if kind not in FAILURES:
            raise ValueError(f"unknown failure {kind!r}; one of {FAILURES}")
        self.failures.append(_Failure(kind, times))

    # -- what the tests inspect --------------------------------------------------------------

    def of_type(self, blob_type: str) -> list[StoredBlob]:
        return [b for b in self.blobs.values() if b.type == blob_type]

    def profile(self, account: str) -> dict | None:
        """The latest Profile an account signed (by ts), decoded."""
        best = None
        for b in self.of_type("Profile"):
            if principal_to_string(b.value["signer"]) == account:
                if best is None or b.value["ts"] > best["ts"]:
                    best = b.value
        return best

    def get(self, cid: str) -> StoredBlob | None:
        return self.blobs.get(bytes(CID.decode(cid).raw_digest))

    # -- storing -----------------------------------------------------------------------------

    def store(self, entries: list[tuple[str | None, bytes]]) -> list[StoredBlob]:
        """Check every blob, then store them all (BlobRefused names the first bad one)."""
        checked = [self._check(i, cid, data) for i, (cid, data) in enumerate(entries)]
        for i, blob in enumerate(checked):
            if blob.type == "Comment":
                self._check_comment(i, blob, checked)
        for blob in checked:
            self.blobs.setdefault(bytes(CID.decode(blob.cid).raw_digest), blob)
        return checked

    def _check(self, index: int, cid_text: str | None, data: bytes) -> StoredBlob:
        if not isinstance(data, bytes):
            raise BlobRefused(f"blob {index}: data is not bytes")
        digest = hashlib.sha256(data).digest()
        codec = None
        if cid_text is not None:
            try:
                cid = CID.decode(cid_text)
            except Exception:
                raise BlobRefused(f"blob {index}: {cid_text!r} is not a CID") from None
            if cid.hashfun.name != "sha2-256" or bytes(cid.raw_digest) != digest:
                raise BlobRefused(f"blob {index}: CID {cid_text} is not the hash of its data")
            codec = cid.codec.code
        value = None
        if codec in (None, _DAG_CBOR):
            value, canonical = dagcbor.decode_if_canonical(data)
            if not canonical or not isinstance(value, dict):
                if codec == _DAG_CBOR:
                    raise BlobRefused(f"blob {index}: not canonical DAG-CBOR")
                value = None
        true_codec = _DAG_CBOR if value is not None else (codec if codec in (_RAW, _DAG_PB) else _RAW)
        if isinstance(value, dict) and "sig" in value:
            self._verify(index, value)
        cid = CID("base32", 1, true_codec, ("sha2-256", digest))
        return StoredBlob(str(cid), data, value)

    def _check_comment(self, index: int, blob: StoredBlob, batch: list[StoredBlob]) -> None:
        """A comment is on a document version the fake holds, and a reply under comments it holds;
        an update or a deletion (a blob with the record's `id`) replaces a comment its signer wrote."""
        v = blob.value
        known = {b.cid for b in batch}
        if "id" in v:
            record = f"{principal_to_string(v['signer'])}/{v['id']}"
            originals = self._comment_blobs() + [b for b in batch if b.type == "Comment" and "id" not in b.value]
            if not any(comment_record_id(b.data) == record for b in originals):
                raise BlobRefused(f"blob {index}: it replaces comment {record}, which this server does not hold "
                                  "(only a comment's author can edit or delete it)")
        for head in v.get("version") or []:
            held = self.get(str(head))
            if held is None or held.type != "Change":
                raise BlobRefused(f"blob {index}: the comment is on a version this server does not hold ({head})")
        for key in ("replyParent", "threadRoot"):
            ref = v.get(key)
            if ref is not None and str(ref) not in known and (self.get(str(ref)) is None
                                                               or self.get(str(ref)).type != "Comment"):
                raise BlobRefused(f"blob {index}: {key} {ref} is not a comment this server holds")

    @staticmethod
    def _verify(index: int, value: dict) -> None:
        signer, sig = value.get("signer"), value.get("sig")
        if not (isinstance(signer, bytes) and len(signer) == 34 and signer[:2] == b"\xed\x01"):
            raise BlobRefused(f"blob {index}: signer is not an Ed25519 principal")
        if not (isinstance(sig, bytes) and len(sig) == 64):
            raise BlobRefused(f"blob {index}: sig is not 64 bytes")
        unsigned = dict(value)
        unsigned["sig"] = bytes(64)
        try:
            VerifyKey(signer[2:]).verify(dagcbor.encode(unsigned), sig)
        except BadSignatureError:
            raise BlobRefused(f"blob {index}: the signature does not verify") from None

    def load_vectors(self, directory: Path | None = None) -> int:
        """Store the blobs the vectors script wrote (tests/hm_vectors/*.json); how many."""
        directory = directory or Path(__file__).resolve().parents[1] / "hm_vectors"
        count = 0
        # Comments last: they are on the documents' versions.
        for path in sorted(directory.glob("*.json"), key=lambda p: (p.name == "comments.json", p.name)):
            if path.name.startswith("package") or path.name in ("refs.json", "drafts.json"):
                continue   # refs.json deletes and moves the vectors' document, drafts.json is published by tests
            entries = list(_vector_blobs(json.loads(path.read_text(encoding="utf-8"))))
            count += len(self.store(entries))
        return count

    # -- documents ---------------------------------------------------------------------------

    def document(self, hm_id: HmId) -> _Doc | None:
        account, path = hm_id.uid, hm_id.api_path
        best = None
        for b in self.of_type("Ref"):
            v = b.value
            space = principal_to_string(v.get("space") or v["signer"])
            if space != account or v.get("path", "") != path:
                continue
            key = (v.get("generation", 0), v["ts"])
            if best is None or key > (best.value.get("generation", 0), best.value["ts"]):
                best = b
        if best is None:
            return None
        heads = [str(h) for h in best.value.get("heads", [])]
        if hm_id.version:
            heads = hm_id.version.split(".")
        changes: dict[str, StoredBlob] = {}
        todo = list(heads)
        while todo:
            cid = todo.pop()
            blob = self.get(cid)
            if blob is None or blob.type != "Change" or blob.cid in changes:
                continue
            changes[blob.cid] = blob
            todo.extend(str(d) for d in blob.value.get("deps", []))
        ordered = sorted(changes.values(), key=lambda b: (b.value.get("depth", 0), b.value["ts"], b.cid))
        return _Doc(account, path, best, ordered)

    @staticmethod
    def _apply(changes: list[StoredBlob]) -> tuple[dict, list[dict]]:
        metadata: dict = {}
        blocks: dict[str, dict] = {}
        children: dict[str, list[str]] = {"": []}
        parent_of: dict[str, str] = {}
        for change in changes:
            for op in (change.value.get("body") or {}).get("ops", []):
                kind = op.get("type")
                if kind == "SetAttributes":
                    for attr in op.get("attrs", []):
                        metadata[".".join(attr["key"])] = attr.get("value")
                elif kind == "ReplaceBlock":
                    block = op["block"]
                    blocks[block["id"]] = block
                elif kind == "MoveBlocks":
                    parent = op.get("parent", "")
                    moved = list(op.get("blocks", []))
                    for bid in moved:
                        old = parent_of.pop(bid, None)
                        if old is not None:
                            children[old].remove(bid)
                    siblings = children.setdefault(parent, [])
                    siblings[:0] = moved  # no left sibling: at the start, in the order given
                    for bid in moved:
                        parent_of[bid] = parent
                elif kind == "DeleteBlocks":
                    for bid in op.get("blocks", []):
                        old = parent_of.pop(bid, None)
                        if old is not None:
                            children[old].remove(bid)
                        blocks.pop(bid, None)

        def nodes(parent: str) -> list[dict]:
            out = []
            for bid in children.get(parent, []):
                if bid not in blocks:
                    continue
                raw = blocks[bid]
                block = {k: raw[k] for k in _BLOCK_KEYS if k in raw}
                block.setdefault("text", "")
                block.setdefault("annotations", [])
                block["attributes"] = {k: v for k, v in raw.items() if k not in _BLOCK_KEYS}
                node: dict = {"block": block}
                kids = nodes(bid)
                if kids:
                    node["children"] = kids
                out.append(node)
            return out

        return metadata, nodes("")

    def _resource(self, hm_id: HmId) -> dict:
        doc = self.document(hm_id)
        if doc is None:
            return {"type": "not-found", "id": hm_id.unpacked()}
        redirect = doc.ref.value.get("redirect")
        if isinstance(redirect, dict) and not hm_id.version:
            space = principal_to_string(redirect["space"]) if redirect.get("space") else doc.account
            path = [p for p in str(redirect.get("path", "")).split("/") if p]
            return {"type": "redirect", "id": hm_id.unpacked(), "redirectTarget": HmId(space, tuple(path)).unpacked()}
        if not doc.ref.value.get("heads") and not hm_id.version:
            return {"type": "tombstone", "id": hm_id.unpacked()}
        metadata, content = self._apply(doc.changes)
        genesis = str(doc.ref.value["genesisBlob"])
        version = ".".join(str(h) for h in doc.ref.value.get("heads", [])) if not hm_id.version else hm_id.version
        times = [c.value["ts"] for c in doc.changes if c.value["ts"]]
        authors = sorted({principal_to_string(c.value["signer"]) for c in doc.changes})
        return {
            "type": "document",
            "id": hm_id.unpacked(),
            "document": {
                "content": content, "version": version, "account": doc.account, "authors": authors,
                "path": doc.path, "createTime": _iso(min(times or [0])), "updateTime": _iso(max(times or [0])),
                "metadata": metadata, "genesis": genesis, "visibility": "PUBLIC",
                "generationInfo": {"genesis": genesis, "generation": str(doc.ref.value.get("generation", 0))},
            },
        }

    def _account(self, uid: str) -> dict:
        try:
            hm_id = parse_hm_id(f"hm://{uid}")
        except ValueError:
            return {"type": "account-not-found", "uid": uid}
        profile = self.profile(uid)
        doc = self.document(hm_id)
        if profile is None and doc is None:
            return {"type": "account-not-found", "uid": uid}
        metadata = self._apply(doc.changes)[0] if doc else {}
        if profile is not None:
            metadata = {**metadata, "name": profile.get("name", metadata.get("name"))}
            if profile.get("avatar"):
                metadata["icon"] = profile["avatar"]
        return {"type": "account", "id": hm_id.unpacked(), "metadata": metadata}

    def _list_changes(self, hm_id: HmId) -> dict:
        doc = self.document(HmId(hm_id.uid, hm_id.path))
        if doc is None:
            return {"changes": []}
        changes = [{"id": c.cid, "author": principal_to_string(c.value["signer"]),
                    "deps": [str(d) for d in c.value.get("deps", [])], "createTime": _iso(c.value["ts"])}
                   for c in reversed(doc.changes)]
        return {"changes": changes,
                "latestVersion": ".".join(str(h) for h in doc.ref.value.get("heads", []))}

    # -- IPFS files ---------------------------------------------------------------------------

    def file(self, cid_text: str) -> bytes | None:
        """The UnixFS file a CID names, assembled from the blocks held (None when one is missing)."""
        try:
            blob = self.get(cid_text)
        except Exception:
            return None
        if blob is None:
            return None
        if CID.decode(blob.cid).codec.code == _RAW:
            return blob.data
        out = bytearray()
        for link in _pb_links(blob.data):
            part = self.file(str(CID.decode(link)))
            if part is None:
                return None
            out += part
        return bytes(out)

    # -- directories, comments, search ---------------------------------------------------------

    def _documents(self) -> dict[tuple[str, str], _Doc]:
        """Every document the fake holds, by (account, path)."""
        keys = set()
        for b in self.of_type("Ref"):
            v = b.value
            keys.add((principal_to_string(v.get("space") or v["signer"]), v.get("path", "")))
        out = {}
        for account, path in keys:
            doc = self.document(HmId(account, tuple(p for p in path.split("/") if p)))
            if doc is not None and doc.ref.value.get("heads"):   # deleted and redirected ones are gone
                out[(account, path)] = doc
        return out

    def _query(self, includes: object) -> dict:
        if not isinstance(includes, list) or not all(isinstance(i, dict) for i in includes):
            raise ValueError("includes must be a list of {space, path, mode}")
        results = []
        docs = self._documents()
        for inc in includes:
            space, parent, mode = inc.get("space"), inc.get("path", ""), inc.get("mode")
            if mode != "Children":
                raise ValueError(f"this fake answers mode Children only, not {mode!r}")
            parent_segs = [p for p in str(parent or "").split("/") if p]
            for (account, path), doc in sorted(docs.items()):
                segs = [p for p in path.split("/") if p]
                if account != space or len(segs) != len(parent_segs) + 1 or segs[:-1] != parent_segs:
                    continue
                metadata, _ = self._apply(doc.changes)
                times = [c.value["ts"] for c in doc.changes if c.value["ts"]]
                kids = sum(1 for (a, p) in docs if a == account and p.startswith(path + "/")
                           and p.count("/") == path.count("/") + 1)
                results.append({"id": HmId(account, tuple(segs)).unpacked(), "path": segs, "metadata": metadata,
                                "updateTime": _iso(max(times or [0])), "activitySummary": {"childrenCount": kids}})
        return {"in": includes[0] if includes else {}, "results": results}

    def _comment_blobs(self) -> list[StoredBlob]:
        """The comments as first written (an edit, a blob with the record's `id`, replaces one)."""
        return sorted((b for b in self.of_type("Comment") if "id" not in b.value), key=lambda b: (b.value["ts"], b.cid))

    def _latest(self, blob: StoredBlob) -> StoredBlob:
        """The comment's current blob: its latest edit by its author, else itself."""
        record = comment_record_id(blob.data)
        edits = [b for b in self.of_type("Comment") if "id" in b.value
                 and f"{principal_to_string(b.value['signer'])}/{b.value['id']}" == record]
        return max(edits, key=lambda b: (b.value["ts"], b.cid)) if edits else blob

    def _deleted(self, blob: StoredBlob) -> bool:
        latest = self._latest(blob)
        return latest is not blob and not latest.value.get("body")

    def _comment_view(self, blob: StoredBlob) -> dict:
        v = blob.value
        latest = self._latest(blob)
        by_cid = {b.cid: b for b in self._comment_blobs()}
        out = {"id": comment_record_id(blob.data), "version": latest.cid,
               "author": principal_to_string(v["signer"]), "targetAccount": principal_to_string(v["space"]),
               "targetPath": v.get("path", ""), "targetVersion": ".".join(str(c) for c in v.get("version", [])),
               "content": _nodes(latest.value.get("body") or []), "createTime": _iso(v["ts"]),
               "updateTime": _iso(latest.value["ts"]),
               "visibility": "PRIVATE" if v.get("visibility") == "Private" else "PUBLIC"}
        for key, ref in (("replyParent", v.get("replyParent")), ("threadRoot", v.get("threadRoot"))):
            if ref is not None:
                parent = by_cid.get(str(ref))
                out[key + "Version"] = str(ref)
                if parent is not None:
                    out[key] = comment_record_id(parent.data)
        return out

    def comments_on(self, account: str, path: str) -> list[dict]:
        """The comments the fake holds on a document, oldest first, as ListComments answers them."""
        return [self._comment_view(b) for b in self._comment_blobs()
                if principal_to_string(b.value["space"]) == account and b.value.get("path", "") == path
                and not self._deleted(b)]

    def _events(self, query: dict) -> dict:
        """`ListEvents`: a `comment` event for every comment held, newest first (the resolved
        shape the activity monitor reads), paged by `pageSize` / `pageToken` (an offset)."""
        events = [{"id": b.cid, "type": "comment", "feedEventId": f"blob-{b.cid}", "eventAtMs": b.value["ts"],
                   "author": {"id": {"uid": principal_to_string(b.value["signer"]),
                                     "id": f"hm://{principal_to_string(b.value['signer'])}", "path": []}},
                   "comment": self._comment_view(b)} for b in reversed(self._comment_blobs()) if not self._deleted(b)]
        size, start = int(query.get("pageSize") or 50), int(query.get("pageToken") or 0)
        more = start + size < len(events)
        return {"events": events[start:start + size], "nextPageToken": str(start + size) if more else ""}

    def _comment(self, record_id: str) -> dict | None:
        for b in self._comment_blobs():
            if comment_record_id(b.data) == record_id:
                return None if self._deleted(b) else self._comment_view(b)
        return None

    def _search(self, query: dict) -> dict:
        """Titles (and with includeBody, block text and comments) containing the query, case-folded."""
        needle = str(query.get("query", "")).casefold()
        body = query.get("includeBody") == "true"
        size = int(query.get("pageSize") or 20)
        entities = []
        for (account, path), doc in sorted(self._documents().items()):
            if query.get("accountUid") and account != query["accountUid"]:
                continue
            metadata, content = self._apply(doc.changes)
            title = str(metadata.get("name") or "")
            texts = [title] + ([n["block"].get("text", "") for n in _walk(content)] if body else [])
            if any(needle in t.casefold() for t in texts):
                segs = tuple(p for p in path.split("/") if p)
                times = [c.value["ts"] for c in doc.changes if c.value["ts"]]
                entities.append({"id": HmId(account, segs).unpacked(), "title": title, "icon": "",
                                 "parentNames": [], "versionTime": _iso(max(times or [0])),
                                 "searchQuery": query.get("query", ""), "type": "document"})
        return {"entities": entities[:size], "searchQuery": query.get("query", ""), "nextPageToken": ""}

    # -- HTTP --------------------------------------------------------------------------------

    async def _respond(self, request: RecordedRequest, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        self.requests.append((request.method, request.path))
        if not request.path.startswith("/_fake/") and self.failures:
            failure = self.failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self.failures.popleft()
            return await self._misbehave(failure.kind, reader, writer)
        await self._route(request, writer)
        return True

    async def _misbehave(self, kind: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Play one failure; False when the connection is to end."""
        if kind == "refuse":
            await send_json(writer, 500, {"error": REFUSAL_SECRET})
        elif kind == "reject":   # a refusal for good (4xx): the queue keeps it as failed
            await send_json(writer, 400, {"error": REFUSAL_SECRET})
        elif kind == "garbage":
            await send(writer, 200, "application/json", b"<html>" + REFUSAL_SECRET.encode() + b"</html>")
        elif kind == "wrong-shape":
            await send_json(writer, 200, {"json": ["not", "an", "answer"]})
        elif kind == "deep":  # a document nested past any sane depth
            node = '{"block": {"type": "Paragraph", "id": "x", "text": "t"}, "children": [%s]}'
            content = "%s"
            for _ in range(3000):
                content = node % content
            body = ('{"json": {"type": "document", "document": {"metadata": {}, "content": [%s]}}}'
                    % content.replace("%s", ""))
            await send(writer, 200, "application/json", body.encode())
        elif kind == "huge-stream":  # no Content-Length: the size shows only while reading
            writer.write(response_head(200, "application/json", chunked=True))
            piece = chunk_frame(b"x" * 65536)
            try:
                for _ in range(HUGE_ANSWER_BYTES // 65536 + 1):
                    writer.write(piece)
                    await writer.drain()
            except ConnectionError:
                return False
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        elif kind == "huge":
            await send(writer, 200, "application/json", b'{"json": "' + b"x" * HUGE_ANSWER_BYTES + b'"}')
        elif kind == "drop":
            writer.transport.abort()
            return False
        elif kind == "slow-drip":  # a byte a second, forever: only a whole-exchange deadline ends it
            writer.write(response_head(200, "application/json", chunked=True))
            try:
                for _ in range(600):
                    if writer.is_closing():
                        break
                    writer.write(chunk_frame(b" "))
                    await writer.drain()
                    await asyncio.sleep(0.2)
            except ConnectionError:
                pass
            return False
        elif kind == "hang":
            await pause(reader, None)  # until the client gives up
            return False
        return True

    async def _route(self, request, writer: asyncio.StreamWriter) -> None:
        url = urlsplit(request.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        route = (request.method, url.path)
        if route == ("POST", "/api/PublishBlobs"):
            return await self._publish(request, writer)
        if route == ("GET", "/_fake/published"):
            return await send_json(writer, 200, [[{"cid": b.cid, "type": b.type, "value": _json_safe(b.value)}
                                                   for b in call] for call in self.published])
        if route == ("POST", "/_fake/fail"):
            body = request.body if isinstance(request.body, dict) else {}
            self.fail(str(body.get("kind")), int(body.get("times", 1)))
            return await send_json(writer, 200, {"ok": True})
        if request.method == "GET" and url.path.startswith("/ipfs/"):
            data = self.file(url.path[len("/ipfs/"):])
            if data is None:
                return await send_json(writer, 404, {"error": "no such file"})
            return await send(writer, 200, "application/octet-stream", data)
        if route == ("GET", "/api/ListEvents"):
            return await self._answer(writer, self._events(query))
        if request.method == "GET" and url.path in ("/api/Query", "/api/ListComments", "/api/Comment",
                                                     "/api/Search", "/api/AccountContacts",
                                                     "/api/ListCapabilities"):
            return await self._read_more(url.path, query, writer)
        reads = {"/api/Resource": "id", "/api/ResourceMetadata": "id", "/api/ListChanges": "targetId",
                 "/api/Account": "id"}
        if request.method != "GET" or url.path not in reads:
            return await send_json(writer, 404, {"error": f"no route {request.method} {url.path}"})
        param = query.get(reads[url.path])
        if not param:
            return await send_json(writer, 400, {"error": f"missing query parameter {reads[url.path]}"})
        if url.path == "/api/Account":
            return await self._answer(writer, self._account(param))
        try:
            hm_id = parse_hm_id(param)
        except ValueError as exc:
            return await send_json(writer, 400, {"error": str(exc)})
        if url.path == "/api/Resource":
            answer = self._resource(hm_id)
        elif url.path == "/api/ResourceMetadata":
            resource = self._resource(hm_id)
            answer = {"id": hm_id.unpacked(),
                      "metadata": resource["document"]["metadata"] if resource["type"] == "document" else None}
        else:
            answer = self._list_changes(hm_id)
        await self._answer(writer, answer)

    async def _read_more(self, path: str, query: dict, writer: asyncio.StreamWriter) -> None:
        try:
            if path == "/api/Query":
                return await self._answer(writer, self._query(json.loads(query["includes"])))
            if path == "/api/ListComments":
                target = json.loads(query["targetId"])
                hm_id = HmId(target["uid"], tuple(p for p in target.get("path") or () if p))
                return await self._answer(writer, {"comments": self.comments_on(hm_id.uid, hm_id.api_path),
                                                   "authors": {}})
            if path == "/api/Comment":
                comment = self._comment(query["__value"])
                if comment is None:
                    return await send_json(writer, 404, {"error": f"no comment {query['__value']}"})
                return await self._answer(writer, comment)
            if path == "/api/Search":
                return await self._answer(writer, self._search(query))
            if path == "/api/AccountContacts":
                return await send_json(writer, 200, {"json": []})
            return await self._answer(writer, {"capabilities": []})
        except (KeyError, ValueError, TypeError) as exc:
            return await send_json(writer, 400, {"error": f"bad {path} request: {exc}"})

    async def _answer(self, writer: asyncio.StreamWriter, value: dict) -> None:
        meta = None
        if value.get("type") == "document":
            meta = {"values": {"document.generationInfo.generation": ["bigint"]}}
        await send_json(writer, 200, {"json": _json_safe(value), **({"meta": meta} if meta else {})})

    async def _publish(self, request, writer: asyncio.StreamWriter) -> None:
        if request.headers.get("content-type") != "application/cbor":
            return await send_json(writer, 415, {"error": "PublishBlobs takes application/cbor"})
        try:
            body = dagcbor.decode(request.raw_body, max_size=64 << 20)
            entries = body["blobs"]
            if not isinstance(entries, list) or not entries:
                raise BlobRefused("blobs must be a non-empty list")
            pairs = []
            for i, e in enumerate(entries):
                if not isinstance(e, dict) or set(e) - {"cid", "data"} or "data" not in e:
                    raise BlobRefused(f"blob {i}: not a {{cid?, data}} map")
                pairs.append((e.get("cid"), e["data"]))
            stored = self.store(pairs)
        except BlobRefused as exc:
            return await send_json(writer, 400, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - any malformed body is the client's fault here
            return await send_json(writer, 400, {"error": f"malformed PublishBlobs body: {exc}"})
        self.published.append(stored)
        await send_json(writer, 200, {"json": {"cids": [b.cid for b in stored]}})


def _nodes(publishable: list) -> list[dict]:
    """A comment's publishable blocks back as the API's block nodes."""
    out = []
    for raw in publishable:
        block = {k: raw[k] for k in _BLOCK_KEYS if k in raw}
        block.setdefault("text", "")
        block.setdefault("annotations", [])
        block["attributes"] = {k: v for k, v in raw.items() if k not in _BLOCK_KEYS and k != "children"}
        node: dict = {"block": block}
        if raw.get("children"):
            node["children"] = _nodes(raw["children"])
        out.append(node)
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _pb_links(data: bytes) -> list[bytes]:
    """The link hashes of a dag-pb node, in order (PBNode field 2, PBLink field 1)."""
    links, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        size, i = _varint(data, i) if key & 7 == 2 else (0, i)
        body, i = data[i:i + size], i + size
        if key >> 3 == 2:
            j = 0
            while j < len(body):
                k, j = _varint(body, j)
                if k & 7 == 2:
                    n, j = _varint(body, j)
                    if k >> 3 == 1:
                        links.append(body[j:j + n])
                    j += n
                else:
                    _, j = _varint(body, j)
    return links


def _walk(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from _walk(node.get("children") or [])


def _vector_blobs(value):
    """Every {cid, data} pair (data base64) anywhere in a vectors file."""
    if isinstance(value, dict):
        if isinstance(value.get("cid"), str) and isinstance(value.get("data"), str):
            yield value["cid"], base64.b64decode(value["data"])
            return
        for v in value.values():
            yield from _vector_blobs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _vector_blobs(v)


@contextmanager
def fake_hm_in_thread(*, vectors: bool = False) -> Iterator[FakeHmServer]:
    """A FakeHmServer on its own event loop in a daemon thread, for synchronous tests."""
    loop = asyncio.new_event_loop()
    fake = FakeHmServer()
    thread = threading.Thread(target=loop.run_forever, name="fake-hm", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(10)
    if vectors:
        fake.load_vectors()
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class FakeHmProcess:
    """`python -m tests.fakes.hm_server` in a child process (for tests that kill or restart it)."""

    def __init__(self, *, vectors: bool = False) -> None:
        root = Path(__file__).resolve().parents[2]
        args = [sys.executable, "-m", "tests.fakes.hm_server", "--port", "0"] + (["--vectors"] if vectors else [])
        self.proc = subprocess.Popen(args, cwd=str(root), stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONPATH=str(root)))
        line = self.proc.stdout.readline()
        assert line.startswith("FAKE_HM_LISTENING"), line
        self.base_url = line.split()[1]

    def published(self) -> list[list[dict]]:
        import httpx
        return httpx.get(f"{self.base_url}/_fake/published", timeout=5).json()

    def fail(self, kind: str, times: int = 1) -> None:
        import httpx
        httpx.post(f"{self.base_url}/_fake/fail", json={"kind": kind, "times": times}, timeout=5).raise_for_status()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


async def _serve(args: argparse.Namespace) -> None:
    async with FakeHmServer(host=args.host, port=args.port) as fake:
        if args.vectors:
            fake.load_vectors()
        await serve_until_signal(f"FAKE_HM_LISTENING {fake.base_url}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Seed hypermedia server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--vectors", action="store_true", help="preload tests/hm_vectors/*.json")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
