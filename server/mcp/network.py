"""The HTTP client an MCP call goes through: the provider network policy on every connection
(after DNS: server/providers/outbound_guard.py, as for the providers' httpx), no environment proxy, and a
bound on the bytes one response may carry, so a server answering without end is cut off.

The MCP SDK speaks through httpx2 (httpcore2): this module names that stack to the guard; the
policy is server/providers/network.py's.
"""
from __future__ import annotations

from collections.abc import Iterable

import httpcore2
import httpx2

from ..providers.network import NetworkPolicy, address_class, refusal_text
from ..providers.outbound_guard import GuardedConnect, IPAddress, guard_pool

MAX_RESPONSE_BYTES = 16 << 20


class McpNetworkRefused(httpcore2.ConnectError):
    def __init__(self, host: str, classes: Iterable[str]) -> None:
        super().__init__(refusal_text(host, classes))


class _GuardedBackend(GuardedConnect, httpcore2.AsyncNetworkBackend):
    core = httpcore2
    network = "an MCP network"

    def refused(self, host: str, addresses: list[IPAddress]) -> Exception:
        return McpNetworkRefused(host, (address_class(ip) for ip in addresses))


class TooLarge(Exception):
    pass


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner, limit: int) -> None:  # noqa: ANN001
        self.inner, self.limit = inner, limit

    async def __aiter__(self):
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise TooLarge(f"the MCP server's answer is larger than {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, policy: NetworkPolicy, max_bytes: int) -> None:
        super().__init__(trust_env=False)
        self.max_bytes = max_bytes
        guard_pool(self, _GuardedBackend(policy), max_connections=10, max_keepalive_connections=2)

    async def handle_async_request(self, request):  # noqa: ANN001
        response = await super().handle_async_request(request)
        response.stream = _BoundedStream(response.stream, self.max_bytes)
        return response


def mcp_http_client(policy: NetworkPolicy, headers: dict[str, str], timeout: float,
                    max_bytes: int = MAX_RESPONSE_BYTES) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=_GuardedTransport(policy, max_bytes), headers=headers,
                              timeout=httpx2.Timeout(timeout), trust_env=False, follow_redirects=False)
