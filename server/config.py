"""Server configuration: flags win over SEED_AGENTS_* variables, which win over defaults.

`SETTINGS` is the one table of everything settable from outside: the flags of
`seed-agents serve`, their variables, `--help`, and the configuration tables of README.md and
docs/operations.md (`python -m seed_agents.server.config --markdown` prints them, `--write-docs` puts them in
place; tests/test_config_docs.py fails when the docs differ). A new setting is a field below and
one row in `SETTINGS`.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from .providers.network import check_networks_value
from .database.url import StorageURL, StorageURLError, parse_storage_url, redact


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
    unverified_burst: int = 100       # frames failing verification before the socket closes 1008 (a tenth refills per second)
    connections_per_address: int = 256   # open connections (HTTP and WebSocket) from one client address
    probe_rate: float = 100.0         # GET probes (health, version, metrics, ...) per second per client address


@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 3050
    db_path: str = "./data/agents.sqlite"
    data_dir: str = "./data"
    storage_url: StorageURL | None = None  # when set, `sqlite:FILE`; it has set db_path
    # Start-up (docs/operations.md "Secrets key"): start even though the database's secrets were
    # sealed under another key; and where /metrics is served ("same" port, "off", or HOST:PORT).
    accept_new_secrets_key: bool = False
    metrics_listen: str = "same"
    clock_window_ms: int = 30_000
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    shutdown_timeout: float = 10.0
    slow_close_timeout: float = 35.0  # contract: wait at least 30 s for the closing handshake
    write_timeout: float = 30.0       # a WebSocket peer whose writes make no progress this long is dropped
    allowed_origins: str = ""         # browser origins that may use the server ("*": any; no Origin: always;
                                      # "": by listen address, server/transport/origins.py)
    # Providers (docs/operations.md "Providers"): timeouts, where provider URLs may connect
    # ("" = by listen address: loopback servers add loopback and private networks), and
    # whether hosted types may use a stored baseUrl instead of their public endpoint.
    provider_first_token_timeout: float = 60.0
    provider_idle_timeout: float = 60.0
    provider_networks: str = ""
    allow_provider_base_url: bool = False
    log_level: str = "INFO"
    turn_timings: bool = False   # time each turn's phases into /metrics (server/operations/turn_timing.py)
    log_format: str = "text"
    # HTTP (server/transport/httpconn.py): bounds on a stalled request, and on an idle keep-alive connection.
    http_header_timeout: float = 10.0   # first byte of a request to the end of its headers
    http_body_timeout: float = 30.0     # end of the headers to the end of the body
    http_idle_timeout: float = 60.0     # a keep-alive connection with no request in progress
    first_action_timeout: float = 30.0  # a WebSocket with no verified action this long after opening is closed
    # In-memory caches, each bounded in bytes (server/cache.py; metrics seed_agents_cache_*).
    history_cache_bytes: int = 64 << 20   # the runtime's per-session message histories
    prompt_cache_bytes: int = 16 << 20    # agents' system prompts as Markdown (GetSession, turns)
    owner_cache_bytes: int = 16 << 20     # each of: session owners, agent owners, registered signers
    replay_cache_bytes: int = 64 << 20    # v1 replay frames, derived once per stored event (server/live/replay_frames.py)
    # Runs on a shared store (PostgreSQL; server/runtime/leasing.py): how long a server's claim on
    # a run lasts unrenewed (renewed every third of it), and how often idle servers look for work.
    run_lease: float = 15.0
    run_poll_interval: float = 1.0
    # The Seed hypermedia server agents' identities are published to (None: created locally
    # only; server/hypermedia/identity_publish.py), and how long one publication may take.
    hm_server_url: str | None = "https://hyper.media"   # the public Seed gateway, as the reference
    hm_server_timeout: float = 15.0   # seed_agents.server.hypermedia.client.DEFAULT_TIMEOUT
    hm_publish_retry: float = 10.0    # the publication queue's first wait; doubled per failure, at most 1 h
    # Files (docs/operations.md "Files"): bytes per account (0: no quota), files per agent, the
    # largest file one answer carries whole (larger ones are read in ranges), and downloads.
    file_quota_bytes: int = 0
    memory_max_files: int = 10_000
    file_answer_bytes: int = 16 << 20
    download_max_bytes: int = 512 << 20
    # The tool loop (server/runtime/tool_loop.py; docs/operations.md "Tools and budgets"): each
    # budget ends a run with an error event when spent; a tool's output is cut to what the model
    # is fed; web pages are read up to a size; web_search needs a SearXNG.
    max_tool_steps: int = 50
    max_run_tokens: int = 2_000_000
    max_run_seconds: float = 900.0
    max_tool_output_chars: int = 40_000
    tool_timeout: float = 60.0
    # What one model step may send (server/providers/http_stream.py StreamLimits), and how large
    # one stored event may be (longer text is kept as a session attachment).
    max_step_output_chars: int = 2_000_000
    max_tool_calls_per_step: int = 256
    max_model_event_chars: int = 16 << 20
    max_event_bytes: int = 2 << 20
    tool_fetch_bytes: int = 5 << 20
    searxng_url: str = ""
    # Fair sharing (server/runtime/turns.py; docs/operations.md "Fair sharing"): runs one account
    # may have queued or running at once, runs in one delegation tree.
    max_runs_in_flight: int = 100
    max_tree_runs: int = 200
    # The web tools and downloads (server/tools/web.py, server/handlers/memory_download.py):
    # their own network policy ("" = public only, wherever the server listens), how many fetches
    # one account runs at once, and the longest one download may take.
    web_networks: str = ""
    web_fetches_per_account: int = 4
    download_timeout: float = 600.0
    session_title_generation: bool = True   # name provisionally titled sessions with a small model call
    code_exec: str = "bubblewrap"       # the code sandbox of `execute` and authored tools (server/sandbox/)
    exec_network: bool = False
    exec_timeout: float = 60.0
    exec_memory_bytes: int = 512 << 20
    exec_concurrency: int = 2
    # Workflows (script children, server/runtime/workflows.py): a slice's CPU between two awaits,
    # the engine's memory, and from how long on a sleep parks the run instead of holding it.
    workflow_fuel_ms: int = 2_000
    workflow_memory_bytes: int = 64 << 20
    workflow_park_after_ms: int = 60_000
    # Remote MCP servers (server/mcp/): how long one discovery or tool call may take.
    mcp_timeout: float = 30.0
    mcp_max_servers: int = 100        # per account
    mcp_max_tools: int = 1_000        # kept of one server's listing
    mcp_max_schema_bytes: int = 64 * 1024   # one tool's input schema (protocol.agent.tool_documents.MAX_SCHEMA_BYTES)
    # Triggers (server/triggers/): bounds per agent, history kept per trigger, webhook bounds,
    # the activity feed's polling, and the triggers' clock (test servers speed it up).
    trigger_max_per_agent: int = 100
    trigger_firings_per_hour: int = 120
    account_trigger_firings_per_hour: int = 600
    trigger_history: int = 200
    webhook_max_body: int = 64 * 1024
    webhook_rate_limit: float = 5.0
    activity_poll_interval: float = 30.0
    activity_page_size: int = 50
    activity_max_pages: int = 5
    trigger_clock_speed: float = 1.0
    trigger_clock_epoch_ms: int | None = None
    # Subscription sign-in (server/handlers/provider_oauth.py): off as in the reference; the
    # endpoints are the reference's public ones (tests point them at a fake on 127.0.0.1).
    subscription_auth: bool = False
    subscription_authorize_url: str = "https://auth.openai.com/oauth/authorize"
    subscription_token_url: str = "https://auth.openai.com/oauth/token"
    subscription_base_url: str = "https://chatgpt.com/backend-api"
    subscription_timeout: float = 30.0
    subscription_login_timeout: float = 600.0
    trigger_clock_offset_ms: int = 0
    trigger_clock: object = None   # tests only: a clock object (server/triggers/clock.py), not a setting
    rate_clock: Callable[[], float] | None = None   # tests only: every rate bucket's clock (server/ratelimit.py), not a setting
    rate_clock_speed: float = 1.0   # tests only (a child process's rate_clock): server/ratelimit.py scaled_clock
    limits: Limits = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.limits is None:
            self.limits = Limits()


class ConfigError(ValueError):
    """A configuration mistake, worded as one sentence for the person who made it."""


# -- value readers: text in, value out, or ValueError saying what is expected -----------------
def text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw


def port(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= 65535:
        raise ValueError("a port must be a whole number from 0 to 65535")
    return value


def count(raw: str) -> int:
    value = _int(raw)
    if value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


def rate(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("must be a number (e.g. 100 or 2.5)") from None
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a number above 0")
    return value


def _int(raw: str) -> int:
    try:
        return int(raw.strip().replace("_", ""))
    except ValueError:
        raise ValueError("must be a whole number") from None


def byte_count(raw: str) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError("must be a whole number of bytes, 0 or more")
    return value


def log_level(raw: str) -> str:
    value = raw.strip().upper()
    if value not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return value


def log_format(raw: str) -> str:
    value = raw.strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(f"must be one of {', '.join(LOG_FORMATS)}")
    return value


def storage_url(raw: str) -> StorageURL:
    """`sqlite:FILE` (also `sqlite:///abs/file`) or `postgresql://...`, read by the one parser
    (seed_agents.server.database.url). Errors never show a password."""
    try:
        return parse_storage_url(raw)
    except StorageURLError as exc:
        raise ValueError(str(exc)) from None


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def seconds(raw: str) -> float:
    return rate(raw)


def lease_seconds(raw: str) -> float:
    value = rate(raw)
    if not 1 <= value <= 300:
        raise ValueError("must be a number of seconds from 1 to 300")
    return value


def origins(raw: str) -> str:
    """`*`, or comma-separated origins as browsers send them (`scheme://host[:port]`, `file://`
    or `null`), kept in that normalized form."""
    value = raw.strip()
    if value == "*":
        return value
    parts = [p.strip().lower() for p in value.split(",") if p.strip()]
    parts = [p[:-1] if p.endswith("/") and not p.endswith("://") else p for p in parts]
    if not parts:
        raise ValueError("must be * or comma-separated origins (e.g. https://app.example,http://localhost:5173)")
    for part in parts:
        if part not in ("null", "file://") and not re.fullmatch(r"[a-z][a-z0-9+.-]*://[^/\s?#]+", part):
            raise ValueError(f"{part!r} is not an origin: scheme://host[:port], with no path")
    return ",".join(parts)


def metrics_listen(raw: str) -> str:
    """`same`, `off`, or HOST:PORT (`[::1]:9464` for an IPv6 address)."""
    value = raw.strip()
    if value.lower() in ("same", "off"):
        return value.lower()
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError("must be same, off, or HOST:PORT (e.g. 127.0.0.1:9464)")
    port(port_text)
    return value


def metrics_address(value: str) -> tuple[str, int]:
    """HOST:PORT of a `metrics_listen` value (brackets of an IPv6 address removed)."""
    host, _, port_text = value.rpartition(":")
    return host.strip("[]"), int(port_text)


def default_data_dir(cwd: str | None = None) -> str:
    """`./data` in a checkout of this repository (what `make run` uses), else the per-user data
    folder (platformdirs: `$XDG_DATA_HOME/seed-agents`, by default ~/.local/share/seed-agents),
    so a server started from any other folder finds the same database every time."""
    cwd = cwd or os.getcwd()
    try:
        with open(os.path.join(cwd, "pyproject.toml"), encoding="utf-8") as f:
            if 'name = "seed-agents"' in f.read(4096):
                return "./data"
    except OSError:
        pass
    import platformdirs

    return platformdirs.user_data_dir("seed-agents", appauthor=False)


def code_exec(raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("bubblewrap", "off"):
        raise ValueError("must be bubblewrap or off")
    return value


def provider_networks(raw: str) -> str:
    return check_networks_value(raw)


def web_networks(raw: str) -> str:
    return check_networks_value(raw)


def http_url(raw: str) -> str:
    """An http:// or https:// URL with a host, kept without a trailing slash."""
    value = raw.strip().rstrip("/")
    if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", value, re.I):
        raise ValueError("must be an http:// or https:// URL with a host (e.g. https://hyper.media)")
    return value


