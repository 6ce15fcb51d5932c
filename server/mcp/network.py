"""The HTTP client an MCP call goes through: the provider network policy on every connection
(after DNS, as server/providers/network.py does for httpx), no environment proxy, and a bound on
the bytes one response may carry, so a server answering without end is cut off.

The MCP SDK speaks through httpx2 (httpcore2), so the guard is written again for that stack; the
policy and the resolution are server/providers/network.py's.
"""
from __future__ import annotations

import asyncio

import httpcore2
import httpx2

from ..providers.network import NetworkPolicy, _resolve, address_class

MAX_RESPONSE_BYTES = 16 << 20


class McpNetworkRefused(httpcore2.ConnectError):
    def __init__(self, host: str, classes) -> None:  # noqa: ANN001
        super().__init__(f"{host} resolves only to addresses the server's provider network policy refuses "
                         f"({', '.join(sorted(set(classes)))})")


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # noqa: ANN001
        try:
            async with asyncio.timeout(timeout):
                addresses = await _resolve(host, port)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        allowed = [ip for ip in addresses if self.policy.allows(ip)]
        if not allowed:
            raise McpNetworkRefused(host, (address_class(ip) for ip in addresses))
        last: Exception | None = None
        for ip in allowed:
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        raise last

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # noqa: ANN001
        raise httpcore2.ConnectError("unix sockets are not an MCP network")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


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
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=self._pool._ssl_context, max_connections=10, max_keepalive_connections=2,
            http1=True, http2=False, network_backend=_GuardedBackend(policy))

    async def handle_async_request(self, request):  # noqa: ANN001
        response = await super().handle_async_request(request)
        response.stream = _BoundedStream(response.stream, self.max_bytes)
        return response


def mcp_http_client(policy: NetworkPolicy, headers: dict[str, str], timeout: float,
                    max_bytes: int = MAX_RESPONSE_BYTES) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=_GuardedTransport(policy, max_bytes), headers=headers,
                              timeout=httpx2.Timeout(timeout), trust_env=False, follow_redirects=False)
