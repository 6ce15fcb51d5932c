"""Which browser origins may use the server (`--allowed-origins`, docs/operations.md
"Security"). A request without an `Origin` header (the Seed desktop, scripts, the CLI) is not
from a web page and is always allowed; a page's request carries its origin, and is refused with
403 unless the setting is `*` or lists that origin."""
from __future__ import annotations

import functools

DUPLICATE = "more than one Origin header: a browser sends one"
REFUSED = ("this origin may not use the server: the operator allows browser requests only from "
           "the origins of --allowed-origins")


class OriginPolicy:
    __slots__ = ("any", "allowed")

    def __init__(self, setting: str) -> None:
        self.any = setting.strip() == "*"
        self.allowed = frozenset() if self.any else frozenset(setting.split(","))

    def allows(self, origin: str | None) -> bool:
        if origin is None or self.any:
            return True
        return origin.strip().rstrip("/").lower() in self.allowed

    def matched(self, origin: str | None) -> str | None:
        """The origin CORS headers name for this request: its own when the list allows it
        (None with `*`, whose answers say `*`, and when it is not allowed)."""
        if origin is None or self.any:
            return None
        normal = origin.strip().rstrip("/").lower()
        return normal if normal in self.allowed else None


@functools.lru_cache(maxsize=8)
def policy(setting: str) -> OriginPolicy:
    """The policy of a setting, made once (every HTTP connection asks)."""
    return OriginPolicy(setting)
