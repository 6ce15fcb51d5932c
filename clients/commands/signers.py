"""`signers register`: let this key act for another account (a delegated signer).

The account's owner (the Seed desktop's account, say) signs a Capability naming this key
(`seed-agents whoami`) as its delegate; `signers register FILE` sends it with RegisterSigner.
From then on `--account ID` (or SEED_AGENTS_ACCOUNT) makes every command act for that account.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .common import CliError, open_client, say


async def register_signer(args) -> int:
    try:
        blob = sys.stdin.buffer.read() if args.capability == "-" else Path(args.capability).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read the capability file {args.capability}: {exc.strerror or exc}",
                       code=2) from None
    args.account = None   # RegisterSigner is signed by this key for itself
    async with open_client(args) as client:
        response = await client.register_signer(blob)
    say(f"this key ({response.get('signerId')}) now signs for the account "
        f"{response.get('accountId')}; use --account {response.get('accountId')}")
    return 0


def register(sub, common) -> None:
    signers = sub.add_parser("signers", help="act for another account (delegated signer)",
                             description="Delegated signers: act for another account with this key.")
    ssub = signers.add_subparsers(dest="signers_command", metavar="{register}", required=True)
    p = ssub.add_parser("register", parents=[common], help="register this key with a Capability",
                        description="Register this key as a signer of another account, with the "
                                    "Capability blob in FILE (- for stdin): a Capability signed by "
                                    "the account, naming this key as delegate. Then use --account "
                                    "to act for that account.")
    p.add_argument("capability", metavar="FILE")
    p.set_defaults(run=register_signer)

