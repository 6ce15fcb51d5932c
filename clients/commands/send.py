"""`send SESSION TEXT`: send one message and print the reply as it streams."""
from __future__ import annotations

import sys

from .common import open_client, say
from .memory import upload_attachment
from .reply import last_seq, send_message, stream_reply
from .resolve import session_arg


def write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def send(args) -> int:
    args.session = await session_arg(args)   # a title or id prefix as the full id
    async with open_client(args) as client:
        session = args.session
        attached = [(await upload_attachment(client, session, path))["id"] for path in args.attach or ()]
        # Subscribe first, from the current end, so the reply cannot slip past unseen.
        start = await last_seq(client, session)
        async with await client.subscribe(f"sessions/{session}", after_seq=start) as sub:
            sent = await send_message(client, session, args.text, attached)
            streamed: list[str] = []

            def write(text: str) -> None:
                streamed.append(text)
                write_out(text)

            reply = await stream_reply(sub, sent, write)
    return finish_reply(reply, streamed)


def finish_reply(reply: dict | None, streamed: list[str]) -> int:
    """End the streamed line; show what only the durable event says (no partials, an error)."""
    payload = (reply or {}).get("event") or {}
    if payload.get("type") == "error":
        if streamed:
            write_out("\n")
        say(f"the agent failed: {payload.get('message', '')}")
        return 1
    if reply is None:
        write_out("\n" if streamed else "")
        say("the run ended without a reply (stopped)")
        return 1
    if not streamed:  # partials are live-only: a reconnect mid-turn can miss them
        write_out(str(payload.get("content", "")))
    write_out("\n")
    return 0


def register(sub, common) -> None:
    p = sub.add_parser("send", parents=[common], help="send a message and print the reply",
                       description="Send TEXT to SESSION and print the reply as it streams.")
    p.add_argument("session", metavar="SESSION")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--attach", metavar="FILE", action="append",
                   help="attach a file to the message (repeatable; over 2 MiB it goes in chunks)")
    p.set_defaults(run=send)
