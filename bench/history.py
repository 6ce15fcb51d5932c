"""What verifiable history costs, in one run: `python -m bench.history [--events N]`.

- **append**: `store.events.append_event` into a real SQLite file (on the façade's writer
  thread, blocks of appends in one job, timed in that thread's CPU), with the chain on (this tree)
  and with the link step taken out (the same function with `history.link` replaced by a constant
  and the predecessor read skipped), alternating blocks of appends so machine drift falls on both;
  reported as events per second and the ratio.
- **a turn's appends**: the user's message (with its envelope) and the reply, each a write job of
  its own as in the server, so each commit counts; the writer thread's CPU per turn with the chain
  and without (no predecessor read, no hash, no envelope), in alternating blocks: what the chain
  adds to a turn on the writer's thread.
- **verify**: a follower checking a replay of N stored events (a session of the `rpc`
  benchmark's event sizes), on this one core: from the stored bytes as a v2 replay carries them
  (`ChainCheck.add`); and through the Python client's whole path, replay frames of 200 decoded
  and each event checked, the signed head that ends the replay checked against the pinned key,
  with the decoder keeping each event's bytes (`clients.wire.read_frame`, as the client does),
  with each decoded event encoded again (as it once did), and through a `Subscription` (as
  `AgentsClient.subscribe` delivers it, each item taken by its reader), beside the decode alone,
  so the check's own cost shows; events per second for each. The goal: at least 200,000 per
  second on one core. `--replay-only` runs this part alone; with `--candidates` also the decoders
  and link steps a client could use, side by side; with `--before REF` (and `--aa`) the client's
  replay of REF's code beside `--after`'s, each in child processes of its own tree, in turn.

With `--before REF` (a tree without the chain's write work: docs/performance.md, "Verifiable
history, before and after", says how to make one) the issue's before/after comes in the same run,
each tree from its own code, with `--aa` a second copy of the before tree beside it (the A/A):

- **MessageSession end to end**: `bench.sqlite_ab`'s `turns c1` and `turns c8` cells (each tree
  its own server, rounds alternating which goes first): turns per second, p50 and p99 from the
  send to the durable reply, and the server's CPU per turn (with its user and system time);
  `--fresh-servers` starts each tree's server afresh every round, on a new copy of its seeded
  data dir, where by default one server per tree serves the whole run: one server process can
  stay slower than its twin for its whole life (the A/A's server CPU at c8 has read 0.96 in one
  run and 1.23 in the next, alike in every round, mostly the writer thread's system time), which
  more rounds of the same processes cannot average out and a process per round spreads over them
  (its cause, read from the minor page faults the table shows: glibc malloc giving the writer's
  freed memory back and faulting it in again, in some processes and not others;
  `--steady-malloc` fixes the servers' malloc thresholds, so none does; with both, one run's
  A/A of the server's CPU per turn at c8 read 0.999 (0.991..1.007), against 0.936 (0.911..0.962)
  with neither, 1.017 (0.915..1.131) with fresh servers alone);
- **append throughput per tree**: the tree's own `append_event` in a child process of that tree
  (blocks of appends in one job, the writer thread's CPU), and a turn's two appends, each its
  own commit; the user's message carries its envelope where the tree's handler makes one;
- **verify**: as above (the client side has no before: without the chain there is no check).

Nothing is asserted; every loop is bounded in count.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from seed_agents.clients.history import Follower
from seed_agents.clients.subscription import Subscription
from seed_agents.clients.wire import decode_frame, read_frame
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.framing_v2 import append_batch_cbor
from seed_agents.protocol.api import history
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import accounts as accounts_q
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import codec
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q

SESSION = "0b8f3c1e-5a7d-4e6f-9a1b-2c3d4e5f6a7b"
PAYLOAD = {"type": "message", "role": "assistant",
           "content": "echo: " + "the quick brown fox jumps over the lazy dog " * 13,
           "meta": {"model": "echo", "provider": "echo", "usage": {"inputTokens": 120, "outputTokens": 130}}}


def stored_bodies(n: int) -> list[bytes]:
    return [codec.encode({"id": f"event-{seq}", "sessionId": SESSION, "seq": seq, "event": PAYLOAD,
                          "createdAt": 1_764_900_000_000 + seq}) for seq in range(1, n + 1)]


BATCH = 200   # events per replay frame, as the server batches a page


def _signed_replay_end(key, n: int, last_link: bytes) -> bytes:  # noqa: ANN001  (key: a Keypair)
    """The `replayed` frame that ends a replay of `n` events, with the head the server signs."""
    head = history.sign_head(key, SESSION, n, last_link, 1_764_900_000_000)
    return dagcbor.encode({"_": "replayed", "key": f"sessions/{SESSION}", "seq": n, "head": head})


def verify_rates(n: int, rounds: int) -> dict:
    """Events per CPU second, one core: the check alone from stored bytes; and the Python
    client's whole verifying replay, frames decoded, each event checked, and the signed head
    that ends the replay checked against the pinned server key, with the decoder keeping each
    event's bytes (clients/wire.read_frame) and without (every event encoded again)."""
    bodies = stored_bodies(n)
    frames = [append_batch_cbor(f"sessions/{SESSION}", bodies[i:i + BATCH]) for i in range(0, n, BATCH)]
    key = Keypair.from_seed(bytes(32))
    check = history.ChainCheck(SESSION)
    check.extend(bodies)
    end = _signed_replay_end(key, n, check.link)
    rates: dict[str, list[float]] = {name: [] for name in CELLS}
    # CPU time of this process (one thread): what one core spends, whatever else the machine runs.
    # Each cell starts from a collected heap holding the same objects (the bodies and frames, bytes
    # the cyclic collector does not track), so no cell pays for another's garbage.
    for _ in range(rounds):
        gc.collect()
        t = time.process_time()
        check = history.ChainCheck(SESSION)
        for body in bodies:
            check.add(body)
        rates[CELLS[0]].append(n / (time.process_time() - t))
        decoded = [dagcbor.decode(b) for b in bodies]
        gc.collect()
        t = time.process_time()
        follower = Follower(SESSION, None)
        for event in decoded:
            follower.add(event)
        rates[CELLS[1]].append(n / (time.process_time() - t))
        del decoded
        gc.collect()
        t = time.process_time()
        follower = Follower(SESSION, key.public_key)
        for data in frames:
            frame, kept = read_frame(data)
            for event, body in zip(frame["events"], kept):
                follower.add(event, body)
        follower.head(read_frame(end)[0]["head"])
        rates[CELLS[2]].append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        follower = Follower(SESSION, key.public_key)
        for data in frames:
            for event in decode_frame(data)["events"]:
                follower.add(event)
        follower.head(decode_frame(end)["head"])
        rates[CELLS[3]].append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        for data in frames:
            read_frame(data)
        rates[CELLS[4]].append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        for data in frames:
            decode_frame(data)
        rates[CELLS[5]].append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        asyncio.run(_through_a_subscription(frames, end, key.public_key, n))
        rates[CELLS[6]].append(n / (time.process_time() - t))
    out: dict = {name: statistics.median(values) for name, values in rates.items()}
    out["event bytes"] = len(bodies[0])
    return out


