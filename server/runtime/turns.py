"""Publishing what a use case wrote, the one place it is done, after the commit: a started turn
(seed_agents.server.store.turns.start_turn: MessageSession, RetrySession, a trigger's newThread
firing, a turn that parks on its delegated children) and a recorded tool call or result
(seed_agents.server.store.tool_events.record: the tool loop, InvokeSessionTool, a trigger's tool
continuation) alike."""
from __future__ import annotations

from collections.abc import Callable

from ..publisher import Publisher
from ..store import runs as runs_q
from ..store.turns import (AGENT, SYSTEM, USER, Effects, NewSession, Started, TurnLimits, in_flight_refusal,
                           start_turn)

__all__ = ["AGENT", "SYSTEM", "USER", "Effects", "NewSession", "Started", "TurnLimits", "in_flight_refusal",
           "publish", "start_turn"]


def publish(publisher: Publisher, kick: Callable[[str], None] | None, effects: Effects) -> None:
    """After the commit, the one place a started turn is told: new sessions (and their notice),
    the appended events, the run, session and agent changes, the account notices, then the
    sessions' workers are kicked (`kick` None: the use case queues no run)."""
    notices = list(effects.notices)
    for session in effects.created:
        publisher.publish_session(session, created=True)
        for n in [n for n in notices if n[1] == "session-created" and n[3] == session["id"]]:
            notices.remove(n)
            publisher.notify_account(n[0], n[1], agent_id=n[2], session_id=n[3])
    for session_id, event, body in effects.appended:
        publisher.publish_append(session_id, event, body)
    for run, entry in effects.journal:
        publisher.publish_journal(run, entry)
    for run in effects.runs:
        publisher.publish_run(runs_q.public(run))
    for session in effects.sessions:
        publisher.publish_session(session)
    for agent in effects.agents:
        publisher.publish_agent(agent)
    for account, reason, agent_id, session_id in notices:
        publisher.notify_account(account, reason, agent_id=agent_id, session_id=session_id)
    for session_id in effects.kick:
        kick(session_id)   # (a use case that queues a run is published with its kick)
