"""The backup methods docs/operations.md recommends work on a live WAL database."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid

import apsw
import pytest

from seed_agents import schema
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.store import agents, events, sessions

from tests.waiting import until

PAYLOAD = {"type": "message", "role": "user", "content": "backed up"}


def setup(conn):
    agents.create_agent(conn, "a1", "z6MkAccount", {"name": "n"}, "/d", 1)
    sessions.create_session(conn, "s1", "z6MkAccount", "a1", None, 1)


def backup_api(src_path: str, dst_path: str) -> None:
    src = apsw.Connection(src_path, flags=apsw.SQLITE_OPEN_READONLY)
    dst = apsw.Connection(dst_path)
    with dst.backup("main", src, "main") as b:
        while not b.done:
            b.step(-1)  # all pages in one step: one consistent snapshot, writers keep going
    dst.close()
    src.close()


def vacuum_into(src_path: str, dst_path: str) -> None:
    src = apsw.Connection(src_path, flags=apsw.SQLITE_OPEN_READONLY)
    src.execute("VACUUM INTO ?", (dst_path,))
    src.close()


def cli_backup(src_path: str, dst_path: str) -> None:
    subprocess.run(["sqlite3", src_path, f".backup '{dst_path}'"], check=True, capture_output=True)


METHODS = [backup_api, vacuum_into]
if shutil.which("sqlite3"):
    METHODS.append(cli_backup)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.__name__)
async def test_backup_while_writing_is_consistent_and_opens_at_current_version(tmp_path, method):
    path, copy = str(tmp_path / "live.sqlite"), str(tmp_path / "copy.sqlite")
    db = Database(path)
    await db.start()
    await db.write(setup)
    stop = asyncio.Event()
    written = [0]

    async def writer():
        while not stop.is_set():
            await db.write(events.append_event, "s1", PAYLOAD, str(uuid.uuid4()), 2)
            written[0] += 1

    tasks = [asyncio.create_task(writer()) for _ in range(8)]
    # the copy starts while the writers are in full swing
    await until(lambda: written[0] >= 16, 10, step=0.005, what="16 writes")
    await asyncio.to_thread(method, path, copy)
    stop.set()
    await asyncio.gather(*tasks)
    await db.close()

    restored = open_database(copy)  # through the gate, like a restore would
    try:
        assert restored.execute("PRAGMA user_version").fetchall()[0][0] == schema.CURRENT_VERSION
        seqs = [s for s, _ in events.event_bodies_after(restored, "s1", 0, 10**9)]
        assert seqs and seqs == list(range(1, len(seqs) + 1))
        assert events.last_seq(restored, "s1") == len(seqs)
        assert restored.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        restored.close()