class _NoServer:
    """The client side a Subscription needs, for a replay that is only read: nothing to ask."""

    async def _unsubscribe(self, sub: Subscription) -> None:
        pass

    async def request(self, action: dict) -> dict:
        raise AssertionError(f"the replay should have verified, not asked {action.get('_')}")


async def _through_a_subscription(frames: list[bytes], end: bytes, server_key: bytes, n: int) -> None:
    """The replay as `AgentsClient.subscribe` with a pinned key delivers it: each frame read by
    read_frame, fed to the session's Subscription (which checks each event with its Follower and
    buffers it), and every item taken by its reader (`__anext__`), the `replayed` item last."""
    sub = Subscription(_NoServer(), f"sessions/{SESSION}", None)   # its default buffer, as a client has it
    sub.follower = Follower(SESSION, server_key)
    taken = 0
    for data in [*frames, end]:
        frame, kept = read_frame(data)
        await sub._feed(frame, kept)
        while sub._items:
            await sub.__anext__()
            taken += 1
    if taken != n + 1 or sub.follower is None or sub.follower.seq != n:
        raise RuntimeError(f"the subscription delivered {taken} items and verified up to "
                           f"{sub.follower.seq if sub.follower else 'a failure'}")


CELLS = ("check from stored bytes", "check of decoded events", "client replay, bytes kept",
         "client replay, encoded again", "decode alone, bytes kept", "decode alone, whole frame",
         "client replay, via a Subscription")


