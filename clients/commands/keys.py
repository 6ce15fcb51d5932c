"""`keygen` and `whoami`: the key a person signs with."""
from __future__ import annotations

from seed_agents.protocol.wire.keys import Keypair

from ..keyfile import KeyFileError, resolve_key_path, write_key
from .common import CliError, keypair_of, say


def keygen(args) -> int:
    path = resolve_key_path(args.key)
    try:
        keypair = Keypair.generate()
        write_key(path, keypair)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write a key to {path}: {exc.strerror or exc}") from None
    say(f"wrote a new key to {path} (mode 0600); your account id is:")
    print(keypair.account_id)
    return 0


def whoami(args) -> int:
    print(keypair_of(args).account_id)
    return 0


def register(sub, common) -> None:
    p = sub.add_parser("keygen", parents=[common], help="create a key file (refuses to overwrite)",
                       description="Create a new Ed25519 key file with mode 0600 and print its "
                                   "account id. An existing key file is never overwritten.")
    p.set_defaults(run=keygen)
    p = sub.add_parser("whoami", parents=[common], help="print the account id of the key",
                       description="Print the account id (z6Mk...) of the key file.")
    p.set_defaults(run=whoami)
