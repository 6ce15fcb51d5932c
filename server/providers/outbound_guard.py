"""The guarded outbound connect: the server resolves the host itself, keeps the addresses a
network policy allows, and connects to one of those, for every connection a pool opens.

Checking after DNS, on the address actually dialled, is what defeats DNS rebinding (a name that
resolves to a public address once and to 127.0.0.1 the next time). TLS still verifies the host
*name* (httpcore passes the origin's host as server_hostname), so connecting by address changes
nothing for certificates.

Written once for both HTTP stacks the server speaks through: httpcore under httpx (providers,
web tools, the HM client; server/providers/network.py) and httpcore2 under httpx2 (the MCP SDK;
server/mcp/network.py). Each names its stack in a subclass of `GuardedConnect`; which networks
are allowed is the policy's business (server/providers/network.py), asked through `allows`.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, ClassVar, Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Name resolution has threads of its own: on the loop's default executor it would queue behind
# whatever else runs there (a slow page's work once made an honest fetch fail waiting for DNS).
RESOLVER_THREADS = 8
_RESOLVER = ThreadPoolExecutor(max_workers=RESOLVER_THREADS, thread_name_prefix="resolve")


class AddressPolicy(Protocol):
    def allows(self, ip: IPAddress) -> bool: ...


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The host's addresses, each once, in the resolver's order (an IP literal: itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().run_in_executor(
        _RESOLVER, functools.partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM))
    seen: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen[ipaddress.ip_address(sockaddr[0].split("%", 1)[0])] = None
    return list(seen)


class GuardedConnect:
    """A network backend of one httpcore stack that connects only to allowed addresses.

    A subclass, also deriving from its stack's `AsyncNetworkBackend`, sets `core` (the httpcore
    module), `network` (what a refused unix socket is told it is not) and `refused` (the
    stack's ConnectError for a host with no allowed address).
    """

    core: ClassVar[ModuleType]
    network: ClassVar[str]

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy
        self._inner = self.core.AnyIOBackend()

    def refused(self, host: str, addresses: list[IPAddress]) -> Exception:
        raise NotImplementedError

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # noqa: ANN001
        core = self.core
        try:
            async with asyncio.timeout(timeout):
                addresses = await resolve(host, port)
        except TimeoutError:
            raise core.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise core.ConnectError(str(exc)) from exc
        allowed = [ip for ip in addresses if self.policy.allows(ip)]
        if not allowed:
            raise self.refused(host, addresses)
        last: Exception | None = None
        for ip in allowed:
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (core.ConnectError, core.ConnectTimeout) as exc:
                last = exc   # try the next allowed address, as a resolver-driven connect would
        assert last is not None
        raise last

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # noqa: ANN001
        raise self.core.ConnectError(f"unix sockets are not {self.network}")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guard_pool(transport: Any, backend: GuardedConnect, *, max_connections: int,
               max_keepalive_connections: int, keepalive_expiry: float | None = None) -> None:
    """Replaces the connection pool of an httpx (or httpx2) transport by one that connects
    through `backend`, keeping the transport's TLS context; HTTP/1.1 only."""
    transport._pool = backend.core.AsyncConnectionPool(
        ssl_context=transport._pool._ssl_context,
        max_connections=max_connections,
        max_keepalive_connections=max_keepalive_connections,
        keepalive_expiry=keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=backend,
    )
