"""Session titles from a small model call, as the reference's `#ensureSessionTitled`: when a
turn ends on a session still provisionally titled (title_source 'system': the first line of its
first message, or none), the agent's own model is asked once, without tools, for a title and a
description of the conversation's first messages. The answer is bounded (time, characters) and
applied guarded: only while the source is still 'system' (a title the user typed, or one the
agent set with `status` meanwhile, is never overwritten), flipping it to 'agent' so naming runs
once; the description only fills an empty one. Detached from the run (the turn's reply is not
held for it), one call per session at a time, at most MAX_ATTEMPTS per session per process.
Behind --session-title-generation (on by default, as in the reference).
"""
from __future__ import annotations

import asyncio
import logging
import re

from seed_agents.protocol.agent.providers import BUILTIN_TYPES

from ..providers.base import ChatMessage, TextDelta
from ..store import events as events_q
from ..store import sessions as sessions_q

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
TIMEOUT = 30.0          # seconds for the whole titling call
MAX_ANSWER_CHARS = 2000  # the model's answer is read up to this, then the stream is left
MAX_TITLE = 80           # characters of a generated title (the reference's first-line bound)
MAX_DESCRIPTION = 300
DIGEST_EVENTS = 12
DIGEST_CHARS = 4000

INSTRUCTIONS = (
    "You are a session-titling assistant. Reply with exactly two lines and nothing else. Line 1: a concise title "
    "(at most eight words) naming the specific purpose of the conversation you are shown — no quotes, no trailing "
    "punctuation. Line 2: one or two plain sentences describing what the conversation is about and what is being "
    "done, written for someone scanning a list of sessions. No labels, no explanation.")

_QUOTES = "\"'“‘”’"


def digest(events: list[dict]) -> str:
    """The conversation's first messages as the reference hands them to the titling model."""
    lines = []
    for event in events:
        payload = event.get("event") or {}
        content = payload.get("content")
        if payload.get("type") != "message" or not isinstance(content, str) or payload.get("actor") == "system":
            continue
        if payload.get("role") == "user":
            lines.append(f"User: {content[:1200]}")
        elif payload.get("role") == "assistant":
            lines.append(f"Assistant: {content[:600]}")
    return "\n\n".join(lines)[:DIGEST_CHARS]


def parse_answer(text: str) -> tuple[str, str] | None:
    """(title, description) of the model's two lines, stripped of labels, quotes and a final
    period, each bounded and on one line; None when there is no title."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return None
    title = re.sub(r"^(title|description)\s*:\s*", "", lines[0], flags=re.I).strip(_QUOTES).rstrip(".").strip()
    title = "".join(ch for ch in title if ch.isprintable())
    if not title:
        return None
    if len(title) > MAX_TITLE:
        title = title[:MAX_TITLE - 1].rstrip() + "…"
    description = re.sub(r"^description\s*:\s*", "", " ".join(lines[1:]), flags=re.I).strip(_QUOTES).strip()
    description = "".join(ch for ch in description if ch.isprintable())[:MAX_DESCRIPTION]
    return title, description


class Titler:
    def __init__(self, runtime) -> None:  # noqa: ANN001
        self.runtime = runtime
        self.naming: dict[str, asyncio.Task] = {}
        self.attempts: dict[str, int] = {}

    def after_turn(self, agent: dict, session_id: str, provider_type: str) -> None:
        """A turn ended with a reply: name the session if it is still provisionally titled."""
        rt = self.runtime
        if not rt.config.session_title_generation or rt.closing or provider_type in BUILTIN_TYPES:
            return
        if session_id in self.naming or self.attempts.get(session_id, 0) >= MAX_ATTEMPTS:
            return
        if rt.db.read(sessions_q.title_source, session_id) != "system":
            return
        if len(self.attempts) >= 10_000:
            self.attempts.clear()   # bounded; a session may then be tried again
        self.attempts[session_id] = self.attempts.get(session_id, 0) + 1
        task = asyncio.create_task(self._name(agent, session_id), name=f"title-{session_id}")
        self.naming[session_id] = task
        task.add_done_callback(lambda _t: self.naming.pop(session_id, None))

    async def _name(self, agent: dict, session_id: str) -> None:
        rt = self.runtime
        try:
            events = rt.db.read(events_q.events_after, session_id, 0, DIGEST_EVENTS)
            text = digest(events)
            if not text:
                return
            provider, _type, model = rt._provider_for(agent)
            provider.reasoning_level = None   # titling thinks not (the reference: thinkingLevel off)
            answer = ""
            async with asyncio.timeout(TIMEOUT):
                async for item in provider.stream(model, [ChatMessage("system", INSTRUCTIONS),
                                                          ChatMessage("user", text)]):
                    if isinstance(item, TextDelta):
                        answer += item.text
                        if len(answer) >= MAX_ANSWER_CHARS:
                            break
            parsed = parse_answer(answer[:MAX_ANSWER_CHARS])
            if parsed is None:
                return
            session = await rt.db.write(sessions_q.apply_title, session_id, parsed[0], parsed[1], rt.now_ms())
            if session is not None:
                self.attempts.pop(session_id, None)
                rt.publisher.publish_session(session)   # (a change of sessions/<id>, and the account's notice)
        except asyncio.CancelledError:
            raise
        except Exception as exc:   # a provider down or odd: the provisional title stays
            log.warning("session %s: title generation failed: %s", session_id, getattr(exc, "message", exc))

    async def close(self) -> None:
        for task in list(self.naming.values()):
            task.cancel()
        await asyncio.gather(*self.naming.values(), return_exceptions=True)