def hm_url(raw: str) -> str | None:
    """`--hm-server-url`: an http(s) URL, or '' for none (offline)."""
    return http_url(raw) if raw.strip() else None


def signed_ms(raw: str) -> int:
    return _int(raw)


def epoch_ms(raw: str) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError("must be Unix milliseconds (0 or more)")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
ENV_PREFIX = "SEED_AGENTS_"


@dataclass(frozen=True)
class Setting:
    flag: str | None           # None: a variable only
    env: str                   # after SEED_AGENTS_
    attr: str | None           # Config attribute; "limits.x" for Limits; None: read elsewhere
    read: Callable[[str], object]
    metavar: str
    help: str
    default: str | None = None  # shown instead of the attribute's value


# One row per setting, in the order of --help and the docs.
SETTINGS: list[Setting] = [
    Setting("--host", "HTTP_HOSTNAME", "host", text, "HOST", "address to listen on (0.0.0.0: every interface)"),
    Setting("--port", "HTTP_PORT", "port", port, "PORT", "TCP port of everything: `/api/message` (HTTP actions), `/agents/ws`, `/api/health`, `/api/version`, `/metrics`"),
    Setting("--data-dir", "DATA_DIR", "data_dir", text, "DIR", "agent state and the secrets key file", "`./data` in a checkout of this repository (`make run`), else `$XDG_DATA_HOME/seed-agents` (`~/.local/share/seed-agents`)"),
    Setting("--db-path", "DB_PATH", "db_path", text, "FILE", "the SQLite database", "`<data-dir>/agents.sqlite`"),
    Setting("--storage-url", "STORAGE_URL", "storage_url", storage_url, "URL", "storage as one URL: `sqlite:FILE` (the database file) or `postgresql://...` (several servers may share it; docs/operations.md)", "`sqlite:` + the database"),
    Setting(None, "SECRETS_KEY", None, text, "BASE64", "base64 of 32 bytes; encrypts stored secrets (AES-256-GCM)", "`<data-dir>/secrets.key`, created 0600 on first start"),
    Setting("--accept-new-secrets-key", "ACCEPT_NEW_SECRETS_KEY", "accept_new_secrets_key", boolean, "BOOL", "start even when the database's secrets were sealed under another secrets key (otherwise refused, exit 2); the database then records this key, and each provider key stored under the old one must be set again (`seed-agents providers set NAME ...`)"),
    Setting("--metrics-listen", "METRICS_LISTEN", "metrics_listen", metrics_listen, "WHERE", "where `/metrics` is served: `same` (the server's port), `off`, or `HOST:PORT` of its own (e.g. `127.0.0.1:9464`); a warning at start when it is reachable beyond loopback"),
    Setting("--log-level", "LOG_LEVEL", "log_level", log_level, "LEVEL", "DEBUG, INFO (one access line per action), WARNING or ERROR"),
    Setting("--turn-timings", "TURN_TIMINGS", "turn_timings", boolean, "BOOL", "time each MessageSession turn's phases on the server (accepted, claimed, provider, last token, durable, published) into `/metrics` as `seed_agents_turn_phase_seconds`; off, nothing is timed"),
    Setting("--log-format", "LOG_FORMAT", "log_format", log_format, "FORMAT", "`text`, or `json` (one JSON object per line)"),
    Setting("--max-frame-bytes", "MAX_FRAME_BYTES", "limits.max_frame", count, "BYTES", "largest envelope (larger is 413)"),
    Setting("--max-depth", "MAX_DEPTH", "limits.max_depth", count, "N", "deepest CBOR nesting (deeper is 400)"),
    Setting("--max-subscriptions", "MAX_SUBSCRIPTIONS", "limits.subs_per_socket", count, "N", "subscriptions per socket (more is 429)"),
    Setting("--max-sockets-per-account", "MAX_SOCKETS_PER_ACCOUNT", "limits.sockets_per_account", count, "N", "sockets per account (more are closed 1008)"),
    Setting("--max-connections", "MAX_CONNECTIONS", "limits.max_connections", count, "N", "WebSocket connections in all, and open HTTP connections in all, each (more are refused with HTTP 503)"),
    Setting("--rate-limit", "RATE_LIMIT", "limits.rate_per_second", rate, "PER_SECOND", "actions per second per account (more is 429)"),
    Setting("--rate-burst", "RATE_BURST", "limits.rate_burst", count, "N", "burst of actions above the rate"),
    Setting("--max-inflight", "MAX_INFLIGHT", "limits.inflight_per_socket", count, "N", "v2 requests running at once per socket"),
    Setting("--max-unverified", "MAX_UNVERIFIED", "limits.unverified_burst", count, "N", "frames that fail verification a socket may send (a tenth of that refills per second) before it is closed 1008"),
    Setting("--outbound-queue-bytes", "OUTBOUND_QUEUE_BYTES", "limits.outbound_queue_bytes", count, "BYTES", "how far a subscriber may fall behind before it is cut off (close 1013; it resumes)"),
    Setting("--provider-first-token-timeout", "PROVIDER_FIRST_TOKEN_TIMEOUT", "provider_first_token_timeout", seconds, "SECONDS", "a provider turn fails when no first token came within this time"),
    Setting("--provider-idle-timeout", "PROVIDER_IDLE_TIMEOUT", "provider_idle_timeout", seconds, "SECONDS", "a provider turn fails when its stream is silent this long"),
    Setting("--provider-networks", "PROVIDER_NETWORKS", "provider_networks", provider_networks, "NETWORKS", "where provider URLs may connect: `public`, `loopback`, `private`, `link-local`, `any` or CIDRs, comma-separated (checked after DNS, on every connection)", "`public,loopback,private` on a loopback listen address, else `public`"),
    Setting("--allow-provider-base-url", "ALLOW_PROVIDER_BASE_URL", "allow_provider_base_url", boolean, "BOOL", "let hosted provider types (openai, anthropic, ...) use a stored `baseUrl` instead of their public endpoint"),
    Setting("--http-header-timeout", "HTTP_HEADER_TIMEOUT", "http_header_timeout", seconds, "SECONDS", "an HTTP request whose headers take longer is answered 408 and closed"),
    Setting("--http-body-timeout", "HTTP_BODY_TIMEOUT", "http_body_timeout", seconds, "SECONDS", "an HTTP request whose body takes longer after its headers is answered 408 and closed"),
    Setting("--http-idle-timeout", "HTTP_IDLE_TIMEOUT", "http_idle_timeout", seconds, "SECONDS", "a keep-alive HTTP connection with no request this long is closed"),
    Setting("--max-connections-per-address", "MAX_CONNECTIONS_PER_ADDRESS", "limits.connections_per_address", count, "N", "open connections (HTTP and WebSocket) from one client address; more are refused with HTTP 503 (behind a reverse proxy every client has the proxy's address: raise it)"),
    Setting("--probe-rate", "PROBE_RATE", "limits.probe_rate", rate, "PER_SECOND", "GET requests that are not actions (health, version, metrics, ...) per second per client address, bursts of twice that; each connection also 50/s, bursts of 100 (more is 429 and the connection closes)"),
    Setting("--first-action-timeout", "FIRST_ACTION_TIMEOUT", "first_action_timeout", seconds, "SECONDS", "a WebSocket that has sent no verified action this long after opening is closed (1008)"),
    Setting("--history-cache-bytes", "HISTORY_CACHE_BYTES", "history_cache_bytes", count, "BYTES", "memory for the sessions' message histories the runtime keeps between turns (least recently used dropped; a dropped one is read again from the database)"),
    Setting("--prompt-cache-bytes", "PROMPT_CACHE_BYTES", "prompt_cache_bytes", count, "BYTES", "memory for agents' system prompts as Markdown (least recently used dropped)"),
    Setting("--owner-cache-bytes", "OWNER_CACHE_BYTES", "owner_cache_bytes", count, "BYTES", "memory for each of the caches of session owners, agent owners and registered signers (least recently used dropped)"),
    Setting("--replay-cache-bytes", "REPLAY_CACHE_BYTES", "replay_cache_bytes", byte_count, "BYTES", "memory for the JSON frames of replayed events, derived once per stored event for v1 (desktop) sockets (least recently replayed sessions dropped; 0 keeps none)"),
    Setting("--run-lease", "RUN_LEASE", "run_lease", lease_seconds, "SECONDS", "with a shared (PostgreSQL) store: a server holds a run it executes for this long, renewing it every third of it; the runs of a server that died go back to the queue when it runs out"),
    Setting("--run-poll-interval", "RUN_POLL_INTERVAL", "run_poll_interval", seconds, "SECONDS", "with a shared (PostgreSQL) store: how often a server looks for queued runs (and for expired leases) besides when it queues a run itself"),
    Setting("--mcp-timeout", "MCP_TIMEOUT", "mcp_timeout", seconds, "SECONDS", "a remote MCP server's discovery (SetMcpServer, RefreshMcpServer: fetching its listing and checking it) or tool call fails when it takes longer (calls also run under --provider-networks)"),
    Setting("--mcp-max-servers", "MCP_MAX_SERVERS", "mcp_max_servers", count, "N", "remote MCP servers one account may have (SetMcpServer of a new name past it is 409)"),
    Setting("--mcp-max-tools", "MCP_MAX_TOOLS", "mcp_max_tools", count, "N", "tools kept of one MCP server's listing; the rest are left out (and counted in its `status.skipped`)"),
    Setting("--mcp-max-schema-bytes", "MCP_MAX_SCHEMA_BYTES", "mcp_max_schema_bytes", count, "BYTES", "an MCP tool whose input schema is larger than this (as DAG-CBOR; at most 65536) is left out of its server's listing (counted in `status.skipped`)"),
    Setting("--clock-window-ms", "CLOCK_WINDOW_MS", "clock_window_ms", count, "MS", "allowed clock difference of a signed action, in milliseconds"),
    Setting("--ping-interval", "PING_INTERVAL", "ping_interval", rate, "SECONDS", "seconds between WebSocket pings"),
    Setting("--write-timeout", "WRITE_TIMEOUT", "write_timeout", seconds, "SECONDS", "a WebSocket peer or HTTP client whose writes (our frames, pongs, pings, answers) make no progress this long is dropped"),
    Setting("--allowed-origins", "ALLOWED_ORIGINS", "allowed_origins", origins, "ORIGINS", "browser origins that may open the WebSocket and POST actions: `*` (any), or comma-separated `scheme://host[:port]`; requests without an Origin header (scripts, the CLI) are always allowed; others get 403, with CORS answers that name no origin", "the Seed desktop's own (`http://localhost:17654` to `http://localhost:17664`, `http://localhost:5173`, `file://`) on a loopback listen address, else `*`"),
    Setting("--hm-server-url", "HM_SERVER_URL", "hm_server_url", hm_url, "URL", "the Seed hypermedia server agents read from and publish to (`POST {url}/api/PublishBlobs`): `CreateSigningIdentity` publishes the new account's profile and home document, a rename or an icon republishes the profile, `hm://` and `ipfs://` reads and writes, `search` and activity triggers go there; `''` runs offline (identities are created locally and nothing is published); an unreachable server is said once at start and in health, and the server serves at once", "`https://hyper.media` (the public Seed gateway, as the reference)"),
    Setting("--hm-server-timeout", "HM_SERVER_TIMEOUT", "hm_server_timeout", seconds, "SECONDS", "the longest one exchange with the HM server may take (connect, send, answer); a publication that takes longer is stored and queued (`--hm-publish-retry`)"),
    Setting("--hm-publish-retry", "HM_PUBLISH_RETRY", "hm_publish_retry", seconds, "SECONDS", "a publication the HM server did not take (no answer, a timeout, a 5xx: an identity's account or profile, an agent's document) is kept in the store and sent again by whichever server of a cluster takes it first: after this long, then twice as long after each failure, at most an hour; a refusal (4xx) is kept as failed and not retried"),
    Setting("--file-quota-bytes", "FILE_QUOTA_BYTES", "file_quota_bytes", byte_count, "BYTES", "bytes of files (agent memory, session attachments, uploads in progress) one account may hold; 0: no quota (more is 413)"),
    Setting("--memory-max-files", "MEMORY_MAX_FILES", "memory_max_files", count, "N", "files in one agent's memory (more is 413)"),
    Setting("--file-answer-bytes", "FILE_ANSWER_BYTES", "file_answer_bytes", count, "BYTES", "largest file (or range) ReadAgentMemoryFile and ReadSessionAttachment return in one answer; larger files are read in ranges (offset, length)"),
    Setting("--download-max-bytes", "DOWNLOAD_MAX_BYTES", "download_max_bytes", count, "BYTES", "largest file DownloadAgentMemoryFile fetches (larger is 413, nothing kept)"),
    Setting("--max-tool-steps", "MAX_TOOL_STEPS", "max_tool_steps", count, "N", "a run whose model asks for more tool steps (model replies with tool calls) than this fails with an error event"),
    Setting("--max-run-tokens", "MAX_RUN_TOKENS", "max_run_tokens", count, "TOKENS", "a run whose model steps have used more tokens (input + output, all steps; the provider's figures, or our estimate of bytes / 4 when they are missing or implausible) than this fails with an error event before its next step; a delegation tree shares its root's"),
    Setting("--max-run-seconds", "MAX_RUN_SECONDS", "max_run_seconds", rate, "SECONDS", "a run still working after this long (model steps and tools together) is stopped and fails with an error event"),
    Setting("--max-tool-output-chars", "MAX_TOOL_OUTPUT_CHARS", "max_tool_output_chars", count, "CHARS", "a tool result fed back to the model (and recorded) is cut to this many characters, with a note saying what was cut"),
    Setting("--max-step-output-chars", "MAX_STEP_OUTPUT_CHARS", "max_step_output_chars", count, "CHARS", "a model step that streams more characters than this (its text, reasoning and tool-call arguments together) is stopped, and the run fails with an error event"),
    Setting("--max-tool-calls-per-step", "MAX_TOOL_CALLS_PER_STEP", "max_tool_calls_per_step", count, "N", "a model step that asks for more tool calls than this is stopped before any of them runs, and the run fails with an error event (within it, the first 32 calls of a step run and the rest are answered with an error)"),
    Setting("--max-model-event-chars", "MAX_MODEL_EVENT_CHARS", "max_model_event_chars", count, "CHARS", "a model provider's stream line, or one event's data lines together, longer than this fails the run with an error event (nothing past it is read)"),
    Setting("--max-event-bytes", "MAX_EVENT_BYTES", "max_event_bytes", count, "BYTES", "largest event a session's log stores: a longer message is stored as a session attachment (`ReadSessionAttachment`), and its event keeps the beginning of its text and a reference"),
    Setting("--tool-timeout", "TOOL_TIMEOUT", "tool_timeout", rate, "SECONDS", "a tool call still running after this long is abandoned and answered with an error (the run goes on)"),
    Setting("--tool-fetch-bytes", "TOOL_FETCH_BYTES", "tool_fetch_bytes", count, "BYTES", "a web page an agent reads is downloaded up to this many bytes; the rest is not read"),
    Setting("--searxng-url", "SEARXNG_URL", "searxng_url", http_url, "URL", "the SearXNG instance (JSON API) behind the agents' `web_search` tool; unset: `web_search` is not offered", "unset"),
    Setting("--max-runs-in-flight", "MAX_RUNS_IN_FLIGHT", "max_runs_in_flight", count, "N", "runs one account may have queued or running at once, over all its agents (MessageSession, RetrySession, trigger firings and delegated children alike; a parked run is not counted); past it a message is answered 429, a trigger firing is recorded as skipped and a delegate call gets an error"),
    Setting("--max-tree-runs", "MAX_TREE_RUNS", "max_tree_runs", count, "N", "runs in one delegation tree, its root included; a delegate call past it gets an error the model reads"),
    Setting("--web-networks", "WEB_NETWORKS", "web_networks", web_networks, "NETWORKS", "where the agents' web tools (`read https://…`, `navigate`, `write … fromUrl`) and DownloadAgentMemoryFile may connect, redirects included: the terms of `--provider-networks` (checked after DNS, on every connection); providers keep theirs", "`public`, wherever the server listens"),
    Setting("--web-fetches-per-account", "WEB_FETCHES_PER_ACCOUNT", "web_fetches_per_account", count, "N", "web pages and downloads one account fetches at once; more wait their turn (within their deadline), so one account's slow pages never delay another's"),
    Setting("--download-timeout", "DOWNLOAD_TIMEOUT", "download_timeout", seconds, "SECONDS", "the longest one DownloadAgentMemoryFile may take, from its first connection to its last byte (later is 502, nothing kept)"),
    Setting("--session-title-generation", "SESSION_TITLE_GENERATION", "session_title_generation", boolean, "BOOL", "when a turn ends on a session still titled from its first line, ask the agent's model once for a title and a description (never over a title the user typed)"),
    Setting("--code-exec", "CODE_EXEC", "code_exec", code_exec, "BACKEND", "the code sandbox of `execute` and authored tools: `bubblewrap` (Linux namespaces; offered when its self-check at start passes, see /api/health codeExec) or `off`"),
    Setting("--exec-network", "EXEC_NETWORK", "exec_network", boolean, "BOOL", "let sandboxed code open outbound connections, through a proxy the server runs for each run, under `--web-networks` (public only by default) and bounded in bytes and connections per run"),
    Setting("--workflow-fuel-ms", "WORKFLOW_FUEL_MS", "workflow_fuel_ms", count, "MS", "CPU a workflow (a script child) may use between two awaited `ctx` calls; past it the run fails `fuel-exhausted`"),
    Setting("--workflow-memory-bytes", "WORKFLOW_MEMORY_BYTES", "workflow_memory_bytes", byte_count, "BYTES", "memory of one workflow's JavaScript engine; past it the run fails `memory-cap`"),
    Setting("--workflow-park-after-ms", "WORKFLOW_PARK_AFTER_MS", "workflow_park_after_ms", count, "MS", "a workflow's `ctx.sleep` of at least this long parks the run (no worker held; a timer wakes it, on any server) instead of keeping its engine in memory"),
    Setting("--exec-timeout", "EXEC_TIMEOUT", "exec_timeout", seconds, "SECONDS", "an `execute` call's time when it names none (it may ask for 1 to 300); also its CPU seconds per process"),
    Setting("--exec-memory-bytes", "EXEC_MEMORY_BYTES", "exec_memory_bytes", byte_count, "BYTES", "memory of each process in the sandbox (address space; JavaScript: its heap)"),
    Setting("--exec-concurrency", "EXEC_CONCURRENCY", "exec_concurrency", count, "N", "sandboxes running at once on this server; more calls wait for a slot"),
    Setting("--subscription-auth", "SUBSCRIPTION_AUTH", "subscription_auth", boolean, "BOOL", "offer \"Sign in with ChatGPT\" (StartProviderOAuth and its three companions; the tokens are kept sealed as the secret `openai-subscription-oauth`); health says it as `subscriptionAuth`"),
    Setting("--subscription-authorize-url", "SUBSCRIPTION_AUTHORIZE_URL", "subscription_authorize_url", http_url, "URL", "the OAuth authorization endpoint the sign-in URL points the browser at"),
    Setting("--subscription-token-url", "SUBSCRIPTION_TOKEN_URL", "subscription_token_url", http_url, "URL", "the OAuth token endpoint codes are traded at and tokens refreshed at (through the `--provider-networks` policy)"),
    Setting("--subscription-base-url", "SUBSCRIPTION_BASE_URL", "subscription_base_url", http_url, "URL", "the ChatGPT backend `authMode: 'subscription'` providers' turns go to (`POST {url}/codex/responses`, the Responses API over SSE)"),
    Setting("--subscription-timeout", "SUBSCRIPTION_TIMEOUT", "subscription_timeout", seconds, "SECONDS", "the longest one call to the token endpoint may take (its answer is read up to 64 KiB)"),
    Setting("--subscription-login-timeout", "SUBSCRIPTION_LOGIN_TIMEOUT", "subscription_login_timeout", seconds, "SECONDS", "how long a started sign-in waits for its code before it fails; a finished one stays readable as long again"),
    Setting("--trigger-max-per-agent", "TRIGGER_MAX_PER_AGENT", "trigger_max_per_agent", count, "N", "triggers one agent may have (more is 409)"),
    Setting("--trigger-firings-per-hour", "TRIGGER_FIRINGS_PER_HOUR", "trigger_firings_per_hour", count, "N", "trigger firings per agent per hour that start work; past it a firing is recorded as skipped"),
    Setting("--account-trigger-firings-per-hour", "ACCOUNT_TRIGGER_FIRINGS_PER_HOUR", "account_trigger_firings_per_hour", count, "N", "trigger firings per account per hour that start work, over all its agents; past it a firing is recorded as skipped"),
    Setting("--trigger-history", "TRIGGER_HISTORY", "trigger_history", count, "N", "firings kept per trigger (older ones are pruned; a pruned webhook Idempotency-Key can be used again)"),
    Setting("--webhook-max-body", "WEBHOOK_MAX_BODY", "webhook_max_body", count, "BYTES", "largest webhook body (`POST /agents/hooks/<triggerId>`; larger is 413)"),
    Setting("--webhook-rate-limit", "WEBHOOK_RATE_LIMIT", "webhook_rate_limit", rate, "PER_SECOND", "webhook calls per second from one client address (a burst of four times that; more is 429)"),
    Setting("--activity-poll-interval", "ACTIVITY_POLL_INTERVAL", "activity_poll_interval", seconds, "SECONDS", "how often the HM server's activity feed is read for accounts with activity triggers"),
    Setting("--activity-page-size", "ACTIVITY_PAGE_SIZE", "activity_page_size", count, "N", "events asked per activity feed page"),
    Setting("--activity-max-pages", "ACTIVITY_MAX_PAGES", "activity_max_pages", count, "N", "activity feed pages read per account per poll"),
    Setting("--trigger-clock-speed", "TRIGGER_CLOCK_SPEED", "trigger_clock_speed", rate, "FACTOR", "tests only: the triggers' clock runs this many times faster than the wall clock"),
    Setting("--trigger-clock-epoch-ms", "TRIGGER_CLOCK_EPOCH_MS", "trigger_clock_epoch_ms", epoch_ms, "MS", "tests only: when the triggers' sped-up clock equals the wall clock (give several servers the same one)", "the server's start"),
    Setting("--trigger-clock-offset-ms", "TRIGGER_CLOCK_OFFSET_MS", "trigger_clock_offset_ms", signed_ms, "MS", "tests only: shifts the triggers' clock by this many milliseconds"),
    Setting("--rate-clock-speed", "RATE_CLOCK_SPEED", "rate_clock_speed", rate, "FACTOR", "tests only: every rate bucket's clock (--rate-limit, --probe-rate, --max-unverified) runs this many times as fast as the wall clock; below 1 a bucket refills that much slower, so what a burst gets does not depend on how fast a loaded machine sends it"),
]


