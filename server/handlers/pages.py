"""Bounds on the size of an answer (docs/protocol.md, "Pages"): a list answer ends at a count or
once its bytes pass MAX_ANSWER_BYTES, whichever comes first, and says where to go on (its
`nextCursor` or `nextAfterSeq`). So no single answer makes the server build, hold or send more
than a few MiB, whatever the account stored."""
from __future__ import annotations

from seed_agents.protocol.api.actions import MAX_AGENTS_PAGE
from seed_agents.protocol.wire.dagcbor import encode

from ..store import agents as agents_q

MAX_ANSWER_BYTES = 4 << 20
AGENTS_PAGE = MAX_AGENTS_PAGE   # ListAgents' default and cap (ListAgents.limit)
AGENT_SESSIONS = 1_000          # GetAgent: the agent's latest sessions (each a small SessionInfo)


def sessions_with_agents(conn, sessions: list[dict], role_of=lambda agent_id: "owner",
                         max_bytes: int = MAX_ANSWER_BYTES) -> tuple[list[dict], list[dict]]:
    """ListSessions' (sessions, agents): the sessions in order, each with its agent's AgentInfo
    once (with the caller's `role_of(agent_id)` as accessRole; None leaves it out), cut before
    the bytes pass `max_bytes` (one session at least). The caller's cursor is the last session
    kept when the list was cut. Runs on a reader thread (`db.aread(..., large=True)`): database reads
    only, no app state."""
    kept: list[dict] = []
    agents: dict[str, dict] = {}
    size = 0
    for session in sessions:
        cost = len(encode(session))
        agent_id = session["agentId"]
        new_agent = agent_id not in agents
        if new_agent:
            cost += agents_q.definition_size(conn, agent_id) + agents_q.AGENT_INFO_OVERHEAD
        if kept and size + cost > max_bytes:
            break
        kept.append(session)
        size += cost
        if new_agent:
            role = role_of(agent_id)
            agents[agent_id] = agents_q.get_agent(conn, agent_id, role) if role is not None else None
    return kept, [agents[i] for i in sorted(agents) if agents[i] is not None]