def _unlinked_append(conn, session_id, payload, event_id, now, max_bytes=events_q.MAX_EVENT_BYTES, envelope=None):  # noqa: ANN001
    """append_event as it was before the chain: no predecessor read, no hash, no link column."""
    kind, message_from = events_q.activity_of(payload)
    seq, agent_id = conn.execute(
        "UPDATE sessions SET last_seq = last_seq + 1, updated_at = max(updated_at, ?1),"
        " message_at = CASE WHEN ?2 IS NULL THEN message_at ELSE max(coalesce(message_at, 0), ?1) END,"
        " message_from = coalesce(?2, message_from)"
        " WHERE id = ?3 RETURNING last_seq, agent_id", (now, message_from, session_id)).fetchone()
    agents_q.record_activity(conn, agent_id, session_id, kind, message_from, now)
    event = {"id": event_id, "sessionId": session_id, "seq": seq, "event": payload, "createdAt": now}
    body = codec.encode(event)
    conn.execute("INSERT INTO session_events (session_id, seq, id, created_at, body) VALUES (?, ?, ?, ?, ?)",
                 (session_id, seq, event_id, now, body))
    return event, body


@asynccontextmanager
async def _two_sessions() -> AsyncIterator[Database]:
    """A writer on a scratch store with one agent and two sessions: "linked" (appended with the
    chain) and "unlinked" (without), so both kinds of append meet the same store."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(os.path.join(tmp, "bench.sqlite"))
        await db.start()
        try:
            await db.write(accounts_q.ensure_account, "z6MkBench", 1)
            await db.write(agents_q.create_agent, "a1", "z6MkBench", {"name": "bench"}, "/tmp/a1", 1)
            for sid in ("linked", "unlinked"):
                await db.write(sessions_q.create_session, sid, "z6MkBench", "a1", None, 1)
            yield db
        finally:
            await db.close()


def _block_order(block: int) -> list:
    """(name, append function, session) of both kinds, in the order block `block` runs them
    (alternating, so neither always goes first)."""
    order = [("with the chain", events_q.append_event, "linked"), ("without", _unlinked_append, "unlinked")]
    return order[::-1] if block % 2 else order


async def append_rates(blocks: int, per_block: int) -> dict:
    async with _two_sessions() as db:
        rates: dict[str, list[float]] = {"with the chain": [], "without": []}
        counter = 0
        for block in range(blocks):
            for name, fn, sid in _block_order(block):
                first = counter

                def job(conn, fn=fn, sid=sid, first=first):  # noqa: ANN001
                    # One transaction of appends, timed in the writer's CPU: the append's own
                    # work, without the fsync a commit adds to each (the same for both).
                    t = time.thread_time()
                    for i in range(first + 1, first + per_block + 1):
                        fn(conn, sid, PAYLOAD, f"e{i}", 1_764_900_000_000 + i)
                    return time.thread_time() - t

                counter += per_block
                rates[name].append(per_block / await db.write(job))
    out = {name: statistics.median(v) for name, v in rates.items()}
    out["ratio"] = out["with the chain"] / out["without"]
    return out


# A turn's two appends as the echo agent makes them: the user's message (with its envelope) and
# the reply. The envelope is a signed one, and the message names its signer as the server's
# handler does, so a tree that packs envelopes (protocol/api/stored_envelope.py) packs it as it
# would a client's.
def signed_user(session_id: str) -> tuple[dict, bytes]:
    """(the user's message as the handler stores it, its signed envelope's bytes)."""
    from seed_agents.protocol.wire.envelope import sign_envelope

    key = Keypair.from_seed(bytes([7] * 32))
    text = "a question of a modest length " * 4
    raw = sign_envelope(key, {"_": "MessageSession", "sessionId": session_id, "clientMessageId": "bench-1",
                              "content": [{"type": "text", "text": text}]}, ts=1_764_900_000_000)
    return {"type": "message", "role": "user", "content": text, "clientMessageId": "bench-1",
            "meta": {"accountId": key.account_id, "signerId": key.account_id},
            "envelopeCid": history.cid_text(history.cid_bytes(raw))}, raw


USER_PAYLOAD, ENVELOPE = signed_user("linked")


def _clock(conn) -> float:  # noqa: ANN001
    return time.thread_time()


async def turn_costs(blocks: int, per_block: int) -> dict:
    """The writer thread's CPU per turn, commits included: each append is a write job of its own
    (as in the server: the message's job, then the reply's), with the chain (`append_event`) and
    without (`_unlinked_append`), in alternating blocks of `per_block` turns. The writer's clock
    is read by a job of its own before and after each block, so its fsyncs' waits do not count."""
    async with _two_sessions() as db:
        costs: dict[str, list[float]] = {"with the chain": [], "without": []}
        counter = 0
        for block in range(blocks):
            for name, fn, sid in _block_order(block):
                start = await db.write(_clock)
                for _ in range(per_block):
                    counter += 1
                    now = 1_764_900_000_000 + counter
                    await db.write(fn, sid, USER_PAYLOAD, f"u{counter}", now, events_q.MAX_EVENT_BYTES, ENVELOPE)
                    await db.write(fn, sid, PAYLOAD, f"r{counter}", now)
                costs[name].append((await db.write(_clock) - start) / per_block * 1e6)
    out = {name: statistics.median(v) for name, v in costs.items()}
    out["added"] = out["with the chain"] - out["without"]
    return out


