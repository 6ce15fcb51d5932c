"""Ed25519 keypairs for clients and tests (the server only ever verifies)."""

from __future__ import annotations

from nacl.signing import SigningKey

from .principals import principal_from_public_key, principal_to_string


class Keypair:
    """An Ed25519 key from a 32-byte seed (RFC 8032), with its principal and account id."""

    __slots__ = ("_signing_key", "seed", "public_key", "principal", "account_id")

    def __init__(self, signing_key: SigningKey) -> None:
        self._signing_key = signing_key
        self.seed: bytes = bytes(signing_key)
        self.public_key: bytes = bytes(signing_key.verify_key)
        self.principal: bytes = principal_from_public_key(self.public_key)
        self.account_id: str = principal_to_string(self.principal)

    @classmethod
    def from_seed(cls, seed: bytes) -> Keypair:
        if type(seed) is not bytes or len(seed) != 32:
            raise ValueError("an Ed25519 seed is 32 bytes")
        return cls(SigningKey(seed))

    @classmethod
    def generate(cls) -> Keypair:
        return cls(SigningKey.generate())

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of `message` (pure Ed25519, deterministic)."""
        return self._signing_key.sign(message).signature

    def __repr__(self) -> str:  # never show the seed
        return f"Keypair({self.account_id})"
