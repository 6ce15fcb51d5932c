"""Public chat (docs/protocol.md, "Public chat"): SetAgentPublicChat, and the visitor's side of
CreateSession, MessageSession, ListSessions and GetAgent (each of those handlers hands a visitor
over to the function here, so the visitor's rules are read in one place).

A visitor is any signed account with no other role on an agent whose owner opened public chat
(store/roles.VISITOR; a reader of a public agent chats as a visitor too). It makes sessions of
its own (sessions.visitor_id), messages and reads them, and nothing else of the agent. Each
message is admitted under the owner's limits (store/visitors.admit), in the transaction that
queues its run.
"""
from __future__ import annotations

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.wire.errors import ProtocolError

from ..clock import new_id
from ..store import agents as agents_q
from ..store import sessions as sessions_q
from ..store import visitors as visitors_q
from ..store.roles import may_visit
from .access import OWNER, VISITOR, agent_access, agent_role, require, session_role
from .context import HandlerContext
from .idempotency import once

CHAT_CLOSED = "agent {} is not open to visitors"


def visitor_view(agent: dict, sessions: list[dict]) -> dict:
    """What GetAgent answers a visitor: the agent's name, its status, its public chat settings
    (limits and granted tools) and `busy` for the visitor's own sessions; never its prompt, its
    model, its tools, its MCP servers, its identities or its activity."""
    definition = agent.get("definition") or {}
    view = {k: v for k, v in agent.items() if k in ("id", "account", "status", "createdAt", "updatedAt",
                                                       "publicRead", "publicChat")}
    view.update(definition={"name": definition.get("name", ""), "systemPrompt": "", "modelProvider": "",
                            "model": ""},
                stateDir="", accessRole="visitor",
                busy=any(s.get("status") == "streaming" for s in sessions))
    return view


def add_usage(conn, agent: dict, account_id: str, now: int) -> None:
    """GetAgent's `publicChatUsage` while public chat is open: to the owner all visitors' spending
    together, to a reader (who chats as a visitor) its own."""
    if "publicChat" not in agent or agent["accessRole"] not in (OWNER, "reader"):
        return
    used = visitors_q.usage(conn, agent["id"], visitors_q.ALL if agent["accessRole"] == OWNER else account_id, now)
    agent["publicChatUsage"] = {"messages": used.messages, "tokens": used.tokens}


def visitor_agent(conn, account_id: str, agent_id: str, limit: int, now: int) -> tuple[dict, list[dict]]:
    """GetAgent for a visitor: the view above with what it spent of its limits
    (`publicChatUsage`: messages this clock hour, tokens this UTC day), and its own sessions."""
    agent = agents_q.get_agent(conn, agent_id, OWNER)
    sessions, _ = sessions_q.list_sessions(conn, agent["account"], agent_id, limit, None, visitors=account_id)
    view = visitor_view(agent, sessions)
    used = visitors_q.usage(conn, agent_id, account_id, now)
    view["publicChatUsage"] = {"messages": used.messages, "tokens": used.tokens}
    return view, sessions


def may_chat(conn, account_id: str, agent_id: str) -> bool:
    """Whether the account would chat with the agent as a visitor (CreateSession's 403 turns into
    a visitor session then)."""
    return may_visit(agent_role(conn, account_id, agent_id)) and visitors_q.get_config(conn, agent_id) is not None


def open_config(conn, agent_id: str) -> dict:
    config = visitors_q.get_config(conn, agent_id)
    if config is None:
        raise ProtocolError(403, CHAT_CLOSED.format(agent_id))
    return config


async def create_visitor_session(ctx: HandlerContext, env, action) -> dict:
    """CreateSession by a visitor: a session of its own, under the owner's account (the owner's
    data, as a writer's session is), marked with the visitor."""
    now = ctx.now_ms()
    account_id = env.account_id

    def effect(conn):
        role_now = agent_role(conn, account_id, action.agent_id)
        if not may_visit(role_now):
            require(role_now, "writer", "agent", action.agent_id)   # 404 / 403 as before
        open_config(conn, action.agent_id)
        owner = agents_q.agent_account(conn, action.agent_id)
        session_id = new_id()
        sessions_q.create_session(conn, session_id, owner, action.agent_id, action.title, now)
        visitors_q.set_visitor(conn, session_id, account_id)
        return {"_": "CreateSessionResponse", "sessionId": session_id}, [sessions_q.get_session(conn, session_id)]

    def job(conn):
        return once(conn, account_id, "CreateSession", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await ctx.db.write(job)
    for session in created:
        ctx.broadcaster.publish_session(session, created=True)   # (its visitor's and the owner's keys)
        ctx.broadcaster.notify_only(session["account"], "session-created", agent_id=session["agentId"],
                                    session_id=session["id"])
    return response


def own_session(conn, account_id: str, session_id: str, refused: ProtocolError) -> dict:
    """MessageSession's session when the caller may not write to it: the caller's own visitor
    session while public chat is open, else the refusal as it was."""
    if refused.status != 403 or session_role(conn, account_id, session_id)[0] != VISITOR:
        raise refused
    return sessions_q.get_session(conn, session_id)


def admit_visitor_message(conn, session: dict, run_id: str, now: int, config) -> None:  # noqa: ANN001
    """In MessageSession's transaction, for a visitor's session: refused (429) past the owner's
    limits, else the run's tokens are reserved."""
    agent_id = session["agentId"]
    chat = open_config(conn, agent_id)
    max_live = max(1, config.max_runs_in_flight // 4)
    reserved = visitors_q.admit(conn, agent_id, session["visitorId"], chat, now, config.max_run_tokens, max_live)
    if isinstance(reserved, str):
        raise ProtocolError(429, reserved)
    visitors_q.reserve_run(conn, run_id, agent_id, session["visitorId"], reserved, now)


def visitor_sessions(conn, account_id: str, agent_id: str, limit: int, cursor: dict | None):
    """ListSessions {agentId} by a visitor: its own sessions of the agent."""
    owner = agents_q.agent_account(conn, agent_id)
    return sessions_q.list_sessions(conn, owner, agent_id, limit, cursor, visitors=account_id)


async def set_agent_public_chat(ctx: HandlerContext, env, action) -> dict:
    """Owner only. Opening (again) replaces the limits and grants at once. Closing refuses the
    next visitor message at once, stops the visitors' live runs (canceled, their unused tokens
    given back), and ends the visitors' subscriptions of their sessions: a visitor's sessions
    stay the owner's data, seen by the owner alone until chat opens again."""
    agent_id = action.agent_id
    now = ctx.now_ms()
    why = f"agent {agent_id} is no longer open to visitors"
    async with ctx.grants.changing(agent_id):
        def job(conn):
            agent_access(conn, env.account_id, agent_id, OWNER)
            visitors_q.set_config(conn, agent_id, action.settings(), now)
            live = [] if action.public_chat else visitors_q.live_visitor_sessions(conn, agent_id)
            return agents_q.get_agent(conn, agent_id, OWNER), live

        agent, live = await ctx.db.write(job)
        ctx.grants.forget_audience(agent_id)   # (other servers read their guests' access again)
        ctx.grants.refresh(agent_id, ctx.grants.guest_accounts(agent_id), why)
    for session_id in live:
        await ctx.runtime.stop_session(session_id)
    ctx.broadcaster.publish_agent(agent)   # (with its agent-updated notice)
    return {"_": "SetAgentPublicChatResponse", "agent": agent}
