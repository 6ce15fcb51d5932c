"""The web, for the agent: `read https://…` and `navigate` (a page turned into Markdown), and
`web_search` (the operator's SearXNG, `--searxng-url`).

Every fetch goes through the runtime's guarded HTTP client, so the provider network policy is
checked on every connection after DNS; redirects are followed here, one hop at a time (each a
new checked connection), at most MAX_REDIRECTS, and only to http(s). A page is read up to
`--tool-fetch-bytes` (the rest is not downloaded) and HTML becomes Markdown with trafilatura
(chosen by bench/page_markdown.py), in a thread so a big page never stalls the server. What comes
back is untrusted text: it reaches the model as a tool result and nothing else.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from ..providers.http_stream import _connect_failure
from .context import ToolFailure, ToolResult

log = logging.getLogger("seed_agents.tools")

MAX_REDIRECTS = 5
USER_AGENT = "seed-agents (+https://seed.hyper.media)"
# trafilatura's time grows with the HTML it is given; past this many characters the page is cut.
EXTRACT_CHARS = 1_000_000
SEARCH_DEFAULT, SEARCH_MAX = 10, 25


@dataclass
class WebAccess:
    http: httpx.AsyncClient      # the guarded client (network policy per connection)
    max_bytes: int               # a page is read up to this many bytes
    timeout: float               # one fetch, redirects included
    searxng_url: str = ""        # empty: no web_search
    search_http: httpx.AsyncClient | None = None   # the operator's SearXNG (not policy-bound)

    async def fetch(self, url: str) -> tuple[str, str, bytes, bool]:
        """(final url, content type, body up to max_bytes, cut) of a GET, redirects followed."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self._fetch(url)
        except TimeoutError:
            raise ToolFailure(f"{_host(url)} did not answer within {self.timeout:g} s") from None

    async def _fetch(self, url: str) -> tuple[str, str, bytes, bool]:
        for _ in range(MAX_REDIRECTS + 1):
            _check_url(url)
            request = self.http.build_request("GET", url, headers={
                "User-Agent": USER_AGENT, "Accept": "text/html,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.5"})
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

    async def read_page(self, url: str) -> ToolResult:
        final, content_type, body, cut = await self.fetch(url)
        kind = content_type.split(";")[0].strip().lower()
        text = body.decode(_charset(content_type), "replace")
        if kind in ("text/html", "application/xhtml+xml", "") and "<" in text[:2048]:
            markdown, title = await asyncio.to_thread(page_markdown, text[:EXTRACT_CHARS], final)
        elif kind.startswith("text/") or kind in ("application/json", "application/xml"):
            markdown, title = text, ""
        else:
            return ToolResult({"summary": f"{final} is {kind or 'binary content'} ({len(body)} bytes): not shown.",
                               "url": final, "contentType": kind})
        out = {"summary": f"Read {final}" + (f": {title}" if title else "") + ".", "url": final,
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


def page_markdown(html: str, url: str) -> tuple[str, str]:
    """(markdown, title) of an HTML page: its main text by trafilatura, with links and tables."""
    import trafilatura  # heavy import: only when a page is read

    markdown = trafilatura.extract(html, url=url, output_format="markdown", include_links=True,
                                   include_tables=True, include_comments=False, favor_recall=True) or ""
    title = ""
    try:
        meta = trafilatura.extract_metadata(html)
        title = (meta.title or "") if meta is not None else ""
    except Exception:  # noqa: BLE001 - metadata is a nicety; a page that breaks it still reads
        pass
    return markdown, title


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolFailure(f"only http(s) pages can be read, not {url[:100]!r}")


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "the page"
    except ValueError:
        return "the page"


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            try:
                "".encode(value.strip('"'))
                return value.strip('"')
            except LookupError:
                break
    return "utf-8"


def _web_connect_failure(exc: httpx.ConnectError) -> str:
    reason = _connect_failure(exc)
    if "outside the networks" in reason:
        return "the address is outside the networks this server may reach (its network policy)"
    return reason

