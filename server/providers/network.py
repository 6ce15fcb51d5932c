"""Which networks provider URLs may reach, enforced on every connection.

Any account can point an `ollama` or `custom` provider at any URL, so the server's own network
is reachable through it (SSRF). The operator decides which address classes are allowed with
`--provider-networks`; the check runs in the HTTP client's network backend
(server/providers/outbound_guard.py), *after* DNS resolution and for every connection its pool opens,
and the connection goes to the address that was checked. A name that resolves to a public address once and to 127.0.0.1 the next time (DNS
rebinding) is therefore refused the second time.

Terms of `--provider-networks` (comma-separated, the union is allowed):

- `public`      globally routable unicast addresses
- `loopback`    127.0.0.0/8, ::1 (and 0.0.0.0 / ::, which reach the local host)
- `private`     10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7
- `link-local`  169.254/16, fe80::/10 (cloud metadata endpoints excluded: see below)
- `any`         every address, metadata endpoints included
- a CIDR        e.g. `10.0.5.7/32`, `fd12::/16`, allowed whatever its class

Cloud metadata endpoints (169.254.169.254, fd00:ec2::254, ...) are refused unless `any` or a CIDR
names them explicitly. The default depends on where the server listens: on loopback (a desktop,
local Ollama) `public,loopback,private`; anywhere else `public`.

The web tools and downloads (`read https://…`, `navigate`, `write … fromUrl`,
DownloadAgentMemoryFile) have a policy of their own, `--web-networks`, in the same terms: any
account names their URLs, a web page's redirects included, so it is `public` by default wherever
the server listens; a provider's URL is one its account chose to configure, and a desktop's
Ollama is on loopback.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx

from .outbound_guard import GuardedConnect, IPAddress, guard_pool
from .redact import redact_urls

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

CLASSES = ("public", "loopback", "private", "link-local")
DEFAULT_LOOPBACK = "public,loopback,private"
DEFAULT_EXPOSED = "public"
DEFAULT_WEB = "public"
PROVIDER_FLAG, WEB_FLAG = "--provider-networks", "--web-networks"

_PRIVATE = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fec0::/10"))
# Instance metadata services of the common clouds: they hand out credentials, so no class term
# admits them.
METADATA = tuple(ipaddress.ip_network(n) for n in (
    "169.254.169.254/32",   # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
    "169.254.170.2/32",     # AWS ECS task metadata
    "169.254.169.253/32",   # AWS DNS
    "fd00:ec2::254/128",    # AWS IMDS over IPv6
    "100.100.100.200/32",   # Alibaba Cloud
    "192.0.0.192/32",       # Oracle Cloud (legacy)
))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_class(ip: IPAddress) -> str:
    """One of `metadata`, `loopback`, `link-local`, `private`, `public` or `reserved`."""
    ip = _embedded_v4(ip)
    if any(ip in n for n in METADATA):
        return "metadata"
    if ip.is_loopback or ip.is_unspecified:
        return "loopback"   # connecting to 0.0.0.0 or :: reaches the local host
    if ip.is_link_local:
        return "link-local"
    if any(ip in n for n in _PRIVATE):
        return "private"
    if ip.is_global and not ip.is_multicast:
        return "public"
    return "reserved"   # documentation ranges, multicast, broadcast, ...


def _embedded_v4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (::ffff:a.b.c.d, 64:ff9b::a.b.c.d), else itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


@dataclass(frozen=True)
class NetworkPolicy:
    classes: frozenset[str]
    networks: tuple[Network, ...] = ()
    allow_all: bool = False
    text: str = ""   # as configured, for messages and logs
    flag: str = PROVIDER_FLAG   # the setting it comes from, named in refusals

    @classmethod
    def parse(cls, text: str, flag: str = PROVIDER_FLAG) -> NetworkPolicy:
        """A policy from `--provider-networks` (or `--web-networks`); ValueError naming the bad term."""
        classes: set[str] = set()
        networks: list[Network] = []
        allow_all = False
        terms = [t.strip() for t in text.split(",") if t.strip()]
        if not terms:
            raise ValueError("provider networks must name at least one term")
        for term in terms:
            lowered = term.lower()
            if lowered == "any":
                allow_all = True
            elif lowered in CLASSES:
                classes.add(lowered)
            else:
                try:
                    networks.append(ipaddress.ip_network(term, strict=False))
                except ValueError:
                    raise ValueError(
                        f"provider networks: {term!r} is neither one of "
                        f"{', '.join(CLASSES + ('any',))} nor a CIDR"
                    ) from None
        return cls(frozenset(classes), tuple(networks), allow_all, ",".join(terms), flag)

    @classmethod
    def for_server(cls, configured: str, listen_host: str) -> NetworkPolicy:
        """The configured policy, else the default for a server listening on `listen_host`."""
        if configured and configured.strip():
            return cls.parse(configured)
        return cls.parse(DEFAULT_LOOPBACK if is_loopback_host(listen_host) else DEFAULT_EXPOSED)

    @classmethod
    def for_web(cls, configured: str) -> NetworkPolicy:
        """The web tools' and downloads' policy: the configured one, else `public`."""
        return cls.parse(configured if configured and configured.strip() else DEFAULT_WEB, WEB_FLAG)

    def allows(self, ip: IPAddress) -> bool:
        if self.allow_all:
            return True
        plain = _embedded_v4(ip)
        if any(plain in n or ip in n for n in self.networks):
            return True
        return address_class(ip) in self.classes


def is_loopback_host(host: str) -> bool:
    """True when a server listening on `host` can only be reached from this machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False   # '', '0.0.0.0', '::', a name: reachable from elsewhere


