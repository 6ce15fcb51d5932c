"""How the PostgreSQL writer should talk to the database, measured: binding, prepared statements,
pipeline mode, the BEGIN's round trip, group commit.

`python -m bench.pg_statements [--url postgresql://...] [--jobs N] [--rounds R]` (the URL defaults
to SEED_AGENTS_TEST_POSTGRES_URL; loopback only). One connection, as the server's writer has, runs
jobs shaped like a CreateSession's (the idempotency lookup, the agent read, the session insert,
the agent's touch, the idempotency record: 2 reads and 3 writes, each read's result used before
the next statement) in batches of 16 per transaction, each job in a savepoint (group commit), or
one transaction per job. Variants, interleaved in rounds in one run (ratios to the first):

- `client`: client-side binding (`ClientCursor`), BEGIN its own round trip (main before);
- `client+begin`: the same with BEGIN sent in front of the first statement (the server now);
- `prepared`: server-side binding, every statement prepared on first use (`prepare_threshold=0`);
- `pipeline`: `prepared` inside psycopg's pipeline mode (BEGIN, SAVEPOINT and writes whose result
  is not read go out without waiting; a read waits for its own result);
- `client, one per commit`: one transaction per job (main before group commit), to show what
  group commit itself gives.

Work happens in a schema of its own, dropped at the end. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid

BATCH = 16


def _setup(conn) -> None:
    conn.execute("CREATE TABLE agents (id text PRIMARY KEY, account text NOT NULL, updated_at bigint NOT NULL)")
    conn.execute("CREATE TABLE sessions (id text PRIMARY KEY, agent_id text NOT NULL, title text, created_at bigint NOT NULL)")
    conn.execute("CREATE TABLE idem (account text, action text, client_id text, answer text,"
                 " PRIMARY KEY (account, action, client_id))")
    conn.execute("INSERT INTO agents VALUES ('a1', 'acc', 0)")


def _job(conn, i: int, tag: str, begin: str = "") -> None:
    cur = conn.cursor()
    q = "SELECT answer FROM idem WHERE account = %s AND action = %s AND client_id = %s"
    cur.execute(begin + q, ("acc", "CreateSession", f"{tag}-{i}"))
    for _ in range(begin.count(";")):
        cur.nextset()
    assert cur.fetchone() is None
    cur.execute("SELECT account FROM agents WHERE id = %s", ("a1",))
    assert cur.fetchone()[0] == "acc"
    cur.execute("INSERT INTO sessions VALUES (%s, %s, %s, %s)", (f"{tag}-{i}", "a1", "t", i))
    cur.execute("UPDATE agents SET updated_at = greatest(updated_at, %s) WHERE id = %s", (i, "a1"))
    cur.execute("INSERT INTO idem VALUES (%s, %s, %s, %s)", ("acc", "CreateSession", f"{tag}-{i}", "x"))


def _run(conn, variant: str, jobs: int, tag: str) -> float:
    t0 = time.perf_counter()
    if variant == "client, one per commit":
        for i in range(jobs):
            conn.execute("BEGIN")
            _job(conn, i, tag)
            conn.execute("COMMIT")
        return jobs / (time.perf_counter() - t0)
    merged = variant == "client+begin"
    pipeline = conn.pipeline() if variant == "pipeline" else None
    if pipeline is not None:
        pipeline.__enter__()
    try:
        for start in range(0, jobs, BATCH):
            if not merged:
                conn.execute("BEGIN")
            for i in range(start, min(jobs, start + BATCH)):
                if merged and i == start:
                    _job(conn, i, tag, begin="BEGIN; SAVEPOINT job; ")
                    continue
                if i == start:
                    conn.execute("SAVEPOINT job")
                elif variant.startswith("client"):   # two statements, one message
                    conn.execute("RELEASE SAVEPOINT job; SAVEPOINT job")
                else:   # server-side binding: one statement per message (pipelined in `pipeline`)
                    conn.execute("RELEASE SAVEPOINT job")
                    conn.execute("SAVEPOINT job")
                _job(conn, i, tag)
            conn.execute("COMMIT")
    finally:
        if pipeline is not None:
            pipeline.__exit__(None, None, None)
    return jobs / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    import psycopg

    from tests.pg import with_schema

    parser = argparse.ArgumentParser(prog="python -m bench.pg_statements", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SEED_AGENTS_TEST_POSTGRES_URL", ""))
    parser.add_argument("--jobs", type=int, default=480)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("no PostgreSQL URL: pass --url or set SEED_AGENTS_TEST_POSTGRES_URL")
    from bench.cluster import _loopback_only
    from bench.conditions import machine_info

    _loopback_only(args.url)
    schema = "bench_" + uuid.uuid4().hex[:12]
    variants = ["client", "client+begin", "prepared", "pipeline", "client, one per commit"]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    load = [os.getloadavg()]
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        url = with_schema(args.url, schema)
        with psycopg.connect(url, autocommit=True) as conn:
            _setup(conn)
        conns = {v: psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor)
                 if v.startswith("client") else psycopg.connect(url, autocommit=True, prepare_threshold=0)
                 for v in variants}
        try:
            for r in range(args.rounds + 1):   # round 0 warms up (and prepares)
                order = variants if r % 2 == 0 else variants[::-1]
                for v in order:
                    rate = _run(conns[v], v, args.jobs, f"{r}-{v}")
                    if r:
                        rates[v].append(rate)
        finally:
            for c in conns.values():
                c.close()
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
    load.append(os.getloadavg())
    base = statistics.median(rates["client"])
    result = {"machine": machine_info(), "loadavg": [round(x, 2) for pair in load for x in pair],
              "jobs_per_round": args.jobs, "batch": BATCH,
              "jobs_per_s": {v: round(statistics.median(x), 1) for v, x in rates.items()},
              "ratio_to_client": {v: round(statistics.median(x) / base, 3) for v, x in rates.items()},
              "runs": {v: [round(y, 1) for y in x] for v, x in rates.items()}}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
