"""A deep queue on one session, before and after a change, in one run:

    python -m bench.deep_queue [--before REF | --after-only] [--deep N] [--shallow N] [--turns K]
                               [--history H]
    python -m bench.deep_queue --rounds R [--deep N] [--shallow N] [--history H] [--warm S]
                               [--window S] [--feed] [--profile DIR]

`--rounds` is the like-with-like figure (see `rounds()`): one arm at a time, the others frozen,
every database the same size, turns per second and per CPU second in a fixed window; an A/A arm
shows the noise. The older modes follow.

Each tree (`--before`, default the commit before the deep-queue fix, and this working tree) runs
as a child server with the echo model. For each depth, a fresh server gets one session, N
messages pipelined into it over one v2 socket (answered as they are queued), then the time the
server takes for the K turns after the first 10 is measured from a subscription's durable
assistant appends: turns per second with N queued behind (shallow: 50, deep: 5,000 by default;
`--deep 50000` for the issue's case, about a minute to queue). Reported: turns per second per tree
and depth, deep / shallow per tree (1.0: the queue costs nothing per turn), after / before.
Bounded in count and time; nothing is asserted.

Like with like: a turn deep in a queue carries a long history (the 500 entries up to its own
message, runtime/runner.py HISTORY_EVENTS), where a turn of a fresh session carries almost none,
so deep / shallow measured on fresh sessions mixes the queue's cost with the history's. With
`--history H` (default 500) each session first holds H messages and their replies (pipelined,
all answered) before the N messages are queued, so a timed turn sees about H earlier messages at
either depth and the ratio is the queue's alone. `--history 0` gives the old figure. The turns are timed once every message is accepted (before,
the window fell while a deep queue was still being accepted, the turns sharing the server with
thousands of MessageSessions); a shallow queue must hold more than K then (default 100).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from seed_agents.clients.raw import RawV2

from bench.bench_bounds import extract, free_port
from bench.conditions import LOAD_CPU, SERVER_CPU, pin_prefix
from bench.load import keypair
from bench.processes import RAISED_BOUNDS, RAISED_LIMITS

FIXED_IN = "HEAD"
QUEUED_WHEN_TIMED: list[int] = [0]   # (one()'s: messages still queued when its timing began)   # (--before defaults to the parent of the commit that made the queue flat)
CAP_S = 600


def start(tree: Path, data: Path, existing: bool = False) -> tuple[subprocess.Popen, int]:
    port = free_port()
    data.mkdir(parents=True, exist_ok=existing)
    flags = list(RAISED_LIMITS) + list(RAISED_BOUNDS)
    if "--max-runs-in-flight" in (tree / "server" / "config.py").read_text():
        flags += ["--max-runs-in-flight", "1000000"]
    log = open(data / "server.log", "ab")
    proc = subprocess.Popen(
        [*pin_prefix(SERVER_CPU), sys.executable, "-m", "seed_agents.server.main", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data), "--log-level", "WARNING", "--hm-server-url", "", *flags],
        cwd=str(tree), env=dict(os.environ, PYTHONPATH=str(tree)), stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=0.5).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the server of {tree} did not start (log: {data / 'server.log'})")


async def _pipeline(c: RawV2, kp, sid: str, count: int, tag: str) -> None:  # noqa: ANN001
    for start_at in range(0, count, 200):   # pipelined, 200 in flight at a time
        answers = await asyncio.gather(*[c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [
            {"type": "text", "text": f"{tag}{i}"}]}) for i in range(start_at, min(count, start_at + 200))])
        bad = [a for a in answers if a.get("_") == "Error"]
        if bad:
            raise RuntimeError(f"a message was refused: {bad[0]}")


async def _echo_session(url: str, kp) -> tuple[RawV2, str, RawV2]:  # noqa: ANN001
    """A client, a new session of a new echo agent, and a second socket to watch it on."""
    c = await RawV2.open(url, decode=True)
    agent = await c.call(kp, {"_": "CreateAgent", "definition": {
        "name": "echo", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}})
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]}))["sessionId"]
    return c, sid, await RawV2.open(url, decode=True)


async def one(tree: Path, data: Path, depth: int, turns: int, history: int = 0) -> float:
    proc, port = start(tree, data)
    url = f"ws://127.0.0.1:{port}/agents/ws"
    kp = keypair("deep-queue")
    try:
        c, sid, watch = await _echo_session(url, kp)
        replies: list[float] = []
        done = asyncio.Event()
        left = QUEUED_WHEN_TIMED
        wanted = [history]   # replies that end the current phase

        def on_event(frame: dict) -> None:
            items = frame.get("events") or ([frame["event"]] if "event" in frame else [])
            for event in items:
                body = event.get("event", {})
                if body.get("type") == "message" and body.get("role") == "assistant":
                    replies.append(time.perf_counter())
                    if len(replies) >= wanted[0]:
                        done.set()

        watch.on_event = on_event
        await watch.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
        if history:   # the conversation before the queue, all answered
            await _pipeline(c, kp, sid, history, "h")
            await asyncio.wait_for(done.wait(), CAP_S)
        done.clear()
        wanted[0] = history + depth   # (all answered: the end of a short queue)
        await _pipeline(c, kp, sid, depth, "m")
        # Timed from here: every message is accepted, so the turns no longer share the server
        # with the queueing (which made a deep queue look slower than it runs), and the queue
        # behind them is as deep as it will be.
        first = len(replies)
        wanted[0] = min(history + depth, first + turns)
        if len(replies) < wanted[0]:
            done.clear()
            await asyncio.wait_for(done.wait(), CAP_S)
        window = replies[first:first + turns]
        left[:] = [history + depth - first]
        if len(window) < 5:
            raise RuntimeError(f"only {len(window)} turns left once {depth} were queued: queue more")
        return (len(window) - 1) / (window[-1] - window[0])
    finally:
        proc.kill()
        proc.wait(10)


async def together(tree: Path, data: Path, shallow: int, deep: int, turns: int, skip: int,
                   history: int) -> dict:
    """Like with like, in one time window: three servers of this tree at once, each with one
    session holding `history` answered messages, then a queue kept `deep` long on one ("deep")
    and `shallow` long on the other two ("shallow", "shallow A/A"): a message is sent for each
    one answered, so every server accepts at the pace it answers and no queue runs out. Once all
    are full and each has answered `skip` of its queue (so every timed turn has as full a window
    as the others': the entries up to its message and the replies after it), the next `turns`
    replies of each are timed, all three servers running at once on the same cores: the
    machine's swings fall on all three.
    Separate servers, not three sessions of one, whose workers would share each commit and so
    advance in step whatever a turn costs. deep / shallow is the queue's own cost; shallow A/A /
    shallow, the noise."""
    names = ("deep", "shallow", "shallow A/A")
    depth = {"deep": deep, "shallow": shallow, "shallow A/A": shallow}
    procs: list[subprocess.Popen] = []
    replies: dict[str, list[float]] = {n: [] for n in names}
    changed = asyncio.Event()
    sockets: list[RawV2] = []
    try:
        def on_event_of(name: str):  # noqa: ANN202 - one subscribed socket per server
            def on_event(frame: dict) -> None:
                items = frame.get("events") or ([frame["event"]] if "event" in frame else [])
                for event in items:
                    body = event.get("event", {})
                    if body.get("type") == "message" and body.get("role") == "assistant":
                        replies[name].append(time.perf_counter())
                        changed.set()
            return on_event

        async def until(check, what: str) -> None:
            deadline = time.monotonic() + CAP_S
            while not check():
                changed.clear()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not {what} within {CAP_S} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)

        clients, sids = {}, {}
        for name in names:
            proc, port = start(tree, data / name.replace(" ", "-").replace("/", ""))
            procs.append(proc)
            url = f"ws://127.0.0.1:{port}/agents/ws"
            kp = keypair(f"deep-queue-{name}")
            c, sids[name], watch = await _echo_session(url, kp)
            watch.on_event = on_event_of(name)
            await watch.call(kp, {"_": "Subscribe", "key": f"sessions/{sids[name]}"})
            clients[name] = (c, kp)
            sockets += [c, watch]
        if history:
            await asyncio.gather(*(_pipeline(c, kp, sids[n], history, "h") for n, (c, kp) in clients.items()))
            await until(lambda: all(len(r) >= history for r in replies.values()), "the histories answered")
        sent = {n: history for n in names}
        stop = asyncio.Event()

        async def keep_full(name: str) -> None:
            # Each queue is kept at its depth: a message sent for each one answered, on all three
            # servers alike, so a shallow queue lasts as long as the deep one and every server
            # accepts messages at the pace it answers them.
            c, kp = clients[name]
            while not stop.is_set():
                missing = depth[name] - (sent[name] - len(replies[name]))
                if missing > 0:
                    count = min(missing, 200)
                    await _pipeline(c, kp, sids[name], count, f"m{sent[name]}-")
                    sent[name] += count
                else:
                    changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), 0.2)

        feeders = [asyncio.create_task(keep_full(n)) for n in names]
        try:
            await until(lambda: all(sent[n] - history >= depth[n] and len(replies[n]) >= history + skip
                                    for n in names), f"every queue full and {skip} of each answered")
            begun = {n: len(replies[n]) for n in names}
            queued = {n: sent[n] - begun[n] for n in names}
            await until(lambda: all(len(replies[n]) >= begun[n] + turns for n in names), f"{turns} turns timed")
        finally:
            stop.set()
            for task in feeders:
                task.cancel()
            await asyncio.gather(*feeders, return_exceptions=True)
        out = {}
        for n in names:
            window = replies[n][begun[n]:begun[n] + turns]
            out[n] = {"turns_per_s": (len(window) - 1) / (window[-1] - window[0]), "queued_when_timed": queued[n],
                      "window": (window[0], window[-1])}
        return out
    except Exception:
        for name in names:
            path = data / name.replace(" ", "-").replace("/", "") / "server.log"
            if path.exists():
                log = path.read_text(errors="replace")
                first = log.find("ERROR")
                if first >= 0:
                    print(f"the {name} server's log, from its first error:\n{log[first:][:4000]}", file=sys.stderr)
        raise
    finally:
        for sock in sockets:
            with contextlib.suppress(Exception):
                await sock.close()
        for proc in procs:
            proc.kill()
            proc.wait(10)


# -- rounds: one arm at a time, the others frozen ---------------------------------------------------
ARMS = ("deep", "shallow", "shallow A/A")


def _fill(db_path: Path, account: str, sid: str, queued: int, filler: int, now: int) -> int:
    """Queue `queued` messages in session `sid` (each a user event and a queued run, as a
    MessageSession leaves them) and give the agent a second session of `filler` answered ones (a
    user event and a finished run each), through the store's own functions, the server stopped.
    Both arms then hold as many events and runs; only the queue differs. Returns `sid`'s last seq."""
    import uuid

    from seed_agents.server.database.sqlite.database import Database
    from seed_agents.server.store import events as events_q
    from seed_agents.server.store import runs as runs_q
    from seed_agents.server.store import sessions as sessions_q

    def payload(text: str) -> dict:
        return {"type": "message", "role": "user", "content": text,
                "meta": {"accountId": account, "signerId": account}}

    def job(conn):
        agent_id = conn.execute("SELECT agent_id FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
        for i in range(queued):
            event, _ = events_q.append_event(conn, sid, payload(f"q{i}"), str(uuid.uuid4()), now)
            runs_q.create_run(conn, str(uuid.uuid4()), account, agent_id, sid, event["id"], now)
        if filler:
            other = str(uuid.uuid4())
            sessions_q.create_session(conn, other, account, agent_id, "filler", now)
            for i in range(filler):
                event, _ = events_q.append_event(conn, other, payload(f"f{i}"), str(uuid.uuid4()), now)
                runs_q.create_run(conn, str(uuid.uuid4()), account, agent_id, other, event["id"], now)
            conn.execute("UPDATE runs SET status = 'succeeded', started_at = ?1, finished_at = ?1"
                         " WHERE session_id = ?2", (now, other))
        return conn.execute("SELECT last_seq FROM sessions WHERE id = ?", (sid,)).fetchone()[0]

    db = Database(str(db_path))
    db.start_sync()
    try:
        return db.write_sync(job)
    finally:
        db.close_sync()


def _cpu_s(pid: int) -> float:
    """The process's CPU seconds (user + system, every thread) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Arm:
    """One arm's server, its session, its feeder and the arrival times of its replies."""

    def __init__(self, name: str, depth: int) -> None:
        self.name, self.depth = name, depth
        self.proc: subprocess.Popen | None = None
        self.replies: list[float] = []
        self.sent = 0          # messages of the queue (pre-filled and fed)
        self.changed = asyncio.Event()
        self.sockets: list[RawV2] = []

    def queued(self) -> int:
        return self.sent - len(self.replies)


async def _serve_arm(arm: _Arm, tree: Path, data: Path, history: int, filler: int) -> None:
    """Start the arm's server, answer `history` messages in its session, stop it, queue its
    messages (and the filler) in the file, start it again, subscribe from the queue's start."""
    import signal as _signal

    proc, port = start(tree, data)
    url = f"ws://127.0.0.1:{port}/agents/ws"
    kp = keypair(f"deep-queue-{arm.name}")
    c, sid, watch = await _echo_session(url, kp)
    answered: list[float] = []
    got = asyncio.Event()

    def count(frame: dict) -> None:
        for event in frame.get("events") or ([frame["event"]] if "event" in frame else []):
            body = event.get("event", {})
            if body.get("type") == "message" and body.get("role") == "assistant":
                answered.append(time.perf_counter())
                got.set()

    watch.on_event = count
    await watch.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
    if history:
        await _pipeline(c, kp, sid, history, "h")
        deadline = time.monotonic() + CAP_S
        while len(answered) < history and time.monotonic() < deadline:
            got.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(got.wait(), 1.0)
    for sock in (c, watch):
        await sock.close()
    proc.send_signal(_signal.SIGTERM)   # a clean stop: the file is free for the fill
    proc.wait(60)
    last_seq = _fill(data / "agents.sqlite", kp.account_id, sid, arm.depth, filler, int(time.time() * 1000))
    arm.sent = arm.depth
    proc, port = start(tree, data, existing=True)
    arm.proc = proc
    url = f"ws://127.0.0.1:{port}/agents/ws"
    c = await RawV2.open(url, decode=True)
    watch = await RawV2.open(url, decode=True)

    def on_event(frame: dict) -> None:
        for event in frame.get("events") or ([frame["event"]] if "event" in frame else []):
            body = event.get("event", {})
            if body.get("type") == "message" and body.get("role") == "assistant":
                arm.replies.append(time.perf_counter())
                arm.changed.set()

    watch.on_event = on_event
    await watch.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}", "afterSeq": last_seq})
    arm.sockets = [c, watch]
    arm.client = (c, kp, sid)   # type: ignore[attr-defined]


async def _top_up(arm: _Arm) -> int:
    """Bring the arm's queue back to its depth (what its last window answered) and wait until
    every message is accepted: in every arm alike, and before its window, so the window times
    turns alone, as the issue's did (its 50,000 were accepted first, then ran)."""
    c, kp, sid = arm.client   # type: ignore[attr-defined]
    missing = max(arm.depth - arm.queued(), 0)
    if missing:
        await _pipeline(c, kp, sid, missing, f"m{arm.sent}-")
        arm.sent += missing
    return missing


async def _feed(arm: _Arm, stop: asyncio.Event) -> None:
    """(`--feed`) During the window too: a message sent for each one answered, so the window times
    each turn with its MessageSession's accept."""
    c, kp, sid = arm.client   # type: ignore[attr-defined]
    while not stop.is_set():
        missing = arm.depth - arm.queued()
        if missing > 0:
            count = min(missing, 50)
            await _pipeline(c, kp, sid, count, f"m{arm.sent}-")
            arm.sent += count
        else:
            arm.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arm.changed.wait(), 0.05)


