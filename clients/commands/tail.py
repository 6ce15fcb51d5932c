"""`tail SESSION`: follow a session live, one line per durable event, exactly once, across
server restarts (the client reconnects and resumes from the last event printed)."""
from __future__ import annotations

import sys

from ..render import event_line
from .common import open_client, say
from .resolve import session_id


async def tail(args) -> int:
    def on_state(state: str, detail: str) -> None:
        say(f"[connection lost: {detail}; reconnecting]" if state == "disconnected" else "[reconnected]")

    async with open_client(args, on_state=on_state) as client:
        session = await session_id(client, args.session)
        sub = await client.subscribe(f"sessions/{session}", after_seq=args.after_seq)
        async for item in sub:
            if item.get("_") == "append":
                sys.stdout.write(event_line(item["event"]) + "\n")
                sys.stdout.flush()
    return 0


def register(sub, common) -> None:
    p = sub.add_parser("tail", parents=[common], help="follow a session live",
                       description="Print every durable event of SESSION once (`#12 user: hello`), "
                                   "then follow it live, reconnecting across server restarts. "
                                   "Ctrl-C exits.")
    p.add_argument("session", metavar="SESSION", help="the session's id, the start of its id, or its title")
    p.add_argument("--after-seq", type=int, default=0, metavar="N",
                   help="start after seq N (default 0: the whole history)")
    p.set_defaults(run=tail, interrupt_status=0)
