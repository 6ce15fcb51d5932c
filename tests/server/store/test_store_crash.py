"""Acknowledged means durable: SIGKILL a writer mid-stream, every acknowledged seq survives.

The child appends events through Database from several tasks and prints each seq once its
write call has returned (i.e. after COMMIT). The parent kills it at a random moment, reopens the
file through the gate (WAL recovery) and checks that every printed seq is there and that the
seqs are dense. SIGKILL loses the process, not the OS page cache, so this proves commit-before-
acknowledge and recovery, not power-loss durability (that is synchronous=FULL's job).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import events, sessions

CHILD = textwrap.dedent("""
    import asyncio, sys, uuid
    from seed_agents.server.store import agents, events, sessions
    from seed_agents.server.database.sqlite.database import Database

    def setup(conn):
        if sessions.get_session(conn, "s1") is None:
            agents.create_agent(conn, "a1", "z6MkAccount", {"name": "n"}, "/d", 1)
            for sid in ("s1", "s2"):
                sessions.create_session(conn, sid, "z6MkAccount", "a1", None, 1)

    async def main(path):
        db = Database(path)
        await db.start()
        await db.write(setup)
        out = sys.stdout
        out.write("ready\\n"); out.flush()

        async def writer(session_id):
            while True:
                payload = {"type": "message", "role": "user", "content": "x" * 200}
                event, _ = await db.write(events.append_event, session_id, payload, str(uuid.uuid4()), 2)
                out.write(f"{session_id} {event['seq']}\\n"); out.flush()

        await asyncio.gather(*(writer("s1" if i % 2 else "s2") for i in range(16)))

    asyncio.run(main(sys.argv[1]))
""")


@pytest.mark.parametrize("run", range(5))
def test_sigkill_loses_no_acknowledged_event(tmp_path, run):
    path = str(tmp_path / "db.sqlite")
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def pump():  # read continuously so the child never blocks on a full pipe
        for line in child.stdout:
            if line == "ready\n":
                ready.set()
            elif line.endswith("\n"):  # a line cut by the kill is not an acknowledgement
                lines.append(line)

    reader = threading.Thread(target=pump)
    reader.start()
    try:
        assert ready.wait(30), child.stderr.read() if child.poll() is not None else "child not ready"
        threading.Event().wait(random.uniform(0.2, 1.0))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        reader.join()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    acked: dict[str, set[int]] = {"s1": set(), "s2": set()}
    for line in lines:
        session_id, seq = line.split()
        acked[session_id].add(int(seq))
    assert sum(map(len, acked.values())) > 0, "the child acknowledged nothing before the kill"

    db = Database(path)
    db.start_sync()  # the gate opens the crashed file; SQLite recovers the WAL
    try:
        for session_id, seqs in acked.items():
            stored = [seq for seq, _ in db.read(events.event_bodies_after, session_id, 0, 10**9)]
            assert stored == list(range(1, len(stored) + 1))          # dense, no repeats
            assert seqs <= set(stored)                                 # nothing acknowledged is lost
            assert db.read(events.last_seq, session_id) == len(stored)  # counter matches the rows
            assert db.read(sessions.get_session, session_id)["id"] == session_id
        assert os.path.getsize(path) > 0
    finally:
        db.close_sync()
