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
from urllib.parse import quote_plus

import httpx

from protocol import dagcbor
from protocol.hm_blobs import Blob
from server.providers.network import DEFAULT_LOOPBACK, NetworkPolicy, NetworkRefused, provider_client
from server.providers.redact import display_url

__all__ = ["HmError", "HmClient", "DEFAULT_TIMEOUT", "DEFAULT_MAX_ANSWER_BYTES"]

DEFAULT_TIMEOUT = 15.0
# The largest answer read from an HM server; a document of a few thousand blocks is far below.
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024


class HmError(Exception):
    """One clear sentence about what went wrong with the HM server (never its answer's text)."""


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


class HmClient:
    """A Seed hypermedia server at `base_url`, over `http` (one is made when not given, on the
    provider network policy's loopback default; the server passes its runtime's client)."""

    def __init__(self, base_url: str, http: httpx.AsyncClient | None = None, *,
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

    # -- the web API -------------------------------------------------------------------------

    async def publish_blobs(self, blobs: list[Blob]) -> list[str]:
        """Publish `blobs` in one `PublishBlobs` call (all or nothing); the CIDs it stored."""
        body = dagcbor.encode({"blobs": [{"cid": b.cid, "data": b.data} for b in blobs]})
        answer = await self._call("PublishBlobs", "POST", "/api/PublishBlobs", body=body,
                                  headers={"Content-Type": "application/cbor"})
        cids = answer.get("cids") if isinstance(answer, dict) else None
        if not isinstance(cids, list) or not all(isinstance(c, str) for c in cids):
            raise self._error("PublishBlobs", "answered something that is not a PublishBlobs answer")
        return cids

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
        except ValueError:
            raise self._error(key, "answered something that is not JSON") from None
        # superjson's envelope: the value under "json" (bigints and dates are strings there).
        if isinstance(value, dict) and "json" in value and set(value) <= {"json", "meta"}:
            value = value["json"]
        return value