async def rounds(tree: Path, data: Path, shallow: int, deep: int, history: int, n_rounds: int,
                 warm_s: float, window_s: float, profile: Path | None = None, feed: bool = False) -> dict:
    """Like with like, one arm at a time: three servers of this tree (a queue `deep` long and two
    `shallow` long, the second an A/A), each with one session of `history` answered messages,
    and every database the same size (the shallow arms hold, in a second session of their agent,
    as many answered messages as the deep arm has queued beyond theirs). Only one server runs at
    a time; the other two are frozen (SIGSTOP), so no arm takes CPU from another. Each round
    wakes each arm in turn (the order rotates), keeps its queue at its depth for `warm_s`, then
    counts its replies in the next `window_s`, and freezes it again. The rounds' ratios to the
    shallow arm of the same round give deep / shallow (the queue's own cost) and shallow A/A /
    shallow (the noise). An arm's queue is topped up to its depth before its window, never
    during it, so a window counts turns alone (feeding a message per answer during the window, as
    `--together` does, also times the accepts: see docs/performance.md)."""
    import signal as _signal

    depth = {"deep": deep, "shallow": shallow, "shallow A/A": shallow}
    arms = {n: _Arm(n, depth[n]) for n in ARMS}
    try:
        for name, arm in arms.items():
            await _serve_arm(arm, tree, data / name.replace(" ", "-").replace("/", ""), history,
                             max(deep - arm.depth, 0))
            arm.proc.send_signal(_signal.SIGSTOP)
        per_round: list[dict] = []
        for r in range(n_rounds):
            order = list(ARMS[r % 3:] + ARMS[:r % 3])
            if r % 2:
                order.reverse()
            row: dict = {"order": order, "loadavg": os.getloadavg()[0]}
            for name in order:
                arm = arms[name]
                arm.proc.send_signal(_signal.SIGCONT)
                await asyncio.sleep(warm_s)        # running its queue, its caches warm again
                topped = await _top_up(arm)
                queued = arm.queued()
                spy = None
                if profile is not None:   # every thread of the server, in its window only
                    spy = subprocess.Popen(  # noqa: ASYNC220 (starts at once; waited for on a thread)
                        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(arm.proc.pid),
                         "--duration", str(max(1, round(window_s))), "--rate", "200", "--format", "raw",
                         "--threads", "--output", str(profile / f"{name.replace(' ', '-').replace('/', '')}-r{r + 1}.txt")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                stop = asyncio.Event()
                feeder = asyncio.create_task(_feed(arm, stop)) if feed else None
                begun, t0, cpu0 = len(arm.replies), time.perf_counter(), _cpu_s(arm.proc.pid)
                await asyncio.sleep(window_s)
                t1, cpu1 = time.perf_counter(), _cpu_s(arm.proc.pid)
                stop.set()
                if feeder is not None:
                    await asyncio.wait_for(feeder, 60)
                if spy is not None:
                    await asyncio.to_thread(spy.wait, 60)
                timed = [t for t in arm.replies[begun:] if t <= t1]
                arm.proc.send_signal(_signal.SIGSTOP)
                # Turns per second of the server's own CPU: what the queue could cost a turn, with
                # the neighbours' share of the cores (which moves wall-clock rates 2x between
                # windows on a shared machine) taken out.
                row[name] = {"turns_per_s": len(timed) / (t1 - t0), "queued": queued, "topped_up": topped,
                             "turns_per_cpu_s": len(timed) / max(cpu1 - cpu0, 1e-6)}
                if len(timed) >= queued and not feed:
                    raise RuntimeError(f"the {name} queue ran out in its window: make it deeper or the window shorter")
            row["deep / shallow"] = row["deep"]["turns_per_s"] / row["shallow"]["turns_per_s"]
            row["A/A"] = row["shallow A/A"]["turns_per_s"] / row["shallow"]["turns_per_s"]
            per_round.append(row)
            print(f"round {r + 1}: " + ", ".join(f"{n} {row[n]['turns_per_s']:.1f}/s, {row[n]['turns_per_cpu_s']:.0f}/CPU s"
                                                  f" ({row[n]['queued']:,} queued)" for n in ARMS)
                  + f"; deep / shallow {row['deep / shallow']:.2f}, A/A {row['A/A']:.2f}, load {row['loadavg']:.1f}",
                  flush=True)
        return {"rounds": per_round}
    finally:
        for arm in arms.values():
            if arm.proc is not None:
                with contextlib.suppress(Exception):
                    arm.proc.send_signal(_signal.SIGCONT)
            for sock in arm.sockets:
                with contextlib.suppress(Exception):
                    await sock.close()
            if arm.proc is not None:
                arm.proc.kill()
                arm.proc.wait(10)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=None, help="git ref of the tree before (default: HEAD~1)")
    parser.add_argument("--shallow", type=int, default=100)
    parser.add_argument("--deep", type=int, default=5000)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--history", type=int, default=500,
                        help="messages answered in each session before the queue (default 500; 0: none)")
    parser.add_argument("--after-only", action="store_true", help="this tree alone: deep / shallow, no before")
    parser.add_argument("--together", action="store_true",
                        help="this tree alone, like with like: a deep and two shallow queues, one server each, "
                             "at once, timed in one window after --skip of each queue (see together())")
    parser.add_argument("--skip", type=int, default=600,
                        help="with --together: replies of each queue before the timing (default 600)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="this tree alone, like with like, one arm at a time (see rounds()): this many"
                             " rounds of a deep, a shallow and a shallow A/A queue")
    parser.add_argument("--warm", type=float, default=1.0, help="with --rounds: seconds an arm runs before its window")
    parser.add_argument("--window", type=float, default=3.0, help="with --rounds: seconds of each arm's window")
    parser.add_argument("--feed", action="store_true", help="with --rounds: also send a message for each one"
                        " answered during the window (each turn timed with its MessageSession's accept)")
    parser.add_argument("--profile", metavar="DIR", help="with --rounds: py-spy (every thread, raw stacks) of each"
                        " arm's server in each window, to DIR/<arm>-r<round>.txt")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    if args.rounds:
        with contextlib.suppress(OSError):   # the load (this process) on its own CPU
            if pin_prefix(LOAD_CPU):
                os.sched_setaffinity(0, {LOAD_CPU})
        with tempfile.TemporaryDirectory() as tmp:
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
            res = await rounds(root, Path(tmp) / "rounds", args.shallow, args.deep, args.history, args.rounds,
                               args.warm, args.window, Path(args.profile) if args.profile else None, args.feed)
        rows = res["rounds"]

        def med(values: list[float]) -> float:
            return sorted(values)[len(values) // 2] if len(values) % 2 else \
                sum(sorted(values)[len(values) // 2 - 1:len(values) // 2 + 1]) / 2

        print(f"\neach session holds {args.history} answered messages; every database {args.deep:,} messages"
              f" beyond them; {args.rounds} rounds, one arm at a time ({args.warm:g} s warm, {args.window:g} s"
              " counted)\n")
        print("| queue | queued when timed | turns/s | / shallow (min-max) | turns per CPU second | / shallow (min-max) |"
              "\n|---|---|---|---|---|---|")
        for name in ARMS:
            ratio = [r[name]["turns_per_s"] / r["shallow"]["turns_per_s"] for r in rows]
            cpu = [r[name]["turns_per_cpu_s"] / r["shallow"]["turns_per_cpu_s"] for r in rows]
            print(f"| {name} | {med([r[name]['queued'] for r in rows]):,.0f} | "
                  f"{med([r[name]['turns_per_s'] for r in rows]):.1f} | {med(ratio):.2f} "
                  f"({min(ratio):.2f}-{max(ratio):.2f}) | {med([r[name]['turns_per_cpu_s'] for r in rows]):.0f} | "
                  f"{med(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f}) |")
        print("(medians of the rounds; each round's ratio is to the shallow arm of the same round)")
        print(f"\nload average {min(r['loadavg'] for r in rows):.1f}-{max(r['loadavg'] for r in rows):.1f}")
        return
    if args.together:
        with tempfile.TemporaryDirectory() as tmp:
            rates = await together(root, Path(tmp) / "together", args.shallow, args.deep, args.turns, args.skip,
                                   args.history)
        print(f"each session holds {args.history} answered messages; timed after {args.skip} of each queue, "
              f"{args.turns} turns each, three servers at once\n")
        print("| queue | queued when timed | turns/s | / shallow |\n|---|---|---|---|")
        for name, r in rates.items():
            print(f"| {name} | {r['queued_when_timed']:,} | {r['turns_per_s']:.1f} | "
                  f"{r['turns_per_s'] / rates['shallow']['turns_per_s']:.2f} |")
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": root} if args.after_only else {
            "before": extract(args.before or "HEAD~1", Path(tmp) / "before"), "after": root}
        rates: dict[tuple[str, int], float] = {}
        print(f"each session holds {args.history} answered messages before the queue", flush=True)
        for depth in (args.shallow, args.deep):
            for name, tree in trees.items():
                rates[name, depth] = await one(tree, Path(tmp) / f"{name}-{depth}", depth,
                                               min(args.turns, depth - 10), args.history)
                print(f"{name:6} {depth:>6} queued: {rates[name, depth]:7.1f} turns/s "
                      f"({QUEUED_WHEN_TIMED[0]} still queued when timed)", flush=True)
        print("\n| tree | turns/s, shallow | turns/s, deep | deep / shallow |\n|---|---|---|---|")
        for name in trees:
            shallow, deep = rates[name, args.shallow], rates[name, args.deep]
            print(f"| {name} | {shallow:.1f} | {deep:.1f} | {deep / shallow:.2f} |")
        if "before" in trees:
            print(f"\nafter / before, deep: {rates['after', args.deep] / rates['before', args.deep]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
