"""`sessions create|list|rename|delete|retry` and `history`."""
from __future__ import annotations

from clients.commands.common import open_client
from clients.render import event_line, session_line

HISTORY_PAGE = 1000


async def create(args) -> int:
    async with open_client(args) as client:
        response = await client.create_session(args.agent_id, title=args.title)
    print(response["sessionId"])
    return 0


async def list_(args) -> int:
    async with open_client(args) as client:
        cursor = None
        while True:
            # the cursor ({updatedBefore, idBefore}) goes back exactly as it came
            response = await client.list_sessions(agent_id=args.agent, cursor=cursor,
                                                  include_children=False if args.top_level else None)
            for session in response.get("sessions", []):
                print(session_line(session))
            cursor = response.get("nextCursor")
            if not cursor:
                return 0


async def rename(args) -> int:
    async with open_client(args) as client:
        response = await client.update_session(args.session, title=args.title)
    print(session_line(response["session"]))
    return 0


async def delete(args) -> int:
    async with open_client(args) as client:
        await client.delete_session(args.session)
    print(f"deleted session {args.session}")
    return 0


async def retry(args) -> int:
    async with open_client(args) as client:
        response = await client.retry_session(args.session)
    print(response["runId"])
    return 0


async def history(args) -> int:
    async with open_client(args) as client:
        after = args.after_seq
        while True:
            response = await client.get_session(args.session, after_seq=after, limit=HISTORY_PAGE)
            for event in response.get("events", []):
                print(event_line(event))
            if "nextAfterSeq" not in response:
                return 0
            after = response["nextAfterSeq"]


def register(sub, common) -> None:
    sessions = sub.add_parser("sessions", help="create and list sessions",
                              description="Create and list the sessions of your agents.")
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="{create,list,rename,delete,retry}",
                                   required=True)
    p = ssub.add_parser("create", parents=[common], help="create a session and print its id",
                        description="Create a session with an agent and print its id.")
    p.add_argument("agent_id", metavar="AGENT_ID")
    p.add_argument("--title", default=None)
    p.set_defaults(run=create)
    p = ssub.add_parser("list", parents=[common], help="list sessions",
                        description="List your sessions (all pages).")
    p.add_argument("--agent", default=None, metavar="ID", help="only the sessions of this agent")
    p.add_argument("--top-level", action="store_true", help="leave out child sessions")
    p.set_defaults(run=list_)
    p = ssub.add_parser("rename", parents=[common], help="set a session's title",
                        description="Set a session's title (no automatic title replaces it).")
    p.add_argument("session", metavar="SESSION")
    p.add_argument("title", metavar="TITLE")
    p.set_defaults(run=rename)
    p = ssub.add_parser("delete", parents=[common], help="delete a session and its events",
                        description="Delete a session and its events (its runs keep their history).")
    p.add_argument("session", metavar="SESSION")
    p.set_defaults(run=delete)
    p = ssub.add_parser("retry", parents=[common], help="re-run a failed turn, print the run id",
                        description="Re-run a session whose latest turn failed, without a new message.")
    p.add_argument("session", metavar="SESSION")
    p.set_defaults(run=retry)
    p = sub.add_parser("history", parents=[common], help="print a session's durable events",
                       description="Print a session's durable events, one line each "
                                   "(`#12 user: hello`).")
    p.add_argument("session", metavar="SESSION")
    p.add_argument("--after-seq", type=int, default=0, metavar="N", help="only events after seq N")
    p.set_defaults(run=history)
