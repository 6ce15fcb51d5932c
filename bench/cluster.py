"""Several servers on PostgreSQL: what the PostgreSQL driver costs a server, and what a
second server on the same database gives and costs.

`python -m bench.cluster [--url postgresql://...] [--part a|b|all] [--quick]` (the URL defaults to
SEED_AGENTS_TEST_POSTGRES_URL; loopback only: a URL naming any other host is refused). Each part
runs on its own; every count and every wait is bounded. Work happens in a schema of its own
(`bench_<random>`), dropped at the end.

(a) **PostgreSQL beside SQLite, one server each, the same client load**, as ratios PostgreSQL /
    SQLite (throughput) in one run:
    - GetSession (20-event session, ~12 KB answer) and CreateSession (a clientRequestId each) as
      keep-alive `POST /api/message` at concurrency 16 (bench.http's raw client, envelopes
      signed before timing);
    - turns: MessageSession to the durable echo reply arriving on the same socket, one turn at a
      time (bench.turns);
    - replay: Subscribe with afterSeq 0 to a session of N events, to the `replayed` marker
      (bench.replay);
    each cell also gives the CPU it cost per action: the server process's and, on PostgreSQL,
    its backends' (found through the server's sockets and pg_stat_activity), and
    `cpu_ratios_sqlite_over_pg` sets SQLite's CPU per action against PostgreSQL's (server plus
    backends): steadier than throughput when neighbours take the cores.
(b) **Two servers against one, on one PostgreSQL database**:
    - write throughput: CreateSession over HTTP at concurrency 16, all on one server or split
      8 + 8 over two; and turns/s with 8 sessions each running sequential echo turns, written
      through one server or through two (4 + 4);
    - cross-server delivery: a MessageSession sent through server 1, to its user `append`
      arriving at a subscriber on server 2 (p50/p99), beside the same with the subscriber on
      server 1.

A cell that cannot be measured (e.g. turns before runs work across servers, cross-server
delivery before the relay) is reported as `{"error": ...}` after a bounded wait, and the rest
goes on. The servers are pinned to the server CPU (both, in part b: the same CPU budget, so
part b shows the cost of coordination, not scale) and the load to the load CPU
(bench.conditions); PostgreSQL is not pinned.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from urllib.parse import urlsplit

from seed_agents.clients.raw import now_ms, signed_request_frame, unique_ts

from bench.conditions import git_state, machine_info
from bench.http import KeepAlive, _closed_loop
from bench.load import Rpc, keypair
from bench.processes import Server, run_load
from bench.rpc import _actions, _sign
from bench.stats import latency_figures, summary

PG_URL_ENV = "SEED_AGENTS_TEST_POSTGRES_URL"
EVENT_CHARS = 400          # ~630-byte stored events (bench.rpc): 20 make a ~12.7 KB GetSession
CONCURRENCY = 16
RUN_SECONDS = 8.0          # at most this long per timed HTTP run (signed envelopes age)
FIRST_WAIT_S = 15.0        # a cell whose first turn or event does not come within this fails
DEFINITION = {"name": "bench", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


def sizes(quick: bool) -> dict:
    if quick:
        return {"runs": 3, "requests": 600, "turns": 40, "replay_events": 1000, "latency_writes": 60,
                "turn_sessions": 8, "turns_per_session": 5}
    return {"runs": 5, "requests": 2000, "turns": 100, "replay_events": 2000, "latency_writes": 200,
            "turn_sessions": 8, "turns_per_session": 12}


# -- storage set-up (not timed) ------------------------------------------------------------

def _loopback_only(url: str) -> None:
    host = urlsplit(url).hostname or ""   # none: libpq's local Unix socket
    if host not in ("", "127.0.0.1", "::1", "localhost"):
        raise SystemExit(f"bench.cluster runs on loopback only; the URL names host {host!r}")


class PgSchema:
    """A fresh schema on the PostgreSQL database, dropped on exit; `url` connects into it."""

    def __init__(self, base_url: str) -> None:
        from tests.pg import with_schema

        self.base_url = base_url
        self.name = "bench_" + uuid.uuid4().hex[:12]
        self.url = with_schema(base_url, self.name)

    def __enter__(self) -> "PgSchema":
        import psycopg

        with psycopg.connect(self.base_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        return self

    def __exit__(self, *exc) -> None:
        import psycopg

        with psycopg.connect(self.base_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")


def fill(db, account_id: str, data_dir: str, sessions: dict[str, int]) -> dict:
    """One echo agent of `account_id` and, for each name -> count, a session of that many events,
    written through the store's own functions (seed_agents.server.store) in one transaction of `db`, a
    started `Database` or `PgDatabase`: both backends hold exactly what a server writes."""
    from seed_agents.server.store import agents as agents_q
    from seed_agents.server.store import events as events_q
    from seed_agents.server.store import sessions as sessions_q

    from bench.dbsetup import payload

    agent_id = str(uuid.uuid4())
    ids = {name: str(uuid.uuid4()) for name in sessions}
    now = int(time.time() * 1000) - 60_000

    def job(conn):
        agents_q.create_agent(conn, agent_id, account_id, DEFINITION,
                              os.path.join(data_dir, "agents", agent_id), now)
        for name, count in sessions.items():
            sessions_q.create_session(conn, ids[name], account_id, agent_id, name, now)
            for i in range(1, count + 1):
                events_q.append_event(conn, ids[name], payload(EVENT_CHARS, i), str(uuid.uuid4()), now)

    db.write_sync(job)
    return {"agentId": agent_id, "sessions": ids}


def prepared(backend: str, pg_url: str | None, data_dir: str, account_id: str, sessions: dict) -> dict:
    """Fill the store a server will open: the SQLite file in `data_dir`, or the PostgreSQL schema."""
    if backend == "sqlite":
        from seed_agents.server.database.sqlite.database import Database

        db = Database(os.path.join(data_dir, "agents.sqlite"))
    else:
        from seed_agents.server.database.postgres.database import PgDatabase
        from seed_agents.server.database.url import parse_storage_url

        db = PgDatabase(parse_storage_url(pg_url))
    db.start_sync()
    try:
        return fill(db, account_id, data_dir, sessions)
    finally:
        db.close_sync()


# -- load processes ------------------------------------------------------------------------

async def http_load(ports: list[int], label: str, kind: str, session_id: str, agent_id: str,
                    runs: int, requests: int, concurrency: int = CONCURRENCY) -> dict:
    """`kind` (GetSession or CreateSession) over keep-alive HTTP, `concurrency` connections spread
    over `ports`; actions/s per run (run 0, a quarter as long, warms up)."""
    kp = keypair(label)
    conns = [await KeepAlive.open("127.0.0.1", ports[i % len(ports)]) for i in range(concurrency)]
    counter, rates, lat, errors, first_error, done = [0], [], [], 0, None, 0
    last_ts, n = 0, requests // 4
    for r in range(runs + 1):
        ts = max(now_ms(), last_ts + 2)
        bodies = _sign(kp, _actions(kind, n, session_id, agent_id, counter), ts)
        last_ts = ts + n // 9979 + 1
        res = await _closed_loop(conns, bodies, timeout=120)
        done += len(res["latencies"])
        if r == 0:
            # Envelopes are signed before a run, and the server refuses them past its clock
            # window (30 s): a run lasts about RUN_SECONDS at the warm-up's rate.
            rate = len(res["latencies"]) / res["seconds"]
            n = max(concurrency * 4, min(requests, int(rate * RUN_SECONDS)))
        else:
            rates.append(len(res["latencies"]) / res["seconds"])
            lat.append(latency_figures(res["latencies"]))
            errors += res["errors"]
            first_error = first_error or res["first_error"]
    for conn in conns:
        conn.close()
    return {"actions_per_s": summary(rates, 1), "requests_per_run": n, "actions_total": done,
            "p50_ms": summary([x["p50_ms"] for x in lat]),
            "p99_ms": summary([x["p99_ms"] for x in lat]), "errors": errors, "first_error": first_error}


async def _first_within(aw, what: str):
    try:
        return await asyncio.wait_for(aw, FIRST_WAIT_S)
    except TimeoutError:
        raise RuntimeError(f"{what}: nothing within {FIRST_WAIT_S:.0f} s") from None


async def turns_load(url: str, label: str, agent_id: str, runs: int, turns: int) -> dict:
    """Sequential echo turns on one socket (bench.turns), a fresh session per run."""
    from bench.turns import _session_socket, _turns

    kp = keypair(label)
    tag = uuid.uuid4().hex[:8]
    rows, done = [], 0
    for r in range(runs + 1):
        rpc, session_id, arrivals = await _session_socket(url, kp, agent_id)
        try:
            if r == 0:   # warm-up; also the check that turns work at all here
                await _first_within(_turns(rpc, kp, session_id, arrivals, 1, f"{tag}-probe-{r}"), "the first turn")
            res = await _turns(rpc, kp, session_id, arrivals, turns // 4 if r == 0 else turns, f"{tag}-{r}")
        finally:
            await rpc.close()
        done += turns // 4 + 1 if r == 0 else turns
        if r:
            rows.append(res)
    per_s = [1000.0 / x["turn"]["p50_ms"] for x in rows]
    return {"turn_p50_ms": summary([x["turn"]["p50_ms"] for x in rows]),
            "turn_p99_ms": summary([x["turn"]["p99_ms"] for x in rows]),
            "turns_per_s_at_p50": summary(per_s, 1), "errors": sum(x["errors"] for x in rows),
            "actions_total": done}


async def replay_load(url: str, label: str, session_id: str, events: int, runs: int) -> dict:
    from bench.replay import replay_once

    kp = keypair(label)
    rows = []
    for r in range(runs + 1):
        res = await replay_once(url, kp, session_id, events, timeout=120)
        if res["events"] != events:
            raise RuntimeError(f"replay gave {res['events']} events of {events}")
        if r:
            rows.append(res)
    return {"seconds": summary([x["seconds_to_replayed"] for x in rows], 4), "actions_total": events * (runs + 1),
            "events_per_s": summary([x["events_per_s"] for x in rows], 0)}


async def concurrent_turns_load(urls: list[str], label: str, agent_id: str, sessions: int,
                                turns_per_session: int) -> dict:
    """`sessions` sessions, each sending sequential echo turns through urls[i % len(urls)]; the
    turns completed per second across them (each turn waits for its durable reply)."""
    from bench.turns import _session_socket, _turns

    kp = keypair(label)
    tag = uuid.uuid4().hex[:8]   # clientMessageIds are the account's: never reuse another cell's
    sockets = [await _session_socket(urls[i % len(urls)], kp, agent_id) for i in range(sessions)]
    try:
        await _first_within(asyncio.gather(*(_turns(rpc, kp, sid, arr, 1, f"{tag}-warm-{i}")
                                             for i, (rpc, sid, arr) in enumerate(sockets))),
                            "the first turns")
        t0 = time.perf_counter()
        results = await asyncio.gather(*(_turns(rpc, kp, sid, arr, turns_per_session, f"{tag}-{i}")
                                         for i, (rpc, sid, arr) in enumerate(sockets)))
        elapsed = time.perf_counter() - t0
    finally:
        for rpc, _sid, _arr in sockets:
            await rpc.close()
    return {"turns_per_s": round(sessions * turns_per_session / elapsed, 1),
            "turn_p50_ms": round(sorted(r["turn"]["p50_ms"] for r in results)[len(results) // 2], 2),
            "errors": sum(r["errors"] for r in results)}


async def delivery_load(writer_url: str, watcher_url: str, label: str, agent_id: str, writes: int) -> dict:
    """MessageSession through `writer_url`; time to its user `append` at a socket subscribed to
    the session through `watcher_url`. One write at a time, each waiting for its reply to land
    too (so the next write does not queue behind a turn)."""
    from seed_agents.protocol.wire import dagcbor
    from seed_agents.protocol.wire.envelope import sign_envelope

    kp = keypair(label)
    arrivals: asyncio.Queue = asyncio.Queue()

    def on_event(frame: bytes) -> None:
        t = time.perf_counter()
        value = dagcbor.decode(frame, max_items=None)   # a server frame (a replay batch may be long)
        if value.get("_") == "append" and "event" in value:
            payload = value["event"]["event"]
            arrivals.put_nowait((t, payload.get("role"), payload.get("content")))

    writer = await Rpc.open(writer_url)
    watcher = await Rpc.open(watcher_url, on_event=on_event)
    try:
        session_id = (await writer.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await watcher.call(kp, {"_": "Subscribe", "key": f"sessions/{session_id}"})
        latencies, replies = [], True
        for i in range(writes + 5):   # the first 5 warm up
            text = f"delivery {i}"
            env = sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                     "content": [{"type": "text", "text": text}]}, ts=unique_ts())
            req_id, fut = writer.register()
            t0 = time.perf_counter()
            await writer.ws.send(signed_request_frame(req_id, env))
            await asyncio.wait_for(fut, 30)
            got_user = None
            while got_user is None:
                t, role, content = await _first_within(arrivals.get(), "the user append")
                if role == "user" and content == text:
                    got_user = t
            if i >= 5:
                latencies.append(got_user - t0)
            while replies:   # the turn's reply, so the next write does not queue behind it
                try:
                    _t, role, content = await asyncio.wait_for(arrivals.get(), 5)
                except TimeoutError:
                    replies = False   # turns do not run here: measure the appends alone
                    break
                if role == "assistant" and content == "echo: " + text:
                    break
    finally:
        await writer.close()
        await watcher.close()
    return {**latency_figures(latencies), "waited_for_replies": replies}


# -- parts ---------------------------------------------------------------------------------

def _cell(target: str, params: dict, timeout: float = 300) -> dict:
    try:
        return run_load(target, params, timeout=timeout)
    except Exception as exc:   # a cell that cannot run yet says why; the others go on
        return {"error": str(exc).strip().splitlines()[-1][:300]}


def _pg_backends(server_pid: int, admin_url: str) -> list[int]:
    """The PostgreSQL backends serving `server_pid`'s connections: its sockets' local ports
    (from /proc) matched to pg_stat_activity's client ports (PostgreSQL runs on this machine)."""
    import psycopg

    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{server_pid}/fd"):
            try:
                link = os.readlink(f"/proc/{server_pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[9] in inodes and cols[2].endswith(":1538"):   # remote port 5432
                        ports.append(int(cols[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    if not ports:
        return []
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", (ports,)).fetchall()
    return [r[0] for r in rows]


def _proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_cell(srv, pg_url: str | None, target: str, params: dict) -> dict:
    """`_cell` with the CPU it cost per action: the server process's, and (on PostgreSQL) its
    backends' (the statements' parse, plan and execution), in microseconds. CPU per action is
    steadier than throughput on a shared machine (a neighbour's job takes time, not CPU)."""
    from bench.meters import thread_cpu

    before_srv = sum(thread_cpu(srv.pid))
    before_pg = {pid: _proc_cpu(pid) for pid in _pg_backends(srv.pid, pg_url)} if pg_url else {}
    res = _cell(target, params)
    n = res.get("actions_total") if isinstance(res, dict) else None
    if n:
        res["server_cpu_us_per_action"] = round((sum(thread_cpu(srv.pid)) - before_srv) / n * 1e6, 1)
        if pg_url:
            after = {pid: _proc_cpu(pid) for pid in _pg_backends(srv.pid, pg_url)}
            spent = sum(cpu - before_pg.get(pid, 0.0) for pid, cpu in after.items())
            res["pg_cpu_us_per_action"] = round(spent / n * 1e6, 1)
    return res


def _ratio(pg: dict, lite: dict, key: str, higher_is_better: bool = True) -> float | None:
    try:
        a, b = pg[key]["median"], lite[key]["median"]
    except (KeyError, TypeError):
        return None
    if not a or not b:
        return None
    return round(a / b if higher_is_better else b / a, 3)


def part_a(pg_url: str, quick: bool) -> dict:
    size = sizes(quick)
    out: dict = {}
    for backend in ("sqlite", "postgresql"):
        label = f"cluster-a-{backend}"
        kp = keypair(label)
        data_dir = tempfile.mkdtemp(prefix=f"bench-cluster-{backend}-")
        with (PgSchema(pg_url) if backend == "postgresql" else _nothing()) as schema:
            url = schema.url if schema else None
            built = prepared(backend, url, data_dir, kp.account_id,
                             {"get": 20, "replay": size["replay_events"]})
            extra = ["--storage-url", url] if url else []
            with Server(label, data_dir=data_dir, extra=extra) as srv:
                common = {"label": label, "agent_id": built["agentId"], "runs": size["runs"]}
                cells = {
                    "GetSession": _cpu_cell(srv, url, "bench.cluster:http_load", {
                        **common, "ports": [srv.port], "kind": "GetSession",
                        "session_id": built["sessions"]["get"], "requests": size["requests"]}),
                    "CreateSession": _cpu_cell(srv, url, "bench.cluster:http_load", {
                        **common, "ports": [srv.port], "kind": "CreateSession",
                        "session_id": built["sessions"]["get"], "requests": size["requests"]}),
                    "replay": _cpu_cell(srv, url, "bench.cluster:replay_load", {
                        "label": label, "url": srv.url, "session_id": built["sessions"]["replay"],
                        "events": size["replay_events"], "runs": size["runs"]}),
                }
                # Last: a turn that cannot finish on a store may leave work behind it there.
                cells["turns"] = _cpu_cell(srv, url, "bench.cluster:turns_load", {**common, "url": srv.url,
                                                                                 "turns": size["turns"]})
                cells["server_rss_kb_end"] = srv.rss_kb()
            out[backend] = cells
        shutil.rmtree(data_dir, ignore_errors=True)
    pg, lite = out["postgresql"], out["sqlite"]
    out["ratios_pg_over_sqlite"] = {
        "GetSession_actions_per_s": _ratio(pg["GetSession"], lite["GetSession"], "actions_per_s"),
        "CreateSession_actions_per_s": _ratio(pg["CreateSession"], lite["CreateSession"], "actions_per_s"),
        "turns_per_s_at_p50": _ratio(pg["turns"], lite["turns"], "turns_per_s_at_p50"),
        "replay_events_per_s": _ratio(pg["replay"], lite["replay"], "events_per_s"),
    }
    # The same as CPU: SQLite's server CPU per action over PostgreSQL's server and backends' CPU
    # per action (what the ratio of throughputs would be where CPU is the only limit).
    out["cpu_ratios_sqlite_over_pg"] = {}
    for cell in ("GetSession", "CreateSession", "turns", "replay"):
        try:
            total = pg[cell]["server_cpu_us_per_action"] + pg[cell]["pg_cpu_us_per_action"]
            out["cpu_ratios_sqlite_over_pg"][cell] = round(lite[cell]["server_cpu_us_per_action"] / total, 3)
        except (KeyError, TypeError, ZeroDivisionError):
            out["cpu_ratios_sqlite_over_pg"][cell] = None
    return out


def part_b(pg_url: str, quick: bool) -> dict:
    size = sizes(quick)
    label = "cluster-b"
    kp = keypair(label)
    out: dict = {}
    # Servers on one database share one secrets key (docs/operations.md, "Several servers").
    os.environ.setdefault("SEED_AGENTS_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    with PgSchema(pg_url) as schema:
        dirs = [tempfile.mkdtemp(prefix=f"bench-cluster-b{i}-") for i in (1, 2)]
        built = prepared("postgresql", schema.url, dirs[0], kp.account_id, {"get": 20})
        extra = ["--storage-url", schema.url]
        with Server("cluster-b1", data_dir=dirs[0], extra=extra) as s1, \
                Server("cluster-b2", data_dir=dirs[1], extra=extra) as s2:
            common = {"label": label, "agent_id": built["agentId"]}
            writes = {"kind": "CreateSession", "session_id": built["sessions"]["get"],
                      "runs": size["runs"], "requests": size["requests"]}
            out["CreateSession_one_server"] = _cell("bench.cluster:http_load",
                                                    {**common, **writes, "ports": [s1.port]})
            out["CreateSession_two_servers"] = _cell("bench.cluster:http_load",
                                                     {**common, **writes, "ports": [s1.port, s2.port]})
            n = size["latency_writes"]
            out["delivery_same_server"] = _cell("bench.cluster:delivery_load", {
                **common, "writer_url": s1.url, "watcher_url": s1.url, "writes": n})
            out["delivery_cross_server"] = _cell("bench.cluster:delivery_load", {
                **common, "writer_url": s1.url, "watcher_url": s2.url, "writes": n})
            turns = {"sessions": size["turn_sessions"], "turns_per_session": size["turns_per_session"]}
            out["turns_one_server"] = _cell("bench.cluster:concurrent_turns_load",
                                            {**common, **turns, "urls": [s1.url]})
            out["turns_two_servers"] = _cell("bench.cluster:concurrent_turns_load",
                                             {**common, **turns, "urls": [s1.url, s2.url]})
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    one, two = out["CreateSession_one_server"], out["CreateSession_two_servers"]
    out["ratios_two_over_one"] = {
        "CreateSession_actions_per_s": _ratio(two, one, "actions_per_s"),
        "turns_per_s": (round(out["turns_two_servers"]["turns_per_s"] / out["turns_one_server"]["turns_per_s"], 3)
                        if "turns_per_s" in out["turns_two_servers"] and "turns_per_s" in out["turns_one_server"]
                        else None),
        "delivery_p50_cross_over_same": (
            round(out["delivery_cross_server"]["p50_ms"] / out["delivery_same_server"]["p50_ms"], 2)
            if "p50_ms" in out["delivery_cross_server"] and "p50_ms" in out["delivery_same_server"] else None),
    }
    return out


def _interleaved(run, before: str, rounds: int) -> tuple[list[str], dict[str, list]]:  # noqa: ANN001
    """`run()` for two trees, interleaved (before, after, after, before per pair of rounds), the
    before tree's server taken from `before` (BENCH_SERVER_TREE), the after tree's from here:
    the order and each tree's results, whose runs are its A/A."""
    order: list[str] = []
    for r in range(rounds):
        order += [("before", "after"), ("after", "before")][r % 2]
    runs: dict[str, list] = {"before": [], "after": []}
    for tree in order:
        if tree == "before":
            os.environ["BENCH_SERVER_TREE"] = before
        else:
            os.environ.pop("BENCH_SERVER_TREE", None)
        try:
            runs[tree].append(run())
        finally:
            os.environ.pop("BENCH_SERVER_TREE", None)
    return order, runs


def part_a_ab(pg_url: str, quick: bool, before: str, rounds: int) -> dict:
    """Part a for two trees, interleaved (B A A B per pair of rounds), in one run: each tree's
    PostgreSQL / SQLite ratios per round, their medians, and the load average around each."""
    def run() -> dict:
        load0 = os.getloadavg()
        res = part_a(pg_url, quick)
        res["loadavg"] = [round(x, 2) for x in (*load0, *os.getloadavg())]
        return res

    order, runs = _interleaved(run, before, rounds)
    out: dict = {"order": order, "runs": runs, "medians": {}}
    for tree, rs in runs.items():
        keys = rs[0]["ratios_pg_over_sqlite"].keys()
        out["medians"][tree] = {k: summary([r["ratios_pg_over_sqlite"][k] for r in rs
                                            if r["ratios_pg_over_sqlite"][k] is not None], 3) for k in keys}
        for backend in ("sqlite", "postgresql"):
            for cell, key in (("GetSession", "actions_per_s"), ("CreateSession", "actions_per_s"),
                              ("turns", "turns_per_s_at_p50"), ("replay", "events_per_s")):
                vals = [r[backend][cell][key]["median"] for r in rs if key in r[backend][cell]]
                out["medians"][tree][f"{backend}_{cell}"] = summary(vals, 1) if vals else None
                for cpu in ("server_cpu_us_per_action", "pg_cpu_us_per_action"):
                    vals = [r[backend][cell][cpu] for r in rs if cpu in r[backend][cell]]
                    if vals:
                        out["medians"][tree][f"{backend}_{cell}_{cpu}"] = summary(vals, 1)
        for cell in ("GetSession", "CreateSession", "turns", "replay"):
            vals = [r["cpu_ratios_sqlite_over_pg"][cell] for r in rs
                    if r.get("cpu_ratios_sqlite_over_pg", {}).get(cell) is not None]
            if vals:
                out["medians"][tree][f"cpu_ratio_{cell}"] = summary(vals, 3)
    return out


def part_b_ab(pg_url: str, quick: bool, before: str, rounds: int) -> dict:
    """Part b for two trees, interleaved (before, after, after, before per pair of rounds), in one
    run: each run's two-servers / one ratios and the load average around it; each tree's runs
    are its A/A."""
    def run() -> dict:
        load0 = os.getloadavg()
        res = part_b(pg_url, quick)
        return {**res["ratios_two_over_one"],
                "turns_per_s_one_two": [res["turns_one_server"].get("turns_per_s"),
                                        res["turns_two_servers"].get("turns_per_s")],
                "CreateSession_per_s_one_two": [res["CreateSession_one_server"].get("actions_per_s", {}).get("median"),
                                                res["CreateSession_two_servers"].get("actions_per_s", {}).get("median")],
                "loadavg": [round(x, 2) for x in (*load0, *os.getloadavg())]}

    order, runs = _interleaved(run, before, rounds)
    medians = {tree: {k: summary([r[k] for r in rs if r[k] is not None], 3)
                      for k in ("turns_per_s", "CreateSession_actions_per_s")}
               for tree, rs in runs.items()}
    return {"order": order, "runs": runs, "medians": medians}


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get(PG_URL_ENV, ""),
                        help=f"PostgreSQL URL (default: ${PG_URL_ENV}); loopback only")
    parser.add_argument("--part", choices=("a", "b", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="fewer runs and requests")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--before", metavar="DIR",
                        help="A/B: also run part a with DIR's server (a scratch tree, e.g. `git worktree"
                             " add` or `git archive` of main), rounds interleaved before, after, after,"
                             " before (the two runs of a tree are the A/A); with --part b, part b so")
    parser.add_argument("--rounds", type=int, default=2, help="with --before: pairs of part-a runs per tree")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error(f"no PostgreSQL URL: pass --url or set {PG_URL_ENV}")
    _loopback_only(args.url)
    result: dict = {"machine": machine_info(), "git": git_state(), "quick": args.quick}
    if args.before and args.part != "b":
        result["ab"] = part_a_ab(args.url, args.quick, os.path.abspath(args.before), args.rounds)
    elif args.part in ("a", "all"):
        result["a"] = part_a(args.url, args.quick)
    if args.part in ("b", "all"):
        if args.before and args.part == "b":
            result["b_ab"] = part_b_ab(args.url, args.quick, os.path.abspath(args.before), args.rounds)
        else:
            result["b"] = part_b(args.url, args.quick)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
