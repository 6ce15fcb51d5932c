"""`runs list`, `runs show` and `runs cancel`: the turns the server ran or is running.

A run is one turn of an agent in a session (queued, running, then succeeded, failed or
canceled). `runs list` shows those of one agent or session, or of every agent you have; runs
are named by id or by the start of their id, as `runs list` shows them.
"""
from __future__ import annotations

from ..render import as_json, when
from .common import open_client, print_listing
from .resolve import agent_id, agent_name, all_agents, run_id, session_id, short

STATUSES = ("queued", "claimed", "running", "waiting", "succeeded", "failed", "canceled")
LIMIT = 1000   # the server's cap per agent or session


async def _runs(client, args) -> tuple[list[dict], dict]:
    """The runs asked for, newest first, and the agents by id (for their names)."""
    status = getattr(args, "status", None)
    if getattr(args, "session", None):
        found = (await client.list_runs(session_id=await session_id(client, args.session), status=status,
                                        limit=LIMIT)).get("runs", [])
        return found, {a["id"]: a for a in await all_agents(client)}
    agents = await all_agents(client)
    if getattr(args, "agent", None):
        wanted = await agent_id(client, args.agent)
        agents_asked = [a for a in agents if a["id"] == wanted] or [{"id": wanted}]
    else:
        agents_asked = agents
    runs: list[dict] = []
    for agent in agents_asked:
        runs += (await client.list_runs(agent_id=agent["id"], status=status, limit=LIMIT)).get("runs", [])
    runs.sort(key=lambda r: (r.get("createdAt", 0), r.get("id", "")), reverse=True)
    return runs, {a["id"]: a for a in agents}


async def list_(args) -> int:
    async with open_client(args) as client:
        runs, agents = await _runs(client, args)
    return print_listing(
        runs, args.json, ["ID", "STATUS", "AGENT", "SESSION", "CREATED", "ERROR"],
        lambda r: [str(r.get("id", "")), str(r.get("status", "")),
                   agent_name(agents.get(r.get("agentId"))) or str(r.get("agentId", "")),
                   short(str(r.get("sessionId", ""))), when(r.get("createdAt")),
                   str((r.get("error") or {}).get("message", ""))[:60]],
        "no runs: each message to an agent is one (`seed-agents send`, `seed-agents chat`)")


async def _run_id(client, wanted: str) -> str:
    async def every_run() -> list[dict]:
        return (await _runs(client, _NoFilter()))[0]

    return await run_id(client, wanted, every_run)


class _NoFilter:
    session = agent = status = None


async def show(args) -> int:
    async with open_client(args) as client:
        run = (await client.get_run(await _run_id(client, args.run_ref)))["run"]
    if args.json:
        print(as_json(run))
        return 0
    fields = [("id", run.get("id")), ("status", run.get("status")), ("agent", run.get("agentId")),
              ("session", run.get("sessionId")), ("origin", run.get("origin")),
              ("attempt", run.get("attempt")), ("created", when(run.get("createdAt"))),
              ("started", when(run.get("startedAt"))), ("finished", when(run.get("finishedAt")))]
    usage = run.get("usage") or {}
    if usage:
        fields.append(("tokens", f"{usage.get('input', 0)} in, {usage.get('output', 0)} out"))
    error = run.get("error") or {}
    if error:
        fields.append(("error", f"{error.get('code', '')}: {error.get('message', '')}"))
    for name, value in fields:
        if value not in (None, ""):
            print(f"{name + ':':<10}{value}")
    return 0


async def cancel(args) -> int:
    async with open_client(args) as client:
        run = await _run_id(client, args.run_ref)
        response = await client.cancel_run(run)
        if response.get("canceled"):
            print(f"canceled run {run}")
        else:
            status = (await client.get_run(run))["run"].get("status", "ended")
            print(f"run {run} had already ended ({status})")
    return 0


RUN_HELP = "the run's id or the start of it (`seed-agents runs list` shows them)"


def register(sub, common) -> None:
    runs = sub.add_parser("runs", help="list, show and cancel runs (agent turns)",
                          description="The runs of your agents: one per turn (queued, running, "
                                      "succeeded, failed or canceled).")
    rsub = runs.add_subparsers(dest="runs_command", metavar="{list,show,cancel}", required=True)
    p = rsub.add_parser("list", parents=[common], help="list runs, newest first",
                        description="List the runs of one agent or session, or of all your agents.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--agent", default=None, metavar="AGENT", help="only this agent's runs (name or id)")
    which.add_argument("--session", default=None, metavar="SESSION", help="only this session's runs (id or title)")
    p.add_argument("--status", default=None, choices=STATUSES, metavar="STATUS",
                   help=f"only runs in this status: {', '.join(STATUSES)}")
    p.add_argument("--json", action="store_true", help="print the runs as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = rsub.add_parser("show", parents=[common], help="show one run",
                        description="Show a run: status, agent, session, times, tokens, error.")
    p.add_argument("run_ref", metavar="RUN", help=RUN_HELP)
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    p.set_defaults(run=show)
    p = rsub.add_parser("cancel", parents=[common], help="cancel a run (and the runs it started)",
                        description="Cancel a queued or running run and its sub-runs; a run that "
                                    "already ended is left as it is.")
    p.add_argument("run_ref", metavar="RUN", help=RUN_HELP)
    p.set_defaults(run=cancel)
