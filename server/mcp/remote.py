"""Talking to one remote MCP server (Streamable HTTP) with the official SDK's `Client`.

`discover` lists its tools (paged, at most `McpLimits.tools`; a tool whose name or schema this
server cannot carry, or whose schema passes `McpLimits.schema_bytes`, is left out and counted);
`call` runs one tool. Both run in a worker process (listing.py; `discover_here` and `call_here`
are their work there). A listing is CPU work twice over (the SDK's pydantic parse of every page, in
one call that holds the GIL, and jsonschema's meta-schema check at about a millisecond per
property), so a hostile listing costs seconds: the whole discovery runs in a worker process
(listing.py), and stops at its deadline (`--mcp-timeout` covers fetching and checking together). Each opens its own session (MCP
sessions are cheap and a parked run may resume on another server), under the provider network
policy (network.py), a timeout for the whole exchange, and a byte bound on every answer. Every
failure becomes `McpError` with a fixed phrase: the server's own text never reaches a client or
the model as an error message (a tool's *result* does, as data).
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass

from seed_agents.protocol.wire.dagcbor import encode
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.tool_documents import MAX_SCHEMA_BYTES, MAX_TEXT_BYTES, check_schema

from ..providers.network import NetworkPolicy

log = logging.getLogger("seed_agents.mcp")

MAX_PAGES = 1_000
MAX_RESULT_BYTES = 256 * 1024   # what one call may hand the model
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class McpLimits:
    """What one server's listing may hold (--mcp-max-tools, --mcp-max-schema-bytes)."""

    tools: int = 1_000
    schema_bytes: int = MAX_SCHEMA_BYTES


class _Late(Exception):
    """The listing's check passed its deadline."""


