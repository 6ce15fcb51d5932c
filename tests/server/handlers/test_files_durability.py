"""Files across processes: uploaded through one server and read through another on PostgreSQL
(nothing on a server's disk), a 300 MiB upload with the server's RSS flat (slow), and SIGKILL
mid-upload, mid-commit and mid-delete leaving the whole file or nothing, with no orphan chunks
(`blobs.check` counts chunks against references). Real child servers, real sockets.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import random
import time
from pathlib import Path

import pytest

from seed_agents.clients import AgentsClient, AgentsError, actions
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.database import parse_storage_url
from seed_agents.server.store import agent_lifecycle, blobs
from seed_agents.server.store import memory as memory_q
from seed_agents.server.store import owners as owners_q
from seed_agents.server.store import uploads as uploads_q

from tests.hostile_measure import rss
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}
FLAGS = ["--rate-limit", "100000", "--rate-burst", "100000", "--log-level", "WARNING"]
MiB = 1 << 20


def pattern(i: int, size: int) -> bytes:
    """Chunk i of a file that is never held whole: distinct, cheap bytes."""
    seed = hashlib.sha256(i.to_bytes(8, "big")).digest()
    return (seed * (size // 32 + 1))[:size]


async def open_store(where: str):
    if where.startswith("postgresql"):
        from seed_agents.server.database.postgres.database import PgDatabase

        db = PgDatabase(parse_storage_url(where))
    else:
        from seed_agents.server.database.sqlite.database import Database

        db = Database(where)
    await db.start()
    return db


@pytest.fixture
def stores(request, tmp_path, monkeypatch):
    """(kind, storage flags, where the store is) for SQLite or PostgreSQL."""
    monkeypatch.setenv("SEED_AGENTS_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    if request.param == "sqlite":
        return "sqlite", [], str(tmp_path / "s1" / "agents.sqlite")
    url = request.getfixturevalue("postgres_url")
    return "postgresql", ["--storage-url", url], url


def servers(tmp_path, flags, n=1):
    out = []
    for i in range(n):
        srv = ServerProcess(tmp_path / f"s{i + 1}", extra=[*FLAGS, *flags])
        srv.data_dir.mkdir(parents=True, exist_ok=True)
        srv.data_dir.chmod(0o700)
        out.append(srv)
    return out


@pytest.mark.parametrize("stores", ["postgresql"], indirect=True)
async def test_uploaded_through_one_server_read_through_another(tmp_path, stores):
    kind, flags, where = stores
    a, b = servers(tmp_path, flags, 2)
    await asyncio.gather(asyncio.to_thread(a.start), asyncio.to_thread(b.start))
    kp = Keypair.generate()
    try:
        async with AgentsClient.connect(a.url, kp) as ca, AgentsClient.connect(b.url, kp) as cb:
            agent_id = (await ca.create_agent(ECHO))["agentId"]
            session_id = (await ca.create_session(agent_id))["sessionId"]
            for size in (0, 1, 7_900_000):
                data = os.urandom(size)
                path = f"f{size}.bin"
                # the chunks alternate between the two servers; the commit goes through the second
                begin = await ca.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": path},
                                                               size))
                sent, turn = 0, 0
                while sent < size:
                    chunk = data[sent:sent + 3 * MiB]
                    await (ca if turn % 2 == 0 else cb).call(
                        actions.append_file_upload_chunk(begin["uploadId"], sent, chunk))
                    sent, turn = sent + len(chunk), turn + 1
                await cb.call(actions.commit_file_upload(begin["uploadId"], hashlib.sha256(data).hexdigest()))
                file = (await cb.read_agent_memory_file(agent_id, path))["file"]
                assert (file.get("data") if file["encoding"] == "binary" else file["content"].encode()) == data
                if size == 1:   # an attachment too (the large one is memory's above: same bytes path)
                    att = (await ca.upload_file({"kind": "session-attachment", "sessionId": session_id,
                                                 "name": path}, data))["attachment"]
                    assert (await cb.read_session_attachment(session_id, att["id"]))["data"] == data
            assert [r["path"] for r in (await cb.search_agent_memory(agent_id, "nothing"))["results"]] == []
    finally:
        a.kill()
        b.kill()
    db = await open_store(where)
    try:
        assert db.read(blobs.check) == []
    finally:
        await db.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("stores", ["sqlite", "postgresql"], indirect=True)
async def test_a_300_mib_upload_round_trips_with_the_server_rss_flat(tmp_path, stores):
    kind, flags, where = stores
    (srv,) = servers(tmp_path, flags)
    srv.start()
    size, step = 300 * MiB, 8 * MiB
    try:
        async with AgentsClient.connect(srv.url, Keypair.generate()) as c:
            agent_id = (await c.create_agent(ECHO))["agentId"]
            warm = os.urandom(step)   # one chunk through first: the baseline includes its buffers
            await c.upload_file({"kind": "memory", "agentId": agent_id, "path": "warm"}, warm, chunk_bytes=step)
            await c.read_agent_memory_file(agent_id, "warm")
            base = rss(srv.proc.pid)
            peak = base
            digest = hashlib.sha256()
            begin = await c.call(actions.begin_file_upload({"kind": "memory", "agentId": agent_id, "path": "big"},
                                                          size))
            for i in range(-(-size // step)):
                chunk = pattern(i, min(step, size - i * step))
                digest.update(chunk)
                await c.call(actions.append_file_upload_chunk(begin["uploadId"], i * step, chunk))
                peak = max(peak, rss(srv.proc.pid))
            await c.call(actions.commit_file_upload(begin["uploadId"], digest.hexdigest()))
            peak = max(peak, rss(srv.proc.pid))
            back = hashlib.sha256()
            got = 0
            async for piece in c.read_file_ranges(lambda o, n: actions.read_agent_memory_file(agent_id, "big", o, n),
                                                  size, range_bytes=step):
                back.update(piece)
                got += len(piece)
                peak = max(peak, rss(srv.proc.pid))
            assert got == size and back.digest() == digest.digest()
            # flat: a few chunks' worth of buffers, nowhere near the file's 300 MiB
            print(f"server RSS {base / MiB:.0f} MiB before, {peak / MiB:.0f} MiB at most ({kind})")
            assert peak - base < 100 * MiB, (base, peak)
    finally:
        srv.kill()


# -- SIGKILL ---------------------------------------------------------------------------------
async def _kill_round(tmp_path: Path, flags: list[str], where: str, rng: random.Random, stage: str) -> str:
    """One server, one file, a SIGKILL at `stage` (upload, commit or delete) after a random
    moment; then the store is checked with the server gone. Returns what was found."""
    (srv,) = servers(tmp_path, flags)
    srv.start()
    kp = Keypair.generate()
    data = os.urandom(rng.randrange(3 * MiB, 9 * MiB))
    agent_id = None
    try:
        async with AgentsClient.connect(srv.url, kp, reconnect=False) as c:
            agent_id = (await c.create_agent(ECHO))["agentId"]
            target = {"kind": "memory", "agentId": agent_id, "path": "f.bin"}
            if stage == "delete":
                await c.upload_file(target, data)
                for i in range(3):   # more to delete, so the kill can land inside the transaction
                    await c.upload_file({**target, "path": f"more/{i}"}, os.urandom(len(data)))
                call = c.delete_agent(agent_id)
            else:
                begin = await c.call(actions.begin_file_upload(target, len(data)))
                upload_id = begin["uploadId"]
                first = data[:2 * MiB]
                await c.call(actions.append_file_upload_chunk(upload_id, 0, first))
                if stage == "upload":
                    call = c.call(actions.append_file_upload_chunk(upload_id, len(first), data[len(first):]))
                else:
                    await c.call(actions.append_file_upload_chunk(upload_id, len(first), data[len(first):]))
                    call = c.call(actions.commit_file_upload(upload_id, hashlib.sha256(data).hexdigest()))
            task = asyncio.ensure_future(call)
            # the kill point: somewhere between sending the action and well after its answer
            await asyncio.sleep(rng.uniform(0, 0.03 if stage == "delete" else 0.15))
            srv.kill()
            try:
                await task
            except (AgentsError, Exception):  # noqa: BLE001 - the server died under it
                pass
    finally:
        srv.kill()
    db = await open_store(where)
    try:
        assert db.read(blobs.check) == []
        info = db.read(memory_q.file_info, agent_id, "f.bin")
        if info is not None:   # whole, never a part
            assert b"".join(blobs.iter_range(db.read, info.blob_id)) == data
            found = "whole"
        else:
            found = "nothing"
        # what the sweep leaves an hour later: no chunk without a file
        await db.write(uploads_q.sweep, 2**53 - 1)
        counts = db.read(blobs.counts)
        expected_chunks = 0 if info is None else -(-len(data) // blobs.CHUNK_BYTES) * (4 if stage == "delete" else 1)
        assert counts["file_uploads"] == 0 and counts["file_chunks"] == expected_chunks, (stage, found, counts)
        if db.read(owners_q.agent_access, agent_id) is not None:   # the next round starts empty
            await db.write(agent_lifecycle.delete_agent, agent_id)
        assert db.read(blobs.counts)["file_chunks"] == 0
        return found
    finally:
        await db.close()


async def _kill_rounds(tmp_path, stores, rounds: int) -> dict:
    kind, flags, where = stores
    seed = int(os.environ.get("SEED_AGENTS_TEST_SEED") or random.randrange(1 << 32))
    rng = random.Random(seed)
    outcomes: dict = {}
    for r in range(rounds):
        stage = ("upload", "commit", "delete")[r % 3]
        found = await _kill_round(tmp_path, flags, where, rng, stage)
        outcomes.setdefault(stage, set()).add(found)
    return outcomes


@pytest.mark.parametrize("stores", ["sqlite"], indirect=True)
async def test_sigkill_mid_upload_commit_and_delete_leaves_whole_or_nothing(tmp_path, stores):
    outcomes = await _kill_rounds(tmp_path, stores, 3)
    assert outcomes["upload"] == {"nothing"}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("stores", ["sqlite", "postgresql"], indirect=True)
async def test_sigkill_many_rounds(tmp_path, stores):
    outcomes = await _kill_rounds(tmp_path, stores, 30)
    print(f"after a SIGKILL, by stage: {outcomes}")
    assert outcomes["upload"] == {"nothing"}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("stores", ["sqlite"], indirect=True)
async def test_concurrent_8_mib_chunk_uploads_stay_within_the_documented_rss(tmp_path, stores):
    """docs/operations.md "Files": each socket holds the chunk it sent, and only UPLOAD_SLOTS chunks
    are worked on at once, so N uploaders cost about 2N chunks, not N x (every copy of one).
    The chunks are signed before they are sent (raw sockets), so the test process's own signing
    does not stall its sockets' keepalive while the server makes them wait their turn."""
    from seed_agents.clients.raw import RawV2, unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    kind, flags, where = stores
    (srv,) = servers(tmp_path, flags)
    srv.start()
    n, step = int(os.environ.get("SEED_AGENTS_TEST_UPLOADERS", "50")), 8 * MiB
    chunk = os.urandom(step)
    keys = [Keypair.generate() for _ in range(n)]   # one account each: 8 uploads in progress per account
    socks = [await RawV2.open(srv.url, decode=True) for _ in range(n)]
    try:
        agents, ups = [], []
        for kp, sock in zip(keys, socks):
            agent = (await sock.call(kp, {"_": "CreateAgent", "definition": ECHO}))["agentId"]
            begin = await sock.call(kp, actions.begin_file_upload({"kind": "memory", "agentId": agent, "path": "u"},
                                                                  2 * step))
            agents.append(agent)
            ups.append(begin["uploadId"])
        base = peak = rss(srv.proc.pid)
        done = asyncio.Event()

        async def sample():
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss(srv.proc.pid))
                await asyncio.sleep(0.01)   # the sampling interval: a measurement, not a wait

        sampler = asyncio.ensure_future(sample())
        waits = []
        for offset in (0, step):
            envelopes = [sign_envelope(kp, actions.append_file_upload_chunk(u, offset, chunk), ts=unique_ts())
                         for kp, u in zip(keys, ups)]
            started = time.monotonic()
            answers = await asyncio.gather(*(sock.request(e, timeout=300) for sock, e in zip(socks, envelopes)))
            waits.append(time.monotonic() - started)
            assert all(a.get("received") == offset + step for a in answers), [a for a in answers if "received" not in a][:3]
        done.set()
        await sampler
        for kp, sock, u in zip(keys, socks, ups):
            answer = await sock.call(kp, actions.commit_file_upload(u, hashlib.sha256(chunk + chunk).hexdigest()))
            assert answer["_"] == "CommitFileUploadResponse", answer
        print(f"server RSS {base / MiB:.0f} MiB before, {peak / MiB:.0f} MiB at most with {n} uploaders"
              f" (each round of {n} chunks took {', '.join(f'{w:.1f}' for w in waits)} s)")
        assert peak - base < n * 2 * step + 150 * MiB, (base, peak)   # two chunks a socket, plus the slots
    finally:
        for sock in socks:
            await sock.close()
        srv.kill()
