"""Two servers' writers on one agent's row, with and without the end writes, in one run:

    python -m bench.hot_agent [--url postgresql://...] [--rounds 4] [--seconds 4] [--loops 8]

What `bench.cluster` part b measures end to end (turns through two servers against one, same
agent), taken down to the writers, where the hot row is: two processes stand for two servers,
each with its own `PgDatabase` (connections and group-committing writer thread),
and `--loops` concurrent turn loops per arm run the writes of an echo turn, each awaited in
turn as the runtime does: the user message (append + touch), the claim (status running), the
reply (append) and the run's end (append + status idle), every session one of the same agent.
"one" runs all loops on one writer, "two" splits them over both; each for `--seconds`.

Arms: "after" is this tree (an agent's row written once per batch, at its end:
server/database/end_writes.py); "before" the same writers with the end writes off (each write
made at once, as before), so the difference is that one change. Each round runs every arm, the
order rotating. Reported per arm: turns/s, two / one, and the jobs cut from a batch to wait
alone for a row lock (`PgDatabase.cuts`) per 100 turns; and the load average. Bounded in time;
nothing is asserted. Loopback PostgreSQL only (the URL from SEED_AGENTS_TEST_POSTGRES_URL).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

from bench.cluster import PG_URL_ENV, PgSchema, _loopback_only

DEFINITION = {"name": "hot", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}
ACCOUNT = "z6MkHotAgentBench"


def _db(url: str):
    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.database.url import parse_storage_url

    return PgDatabase(parse_storage_url(url))


class _AtOnce:
    """The writer's connection as the store saw it before: no `end_writes`, so every write of
    the agent's row is made at once (the "before" arm; the writer itself is unchanged)."""

    end_writes = None

    def __init__(self, conn) -> None:   # noqa: ANN001
        self._conn = conn
        self.traits = conn.traits

    def execute(self, sql: str, params=()):   # noqa: ANN001, ANN201
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, seq):   # noqa: ANN001, ANN201
        return self._conn.executemany(sql, seq)

    def changes(self) -> int:
        return self._conn.changes()


async def turn_loop(db, session_id: str, agent_id: str, stop: float, done: list[int],  # noqa: ANN001
                    end_writes: bool) -> None:
    from seed_agents.server.store import agents as agents_q
    from seed_agents.server.store import events as events_q

    def write(fn):   # noqa: ANN001, ANN202
        return db.write(fn if end_writes else (lambda c: fn(_AtOnce(c))))

    def message(role: str, text: str) -> dict:
        return {"type": "message", "role": role, "content": text}

    while time.monotonic() < stop:
        now = int(time.time() * 1000)
        await write(lambda c, now=now: (
            events_q.append_event(c, session_id, message("user", "hi"), str(uuid.uuid4()), now),
            agents_q.touch_agent(c, agent_id, now, decoded=False)))
        await write(lambda c, now=now: agents_q.set_agent_status(c, agent_id, "running", now))
        await write(lambda c, now=now: events_q.append_event(c, session_id, message("assistant", "echo: hi"),
                                                             str(uuid.uuid4()), now))
        await write(lambda c, now=now: (
            events_q.append_event(c, session_id, {"type": "status", "status": "idle"}, str(uuid.uuid4()), now),
            agents_q.set_agent_status(c, agent_id, "idle", now, decoded=False)))
        done[0] += 1


async def _server(url: str, sessions: list[str], agent_id: str, end_writes: bool, start_at: float,
                  seconds: float) -> dict:
    """One "server": its own writer, its turn loops, from `start_at` (wall clock) for `seconds`."""
    db = _db(url)
    await db.start()
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        done = [0]
        stop = time.monotonic() + seconds
        t0 = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(turn_loop(db, sid, agent_id, stop, done, end_writes)
                                                for sid in sessions)), seconds + 60)
        return {"turns": done[0], "seconds": time.perf_counter() - t0, "cuts": db.cuts,
                "batches": db.batches, "jobs": db.jobs}
    finally:
        await db.close()


def _server_process(args: tuple) -> dict:
    return asyncio.run(_server(*args))


def one_cell(url: str, end_writes: bool, servers: int, loops: int, seconds: float) -> dict:
    """`loops` turn loops on sessions of one agent, over `servers` processes (each a server's
    writer: its own connections, thread and GIL), started together."""
    from concurrent.futures import ProcessPoolExecutor

    from seed_agents.server.store import agents as agents_q
    from seed_agents.server.store import sessions as sessions_q

    agent_id = str(uuid.uuid4())
    sessions = [str(uuid.uuid4()) for _ in range(loops)]
    now = int(time.time() * 1000)

    def setup(conn):
        agents_q.create_agent(conn, agent_id, ACCOUNT, DEFINITION, "/tmp/hot", now)
        for sid in sessions:
            sessions_q.create_session(conn, sid, ACCOUNT, agent_id, "hot", now)

    db = _db(url)
    db.start_sync()
    try:
        db.write_sync(setup)
    finally:
        db.close_sync()
    start_at = time.time() + 1.5   # every process connected and waiting
    with ProcessPoolExecutor(servers) as pool:
        out = list(pool.map(_server_process, [(url, sessions[i::servers], agent_id, end_writes, start_at, seconds)
                                              for i in range(servers)]))
    turns = sum(o["turns"] for o in out)
    elapsed = max(o["seconds"] for o in out)
    return {"turns_per_s": round(turns / elapsed, 1), "turns": turns,
            "cuts_per_100_turns": round(100 * sum(o["cuts"] for o in out) / max(turns, 1), 1),
            "jobs_per_batch": round(sum(o["jobs"] for o in out) / max(sum(o["batches"] for o in out), 1), 2)}


async def run(url: str, rounds: int, seconds: float, loops: int) -> dict:
    arms = [(tree, servers) for tree in ("before", "after") for servers in (1, 2)]
    per_round = []
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        if r % 2:
            order.reverse()
        row: dict = {"loadavg": round(os.getloadavg()[0], 1)}
        for tree, servers in order:
            with PgSchema(url) as schema:
                row[f"{tree} {'two' if servers == 2 else 'one'}"] = await asyncio.to_thread(
                    one_cell, schema.url, tree == "after", servers, loops, seconds)
        for tree in ("before", "after"):
            row[f"{tree} two / one"] = round(row[f"{tree} two"]["turns_per_s"] / row[f"{tree} one"]["turns_per_s"], 3)
        print(json.dumps(row), flush=True)
        per_round.append(row)
    return {"rounds": per_round}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get(PG_URL_ENV, ""))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--loops", type=int, default=8, help="concurrent turn loops (sessions of the agent)")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error(f"no PostgreSQL URL: pass --url or set {PG_URL_ENV}")
    _loopback_only(args.url)
    res = asyncio.run(run(args.url, args.rounds, args.seconds, args.loops))
    rows = res["rounds"]

    def med(values: list[float]) -> float:
        values = sorted(values)
        n = len(values)
        return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2

    print("\n| tree | one writer, turns/s | two writers, turns/s | two / one, median (min-max) | cut jobs per 100 turns, two |"
          "\n|---|---|---|---|---|")
    for tree in ("before", "after"):
        ratios = [r[f"{tree} two / one"] for r in rows]
        print(f"| {tree} | {med([r[f'{tree} one']['turns_per_s'] for r in rows]):.0f} | "
              f"{med([r[f'{tree} two']['turns_per_s'] for r in rows]):.0f} | {med(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {med([r[f'{tree} two']['cuts_per_100_turns'] for r in rows]):.1f} |")
    print(f"\nload average {min(r['loadavg'] for r in rows)}-{max(r['loadavg'] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
