"""One conversational turn for `send` and `chat`: send a message and follow its run to the end.

A run may say several things: a first sentence, tool calls, children, a plan, the answer after
them, the server's reminders when a plan is left open. All of it is shown, and the turn ends only
when the run does. The run's events are found on the session subscription by `meta.runId` (and a
call's spawn and result by its `toolCallId`); its words stream as partials (`partialId` is the
`runId`); its end is a `change` on `runs/<runId>` with a terminal status. Whatever the session
subscription had not yet delivered by then is read with GetSession, so nothing of the run is
missed, even when the socket dropped meanwhile (partials are live-only; the durable message is
shown when its words were not).
"""
from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import AgentsError
from ..render import Renderer, is_stopped, json_line
from ..subscription import Subscription

SEND_ATTEMPTS = 3
TERMINAL = ("succeeded", "failed", "canceled")
PAGE = 1000


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


def write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class Screen:
    """Where a run is shown. `mode`: `normal` (words as they stream, a line per tool call, child
    and plan), `quiet` (only the final answer, at the end) or `json` (each raw event, one JSON
    object per line). `before_first` runs once before anything is written (chat erases its
    thinking mark there)."""

    def __init__(self, mode: str = "normal", write: Callable[[str], None] = write_out,
                 before_first: Callable[[], None] | None = None) -> None:
        self.mode = mode
        self._write = write
        self._before_first = before_first
        self.at_line_start = True
        self.wrote = False

    def _put(self, text: str) -> None:
        if not text:
            return
        if not self.wrote and self._before_first is not None:
            self._before_first()
        self.wrote = True
        self._write(text)
        self.at_line_start = text.endswith("\n")

    def text(self, piece: str) -> None:
        if self.mode == "normal":
            self._put(piece)

    def line(self, text: str) -> None:
        if self.mode == "normal":
            self.end_line()
            self._put(text + "\n")

    def end_line(self) -> None:
        if not self.at_line_start:
            self._put("\n")

    def raw(self, item: dict) -> None:
        if self.mode == "json":
            self._put(json_line(item) + "\n")

    def answer(self, text: str | None) -> None:
        if self.mode == "quiet" and text:
            self._put(text + ("" if text.endswith("\n") else "\n"))


@dataclass
class Outcome:
    status: str = ""          # the run's: succeeded, failed, canceled ("" when it was not seen to end)
    error: str = ""           # a failed run's message
    answer: str | None = None  # the run's last assistant message
    stopped_shown: bool = False


class RunView:
    """One run's events, as they come, onto a Screen."""

    def __init__(self, run_id: str, screen: Screen, after_seq: int) -> None:
        self.run_id = run_id
        self.screen = screen
        self.renderer = Renderer(numbered=False)
        self.calls: set[str] = set()
        self.streamed: list[str] = []   # the words of the message being written
        self.running: set[str] = set()  # calls announced by the run's activity, no result shown yet
        self.held: list[str] = []       # words streamed while a call had no result shown yet
        self.seen_seq = after_seq
        self.outcome = Outcome()

    def ours(self, payload: dict) -> bool:
        meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
        if meta.get("runId") == self.run_id:
            if payload.get("type") == "tool_call":
                self.calls.add(str(payload.get("id")))
            return True
        return str(payload.get("toolCallId")) in self.calls

    def partial(self, item: dict) -> None:
        """Words as they stream. The next step's words can overtake the durable results of the
        step before (those are written while the model already speaks): words are held back while
        a call announced by the run's activity has no result shown yet, so the screen reads in the
        order `history` does."""
        patch = item.get("patch") or {}
        if item.get("partialId") != self.run_id:
            return
        activity = patch.get("activity") if isinstance(patch.get("activity"), dict) else {}
        if activity.get("phase") == "tool" and activity.get("toolCallId"):
            self.running.add(str(activity["toolCallId"]))
        if patch.get("textDelta"):
            self.streamed.append(patch["textDelta"])
            if self.running:
                self.held.append(patch["textDelta"])
            else:
                self.screen.text(patch["textDelta"])

    def release(self) -> None:
        """Show the words held back."""
        held, self.held = "".join(self.held), []
        self.running.clear()
        self.screen.text(held)

    def append(self, item: dict) -> None:
        event = item.get("event") or {}
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.seen_seq:
            return
        self.seen_seq = seq
        payload = event.get("event") if isinstance(event.get("event"), dict) else {}
        if not self.ours(payload):
            return
        self.screen.raw(item)
        if payload.get("type") == "message" and payload.get("role") == "assistant":
            self.release()
            self._said(payload)
        elif payload.get("type") == "error":
            self.outcome.error = str(payload.get("message", ""))
        else:
            for line in self.renderer.lines(event):
                self.screen.line(line)
            if payload.get("type") == "tool_result":
                self.running.discard(str(payload.get("toolCallId")))
                if not self.running:
                    self.release()

    def _said(self, payload: dict) -> None:
        content = str(payload.get("content", ""))
        streamed, self.streamed = "".join(self.streamed), []
        stopped = is_stopped(payload)
        if stopped and content == "Stopped." and not streamed:
            self.screen.line("[stopped]")
        else:
            if not streamed:
                self.screen.text(content)
            elif content.startswith(streamed):
                self.screen.text(content[len(streamed):])
            elif content != streamed:   # words were missed: the stored message is what counts
                self.screen.line(content)
            if stopped:
                self.screen.text(" [stopped]")
            self.screen.end_line()
        self.outcome.stopped_shown = self.outcome.stopped_shown or stopped
        if not (stopped and content == "Stopped."):
            self.outcome.answer = content