class McpError(Exception):
    """A remote MCP server failed; `message` is ours (fixed phrases), safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _phrase(exc: BaseException, what: str) -> McpError:
    """One fixed phrase per kind of failure (the exception's own text is only logged)."""
    from .network import McpNetworkRefused, TooLarge  # loaded by _session already

    for e in _chain(exc):
        if isinstance(e, McpNetworkRefused):
            return McpError(f"{what}: the server's network policy refuses this address (--provider-networks)")
        if isinstance(e, TooLarge):
            return McpError(f"{what}: the MCP server's answer was too large")
        if isinstance(e, TimeoutError):
            return McpError(f"{what}: the MCP server did not answer in time (--mcp-timeout)")
    for e in _chain(exc):
        status = getattr(getattr(e, "response", None), "status_code", None)
        if type(status) is int and status >= 400:
            return McpError(f"{what}: the MCP server answered HTTP {status}"
                            + (" (check its secret headers)" if status in (401, 403) else ""))
    if any(type(e).__name__ in ("ConnectError", "ConnectTimeout") for e in _chain(exc)):
        return McpError(f"{what}: the MCP server could not be reached")
    return McpError(f"{what}: the MCP server's answer was not valid MCP")


def _chain(exc: BaseException):
    seen, stack = set(), [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(getattr(e, "exceptions", ()) or ())
        for nxt in (e.__cause__, e.__context__):
            if nxt is not None:
                stack.append(nxt)


class Remote:
    """One account's connection settings for one server: URL and headers (secrets opened)."""

    def __init__(self, url: str, headers: dict[str, str], policy: NetworkPolicy, timeout: float,
                 limits: McpLimits = McpLimits()) -> None:
        self.url, self.headers, self.policy, self.timeout = url, headers, policy, timeout
        self.limits = limits

    async def _session(self, body):  # noqa: ANN001
        # The SDK costs about a second of imports and its HTTP stack (httpx2, for our guarded
        # client) a tenth more: loaded when a server is first used, so a server with no MCP
        # servers (and every CLI start) never pays for them.
        from .network import MAX_RESPONSE_BYTES, mcp_http_client

        http = mcp_http_client(self.policy, self.headers, self.timeout)
        async with http:
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(self.url, http_client=http, terminate_on_close=False,
                                               max_sse_event_size=MAX_RESPONSE_BYTES)
            async with Client(transport, mode="legacy", read_timeout_seconds=self.timeout) as client:
                return await body(client)

    async def _run(self, body, what: str):  # noqa: ANN001
        try:
            async with asyncio.timeout(self.timeout):
                return await self._session(body)
        except McpError:
            raise
        except asyncio.CancelledError:
            raise
        except BaseException as exc:   # anyio task groups raise ExceptionGroups
            if not isinstance(exc, Exception) and not isinstance(exc, BaseExceptionGroup):
                raise
            log.info("MCP %s at %s failed: %r", what, self.url.split("?")[0], exc)
            raise _phrase(exc, what) from None

    async def discover(self, account: str = "") -> tuple[list[dict], int]:
        """(McpToolInfo list, how many tools were left out): at most `limits.tools` kept, fetched
        and checked within the timeout, in a worker process (listing.py), one at a time per
        `account`."""
        from .listing import ListingFailed, pool

        request = {"url": self.url, "headers": self.headers, "networks": self.policy.text,
                   "flag": self.policy.flag, "timeout": self.timeout, "tools": self.limits.tools,
                   "schemaBytes": self.limits.schema_bytes}
        try:
            return await pool().discover(account, request)
        except ListingFailed as exc:
            raise McpError(exc.message) from None

    async def discover_here(self) -> tuple[list[dict], int]:
        """`discover`'s work, in this process (the listing worker's): the pages fetched through
        the SDK, then the tools checked, all before the deadline."""
        deadline = time.monotonic() + self.timeout
        cap = self.limits.tools

        async def body(client):  # noqa: ANN001
            raw: list = []
            seen = 0
            cursor = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                seen += len(page.tools)
                raw.extend(page.tools[:cap - len(raw)])
                cursor = page.next_cursor
                if not cursor or len(raw) >= cap:
                    break   # (past the cap the rest is not fetched: it is counted as left out)
            return raw, seen

        raw, seen = await self._run(body, "listing its tools failed")
        try:
            tools = _check_listing(raw, deadline, self.limits)
        except _Late:
            raise McpError("listing its tools failed: checking the tools it lists took longer than this "
                           "server allows (--mcp-timeout)") from None
        return tools, seen - len(tools)

    async def call(self, name: str, arguments: dict, account: str = "") -> tuple[object, str | None]:
        """(output, error): the tool's result as data, or the text of a tool-level error. Run in
        a worker process (listing.py: the SDK parses the answer, up to 16 MiB, under the GIL), at
        most a few at once per `account`."""
        from .listing import ListingFailed, pool

        request = {"url": self.url, "headers": self.headers, "networks": self.policy.text,
                   "flag": self.policy.flag, "timeout": self.timeout, "name": name, "arguments": arguments}
        try:
            return await pool().call(account, request)
        except ListingFailed as exc:
            raise McpError(exc.message) from None

    async def call_here(self, name: str, arguments: dict) -> tuple[object, str | None]:
        """`call`'s work, in this process (the worker's)."""
        async def body(client):  # noqa: ANN001
            result = await client.call_tool(name, arguments)
            return _result(result)

        return await self._run(body, f"calling {name} failed")


def _check_listing(raw: list, deadline: float, limits: McpLimits) -> list[dict]:
    """The tools of a listing this server can carry (in the listing worker); _Late past the
    deadline, so a listing that was given up on stops costing CPU at its next tool."""
    tools: list[dict] = []
    checked: dict[bytes, bool] = {}   # schemas repeat: each distinct one is checked once
    for tool in raw:
        if time.monotonic() > deadline:
            raise _Late()
        info = _tool_info(tool, checked, limits.schema_bytes)
        if info is not None and len(tools) < limits.tools:
            tools.append(info)
    return tools


def _tool_info(tool, checked: dict, schema_bytes: int = MAX_SCHEMA_BYTES) -> dict | None:  # noqa: ANN001
    """McpToolInfo {name, description?, inputSchema} of an SDK Tool, or None when this server
    cannot carry it (a name that is not plain, a schema that is not a bounded JSON Schema)."""
    name = getattr(tool, "name", None)
    if type(name) is not str or not TOOL_NAME.fullmatch(name):
        return None
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {"type": "object"}
    try:
        key = encode(schema)
    except (ValueError, TypeError):
        return None
    if len(key) > schema_bytes:
        return None   # (before the check, which costs in proportion to the schema)
    if key not in checked:
        try:
            check_schema(schema, "inputSchema")
            checked[key] = len(key) <= MAX_SCHEMA_BYTES
        except ProtocolError:
            checked[key] = False
    if not checked[key]:
        return None
    info: dict = {"name": name, "inputSchema": schema}
    description = getattr(tool, "description", None)
    if type(description) is str and description.strip():
        info["description"] = description.encode("utf-8")[:MAX_TEXT_BYTES].decode("utf-8", "ignore")
    return info


def _result(result) -> tuple[object, str | None]:  # noqa: ANN001
    texts = []
    for part in getattr(result, "content", None) or ():
        text = getattr(part, "text", None)
        if type(text) is str:
            texts.append(text)
        else:
            texts.append(f"[{getattr(part, 'type', 'content')} omitted]")
    text = "\n".join(texts)
    if len(text.encode("utf-8")) > MAX_RESULT_BYTES:
        text = text.encode("utf-8")[:MAX_RESULT_BYTES].decode("utf-8", "ignore") + "\n[truncated]"
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        return None, text or "the tool failed"
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if structured is not None:
        try:
            if len(encode(structured)) <= MAX_RESULT_BYTES:
                return structured, None
        except (ValueError, TypeError):
            pass
    return {"text": text}, None