def tree_appends(spec: dict) -> dict:
    """(Runs in a child process of one tree, with only that tree's modules: its source is sent as
    text.) The tree's `append_event` into a scratch SQLite file: events per second of the writer
    thread's CPU in blocks of appends in one job, and the writer's CPU per turn (the user's
    message, with its envelope when `spec["envelope"]`, then the reply, each its own commit)."""
    import asyncio
    import os
    import statistics
    import tempfile
    import time

    from seed_agents.server.database.sqlite.database import Database
    from seed_agents.server.store import accounts as accounts_q
    from seed_agents.server.store import agents as agents_q
    from seed_agents.server.store import events as events_q
    from seed_agents.server.store import sessions as sessions_q

    reply = spec["reply"]
    user = dict(spec["user"])
    envelope = None
    if spec["envelope"]:   # (the signed one, for session "s1": trees_appends)
        user["envelopeCid"] = spec["envelope_cid"]
        envelope = bytes.fromhex(spec["envelope_hex"])

    def clock(conn):  # noqa: ANN001
        return time.thread_time()

    async def run() -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            db = Database(os.path.join(tmp, "bench.sqlite"))
            await db.start()
            try:
                await db.write(accounts_q.ensure_account, "z6MkBench", 1)
                await db.write(agents_q.create_agent, "a1", "z6MkBench", {"name": "bench"}, "/tmp/a1", 1)
                await db.write(sessions_q.create_session, "s1", "z6MkBench", "a1", None, 1)
                rates, turns, counter = [], [], 0
                for _ in range(spec["blocks"]):
                    first = counter
                    counter += spec["per_block"]

                    def job(conn, first=first):  # noqa: ANN001
                        t = time.thread_time()
                        for i in range(first + 1, first + spec["per_block"] + 1):
                            events_q.append_event(conn, "s1", reply, f"e{i}", 1_764_900_000_000 + i)
                        return time.thread_time() - t

                    rates.append(spec["per_block"] / await db.write(job))
                    start = await db.write(clock)
                    for _ in range(spec["per_turn_block"]):
                        counter += 1
                        now = 1_764_900_000_000 + counter
                        await db.write(events_q.append_event, "s1", user, f"u{counter}", now,
                                       events_q.MAX_EVENT_BYTES, envelope)
                        await db.write(events_q.append_event, "s1", reply, f"r{counter}", now)
                    turns.append((await db.write(clock) - start) / spec["per_turn_block"] * 1e6)
                return {"appends_per_s": statistics.median(rates), "turn_writer_us": statistics.median(turns)}
            finally:
                await db.close()

    return asyncio.run(run())


def makes_envelope(tree: Path) -> bool:
    """Whether the tree's MessageSession handler keeps the signed envelope (the chain's write
    work), read from its source: the before tree's stub takes that call out."""
    handler = tree / "server" / "handlers" / "messages.py"
    return handler.is_file() and "= signed_envelope(env)" in handler.read_text()


