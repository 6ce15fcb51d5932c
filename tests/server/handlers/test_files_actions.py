"""The file actions against a real server, as the desktop uses them: memory (list, read, write,
delete, search), attachments, chunked uploads; access, limits and hostile input, each one clear
error with nothing lost. Runs on SQLite and PostgreSQL."""
from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from seed_agents.clients import AgentsClient, AgentsError, actions
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.store import blobs

# SQLite unless marked: the tests marked both run on PostgreSQL too (the store's own tests,
# tests/server/store/test_store_files.py, run every file function on both).
BOTH = pytest.mark.storages("sqlite", "postgresql")

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


async def setup(client) -> tuple[str, str]:
    agent_id = (await client.create_agent(ECHO))["agentId"]
    return agent_id, (await client.create_session(agent_id))["sessionId"]


async def refused(call, status: int, *fragments: str) -> AgentsError:
    with pytest.raises(AgentsError) as exc:
        await call
    assert exc.value.status == status, exc.value
    for fragment in fragments:
        assert fragment in str(exc.value), exc.value
    return exc.value


def clean(server) -> None:
    assert server.app.db.read(blobs.check) == []


@BOTH
async def test_memory_round_trip_as_the_memory_tab_does(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        entry = (await c.write_agent_memory_file(agent_id, "notes/trip.md", "# Lisbon\nnata at 9"))["entry"]
        assert entry == {"path": "notes/trip.md", "type": "file", "size": 18, "updatedAt": entry["updatedAt"],
                         "mimeType": "text/markdown"}
        one = os.urandom(1)
        await c.write_agent_memory_file(agent_id, "bin/one", one)
        await c.write_agent_memory_file(agent_id, "empty", b"")
        listed = await c.list_agent_memory(agent_id)
        assert listed["_"] == "ListAgentMemoryResponse" and listed["totalBytes"] == 19
        assert [(e["path"], e["type"]) for e in listed["entries"]] == [
            ("bin", "dir"), ("bin/one", "file"), ("empty", "file"), ("notes", "dir"), ("notes/trip.md", "file")]
        text = (await c.read_agent_memory_file(agent_id, "./notes//trip.md"))["file"]
        assert text["encoding"] == "utf8" and text["content"] == "# Lisbon\nnata at 9"
        binary = (await c.read_agent_memory_file(agent_id, "bin/one"))["file"]
        assert binary["encoding"] in ("binary", "utf8") and (binary.get("data") or binary["content"].encode()) == one
        assert (await c.read_agent_memory_file(agent_id, "empty"))["file"]["content"] == ""
        found = (await c.search_agent_memory(agent_id, "lisbon"))["results"]
        assert [r["path"] for r in found] == ["notes/trip.md"] and "**Lisbon**" in found[0]["snippet"]
        gone = await c.delete_agent_memory_file(agent_id, "notes")
        assert gone == {"_": "DeleteAgentMemoryFileResponse", "agentId": agent_id, "path": "notes", "deleted": True}
        await refused(c.read_agent_memory_file(agent_id, "notes/trip.md"), 404, "not found")
        assert (await c.search_agent_memory(agent_id, "lisbon"))["results"] == []
    clean(server)


@BOTH
@pytest.mark.parametrize("size", [0, 1, 7_900_000])
async def test_chunked_upload_round_trips_into_memory_and_attachments(server, size):
    data = os.urandom(size)
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, session_id = await setup(c)
        done = await c.upload_file({"kind": "memory", "agentId": agent_id, "path": "up/file.bin"}, data)
        assert done["entry"]["size"] == size
        info = (await c.read_agent_memory_file(agent_id, "up/file.bin"))["file"]
        assert (info.get("data") if info["encoding"] == "binary" else info["content"].encode()) == data
        if size:
            done = await c.upload_file({"kind": "session-attachment", "sessionId": session_id, "name": "f.bin"}, data)
            attachment = done["attachment"]
            assert attachment["id"] == hashlib.sha256(data).hexdigest() and attachment["size"] == size
            read = await c.read_session_attachment(session_id, attachment["id"])
            assert read["data"] == data and read["attachment"] == attachment
            # the same bytes: one blob for the memory file and the attachment
            assert server.app.db.read(blobs.counts)["file_blobs"] == 1
    clean(server)


async def test_attachments_are_stored_once_and_go_with_their_sessions(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, s1 = await setup(c)
        s2 = (await c.create_session(agent_id))["sessionId"]
        data = b"\x89PNG" + os.urandom(5000)
        a1 = (await c.upload_session_attachment(s1, "../../cat.png", data))["attachment"]
        assert a1["name"] == "cat.png" and a1["mimeType"] == "image/png" and a1["sessionId"] == s1
        assert (await c.upload_session_attachment(s1, "again.png", data))["attachment"] == a1   # idempotent
        a2 = (await c.upload_session_attachment(s2, "cat.png", data))["attachment"]
        assert a2["id"] == a1["id"] and server.app.db.read(blobs.counts)["file_blobs"] == 1
        await c.delete_session(s1)
        await refused(c.read_session_attachment(s1, a1["id"]), 404)
        assert (await c.read_session_attachment(s2, a1["id"]))["data"] == data
        await c.delete_agent(agent_id)
        assert server.app.db.read(blobs.counts) == {"file_blobs": 0, "file_chunks": 0, "memory_files": 0,
                                                    "session_attachments": 0, "file_uploads": 0}


@BOTH
async def test_a_message_lists_its_attachments_on_the_user_event(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, session_id = await setup(c)
        att = (await c.upload_session_attachment(session_id, "notes.txt", b"remember the milk", "text/plain"))
        att = att["attachment"]
        await refused(c.message_with_attachments(session_id, "look", ["0" * 64]), 404, "Attachment not found")
        sent = await c.message_with_attachments(session_id, "see attached", [att["id"]])
        events = (await c.get_session(session_id))["events"]
        user = next(e for e in events if e["id"] == sent["userEventId"])["event"]
        assert user["attachments"] == [att] and user["content"] == "see attached"


async def test_hostile_paths_each_get_one_clear_error(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        await c.write_agent_memory_file(agent_id, "keep.md", "kept")
        cases = [("../etc/passwd", '".."'), ("a/../../b", '".."'), ("a\x00b", "invalid character"),
                 ("x" * 600, "too long"), ("/".join(["d"] * 17), "nested too deeply"), ("//./", "required")]
        for path, why in cases:
            await refused(c.write_agent_memory_file(agent_id, path, "x"), 400, why)
            await refused(c.read_agent_memory_file(agent_id, path), 400, why)
        await refused(c.write_agent_memory_file(agent_id, "keep.md/under", "x"), 400, "is a file")
        assert [e["path"] for e in (await c.list_agent_memory(agent_id))["entries"]] == ["keep.md"]
    clean(server)


@BOTH
async def test_upload_order_size_hash_and_ownership_are_enforced(server):
    owner, other = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.url, owner) as c, AgentsClient.connect(server.url, other) as o:
        agent_id, _ = await setup(c)
        target = {"kind": "memory", "agentId": agent_id, "path": "big.bin"}
        begin = await c.call(actions.begin_file_upload(target, 10))
        up = begin["uploadId"]
        assert begin["maxChunkBytes"] == 8 * 1024 * 1024
        assert (await c.call(actions.append_file_upload_chunk(up, 0, b"01234")))["received"] == 5
        await refused(c.call(actions.append_file_upload_chunk(up, 0, b"01234")), 409, "offset 0")   # repeated
        await refused(c.call(actions.append_file_upload_chunk(up, 7, b"789")), 409, "offset 7")     # out of order
        await refused(c.call(actions.append_file_upload_chunk(up, 5, b"56789X")), 400, "declared size")
        await refused(c.call(actions.commit_file_upload(up)), 400, "5 of 10 bytes")
        await refused(o.call(actions.append_file_upload_chunk(up, 5, b"56789")), 404, "Upload not found")
        await refused(o.call(actions.commit_file_upload(up)), 404, "Upload not found")
        await refused(o.call(actions.abort_file_upload(up)), 404, "Upload not found")
        await c.call(actions.append_file_upload_chunk(up, 5, b"56789"))
        await refused(c.call(actions.commit_file_upload(up, "ab" * 32)), 400, "not the")
        await refused(c.call(actions.commit_file_upload(up)), 404, "Upload not found")   # nothing kept
        await refused(c.read_agent_memory_file(agent_id, "big.bin"), 404)
        over = await refused(c.call(actions.append_file_upload_chunk(up, 0, b"x" * (8 * 1024 * 1024 + 1))), 413)
        assert "8388608" in str(over)
        await refused(c.call(actions.begin_file_upload(target, 2 * 1024 ** 3 + 1)), 413, "maximum file size")
    clean(server)
    assert server.app.db.read(blobs.counts)["file_chunks"] == 0


async def test_a_reader_cannot_write_and_a_stranger_sees_nothing(server):
    owner, reader, stranger = Keypair.generate(), Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.url, owner) as c, AgentsClient.connect(server.url, reader) as r, \
            AgentsClient.connect(server.url, stranger) as s:
        agent_id, session_id = await setup(c)
        await c.write_agent_memory_file(agent_id, "a.md", "owner's")
        await c.invite_agent_collaborator(agent_id, r.account_id, "reader")
        await r.accept_agent_invite(agent_id)
        assert (await r.read_agent_memory_file(agent_id, "a.md"))["file"]["content"] == "owner's"
        await refused(r.write_agent_memory_file(agent_id, "a.md", "reader's"), 403)
        await refused(r.delete_agent_memory_file(agent_id, "a.md"), 403)
        await refused(r.upload_session_attachment(session_id, "x", b"x"), 403)
        await refused(r.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": "b"}, 5)), 403)
        await refused(s.read_agent_memory_file(agent_id, "a.md"), 404)
        await refused(s.list_agent_memory(agent_id), 404)
        assert (await c.read_agent_memory_file(agent_id, "a.md"))["file"]["content"] == "owner's"


async def test_quota_exceeded_is_413_and_keeps_what_was_there(server):
    server.app.config.file_quota_bytes = 10_000
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, session_id = await setup(c)
        await c.write_agent_memory_file(agent_id, "a.bin", b"a" * 6_000)
        await refused(c.write_agent_memory_file(agent_id, "b.bin", b"b" * 6_000), 413, "quota")
        await refused(c.upload_session_attachment(session_id, "c.bin", b"c" * 6_000), 413, "quota")
        await refused(c.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": "d"}, 6_000)),
                      413, "quota")
        listed = await c.list_agent_memory(agent_id)
        assert [e["path"] for e in listed["entries"]] == ["a.bin"] and listed["totalBytes"] == 6_000
    clean(server)


async def test_ranged_reads_return_large_files_piece_by_piece(server):
    server.app.config.file_answer_bytes = 1 << 20
    data = os.urandom(2_500_000)
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        await c.upload_file({"kind": "memory", "agentId": agent_id, "path": "v.bin"}, data)
        await refused(c.read_agent_memory_file(agent_id, "v.bin"), 413, "ranges")
        got = b""
        async for piece in c.read_file_ranges(lambda o, n: actions.read_agent_memory_file(agent_id, "v.bin", o, n),
                                              len(data)):
            assert len(piece) <= 1 << 20
            got += piece
        assert got == data


async def test_an_unfinished_upload_is_swept_after_an_hour(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        up = (await c.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": "x"}, 10)))
        await c.call(actions.append_file_upload_chunk(up["uploadId"], 0, b"12345"))
        real = server.app.now_ms
        try:
            server.app.now_ms = lambda: real() + 61 * 60 * 1000   # the server's clock, an hour on
            from seed_agents.server.store import uploads as uploads_q

            assert await server.app.db.write(uploads_q.sweep, server.app.now_ms()) == 1
        finally:
            server.app.now_ms = real
        await refused(c.call(actions.append_file_upload_chunk(up["uploadId"], 5, b"67890")), 404, "Upload not found")
    clean(server)
    assert server.app.db.read(blobs.counts)["file_chunks"] == 0


async def test_ipfs_upload_publishes_unixfs_through_the_hm_server(server):
    from tests.fakes.hm_server import FakeHmServer

    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        data = os.urandom(700_000)   # three 256 KiB leaves and a root node
        await c.upload_file({"kind": "memory", "agentId": agent_id, "path": "media/clip.mp4"}, data)
        action = {"_": "UploadAgentMemoryFileToIpfs", "agentId": agent_id, "path": "media/clip.mp4"}
        await refused(c.call(action), 501, "--hm-server-url")
        async with FakeHmServer() as hm:
            server.app.config.hm_server_url = hm.base_url
            try:
                got = await c.call(action)
                assert got == {"_": "UploadAgentMemoryFileToIpfsResponse", "agentId": agent_id,
                               "path": "media/clip.mp4", "cid": got["cid"], "url": "ipfs://" + got["cid"],
                               "size": len(data), "mimeType": "video/mp4"}
                assert hm.get(got["cid"]) is not None and len(hm.published) == 1
                from seed_agents.protocol.hm.unixfs import file_blobs

                root, blocks = file_blobs(data)   # the library's layout, byte for byte
                assert got["cid"] == root and {b.cid for b in hm.published[0]} == {b.cid for b in blocks}
                await refused(c.call({**action, "path": "nope"}), 404)
            finally:
                server.app.config.hm_server_url = None
        await refused(c.call(action), 501)   # the HM server is gone from the config: nothing published


@pytest.mark.slow
async def test_ten_thousand_tiny_files_then_the_limit(server):
    server.app.config.limits.rate_per_second = server.app.config.limits.rate_burst = 1_000_000
    server.app.limiter = type(server.app.limiter)(1_000_000, 1_000_000)
    n = server.app.config.memory_max_files
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        agent_id, _ = await setup(c)
        sem = asyncio.Semaphore(32)

        async def put(i):
            async with sem:
                await c.write_agent_memory_file(agent_id, f"d{i % 100}/f{i}.txt", f"note {i} word{i % 7}")

        await asyncio.gather(*(put(i) for i in range(n)))
        listed = await c.list_agent_memory(agent_id)
        assert sum(e["type"] == "file" for e in listed["entries"]) == n
        found = (await c.search_agent_memory(agent_id, "word3", 50))["results"]
        assert len(found) == 50 and all("**word3**" in r["snippet"] for r in found)
        await refused(c.write_agent_memory_file(agent_id, "one-more.txt", "x"), 413, f"holds {n} files")
        await c.write_agent_memory_file(agent_id, "d0/f0.txt", "replacing is fine")
    clean(server)


@pytest.mark.parametrize("over", ["ws", "http"])
async def test_upload_actions_carry_a_full_chunk_and_no_other_action_grows(server, over):
    url = server.url if over == "ws" else server.url.replace("ws://", "http://").removesuffix("/agents/ws")
    async with AgentsClient.connect(url, Keypair.generate()) as c:
        agent_id, session_id = await setup(c)
        chunk = os.urandom(8 * 1024 * 1024)   # the largest chunk: over 8x the plain frame limit
        begin = await c.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": "c"},
                                                       len(chunk)))
        assert (await c.call(actions.append_file_upload_chunk(begin["uploadId"], 0, chunk)))["received"] == len(chunk)
        await c.call(actions.commit_file_upload(begin["uploadId"]))
        two = os.urandom(2 * 1024 * 1024)   # the desktop's single-shot uploads
        assert (await c.write_agent_memory_file(agent_id, "two", two))["entry"]["size"] == len(two)
        assert (await c.upload_session_attachment(session_id, "two.bin", two))["attachment"]["size"] == len(two)
        # any other action keeps the 1 MiB limit, whatever it carries
        big = await refused(c.call({"_": "SetSecret", "name": "s", "value": os.urandom(2 * 1024 * 1024)}), 413)
        assert "limit" in str(big)
        if over == "ws":
            assert (await c.list_agent_memory(agent_id))["totalBytes"] == len(chunk) + len(two)   # socket still open
