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
(Markdown and a key in, the new version out), on the pure halves in protocol/hm_blobs.py and
protocol/hm_markdown.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Callable
from urllib.parse import quote_plus

import httpx

from seed_agents.protocol import dagcbor
from seed_agents.protocol.hm_blobs import Blob, NoChanges, account_id, document_base, document_blobs
from seed_agents.protocol.hm_ids import HmId, parse_hm_id
from seed_agents.protocol.hm_markdown import (
    MarkdownTooComplex,
    blocks_to_markdown,
    parse_frontmatter,
    random_block_id,
    slugify,
)
from seed_agents.protocol.unixfs import file_blobs

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


class HmError(Exception):
    """One clear sentence about what went wrong with the HM server (never its answer's text)."""


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
        """Publish bytes as UnixFS (protocol/unixfs.py) in one call; their root CID (an icon's
        avatar is `ipfs://<cid>`)."""
        root, blobs = await asyncio.to_thread(file_blobs, data)
        await self.publish_blobs(blobs)
        return root

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

    # -- documents ---------------------------------------------------------------------------

    async def read_document(self, hm_url: str) -> str:
        """The document at an `hm://` address as Markdown (protocol/hm_markdown.blocks_to_markdown:
        front matter, blocks with their ids). ValueError for an address that is not one;
        HmNotFound when there is no such document; HmError for anything else."""
        hm_id = parse_hm_id(hm_url)
        for _ in range(MAX_REDIRECTS + 1):
            resource = await self.resource(hm_id.pack())
            kind = resource.get("type")
            if kind == "redirect":
                hm_id = self._redirect_target(resource)
                continue
            if kind == "document":
                document = resource.get("document")
                return await asyncio.to_thread(self._render, document, hm_id, "document")
            if kind == "comment":
                comment = {"metadata": {}, "content": (resource.get("comment") or {}).get("content")}
                return await asyncio.to_thread(self._render, comment, hm_id, "comment")
            if kind == "tombstone":
                raise HmNotFound(f"the document {hm_id.base} was deleted ({self.display})")
            if kind == "not-found":
                raise await self._not_found(hm_id)
            raise self._error("Resource", "answered something that is not a Resource answer")
        raise self._error("Resource", f"redirected more than {MAX_REDIRECTS} times")

    async def publish_document(self, seed: bytes, markdown: str, hm_url: str | None, ts_ms: int, *,
                               new_id: Callable[[], str] = random_block_id) -> str:
        """Publish Markdown as a document signed with `seed`; its new version (the change CID).

        `hm_url` None: a new document in the key's account, at the slug of its name (front
        matter `name`/`title`, else its first heading); refused when one is already there.
        `hm_url` naming a document: a new version in place (the block diff from its current
        blocks; nothing is published, and the current version answered, when nothing changed).
        `hm_url` naming no document yet: a new document at that path (its parent must exist).
        Only the key's own account can be written. All blobs go in one PublishBlobs call.
        """
        try:
            size = len(markdown.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("the Markdown is not valid Unicode (it has a lone surrogate)") from None
        if size > MAX_MARKDOWN_BYTES:
            raise ValueError(f"a document is at most {MAX_MARKDOWN_BYTES} bytes of Markdown")
        account = account_id(seed)
        if hm_url is None:
            name = _document_name(markdown)
            if not name:
                raise ValueError("a new document needs a name: front matter `name:` or a first heading")
            hm_id = HmId(account, (slugify(name),))
        else:
            hm_id = parse_hm_id(hm_url)
            hm_id = HmId(hm_id.uid, hm_id.path)  # always the latest version
            if hm_id.uid != account:
                raise ValueError(f"this identity ({account}) can only publish in its own account, "
                                 f"not in {hm_id.uid}")
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
                                                         path=hm_id.api_path, base=base, new_id=new_id)
            except NoChanges:
                return str(document.get("version") or ".".join(base.heads))
            except MarkdownTooComplex:
                raise
            except (KeyError, TypeError, AttributeError, RecursionError):
                raise self._error("Resource", "answered a document that is not well formed") from None
        elif kind in ("not-found", "tombstone"):
            if len(hm_id.path) > 1:
                parent = HmId(hm_id.uid, hm_id.path[:-1])
                if (await self._kind_of(parent))[0] != "document":
                    raise ValueError(f"cannot create {hm_id.base}: its parent {parent.base} does not exist")
            name = _document_name(markdown) or (hm_id.path[-1] if hm_id.path else "")
            version, blobs = await asyncio.to_thread(document_blobs, seed, markdown, ts_ms, path=hm_id.api_path,
                                                     defaults={"name": name} if name else None, new_id=new_id)
        else:
            raise ValueError(f"{hm_id.base} is a {kind or 'resource'} on the HM server, not a document")
        await self.publish_blobs(blobs)
        return version

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

    async def _get_object(self, key: str, params: dict[str, str]) -> dict:
        answer = await self._call(key, "GET", f"/api/{key}?{search_params(params)}")
        if not isinstance(answer, dict):
            raise self._error(key, f"answered something that is not a {key} answer")
        return answer

    def _error(self, key: str, what: str) -> HmError:
        return HmError(f"the Seed hypermedia server at {self.display} {what} ({key})")

    async def _call(self, key: str, method: str, path: str, *, body: bytes | None = None,
                    headers: dict[str, str] | None = None) -> object:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(key, method, path, body, headers or {})
        except TimeoutError:
            raise self._error(key, f"did not answer within {self.timeout:g} s") from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            raise self._error(key, "is not an http(s) URL the client can use") from None
        except httpx.HTTPError as exc:
            if _policy_refused(exc):
                raise self._error(key, "is in a network the server's provider network policy refuses "
                                       "(--provider-networks)") from None
            reason = "refused the connection" if isinstance(exc, httpx.ConnectError) else "broke the connection"
            raise self._error(key, f"could not be reached: it {reason}") from None

    async def _exchange(self, key: str, method: str, path: str, body: bytes | None,
                        headers: dict[str, str]) -> object:
        request = self.http.build_request(method, self.base_url + path, content=body,
                                          headers={"Accept": "application/json", **headers})
        response = await self.http.send(request, stream=True)
        try:
            if response.status_code == 404 and method == "GET":
                raise HmNotFound(f"the Seed hypermedia server at {self.display} found nothing ({key})")
            if response.status_code >= 400 or response.status_code < 200:
                raise self._error(key, f"refused the request with HTTP {response.status_code}")
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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_HEADING_LINE = re.compile(r"^[ \t]*#{1,6}[ \t]+(.+?)[ \t]*(?:<!--.*-->)?[ \t]*$", re.M)


def _document_name(markdown: str) -> str:
    """A new document's name: its front matter's, else its first heading's text."""
    content, metadata = parse_frontmatter(markdown)
    name = metadata.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    heading = _HEADING_LINE.search(content)
    return heading.group(1).strip() if heading else ""
