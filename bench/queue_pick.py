"""Taking the next queued run, per call, in one run: on SQLite a session's next
(`store.runs.queued_runs_of_session`), on PostgreSQL a claim's pick (`store.leases._CLAIM`):

    python -m bench.queue_pick [--depths 50,50000] [--done 500] [--calls 3000] [--rounds 5]
                               [--postgres URL]

One SQLite file per depth: a session with `--done` finished runs and N queued behind. Each
round times, on the same file and interleaved: the function as it is on the server's driver
(apsw, SQLite 3.5x), the statement before the CAST fix (a bare `?` equal to the ORDER BY's index
column and as the LIMIT, which SQLite 3.54 re-prepares at every call), the function again (A/A,
the noise), and the same statement on the standard library's sqlite3 (an older SQLite). CPU time
per call (process_time), the median of the rounds; the query plan is printed once. Bounded in
count; nothing is asserted.

With `--postgres URL`, each shape of queue gets a fresh schema there, and the claim's pick (its
SELECT ... FOR UPDATE SKIP LOCKED of a server's batch, 16 runs, without the UPDATE, so every call sees the same
queue) is timed on the server (EXPLAIN ANALYZE's execution time, median of the calls), as it is
now, as it was (a NOT EXISTS per queued run, walking a session's whole queue) and again (A/A).
Each shape has 5,000 finished runs before its queue, as a store in use has.
"""
from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import tempfile
import time

from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.runtime.leasing import CLAIM_BATCH
from seed_agents.server.store import agents, runs, sessions

ACCOUNT = "z6MkBench"
# The statement as it was before the CASTs (commit 2d7da22), kept here to measure beside.
OLD_SQL = (f"SELECT {runs.COLUMNS}{runs.QUEUED_EXTRA} FROM runs WHERE session_id = ? AND {runs.ACTIVE}"
           " AND status = 'queued' AND NOT EXISTS (SELECT 1 FROM runs w WHERE w.session_id = ?"
           " AND w.status = 'waiting') ORDER BY created_at, rowid LIMIT ?")


def _fill(conn, queued: int, done: int) -> None:
    agents.create_agent(conn, "a0", ACCOUNT, {"name": "bench"}, "/tmp/bench", 1)
    sessions.create_session(conn, "s0", ACCOUNT, "a0", None, 1)
    with conn:
        for i in range(done):
            runs.create_run(conn, f"d{i:06d}", ACCOUNT, "a0", "s0", None, 10 + i)
            conn.execute("UPDATE runs SET status = 'succeeded' WHERE id = ?", (f"d{i:06d}",))
        for i in range(queued):
            runs.create_run(conn, f"q{i:06d}", ACCOUNT, "a0", "s0", None, 10_000_000 + i)


def _per_call(fn, calls: int) -> float:
    fn()
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls * 1e6


def _current_sql(conn) -> tuple[str, tuple]:
    seen: list = []

    def tracer(cursor, sql, bindings):
        seen.append((sql, tuple(bindings)))
        return True

    conn.exec_trace = tracer
    runs.queued_runs_of_session(conn, "s0", 1)
    conn.exec_trace = None
    return seen[0]


def measure(directory: str, queued: int, done: int, calls: int, rounds: int) -> dict:
    path = os.path.join(directory, f"q{queued}.sqlite")
    conn = open_database(path)
    _fill(conn, queued, done)
    sql, bindings = _current_sql(conn)
    plan = [row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)]
    std = sqlite3.connect(path)
    cells: dict[str, list[float]] = {"after": [], "before": [], "after (A/A)": [], "stdlib": []}
    old = ("s0", "s0", 1)
    for _ in range(rounds):
        cells["after"].append(_per_call(lambda: runs.queued_runs_of_session(conn, "s0", 1), calls))
        cells["before"].append(_per_call(lambda: runs.queued_rows(conn.execute(OLD_SQL, old).fetchall()), calls))
        cells["after (A/A)"].append(_per_call(lambda: runs.queued_runs_of_session(conn, "s0", 1), calls))
        cells["stdlib"].append(_per_call(lambda: runs.queued_rows(std.execute(sql, bindings).fetchall()), calls))
    assert runs.queued_runs_of_session(conn, "s0", 1)[0]["id"] == "q000000"
    std.close()
    conn.close()
    return {"plan": plan, **{k: statistics.median(v) for k, v in cells.items()}}


# The claim's pick as it was before the deep-queue fix (commit ac6ea10), to measure beside.
OLD_PICK = """
WITH pick AS (
    SELECT r.id FROM runs r
    WHERE r.status = 'queued' AND r.session_id IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM runs o
          WHERE o.session_id = r.session_id AND o.id <> r.id
            AND o.status IN ('queued', 'claimed', 'running', 'waiting')
            AND (o.status <> 'queued' OR (o.created_at, o.pos) < (r.created_at, r.pos)))
    ORDER BY r.created_at, r.pos
    LIMIT ?
    FOR UPDATE SKIP LOCKED)
"""
# (sessions, queued per session, whether every other session's head is already running)
PG_SHAPES = ((1, 50, True), (1, 5000, True), (1, 20000, True), (64, 1, False), (64, 200, True),
             (1000, 1, True))


