"""Which browser origins may use the server (`--allowed-origins`, docs/operations.md
"Security"). A request without an `Origin` header (the Seed desktop's Node side, scripts, the CLI)
is not from a web page and is always allowed; a page's request carries its origin, and is
refused with 403 unless the setting is `*` or lists that origin.

Unset, the setting depends on where the server listens, as `--provider-networks` does. On a
loopback address (a desktop's own server) it is the origins the Seed desktop's window really
sends: its renderer is served by the desktop's local HTTP server on `http://localhost:17654` (or
the next free port up to 17664; frontend/apps/desktop/src/local-server.ts of the reference),
from the Vite dev server `http://localhost:5173` while developing, and from `file://` when that
local server could not start. Any other page, a site the user merely visits included, gets 403
and CORS answers that name no origin, so it cannot drive a server that reaches the user's own
machine. Anywhere else (a hosted server, which the Seed web app calls from its own origin, one
the server cannot know) it is `*`, as CONTRACT section 3 has it.
"""
from __future__ import annotations

import functools
import ipaddress

DUPLICATE = "more than one Origin header: a browser sends one"
REFUSED = ("this origin may not use the server: the operator allows browser requests only from "
           "the origins of --allowed-origins")

# The Seed desktop's renderer origins (see the docstring), lower-case as browsers send them.
DESKTOP_ORIGINS = ",".join([*(f"http://localhost:{port}" for port in range(17654, 17665)),
                            "http://localhost:5173", "file://"])


class OriginPolicy:
    __slots__ = ("any", "allowed")

    def __init__(self, setting: str) -> None:
        self.any = setting.strip() == "*"
        self.allowed = frozenset() if self.any else frozenset(setting.split(","))

    def allows(self, origin: str | None) -> bool:
        if origin is None or self.any:
            return True
        return normal(origin) in self.allowed

    def matched(self, origin: str | None) -> str | None:
        """The origin CORS headers name for this request: its own when the list allows it
        (None with `*`, whose answers say `*`, and when it is not allowed)."""
        if origin is None or self.any:
            return None
        named = normal(origin)
        return named if named in self.allowed else None

    def cors(self, origin: str | None) -> str | None:
        """What `Access-Control-Allow-Origin` says to this request: `*` when any origin may use
        the server and to a request from no web page (only browsers read the header, and they
        always send `Origin` where it matters); the page's own origin when the list has it;
        nothing for a page the list refuses."""
        if origin is None or self.any:
            return "*"
        return self.matched(origin)


def normal(origin: str) -> str:
    """An origin as the list keeps it: lower-case, without a trailing slash (`file://` kept)."""
    value = origin.strip().lower()
    return value[:-1] if value.endswith("/") and not value.endswith("://") else value


def default_for(host: str) -> str:
    """The setting when none is given: the desktop's origins on loopback, else `*`."""
    return DESKTOP_ORIGINS if _loopback(host) else "*"


def _loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False   # '', '0.0.0.0', '::', a name: reachable from elsewhere


@functools.lru_cache(maxsize=8)
def policy(setting: str, host: str = "127.0.0.1") -> OriginPolicy:
    """The policy of a setting ('' : the default for a server listening on `host`), made once
    (every HTTP connection asks)."""
    return OriginPolicy(setting.strip() or default_for(host))
