"""Starting a turn in a session, written once: a person's MessageSession and RetrySession, a
trigger's `newThread` firing and a delegated child all queue their run here.

`start_turn` is a plain function over the writer's connection (called inside the caller's write
job): it checks the account's limits before writing anything (so a refusal leaves no half-made
session), then writes the session when it is new, the turn's user message unless it answers an
earlier one, the queued run, the session's status and the agent's activity. It returns a
`Started` whose `effects` say what to publish; `server/runtime/turns.publish` is the one place
that publishes them, after the commit.

Limits (server/config.py, docs/operations.md "Fair sharing"): runs in flight per account
(queued, claimed or running, across all its agents; a parked run holds no worker and is not
counted) and runs per delegation tree. A refusal is `errors.Refused` (429 for runs in flight),
which a handler answers, a trigger records on its firing, and delegation gives the model as
the delegate call's error.
"""
from __future__ import annotations

from dataclasses import dataclass, field


from . import accounts as accounts_q
from . import agents as agents_q
from . import events as events_q
from . import runs as runs_q
from . import sessions as sessions_q
from .errors import Refused

# What a run's turn is started by (RunInfo.origin).
USER, SYSTEM, AGENT = "user", "system", "agent"


@dataclass(frozen=True, slots=True)
class TurnLimits:
    runs_in_flight: int = 100     # per account: queued, claimed or running runs, all its agents
    tree_runs: int = 200          # runs in one delegation tree, the root included

    @classmethod
    def from_config(cls, config) -> "TurnLimits":  # noqa: ANN001
        return cls(config.max_runs_in_flight, config.max_tree_runs)


UNLIMITED = TurnLimits(1 << 62, 1 << 62)   # (store tests that start a turn outside the server)


@dataclass(slots=True)
class Effects:
    """What a use case wrote, to publish once after its commit (`publish`)."""

    created: list[dict] = field(default_factory=list)                       # new SessionInfos
    appended: list[tuple[str, dict, bytes]] = field(default_factory=list)   # (session, event, body)
    runs: list[dict] = field(default_factory=list)                          # RunInfo changes
    sessions: list[dict] = field(default_factory=list)                      # SessionInfo changes
    agents: list[dict] = field(default_factory=list)                        # AgentInfo changes
    notices: list[tuple[str, str, str, str]] = field(default_factory=list)  # (account, reason, agent, session)
    kick: list[str] = field(default_factory=list)                           # sessions with a queued run
    journal: list[tuple[dict, dict]] = field(default_factory=list)          # (run, entry): run journal entries

    def merge(self, other: "Effects") -> None:
        for name in ("created", "appended", "runs", "sessions", "agents", "notices", "kick", "journal"):
            getattr(self, name).extend(getattr(other, name))


@dataclass(slots=True)
class Started:
    run: dict
    session: dict
    user_event: dict | None     # the turn's message, when it wrote one
    effects: Effects


@dataclass(frozen=True, slots=True)
class NewSession:
    """The session a turn opens (a trigger's thread, a delegated child's)."""

    session_id: str
    title: str | None
    parent_session_id: str | None = None


def in_flight(conn, account_id: str, cap: int) -> int:  # noqa: ANN001
    """The account's runs queued, claimed or running, over all its agents (a run is its agent
    owner's), at most `cap`. Read from `account_live_runs`, the count the runs' triggers move in
    the statement that moves a run's status (schema version 24), so it costs the same however
    deep the account's queue: counting the runs cost every MessageSession a walk of the queue,
    48 ms at 50,000 (docs/performance.md "What still grows with the queue: the accept")."""
    row = conn.execute("SELECT coalesce(sum(live), 0) FROM account_live_runs WHERE account_id = ?",
                       (account_id,)).fetchone()
    return min(int(row[0]), cap)


