"""`providers set`, `providers login`, `providers list` and `providers delete`: a real model in one
command (`login`: a ChatGPT subscription instead of an API key).

The API key never travels on the command line (where shell history and `ps` would keep it): it
is read from a variable (`--api-key-env`) or a file (`--api-key-file`, `-` for stdin, or a
hidden prompt on a terminal), stored with `SetSecret` under `provider-NAME-api-key`, and the
provider names that secret in `secretRefs.apiKey`. Nothing here prints the key.

`--model` is stored as the provider's `defaultModel` (listed by ListModelProviders): each agent
still names its model, and `agents create --provider NAME` takes that one when given no
`--model`. The command ends with the `agents create` line that uses the provider.
"""
from __future__ import annotations

import asyncio
import getpass
import os
import sys
from pathlib import Path

from seed_agents.protocol.agent import providers as provider_table

from .. import actions
from ..errors import AgentsError
from .common import CliError, open_client, print_listing, say

TYPES = provider_table.ADDABLE_TYPES   # the provider table (protocol/agent/providers.py)
# Hosted services refuse anonymous calls: better said now than at the first message.
KEY_REQUIRED = provider_table.KEY_REQUIRED


def secret_name(provider: str) -> str:
    return f"provider-{provider}-api-key"


def read_api_key(args) -> str | None:
    if args.api_key_env:
        value = os.environ.get(args.api_key_env, "")
        if not value.strip():
            raise CliError(f"the variable {args.api_key_env} is not set or empty; export the API "
                           f"key in it first (e.g. `read -s {args.api_key_env}; export "
                           f"{args.api_key_env}`)", code=2)
        return value.strip()
    if args.api_key_file == "-":
        value = (getpass.getpass("API key (not shown): ") if sys.stdin.isatty()
                 else sys.stdin.readline())
    elif args.api_key_file:
        try:
            value = Path(args.api_key_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise CliError(f"cannot read the API key file {args.api_key_file}: {reason}", code=2) from None
    else:
        return None
    if not value.strip():
        raise CliError(f"the API key from {args.api_key_file} is empty", code=2)
    return value.strip()


async def set_(args) -> int:
    if args.type == "custom" and not args.base_url:
        raise CliError("--type custom needs --base-url URL (the server's OpenAI-compatible /v1 URL)",
                       code=2)
    key = read_api_key(args)
    if key is None and args.type in KEY_REQUIRED:
        raise CliError(f"--type {args.type} needs an API key: give --api-key-env VAR (a variable "
                       "holding it) or --api-key-file FILE (- reads it from stdin)", code=2)
    provider: dict = {"type": args.type}
    if args.base_url:
        provider["baseUrl"] = args.base_url
    if key is not None:
        provider["secretRefs"] = {"apiKey": secret_name(args.name)}
    if args.model:
        provider["defaultModel"] = args.model   # `agents create --provider NAME` defaults to it
    async with open_client(args) as client:
        # The provider first: a config the server refuses (a type it does not support) then
        # leaves no key behind.
        await client.set_model_provider(args.name, provider)
        if key is not None:
            await client.set_secret(secret_name(args.name), key.encode())
    stored = f"; its API key is stored as the secret {secret_name(args.name)}" if key else ""
    say(f"provider {args.name} ({args.type}) is set{stored}")
    if args.model:
        say("create an agent that uses it with:")
        print(f"seed-agents agents create --name NAME --provider {args.name} --model {args.model}")
    return 0


async def login(args) -> int:
    """`providers login NAME`: "Sign in with ChatGPT" (servers run with --subscription-auth). The
    URL goes to stdout; the redirect the browser ends on (http://localhost:1455/auth/callback?code=...)
    is read from stdin, so the tokens never pass through the command line."""
    async with open_client(args) as client:
        try:
            started = await client.call(actions.start_provider_oauth("openai"))
        except AgentsError as exc:
            if exc.status == 403:
                raise CliError("this server does not offer subscription sign-in (its operator can turn it on "
                               "with --subscription-auth)") from None
            raise
        login_id = started["loginId"]
        say("open this URL in a browser and sign in with your ChatGPT account:")
        print(started["authUrl"], flush=True)
        say("then paste the address your browser ended on (http://localhost:1455/auth/callback?code=...; "
            "the page itself may not load), or the code, and press Enter:")
        try:
            pasted = await asyncio.to_thread(_read_line)
        except (KeyboardInterrupt, asyncio.CancelledError):
            await client.call(actions.cancel_provider_oauth(login_id))
            raise
        if not pasted.strip():
            await client.call(actions.cancel_provider_oauth(login_id))
            raise CliError("nothing was pasted: the sign-in is canceled", code=1)
        try:
            await client.call(actions.submit_provider_oauth_code(login_id, pasted.strip()))
        except AgentsError as exc:
            raise CliError(f"the sign-in failed: {exc.message}") from None
        status = await client.call(actions.get_provider_oauth_status(login_id))
        if status.get("status") != "completed":
            raise CliError(f"the sign-in failed: {status.get('error', status.get('status'))}")
        provider: dict = {"type": "openai", "authMode": "subscription",
                          "secretRefs": {"oauth": status["secretName"]}}
        if args.model:
            provider["defaultModel"] = args.model
        await client.set_model_provider(args.name, provider)
    say(f"signed in: provider {args.name} uses your ChatGPT subscription (the tokens are stored encrypted "
        f"on the server as {status['secretName']})")
    if args.model:
        say("create an agent that uses it with:")
        print(f"seed-agents agents create --name NAME --provider {args.name} --model {args.model}")
    return 0


def _read_line() -> str:
    if sys.stdin.isatty():
        return getpass.getpass("redirect URL or code (not shown): ")
    return sys.stdin.readline(8192)


async def list_(args) -> int:
    async with open_client(args) as client:
        response = await client.list_model_providers()
    providers = response.get("providers", [])
    return print_listing(providers, args.json, ["NAME", "TYPE", "API KEY", "MODEL"],
                         lambda p: [str(p.get("name", "")), str(p.get("type", "")),
                                    _key_column(p), str(p.get("defaultModel", ""))])


def _key_column(p: dict) -> str:
    if p.get("authMode") == "subscription":   # `providers login`: no key, a ChatGPT sign-in
        return "subscription" if p.get("authStatus") == "ok" else "sign-in-expired"
    return "stored" if p.get("hasSecrets") else "none"


async def delete(args) -> int:
    async with open_client(args) as client:
        # Listed first only to word the answer: whether a stored key goes with it.
        listed = (await client.list_model_providers()).get("providers", [])
        had_key = any(p.get("name") == args.name and p.get("hasSecrets") for p in listed)
        try:
            await client.delete_model_provider(args.name)
        except AgentsError as exc:
            if exc.status == 404:
                raise CliError(f"you have no provider {args.name!r}; `seed-agents providers list` "
                               "shows yours") from None
            if exc.status == 400 and "built in" in exc.message:
                raise CliError(f"the provider {args.name!r} is built in and cannot be deleted") from None
            raise
    gone = (", and its stored API key with it (kept only while another provider names the same "
            "secret)" if had_key else "")
    say(f"provider {args.name} is deleted{gone}; agents that use it fail their turns until "
        f"`seed-agents providers set {args.name} ...` sets it again")
    return 0


def register(sub, common) -> None:
    providers = sub.add_parser("providers", help="set up real models (OpenAI, Anthropic, Ollama...)",
                               description="Model providers of your account: where agents send "
                                           "their turns, with the API key stored encrypted.")
    psub = providers.add_subparsers(dest="providers_command", metavar="{set,login,list,delete}", required=True)
    p = psub.add_parser("set", parents=[common], help="add or replace a provider",
                        description="Add or replace the provider NAME. The API key comes from a "
                                    "variable or a file, never from the command line, and is "
                                    f"stored encrypted as the secret {secret_name('NAME')}.")
    p.add_argument("name", metavar="NAME", help="a name for it, e.g. openai or local")
    p.add_argument("--type", required=True, choices=TYPES, metavar="TYPE",
                   help=f"one of {', '.join(TYPES)}")
    p.add_argument("--base-url", metavar="URL", default=None,
                   help="the API's base URL (default: the type's public URL; ollama: "
                        "http://localhost:11434/v1; required for custom)")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key-env", metavar="VAR", default=None,
                     help="read the API key from this environment variable")
    key.add_argument("--api-key-file", metavar="FILE", default=None,
                     help="read the API key from this file (- : stdin, or a hidden prompt)")
    p.add_argument("--model", metavar="M", default=None,
                   help="the provider's model: what `agents create --provider NAME` uses when it "
                        "is given no --model")
    p.set_defaults(run=set_)
    p = psub.add_parser("login", parents=[common], help="sign in with a ChatGPT subscription",
                        description="Sign in with ChatGPT (a server run with --subscription-auth): prints the "
                                    "URL to open, reads the address the browser ended on from stdin, and "
                                    "sets the provider NAME to use the subscription.")
    p.add_argument("name", metavar="NAME", help="a name for the provider, e.g. chatgpt")
    p.add_argument("--model", metavar="M", default=None,
                   help="the provider's model (e.g. gpt-5.4): what `agents create --provider NAME` uses")
    p.set_defaults(run=login)
    p = psub.add_parser("list", parents=[common], help="list your providers (never their keys)",
                        description="List your providers: name, type, and whether a key is "
                                    "stored, its model (the server never shows keys, URLs or secret names).")
    p.add_argument("--json", action="store_true", help="print the providers as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = psub.add_parser("delete", parents=[common], help="delete a provider",
                        description="Delete the provider NAME: its key "
                                    "secret goes too when no other provider uses it.")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(run=delete)
