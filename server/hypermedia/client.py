"""The HTTP half of the Seed hypermedia client: a Seed (HM) server's web API, as
`@seed-hypermedia/client`'s `createSeedClient` speaks it.

- Actions (`PublishBlobs`): `POST {hm}/api/PublishBlobs`, body DAG-CBOR `{blobs: [{cid, data}]}`
  (`Content-Type: application/cbor`).
- Reads (`Resource`, `Account`, `ResourceMetadata`, `ListChanges`): `GET {hm}/api/<Key>?<query>`,
  the query as the library builds it (`id` / `targetId` = the packed `hm://` id, `Account` takes
  the bare uid) in `URLSearchParams` encoding.
- Answers are JSON, wrapped by superjson (`{"json": value, "meta": ...}`).

Every failure of the server (no connection, a timeout, an error status, an answer that is not
JSON of the expected shape, an answer over the size bound) is one `HmError` whose message names
the server and never repeats its answer. Requests go through the HTTP client the caller gives,
which in the server is the runtime's guarded client (provider network policy, per connection,
after DNS: server/providers/network.py).

Documents: `read_document` (an `hm://` address in, Markdown out) and `publish_document`
(Markdown and a key in, the new version out), on the pure halves in protocol/hm/hm_blobs.py and
protocol/hm/hm_markdown.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Callable
from urllib.parse import quote_plus

import httpx
from multiformats import CID

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm.hm_blobs import (
    Blob,
    NoChanges,
    account_id,
    document_base,
    document_blobs,
    draft_document_blobs,
    redirect_ref_blob,
    ref_blob,
    tombstone_ref_blob,
)
from seed_agents.protocol.hm.hm_comments import (
    UnsupportedBlock,
    comment_blob,
    comment_blocks,
    comment_delete_blob,
    comment_record_id,
    comment_update_blob,
)
from seed_agents.protocol.hm.hm_ids import HmId, content_links, malformed_link, parse_hm_id
from seed_agents.protocol.hm.hm_markdown import (
    MarkdownTooComplex,
    blocks_to_markdown,
    parse_frontmatter,
    parse_markdown,
    random_block_id,
    slugify,
    to_hm_nodes,
)
from seed_agents.protocol.hm.unixfs import DAG_PB, RAW, file_blobs

from ..providers.network import DEFAULT_LOOPBACK, NetworkPolicy, NetworkRefused, provider_client
from ..providers.redact import display_url

__all__ = ["HmError", "HmNotFound", "HmClient", "DEFAULT_TIMEOUT", "DEFAULT_MAX_ANSWER_BYTES",
           "MAX_MARKDOWN_BYTES"]

DEFAULT_TIMEOUT = 15.0
# The largest answer read from an HM server; a document of a few thousand blocks is far below.
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
# The largest Markdown published as one document.
MAX_MARKDOWN_BYTES = 1024 * 1024
# Redirects followed when reading (a document moved, then moved again).
MAX_REDIRECTS = 3
# The account whose `Account` answer tells that the HM server answers at all (any valid id does).
PROBE_ACCOUNT = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
# The largest file read from the HM server's gateway (`read ipfs://…`).
MAX_IPFS_BYTES = 32 * 1024 * 1024
# The largest Markdown published as one comment (the reference's MAX_WRITE_CONTENT_BYTES).
MAX_COMMENT_BYTES = 256 * 1024
# Links of one write checked against the server (the reference's MAX_LINK_RESOLUTION_CHECKS).
MAX_LINK_CHECKS = 50


class HmError(Exception):
    """One clear sentence about what went wrong with the HM server (never its answer's text).
    `status`: the HTTP status it answered with, when that was the fault (a 4xx is a refusal that
    trying again will not change; the publication queue retries everything else)."""

    status: int | None = None


class HmNotFound(HmError):
    """The HM server has no document at that address (or it was deleted)."""


def search_params(params: dict[str, str]) -> str:
    """`new URLSearchParams(params).toString()`: form encoding, `*-._` and alphanumerics kept."""
    return "&".join(f"{_form(k)}={_form(v)}" for k, v in params.items())


def _form(s: str) -> str:
    return quote_plus(s, safe="*").replace("~", "%7E")


def _policy_refused(exc: BaseException) -> bool:
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 8:
        if isinstance(cause, NetworkRefused):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return False


class FeedPageError(Exception):
    """A page of the activity feed not read; the message is a phrase that follows the feed's name."""


class HmClient:
    """A Seed hypermedia server at `base_url`, over `http` (one is made when not given, on the
    provider network policy's loopback default; the server passes its runtime's client)."""

    def __init__(self, base_url: str, http: httpx.AsyncClient | None = None,
                 timeout: float = DEFAULT_TIMEOUT, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        self.display = display_url(self.base_url)
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes
        self._own_http = http is None
        self.http = http if http is not None else provider_client(NetworkPolicy.parse(DEFAULT_LOOPBACK))
        # Whether the server answered the last exchange (None: not asked yet), and why not:
        # health shows it, and the start says it once (`probe`).
        self.reachable: bool | None = None
        self.unreachable_reason: str | None = None

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()

    async def __aenter__(self) -> HmClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def feed_page(self, params: dict[str, str], max_bytes: int, timeout: float | None = None) -> bytes:
        """One page of the server's activity feed, `GET {base_url}/api/ListEvents` (as the Seed
        client asks it), for the `activity:` tool and the activity monitor alike: read up to
        `max_bytes` (the feed is untrusted, so a larger page is an error) within `timeout`
        seconds in all (this client's own by default), on this client's guarded HTTP client."""
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                async with self.http.stream("GET", f"{self.base_url}/api/ListEvents", params=params,
                                            headers={"Accept": "application/json"}) as response:
                    if response.status_code != 200:
                        raise FeedPageError(f"answered HTTP {response.status_code}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise FeedPageError(f"sent a page over {max_bytes} bytes")
        except (httpx.HTTPError, TimeoutError) as exc:
            raise FeedPageError(f"did not answer ({type(exc).__name__})") from None
        return bytes(body)

    # -- the web API -------------------------------------------------------------------------

    async def publish_blobs(self, blobs: list[Blob]) -> list[str]:
        """Publish `blobs` in one `PublishBlobs` call (all or nothing); the CIDs it stored."""
        if not blobs:
            return []
        body = dagcbor.encode({"blobs": [{"cid": b.cid, "data": b.data} for b in blobs]})
        answer = await self._call("PublishBlobs", "POST", "/api/PublishBlobs", body=body,
                                  headers={"Content-Type": "application/cbor"})
        cids = answer.get("cids") if isinstance(answer, dict) else None
        if not isinstance(cids, list) or not all(isinstance(c, str) for c in cids):
            raise self._error("PublishBlobs", "answered something that is not a PublishBlobs answer")
        return cids

    async def publish_file(self, data: bytes) -> str:
        """Publish bytes as UnixFS (protocol/hm/unixfs.py) in one call; their root CID (an icon's
        avatar is `ipfs://<cid>`). The server must answer every block's CID (by its hash)."""
        root, blobs = await asyncio.to_thread(file_blobs, data)
        answered = await self.publish_blobs(blobs)
        try:
            stored = {bytes(CID.decode(c).raw_digest) for c in answered}
        except Exception:
            raise self._error("PublishBlobs", "answered something that is not a list of CIDs") from None
        if any(bytes(CID.decode(b.cid).raw_digest) not in stored for b in blobs):
            raise self._error("PublishBlobs", "answered CIDs that are not the file's blocks")
        return root

    async def read_ipfs(self, cid_text: str, max_bytes: int = MAX_IPFS_BYTES) -> bytes:
        """The file a CID names, `GET {hm}/ipfs/<cid>` (the HM server's gateway, as the reference
        reads `ipfs://`), at most `max_bytes`, and verified: a raw CID is the hash of the bytes,
        a dag-pb one the root of the bytes as UnixFS in the Seed client's layout (unixfs.py).
        ValueError for a CID that is not one; HmError for the server, a file too large, or bytes
        that are not the CID's."""
        try:
            cid = CID.decode(cid_text)
        except Exception:
            raise ValueError(f"{cid_text[:100]!r} is not a CID") from None
        if cid.hashfun.name != "sha2-256" or cid.codec.code not in (RAW, DAG_PB):
            raise ValueError(f"this server reads UnixFS files (raw or dag-pb CIDs, sha2-256), not {cid.codec.name}")
        key = "ipfs"
        try:
            async with asyncio.timeout(self.timeout):
                async with self.http.stream("GET", f"{self.base_url}/ipfs/{cid_text}") as response:
                    if response.status_code == 404:
                        raise HmNotFound(f"the Seed hypermedia server at {self.display} has no file {cid_text}")
                    if response.status_code != 200:
                        raise self._error(key, f"refused the request with HTTP {response.status_code}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise self._error(key, f"answered a file over {max_bytes} bytes")
        except TimeoutError:
            raise self._error(key, f"did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            if _policy_refused(exc):
                raise self._error(key, "is in a network the server's provider network policy refuses "
                                       "(--provider-networks)") from None
            raise self._error(key, "could not be reached or broke the connection") from None
        data = bytes(body)
        if not await asyncio.to_thread(_hashes_to, data, cid):
            raise self._error(key, f"answered bytes that are not the file {cid_text} (their hash differs)")
        return data

    async def resource(self, hm_id: str) -> dict:
        """`Resource`: the document (or redirect, tombstone, not-found...) at a packed hm:// id."""
        return await self._get_object("Resource", {"id": hm_id})

    async def account(self, uid: str) -> dict:
        """`Account`: an account's metadata (`type` "account" or "account-not-found")."""
        return await self._get_object("Account", {"id": uid})

    async def resource_metadata(self, hm_id: str) -> dict:
        """`ResourceMetadata`: a document's metadata alone."""
        return await self._get_object("ResourceMetadata", {"id": hm_id})

    async def list_changes(self, hm_id: str) -> dict:
        """`ListChanges`: every change of a document (`{changes: [{id, author, deps, ...}]}`)."""
        return await self._get_object("ListChanges", {"targetId": hm_id})

    async def query_children(self, hm_id: HmId) -> list:
        """`Query` with one Children include (the reference's `:directory`): the child documents'
        infos as answered (a null answer is none)."""
        includes = [{"space": hm_id.uid, "path": hm_id.api_path, "mode": "Children"}]
        answer = await self._get_value("Query", {"includes": _js_json(includes)})
        if answer is None:
            return []
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise self._error("Query", "answered something that is not a Query answer")
        return results

    async def list_comments(self, hm_id: HmId) -> dict:
        """`ListComments`: the comments on a document (`{comments, authors}`)."""
        answer = await self._get_object("ListComments", {"targetId": _js_json(hm_id.unpacked())})
        if not isinstance(answer.get("comments"), list):
            raise self._error("ListComments", "answered something that is not a ListComments answer")
        return answer

    async def comment(self, comment_id: str) -> dict:
        """`Comment`: one comment by its record id (`<author uid>/<tsid>`)."""
        answer = await self._get_object("Comment", {"__value": comment_id})
        if not isinstance(answer.get("id"), str) or not isinstance(answer.get("version"), str):
            raise self._error("Comment", "answered something that is not a comment")
        return answer

    async def account_contacts(self, uid: str) -> list:
        """`AccountContacts`: an account's contacts."""
        answer = await self._get_value("AccountContacts", {"__value": uid})
        if not isinstance(answer, list):
            raise self._error("AccountContacts", "answered something that is not a contact list")
        return answer

    async def list_capabilities(self, hm_id: HmId) -> dict:
        """`ListCapabilities`: the capabilities granted on a resource."""
        return await self._get_object("ListCapabilities", {"targetId": hm_id.pack()})

    async def search(self, params: dict[str, str]) -> dict:
        """`Search`: the HM server's search (titles, contacts, and bodies with includeBody)."""
        answer = await self._get_object("Search", params)
        if not isinstance(answer.get("entities"), list):
            raise self._error("Search", "answered something that is not a Search answer")
        return answer

    # -- documents ---------------------------------------------------------------------------

    async def read_document(self, hm_url: str) -> str:
        """The document at an `hm://` address as Markdown (protocol/hm_markdown.blocks_to_markdown:
        front matter, blocks with their ids). ValueError for an address that is not one;
        HmNotFound when there is no such document; HmError for anything else."""
        return (await self.read_resource(parse_hm_id(hm_url)))[2]

    async def read_resource(self, hm_id: HmId) -> tuple[HmId, dict, str]:
        """(where it was found after redirects, the document or comment as answered, its Markdown).
        HmNotFound when there is none (or it was deleted); HmError for anything else."""
        for _ in range(MAX_REDIRECTS + 1):
            resource = await self.resource(hm_id.pack())
            kind = resource.get("type")
            if kind == "redirect":
                hm_id = self._redirect_target(resource)
                continue
            if kind == "document":
                document = resource.get("document")
                if not isinstance(document, dict):
                    raise self._error("Resource", "answered a document that is not well formed")
                return hm_id, document, await asyncio.to_thread(self._render, document, hm_id, "document")
            if kind == "comment":
                comment = resource.get("comment")
                if not isinstance(comment, dict):
                    raise self._error("Resource", "answered a comment that is not well formed")
                return hm_id, comment, await self.render_comment(comment, hm_id)
            if kind == "tombstone":
                raise HmNotFound(f"the document {hm_id.base} was deleted ({self.display})")
            if kind == "not-found":
                raise await self._not_found(hm_id)
            raise self._error("Resource", "answered something that is not a Resource answer")
        raise self._error("Resource", f"redirected more than {MAX_REDIRECTS} times")

    async def render_comment(self, comment: dict, hm_id: HmId) -> str:
        """A comment's content as Markdown (its blocks, as a document's)."""
        return await asyncio.to_thread(self._render, {"metadata": {}, "content": comment.get("content")}, hm_id,
                                       "comment")

    async def publish_document(self, seed: bytes, markdown: str | None, hm_url: str | None, ts_ms: int, *,
                               new_id: Callable[[], str] = random_block_id, check_links: bool = True,
                               metadata: dict | None = None) -> str:
        """Publish Markdown as a document signed with `seed`; its new version (the change CID).

        `hm_url` None: a new document in the key's account, at the slug of its name (front
        matter `name`/`title`, else its first heading); refused when one is already there.
        `hm_url` naming a document: a new version in place (the block diff from its current
        blocks; nothing is published, and the current version answered, when nothing changed).
        `hm_url` naming no document yet: a new document at that path (its parent must exist).
        Only the key's own account can be written. All blobs go in one PublishBlobs call.
        `metadata`: attributes over the front matter (options.metadata, then options.name);
        `markdown` None: only those, on the document at `hm_url` (its body untouched).
        """
        if markdown is not None:
            try:
                size = len(markdown.encode("utf-8"))
            except UnicodeEncodeError:
                raise ValueError("the Markdown is not valid Unicode (it has a lone surrogate)") from None
            if size > MAX_MARKDOWN_BYTES:
                raise ValueError(f"a document is at most {MAX_MARKDOWN_BYTES} bytes of Markdown")
        elif hm_url is None or not metadata:
            raise ValueError("a change of metadata alone names the document and the metadata")
        hm_id = document_target(account_id(seed), markdown or "", hm_url, (metadata or {}).get("name"))
        if markdown is not None:
            nodes = await asyncio.to_thread(lambda: to_hm_nodes(parse_markdown(markdown)[0]))
            await self.check_links(nodes, resolve=check_links)
        kind, resource = await self._kind_of(hm_id)
        if kind == "document" and hm_url is None:
            raise ValueError(f"a document already exists at {hm_id.base}: pass its address to update it")
        if kind == "document":
            document = resource.get("document")
            changes = (await self.list_changes(hm_id.pack())).get("changes")
            try:
                base = document_base(changes, document.get("content"), document.get("metadata"))
            except (ValueError, AttributeError, TypeError):
                raise self._error("ListChanges", "answered a change list that is not a document's") from None
            try:
                version, blobs = await asyncio.to_thread(document_blobs, seed, markdown, ts_ms,
                                                         path=hm_id.api_path, base=base, overrides=metadata,
                                                         new_id=new_id)
            except NoChanges:
                return str(document.get("version") or ".".join(base.heads))
            except MarkdownTooComplex:
                raise
            except (KeyError, TypeError, AttributeError, RecursionError):
                raise self._error("Resource", "answered a document that is not well formed") from None
        elif kind in ("not-found", "tombstone") and markdown is None:
            raise ValueError(f"there is no document at {hm_id.base} to change the metadata of")
        elif kind in ("not-found", "tombstone"):
            assert markdown is not None
            if len(hm_id.path) > 1:
                parent = HmId(hm_id.uid, hm_id.path[:-1])
                if (await self._kind_of(parent))[0] != "document":
                    raise ValueError(f"cannot create {hm_id.base}: its parent {parent.base} does not exist")
            name = _document_name(markdown) or (hm_id.path[-1] if hm_id.path else "")
            version, blobs = await asyncio.to_thread(document_blobs, seed, markdown, ts_ms, path=hm_id.api_path,
                                                     defaults={"name": name} if name else None, overrides=metadata,
                                                     new_id=new_id)
        else:
            raise ValueError(f"{hm_id.base} is a {kind or 'resource'} on the HM server, not a document")
        await self.publish_blobs(blobs)
        return version

    async def publish_draft(self, seed: bytes, blocks: list, metadata: dict, path: str | None, ts_ms: int, *,
                            check_links: bool = True, dry_run: bool = False) -> dict:
        """A draft (its blocks and metadata) as a new document in the key's account, as the
        reference's draft.publish without an edit target (protocol/hm_blobs.draft_document_blobs):
        at `path`, else the slug of its name; refused when a document is already there or its
        parent is not. {id, version, cids}."""
        name = metadata.get("name") if isinstance(metadata.get("name"), str) else ""
        segments = tuple(p for p in (path or "").split("/") if p) or ((slugify(name),) if name.strip() else ())
        if not segments:
            raise ValueError("the draft has neither a path nor a name to place it at")
        hm_id = HmId(account_id(seed), segments)
        await self.check_links(blocks, resolve=check_links)
        kind, _ = await self._kind_of(hm_id)
        if kind == "document":
            raise ValueError(f"a document already exists at {hm_id.base}: give the draft an edit target "
                             "(input.edit) to revise it")
        if len(hm_id.path) > 1 and (await self._kind_of(HmId(hm_id.uid, hm_id.path[:-1])))[0] != "document":
            raise ValueError(f"cannot create {hm_id.base}: its parent does not exist")
        try:
            version, blobs = await asyncio.to_thread(draft_document_blobs, seed, blocks, metadata, ts_ms,
                                                     path=hm_id.api_path)
        except (KeyError, TypeError, AttributeError):
            raise ValueError("the draft's blocks are not well formed") from None
        cids = [] if dry_run else await self.publish_blobs(blobs)
        return {"id": hm_id.pack(), "version": version, "cids": cids}

    async def check_links(self, nodes: list, *, resolve: bool = True) -> None:
        """The reference's `assertHmContentLinks`: a malformed hm: link always refuses the write;
        a well-formed one whose target the server answers `not-found` refuses it unless `resolve`
        is off; a server that cannot answer never blocks (at most MAX_LINK_CHECKS are asked).
        ValueError naming the links."""
        links = content_links(nodes)
        bad = [link for link in links if malformed_link(link)]
        if bad:
            raise ValueError("Content contains malformed hm:// links — fix or remove them before publishing: "
                             + " · ".join(bad))
        if not resolve:
            return
        broken = []
        for link in links[:MAX_LINK_CHECKS]:
            target = parse_hm_id(link if link.startswith("hm://") else link.replace("hm:", "hm://", 1))
            try:
                resource = await self.resource(HmId(target.uid, target.path, target.version).pack())
            except HmError:
                if self.reachable is False:
                    break   # the server is not there: the rest cannot be checked either
                continue   # unverifiable, not broken
            if resource.get("type") == "not-found":
                broken.append(link)
        if broken:
            raise ValueError(f"Content links to hm:// resources that do not exist on the server: {' · '.join(broken)}. "
                             "Fix the links (read them to verify), or pass options.skipLinkCheck: true only if "
                             "the targets are about to be created.")

    async def prepare_comment(self, seed: bytes, markdown: str, target_url: str, ts_ms: int, *,
                              reply_to: str | None = None, check_links: bool = True,
                              new_id: Callable[[], str] = random_block_id) -> dict:
        """A comment on the document at `target_url` (a reply to the comment `reply_to`, a record
        id `<author>/<tsid>` or its hm:// URL), as the reference's `writeCommentCreate` builds it:
        threaded under the parent and on the parent's document version, else on the document's
        current one. Nothing is published: `publish_comment` does that. ValueError for what the
        caller got wrong; HmError for the server."""
        try:
            size = len(markdown.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("the comment is not valid Unicode (it has a lone surrogate)") from None
        if size > MAX_COMMENT_BYTES:
            raise ValueError(f"a comment is at most {MAX_COMMENT_BYTES} bytes of Markdown")
        parent = None
        if reply_to is not None:
            parent = await self.comment(_comment_record(reply_to))
        hm_id = parse_hm_id(target_url)
        target = HmId(hm_id.uid, hm_id.path, hm_id.version)
        resource = await self.resource(target.pack())
        if resource.get("type") != "document" or not isinstance(resource.get("document"), dict):
            raise ValueError(f"Comment target is {resource.get('type') or 'not a resource'}, not a document "
                             f"({target.base})")
        document = resource["document"]
        nodes = await asyncio.to_thread(comment_blocks, markdown, new_id)
        await self.check_links(nodes, resolve=check_links)
        doc_version = str((parent or {}).get("targetVersion") or document.get("version") or "")
        if not doc_version:
            raise self._error("Resource", "answered a document without a version")
        visibility = "Private" if ((parent or {}).get("visibility") or document.get("visibility")) == "PRIVATE" \
            else ""
        reply_parent = parent.get("version") if parent else None
        thread_root = (parent.get("threadRootVersion") or parent.get("version")) if parent else None
        try:
            blob = await asyncio.to_thread(comment_blob, seed, nodes, target.uid, target.api_path, doc_version,
                                           ts_ms, reply_parent=reply_parent, thread_root=thread_root,
                                           visibility=visibility)
        except UnsupportedBlock:
            raise
        except (ValueError, KeyError, TypeError):
            raise self._error("Comment", "answered a parent comment or version that is not well formed") from None
        metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
        return {"blob": blob, "commentId": comment_record_id(blob.data), "target": HmId(target.uid, target.path).pack(),
                "targetName": metadata.get("name") or HmId(target.uid, target.path).pack(),
                "replyCommentId": parent.get("id") if parent else None, "blockCount": len(nodes)}

    async def prepare_comment_edit(self, seed: bytes, comment_ref: str, ts_ms: int, markdown: str | None = None, *,
                                   check_links: bool = True, new_id: Callable[[], str] = random_block_id) -> dict:
        """`comment.update` (with `markdown`) or `comment.delete` (without), as the reference's
        writeCommentUpdate / writeCommentDelete: the comment `comment_ref` (its record id
        `<author>/<tsid>` or hm:// URL) as the server answers it, replaced on the same target,
        version and thread. Only its author can: ValueError otherwise. Nothing is published."""
        comment_id = _comment_record(comment_ref)
        author = account_id(seed)
        if comment_id.split("/", 1)[0] != author:
            raise ValueError(f"this identity ({author}) can only edit or delete its own comments, not {comment_id}")
        if markdown is not None:
            try:
                size = len(markdown.encode("utf-8"))
            except UnicodeEncodeError:
                raise ValueError("the comment is not valid Unicode (it has a lone surrogate)") from None
            if size > MAX_COMMENT_BYTES:
                raise ValueError(f"a comment is at most {MAX_COMMENT_BYTES} bytes of Markdown")
        try:
            existing = await self.comment(comment_id)
        except HmNotFound:
            raise ValueError(f"there is no comment {comment_id} on {self.display}") from None
        space, path = existing.get("targetAccount"), existing.get("targetPath") or ""
        version = existing.get("targetVersion")
        if not isinstance(space, str) or not isinstance(path, str) or not isinstance(version, str) or not version:
            raise self._error("Comment", "answered a comment without its target")
        visibility = "Private" if existing.get("visibility") == "PRIVATE" else ""
        nodes: list = []
        if markdown is not None:
            nodes = await asyncio.to_thread(comment_blocks, markdown, new_id)
            await self.check_links(nodes, resolve=check_links)
        reply_parent, thread_root = existing.get("replyParentVersion"), existing.get("threadRootVersion")
        try:
            if markdown is None:
                blob = comment_delete_blob(seed, comment_id, space, path, version, ts_ms, visibility=visibility)
            else:
                blob = await asyncio.to_thread(
                    comment_update_blob, seed, comment_id, nodes, space, path, version, ts_ms,
                    reply_parent=reply_parent if isinstance(reply_parent, str) and reply_parent else None,
                    thread_root=thread_root if isinstance(thread_root, str) and thread_root else None,
                    visibility=visibility)
        except UnsupportedBlock:
            raise
        except (ValueError, KeyError, TypeError):
            raise self._error("Comment", "answered a comment whose target or thread is not CIDs") from None
        return {"blob": blob, "commentId": comment_id, "blockCount": len(nodes)}

    async def publish_comment_blob(self, blob: Blob) -> str:
        """Publish a comment as the library does (`{data}` without its CID); the CID stored."""
        body = dagcbor.encode({"blobs": [{"data": blob.data}]})
        answer = await self._call("PublishBlobs", "POST", "/api/PublishBlobs", body=body,
                                  headers={"Content-Type": "application/cbor"})
        cids = answer.get("cids") if isinstance(answer, dict) else None
        if not isinstance(cids, list) or len(cids) != 1 or cids[0] != blob.cid:
            raise self._error("PublishBlobs", "answered a CID that is not the comment's")
        return blob.cid

    async def _own_document(self, seed: bytes, hm_url: str, what: str) -> tuple[HmId, dict]:
        """The document at `hm_url` in the key's own account (a delete, a redirect, a move's
        source), as Resource answers it; ValueError when it is not one."""
        hm_id = parse_hm_id(hm_url)
        hm_id = HmId(hm_id.uid, hm_id.path)
        account = account_id(seed)
        if hm_id.uid != account:
            raise ValueError(f"this identity ({account}) can only {what} in its own account, not in {hm_id.uid}")
        kind, resource = await self._kind_of(hm_id)
        document = resource.get("document")
        if kind != "document" or not isinstance(document, dict):
            raise ValueError(f"{hm_id.base} is {'not' if kind in ('not-found', '') else 'a ' + kind + ','} "
                             "a document on the HM server")
        if not isinstance(document.get("genesis"), str):
            raise self._error("Resource", "answered a document without its genesis")
        return hm_id, document

    @staticmethod
    def _generation(document: dict, default: int) -> int:
        info = document.get("generationInfo")
        value = info.get("generation") if isinstance(info, dict) else None
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            return default

    async def delete_document(self, seed: bytes, hm_url: str, ts_ms: int, *, dry_run: bool = False) -> tuple[str, list]:
        """`document.delete` (the reference's `writeDocumentDelete`): a tombstone Ref at the
        document's path, its genesis and generation. (the id, the CIDs published)."""
        hm_id, document = await self._own_document(seed, hm_url, "delete documents")
        blob = tombstone_ref_blob(seed, hm_id.uid, hm_id.api_path, document["genesis"],
                                  self._generation(document, 0), ts_ms)
        return hm_id.pack(), [] if dry_run else await self.publish_blobs([blob])

    async def redirect_document(self, seed: bytes, hm_url: str, target_url: str, ts_ms: int, *,
                                republish: bool = False, dry_run: bool = False) -> tuple[str, str, list]:
        """`document.redirect` (`writeDocumentRedirect`): a redirect Ref at the document's path to
        `target_url`. (the id, the target, the CIDs published)."""
        hm_id, document = await self._own_document(seed, hm_url, "redirect documents")
        target = parse_hm_id(target_url)
        target = HmId(target.uid, target.path)
        if target.base == hm_id.base:
            raise ValueError("a document cannot redirect to itself")
        blob = redirect_ref_blob(seed, hm_id.uid, hm_id.api_path, document["genesis"],
                                 self._generation(document, 1), ts_ms, target_space=target.uid,
                                 target_path=target.api_path, republish=republish)
        return hm_id.pack(), target.pack(), [] if dry_run else await self.publish_blobs([blob])

    async def fork_document(self, seed: bytes, source_url: str, dest_url: str, ts_ms: int, *,
                            dry_run: bool = False) -> dict:
        """`document.fork` (`writeDocumentRef` with a source): a version Ref at `dest_url` (the
        key's own account) naming the source's genesis, version and generation. An existing
        destination is refused unless it already is that version (`status: already_exists`)."""
        source = parse_hm_id(source_url)
        source = HmId(source.uid, source.path, source.version)
        dest = parse_hm_id(dest_url)
        dest = HmId(dest.uid, dest.path)
        account = account_id(seed)
        if dest.uid != account:
            raise ValueError(f"this identity ({account}) can only fork into its own account, not into {dest.uid}")
        kind, resource = await self._kind_of(source)
        document = resource.get("document")
        if kind != "document" or not isinstance(document, dict):
            raise ValueError(f"the fork's source {source.base} is not a document on the HM server")
        info = document.get("generationInfo") if isinstance(document.get("generationInfo"), dict) else {}
        genesis, version = info.get("genesis") or document.get("genesis"), document.get("version")
        if not isinstance(genesis, str) or not isinstance(version, str) or not version:
            raise self._error("Resource", "answered a document without its genesis or version")
        dest_kind, dest_resource = await self._kind_of(dest)
        if dest_kind == "document":
            there = dest_resource.get("document") or {}
            if there.get("version") == version and (there.get("generationInfo") or {}).get("genesis") == genesis:
                return {"id": dest.pack(), "status": "already_exists", "version": version, "cids": []}
            raise ValueError(f"a document already exists at {dest.base}: delete or move it first")
        if len(dest.path) > 1 and (await self._kind_of(HmId(dest.uid, dest.path[:-1])))[0] != "document":
            raise ValueError(f"cannot fork to {dest.base}: its parent does not exist")
        try:
            blob = ref_blob(seed, dest.uid, dest.api_path, genesis, version.split("."),
                            self._generation(document, ts_ms), ts_ms)
        except ValueError:
            raise self._error("Resource", "answered a version that is not CIDs") from None
        cids = [] if dry_run else await self.publish_blobs([blob])
        return {"id": dest.pack(), "version": version, "cids": cids}

    async def _kind_of(self, hm_id: HmId) -> tuple[str, dict]:
        """(the Resource answer's type, the answer); "not-found" for a 404 as well."""
        try:
            resource = await self.resource(hm_id.pack())
        except HmNotFound:
            return "not-found", {}
        return str(resource.get("type") or ""), resource

    def _redirect_target(self, resource: dict) -> HmId:
        target = resource.get("redirectTarget")
        try:
            return HmId(str(target["uid"]), tuple(str(p) for p in target.get("path") or ()))
        except (TypeError, KeyError, AttributeError):
            raise self._error("Resource", "answered a redirect without a target") from None

    def _render(self, document: object, hm_id: HmId, what: str) -> str:
        try:
            metadata = document.get("metadata") or {}
            content = document.get("content") or []
            if not isinstance(metadata, dict) or not isinstance(content, list):
                raise TypeError
            # JSON may carry lone surrogates ("\ud800"); Markdown handed on must be valid Unicode.
            return _LONE_SURROGATE.sub("\ufffd", blocks_to_markdown(metadata, content))
        except MarkdownTooComplex:
            raise self._error("Resource", f"answered a {what} too complex to render ({hm_id.base})") from None
        except (TypeError, KeyError, AttributeError, ValueError, RecursionError):
            raise self._error("Resource", f"answered a {what} that is not well formed ({hm_id.base})") from None

    async def _not_found(self, hm_id: HmId) -> HmNotFound:
        if not hm_id.path:
            account = await self.account(hm_id.uid)
            if account.get("type") != "account":
                return HmNotFound(f"the HM server at {self.display} knows no account {hm_id.uid}")
            return HmNotFound(f"the account {hm_id.uid} has no home document on {self.display}")
        return HmNotFound(f"there is no document at {hm_id.base} on {self.display}")

    # -- plumbing ----------------------------------------------------------------------------

    async def _get_value(self, key: str, params: dict[str, str]) -> object:
        return await self._call(key, "GET", f"/api/{key}?{search_params(params)}")

    async def _get_object(self, key: str, params: dict[str, str]) -> dict:
        answer = await self._get_value(key, params)
        if not isinstance(answer, dict):
            raise self._error(key, f"answered something that is not a {key} answer")
        return answer

    def _error(self, key: str, what: str) -> HmError:
        return HmError(f"the Seed hypermedia server at {self.display} {what} ({key})")

    async def _call(self, key: str, method: str, path: str, *, body: bytes | None = None,
                    headers: dict[str, str] | None = None) -> object:
        try:
            async with asyncio.timeout(self.timeout):
                answer = await self._exchange(key, method, path, body, headers or {})
        except HmError:
            self._answered()   # it answered, badly: it is there
            raise
        except TimeoutError:
            raise self._unreachable(key, f"did not answer within {self.timeout:g} s") from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            raise self._unreachable(key, "is not an http(s) URL the client can use") from None
        except httpx.HTTPError as exc:
            if _policy_refused(exc):
                raise self._unreachable(key, "is in a network the server's provider network policy refuses "
                                             "(--provider-networks)") from None
            reason = "refused the connection" if isinstance(exc, httpx.ConnectError) else "broke the connection"
            raise self._unreachable(key, f"could not be reached: it {reason}") from None
        self._answered()
        return answer

    def _answered(self) -> None:
        self.reachable, self.unreachable_reason = True, None

    def _unreachable(self, key: str, what: str) -> HmError:
        self.reachable, self.unreachable_reason = False, what
        return self._error(key, what)

    async def probe(self) -> bool:
        """One cheap request (`Account` of a fixed account: a few bytes, and nothing the activity
        feed's readers see) to learn whether the server answers; any HTTP answer counts. Never
        raises."""
        try:
            await self._call("probe", "GET", f"/api/Account?{search_params({'id': PROBE_ACCOUNT})}")
        except HmError:
            pass
        return bool(self.reachable)

    async def _exchange(self, key: str, method: str, path: str, body: bytes | None,
                        headers: dict[str, str]) -> object:
        request = self.http.build_request(method, self.base_url + path, content=body,
                                          headers={"Accept": "application/json", **headers})
        response = await self.http.send(request, stream=True)
        try:
            if response.status_code == 404 and method == "GET":
                raise HmNotFound(f"the Seed hypermedia server at {self.display} found nothing ({key})")
            if response.status_code >= 400 or response.status_code < 200:
                error = self._error(key, f"refused the request with HTTP {response.status_code}")
                error.status = response.status_code
                raise error
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise self._error(key, f"answered more than {self.max_answer_bytes} bytes")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > self.max_answer_bytes:
                    raise self._error(key, f"answered more than {self.max_answer_bytes} bytes")
                chunks.append(chunk)
        finally:
            await response.aclose()
        try:
            value = json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            raise self._error(key, "answered something that is not JSON") from None
        # superjson's envelope: the value under "json" (bigints and dates are strings there).
        if isinstance(value, dict) and "json" in value and set(value) <= {"json", "meta"}:
            value = value["json"]
        return value


def _hashes_to(data: bytes, cid: CID) -> bool:
    """Are `data` the file `cid` names (a raw block, or UnixFS in the Seed client's layout)?"""
    if cid.codec.code == RAW and hashlib.sha256(data).digest() == bytes(cid.raw_digest):
        return True
    root, _ = file_blobs(data)
    return bytes(CID.decode(root).raw_digest) == bytes(cid.raw_digest)


def _comment_record(ref: str) -> str:
    """The reference's `normalizeCommentId`: an hm:// URL of a comment → `<author>/<tsid>`; and a
    comment's view URL (`<target>/:comments/<author>/<tsid>`, as write results carry it) too."""
    if "/:comments/" in ref:
        return ref.split("/:comments/", 1)[1].split("?", 1)[0].split("#", 1)[0]
    if ref.startswith("hm://"):
        hm_id = parse_hm_id(ref)
        return hm_id.uid + hm_id.api_path
    return ref


def _js_json(value: object) -> str:
    """`JSON.stringify(value)`: how the Seed client puts an object into a query parameter."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_HEADING_LINE = re.compile(r"^[ \t]*#{1,6}[ \t]+(.+?)[ \t]*(?:<!--.*-->)?[ \t]*$", re.M)


def document_target(account: str, markdown: str, hm_url: str | None, name: object = None) -> HmId:
    """Where `publish_document` puts Markdown signed by `account`: `hm_url` (its latest version),
    else a new document at the slug of its name (`name`, else the Markdown's). ValueError when
    there is no name, or the address is in another account."""
    if hm_url is None:
        name = name.strip() if isinstance(name, str) and name.strip() else _document_name(markdown)
        if not name:
            raise ValueError("a new document needs a name: front matter `name:` or a first heading")
        return HmId(account, (slugify(name),))
    hm_id = parse_hm_id(hm_url)
    hm_id = HmId(hm_id.uid, hm_id.path)  # always the latest version
    if hm_id.uid != account:
        raise ValueError(f"this identity ({account}) can only publish in its own account, not in {hm_id.uid}")
    return hm_id


def _document_name(markdown: str) -> str:
    """A new document's name: its front matter's, else its first heading's text."""
    content, metadata = parse_frontmatter(markdown)
    name = metadata.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    heading = _HEADING_LINE.search(content)
    return heading.group(1).strip() if heading else ""
