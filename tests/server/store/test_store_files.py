"""The file store on both drivers, through the façade the server uses: content-addressed blobs in
chunks, memory files with search, attachments, staged uploads, and deletes that free bytes in
their own transaction. `blobs.check` (chunks counted against references) is asserted clean after
every test."""
from __future__ import annotations

import hashlib

import pytest

from seed_agents.server.store.errors import Refused
from seed_agents.server.store import agent_lifecycle as lifecycle_q
from seed_agents.server.store import attachments as att_q
from seed_agents.server.store import blobs
from seed_agents.server.store import memory as memory_q
from seed_agents.server.store import sessions as sessions_q
from seed_agents.server.store import uploads as uploads_q

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.server.database.test_storage_conformance import ACCOUNT, BACKENDS, T0, Stores, seed

LIMITS = memory_q.MemoryLimits(quota=None, max_files=10_000)


@pytest.fixture(params=sorted(BACKENDS))
async def db(request, tmp_path):
    backend = BACKENDS[request.param]
    stores = Stores(backend, backend.where(request, tmp_path))
    try:
        d = await stores.open()
        await seed(d, ("s1", "s2"))
        yield d
        assert d.read(blobs.check) == []
    finally:
        await stores.close_all()


async def write(db, path: str, data: bytes, agent="a1", limits=LIMITS):
    return await db.write(memory_q.write_file, agent, ACCOUNT, path, data, T0, limits)


async def test_memory_write_read_list_and_delete_round_trip(db):
    await write(db, "notes/trip.md", b"# Lisbon\nPasteis de nata at 9")
    await write(db, "notes/deep/x.bin", bytes(range(256)))
    await write(db, "empty.txt", b"")
    entries, total = db.read(memory_q.list_memory, "a1")
    assert [(e["path"], e["type"]) for e in entries] == [
        ("empty.txt", "file"), ("notes", "dir"), ("notes/deep", "dir"), ("notes/deep/x.bin", "file"),
        ("notes/trip.md", "file")]
    assert total == 29 + 256
    text = db.read(memory_q.read_file, "a1", "notes/trip.md", 1 << 20)
    assert text["encoding"] == "utf8" and text["content"].startswith("# Lisbon") and text["mimeType"] == "text/markdown"
    binary = db.read(memory_q.read_file, "a1", "notes/deep/x.bin", 1 << 20)
    assert binary["encoding"] == "binary" and binary["data"] == bytes(range(256))
    assert db.read(memory_q.read_file, "a1", "empty.txt", 10)["content"] == ""
    level = db.read(memory_q.list_dir, "a1", "notes")
    assert [(e["path"], e.get("entryCount")) for e in level["entries"]] == [("notes/deep", 1), ("notes/trip.md", None)]
    with pytest.raises(Refused) as exc:
        db.read(memory_q.read_file, "a1", "notes", 10)
    assert exc.value.status == 400
    with pytest.raises(Refused) as exc:
        await write(db, "notes/trip.md/child", b"x")
    assert exc.value.status == 400 and "is a file" in exc.value.message
    with pytest.raises(Refused) as exc:
        await write(db, "notes", b"x")
    assert exc.value.status == 400
    assert await db.write(memory_q.delete_path, "a1", "notes") is True
    assert await db.write(memory_q.delete_path, "a1", "notes") is False
    assert [e["path"] for e in db.read(memory_q.list_memory, "a1")[0]] == ["empty.txt"]


async def test_equal_bytes_are_stored_once_and_freed_with_the_last_reference(db):
    data = b"same bytes" * 1000
    await write(db, "a.txt", data)
    await write(db, "b.txt", data)
    await db.write(att_q.save, "s1", ACCOUNT, "a.txt", None, data, T0)
    await db.write(att_q.save, "s2", ACCOUNT, "a.txt", None, data, T0)
    counts = db.read(blobs.counts)
    assert counts["file_blobs"] == 1 and counts["file_chunks"] == 1
    await db.write(memory_q.delete_path, "a1", "a.txt")
    await db.write(memory_q.delete_path, "a1", "b.txt")
    await db.write(sessions_q.delete_session, "s1")
    assert db.read(blobs.counts)["file_blobs"] == 1
    await db.write(sessions_q.delete_session, "s2")
    assert db.read(blobs.counts) == {"file_blobs": 0, "file_chunks": 0, "memory_files": 0,
                                     "session_attachments": 0, "file_uploads": 0}


async def test_overwrite_releases_the_old_bytes(db):
    await write(db, "a.txt", b"one")
    await write(db, "a.txt", b"two")
    assert db.read(blobs.counts)["file_blobs"] == 1
    assert db.read(memory_q.read_file, "a1", "a.txt", 10)["content"] == "two"


