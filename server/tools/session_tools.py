"""The session's own state and the account's other conversations: the `plan` and `status`
verbs, and the `thread:` / `run:` addresses of `read`.

What `thread:` and `run:` reach depends on who asks (server/tools/authority.py): a person sees
what GetSession and GetRun would show them; the agent itself sees its owner's conversations while
nobody else can drive it, and only its own once it is shared. Anything else is "not there", in
the words a missing id gets."""
from __future__ import annotations

import json

from seed_agents.protocol.agent import plans

from ..store import events as events_q
from ..store import roles as roles_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from ..store import visitors as visitors_q
from .context import ToolContext, ToolFailure, ToolResult

THREAD_LIST_DEFAULT = 20
THREAD_LIST_MAX = 100
THREAD_EVENTS = 200          # a transcript read shows at most its latest events ...
THREAD_CHARS = 2000          # ... each cut to this many characters


async def plan(ctx: ToolContext, params: dict) -> ToolResult:
    written = plans.normalize_plan(params)
    now = ctx.now_ms()

    def job(conn):
        previous = sessions_q.get_plan(conn, ctx.session_id)
        stored = plans.next_plan(previous, written, ctx.run_id, now)
        session = sessions_q.set_plan(conn, ctx.session_id, stored, now)
        # A finished checklist is history: frozen on the run that made it, so a later turn's new
        # plan replaces the session's live one and never this copy.
        owner = runs_q.get_run(conn, stored["ownerRunId"]) if plans.is_settled(stored) else None
        if owner is not None and owner.get("sessionId") == ctx.session_id and owner.get("plan") != stored:
            owner = runs_q.set_plan(conn, owner["id"], stored)
        else:
            owner = None
        return session, owner

    session, owner = await ctx.db.write(job)
    ctx.publisher.publish_session(session)   # (announced to the account as session-updated)
    if owner is not None:
        ctx.publisher.publish_run(runs_q.public(owner))
    return ToolResult({"ok": True, "steps": len(session["plan"]["steps"])})


async def status(ctx: ToolContext, params: dict) -> ToolResult:
    title = params.get("title")
    title = " ".join(title.split())[:sessions_q.TITLE_CHARS] if isinstance(title, str) and title.strip() else None
    description = params.get("description")
    description = description.strip()[:1000] if isinstance(description, str) else None
    now = ctx.now_ms()
    session = await ctx.db.write(lambda conn: sessions_q.set_agent_status(
        conn, ctx.session_id, now, title=title, description=description))
    ctx.publisher.publish_session(session)
    out = {"ok": True}
    for key in ("title", "description"):
        if key in session:
            out[key] = session[key]
    return ToolResult(out)


def read_thread(ctx: ToolContext, thread_id: str, options: dict) -> ToolResult:
    if not thread_id:
        return ToolResult(_thread_list(ctx, options))
    session = ctx.db.read(sessions_q.get_session, thread_id)
    if session is None or not ctx.db.read(visible, ctx, session["account"], session["agentId"],
                                          session.get("visitorId")):
        # Another account's conversation is not there, as far as this agent can tell.
        raise ToolFailure(f"no thread {thread_id!r} among your conversations (read thread: to list them)")
    last = ctx.db.read(events_q.last_seq, thread_id)
    events = ctx.db.read(events_q.events_after, thread_id, max(0, last - THREAD_EVENTS), THREAD_EVENTS)
    lines = [f"# {session.get('title') or 'Untitled conversation'}", ""]
    for event in events:
        lines.append(_event_line(event["event"]))
    return ToolResult({"summary": f"Thread {thread_id}: {len(events)} events.", "session": session,
                       "markdown": "\n".join(lines)})


def visible(conn, ctx: ToolContext, account: str, agent_id: str, visitor: str | None = None) -> bool:  # noqa: ANN001
    """May the call's authority read a session or run of `agent_id` held by `account`? A visitor's
    session (public chat: `visitor`) only the owner in person, or the agent nobody else drives."""
    authority = ctx.authority
    if visitor is not None and not (authority.sees_account and account == authority.owner):
        return False
    if authority.in_person:   # what GetSession / GetRun would answer this person
        return roles_q.agent_role(conn, authority.account, agent_id) is not None
    if authority.sees_account:
        return account == authority.owner
    return agent_id == authority.agent_id


def _thread_list(ctx: ToolContext, options: dict) -> dict:
    limit = options.get("limit")
    limit = min(THREAD_LIST_MAX, limit) if isinstance(limit, int) and limit > 0 else THREAD_LIST_DEFAULT
    agent_id = options.get("agentId") if isinstance(options.get("agentId"), str) else None
    if not ctx.authority.sees_account:
        # A collaborator, or the agent of a shared agent: this agent's conversations only.
        agent_id = ctx.authority.agent_id
    query = options.get("query").lower() if isinstance(options.get("query"), str) else None
    visitors = "all" if ctx.authority.sees_account else None   # (a visitor's session: the owner's eyes only)
    sessions, _ = ctx.db.read(lambda conn: sessions_q.list_sessions(conn, ctx.account, agent_id,
                                                                    THREAD_LIST_MAX if query else limit, None,
                                                                    visitors=visitors))
    if query:
        sessions = [s for s in sessions if query in (s.get("title") or "").lower()
                    or query in (s.get("description") or "").lower()][:limit]
    entries = [{"id": s["id"], "title": s.get("title") or "", "agentId": s["agentId"],
                "updatedAt": s["updatedAt"], **({"description": s["description"]} if "description" in s else {})}
               for s in sessions]
    markdown = "\n".join(f"- thread:{e['id']} — {e['title'] or 'Untitled'}" for e in entries)
    return {"summary": f"{len(entries)} conversations.", "threads": entries, "markdown": markdown}


def _event_line(payload: dict) -> str:
    kind = payload.get("type")
    if kind == "message":
        text = str(payload.get("content", ""))
        # A turn the server injected (a plan reminder) is the server's, not the user's.
        who = "server" if payload.get("actor") == "system" else payload.get("role", "?")
        return f"**{who}**: {_cut(text)}"
    if kind == "tool_call":
        return f"→ {payload.get('name', '?')} {_cut(json.dumps(payload.get('input'), ensure_ascii=False))}"
    if kind == "tool_result":
        body = payload.get("error") if "error" in payload else payload.get("output")
        return f"← {payload.get('name', '?')} {_cut(json.dumps(body, ensure_ascii=False))}"
    return f"[{kind}] {_cut(str(payload.get('message', '')))}"


def _cut(text: str) -> str:
    return text if len(text) <= THREAD_CHARS else text[:THREAD_CHARS] + f"… ({len(text) - THREAD_CHARS} more characters)"


def read_run(ctx: ToolContext, run_id: str) -> ToolResult:
    run = ctx.db.read(runs_q.get_run, run_id) if run_id else None
    visitor = ctx.db.read(visitors_q.visitor_of, run["sessionId"]) if run is not None and run.get("sessionId") else None
    if run is None or not ctx.db.read(visible, ctx, run["account"], run["agentId"], visitor):
        raise ToolFailure(f"no run {run_id!r} among your runs")
    run = runs_q.public(run)
    return ToolResult({"summary": f"Run {run_id}: {run['status']}.", "run": run})
