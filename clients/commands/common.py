"""What every subcommand shares: --url and --key, opening a client, and turning failures into
sentences a person can act on (no tracebacks for expected failures)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from seed_agents.protocol.wire.principals import principal_from_string

from ..client import DEFAULT_URL, AgentsClient
from ..errors import AgentsError
from ..keyfile import ENV_KEY, KeyFileError, read_key, resolve_key_path
from ..render import as_json, table

ENV_URL = "SEED_AGENTS_URL"
ENV_ACCOUNT = "SEED_AGENTS_ACCOUNT"


class CliError(Exception):
    """A failure the person can fix; printed as `seed-agents: <message>`, exit `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=None,
                        help=f"the server: its WebSocket URL, or the Seed desktop's http://HOST:PORT "
                             f"(env {ENV_URL}, default {DEFAULT_URL})")
    common.add_argument("--key", default=None,
                        help=f"key file (env {ENV_KEY}, default ~/.config/seed-agents/key.json)")
    common.add_argument("--account", default=None, metavar="ID",
                        help=f"act for this account (z6Mk...) as its registered signer (see "
                             f"`signers register`; env {ENV_ACCOUNT}, default the key's own)")
    return common


def url_of(args: argparse.Namespace) -> str:
    return args.url or os.environ.get(ENV_URL) or DEFAULT_URL


def checked_url(args: argparse.Namespace) -> str:
    """The server's WebSocket URL, or CliError when it cannot be one (before any network
    traffic). The Seed desktop's URL (`http://HOST:PORT`) is accepted and mapped to its
    WebSocket, `ws://HOST:PORT/agents/ws`: every CLI command works over it, and a person who
    pasted the desktop's URL meant that server."""
    url = url_of(args)
    parts = urlsplit(url) if "://" in url else None
    scheme = parts.scheme.lower() if parts else ""
    if scheme in ("http", "https") and parts.netloc:
        return websocket_url(parts)
    if scheme not in ("ws", "wss") or not parts.netloc:
        rest = url.split("://", 1)[1] if "://" in url else url
        example = "ws://" + (rest.split("/", 1)[0] or "127.0.0.1:3050") + "/agents/ws"
        raise CliError(f"the server URL {url!r} needs ws:// or wss:// (e.g. {example}), or the "
                       f"Seed desktop's http://HOST:PORT; set it with --url or {ENV_URL}")
    return url


# The paths of the server's HTTP endpoints a pasted URL may end with (as the HTTP client strips).
_HTTP_SUFFIXES = ("/api/message", "/agents/api/message", "/agents/ws", "/agents")


def websocket_url(parts) -> str:
    """http://HOST:PORT[/prefix] -> ws://HOST:PORT[/prefix]/agents/ws (https -> wss)."""
    path = parts.path.rstrip("/")
    for suffix in _HTTP_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    scheme = "wss" if parts.scheme.lower() == "https" else "ws"
    return f"{scheme}://{parts.netloc}{path}/agents/ws"


def keypair_of(args: argparse.Namespace):
    try:
        return read_key(resolve_key_path(args.key))
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


@asynccontextmanager
async def open_client(args: argparse.Namespace, keypair=None, **options):
    keypair = keypair or keypair_of(args)
    account = getattr(args, "account", None) or os.environ.get(ENV_ACCOUNT) or None
    if account is not None:
        try:
            principal_from_string(account)
        except Exception as exc:  # noqa: BLE001 - any decoding fault is the same mistake
            raise CliError(f"--account {account!r} is not an account id (z6Mk...): {exc}", code=2) from None
        options["account"] = account
    async with AgentsClient.connect(checked_url(args), keypair, **options) as client:
        yield client


def explain(err: AgentsError, url: str) -> str:
    if err.status == 0 and err.reason == "unreachable":
        return unreachable(err, url)
    if err.status == 0:
        return err.message
    if err.status == 401:
        return (f"the server refused the signature ({err.message}). Check that this device's clock "
                "is right (it must be within 30 s of the server's) and that --key / SEED_AGENTS_KEY "
                "names the right key file.")
    if err.status == 404:
        return (f"{err.message}: nothing this account owns or shares has that id (the listings show "
                "what it has; --account acts for another account)")
    if err.status == 403:
        return f"not allowed: {err.message}"
    if err.status == 429:
        return f"the server is rate limiting this account: {err.message}; try again shortly"
    return f"the server answered {err.status}: {err.message}"


def unreachable(err: AgentsError, url: str) -> str:
    parts = urlsplit(url)
    where = parts.netloc or url
    cause = err.cause or ""
    if cause == "refused":
        return (f"nothing listens at {where} (connection refused): start the server with "
                f"`make run` or `seed-agents serve`, or check the port in --url / {ENV_URL}")
    if cause == "unknown-host":
        return (f"unknown host {parts.hostname!r} in {url}: check the host name in --url / "
                f"{ENV_URL} (the local server is ws://127.0.0.1:3050/agents/ws)")
    if cause == "http-404":
        return (f"{url} is not a Seed Agents server (HTTP 404 at {parts.path or '/'}): the "
                f"server's WebSocket is at the path /agents/ws, e.g. ws://{where}/agents/ws")
    if cause.startswith("http-"):
        return (f"{url} answered HTTP {cause[5:]} instead of opening a WebSocket: is it a Seed "
                f"Agents server? its WebSocket is at ws://HOST:PORT/agents/ws")
    if cause == "subprotocol":
        return (f"{url} speaks WebSocket but not the Seed Agents protocol (seed-agents.v2): "
                f"check that --url points at a Seed Agents server")
    if cause == "tls-plain":
        return (f"{where} speaks plain HTTP, not TLS (https:// / wss://): use http://{where} "
                f"(or ws://{where}/agents/ws) in --url / {ENV_URL}")
    if cause == "timeout":
        return (f"no answer from {where} in time: check the host and port in --url, and that no "
                f"firewall is in the way")
    return (f"cannot reach the Seed Agents server at {url} ({err.message.rsplit('(', 1)[-1].rstrip(')')}): "
            "is it running? start it with `make run` or `seed-agents serve`")


def say(message: str) -> None:
    """A note for the person, on stderr so stdout stays clean for scripts."""
    print(message, file=sys.stderr, flush=True)


def print_listing(items: list[dict], wanted_json: bool, headers: list[str], row: Callable[[dict], list[str]],
                  empty: str | None = None) -> int:
    """A `list` command's output: the items as the server gave them with --json; else the hint
    `empty` (on stderr) when there are none, or a table with a header row."""
    if wanted_json:
        print(as_json(items))
    elif not items and empty is not None:
        say(empty)
    else:
        print(table(headers, [row(item) for item in items]))
    return 0