def counted_in_flight(conn, account_id: str) -> int:  # noqa: ANN001
    """The account's live runs counted from the runs themselves (what `in_flight`'s count must
    equal: the tests check it after turns, cancels, failures, restarts and crashes)."""
    row = conn.execute(
        "SELECT count(*) FROM runs WHERE agent_id IN (SELECT id FROM agents WHERE account_id = ?)"
        " AND status IN ('queued', 'claimed', 'running')", (account_id,)).fetchone()
    return row[0]


def in_flight_refusal(conn, account_id: str, limits: TurnLimits) -> str | None:  # noqa: ANN001
    """Why the account may not queue another run now, or None."""
    count = in_flight(conn, account_id, limits.runs_in_flight)
    if count >= limits.runs_in_flight:
        return (f"the account has {count} runs queued or running, the most this server allows "
                f"(--max-runs-in-flight {limits.runs_in_flight}); wait for some to end, or stop them")
    return None


def tree_refusal(conn, parent: dict, limits: TurnLimits) -> str | None:  # noqa: ANN001
    """Why `parent`'s tree may not have one more run, or None."""
    root = parent.get("rootRunId") or parent["id"]
    count = conn.execute("SELECT count(*) FROM runs WHERE root_run_id = ?", (root,)).fetchone()[0]
    if count >= limits.tree_runs:
        return (f"this delegation tree has {count} runs, the most this server allows in one tree "
                f"(--max-tree-runs {limits.tree_runs}); do the rest of the work yourself")
    return None


def start_turn(conn, *, owner: str, agent_id: str, session_id: str, run_id: str, now: int,  # noqa: ANN001
               limits: TurnLimits, message: dict | None = None, event_id: str | None = None,
               user_event_id: str | None = None, new_session: NewSession | None = None,
               title: str = "", origin: str = USER, parent: dict | None = None,
               envelope: bytes | None = None, envelope_action: dict | None = None) -> Started:
    """Queue a turn of `owner`'s agent in `session_id` (see the module doc). `message` (with
    `event_id`, and the `envelope` that asked for it when a person did, with its action as
    verification decoded it, `envelope_action`) is the turn's user message; without it the run
    answers `user_event_id`, an earlier one (RetrySession). A child (`parent` given) is queued
    under its parent's run; its session shows the run's status once it runs, as the reference's
    children do.
    Raises Refused (nothing written) when a limit refuses it."""
    accounts_q.hold_account(conn, owner, now)   # (the limits hold across servers: see hold_account)
    refusal = in_flight_refusal(conn, owner, limits)
    if refusal is not None:
        raise Refused(429, refusal)
    if parent is not None:
        refusal = tree_refusal(conn, parent, limits)
        if refusal is not None:
            raise Refused(409, refusal)
    out = Effects()
    if new_session is not None:
        session = sessions_q.create_session(conn, session_id, owner, agent_id, new_session.title, now,
                                            parent_session_id=new_session.parent_session_id)
        if parent is not None:
            conn.execute("UPDATE sessions SET run_id = ?, title_source = 'agent' WHERE id = ?",
                         (run_id, session_id))
            session["runId"] = run_id
        out.created.append(session)
        out.notices.append((owner, "session-created", agent_id, session_id))
    user_event = None
    if message is not None:
        user_event, body = events_q.append_event(conn, session_id, message, event_id, now, envelope=envelope,
                                                  envelope_action=envelope_action)
        out.appended.append((session_id, user_event, body))
        user_event_id = user_event["id"]
    run = runs_q.create_run(conn, run_id, owner, agent_id, session_id, user_event_id, now, title=title,
                            origin=origin, parent=parent)
    out.runs.append(run)
    if parent is None:
        session = sessions_q.set_session_status(conn, session_id, "streaming", now)
        out.agents.append(agents_q.touch_agent(conn, agent_id, now, decoded=False))
        out.notices.append((owner, "session-event", agent_id, session_id))
    else:
        session = sessions_q.get_session(conn, session_id) or session
    if new_session is not None:
        out.created[-1] = session     # announced once, as it now stands
    else:
        out.sessions.append(session)
    out.kick.append(session_id)
    return Started(run, session, user_event, out)
