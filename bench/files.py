"""Files bench: upload and read throughput through a real server, each beside the raw
speed of the same storage measured in the same run, and search latency over 10,000 memory files.

- upload: a file sent in 8 MiB chunks (Begin, Append..., Commit with its sha256) by a client
  over the WebSocket, MiB/s from the first chunk to the commit's answer; the raw figures write
  the same bytes straight to the storage: a file in the data directory (write + fsync), and the
  same 1 MiB chunks inserted into a table of the same database (one transaction, committed).
- read: the file read back in 8 MiB ranges (ReadAgentMemoryFile offset/length); the raw figure
  selects the same chunks from the database directly.
- search: 10,000 text memory files of one agent (written through the store functions, before
  the server starts), then SearchAgentMemory queries one at a time over the socket: p50/p99 ms.

- concurrent: N uploaders (one account and socket each, 50 by default) send an 8 MiB chunk
  each at once, twice (the stress test's load, tests/server/handlers/test_files_durability.py):
  the server's RSS growth at its peak (sampled every 10 ms) and each round's time. With
  `--tree DIR` (repeatable) the same part runs for each tree's server in alternating rounds,
  this tree's twice (its A/A), so the ratios come from one run.

Run: `python -m bench.files [--quick] [--storage-url postgresql://...]` (prints JSON);
`python -m bench.files --concurrent [--tree DIR] [--rounds N] [--uploaders N]`: the concurrent part alone.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seed_agents.clients import AgentsClient, actions
from seed_agents.protocol.wire.keys import Keypair

from bench.meters import rss_kb
from bench.processes import Server
from bench.sqlite_ab import loop_cpu_ns, server_cpu_ns
from bench.stats import percentile

MiB = 1 << 20
CHUNK = 8 * MiB
WORDS = ("lisbon porto tram nata coffee river bridge tile azulejo market fado harbor sardine wine "
         "castle hill museum garden train ferry beach sunset street bakery bookshop library station "
         "pastry tower square cathedral palace festival music dance sailor atlantic ocean light").split()
ECHO = {"name": "bench", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


# A vocabulary with a long tail (a word's frequency ~ 1/rank, as in prose): the common words
# above plus 5,000 rarer ones, so a query matches what it would in notes, not every file.
VOCABULARY = WORDS + [f"{a}{b}" for a in WORDS for b in ("s", "ed", "ing", "er", "ly", "ist", "ism", "ful", "less",
                                                             "ness", "ment", "ous", "ive", "al", "ic", "ity", "ize",
                                                             "ward", "wise", "like", "ship", "hood", "dom", "ure",
                                                             "ery", "ette", "let", "ling", "ock", "ory", "ant", "ent",
                                                             "ian", "ine", "ite", "oid", "ose", "tude", "y", "ie",
                                                             "o", "a", "i", "u", "an", "on", "en", "in", "un")]
_WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]


def _words(rng: random.Random, n: int) -> list[str]:
    return rng.choices(VOCABULARY, _WEIGHTS, k=n)


def _pattern(size: int) -> bytes:
    return (hashlib.sha256(b"files-bench").digest() * (size // 32 + 1))[:size]


# -- raw speeds ------------------------------------------------------------------------------
def raw_disk_write(folder: str, data: bytes) -> float:
    path = os.path.join(folder, "raw.bin")
    start = time.perf_counter()
    with open(path, "wb") as f:
        for at in range(0, len(data), CHUNK):
            f.write(data[at:at + CHUNK])
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - start
    os.unlink(path)
    return len(data) / MiB / seconds


def raw_db(storage_url: str | None, db_path: str, data: bytes) -> tuple[float, float]:
    """(write MiB/s, read MiB/s) of 1 MiB chunks inserted into / selected from a table of the
    same database, outside the server."""
    rows = [(i, data[at:at + MiB]) for i, at in enumerate(range(0, len(data), MiB))]
    if storage_url:
        import psycopg

        with psycopg.connect(storage_url, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE raw_chunks (seq BIGINT PRIMARY KEY, data BYTEA)")
            start = time.perf_counter()
            with conn.transaction():
                cur = conn.cursor()
                for row in rows:
                    cur.execute("INSERT INTO raw_chunks VALUES (%s, %s)", row, binary=True)
            write = len(data) / MiB / (time.perf_counter() - start)
            start = time.perf_counter()
            for seq, _ in rows:
                conn.cursor(binary=True).execute("SELECT data FROM raw_chunks WHERE seq = %s", (seq,)).fetchone()
            read = len(data) / MiB / (time.perf_counter() - start)
        return write, read
    import apsw

    conn = apsw.Connection(db_path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS raw_chunks (seq INTEGER PRIMARY KEY, data BLOB)")
    start = time.perf_counter()
    with conn:
        conn.executemany("INSERT INTO raw_chunks VALUES (?, ?)", rows)
    write = len(data) / MiB / (time.perf_counter() - start)
    start = time.perf_counter()
    for seq, _ in rows:
        conn.execute("SELECT data FROM raw_chunks WHERE seq = ?", (seq,)).fetchone()
    read = len(data) / MiB / (time.perf_counter() - start)
    conn.execute("DROP TABLE raw_chunks")
    conn.close()
    return write, read


# -- search corpus -----------------------------------------------------------------------------
def seed_memory(storage_url: str | None, db_path: str, account: str, files: int) -> str:
    """An agent with `files` text memory files, written with the store functions; its id."""
    from seed_agents.server.store import accounts, agents
    from seed_agents.server.store import memory as memory_q

    rng = random.Random(23)
    agent_id = "bench-agent"

    def fill(conn):
        accounts.ensure_account(conn, account, 1)
        agents.create_agent(conn, agent_id, account, dict(ECHO), "/tmp/bench-files", 1)
        limits = memory_q.MemoryLimits(quota=None, max_files=files + 1)
        for i in range(files):
            text = " ".join(_words(rng, rng.randrange(40, 400)))
            memory_q.write_file(conn, agent_id, account, f"notes/{i // 100}/note-{i}.md", text.encode(), 1, limits)

    if storage_url:
        from seed_agents.server.database import parse_storage_url
        from seed_agents.server.database.postgres.database import PgDatabase

        db = PgDatabase(parse_storage_url(storage_url))
    else:
        from seed_agents.server.database.sqlite.database import Database

        db = Database(db_path)
    db.start_sync()
    try:
        db.write_sync(fill)
    finally:
        db.close_sync()
    return agent_id


# -- through the server ----------------------------------------------------------------------------
async def through_server(url: str, kp: Keypair, agent_id: str, size: int, queries: int) -> dict:
    data = _pattern(size)
    async with AgentsClient.connect(url, kp) as c:
        start = time.perf_counter()
        await c.upload_file({"kind": "memory", "agentId": agent_id, "path": "bench/big.bin"}, data,
                            chunk_bytes=CHUNK)
        upload = size / MiB / (time.perf_counter() - start)
        start = time.perf_counter()
        got = 0
        async for piece in c.read_file_ranges(
                lambda o, n: actions.read_agent_memory_file(agent_id, "bench/big.bin", o, n), size,
                range_bytes=CHUNK):
            got += len(piece)
        read = size / MiB / (time.perf_counter() - start)
        assert got == size
        rng = random.Random(7)
        latencies = []
        hits = 0
        for _ in range(queries):
            q = " ".join(_words(rng, rng.choice((1, 2, 2, 3))))
            start = time.perf_counter()
            found = await c.search_agent_memory(agent_id, q, 20)
            latencies.append(time.perf_counter() - start)
            hits += bool(found["results"])
    return {"upload_mib_s": round(upload, 1), "read_mib_s": round(read, 1),
            "search_p50_ms": round(percentile(latencies, 50) * 1000, 2),
            "search_p99_ms": round(percentile(latencies, 99) * 1000, 2),
            "search_queries": queries, "search_queries_with_results": hits}


# -- concurrent uploaders -------------------------------------------------------------------------
async def _concurrent(url: str, pid: int, n: int) -> dict:
    """n sockets, one account and upload each, then two rounds of one 8 MiB chunk per socket sent
    at once (signed beforehand: the load's signing is not what is timed)."""
    from seed_agents.clients.raw import RawV2, unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    chunk = os.urandom(CHUNK)
    keys = [Keypair.generate() for _ in range(n)]
    socks = [await RawV2.open(url, decode=True) for _ in range(n)]
    try:
        ups = []
        for kp, sock in zip(keys, socks):
            agent = (await sock.call(kp, {"_": "CreateAgent", "definition": ECHO}))["agentId"]
            begin = await sock.call(kp, actions.begin_file_upload({"kind": "memory", "agentId": agent, "path": "u"},
                                                                  2 * CHUNK))
            ups.append(begin["uploadId"])
        # both rounds signed first: back to back, as on a quiet machine (where signing is quick)
        rounds = [[sign_envelope(kp, actions.append_file_upload_chunk(u, offset, chunk), ts=unique_ts())
                   for kp, u in zip(keys, ups)] for offset in (0, CHUNK)]
        base = peak = rss_kb(pid)
        done = asyncio.Event()

        async def sample():
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss_kb(pid))
                await asyncio.sleep(0.01)   # the sampling interval

        sampler = asyncio.ensure_future(sample())
        cpu0, loop0 = server_cpu_ns(pid), loop_cpu_ns(pid)
        waits = []
        try:
            for offset, envelopes in zip((0, CHUNK), rounds):
                started = time.perf_counter()
                answers = await asyncio.gather(*(s.request(e, timeout=300) for s, e in zip(socks, envelopes)))
                waits.append(time.perf_counter() - started)
                assert all(a.get("received") == offset + CHUNK for a in answers), answers[:1]
        finally:
            done.set()
            await sampler
        cpu, loop = server_cpu_ns(pid) - cpu0, loop_cpu_ns(pid) - loop0
        return {"rss_growth_mib": round((peak - base) / 1024, 1), "round1_s": round(waits[0], 2),
                "round2_s": round(waits[1], 2), "per_uploader_chunks": round((peak - base) * 1024 / CHUNK / n, 2),
                # the server's CPU per chunk: all its threads, and the event loop's thread alone
                "cpu_ms_per_chunk": round(cpu / 1e6 / (2 * n), 1), "loop_cpu_ms_per_chunk": round(loop / 1e6 / (2 * n), 1)}
    finally:
        for sock in socks:
            await sock.close()


