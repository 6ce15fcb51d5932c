"""`send SESSION TEXT`: send one message and show its run to the end: every assistant message as
it streams, each tool call, child and plan change, and the server's reminders. `--quiet` prints
the final answer alone, `--json` each raw event (one JSON object per line).

Exit status: 0 when the run succeeded; 1 when it failed or was stopped (`[stopped]`, and one
sentence on stderr); 130 on Ctrl-C, which stops the run on the server first."""
from __future__ import annotations

import asyncio
import contextlib

from ..errors import AgentsError
from .common import open_client, say
from .memory import upload_attachment
from .reply import Screen, finish, follow_run, last_seq, send_message, write_out
from .resolve import session_id

STOP_SECONDS = 5.0


def screen_mode(args) -> str:
    return "json" if getattr(args, "json", False) else "quiet" if getattr(args, "quiet", False) else "normal"


async def send(args) -> int:
    screen = Screen(screen_mode(args))
    async with open_client(args) as client:
        session = await session_id(client, args.session)   # a title or id prefix as the full id
        attached = [(await upload_attachment(client, session, path))["id"] for path in args.attach or ()]
        # Subscribe first, from the current end, so nothing of the run can slip past unseen.
        start = await last_seq(client, session)
        async with await client.subscribe(f"sessions/{session}", after_seq=start) as sub:
            sent = await send_message(client, session, args.text, attached)
            try:
                outcome = await follow_run(client, session, sub, sent, screen, after_seq=start)
            except asyncio.CancelledError:   # Ctrl-C: the run is stopped on the server too
                with contextlib.suppress(AgentsError, TimeoutError):
                    await asyncio.wait_for(client.stop_session(session), STOP_SECONDS)
                screen.end_line()
                if screen.mode == "normal":
                    write_out("[stopped]\n")
                raise
    return finish(outcome, screen)


def register(sub, common) -> None:
    p = sub.add_parser("send", parents=[common], help="send a message and show the run to its end",
                       description="Send TEXT to SESSION and show what the agent does until its run "
                                   "ends: every message as it streams, one line per tool call "
                                   "(`· write ~/memory/notes.md → 27 bytes (117 ms)`), children as "
                                   "they start and end, the plan when it changes. Exit status 0 "
                                   "when the run succeeded, 1 when it failed or was stopped, 130 on "
                                   "Ctrl-C (which stops the run).")
    p.add_argument("session", metavar="SESSION", help="the session's id, the start of its id, or its title")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--attach", metavar="FILE", action="append",
                   help="attach a file to the message (repeatable; over 2 MiB it goes in chunks)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--quiet", "-q", action="store_true", help="print only the final answer")
    how.add_argument("--json", action="store_true",
                     help="print the run's raw events, one JSON object per line")
    p.set_defaults(run=send)


__all__ = ["send", "register", "say", "write_out"]
