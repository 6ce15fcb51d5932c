"""The web, for the agent: `read https://…` and `navigate` (a page turned into Markdown), and
`web_search` (the operator's SearXNG, `--searxng-url`).

Every fetch goes through the runtime's web client: a connection pool of its own (a page that
never ends holds no connection a model turn needs) under the web network policy
(`--web-networks`, public only by default), checked on every connection after DNS; redirects
are followed here, one hop at a time (each a new checked connection), at most MAX_REDIRECTS, and
only to http(s). One account fetches at most `--web-fetches-per-account` pages at once (the rest
wait, within the deadline). A fetch, the wait for its slot included, ends at `--tool-timeout`.
A page is read up to `--tool-fetch-bytes` (the rest is not downloaded), decoded in a charset
taken by name (server/tools/page_text.py), and HTML becomes Markdown with trafilatura (chosen by
bench/page_markdown.py) in a bounded pool of worker processes (server/tools/page_convert.py).
What comes back is untrusted text: it reaches the model as a tool result and nothing else.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from ..providers.http_stream import _causes, _connect_failure
from ..providers.network import NetworkRefused
from ..providers.outbound_slots import AccountSlots
from .context import ToolFailure, ToolResult
from .page_convert import ConversionFailed, PageConverter
from .page_text import decode

log = logging.getLogger("seed_agents.tools")

MAX_REDIRECTS = 5
USER_AGENT = "seed-agents (+https://seed.hyper.media)"
# trafilatura's time grows with the HTML it is given; past this many characters the page is cut.
EXTRACT_CHARS = 1_000_000
SEARCH_DEFAULT, SEARCH_MAX = 10, 25


@dataclass
class WebAccess:
    http: httpx.AsyncClient      # the web client (its own pool; --web-networks per connection)
    max_bytes: int               # a page is read up to this many bytes
    timeout: float               # one fetch, redirects and the wait for a slot included
    searxng_url: str = ""        # empty: no web_search
    search_http: httpx.AsyncClient | None = None   # the operator's SearXNG (not policy-bound)
    slots: AccountSlots = field(default_factory=lambda: AccountSlots(4))   # fetches per account
    converter: PageConverter = field(default_factory=PageConverter)

    def for_account(self, account: str) -> AccountWeb:
        """The web as one account's tools reach it: its fetches count against its own share."""
        return AccountWeb(self, account)

    async def fetch(self, url: str, account: str) -> tuple[str, str, bytes, bool]:
        """(final url, content type, body up to max_bytes, cut) of a GET, redirects followed."""
        try:
            async with asyncio.timeout(self.timeout), self.slots.slot(account):
                return await self._fetch(url)
        except TimeoutError:
            raise ToolFailure(f"{_host(url)} did not answer within {self.timeout:g} s") from None

    async def _fetch(self, url: str) -> tuple[str, str, bytes, bool]:
        for _ in range(MAX_REDIRECTS + 1):
            _check_url(url)
            try:
                request = self.http.build_request("GET", url, headers={
                    "User-Agent": USER_AGENT, "Accept": "text/html,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.5"})
            except (httpx.InvalidURL, ValueError):
                raise ToolFailure(f"{url[:100]!r} is not a URL that can be fetched") from None
            try:
                response = await self.http.send(request, stream=True)
            except httpx.ConnectError as exc:
                raise ToolFailure(f"could not fetch {_host(url)}: {_web_connect_failure(exc)}") from None
            except httpx.HTTPError as exc:
                raise ToolFailure(f"could not fetch {_host(url)}: {type(exc).__name__}") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if not response.is_success:
                    raise ToolFailure(f"{_host(url)} answered HTTP {response.status_code}")
                body = bytearray()
                cut = False
                async for part in response.aiter_bytes():
                    body += part
                    if len(body) > self.max_bytes:
                        del body[self.max_bytes:]
                        cut = True
                        break
                return url, response.headers.get("content-type", ""), bytes(body), cut
            except httpx.HTTPError as exc:
                raise ToolFailure(f"reading {_host(url)} failed: {type(exc).__name__}") from None
            finally:
                await response.aclose()
        raise ToolFailure(f"more than {MAX_REDIRECTS} redirects from {_host(url)}")

    async def read_page(self, url: str, account: str) -> ToolResult:
        final, content_type, body, cut = await self.fetch(url, account)
        kind = content_type.split(";")[0].strip().lower()
        text = await decode(body, content_type)
        if kind in ("text/html", "application/xhtml+xml", "") and "<" in text[:2048]:
            try:
                markdown, title = await self.converter.convert(text[:EXTRACT_CHARS], final, account, self.timeout)
            except ConversionFailed as exc:
                raise ToolFailure(f"{final}: {exc}") from None
        elif kind.startswith("text/") or kind in ("application/json", "application/xml"):
            markdown, title = text, ""
        else:
            return ToolResult({"summary": f"{final} is {kind or 'binary content'} ({len(body)} bytes): not shown.",
                               "url": final, "contentType": kind})
        out: dict = {"summary": f"Read {final}" + (f": {title}" if title else "") + ".", "url": final,
               "markdown": markdown}
        if title:
            out["title"] = title
        if cut or len(text) > EXTRACT_CHARS:
            out["truncated"] = True
            out["summary"] += f" The page is larger than {self.max_bytes} bytes; only its start was read."
        return ToolResult(out)

    async def search(self, params: dict) -> ToolResult:
        if not self.searxng_url or self.search_http is None:
            raise ToolFailure("web_search is not available on this server (no --searxng-url)")
        count = params.get("count") if isinstance(params.get("count"), int) else SEARCH_DEFAULT
        count = max(1, min(SEARCH_MAX, count))
        query = {"q": params["query"], "format": "json",
                 "categories": params.get("category") or "general",
                 "language": params.get("language") or "en"}
        if params.get("timeRange"):
            query["time_range"] = params["timeRange"]
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.search_http.get(self.searxng_url.rstrip("/") + "/search", params=query)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise ToolFailure(f"the search service did not answer ({type(exc).__name__})") from None
        if not response.is_success:
            raise ToolFailure(f"the search service answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise ToolFailure("the search service answered something other than JSON") from None
        results = []
        for item in (data.get("results") or [])[:count] if isinstance(data, dict) else ():
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                results.append({"title": str(item.get("title") or ""), "url": item["url"],
                                "snippet": str(item.get("content") or "")[:500],
                                "engine": str(item.get("engine") or "")})
        partial = bool(data.get("unresponsive_engines")) if isinstance(data, dict) else False
        markdown = "\n".join(f"{i}. [{r['title'] or r['url']}]({r['url']})" + (f" — {r['snippet']}" if r["snippet"] else "")
                             for i, r in enumerate(results, 1))
        summary = (f"{len(results)} results for \"{params['query']}\"." if results
                   else f"No results found for \"{params['query']}\".")
        return ToolResult({"summary": summary, "results": results, "partial": partial, "markdown": markdown})


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolFailure(f"only http(s) pages can be read, not {url[:100]!r}")


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "the page"
    except ValueError:
        return "the page"


def _web_connect_failure(exc: httpx.ConnectError) -> str:
    for cause in _causes(exc):
        if isinstance(cause, NetworkRefused):
            return ("the address is outside the networks this server may reach "
                    f"(its network policy, {cause.flag})")
    return _connect_failure(exc)


class AccountWeb:
    """WebAccess bound to the account whose tools fetch (server/tools/surface.py makes one)."""

    def __init__(self, web: WebAccess, account: str) -> None:
        self.web, self.account = web, account

    async def fetch(self, url: str) -> tuple[str, str, bytes, bool]:
        return await self.web.fetch(url, self.account)

    async def read_page(self, url: str) -> ToolResult:
        return await self.web.read_page(url, self.account)

    async def search(self, params: dict) -> ToolResult:
        return await self.web.search(params)