def concurrent_once(tree: Path | None, n: int) -> dict:
    if tree is not None:
        os.environ["BENCH_SERVER_TREE"] = str(tree)
    try:
        # no keepalive ping in the part: a pong parsed between rounds would hide what a socket keeps of its
        # last frame when rounds are seconds apart (rounds here run long on a loaded machine); a
        # clock window as long as the part, since the second round is signed before the first
        server = Server("files-concurrent", extra=["--ping-interval", "3600", "--clock-window-ms", "600000"]).start()
        try:
            return asyncio.run(_concurrent(server.url, server.pid, n))
        finally:
            server.stop()
            server.cleanup()
    finally:
        os.environ.pop("BENCH_SERVER_TREE", None)


def concurrent(trees: list[Path], rounds: int, n: int) -> dict:
    """Each tree's server in turn, `rounds` times, this tree twice a round (its A/A)."""
    named = [("this", None), ("this(A/A)", None)] + [(str(t), t) for t in trees]
    runs: dict[str, list[dict]] = {name: [] for name, _ in named}
    for r in range(rounds):
        order = named if r % 2 == 0 else named[::-1]
        for name, tree in order:
            load = os.getloadavg()[0]
            runs[name].append({**concurrent_once(tree, n), "load": round(load, 1)})
            print(f"round {r + 1} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    medians = {name: {k: statistics.median(x[k] for x in rows) for k in rows[0]} for name, rows in runs.items()}
    return {"uploaders": n, "chunk_mib": CHUNK // MiB, "runs": runs, "medians": medians,
            "vs_this": {name: {k: round(m[k] / medians["this"][k], 3)
                               for k in ("rss_growth_mib", "round1_s", "round2_s", "cpu_ms_per_chunk",
                                         "loop_cpu_ms_per_chunk")
                               if medians["this"][k]} for name, m in medians.items()}}


def run(quick: bool = False, storage_url: str | None = None) -> dict:
    size = (64 if quick else 256) * MiB
    files = 2_000 if quick else 10_000
    queries = 200 if quick else 1_000
    folder = tempfile.mkdtemp(prefix="bench-files-")
    db_path = os.path.join(folder, "agents.sqlite")
    kp = Keypair.generate()
    started = time.perf_counter()
    agent_id = seed_memory(storage_url, db_path, kp.account_id, files)
    seeded = time.perf_counter() - started
    data = _pattern(size)
    disk = raw_disk_write(folder, data)
    db_write, db_read = raw_db(storage_url, db_path + ".raw" if not storage_url else "", data)
    extra = ["--memory-max-files", str(files + 10)] + (["--storage-url", storage_url] if storage_url else [])
    server = Server("files", data_dir=folder, extra=extra).start()
    try:
        figures = asyncio.run(through_server(server.url, kp, agent_id, size, queries))
    finally:
        server.stop()
    figures.update({
        "storage": "postgresql" if storage_url else "sqlite", "file_mib": size // MiB, "memory_files": files,
        "seed_seconds": round(seeded, 1),
        "raw_disk_write_mib_s": round(disk, 1), "raw_db_write_mib_s": round(db_write, 1),
        "raw_db_read_mib_s": round(db_read, 1),
        "upload_vs_raw_db_write": round(figures["upload_mib_s"] / db_write, 2),
        "upload_vs_raw_disk_write": round(figures["upload_mib_s"] / disk, 2),
        "read_vs_raw_db_read": round(figures["read_mib_s"] / db_read, 2),
    })
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.files", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB, 2,000 files, 200 queries")
    parser.add_argument("--storage-url", default=None, help="a postgresql:// URL (an empty schema); default SQLite")
    parser.add_argument("--concurrent", action="store_true", help="the concurrent uploaders part alone")
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="another source tree whose server runs the concurrent part too (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the concurrent part")
    parser.add_argument("--uploaders", type=int, default=50)
    args = parser.parse_args(argv)
    if args.concurrent:
        print(json.dumps(concurrent(args.tree, args.rounds, args.uploaders), indent=2))
        return 0
    print(json.dumps(run(args.quick, args.storage_url), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