def run_in_tree(tree: Path, fn, spec: dict) -> dict:  # noqa: ANN001
    """`fn(spec)` in a child process of `tree`, with only that tree's modules: `fn`'s source is
    sent as text (so it imports what it uses inside itself), its answer read back as JSON."""
    import inspect
    import json
    import subprocess
    import sys

    from bench.trees import tree_env

    code = (inspect.getsource(fn) + "\nimport json, sys\n"
            f"print(json.dumps({fn.__name__}(json.loads(sys.argv[1]))))\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], cwd=str(tree), capture_output=True,
                         text=True, timeout=600, env=tree_env(tree))
    if out.returncode != 0:
        raise RuntimeError(f"{fn.__name__} in {tree} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def interleaved_in_trees(trees: dict[str, Path], rounds: int, fn, specs: dict[str, dict],  # noqa: ANN001
                         figures: tuple[str, ...]) -> dict:
    """`run_in_tree(tree, fn, specs[name])` for each tree in each round, the trees taking turns
    going first; per figure each tree's median and, for every tree but `before`, the per-round
    ratios against `before` (geometric mean, 95% interval)."""
    from bench.sqlite_ab import geomean_ci

    names = list(trees)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            runs[name].append(run_in_tree(trees[name], fn, specs[name]))
    out: dict = {}
    for fig in figures:
        out[fig] = {name: statistics.median(x[fig] for x in runs[name]) for name in names}
        for name in names[1:]:
            out[fig][f"{name}/before"] = geomean_ci([a[fig] / b[fig] for a, b in zip(runs[name], runs["before"])])
    return out


def trees_appends(trees: dict[str, Path], rounds: int, blocks: int, per_block: int, per_turn_block: int) -> dict:
    """Each tree's appends (`tree_appends`), one child process per tree and round, the trees
    taking turns going first; per figure the medians and the per-round ratios against `before`."""
    user, envelope = signed_user("s1")
    specs = {name: {"reply": PAYLOAD, "user": {k: v for k, v in user.items() if k != "envelopeCid"},
                    "envelope": makes_envelope(tree), "envelope_cid": user["envelopeCid"],
                    "envelope_hex": envelope.hex(), "blocks": blocks, "per_block": per_block,
                    "per_turn_block": per_turn_block} for name, tree in trees.items()}
    return {"envelope": {name: spec["envelope"] for name, spec in specs.items()},
            **interleaved_in_trees(trees, rounds, tree_appends, specs, ("appends_per_s", "turn_writer_us"))}


def tree_replay(spec: dict) -> dict:
    """(Runs in a child process of one tree, with only that tree's modules: its source is sent as
    text, like `tree_appends`.) The tree's Python client verifying a replay on one core, as
    `verify_rates` measures it: `clients.wire.read_frame` on replay frames of `spec["batch"]`
    events, `clients.history.Follower.add` with each event's kept bytes, and the signed head at
    the end against the pinned key; the same through a `Subscription` (as
    `AgentsClient.subscribe` with a pinned key delivers it, each item taken by its reader); and
    the frames' decode alone. Events per CPU second, the median of `spec["inner"]` passes."""
    import asyncio
    import gc
    import os
    import statistics
    import time

    from seed_agents.clients.history import Follower
    from seed_agents.clients.subscription import Subscription
    from seed_agents.clients.wire import read_frame
    from seed_agents.protocol.api import history
    from seed_agents.protocol.wire import dagcbor
    from seed_agents.protocol.wire.framing_v2 import append_batch_cbor
    from seed_agents.protocol.wire.keys import Keypair

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})   # one core
    n, batch, sid = spec["events"], spec["batch"], spec["session"]
    bodies = [dagcbor.encode({"id": f"event-{seq}", "sessionId": sid, "seq": seq, "event": spec["payload"],
                              "createdAt": 1_764_900_000_000 + seq}) for seq in range(1, n + 1)]
    frames = [append_batch_cbor(f"sessions/{sid}", bodies[i:i + batch]) for i in range(0, n, batch)]
    key = Keypair.from_seed(bytes(32))
    check = history.ChainCheck(sid)
    check.extend(bodies)
    head = history.sign_head(key, sid, n, check.link, 1_764_900_000_000)
    end = dagcbor.encode({"_": "replayed", "key": f"sessions/{sid}", "seq": n, "head": head})
    class NoServer:   # what a Subscription needs of its client, for a replay that is only read
        async def _unsubscribe(self, sub) -> None:  # noqa: ANN001
            pass

        async def request(self, action: dict) -> dict:
            raise AssertionError("the replay should have verified")

    async def through_a_subscription() -> None:
        sub = Subscription(NoServer(), f"sessions/{sid}", None)
        sub.follower = Follower(sid, key.public_key)
        taken = 0
        for data in [*frames, end]:
            frame, kept = read_frame(data)
            await sub._feed(frame, kept)
            while sub._items:
                await sub.__anext__()
                taken += 1
        assert taken == n + 1 and sub.follower is not None and sub.follower.seq == n

    replay, decode, subscription = [], [], []
    for _ in range(spec["inner"]):
        gc.collect()
        t = time.process_time()
        follower = Follower(sid, key.public_key)
        for data in frames:
            frame, kept = read_frame(data)
            for event, body in zip(frame["events"], kept):
                follower.add(event, body)
        follower.head(read_frame(end)[0]["head"])
        replay.append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        for data in frames:
            read_frame(data)
        decode.append(n / (time.process_time() - t))
        gc.collect()
        t = time.process_time()
        asyncio.run(through_a_subscription())
        subscription.append(n / (time.process_time() - t))
    return {"replay_per_s": statistics.median(replay), "decode_per_s": statistics.median(decode),
            "subscription_per_s": statistics.median(subscription)}