def check_networks_value(text: str) -> str:
    """The `--provider-networks` setting's type: the text, once it parses (ValueError if not)."""
    NetworkPolicy.parse(text)
    return text


# -- enforcement (server/providers/outbound_guard.py, for httpcore) ------------------------------------


def refusal_text(host: str, classes: Iterable[str], flag: str = PROVIDER_FLAG) -> str:
    """The sentence of a host none of whose addresses the policy allows (both HTTP stacks)."""
    which = "web" if flag == WEB_FLAG else "provider"
    return (f"{host} resolves only to addresses the server's {which} network policy refuses "
            f"({', '.join(sorted(set(classes)))}; {flag})")


class NetworkRefused(httpcore.ConnectError):
    """No address of the host is in the allowed networks (httpx re-raises it as ConnectError)."""

    def __init__(self, host: str, classes: Iterable[str], flag: str = PROVIDER_FLAG) -> None:
        self.host = host
        self.classes = sorted(set(classes))
        self.flag = flag
        super().__init__(refusal_text(host, self.classes, flag))


class GuardedBackend(GuardedConnect, httpcore.AsyncNetworkBackend):
    core = httpcore
    network = "a provider network"

    def refused(self, host: str, addresses: list[IPAddress]) -> Exception:
        flag = self.policy.flag if isinstance(self.policy, NetworkPolicy) else PROVIDER_FLAG
        return NetworkRefused(host, (address_class(ip) for ip in addresses), flag)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with the pool's network backend replaced by a GuardedBackend."""

    def __init__(self, policy: NetworkPolicy, **kwargs) -> None:
        super().__init__(trust_env=False, **kwargs)   # never an environment proxy in between
        limits = kwargs.get("limits", httpx.Limits(max_connections=100, max_keepalive_connections=20))
        guard_pool(self, GuardedBackend(policy), max_connections=limits.max_connections,
                   max_keepalive_connections=limits.max_keepalive_connections,
                   keepalive_expiry=limits.keepalive_expiry)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default certificate check (certifi's roots, no SSL_CERT_* from the environment, as
    `trust_env=False` has it), built once per process: building one parses the whole CA bundle,
    20 ms of CPU, which every server start paid (and each test's in-process server)."""
    return httpx.create_ssl_context(trust_env=False)


def provider_client(policy: NetworkPolicy, max_connections: int = 100) -> httpx.AsyncClient:
    """A guarded HTTP client with a connection pool of its own. The runtime makes one per
    purpose (providers, the HM server, web tools, downloads: server/runtime/runner.py), so one
    purpose's slow peers never hold the connections another's calls wait for."""
    quiet_http_loggers()
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=min(20, max_connections))
    return httpx.AsyncClient(
        transport=GuardedTransport(policy, verify=tls_context(), limits=limits),
        timeout=httpx.Timeout(30.0, read=None),
        trust_env=False,
        follow_redirects=False,   # a redirect must not carry the key (or the request) elsewhere
    )


# -- logging -----------------------------------------------------------


class _RedactUrlsFilter(logging.Filter):
    """Rewrites a record's message with userinfo and query strings of URLs removed."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is left to logging's own error handling
            return True
        record.msg, record.args = redact_urls(message), ()
        return True


_FILTER = _RedactUrlsFilter()


def quiet_http_loggers() -> None:
    """httpx logs every request URL at INFO: keep it and httpcore at WARNING, URLs redacted."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
