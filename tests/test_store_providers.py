"""Model provider configs and sealed secrets rows."""
from __future__ import annotations

from server.store import providers, secrets_table

ACCOUNT = "z6MkAccount"


def test_providers_roundtrip_and_replace(conn):
    config = {"type": "openai", "baseUrl": "https://example.invalid/v1", "secretRefs": {"apiKey": "k"}}
    providers.set_provider(conn, ACCOUNT, "main", config, 10)
    providers.set_provider(conn, ACCOUNT, "local", {"type": "ollama"}, 11)
    providers.set_provider(conn, ACCOUNT, "main", {"type": "groq"}, 20)
    assert providers.get_provider(conn, ACCOUNT, "main") == {
        "name": "main", "config": {"type": "groq"}, "createdAt": 10, "updatedAt": 20}
    assert providers.get_provider(conn, ACCOUNT, "none") is None
    assert providers.get_provider(conn, "z6MkOther", "main") is None
    assert [p["name"] for p in providers.list_providers(conn, ACCOUNT)] == ["local", "main"]
    assert providers.list_providers(conn, "z6MkOther") == []


def test_secret_rows(conn):
    secrets_table.set_secret(conn, ACCOUNT, "b", b"sealed-1", None, 10)
    secrets_table.set_secret(conn, ACCOUNT, "a", b"sealed-2", {"note": "x"}, 11)
    secrets_table.set_secret(conn, ACCOUNT, "b", b"sealed-3", None, 12)
    assert secrets_table.get_secret_ciphertext(conn, ACCOUNT, "b") == b"sealed-3"
    assert secrets_table.get_secret_ciphertext(conn, ACCOUNT, "zz") is None
    assert secrets_table.get_secret_ciphertext(conn, "z6MkOther", "b") is None
    assert secrets_table.list_secret_names(conn, ACCOUNT) == ["a", "b"]
    assert conn.execute("SELECT created_at, updated_at FROM secrets WHERE name = 'b'").fetchall() == [(10, 12)]
