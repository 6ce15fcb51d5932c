"""The secrets key and sealing of secret values (AES-256-GCM).

Key source, first match wins:
1. `SEED_AGENTS_SECRETS_KEY`: standard base64 of exactly 32 bytes (empty counts as unset);
2. `<data_dir>/secrets.key`: one line holding base64 of 32 bytes (the same text the variable
   takes, so a key moves between the two by copy and paste), created on first use with mode
   0600. The key never goes into the database: a copy of the database alone reveals nothing.
"""
from __future__ import annotations

import base64
import binascii
import logging
import os
from typing import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = logging.getLogger(__name__)

ENV_VAR = "SEED_AGENTS_SECRETS_KEY"
KEY_FILE = "secrets.key"
KEY_SIZE = 32
NONCE_SIZE = 12


class SecretsKeyError(ValueError):
    """The configured key is unusable; the server must not start with it."""


class SecretOpenError(ValueError):
    """A sealed value failed authentication: wrong key, wrong row (AAD) or tampered bytes."""


def load_secrets_key(data_dir: str, env: Mapping[str, str]) -> bytes:
    """The 32-byte key from the environment, else from (or newly into) the data dir's key file."""
    text = env.get(ENV_VAR, "")
    if text.strip():
        return _parse_key(text, f"${ENV_VAR}")
    path = os.path.join(data_dir, KEY_FILE)
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        pass
    return _create_key_file(path)


def _parse_key(text: str, source: str) -> bytes:
    try:
        text = text.strip()
        # `head -c 32 /dev/urandom | base64` pads; other tools (and url-safe keys) may not.
        text = text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4)
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SecretsKeyError(f"secrets key in {source} is not valid base64") from exc
    if len(key) != KEY_SIZE:
        raise SecretsKeyError(f"secrets key in {source} must be base64 of {KEY_SIZE} bytes, "
                              f"it decodes to {len(key)} bytes")
    return key


def _read_key_file(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
        mode = os.fstat(f.fileno()).st_mode
    if mode & 0o077:
        log.warning("secrets key file %s is readable by group or others (mode %o); chmod 600 it",
                    path, mode & 0o777)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise SecretsKeyError(f"secrets key in {path} is not base64 text") from exc
    return _parse_key(text, path)


def _create_key_file(path: str) -> bytes:
    """Write a fresh key atomically: a temp file (O_EXCL, 0600) hard-linked into place, so a
    concurrent starter either wins or reads the winner's complete key, never a partial one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    key = os.urandom(KEY_SIZE)
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, base64.b64encode(key) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return _read_key_file(path)
    finally:
        os.unlink(tmp)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))
    log.info("created secrets key file %s", path)
    return key


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SecretBox:
    """AES-256-GCM with a fresh random 96-bit nonce per value: sealed = nonce || ciphertext || tag.

    The AAD must name the row (account and secret name), so a ciphertext copied into another
    row fails to open.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_SIZE:
            raise SecretsKeyError(f"secrets key must be {KEY_SIZE} bytes, got {len(key)}")
        self._aead = AESGCM(bytes(key))

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, bytes(plaintext), bytes(aad))

    def open(self, blob: bytes, aad: bytes) -> bytes:
        blob = bytes(blob)
        if len(blob) < NONCE_SIZE + 16:
            raise SecretOpenError("sealed secret is too short")
        try:
            return self._aead.decrypt(blob[:NONCE_SIZE], blob[NONCE_SIZE:], bytes(aad))
        except InvalidTag as exc:
            raise SecretOpenError("sealed secret failed authentication (wrong key or row)") from exc
