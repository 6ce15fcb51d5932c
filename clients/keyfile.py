"""Key files: the Ed25519 seed a person's CLI and scripts sign with.

Format (JSON): `{"type": "ed25519-seed", "seed": "<64 hex chars>", "accountId": "z6Mk..."}`.
The account id is stored for people reading the file; on read it must match the seed, so a
hand-edited file fails loudly instead of signing as someone unexpected.

The file is created with mode 0600 and never overwritten: losing a key loses an account.
"""
from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path

from seed_agents.protocol.wire.keys import Keypair

KEY_TYPE = "ed25519-seed"
ENV_KEY = "SEED_AGENTS_KEY"


class KeyFileError(Exception):
    """A key file that is missing, malformed, or would be overwritten; the message says which."""


class KeyFilePermissionWarning(UserWarning):
    """The key file can be read by other users of this machine."""


def default_key_path() -> Path:
    return Path.home() / ".config" / "seed-agents" / "key.json"


def resolve_key_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--key` wins over `SEED_AGENTS_KEY`, which wins over `~/.config/seed-agents/key.json`."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_KEY)
    if env:
        return Path(env).expanduser()
    return default_key_path()


def write_key(path: str | os.PathLike, keypair: Keypair) -> Path:
    path = Path(path).expanduser()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = json.dumps({"type": KEY_TYPE, "seed": keypair.seed.hex(),
                       "accountId": keypair.account_id}, indent=2) + "\n"
    try:
        # O_EXCL: the existence check and the creation are one step, so no race can clobber a key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError(f"a key already exists at {path}; refusing to overwrite it "
                           "(move it away first if you really mean to replace it)") from None
    try:
        os.fchmod(fd, 0o600)  # the umask can only narrow the mode, but be explicit anyway
        os.write(fd, body.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_key(path: str | os.PathLike) -> Keypair:
    path = Path(path).expanduser()
    try:
        raw = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise KeyFileError(f"no key file at {path}; create one with `seed-agents keygen`") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.warn(f"key file {path} is readable by other users (mode {stat.S_IMODE(mode):o}); "
                      f"run `chmod 600 {path}`", KeyFilePermissionWarning, stacklevel=2)
    try:
        data = json.loads(raw)
    except ValueError:
        raise KeyFileError(f"key file {path} is not JSON") from None
    if not isinstance(data, dict) or data.get("type") != KEY_TYPE:
        raise KeyFileError(f"key file {path} is not a Seed Agents key (expected \"type\": \"{KEY_TYPE}\")")
    seed_hex = data.get("seed")
    try:
        seed = bytes.fromhex(seed_hex) if isinstance(seed_hex, str) else b""
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise KeyFileError(f"key file {path} has no valid \"seed\" (expected 64 hex characters)")
    keypair = Keypair.from_seed(seed)
    stored = data.get("accountId")
    if stored is not None and stored != keypair.account_id:
        raise KeyFileError(f"key file {path} is inconsistent: its accountId {stored} does not "
                           f"match its seed ({keypair.account_id})")
    return keypair
