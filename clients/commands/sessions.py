"""`sessions create|list|rename|delete|retry|stop` and `history`."""
from __future__ import annotations

from ..actions import CLEAR
from ..render import Renderer, as_json, continuation_lines, session_line, when
from . import verify
from .common import open_client, print_listing
from .resolve import agent_id, agent_name, all_sessions, session_id

HISTORY_PAGE = 1000


async def create(args) -> int:
    async with open_client(args) as client:
        response = await client.create_session(await agent_id(client, args.agent_id), title=args.title)
    print(response["sessionId"])
    return 0


async def list_(args) -> int:
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent) if args.agent else None
        sessions, agents = await all_sessions(client, agent, args.top_level)
    return print_listing(
        sessions, args.json, ["ID", "AGENT", "STATUS", "UPDATED", "TITLE"],
        lambda s: [str(s.get("id", "")), agent_name(agents.get(s.get("agentId"))) or str(s.get("agentId", "")),
                   str(s.get("status", "")), when(s.get("updatedAt")), str(s.get("title", ""))],
        "no sessions yet: `seed-agents chat` or `seed-agents sessions create AGENT` starts one")


async def rename(args) -> int:
    async with open_client(args) as client:
        response = await client.update_session(await session_id(client, args.session), title=args.title)
    print(session_line(response["session"]))
    return 0


async def thoroughness(args) -> int:
    level = CLEAR if args.level == "default" else args.level
    async with open_client(args) as client:
        response = await client.update_session(await session_id(client, args.session), thoroughness=level)
    session = response["session"]
    print(f"{session['id']}  thoroughness {session.get('thoroughness', 'normal (the default)')}")
    return 0


async def delete(args) -> int:
    async with open_client(args) as client:
        session = await session_id(client, args.session)
        await client.delete_session(session)
    print(f"deleted session {session}")
    return 0


async def retry(args) -> int:
    async with open_client(args) as client:
        response = await client.retry_session(await session_id(client, args.session))
    print(response["runId"])
    return 0


async def stop(args) -> int:
    async with open_client(args) as client:
        session = await session_id(client, args.session)
        response = await client.stop_session(session)
    print(f"stopped session {session}" if response.get("stopped")
          else f"session {session} had nothing running")
    return 0


async def history(args) -> int:
    async with open_client(args) as client:
        session = await session_id(client, args.session)
        after = args.after_seq
        renderer = Renderer()
        everything: list[dict] = []
        links: tuple[list[str], list[str]] | None = None
        while True:
            response = await client.get_session(session, after_seq=after, limit=HISTORY_PAGE)
            if links is None:   # continue_session's links: where it came from, where it goes on
                links = continuation_lines(response.get("session") or {})
                if not args.json and not args.after_seq:
                    for line in links[0]:
                        print(line)
            for event in response.get("events", []):
                if args.json:
                    everything.append(event)
                else:
                    for line in renderer.lines(event):
                        print(line)
            if "nextAfterSeq" not in response or not response.get("events"):
                break
            after = response["nextAfterSeq"]
    if args.json:
        print(as_json(everything))
    else:
        for line in renderer.open_calls():
            print(line)
        for line in (links or ([], []))[1]:
            print(line)
    return 0


SESSION_HELP = "the session's id, the start of its id, or its title"


def register(sub, common) -> None:
    sessions = sub.add_parser("sessions", help="create and list sessions",
                              description="Create and list the sessions of your agents.")
    ssub = sessions.add_subparsers(dest="sessions_command",
                                   metavar="{create,list,rename,thoroughness,delete,retry,stop,export}", required=True)
    p = ssub.add_parser("create", parents=[common], help="create a session and print its id",
                        description="Create a session with an agent and print its id.")
    p.add_argument("agent_id", metavar="AGENT", help="the agent's name, id, or the start of its id")
    p.add_argument("--title", default=None)
    p.set_defaults(run=create)
    p = ssub.add_parser("list", parents=[common], help="list sessions",
                        description="List your sessions (all pages): id, agent, status, last update, title.")
    p.add_argument("--agent", default=None, metavar="AGENT", help="only the sessions of this agent")
    p.add_argument("--top-level", action="store_true", help="leave out child sessions")
    p.add_argument("--json", action="store_true", help="print the sessions as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = ssub.add_parser("rename", parents=[common], help="set a session's title",
                        description="Set a session's title (no automatic title replaces it).")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("title", metavar="TITLE")
    p.set_defaults(run=rename)
    p = ssub.add_parser("thoroughness", parents=[common], help="set how thoroughly a session's turns delegate",
                        description="Set a session's thoroughness, the delegation preset of its turns: quick "
                                    "(answer directly; children one level down, at most 3), normal (the server's "
                                    "limits), deep (split and check); default clears it (normal).")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("level", metavar="LEVEL", choices=("quick", "normal", "deep", "default"))
    p.set_defaults(run=thoroughness)
    p = ssub.add_parser("delete", parents=[common], help="delete a session and its events",
                        description="Delete a session and its events (its runs keep their history).")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.set_defaults(run=delete)
    p = ssub.add_parser("retry", parents=[common], help="re-run a failed turn, print the run id",
                        description="Re-run a session whose latest turn failed, without a new message.")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.set_defaults(run=retry)
    p = ssub.add_parser("stop", parents=[common], help="stop the reply being written",
                        description="Stop a session's running turn and its queued ones: the session "
                                    "shows `stopped` at once.")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.set_defaults(run=stop)
    p = ssub.add_parser("export", parents=[common], help="write a session's verifiable history to a file",
                        description="Write the session as a CAR file: every event's block, the user "
                                    "messages' signed envelopes and the server's signed head, for "
                                    "`seed-agents verify` to check offline.")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("--car", required=True, metavar="FILE", help="where to write it")
    p.set_defaults(run=verify.export)
    p = sub.add_parser("history", parents=[common], help="print a session's durable events",
                       description="Print a session's durable events (`#12 user: hello`): messages "
                                   "by who wrote them (`server:` for the turns the server adds), one "
                                   "line per tool call with its result and duration, children as they "
                                   "start and end, the plan as a checklist when it changes.")
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("--after-seq", type=int, default=0, metavar="N", help="only events after seq N")
    p.add_argument("--json", action="store_true", help="print the events as JSON, as the server gave them")
    p.set_defaults(run=history)