async def test_a_staged_upload_is_committed_through_another_instance(db, request):
    other = db
    if db.shared:   # a second "server" on the same store
        from seed_agents.server.database import parse_storage_url
        from seed_agents.server.database.postgres.database import PgDatabase

        other = PgDatabase(parse_storage_url(request.getfixturevalue("postgres_url")))
        await other.start()
    try:
        data = hashlib.sha256(b"seed").digest() * 100_000   # 3.2 MB: several chunks
        await db.write(uploads_q.begin, "u1", ACCOUNT, ACCOUNT, {"kind": "memory", "agentId": "a1", "path": "big.bin"},
                       len(data), T0)
        for at in range(0, len(data), 1_500_000):
            await db.write(uploads_q.append, "u1", ACCOUNT, at, data[at:at + 1_500_000], T0)
        with pytest.raises(Refused) as exc:   # a repeated chunk changes nothing
            await db.write(uploads_q.append, "u1", ACCOUNT, 0, data[:10], T0)
        assert exc.value.status == 409
        up = other.read(uploads_q.get, "u1", ACCOUNT)
        digest, size = blobs.sha256_of(other.read, up.blob_id)
        assert (digest, size) == (hashlib.sha256(data).digest(), len(data))

        def commit(conn):
            up = uploads_q.finish(conn, "u1", ACCOUNT, size)
            blob_id = blobs.seal(conn, up.blob_id, digest)
            return memory_q.link(conn, "a1", ACCOUNT, up.path, blob_id, size, None, T0)

        await other.write(commit)
        info = db.read(memory_q.file_info, "a1", "big.bin")
        assert b"".join(blobs.iter_range(db.read, info.blob_id)) == data
        assert b"".join(blobs.iter_range(db.read, info.blob_id, 1_048_570, 20)) == data[1_048_570:1_048_590]
    finally:
        if other is not db:
            await other.close()


async def test_uploads_of_another_account_are_not_found_and_stale_ones_are_swept(db):
    await db.write(uploads_q.begin, "u1", ACCOUNT, ACCOUNT, {"kind": "memory", "agentId": "a1", "path": "x"}, 10, T0)
    await db.write(uploads_q.append, "u1", ACCOUNT, 0, b"12345", T0)
    with pytest.raises(Refused) as exc:
        await db.write(uploads_q.append, "u1", "z6MkOther", 5, b"67890", T0)
    assert exc.value.status == 404
    assert await db.write(uploads_q.sweep, T0 + 59 * 60_000) == 0
    assert await db.write(uploads_q.sweep, T0 + 61 * 60_000) == 1
    assert db.read(blobs.counts)["file_chunks"] == 0


async def test_quota_and_file_count_refuse_before_anything_is_stored(db):
    limits = memory_q.MemoryLimits(quota=100, max_files=3)
    await write(db, "a", b"x" * 60, limits=limits)
    with pytest.raises(Refused) as exc:
        await write(db, "b", b"x" * 50, limits=limits)
    assert exc.value.status == 413 and "quota" in exc.value.message
    await write(db, "a", b"y" * 90, limits=limits)   # replacing frees the old size first
    await write(db, "b", b"", limits=limits)
    await write(db, "c", b"", limits=limits)
    with pytest.raises(Refused) as exc:
        await write(db, "d", b"", limits=limits)
    assert exc.value.status == 413 and "files" in exc.value.message


async def test_search_ranks_matches_and_marks_them_in_snippets(db):
    await write(db, "notes/lisbon.md", b"We ate pasteis de nata in Lisbon. Lisbon trams are yellow.")
    await write(db, "notes/porto.md", b"Porto has port wine; a day trip from Lisbon.")
    await write(db, "todo.txt", b"buy milk")
    await write(db, "photo.png", b"\x89PNG\x00 lisbon")
    results = db.read(memory_q.search, "a1", "lisbon", 10)
    assert [r["path"] for r in results] == ["notes/lisbon.md", "notes/porto.md"]
    assert "**Lisbon**" in results[0]["snippet"] and results[0]["score"] >= results[1]["score"]
    assert db.read(memory_q.search, "a1", "milk", 10)[0]["path"] == "todo.txt"
    assert db.read(memory_q.search, "a1", "nothing-like-this", 10) == []
    plain = db.read(memory_q.search, "a1", "de n", 10)   # words of one letter: still found
    assert [r["path"] for r in plain] == ["notes/lisbon.md"]
    await db.write(memory_q.delete_path, "a1", "notes/lisbon.md")
    assert [r["path"] for r in db.read(memory_q.search, "a1", "lisbon", 10)] == ["notes/porto.md"]


async def test_deleting_the_agent_removes_its_files_uploads_and_attachments(db):
    await write(db, "a.txt", b"agent file")
    await db.write(att_q.save, "s1", ACCOUNT, "f.txt", "text/plain", b"attached", T0)
    await db.write(uploads_q.begin, "u1", ACCOUNT, ACCOUNT,
                   {"kind": "session-attachment", "agentId": "a1", "sessionId": "s2", "name": "n"}, 10, T0)
    await db.write(uploads_q.append, "u1", ACCOUNT, 0, b"12345", T0)
    await db.write(lifecycle_q.delete_agent, "a1")
    assert db.read(blobs.counts) == {"file_blobs": 0, "file_chunks": 0, "memory_files": 0,
                                     "session_attachments": 0, "file_uploads": 0}
    assert db.read(memory_q.search, "a1", "agent", 10) == []
