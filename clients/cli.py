"""`seed-agents`: the console command (server, keys, agents, sessions, chat, tail).

Expected failures (server not running, bad key file, 401/404 answers) print one sentence on
stderr and exit 1; only a bug shows a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import warnings

from .commands import (
    agents,
    chat,
    completion,
    identities,
    keys,
    mcp,
    memory,
    providers,
    runs,
    send,
    sessions,
    signers,
    tail,
    triggers,
    verify,
)
from .commands.common import CliError, common_parser, explain, url_of
from .errors import AgentsError

PROG = "seed-agents"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Seed Agents: run the server, manage agents and sessions, chat.",
        epilog="Every subcommand takes --help, --url and --key.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # `serve` and --version are answered by server/console.py before this parser runs; they
    # are listed here so that they show up in --help.
    parser.add_argument("--version", action="store_true", help="print the version and the schema version")
    sub.add_parser("serve", help="run the server (see `seed-agents serve --help`)", add_help=False)
    sub.add_parser("import", help="bring a reference server's data into this server's store "
                                  "(see `seed-agents import --help`)", add_help=False)
    common = common_parser()
    for module in (keys, providers, agents, sessions, send, chat, tail, signers, memory, identities, triggers,
                   runs, verify, completion):
        module.register(sub, common)
    mcp.register(sub, common)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["serve"], ["import"], ["--version"]):
        print(f"{PROG}: `{argv[0]}` is answered by the installed `seed-agents` command "
              "(seed_agents.server.console), not by seed_agents.clients.cli alone", file=sys.stderr)
        return 2
    parser = build_parser()
    completion.autocomplete(parser)   # a shell asking for completions: answered, then exit
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        result = args.run(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CliError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.code
    except AgentsError as exc:
        # The URL the client dialled (an http:// --url is mapped to its WebSocket).
        print(f"{PROG}: {explain(exc, exc.url or url_of(args))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return getattr(args, "interrupt_status", 130)
    except BrokenPipeError:  # `seed-agents tail ... | head`: the reader left, nothing to say
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