async def follow_run(client, session_id: str, sub: Subscription, sent: dict, screen: Screen,
                     after_seq: int = 0) -> Outcome:
    """Show the run `sent` (a MessageSession response) started, from `sub` (the session's
    subscription, opened before the message was sent) until the run ends."""
    view = RunView(sent["runId"], screen, after_seq)
    run_sub = await client.subscribe(f"runs/{sent['runId']}")
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(source: Subscription, tag: str) -> None:
        try:
            async for item in source:
                await queue.put((tag, item))
            await queue.put((tag, None))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
            await queue.put((tag, exc))

    tasks = [asyncio.create_task(pump(sub, "session")), asyncio.create_task(pump(run_sub, "run"))]
    try:
        while True:
            tag, item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            if item is None:
                break   # a subscription ended (closed): nothing more will come
            kind = item.get("_")
            if tag == "run":
                if kind == "change":
                    screen.raw(item)
                    value = item.get("value") or {}
                    if value.get("id") == view.run_id and value.get("status") in TERMINAL:
                        view.outcome.status = value["status"]
                        view.outcome.error = str((value.get("error") or {}).get("message", "")) or view.outcome.error
                        break
            elif kind == "append":
                view.append(item)
            elif kind == "appendPartial":
                view.partial(item)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await run_sub.close()
    # What the run wrote that the subscription had not delivered yet (it is all durable now).
    after = view.seen_seq
    for _ in range(10_000):
        response = await client.get_session(session_id, after_seq=after, limit=PAGE)
        events = response.get("events", [])
        for event in events:
            view.append({"_": "append", "key": f"sessions/{session_id}", "event": event})
        if "nextAfterSeq" not in response or not events:
            break
        after = response["nextAfterSeq"]
    view.release()
    for line in view.renderer.open_calls():
        screen.line(line)
    screen.end_line()
    screen.answer(view.outcome.answer)
    return view.outcome


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def finish(outcome: Outcome, screen: Screen) -> int:
    """The turn's ending: 0 when the run succeeded; 1 with one sentence on stderr when it failed
    or was stopped (`[stopped]` on the screen either way)."""
    screen.end_line()
    if outcome.status == "failed":
        say(f"the agent failed: {outcome.error or 'no reason given'}")
        return 1
    if outcome.status == "canceled":
        if not outcome.stopped_shown:
            screen.line("[stopped]")
        say("the run was stopped before it finished")
        return 1
    if outcome.status != "succeeded":
        say("the connection ended before the run did; `seed-agents history SESSION` shows what it wrote")
        return 1
    return 0