def trees_replay(trees: dict[str, Path], rounds: int, events: int, inner: int) -> dict:
    """Each tree's client replay (`tree_replay`), one child process per tree and round, the
    trees taking turns going first; per figure the medians, and the per-round ratios against
    `before` (geometric mean, 95% interval)."""
    spec = {"events": events, "batch": BATCH, "session": SESSION, "payload": PAYLOAD, "inner": inner}
    return interleaved_in_trees(trees, rounds, tree_replay, {name: spec for name in trees},
                                ("replay_per_s", "subscription_per_s", "decode_per_s"))


def replay_before_after(args: argparse.Namespace) -> None:
    """The client's verifying replay of the `--before` tree beside the `--after` one (and with
    `--aa` a second copy of before), in one run: `trees_replay`."""
    import shutil

    from bench import sqlite_ab

    tmp = Path(tempfile.mkdtemp(prefix="bench-history-replay-"))
    try:
        trees = {}
        for name, ref in (("before", args.before), ("after", args.after)):
            trees[name], _ = sqlite_ab.resolve(ref, tmp / name)
        if args.aa:
            trees["same"] = trees["before"]
        load0 = os.getloadavg()
        result = trees_replay(trees, args.tree_rounds, args.events, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"the client's verifying replay per tree ({args.before} before, {args.after} after), "
          f"{args.events} events in frames of {BATCH}, one core, {args.tree_rounds} rounds of a child "
          f"process per tree, each the median of {args.rounds} passes:")
    print("| figure | " + " | ".join(trees) + " | " + " | ".join(f"{n}/before (95% CI)" for n in list(trees)[1:]) + " |")
    print("|---" * (2 * len(trees)) + "|")
    for fig, title in (("replay_per_s", "whole replay: decode, check, signed head (events/s)"),
                       ("subscription_per_s", "the same through a Subscription, each item taken (events/s)"),
                       ("decode_per_s", "decode alone, bytes kept (events/s)")):
        row = result[fig]
        cis = [row[f"{n}/before"] for n in list(trees)[1:]]
        print(f"| {title} | " + " | ".join(f"{row[n]:,.0f}" for n in trees) + " | "
              + " | ".join(f"{c['geomean']:.3f} ({c['ci95'][0]:.3f}..{c['ci95'][1]:.3f})" if c["ci95"] else "-"
                           for c in cis) + " |")
    after = result["replay_per_s"]["after"]
    print(f"after: {after / GOAL_PER_S:.2f} of the goal ({GOAL_PER_S:,} events/s on one core): "
          f"{'met' if after >= GOAL_PER_S else 'not met'}")
    print(f"load average (1, 5, 15 min) at start {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, "
          f"at end {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}\n")


