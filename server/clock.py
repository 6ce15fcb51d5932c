"""The server's clock and ids: what the app, the handlers and the runtime all stamp rows with."""
from __future__ import annotations

import time
import uuid


def now_ms() -> int:
    """Unix time in milliseconds."""
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A fresh row id (UUID v4 text)."""
    return str(uuid.uuid4())
