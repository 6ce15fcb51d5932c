"""The server with fan-out timings, for the bench only (the server code is untouched, so the
timing costs nothing when it is off):

    python -m bench.timed_server OUT_FILE -- <seed_agents.server.main arguments>

Wraps three methods of the live layer before the server starts, and writes one JSON line to
OUT_FILE for every publication that reached at least one socket:

- `Broadcaster.publish_append` stamps `t_append`: the durable event is committed and its
  publication begins (the owner's lookup, the relay, the event map);
- `Hub.publish_to` stamps its entry and its return: every subscriber's `deliver` (the frame
  built once per framing on first use, then queued on each socket);
- a callback queued with `call_soon` right after `publish_to` returns runs after every socket
  write that publication scheduled (each socket's outbound flush is a `call_soon` queued during
  `deliver`, and the loop runs callbacks in order): `t_written`, the last socket write. A socket
  whose transport is paused (over its high-water mark) writes later, and is counted in `paused`.
- `Outgoing.frame` times the first build of each framing's frame (`encode_us`), inside the
  `publish_to` window.

Each line: {kind, seq, role, sockets, paused, build_us (t_append to publish_to), encode_us,
deliver_us (publish_to, encode included), write_us (publish_to's return to the last write),
total_us (t_append, or publish_to's entry for a publication that is not an append, to the last
write), cpu_us (the CPU time the loop's thread used over total_us: what a neighbour taking the
core does not inflate; it includes whatever else the loop ran in between)}.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time


def install(out_path: str) -> None:
    from seed_agents.server.live import broadcaster, frames, hub

    out = open(out_path, "a", buffering=1)   # noqa: SIM115 - open for the server's lifetime
    perf, cpu = time.perf_counter, time.thread_time   # (the loop's thread: CPU it used, not time it waited)
    state = {"t_append": None, "c_append": None, "encode": 0.0}

    orig_append = broadcaster.Broadcaster.publish_append
    orig_publish = hub.Hub.publish_to
    orig_frame = frames.Outgoing.frame

    def publish_append(self, session_id, event, body):   # noqa: ANN001
        state["t_append"], state["c_append"] = perf(), cpu()
        try:
            return orig_append(self, session_id, event, body)
        finally:
            state["t_append"] = state["c_append"] = None

    def frame(self, framing):   # noqa: ANN001
        if framing.name in self._frames:
            return self._frames[framing.name]
        t = perf()
        built = orig_frame(self, framing)
        state["encode"] += perf() - t
        return built

    def publish_to(self, keys, event):   # noqa: ANN001
        t_append, c_append = state["t_append"], state["c_append"]
        state["encode"] = 0.0
        c0, t0 = cpu(), perf()
        delivered = orig_publish(self, keys, event)
        t1 = perf()
        if delivered:
            encode = state["encode"]
            subs = [s for k in keys for s in self._by_key.get(k, ())]
            c_start = c_append if c_append is not None else c0
            asyncio.get_running_loop().call_soon(_written, event, subs, t_append, t0, t1, encode, delivered, c_start)
        return delivered

    def _written(event, subs, t_append, t0, t1, encode, delivered, c_start) -> None:   # noqa: ANN001
        t2, c2 = perf(), cpu()
        paused = sum(1 for s in subs if s.conn.outbound.queued_bytes)
        value = event.value
        inner = value.get("event") if isinstance(value.get("event"), dict) else {}
        payload = inner.get("event") if isinstance(inner.get("event"), dict) else {}
        start = t_append if t_append is not None else t0
        out.write(json.dumps({
            "kind": value.get("_"), "seq": event.seq, "role": payload.get("role"), "sockets": delivered,
            "paused": paused, "build_us": round((t0 - start) * 1e6, 1), "encode_us": round(encode * 1e6, 1),
            "deliver_us": round((t1 - t0) * 1e6, 1), "write_us": round((t2 - t1) * 1e6, 1),
            "total_us": round((t2 - start) * 1e6, 1), "cpu_us": round((c2 - c_start) * 1e6, 1)}) + "\n")

    broadcaster.Broadcaster.publish_append = publish_append
    hub.Hub.publish_to = publish_to
    frames.Outgoing.frame = frame


def main(argv: list[str]) -> int:
    out_path, rest = argv[0], argv[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    install(out_path)
    from seed_agents.server.main import main as server_main

    return server_main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
