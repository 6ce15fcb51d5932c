"""Model provider configs and sealed secrets rows."""
from __future__ import annotations

import re

from seed_agents.server.store import providers, secrets_table

ACCOUNT = "z6MkAccount"
UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_providers_roundtrip_and_replace(conn):
    config = {"type": "openai", "baseUrl": "https://example.invalid/v1", "secretRefs": {"apiKey": "k"}}
    first = providers.set_provider(conn, ACCOUNT, "main", config, 10)
    assert UUID4.fullmatch(first["id"])
    local = providers.set_provider(conn, ACCOUNT, "local", {"type": "ollama"}, 11)
    replaced = providers.set_provider(conn, ACCOUNT, "main", {"type": "groq"}, 20)
    assert replaced == providers.get_provider(conn, ACCOUNT, "main") == {
        "id": first["id"], "name": "main", "config": {"type": "groq"}, "createdAt": 10, "updatedAt": 20}
    assert local["id"] != first["id"]
    assert providers.get_provider(conn, ACCOUNT, "none") is None
    assert providers.get_provider(conn, "z6MkOther", "main") is None
    assert [p["name"] for p in providers.list_providers(conn, ACCOUNT)] == ["local", "main"]
    assert providers.list_providers(conn, "z6MkOther") == []


def test_secret_rows(conn):
    b = secrets_table.set_secret(conn, ACCOUNT, "b", b"sealed-1", None, 10)
    a = secrets_table.set_secret(conn, ACCOUNT, "a", b"sealed-2", {"note": "x"}, 11)
    assert a == {"id": a["id"], "name": "a", "metadata": {"note": "x"}, "createdAt": 11, "updatedAt": 11}
    assert secrets_table.set_secret(conn, ACCOUNT, "b", b"sealed-3", None, 12) == {
        "id": b["id"], "name": "b", "createdAt": 10, "updatedAt": 12}
    assert UUID4.fullmatch(b["id"]) and a["id"] != b["id"]
    assert secrets_table.get_secret_ciphertext(conn, ACCOUNT, "b") == b"sealed-3"
    assert secrets_table.get_secret_ciphertext(conn, ACCOUNT, "zz") is None
    assert secrets_table.get_secret_ciphertext(conn, "z6MkOther", "b") is None
    assert secrets_table.list_secret_names(conn, ACCOUNT) == ["a", "b"]
    assert conn.execute("SELECT created_at, updated_at FROM secrets WHERE name = 'b'").fetchall() == [(10, 12)]
