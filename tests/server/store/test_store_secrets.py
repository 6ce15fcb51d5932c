"""The secrets key (environment or 0600 key file) and AES-256-GCM sealing; nothing in clear on disk."""
from __future__ import annotations

import base64
import os
import stat
import threading

import pytest

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import secrets_table
from seed_agents.server.store.secrets import KEY_FILE, SecretBox, SecretOpenError, SecretsKeyError, load_secrets_key

KEY = bytes(range(32))


def test_key_from_environment(tmp_path):
    env = {"SEED_AGENTS_SECRETS_KEY": base64.b64encode(KEY).decode()}
    assert load_secrets_key(str(tmp_path), env) == KEY
    assert not (tmp_path / KEY_FILE).exists()  # the variable wins; no file is made


@pytest.mark.parametrize("value, message", [
    ("not base64!", "not valid base64"),
    (base64.b64encode(b"short").decode(), "decodes to 5 bytes"),
    (base64.b64encode(bytes(33)).decode(), "decodes to 33 bytes"),
])
def test_bad_environment_key_is_a_clear_error(tmp_path, value, message):
    with pytest.raises(SecretsKeyError, match=message) as info:
        load_secrets_key(str(tmp_path), {"SEED_AGENTS_SECRETS_KEY": value})
    assert "SEED_AGENTS_SECRETS_KEY" in str(info.value)


def test_key_file_created_once_with_mode_0600(tmp_path):
    data_dir = tmp_path / "data"
    first = load_secrets_key(str(data_dir), {"SEED_AGENTS_SECRETS_KEY": ""})
    path = data_dir / KEY_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert base64.b64decode(path.read_text().strip()) == first and len(first) == 32
    assert load_secrets_key(str(data_dir), {}) == first
    assert [p.name for p in data_dir.iterdir()] == [KEY_FILE]  # no temp files left


def test_concurrent_first_starts_agree_on_one_key(tmp_path):
    keys, barrier = [], threading.Barrier(8)

    def start():
        barrier.wait()
        keys.append(load_secrets_key(str(tmp_path), {}))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and len(keys) == 8


def test_bad_key_file_is_a_clear_error(tmp_path):
    (tmp_path / KEY_FILE).write_bytes(b"\x00\xff garbage")
    with pytest.raises(SecretsKeyError, match=KEY_FILE):
        load_secrets_key(str(tmp_path), {})


def test_seal_and_open():
    box = SecretBox(KEY)
    aad = b"z6MkAccount|openai"
    sealed = box.seal(b"sk-live-123", aad)
    assert len(sealed) == 12 + len(b"sk-live-123") + 16
    assert box.seal(b"sk-live-123", aad) != sealed  # fresh nonce every time
    assert box.open(sealed, aad) == b"sk-live-123"
    with pytest.raises(SecretOpenError):
        box.open(sealed, b"z6MkAccount|other")  # moved to another row
    with pytest.raises(SecretOpenError):
        box.open(sealed[:-1] + bytes([sealed[-1] ^ 1]), aad)
    with pytest.raises(SecretOpenError):
        SecretBox(bytes(32)).open(sealed, aad)
    with pytest.raises(SecretsKeyError):
        SecretBox(b"short")


async def test_plaintext_never_reaches_the_database_files(tmp_path):
    path = tmp_path / "db.sqlite"
    box = SecretBox(load_secrets_key(str(tmp_path), {}))
    plaintext = b"PLAINTEXT-SECRET-" + os.urandom(8).hex().encode()
    db = Database(str(path))
    await db.start()
    for i in range(20):
        sealed = box.seal(plaintext, f"z6MkAccount|key{i}".encode())
        await db.write(secrets_table.set_secret, "z6MkAccount", f"key{i}", sealed, {"label": "x"}, i)
    # While open, the rows live in the -wal file; look there and in the main file.
    on_disk = path.read_bytes() + (tmp_path / "db.sqlite-wal").read_bytes()
    assert len(on_disk) > 0 and plaintext not in on_disk
    ciphertext = db.read(secrets_table.get_secret_ciphertext, "z6MkAccount", "key3")
    assert ciphertext in on_disk  # the search did look at the stored rows
    assert box.open(ciphertext, b"z6MkAccount|key3") == plaintext
    await db.close()
    assert plaintext not in path.read_bytes()
