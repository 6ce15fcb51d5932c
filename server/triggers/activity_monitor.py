"""Polling the HM server's activity feed for the accounts that have activity triggers.

Every `--activity-poll-interval` (and when an activity trigger changes here) each such account's
feed is read newest first, `GET {hm}/api/ListEvents?pageSize=..&currentAccount=..&order=observed`
(the Seed client's request; `observed` so a late-propagating comment surfaces at the top), page
by page until a page holds an event already seen, at most `--activity-max-pages` pages.

The watermark (`activity_watermarks`, per account and HM server) is the keys already seen. The
first successful poll only sets it, firing nothing older than the account's earliest activity
trigger. After that, each unseen event is handled oldest first, in one transaction that claims
it for each matching trigger (`trigger_event_claims`: a key is admitted once per trigger however
often the feed shows it), fires those triggers (`firing.admit`) and advances the watermark, so a
restart resumes after the last handled event, and an event is never fired twice nor skipped.

With several servers on one PostgreSQL database an account's feed is polled by one of them at a
time: the poller holds a lease on the watermark row (the run queue's pattern), taken over by
another server once it runs out.
"""
from __future__ import annotations

import asyncio
import logging
import time

from seed_agents.protocol.hm import hm_activity as activity
from seed_agents.protocol.api.actions_triggers import ACTIVITY_SOURCES
from seed_agents.protocol.wire.dagcbor import encode

from ..hypermedia.client import FeedPageError
from ..runtime.leasing import server_id
from ..database.workers import DatabaseClosed
from ..runtime.parked import woken
from ..store import parking
from ..store import trigger_firings as firings_q
from ..store import triggers as triggers_q
from .firing import Event, admit
from .webhook import plain_json

log = logging.getLogger("seed_agents.triggers")

ACTIVITY = ACTIVITY_SOURCES
MAX_PAGE_BYTES = 8 << 20          # one feed page; larger is an error (the feed is untrusted)
MAX_EVENT_BYTES = 64 * 1024       # an event kept with its firing (larger: only its key and summary)
REQUEST_TIMEOUT = 20.0
# A trigger never fires for an event from before it was made, give or take this much (a comment
# written just before, and seen by the HM server just after, still counts).
BEFORE_GRACE_MS = 5 * 60_000
MAX_FEED_DEPTH = 60               # nesting of a feed page (its events are kept as DAG-CBOR)


class FeedError(Exception):
    """The feed could not be read (recorded on the watermark as lastError)."""


