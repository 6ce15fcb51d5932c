"""3. Fan-out: 200 and 1,000 sockets subscribed to one session; one MessageSession turn with the
echo provider: time from sending the MessageSession until each socket has the durable
assistant append (p50, p99 and max across the sockets). "Has" is the kernel's receive stamp of
the frame on that socket (SO_TIMESTAMPNS; on loopback that is when the server's write landed),
so a busy load process cannot inflate it; `read_*` are the times the load process read them.

Every subscriber is its own v2 socket on a minimal client (bench.litesocket.LiteSocket: frames
parsed in the protocol callback, the arrival of the assistant append stamped, nothing decoded),
so that one load process keeps up with 1,000 sockets; the MessageSession goes out on one more
(ordinary) socket. CPU use
during the turn is recorded too (bench.meters.CpuMeter): `load_busy` close to 1.0 would mean
the load side, not the server, set the pace.
"""
from __future__ import annotations

import asyncio
import time

from seed_agents.clients.raw import signed_request_frame, unique_ts

from bench.litesocket import LiteSocket
from bench.load import Rpc, is_assistant_append, is_error_response, is_replayed, keypair
from bench.meters import CpuMeter, cpu_summary
from bench.processes import Server, profile_window, run_load
from bench.stats import percentile, summary

FANOUT_SIZES = (200, 1000)


def sizes(quick: bool) -> tuple[int, tuple[int, ...]]:
    return (3 if quick else 5), FANOUT_SIZES


class Subscriber:
    """One subscribed socket (a LiteSocket: the load process must keep up with 1,000 of them)."""

    waiting = 0                       # armed subscribers still without the reply
    all_arrived: asyncio.Event | None = None

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.arrived: float | None = None         # perf_counter when this process read it
        self.delivered: float | None = None       # kernel receive stamp (time.time clock)
        self.armed = False
        self.sock: LiteSocket | None = None

    def on_frame(self, frame: bytes, t: float, t_kernel: float | None) -> None:
        if self.armed and self.arrived is None and is_assistant_append(frame):
            self.arrived, self.delivered = t, t_kernel
            Subscriber.waiting -= 1
            if Subscriber.waiting == 0:
                Subscriber.all_arrived.set()
        elif not self.ready.is_set() and is_replayed(frame):
            self.ready.set()


async def _subscribe_many(url: str, kp, session_id: str, n: int, batch: int = 100) -> list[Subscriber]:
    from seed_agents.protocol.wire.envelope import sign_envelope

    subs: list[Subscriber] = []

    async def one() -> Subscriber:
        sub = Subscriber()
        sub.sock = await LiteSocket.connect(url, sub.on_frame)
        env = sign_envelope(kp, {"_": "Subscribe", "key": f"sessions/{session_id}"}, ts=unique_ts())
        sub.sock.send(signed_request_frame(1, env))
        await asyncio.wait_for(sub.ready.wait(), 60)
        return sub

    for i in range(0, n, batch):
        subs += await asyncio.gather(*(one() for _ in range(min(batch, n - i))))
    return subs


async def load(url: str, label: str, runs: int, fanouts: list[int], pid: int | None = None) -> dict:
    from seed_agents.protocol.wire.envelope import sign_envelope

    kp = keypair(label)
    sender = await Rpc.open(url)
    agent = await sender.call(kp, {"_": "CreateAgent", "definition": {
        "name": "fanout", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})
    session = await sender.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]})
    session_id = session["sessionId"]
    subs: list[Subscriber] = []
    out: dict = {}
    turn = 0
    for n in sorted(fanouts):
        t = time.perf_counter()
        subs += await _subscribe_many(url, kp, session_id, n - len(subs))
        connect_s = time.perf_counter() - t
        rows = []
        for r in range(runs + 1):   # run 0 is the warm-up
            turn += 1
            env = sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                     "content": [{"type": "text", "text": f"fan out turn {turn}"}],
                                     "clientMessageId": f"fanout-{turn}"}, ts=unique_ts())
            for s in subs:
                s.arrived, s.delivered, s.armed = None, None, True
            Subscriber.waiting = len(subs)
            Subscriber.all_arrived = asyncio.Event()
            with profile_window(f"fanout_{n}" if r else "warm-up"), CpuMeter(pid) as meter:
                t0_wall = time.time()
                t0 = time.perf_counter()
                response = await sender.request(env)
                t_resp = time.perf_counter() - t0
                try:
                    await asyncio.wait_for(Subscriber.all_arrived.wait(), 30)
                except asyncio.TimeoutError:
                    pass
            for s in subs:
                s.armed = False
            read = [(s.arrived - t0) * 1000 for s in subs if s.arrived is not None]
            missing = len(subs) - len(read)
            # Delivery (kernel stamp) when every socket has one, else the read time.
            stamped = [(s.delivered - t0_wall) * 1000 for s in subs if s.delivered is not None]
            lat = stamped if len(stamped) == len(read) else read
            await asyncio.sleep(0.3)  # let the turn's trailing change events drain
            if r == 0:
                continue
            rows.append({"p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
                         "max_ms": max(lat) if lat else float("nan"), "missing": missing,
                         "kernel_stamped": lat is stamped,
                         "read_p50_ms": percentile(read, 50), "read_p99_ms": percentile(read, 99),
                         "response_ms": t_resp * 1000,
                         "response_error": is_error_response(response),
                         "cpu": meter.result})
        out[str(n)] = {
            "sockets": n, "subscribe_seconds": round(connect_s, 2),
            "p50_ms": summary([x["p50_ms"] for x in rows]),
            "p99_ms": summary([x["p99_ms"] for x in rows]),
            "max_ms": summary([x["max_ms"] for x in rows]),
            "kernel_stamped": all(x["kernel_stamped"] for x in rows),
            "read_p50_ms": summary([x["read_p50_ms"] for x in rows]),
            "read_p99_ms": summary([x["read_p99_ms"] for x in rows]),
            "response_ms": summary([x["response_ms"] for x in rows]),
            "cpu": cpu_summary([x["cpu"] for x in rows]),
            "missing": sum(x["missing"] for x in rows),
            "errors": sum(1 for x in rows if x["response_error"]),
        }
    for s in subs:
        s.sock.close()
    await sender.close()
    return out


def run(quick: bool = False) -> dict:
    runs, fanouts = sizes(quick)
    with Server("fanout") as srv:
        out = run_load("bench.fanout:load", {"url": srv.url, "pid": srv.pid, "label": "fanout", "runs": runs,
                                             "fanouts": list(fanouts)}, timeout=600)
        out["server_rss_mb_end"] = round(srv.rss_kb() / 1024, 1)
    return out
