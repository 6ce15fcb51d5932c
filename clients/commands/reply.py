"""One conversational turn for `send` and `chat`: send a message and stream its reply.

The reply to a message is found on the session subscription: the user event (by
`userEventId`), the partials of its run (this server sets `partialId` to the `runId`), which end
with `patch.done`, then the run's durable assistant message (or error event).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable

from ..errors import AgentsError
from ..subscription import Subscription

SEND_ATTEMPTS = 3


async def last_seq(client, session_id: str) -> int:
    """The seq of the session's latest durable event (0 when it has none)."""
    after = 0
    while True:
        response = await client.get_session(session_id, after_seq=after, limit=10_000)
        events = response.get("events", [])
        if events:
            after = events[-1]["seq"]
        if "nextAfterSeq" not in response or not events:
            return after
        after = response["nextAfterSeq"]


async def send_message(client, session_id: str, text: str, attachment_ids=()) -> dict:
    """MessageSession, retried across a dropped connection with the same clientMessageId, so
    the message is stored once even when the first answer was lost."""
    message_id = str(uuid.uuid4())
    attempt = 1
    while True:
        try:
            if attachment_ids:
                return await client.message_with_attachments(session_id, text, attachment_ids, message_id)
            return await client.message_session(session_id, text, client_message_id=message_id)
        except AgentsError as exc:
            if exc.reason != "lost" or attempt >= SEND_ATTEMPTS:
                raise
            attempt += 1


def _is_reply(payload: dict) -> bool:
    return payload.get("type") == "error" or payload.get("role") == "assistant"


async def stream_reply(sub: Subscription, sent: dict, write: Callable[[str], None]) -> dict | None:
    """Consume `sub` until the reply to `sent` (a MessageSession response) is durable, calling
    `write(text)` for each streamed delta. Returns the reply SessionEvent, or None when the run
    ended without one (stopped)."""
    run_id, user_event_id = sent["runId"], sent["userEventId"]
    user_seq: int | None = None
    done = False
    other_runs = False  # another turn streamed after our message: its reply comes first
    async for item in sub:
        kind = item.get("_")
        if kind == "append":
            event = item["event"]
            if event.get("id") == user_event_id:
                user_seq = event["seq"]
            elif user_seq is not None and event["seq"] > user_seq and _is_reply(event.get("event", {})):
                if done or not other_runs:
                    return event
                other_runs = False  # that was the other turn's reply; ours is next
        elif kind == "appendPartial":
            patch = item.get("patch") or {}
            if item.get("partialId") != run_id:
                other_runs = other_runs or user_seq is not None
                continue
            if patch.get("textDelta"):
                write(patch["textDelta"])
            done = done or bool(patch.get("done"))
        elif kind == "change" and done and (item.get("value") or {}).get("status") != "streaming":
            return None  # our run finished and no reply was appended before the session changed
    return None