def _target(cfg: Config, attr: str):
    return (cfg.limits, attr[7:]) if attr.startswith("limits.") else (cfg, attr)


def default_text(setting: Setting) -> str:
    if setting.default is not None:
        return setting.default
    obj, name = _target(Config(), setting.attr or "")
    value = getattr(obj, name)
    if isinstance(value, bool):
        return str(value).lower()   # what the flag takes: true / false
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for s in SETTINGS:
        if s.flag is None:
            continue
        default = default_text(s).replace("`", "")
        # Read as text here and checked in load_config, so a flag and its variable get the
        # same one-sentence refusal.
        parser.add_argument(s.flag, dest=s.attr.replace(".", "__"), metavar=s.metavar, default=None,
                            help=f"{s.help.replace('`', '')} (default {default}; "
                                 f"env {ENV_PREFIX}{s.env})".replace("%", "%%"))


def load_config(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The configuration, or ConfigError naming the flag or variable that is wrong."""
    env = os.environ if env is None else env
    cfg = Config()
    given: set[str] = set()
    for s in SETTINGS:
        if s.attr is None:
            continue
        raw = getattr(args, s.attr.replace(".", "__"), None) if args is not None else None
        source = f"{s.flag} {raw!r}"
        if raw is None and (ENV_PREFIX + s.env) in env:
            raw = env[ENV_PREFIX + s.env]
            source = f"{ENV_PREFIX}{s.env}={raw!r}"
        if raw is None:
            continue
        if not isinstance(raw, str):   # a value set by a program, already typed
            value = raw
        else:
            try:
                value = s.read(raw)
            except ValueError as exc:
                if s.attr == "storage_url":
                    source = source.replace(repr(raw), repr(redact(raw)))
                raise ConfigError(f"{source}: {exc}") from None
        obj, name = _target(cfg, s.attr)
        setattr(obj, name, value)
        given.add(s.attr)
    if cfg.storage_url is not None and cfg.storage_url.is_postgresql:
        if "db_path" in given:
            raise ConfigError("the storage URL names a PostgreSQL database and --db-path a SQLite file; "
                              "give one of --storage-url and --db-path")
    elif cfg.storage_url is not None:
        db_path = cfg.storage_url.path
        if "db_path" in given and os.path.abspath(cfg.db_path) != os.path.abspath(db_path):
            raise ConfigError(f"the storage URL names {db_path} and the db path {cfg.db_path}; "
                              "give one of --storage-url and --db-path")
        cfg.db_path, given = db_path, given | {"db_path"}
    if "data_dir" not in given:
        cfg.data_dir = default_data_dir()
    # The database lives in the data dir unless it was named.
    if "db_path" not in given:
        cfg.db_path = os.path.join(cfg.data_dir, "agents.sqlite")
    return cfg


# -- the docs -----------------------------------------------------------------------------------
BEGIN = "<!-- settings table: generated by `python -m seed_agents.server.config --write-docs`; do not edit -->"
END = "<!-- end of settings table -->"
DOCS = ("README.md", "docs/operations.md")


def markdown_table() -> str:
    def code(s: str) -> str:
        return s if "`" in s else f"`{s}`"

    lines = ["| flag | environment variable | default | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        flag = f"`{s.flag} {s.metavar}`" if s.flag else ""
        lines.append(f"| {flag} | `{ENV_PREFIX}{s.env}` | {code(default_text(s))} | {s.help} |")
    return "\n".join(lines)


def docs_with_table(doc: str) -> str:
    """`doc` with the text between the markers replaced by the generated table."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        raise ValueError("the settings table markers are missing")
    return pattern.sub(lambda _m: f"{BEGIN}\n{markdown_table()}\n{END}", doc, count=1)


def write_docs(root: Path) -> list[str]:
    changed = []
    for rel in DOCS:
        path = root / rel
        before = path.read_text(encoding="utf-8")
        after = docs_with_table(before)
        if after != before:
            path.write_text(after, encoding="utf-8")
            changed.append(rel)
    return changed


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m seed_agents.server.config",
                                     description="Print or refresh the settings table of the docs.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print the table")
    group.add_argument("--write-docs", action="store_true", help=f"update {' and '.join(DOCS)}")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown_table())
        return 0
    changed = write_docs(Path(__file__).resolve().parents[1])
    print("updated " + ", ".join(changed) if changed else "the docs are up to date")
    return 0


__all__ = ["Config", "ConfigError", "Limits", "SETTINGS", "Setting", "add_arguments", "load_config",
           "markdown_table"]

if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