def decoder_candidates(n: int, rounds: int) -> dict[str, float]:
    """The ways a client could read replay frames and link their events, measured side by side
    (docs/performance.md, "Verifying a replay", says which was chosen and why): microseconds of
    one core per event, median of `rounds` interleaved passes, each from a collected heap."""
    import cbrrr
    import libipld

    from seed_agents.protocol.wire.framing_v2 import _APPEND_PREFIX, _EVENTS, split_append

    bodies = stored_bodies(n)
    frames = [append_batch_cbor(f"sessions/{SESSION}", bodies[i:i + BATCH]) for i in range(0, n, BATCH)]
    split = [split_append(data) for data in frames]
    key_bytes = dagcbor.encode(f"sessions/{SESSION}")

    def encoded_again(data: bytes) -> None:   # main before: cbor2, each event encoded again
        value = dagcbor.decode_unchecked(data, max_depth=256)
        kept = [dagcbor.encode(e) for e in value["events"]]
        assert append_batch_cbor(value["key"], kept) == data

    def libipld_encoded_again(data: bytes) -> None:   # libipld is lenient: the proof by encoding again
        value = libipld.decode_dag_cbor(data)
        kept = [libipld.encode_dag_cbor(e) for e in value["events"]]
        assert b"".join((_APPEND_PREFIX, key_bytes, _EVENTS, dagcbor.encode_head(4, len(kept)), *kept)) == data

    def link_from_bytes() -> None:
        check = history.ChainCheck(SESSION)
        for _, kept in split:
            for body in kept:
                check.add(body)

    def link_from_fields() -> None:
        check = history.ChainCheck(SESSION)
        for frame, kept in split:
            for event, body in zip(frame["events"], kept):
                check.add_decoded(body, event)

    def hash_alone() -> None:
        for _, kept in split:
            for body in kept:
                history.sha256(body)

    def each(read) -> Callable[[], None]:  # noqa: ANN001
        def run() -> None:   # one frame at a time, dropped when read: as a client consumes a replay
            for data in frames:
                read(data)
        return run

    candidates = {
        "decode: cbor2, each event encoded again and compared (main before)": each(encoded_again),
        "decode: cbrrr strict, event by event, bytes kept (chosen)": each(split_append),
        "decode: cbrrr strict, whole frame (no event bytes)": each(cbrrr.decode_dag_cbor),
        "decode: libipld, whole frame (lenient, no event bytes)": each(libipld.decode_dag_cbor),
        "decode: libipld, whole frame, each event encoded again by libipld": each(libipld_encoded_again),
        "link: fields read from the bytes (ChainCheck.add)": link_from_bytes,
        "link: fields from the decoded event (ChainCheck.add_decoded)": link_from_fields,
        "hashlib sha256 of each event's kept bytes alone": hash_alone,
    }
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, run in candidates.items():
            gc.collect()
            t = time.process_time()
            run()
            times[name].append((time.process_time() - t) / n * 1e6)
    return {name: statistics.median(v) for name, v in times.items()}


GOAL_PER_S = 200_000   # issue 40: verifying a replay on one core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the replay checked")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks of appends per variant")
    parser.add_argument("--per-block", type=int, default=500)
    parser.add_argument("--turn-blocks", type=int, default=10, help="alternating blocks of turns per variant")
    parser.add_argument("--per-turn-block", type=int, default=100)
    parser.add_argument("--before", default=None, metavar="REF",
                        help="a tree without the chain's write work: MessageSession end to end and the "
                             "appends of each tree, before/after in this run")
    parser.add_argument("--after", default=".", metavar="REF", help="the tree with the chain (default: this one)")
    parser.add_argument("--aa", action="store_true", help="with --before: a second copy of the before tree beside")
    parser.add_argument("--turn-rounds", type=int, default=8, help="with --before: rounds of the turns cells")
    parser.add_argument("--fresh-servers", action="store_true",
                        help="with --before: a new server per tree every round of the turns cells, on a fresh "
                             "copy of its seeded data dir (bench.sqlite_ab --fresh-servers)")
    parser.add_argument("--steady-malloc", action="store_true",
                        help="with --before: the turns cells' servers with glibc malloc's thresholds fixed "
                             "(bench.sqlite_ab --steady-malloc)")
    parser.add_argument("--tree-rounds", type=int, default=6, help="with --before: rounds of each tree's appends "
                        "(with --replay-only: of each tree's replay)")
    parser.add_argument("--replay-only", action="store_true",
                        help="only the replay's verification; with --before REF, also the client's replay of "
                             "REF's code beside --after's (and the A/A with --aa), child processes in turn")
    parser.add_argument("--candidates", action="store_true",
                        help="with --replay-only: also the decoders and link steps a client could use, side by side")
    args = parser.parse_args()
    if args.before and not args.replay_only:
        before_after(args)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})   # one core
    load0 = os.getloadavg()
    rates = verify_rates(args.events, args.rounds)
    load1 = os.getloadavg()
    print(f"verify a replay of {args.events} events ({rates['event bytes']} bytes each), one core "
          f"(load average {load0[0]:.1f} at start, {load1[0]:.1f} at end):")
    for name in (*CELLS[:4], CELLS[6]):
        print(f"  {name:32} {rates[name]:>10,.0f} events/s  ({rates[name] / GOAL_PER_S:.2f} of the goal, "
              f"{GOAL_PER_S:,} events/s on one core: {'met' if rates[name] >= GOAL_PER_S else 'not met'})")
    for name in CELLS[4:6]:
        print(f"  {name:32} {rates[name]:>10,.0f} events/s  (what a client spends without the check)")
    for name, alone in ((CELLS[2], rates[CELLS[4]]), (CELLS[3], rates[CELLS[5]])):
        added = 1e6 / rates[name] - 1e6 / alone
        print(f"  the check's own cost, {name.removeprefix('client replay, ')}: {added:.1f} us an event "
              f"({1e6 / added:,.0f} events/s)" if added > 0 else f"  {name}: within the decode's noise")
    if args.replay_only:
        if args.candidates:
            load0 = os.getloadavg()
            found = decoder_candidates(args.events, args.rounds)
            print(f"\nthe candidates, us of one core an event (load average {load0[0]:.1f} at start, "
                  f"{os.getloadavg()[0]:.1f} at end):")
            for name, us in found.items():
                print(f"  {name:70} {us:5.2f} us  ({1e6 / us:>9,.0f}/s)")
        if args.before:
            print()
            replay_before_after(args)
        return
    appends = asyncio.run(append_rates(args.blocks, args.per_block))
    print(f"append_event into SQLite, {args.blocks} alternating blocks of {args.per_block}:")
    for name in ("with the chain", "without"):
        print(f"  {name:32} {appends[name]:>10,.0f} events/s")
    print(f"  with / without                   {appends['ratio']:.3f}")
    turns = asyncio.run(turn_costs(args.turn_blocks, args.per_turn_block))
    print(f"a turn's two appends, each its own transaction, {args.turn_blocks} alternating blocks of "
          f"{args.per_turn_block} turns (the writer thread's CPU, commits included):")
    for name in ("with the chain", "without"):
        print(f"  {name:32} {turns[name]:>10,.1f} us a turn")
    print(f"  the chain's share                {turns['added']:>+10,.1f} us a turn")


