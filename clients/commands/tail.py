"""`tail SESSION`: follow a session live, each durable event once, across server restarts (the
client reconnects and resumes from the last event printed), shown as `history` shows them
(clients/render.py); `--json` prints each event as it came, one JSON object per line."""
from __future__ import annotations

import sys

from ..render import Renderer, json_line
from .common import open_client, say
from .resolve import session_id


async def tail(args) -> int:
    def on_state(state: str, detail: str) -> None:
        say(f"[connection lost: {detail}; reconnecting]" if state == "disconnected" else "[reconnected]")

    async with open_client(args, on_state=on_state) as client:
        session = await session_id(client, args.session)
        sub = await client.subscribe(f"sessions/{session}", after_seq=args.after_seq)
        renderer = Renderer()   # as `history` shows them: tool calls in a line each, the plan, children
        async for item in sub:
            if item.get("_") == "append":
                lines = [json_line(item["event"])] if args.json else renderer.lines(item["event"])
                for line in lines:
                    sys.stdout.write(line + "\n")
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
    p.add_argument("--json", action="store_true", help="print each event as the server sent it, one JSON "
                   "object per line")
    p.set_defaults(run=tail, interrupt_status=0)
