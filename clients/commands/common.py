"""What every subcommand shares: --url and --key, opening a client, and turning failures into
sentences a person can act on (no tracebacks for expected failures)."""
from __future__ import annotations

import argparse
import os
import sys
from contextlib import asynccontextmanager

from clients.client import DEFAULT_URL, AgentsClient
from clients.errors import AgentsError
from clients.keyfile import ENV_KEY, KeyFileError, read_key, resolve_key_path

ENV_URL = "SEED_AGENTS_URL"


class CliError(Exception):
    """A failure the person can fix; printed as `seed-agents: <message>`, exit `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=None,
                        help=f"server WebSocket URL (env {ENV_URL}, default {DEFAULT_URL})")
    common.add_argument("--key", default=None,
                        help=f"key file (env {ENV_KEY}, default ~/.config/seed-agents/key.json)")
    return common


def url_of(args: argparse.Namespace) -> str:
    return args.url or os.environ.get(ENV_URL) or DEFAULT_URL


def keypair_of(args: argparse.Namespace):
    try:
        return read_key(resolve_key_path(args.key))
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


@asynccontextmanager
async def open_client(args: argparse.Namespace, keypair=None, **options):
    keypair = keypair or keypair_of(args)
    async with AgentsClient.connect(url_of(args), keypair, **options) as client:
        yield client


def explain(err: AgentsError, url: str) -> str:
    if err.status == 0 and err.reason == "unreachable":
        return (f"cannot reach the Seed Agents server at {url} — is it running? "
                "start it with `make run` or `seed-agents serve`")
    if err.status == 0:
        return err.message
    if err.status == 401:
        return (f"the server refused the signature ({err.message}). Check that this device's clock "
                "is right (it must be within 30 s of the server's) and that --key / SEED_AGENTS_KEY "
                "names the right key file.")
    if err.status == 404:
        return f"{err.message} (check the id, and that this is the key that created it)"
    if err.status == 403:
        return f"not allowed: {err.message}"
    if err.status == 429:
        return f"the server is rate limiting this account: {err.message}; try again shortly"
    return f"the server answered {err.status}: {err.message}"


def say(message: str) -> None:
    """A note for the person, on stderr so stdout stays clean for scripts."""
    print(message, file=sys.stderr, flush=True)