def before_after(args: argparse.Namespace) -> None:
    """The issue's before/after in one run: MessageSession end to end (bench.sqlite_ab's turns
    cells) and each tree's appends, with the A/A beside when asked."""
    import shutil

    from bench import sqlite_ab

    print(f"MessageSession end to end, {args.before} (before) against {args.after} (after), "
          f"{args.turn_rounds} rounds{', with an A/A' if args.aa else ''}"
          f"{', fresh servers each round' if args.fresh_servers else ''}"
          f"{', steady malloc' if args.steady_malloc else ''}:", flush=True)
    turns = sqlite_ab.main(args.before, args.after, False, args.turn_rounds, None, 0.0, ["turns c1", "turns c8"],
                           args.aa, fresh_servers=args.fresh_servers, steady_malloc=args.steady_malloc)
    print()
    print(sqlite_ab.table(turns["summary"]))
    if "summary_aa" in turns:
        print("\nA/A (the before tree's second server against the first, in the same rounds):\n")
        print(sqlite_ab.table(turns["summary_aa"]))
    print(f"\nload average at start / end: {turns['loadavg_start'][0]:.1f} / {turns['loadavg_end'][0]:.1f}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-history-"))
    try:
        trees = {}
        for name, ref in (("before", args.before), ("after", args.after)):
            trees[name], _ = sqlite_ab.resolve(ref, tmp / name)
        if args.aa:
            trees["same"] = trees["before"]
        load0 = os.getloadavg()[0]
        appends = trees_appends(trees, args.tree_rounds, args.blocks, args.per_block, args.per_turn_block)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\neach tree's append_event, {args.tree_rounds} rounds of a child process per tree (the user's "
          f"envelope kept: {', '.join(f'{n} {v}' for n, v in appends['envelope'].items())}):")
    print("| figure | " + " | ".join(trees) + " | " + " | ".join(f"{n}/before (95% CI)" for n in list(trees)[1:]) + " |")
    print("|---" * (2 * len(trees)) + "|")
    for fig, title in (("appends_per_s", "appends/s, blocks of appends in one job (writer CPU)"),
                       ("turn_writer_us", "writer CPU per turn, two appends each its own commit (us)")):
        row = appends[fig]
        cis = [row[f"{n}/before"] for n in list(trees)[1:]]
        print(f"| {title} | " + " | ".join(f"{row[n]:,.0f}" for n in trees) + " | "
              + " | ".join(f"{c['geomean']:.3f} ({c['ci95'][0]:.3f}..{c['ci95'][1]:.3f})" if c["ci95"] else "-"
                           for c in cis) + " |")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (at the appends' start {load0:.1f})\n")


if __name__ == "__main__":
    main()
