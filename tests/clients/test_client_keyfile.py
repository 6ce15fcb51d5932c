"""Key files: mode 0600, never overwritten, clear errors for missing or malformed files."""
from __future__ import annotations

import json
import os
import stat

import pytest

from seed_agents.clients.keyfile import (
    KeyFileError,
    KeyFilePermissionWarning,
    default_key_path,
    read_key,
    resolve_key_path,
    write_key,
)
from seed_agents.protocol.wire.keys import Keypair


def test_write_then_read_round_trips_with_mode_0600(tmp_path):
    keypair = Keypair.from_seed(bytes(range(32)))
    path = write_key(tmp_path / "sub" / "key.json", keypair)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data == {"type": "ed25519-seed", "seed": bytes(range(32)).hex(),
                    "accountId": keypair.account_id}
    assert data["accountId"].startswith("z6Mk")
    assert read_key(path).account_id == keypair.account_id


def test_refuses_to_overwrite(tmp_path):
    path = tmp_path / "key.json"
    first = Keypair.generate()
    write_key(path, first)
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        write_key(path, Keypair.generate())
    assert read_key(path).account_id == first.account_id


def test_missing_file_says_how_to_make_one(tmp_path):
    with pytest.raises(KeyFileError, match="seed-agents keygen"):
        read_key(tmp_path / "nope.json")


@pytest.mark.parametrize("body, message", [
    ("not json", "not JSON"),
    ('{"type": "rsa", "seed": "00"}', "not a Seed Agents key"),
    ('{"type": "ed25519-seed", "seed": "abc"}', "64 hex"),
    ('{"type": "ed25519-seed"}', "64 hex"),
    ('{"type": "ed25519-seed", "seed": "' + "00" * 32 + '", "accountId": "z6MkWrong"}', "inconsistent"),
])
def test_malformed_files_are_refused_clearly(tmp_path, body, message):
    path = tmp_path / "key.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, body.encode())
    os.close(fd)
    with pytest.raises(KeyFileError, match=message):
        read_key(path)


def test_too_open_permissions_warn_but_still_load(tmp_path):
    path = write_key(tmp_path / "key.json", Keypair.generate())
    os.chmod(path, 0o644)
    with pytest.warns(KeyFilePermissionWarning, match="chmod 600"):
        read_key(path)


def test_key_path_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("SEED_AGENTS_KEY", raising=False)
    assert resolve_key_path(None) == default_key_path()
    assert str(default_key_path()).endswith(".config/seed-agents/key.json")
    monkeypatch.setenv("SEED_AGENTS_KEY", str(tmp_path / "env.json"))
    assert resolve_key_path(None) == tmp_path / "env.json"
    assert resolve_key_path(tmp_path / "flag.json") == tmp_path / "flag.json"
