"""Server configuration: flags win over SEED_AGENTS_* variables, which win over defaults."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Mapping


@dataclass
class Limits:
    # Defaults are those of CONTRACT section 6.
    max_frame: int = 1 << 20          # bytes of one envelope; larger is 413, 4x larger closes 1009
    max_depth: int = 64               # CBOR nesting; deeper is 400
    subs_per_socket: int = 256        # more is 429
    sockets_per_account: int = 64     # more closes the socket with 1008
    max_connections: int = 10_000     # WebSocket connections in all; more are refused (HTTP 503)
    rate_per_second: float = 100.0    # actions per account, token bucket
    rate_burst: int = 200
    inflight_per_socket: int = 64     # v2 requests running at once on one socket
    outbound_queue_bytes: int = 8 << 20   # a subscriber further behind than this is cut off (1013)
    replay_page: int = 1000           # events read and framed at once during replay


@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 3050
    db_path: str = "./data/agents.sqlite"
    data_dir: str = "./data"
    clock_window_ms: int = 30_000
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    shutdown_timeout: float = 10.0
    slow_close_timeout: float = 35.0  # contract: wait at least 30 s for the closing handshake
    provider_first_token_timeout: float = 60.0
    log_level: str = "INFO"
    # HTTP (server/httpconn.py): bounds on a stalled request, and on an idle keep-alive connection.
    http_header_timeout: float = 10.0   # first byte of a request to the end of its headers
    http_body_timeout: float = 30.0     # end of the headers to the end of the body
    http_idle_timeout: float = 60.0     # a keep-alive connection with no request in progress
    limits: Limits = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.limits is None:
            self.limits = Limits()


# (flag, env suffix, attribute, type) for everything settable from outside.
_SETTINGS = [
    ("--host", "HTTP_HOSTNAME", "host", str),
    ("--port", "HTTP_PORT", "port", int),
    ("--db-path", "DB_PATH", "db_path", str),
    ("--data-dir", "DATA_DIR", "data_dir", str),
    ("--clock-window-ms", "CLOCK_WINDOW_MS", "clock_window_ms", int),
    ("--ping-interval", "PING_INTERVAL", "ping_interval", float),
    ("--log-level", "LOG_LEVEL", "log_level", str),
]
_LIMIT_SETTINGS = [
    ("--max-frame-bytes", "MAX_FRAME_BYTES", "max_frame", int),
    ("--max-depth", "MAX_DEPTH", "max_depth", int),
    ("--max-subscriptions", "MAX_SUBSCRIPTIONS", "subs_per_socket", int),
    ("--max-sockets-per-account", "MAX_SOCKETS_PER_ACCOUNT", "sockets_per_account", int),
    ("--max-connections", "MAX_CONNECTIONS", "max_connections", int),
    ("--rate-limit", "RATE_LIMIT", "rate_per_second", float),
    ("--rate-burst", "RATE_BURST", "rate_burst", int),
    ("--max-inflight", "MAX_INFLIGHT", "inflight_per_socket", int),
    ("--outbound-queue-bytes", "OUTBOUND_QUEUE_BYTES", "outbound_queue_bytes", int),
]

ENV_PREFIX = "SEED_AGENTS_"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, env, attr, typ in _SETTINGS + _LIMIT_SETTINGS:
        parser.add_argument(flag, dest=attr, type=typ, default=None,
                            help=f"(env {ENV_PREFIX}{env})")


def settings_table() -> list[tuple[str, str, object]]:
    """(flag, environment variable, default) rows, for the docs and --help."""
    cfg, lim = Config(), Limits()
    rows = [(f, ENV_PREFIX + e, getattr(cfg, a)) for f, e, a, _ in _SETTINGS]
    rows += [(f, ENV_PREFIX + e, getattr(lim, a)) for f, e, a, _ in _LIMIT_SETTINGS]
    return rows


def load_config(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    cfg = Config()
    data_dir_explicit = db_path_explicit = False
    for group, target in ((_SETTINGS, cfg), (_LIMIT_SETTINGS, cfg.limits)):
        for _flag, env_name, attr, typ in group:
            value = getattr(args, attr, None) if args is not None else None
            if value is None and (ENV_PREFIX + env_name) in env:
                raw = env[ENV_PREFIX + env_name]
                try:
                    value = typ(raw)
                except ValueError:
                    raise SystemExit(f"{ENV_PREFIX}{env_name}={raw!r} is not a valid {typ.__name__}")
            if value is not None:
                setattr(target, attr, value)
                data_dir_explicit |= attr == "data_dir"
                db_path_explicit |= attr == "db_path"
    # A data dir given alone carries the database with it.
    if data_dir_explicit and not db_path_explicit:
        cfg.db_path = os.path.join(cfg.data_dir, "agents.sqlite")
    return cfg


__all__ = ["Config", "Limits", "add_arguments", "load_config", "settings_table"]
