"""DownloadAgentMemoryFile: fetch an http(s) URL into an agent's memory.

The fetch goes through the runtime's download client (server/providers/network.py), a pool of
its own: every connection, redirects included, is checked against the web network policy
(`--web-networks`, public only by default) after DNS, so a URL or a redirect that leads to a
refused address (the server's own machine, its LAN, a metadata endpoint) is refused. Redirects
are followed here, at most MAX_REDIRECTS, each hop checked the same way. One account runs at
most `--web-fetches-per-account` fetches at once (downloads and its agents' page reads
together), and the whole download, the wait for that slot included, ends at
`--download-timeout` (502, nothing kept), so a server sending a byte now and then cannot hold
it for ever. The body streams into a staged upload (server/store/uploads.py) a few MiB at a time,
so memory stays bounded, and is cut off past `--download-max-bytes` (413, nothing kept); a
server killed mid-download leaves a staged upload that the sweep drops.
"""
from __future__ import annotations

import asyncio

import httpx

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.file_rules import default_download_path, extension_for, memory_path

from ..clock import new_id
from ..providers.network import NetworkRefused
from ..providers.redact import display_url
from ..store import blobs
from ..store import memory as memory_q
from ..store import uploads as uploads_q
from ..store.errors import Refused
from .access import WRITER, agent_access
from .context import HandlerContext
from .memory_files import limits, owner_of
from .uploads import commit_scanned

MAX_REDIRECTS = 5
IDLE_TIMEOUT = 60.0        # seconds without a byte (the reference's idle timeout)
WRITE_EVERY = 4 << 20      # bytes buffered before they are appended to the staged upload
USER_AGENT = "SeedAgents/1.0 (+https://seed.hyper.media)"


def _refused(exc: BaseException) -> NetworkRefused | None:
    while exc is not None:
        if isinstance(exc, NetworkRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


async def _open(client: httpx.AsyncClient, url: str) -> tuple[httpx.Response, str]:
    """The response for `url` after redirects (each hop under the network policy)."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            request = client.build_request("GET", url, headers={"User-Agent": USER_AGENT},
                                           timeout=httpx.Timeout(30.0, read=IDLE_TIMEOUT))
        except (httpx.InvalidURL, ValueError):
            raise ProtocolError(400, f"Could not download {display_url(url)}: not a URL that can be "
                                     "fetched") from None
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            refused = _refused(exc)
            if refused is not None:
                raise ProtocolError(403, f"Could not download {display_url(url)}: {refused.host} is an address "
                                         f"the server's network policy refuses ({refused.flag})") from None
            raise ProtocolError(502, f"Could not download {display_url(url)}: {type(exc).__name__}") from None
        if response.is_redirect and response.next_request is not None:
            await response.aclose()
            url = str(response.next_request.url)
            if response.next_request.url.scheme not in ("http", "https"):
                raise ProtocolError(502, "Could not download: a redirect leads to a non-http URL")
            continue
        if not response.is_success:
            await response.aclose()
            raise ProtocolError(502, f"Could not download {display_url(url)}: HTTP {response.status_code}")
        return response, url
    raise ProtocolError(502, f"Could not download: more than {MAX_REDIRECTS} redirects")


async def download_agent_memory_file(ctx: HandlerContext, env, action) -> dict:
    await ctx.db.aread(agent_access, env.account_id, action.agent_id, WRITER)
    deadline = ctx.config.download_timeout
    until = asyncio.get_running_loop().time() + deadline
    try:
        async with ctx.runtime.download_slots.slot(env.account_id, until):
            return await _download(ctx, env, action, until)
    except TimeoutError:
        raise ProtocolError(502, f"Could not download {display_url(action.url)}: it did not finish within "
                                 f"{deadline:g} s (--download-timeout); nothing was kept") from None


async def _download(ctx: HandlerContext, env, action, until: float) -> dict:
    """The download; its network parts end at `until` (TimeoutError), the commit is not cut."""
    account_id, agent_id = env.account_id, action.agent_id
    cap = ctx.config.download_max_bytes
    async with asyncio.timeout_at(until):
        response, final_url = await _open(ctx.runtime.download_http, action.url)
    upload_id = new_id()
    try:
        content_type = response.headers.get("content-type")
        path = action.path or default_download_path(response.url.path, f"download-{ctx.now_ms()}")
        path = memory_path(path)
        if content_type and not _has_extension(path):
            ext = extension_for(content_type)
            if ext:
                path = memory_path(f"{path}.{ext}")
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            raise ProtocolError(413, f"Download of {int(declared)} bytes exceeds the limit of {cap} bytes")
        now = ctx.now_ms()

        def begin(conn):
            owner = owner_of(conn, agent_id)
            memory_q.check_writable(conn, agent_id, owner, path, int(declared) if declared and declared.isdigit()
                                    else 0, limits(ctx))
            uploads_q.begin(conn, upload_id, account_id, owner,
                            {"kind": "memory", "agentId": agent_id, "path": path}, cap, now)

        await ctx.db.write(begin)
        received, buffer = 0, bytearray()
        try:
            async with asyncio.timeout_at(until):   # a write cut here is dropped with the upload
                async for piece in response.aiter_raw():
                    buffer += piece
                    if received + len(buffer) > cap:
                        raise ProtocolError(413, f"Download exceeds the limit of {cap} bytes; nothing was kept")
                    if len(buffer) >= WRITE_EVERY:
                        received = await ctx.db.write(uploads_q.append, upload_id, account_id, received,
                                                      bytes(buffer), ctx.now_ms())
                        buffer.clear()
        except httpx.HTTPError as exc:
            raise ProtocolError(502, f"Download of {display_url(final_url)} failed: {type(exc).__name__}") from None
        if buffer:
            received = await ctx.db.write(uploads_q.append, upload_id, account_id, received, bytes(buffer),
                                          ctx.now_ms())
        up = await ctx.db.aread(uploads_q.get, upload_id, account_id)
        scan = await ctx.db.aread(blobs.scan, up.blob_id, memory_q.MAX_INDEXED_CHARS, large=True)
        result = await commit_scanned(ctx, account_id, upload_id, scan)
        upload_id = None
    finally:
        await response.aclose()
        if upload_id is not None:
            try:
                await ctx.db.write(uploads_q.abort, upload_id, account_id)
            except (ProtocolError, Refused):
                pass   # never begun
    out = {"_": "DownloadAgentMemoryFileResponse", "agentId": agent_id, "entry": result["entry"],
           "finalUrl": final_url}
    if content_type:
        out["contentType"] = content_type
    return out


def _has_extension(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    return bool(dot and stem and 1 <= len(ext) <= 8 and ext.isalnum())