class ActivityMonitor:
    def __init__(self, triggers) -> None:
        self.triggers = triggers
        self.ctx = ctx = triggers.ctx
        cfg = ctx.config
        self.url = cfg.hm_server_url
        self.interval = cfg.activity_poll_interval
        self.page_size = cfg.activity_page_size
        self.max_pages = cfg.activity_max_pages
        self.keep_keys = max(200, self.page_size * self.max_pages)
        self.owner = server_id()
        self.lease_ms = int(max(60.0, 3 * self.interval) * 1000)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        # The runtime's HM client: the feed is read on its guarded HTTP client (the provider
        # network policy, one TLS context), as every other call to the HM server is.
        self.hm = ctx.runtime.hm
        self.polls = 0
        self.pages = 0
        self._lock = asyncio.Lock()   # one pass at a time (the loop's, or one asked for)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="triggers:activity")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        self._wake.set()

    @property
    def idle(self) -> bool:
        """No pass running and none asked for."""
        return not self._lock.locked() and not self._wake.is_set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.poll_once()
            except DatabaseClosed:
                return
            except Exception:
                log.exception("the activity poll failed; trying again at the next interval")
            try:
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def poll_once(self) -> None:
        """One pass over every account with an enabled activity trigger."""
        async with self._lock:
            await self._poll()

    async def _poll(self) -> None:
        rows = await self.ctx.db.aread(triggers_q.enabled_of_type, ACTIVITY)
        earliest: dict[str, int] = {}
        for trigger in rows:
            earliest[trigger["account"]] = min(earliest.get(trigger["account"], trigger["createdAt"]),
                                               trigger["createdAt"])
        # (and the feeds a parked workflow waits on: ctx.waitForEvent({eventType, resource, author}))
        for account, since in (await self.ctx.db.aread(parking.activity_wait_accounts)).items():
            earliest[account] = min(earliest.get(account, since), since)
        for account in sorted(earliest):
            await self._poll_account(account, earliest[account])
        self.polls += 1

    async def _poll_account(self, account: str, since: int) -> None:
        db = self.ctx.db
        started = int(time.time() * 1000)
        if db.shared and not await db.write(firings_q.take_poll_lease, account, self.url, self.owner, started,
                                             self.lease_ms):
            return   # another server polls this account's feed now
        previous = await db.aread(firings_q.watermark, account, self.url)
        seen = set(previous["seenKeys"]) if previous is not None else set()
        try:
            fetched = await self._fetch_all(account, seen)
        except FeedError as exc:
            log.warning("activity feed of %s at %s: %s", account, self.url, exc)
            await db.write(firings_q.watermark_error, account, self.url, started, str(exc))
            return
        keys = _unique_keys(fetched)
        if previous is None:
            # First poll: a baseline. Only what happened since the account's first activity
            # trigger is handled; everything fetched counts as seen.
            cursor = keys[:self.keep_keys]
            todo = [e for e in fetched if (activity.event_time_ms(e) or -1) >= since]
        else:
            cursor = list(previous["seenKeys"])
            todo = [e for e in fetched if activity.event_key(e) is not None and activity.event_key(e) not in seen]
        for event in reversed(todo):   # oldest first
            key = activity.event_key(event)
            if previous is not None:
                cursor = [key] + [k for k in cursor if k != key][:self.keep_keys - 1]
            publish = await db.write(self._handle, account, event, cursor, started)
            for do in publish:
                do()
        if not todo or previous is None:
            await db.write(firings_q.set_watermark, account, self.url, cursor, started, int(time.time() * 1000))

    async def _fetch_all(self, account: str, seen: set[str]) -> list[dict]:
        fetched: list[dict] = []
        token: str | None = None
        for _ in range(self.max_pages):
            events, token = await self._fetch(account, token)
            self.pages += 1
            fetched += events
            if not token or (seen and any(activity.event_key(e) in seen for e in events)):
                break
        return fetched

    async def _fetch(self, account: str, token: str | None) -> tuple[list[dict], str | None]:
        params = {"pageSize": str(self.page_size), "currentAccount": account, "order": "observed"}
        if token:
            params["pageToken"] = token
        try:
            body = await self.hm.feed_page(params, MAX_PAGE_BYTES, REQUEST_TIMEOUT)
        except FeedPageError as exc:
            raise FeedError(f"ListEvents {exc}") from None
        value = plain_json(body, MAX_FEED_DEPTH)
        if value is None:
            raise FeedError(f"ListEvents did not answer plain JSON (nested at most {MAX_FEED_DEPTH} deep)")
        if isinstance(value, dict) and isinstance(value.get("json"), dict):
            value = value["json"]   # superjson's envelope, as the HM server sends it
        if not isinstance(value, dict) or not isinstance(value.get("events"), list):
            raise FeedError("ListEvents answered without an events list")
        events, next_token = value["events"], value.get("nextPageToken")
        return [e for e in events if isinstance(e, dict)], next_token if isinstance(next_token, str) else None

    def _handle(self, conn, account: str, event: dict, cursor: list[str], polled_at: int) -> list:
        """One event, in one transaction: claims, firings, the watermark past it."""
        triggers, now = self.triggers, self.triggers.clock.now_ms()
        key = activity.firing_key(event)
        publish: list = []
        if key is not None:
            summary = activity.summary(event)
            kept = _bounded(event, key, summary)
            at = activity.event_time_ms(event)
            for trigger in triggers_q.enabled_of_type(conn, ACTIVITY, account):
                if at is not None and at < trigger["createdAt"] - BEFORE_GRACE_MS:
                    continue   # before the trigger existed (a stale watermark must not backfire)
                if not activity.matches(trigger["source"], event):
                    continue
                if not firings_q.claim_event(conn, account, trigger["id"], key, now):
                    continue   # admitted before (another poll, another server, a restart)
                detail = {"type": "activity", "event": kept}
                if trigger["source"]["type"] == "activity":   # the conditions it matched, as admitted
                    detail["matched"] = activity.matched_alternatives(trigger["source"], event)
                outcome = admit(conn, self.ctx, trigger, Event(key, summary, detail), now, triggers.policy)
                publish += outcome.publish
            # A parked run waiting on the feed is one run's business, beside the agent's triggers.
            for done in parking.deliver_activity(conn, account, event, kept, self.ctx.now_ms()):
                settled = woken(*done)
                publish.append(lambda settled=settled: self.ctx.runtime.settle(settled))
        firings_q.set_watermark(conn, account, self.url, cursor, polled_at, int(time.time() * 1000))
        return publish


def _unique_keys(events: list[dict]) -> list[str]:
    out, seen = [], set()
    for event in events:
        key = activity.event_key(event)
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _bounded(event: dict, key: str, summary: str) -> dict:
    try:
        if len(encode(event)) <= MAX_EVENT_BYTES:
            return event
    except Exception:  # noqa: BLE001 - a value DAG-CBOR cannot hold (e.g. NaN): keep the key only
        pass
    return {"feedEventId": key, "summary": summary, "truncated": True}
