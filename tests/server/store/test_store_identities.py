"""server/store/identities.py on both drivers (a SQLite file and a PostgreSQL schema), through
the façade the server uses (`db.write` / `db.read`), as tests/server/database/test_storage_conformance.py does."""
from __future__ import annotations

import pytest

from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.handlers.idempotency import once
from seed_agents.server.database import parse_storage_url
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import identities as identities_q
from seed_agents.server.store.errors import NotFound
from seed_agents.server.store.secrets import SecretBox, SecretOpenError

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

OWNER, OTHER = "z6MkOwner", "z6MkOther"
T0 = 1_700_000_000_000
BOX = SecretBox(bytes(range(32)))


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request, tmp_path):
    if request.param == "sqlite":
        from seed_agents.server.database.sqlite.database import Database

        database = Database(str(tmp_path / "agents.sqlite"))
    else:
        from seed_agents.server.database.postgres.database import PgDatabase

        database = PgDatabase(parse_storage_url(request.getfixturevalue("postgres_url")))
    await database.start()
    try:
        yield database
    finally:
        await database.close()


def key(n: int) -> tuple[bytes, str, str]:
    seed = bytes([n]) * 32
    identity_id = Keypair.from_seed(seed).account_id
    return seed, identity_id, "hm-account-" + identity_id[:16]


async def add(db, account: str, n: int, now: int, label: str | None = "L", server_url: str | None = None):
    seed, identity_id, name = key(n)
    sealed = BOX.seal(seed, identities_q.identity_aad(account, name))
    return await db.write(identities_q.insert_identity, account, name, identity_id, f"id-{account}-{n}", sealed,
                          label, server_url, "created", now)


async def test_rows_show_no_seed_list_newest_first_and_stay_per_account(db):
    first = await add(db, OWNER, 1, T0, server_url="http://hm.test")
    second = await add(db, OWNER, 2, T0 + 5, label=None)
    await add(db, OTHER, 1, T0)   # the same key held by another account: its own row
    assert first == {"id": f"id-{OWNER}-1", "name": key(1)[2], "accountId": key(1)[1], "label": "L",
                     "serverUrl": "http://hm.test", "createdAt": T0, "updatedAt": T0}
    assert "label" not in second and "serverUrl" not in second and "icon" not in second
    assert db.read(identities_q.list_identities, OWNER) == [second, first]
    assert db.read(identities_q.list_identities, OWNER, [key(1)[2], "hm-account-absent"]) == [first]
    assert db.read(identities_q.list_identities, OWNER, []) == []
    assert db.read(identities_q.count_identities, OWNER) == 2
    assert db.read(identities_q.get_identity, OTHER, key(2)[2]) is None
    assert db.read(identities_q.missing_names, OWNER, [key(2)[2], "x", key(1)[2]]) == ["x"]


async def test_the_seed_opens_only_in_its_own_row(db):
    await add(db, OWNER, 3, T0)
    seed, _, name = key(3)
    assert db.read(identities_q.open_seed, BOX, OWNER, name) == seed
    assert db.read(identities_q.open_seed, BOX, OWNER, "hm-account-none") is None
    # Copied into another account's row, the sealed seed does not open.
    sealed = db.read(lambda conn: conn.execute(
        "SELECT sealed_seed FROM signing_identities WHERE account_id = ? AND name = ?", (OWNER, name)).fetchone()[0])
    assert isinstance(sealed, bytes) and seed not in sealed
    await db.write(identities_q.insert_identity, OTHER, name, key(3)[1], "copied", sealed, None, None, "imported", T0)
    with pytest.raises(SecretOpenError):
        db.read(identities_q.open_seed, BOX, OTHER, name)


async def test_update_keeps_the_icon_unless_given_and_delete_goes_whole(db):
    await add(db, OWNER, 4, T0)
    name = key(4)[2]
    got = await db.write(identities_q.update_identity, OWNER, name, "New", "ipfs://bafyicon", "http://hm", T0 + 1)
    assert (got["label"], got["icon"], got["serverUrl"], got["updatedAt"]) == ("New", "ipfs://bafyicon", "http://hm", T0 + 1)
    got = await db.write(identities_q.update_identity, OWNER, name, "Newer", None, None, T0 + 2)
    assert (got["label"], got["icon"], got["serverUrl"]) == ("Newer", "ipfs://bafyicon", "http://hm")
    with pytest.raises(NotFound):
        await db.write(identities_q.update_identity, OTHER, name, "x", None, None, T0)
    assert await db.write(identities_q.delete_identity, OTHER, name) is False
    assert await db.write(identities_q.delete_identity, OWNER, name) is True
    assert db.read(identities_q.get_identity, OWNER, name) is None


async def test_which_agents_sign_with_an_identity(db):
    name = key(5)[2]

    def agents(conn):
        agents_q.create_agent(conn, "a1", OWNER, {"name": "One", "signingKey": name}, "/d/a1", T0)
        agents_q.create_agent(conn, "a2", OWNER, {"name": "Two", "signingKeys": ["other", name]}, "/d/a2", T0 + 1)
        agents_q.create_agent(conn, "a3", OWNER, {"name": "Three", "signingKeys": ["other"]}, "/d/a3", T0 + 2)
        agents_q.create_agent(conn, "a4", OTHER, {"name": "Theirs", "signingKey": name}, "/d/a4", T0)

    await db.write(agents)
    assert db.read(identities_q.agents_signing_with, OWNER, name) == [("a1", "One"), ("a2", "Two")]
    assert db.read(identities_q.agents_signing_with, OWNER, "unused") == []


async def test_a_deleted_identity_is_not_answered_again_to_a_retried_create(db):
    seed, identity_id, name = key(6)
    response = {"_": "CreateSigningIdentityResponse", "identity": {"name": name}}
    await db.write(once, OWNER, "CreateSigningIdentity", "req-1", b"fp", T0, lambda conn: (response, []))
    await db.write(once, OWNER, "CreateSigningIdentity", "req-2", b"fp",  T0,
                   lambda conn: ({"_": "CreateSigningIdentityResponse", "identity": {"name": "kept"}}, []))
    await db.write(identities_q.forget_idempotency, OWNER, name)
    fresh = {"_": "CreateSigningIdentityResponse", "identity": {"name": "again"}}
    assert (await db.write(once, OWNER, "CreateSigningIdentity", "req-1", b"fp", T0,
                           lambda conn: (fresh, [])))[0] == fresh
    kept = await db.write(once, OWNER, "CreateSigningIdentity", "req-2", b"fp", T0, lambda conn: ({}, []))
    assert kept[0]["identity"]["name"] == "kept"
