"""GetRunJournal and SignalRun: what a run recorded, and answering a parked run.

GetRunJournal pages like GetSession (docs/protocol.md, "Pages"): at most `limit` entries (default
and cap 1,000) and MAX_ANSWER_BYTES; when more remain, `nextAfterSeq` is the seq of the last entry
returned. SignalRun needs write access; `delivered: false` is an answer, not an error (the run is
not parked on a wait this signal answers: it ended, timed out, was woken already, or waits for
another signal), so a signal sent twice wakes the run once.
"""
from __future__ import annotations

from seed_agents.protocol.wire.dagcbor import encode

from ..store import journal as journal_q
from .access import READER, WRITER, run_for
from .context import HandlerContext
from .pages import MAX_ANSWER_BYTES

JOURNAL_PAGE = 1_000


async def get_run_journal(ctx: HandlerContext, env, action) -> dict:
    limit = min(action.limit or JOURNAL_PAGE, JOURNAL_PAGE)

    def read(conn):
        run = run_for(conn, env.account_id, action.run_id, READER)
        return run, journal_q.entries(conn, run["id"], action.after_seq, limit + 1)

    run, rows = await ctx.db.aread(read)
    entries: list[dict] = []
    size = 0
    for entry in rows[:limit]:
        size += len(encode(entry["entry"])) + 64
        if entries and size > MAX_ANSWER_BYTES:
            break
        entries.append(entry)
    answer = {"_": "GetRunJournalResponse", "runId": run["id"], "entries": entries}
    if len(entries) < len(rows):
        answer["nextAfterSeq"] = entries[-1]["seq"]
    return answer


async def signal_run(ctx: HandlerContext, env, action) -> dict:
    run = await ctx.db.aread(run_for, env.account_id, action.run_id, WRITER)
    delivered = await ctx.runtime.signal(run["id"], action.signal, action.payload)
    return {"_": "SignalRunResponse", "runId": run["id"], "delivered": delivered}
