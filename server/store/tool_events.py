"""Recording a tool call and its result in a session, written once: the tool loop, a workflow's
answered delegate, InvokeSessionTool and a trigger's `tool` continuation all append their
`tool_call` / `tool_result` events here (their payloads made by server/tools/records.py, with its
one output bound), inside the caller's write job.

`record` appends the events in order; for a model run it journals each tool event (a pointer
to its seq, store/journal.record_tool_events); for an entry that is not a run's (a person, a
trigger) it adds the account's `session-event` notice. It returns the turn `Effects` saying what
to publish; `server/runtime/turns.publish` is the one place that publishes them, after the commit.
"""
from __future__ import annotations

from collections.abc import Callable

from . import events as events_q
from . import journal as journal_q
from .turns import Effects


def record(conn, session_id: str, payloads: list[dict], now: int, new_id: Callable[[], str], *,  # noqa: ANN001
           run: dict | None = None, max_bytes: int | None = None,
           notice: tuple[str, str] | None = None, effects: Effects | None = None) -> Effects:
    """Append `payloads` to the session (NotFound when it is gone); `run`: the model run whose
    journal points at them; `notice`: (account, agent) told `session-event`. Adds to `effects`
    when given (one use case's whole write), else to a new one."""
    out = effects if effects is not None else Effects()
    limit = events_q.MAX_EVENT_BYTES if max_bytes is None else max_bytes
    appended = [events_q.append_event(conn, session_id, p, new_id(), now, limit) for p in payloads]
    out.appended.extend((session_id, event, body) for event, body in appended)
    if run is not None:
        out.journal.extend((run, entry) for entry in journal_q.record_tool_events(conn, run["id"], appended, now))
    if notice is not None:
        out.notices.append((notice[0], "session-event", notice[1], session_id))
    return out
