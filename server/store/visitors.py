"""Public chat (the storage design's `public_chat`): an agent its owner opened to every signed
account, the visitors' own sessions, and what they spent (docs/protocol.md, "Public chat").

- `agents.public_chat`: NULL while closed, else DAG-CBOR {messagesPerHour, tokensPerDay,
  tokensPerDayAll, tools}.
- `sessions.visitor_id`: the account whose visitor session it is (only it and the owner see it).
- `visitor_usage`: one row per (agent, visitor) and one per agent with account '' (all visitors
  together): messages in the current clock hour, tokens in the current UTC day. A message is
  admitted under the two rows' locks (the agent's total first, then the visitor's: one order
  everywhere), so servers sharing a store count one at a time.
- `visitor_runs`: a visitor run's reservation. The tokens a run may use are charged when its
  message is admitted and the unused part is given back when it ends (`settle_run`): however many
  visitors run at once, the owner's tokens never go past the limits.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..database.port import Conn
from . import codec

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
ALL = ""   # visitor_usage's account for all visitors of an agent together


def get_config(conn: Conn, agent_id: str) -> dict | None:
    """The agent's public chat settings, or None while it is closed (or there is no agent)."""
    row = conn.execute("SELECT public_chat FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return None if row is None or row[0] is None else codec.decode(row[0])


def set_config(conn: Conn, agent_id: str, config: dict | None, now: int) -> None:
    conn.execute("UPDATE agents SET public_chat = ?, updated_at = max(updated_at, ?) WHERE id = ?",
                 (None if config is None else codec.encode(config), now, agent_id))


VISITOR_ROW = "SELECT visitor_id FROM sessions WHERE id = ?"
RESERVED_ROW = "SELECT reserved FROM visitor_runs WHERE run_id = ?"


def visitor_of(conn: Conn, session_id: str) -> str | None:
    """The visitor whose session it is (None: not a visitor session, or no such session)."""
    return first_value(conn.execute(VISITOR_ROW, (session_id,)).fetchall())


def first_value(rows: list):  # noqa: ANN201
    """The first column of the first row (None: no row): VISITOR_ROW's and RESERVED_ROW's answer."""
    return rows[0][0] if rows else None


def set_visitor(conn: Conn, session_id: str, account_id: str) -> None:
    conn.execute("UPDATE sessions SET visitor_id = ? WHERE id = ?", (account_id, session_id))


def live_visitor_sessions(conn: Conn, agent_id: str) -> list[str]:
    """The agent's visitor sessions with a live run (closing public chat stops them)."""
    return [sid for (sid,) in conn.execute(
        "SELECT DISTINCT s.id FROM sessions s JOIN runs r ON r.session_id = s.id"
        " WHERE s.agent_id = ? AND s.visitor_id IS NOT NULL"
        " AND r.status IN ('queued', 'claimed', 'running', 'waiting')", (agent_id,))]


def visitors_of(conn: Conn, agent_id: str) -> list[str]:
    """Every account that holds a visitor session of the agent."""
    return [a for (a,) in conn.execute(
        "SELECT DISTINCT visitor_id FROM sessions WHERE agent_id = ? AND visitor_id IS NOT NULL", (agent_id,))]


@dataclass(frozen=True)
class Usage:
    messages: int   # this clock hour
    tokens: int     # this UTC day


def _window(now: int, size: int) -> int:
    return now - now % size


def _held(conn: Conn, agent_id: str, account_id: str, now: int) -> Usage:
    """The row's figures in the current windows (a past window reads as 0), locked until the
    transaction ends."""
    hour, day = _window(now, HOUR_MS), _window(now, DAY_MS)
    conn.execute("INSERT INTO visitor_usage (agent_id, account_id, hour_start, messages, day_start, tokens)"
                 " VALUES (?, ?, ?, 0, ?, 0) ON CONFLICT (agent_id, account_id) DO NOTHING",
                 (agent_id, account_id, hour, day))
    row = conn.execute("SELECT hour_start, messages, day_start, tokens FROM visitor_usage"
                       f" WHERE agent_id = ? AND account_id = ?{conn.traits.lock_rows}",
                       (agent_id, account_id)).fetchone()
    return Usage(row[1] if row[0] == hour else 0, row[3] if row[2] == day else 0)


def usage(conn: Conn, agent_id: str, account_id: str, now: int) -> Usage:
    """What the visitor (ALL: every visitor) spent in the current windows (no lock)."""
    row = conn.execute("SELECT hour_start, messages, day_start, tokens FROM visitor_usage"
                       " WHERE agent_id = ? AND account_id = ?", (agent_id, account_id)).fetchone()
    if row is None:
        return Usage(0, 0)
    return Usage(row[1] if row[0] == _window(now, HOUR_MS) else 0, row[3] if row[2] == _window(now, DAY_MS) else 0)


def _spend(conn: Conn, agent_id: str, account_id: str, now: int, messages: int, tokens: int) -> None:
    hour, day = _window(now, HOUR_MS), _window(now, DAY_MS)
    conn.execute("UPDATE visitor_usage SET"
                 " messages = CASE WHEN hour_start = ? THEN messages ELSE 0 END + ?, hour_start = ?,"
                 " tokens = CASE WHEN day_start = ? THEN tokens ELSE 0 END + ?, day_start = ?"
                 " WHERE agent_id = ? AND account_id = ?",
                 (hour, messages, hour, day, tokens, day, agent_id, account_id))


def admit(conn: Conn, agent_id: str, account_id: str, config: dict, now: int, max_run_tokens: int,
          max_live: int) -> str | int:
    """Count one visitor message: the tokens reserved for its run (> 0), or why it is refused
    (text). Both rows stay locked until the transaction ends. A visitor has one run live at a
    time, and all visitors of the agent together at most `max_live` (the owner's own turns keep
    the rest of the account's --max-runs-in-flight)."""
    total = _held(conn, agent_id, ALL, now)
    mine = _held(conn, agent_id, account_id, now)
    live_mine, live_all = conn.execute(
        "SELECT coalesce(sum(CASE WHEN v.account_id = ? THEN 1 ELSE 0 END), 0), count(*) FROM visitor_runs v"
        " JOIN runs r ON r.id = v.run_id WHERE v.agent_id = ? AND r.status IN ('queued', 'claimed', 'running', 'waiting')",
        (account_id, agent_id)).fetchone()
    if live_mine:
        return "your previous message to this agent is still being answered; send the next one once it is"
    if live_all >= max_live:
        return (f"this agent is answering {live_all} visitors already, the most it takes at once; "
                "try again in a moment")
    if mine.messages >= config["messagesPerHour"]:
        return (f"this agent's owner allows each visitor {config['messagesPerHour']} messages an hour; "
                "you have sent them all this hour, try again after it")
    left_mine = config["tokensPerDay"] - mine.tokens
    if left_mine <= 0:
        return (f"this agent's owner allows each visitor {config['tokensPerDay']} tokens a day; you have "
                "used them all today (UTC), try again tomorrow")
    left_all = config["tokensPerDayAll"] - total.tokens
    if left_all <= 0:
        return (f"this agent's owner allows its visitors {config['tokensPerDayAll']} tokens a day together; "
                "they are all used today (UTC), try again tomorrow")
    reserved = min(left_mine, left_all, max_run_tokens)
    _spend(conn, agent_id, ALL, now, 1, reserved)
    _spend(conn, agent_id, account_id, now, 1, reserved)
    return reserved


def reserve_run(conn: Conn, run_id: str, agent_id: str, account_id: str, reserved: int, now: int) -> None:
    conn.execute("INSERT INTO visitor_runs (run_id, agent_id, account_id, reserved, day_start) VALUES (?, ?, ?, ?, ?)",
                 (run_id, agent_id, account_id, reserved, _window(now, DAY_MS)))


def reservation(conn: Conn, run_id: str) -> int | None:
    """The tokens a visitor run may use (None: not a visitor run, or already settled)."""
    return first_value(conn.execute(RESERVED_ROW, (run_id,)).fetchall())


def settle_run(conn: Conn, run_id: str, spent: int | None) -> None:
    """A visitor run ended having used `spent` tokens (None: unknown, all of it counts): the rest
    of its reservation goes back to its day's window (never into another day's)."""
    row = conn.execute("DELETE FROM visitor_runs WHERE run_id = ? RETURNING agent_id, account_id, reserved, day_start",
                       (run_id,)).fetchone()
    if row is None:
        return
    agent_id, account_id, reserved, day = row
    back = reserved - min(reserved, max(0, spent)) if spent is not None else 0
    if back <= 0:
        return
    for account in (ALL, account_id):   # (the lock order of admit)
        conn.execute("UPDATE visitor_usage SET tokens = max(0, tokens - ?)"
                     " WHERE agent_id = ? AND account_id = ? AND day_start = ?", (back, agent_id, account, day))


def forget_agent(conn: Conn, agent_id: str) -> None:
    """DeleteAgent: its counters and reservations go with it."""
    conn.execute("DELETE FROM visitor_usage WHERE agent_id = ?", (agent_id,))
    conn.execute("DELETE FROM visitor_runs WHERE agent_id = ?", (agent_id,))
