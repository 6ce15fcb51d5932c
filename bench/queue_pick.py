"""Taking a session's next queued run (`store.runs.queued_runs_of_session`), per call, in one run:

    python -m bench.queue_pick [--depths 50,50000] [--done 500] [--calls 3000] [--rounds 5]

One SQLite file per depth: a session with `--done` finished runs and N queued behind. Each
round times, on the same file and interleaved: the function as it is on the server's driver
(apsw, SQLite 3.5x), the statement before the CAST fix (a bare `?` equal to the ORDER BY's index
column and as the LIMIT, which SQLite 3.54 re-prepares at every call), the function again (A/A,
the noise), and the same statement on the standard library's sqlite3 (an older SQLite). CPU time
per call (process_time), the median of the rounds; the query plan is printed once. Bounded in
count; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time

from seed_agents.server.database.sqlite.gate import open_database
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="50,50000")
    parser.add_argument("--done", type=int, default=500)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
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


if __name__ == "__main__":
    main()