def _pg_fill(conn, n_sessions: int, per: int, live: bool) -> None:
    agents.create_agent(conn, "a0", ACCOUNT, {"name": "bench"}, "/tmp/bench", 1)
    for s in range(n_sessions):
        sessions.create_session(conn, f"s{s:05d}", ACCOUNT, "a0", None, 1)
    for k in range(5000):
        runs.create_run(conn, f"d{k:06d}", ACCOUNT, "a0", f"s{k % n_sessions:05d}", None, 10 + k)
    conn.execute("UPDATE runs SET status = 'succeeded' WHERE status = 'queued'")
    for i in range(per):
        for s in range(n_sessions):
            runs.create_run(conn, f"q{s:05d}_{i:06d}", ACCOUNT, "a0", f"s{s:05d}", None,
                            100_000 + i * n_sessions + s)
    if live:
        for s in range(0, n_sessions, 2):
            conn.execute("UPDATE runs SET status = 'running', lease_owner = 'x', lease_expires_at = ?"
                         " WHERE id = ?", (1 << 60, f"q{s:05d}_000000"))


def _pg_timed(raw, stmt, params, calls: int) -> tuple[float, list]:
    """(the statement's median execution time on the server in ms, the ids it picks)."""
    ids = sorted(row[0] for row in raw.execute(stmt.text, params).fetchall())
    times = []
    for _ in range(calls):
        plan = "\n".join(row[0] for row in raw.execute("EXPLAIN (ANALYZE, TIMING OFF) " + stmt.text, params))
        times.append(float(re.search(r"Execution Time: ([0-9.]+)", plan).group(1)))
    return statistics.median(times), ids


def measure_postgres(url: str, calls: int) -> None:
    import glob
    import uuid

    import psycopg

    from seed_agents.server.database.postgres.database import PgConn
    from seed_agents.server.database.postgres.dialect import to_postgres
    from seed_agents.server.store import leases

    now = to_postgres(leases._CLAIM.split("UPDATE runs SET")[0] + "SELECT id FROM pick")
    old = to_postgres(OLD_PICK + "SELECT id FROM pick")
    schema_files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "schema", "postgres", "*.sql")))
    print(f"PostgreSQL, the claim's pick of {CLAIM_BATCH} (server execution time, median):")
    for n_sessions, per, live in PG_SHAPES:
        schema = "bench_" + uuid.uuid4().hex[:12]
        # as the server connects (server/database/postgres/database.py): parameters bound by the server
        raw = psycopg.connect(url, autocommit=True, cursor_factory=psycopg.RawCursor)
        try:
            raw.execute(f"CREATE SCHEMA {schema}")
            raw.execute(f"SET search_path = {schema}")
            for path in schema_files:
                raw.execute(open(path).read())
            raw.execute("BEGIN")
            _pg_fill(PgConn(raw), n_sessions, per, live)
            raw.execute("COMMIT")
            raw.execute("ANALYZE runs")
            after, ids = _pg_timed(raw, now, (CLAIM_BATCH,) * now.text.count("$"), calls)
            before, old_ids = _pg_timed(raw, old, (CLAIM_BATCH,), calls)
            again, _ = _pg_timed(raw, now, (CLAIM_BATCH,) * now.text.count("$"), calls)
            assert ids == old_ids, (ids, old_ids)
            print(f"  {n_sessions:>5,} sessions x {per:>6,} queued{', half busy' if live else ''}:"
                  f" after {after:6.2f} ms, before {before:6.2f} ms, A/A {again:6.2f} ms;"
                  f" after/before {after / before:.2f}, A/A {again / after:.2f}")
        finally:
            raw.execute("ROLLBACK") if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE else None
            raw.execute(f"DROP SCHEMA {schema} CASCADE")
            raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="50,50000")
    parser.add_argument("--done", type=int, default=500)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", metavar="URL", help="also time the claim's pick on PostgreSQL")
    args = parser.parse_args()
    import apsw
    print(f"apsw's SQLite {apsw.sqlite_lib_version()}, the standard library's {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as directory:
        for depth in (int(d) for d in args.depths.split(",")):
            out = measure(directory, depth, args.done, args.calls, args.rounds)
            if depth == int(args.depths.split(",")[0]):
                print("plan:", " / ".join(out["plan"]))
            print(f"{depth:>7,} queued: after {out['after']:6.1f} µs, before {out['before']:6.1f} µs,"
                  f" A/A {out['after (A/A)']:6.1f} µs, stdlib {out['stdlib']:6.1f} µs;"
                  f" after/before {out['after'] / out['before']:.2f},"
                  f" A/A {out['after (A/A)'] / out['after']:.2f}")
    if args.postgres:
        measure_postgres(args.postgres, max(5, min(args.calls // 100, 30)))


if __name__ == "__main__":
    main()
