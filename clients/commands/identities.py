"""`identities list/create/import/rename/delete`: the Seed account keys the server holds for your
agents (signing identities). An agent signs with those its definition names (`signingKey`).

A seed to import never travels on the command line (shell history, `ps`): it is read from a
file (`--seed-file`, `-` for stdin) holding the 32 bytes raw, or as 64 hex digits, or as base64.
"""
from __future__ import annotations

import base64
import binascii
import mimetypes
import sys
import uuid
from pathlib import Path

from .common import CliError, open_client, print_listing, say
from .resolve import agent_id

SEED_SIZE = 32


def identity_line(identity: dict) -> str:
    where = identity.get("serverUrl") or "not published"
    return (f"{identity.get('name')}  {identity.get('accountId', '')}  "
            f"{identity.get('label', '')!s:<24}  {where}")


def read_seed(path: str) -> bytes:
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read the seed file {path}: {exc.strerror or exc}", code=2) from None
    if len(raw) == SEED_SIZE:
        return raw
    text = raw.strip()
    for decode in (bytes.fromhex, lambda t: base64.b64decode(t, validate=True)):
        try:
            seed = decode(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError, binascii.Error):
            continue
        if len(seed) == SEED_SIZE:
            return seed
    raise CliError(f"the seed file {path} must hold a {SEED_SIZE}-byte Ed25519 seed: raw, as 64 hex "
                   "digits or as base64", code=2)


async def list_(args) -> int:
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent) if args.agent else None
        response = await client.list_signing_identities(agent)
    return print_listing(
        response.get("identities", []), args.json, ["NAME", "ACCOUNT", "LABEL", "HM SERVER"],
        lambda i: [str(i.get("name", "")), str(i.get("accountId", "")), str(i.get("label") or ""),
                   str(i.get("serverUrl") or "not published")],
        "no signing identities yet: `seed-agents identities create --label L` makes one")


async def create(args) -> int:
    async with open_client(args) as client:
        response = await client.create_signing_identity(args.label, str(uuid.uuid4()))
    print(response["identity"]["name"])
    return 0


async def import_(args) -> int:
    seed = read_seed(args.seed_file)
    async with open_client(args) as client:
        response = await client.import_signing_identity(seed, args.label, str(uuid.uuid4()))
    identity = response["identity"]
    say(f"imported the account {identity.get('accountId')}; agents name it {identity['name']}")
    print(identity["name"])
    return 0


async def rename(args) -> int:
    icon = mime = None
    if args.icon:
        try:
            icon = Path(args.icon).expanduser().read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read the icon {args.icon}: {exc.strerror or exc}", code=2) from None
        mime = mimetypes.guess_type(args.icon)[0]
    async with open_client(args) as client:
        response = await client.update_signing_identity(args.name, args.label, icon, mime)
    print(identity_line(response["identity"]))
    return 0


async def delete(args) -> int:
    async with open_client(args) as client:
        await client.delete_signing_identity(args.name)
    print(f"deleted signing identity {args.name}")
    return 0


def register(sub, common) -> None:
    identities = sub.add_parser("identities", help="Seed account keys your agents sign with",
                                description="Signing identities: Seed account keys the server holds "
                                            "for your agents (the seed never leaves the server).")
    isub = identities.add_subparsers(dest="identities_command",
                                     metavar="{list,create,import,rename,delete}", required=True)
    p = isub.add_parser("list", parents=[common], help="list your identities, newest first",
                        description="List signing identities: name, account, label, HM server.")
    p.add_argument("--agent", default=None, metavar="AGENT",
                   help="those of this agent's owner (shared with you: only those the agent uses); its "
                        "name, id, or the start of its id")
    p.add_argument("--json", action="store_true", help="print the identities as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = isub.add_parser("create", parents=[common], help="make a new account key and print its name",
                        description="Make a new Seed account key on the server (published to its HM "
                                    "server when it has one) and print the name agents use for it.")
    p.add_argument("--label", default=None, help="its display name (the profile name)")
    p.set_defaults(run=create)
    p = isub.add_parser("import", parents=[common], help="hand an existing account key to the server",
                        description="Import an existing Seed account key (its 32-byte seed) so your "
                                    "agents can sign with it. Nothing is published.")
    p.add_argument("--seed-file", required=True, metavar="FILE",
                   help="the seed: raw 32 bytes, 64 hex digits or base64 (- reads stdin)")
    p.add_argument("--label", default=None, help="its display name")
    p.set_defaults(run=import_)
    p = isub.add_parser("rename", parents=[common], help="set an identity's label (and icon)",
                        description="Set an identity's label and, with --icon, its avatar; with an HM "
                                    "server the profile is published again.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("label", metavar="LABEL")
    p.add_argument("--icon", default=None, metavar="IMAGE", help="a PNG, JPEG, GIF or WebP file")
    p.set_defaults(run=rename)
    p = isub.add_parser("delete", parents=[common], help="delete an identity no agent uses",
                        description="Delete a signing identity (refused while an agent signs with it: "
                                    "`seed-agents agents update AGENT --remove-identity NAME` first).")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(run=delete)
