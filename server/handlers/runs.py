"""GetRun, ListRuns and CancelRun. Run changes are published on runs/<rootRunId>."""
from __future__ import annotations

from ..store import runs as runs_q
from ..store import visitors as visitors_q
from .access import OWNER, READER, WRITER, agent_access, run_for, session_access
from .context import HandlerContext

DEFAULT_LIMIT = 100
MAX_RUNS_PAGE = 1_000   # server cap on ListRuns.limit: a RunInfo is a few KiB at most (title <= 1000 characters)
MAX_TREE = 10_000  # runs of one tree read at once (CancelRun walks the whole tree)


async def get_run(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        return runs_q.with_child_counts(conn, [run_for(conn, env.account_id, action.run_id, READER)])[0]

    return {"_": "GetRunResponse", "run": await ctx.db.aread(read)}


async def list_runs(ctx: HandlerContext, env, action) -> dict:
    limit = min(action.limit or DEFAULT_LIMIT, MAX_RUNS_PAGE)

    def read(conn):
        if action.selector == "rootRunId":
            run_for(conn, env.account_id, action.target, READER)
            return runs_q.runs_of_tree(conn, action.target, action.status, limit)
        if action.selector == "sessionId":
            session_access(conn, env.account_id, action.target, READER)
            return runs_q.runs_of_session(conn, action.target, action.status, limit)
        role = agent_access(conn, env.account_id, action.target, READER)
        runs = runs_q.runs_of_agent(conn, action.target, action.status, limit)
        if role != OWNER:   # (a visitor's runs are theirs and the owner's alone: public chat)
            runs = [r for r in runs if "sessionId" not in r or visitors_q.visitor_of(conn, r["sessionId"]) is None]
        return runs

    return {"_": "ListRunsResponse",
            "runs": await ctx.db.aread(lambda conn: runs_q.with_child_counts(conn, read(conn)))}


async def cancel_run(ctx: HandlerContext, env, action) -> dict:
    """The run and every non-terminal descendant end 'canceled' in one transaction; the turns
    executing any of them are stopped. `canceled` is False when the run had already ended."""
    now = ctx.now_ms()

    def job(conn):
        run = run_for(conn, env.account_id, action.run_id, WRITER)
        # The run and its subtree; a parent that lives on is answered 'canceled' for it.
        canceled, settled = ctx.runtime.cancel_in(conn, [run], now)
        return run["status"] in runs_q.LIVE, canceled, settled

    was_live, canceled, settled = await ctx.db.write(job)
    ctx.runtime.publish_runs(canceled)
    ctx.runtime.settle(settled)
    ctx.runtime.interrupt_runs(r["id"] for r in canceled)
    return {"_": "CancelRunResponse", "runId": action.run_id, "canceled": was_live and bool(canceled)}
