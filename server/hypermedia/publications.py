"""The publication queue: what the Seed hypermedia server did not take, sent again until it does.

Beyond the reference. A signing identity created or renamed while the HM server does not answer
(or answers 5xx), and a document an agent publishes meanwhile, are kept in the store (table
`hm_publications`, server/store/publications.py) in the transaction that answers the action, and
this loop sends them: due items, oldest first, one subject's items one at a time in order; after
n failed tries the next waits `--hm-publish-retry` × 2^(n-1) seconds, at most an hour (a garbled
answer too: the server may have been half there). A refusal (4xx) ends the item as `failed`,
kept to be seen. A document waits for its identity's own items (its account first). Every server of a cluster runs the loop; an item
is taken under a lease (one conditional UPDATE), so one server sends it; a server killed while
sending leaves it to the others when the lease runs out (the blobs are content-addressed: the HM
server stores a block sent twice once).

Kinds:
- `blobs`: the signed blobs, built when the action was answered (an identity's account, profile
  and icon blocks): sent as they are, then the identity's `serverUrl` is set.
- `document`: an agent's Markdown and the address it goes to, built when the server answers (the
  document's current version is the diff's base), signed with the identity the agent named. The
  authority is checked again when it is sent: the identity must still exist and the agent's
  definition must still name it and grant publishing, else it fails without publishing.
"""
from __future__ import annotations

import asyncio
import logging

from seed_agents.protocol.api.actions_identities import publish_granted, signing_keys_of
from seed_agents.protocol.hm.hm_blobs import Blob

from ..database.workers import DatabaseClosed
from ..store import agents as agents_q
from ..store import identities as identities_q
from ..store import publications as pub_q
from .client import HmClient, HmError

log = logging.getLogger("seed_agents.hypermedia")

BATCH = 8                 # items claimed in one transaction
MAX_SLEEP = 5.0           # seconds: the longest the loop waits before looking again (another server's items)
MAX_BACKOFF_MS = 3_600_000
LEASE_SLACK_MS = 10_000   # beyond the longest a send may take


class Refused(Exception):
    """The item cannot go out, ever: the server refused it, or its signer may no longer publish."""


def backoff_ms(attempts: int, base_ms: int) -> int:
    """The wait after `attempts` failed tries in a row."""
    return min(MAX_BACKOFF_MS, base_ms * 2 ** max(0, attempts - 1))


def blobs_body(blobs: list) -> dict:
    return {"blobs": [{"cid": b.cid, "data": b.data} for b in blobs]}


class PublicationQueue:
    def __init__(self, app, owner: str) -> None:  # noqa: ANN001
        self.app = app
        self.owner = owner   # this process's lease name (the run leases' server_id)
        self.hm: HmClient = app.runtime.hm
        self.retry_ms = max(1, int(getattr(app.config, "hm_publish_retry", 10.0) * 1000))
        timeout = float(getattr(app.config, "hm_server_timeout", 15.0))
        # A document's send is a few reads and one publish, bounded as a whole.
        self.send_seconds = timeout * 4
        self.lease_ms = int(self.send_seconds * 1000) + LEASE_SLACK_MS
        self.counts = {"pending": 0, "failed": 0}   # health's figures, as of the last look
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        # Health's figures are the store's from the start, not zeros until the first pass.
        self.counts = await self.app.db.aread(pub_q.counts)
        self._task = asyncio.create_task(self._loop(), name="hm-publications")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """Something was queued here: look now."""
        self._wake.set()

    async def _loop(self) -> None:
        everything = True   # at start: whatever waits is tried at once, backoff or not
        while True:
            self._wake.clear()
            seen = self.hm.reachable
            try:
                await self.run_once(everything=everything)
                now = self.app.now_ms()
                due = await self.app.db.aread(pub_q.next_wake, now)
                self.counts = await self.app.db.aread(pub_q.counts)
            except DatabaseClosed:
                return
            except asyncio.CancelledError:
                raise
            except Exception:   # a store hiccup must not end the loop: look again later
                log.exception("the publication queue failed a pass; trying again")
                due, now = None, self.app.now_ms()
            delay = MAX_SLEEP if due is None else min(MAX_SLEEP, max(0.0, (due - now) / 1000))
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass
            # The HM server answered someone (an agent's read, the start's probe) since it did
            # not answer here: it is back, so what waits goes now rather than after its backoff.
            everything = seen is False and self.hm.reachable is True

    async def run_once(self, *, everything: bool = False) -> int:
        """Send what is due now (claimed batch by batch), or with `everything` all that waits;
        how many items were tried."""
        tried = 0
        due_by = (1 << 62) if everything else None
        while True:
            items = await self.app.db.write(pub_q.claim, self.owner, self.app.now_ms(), self.lease_ms, BATCH, due_by)
            if not items:
                return tried
            for n, item in enumerate(items):
                tried += 1
                if not await self._send(item) and everything:
                    # Not there after all: the rest keep their backoff (and their leases go back).
                    await self.app.db.write(pub_q.release, [i["id"] for i in items[n + 1:]], self.owner)
                    return tried

    async def _send(self, item: dict) -> bool:
        """Send one item and record what came of it; False when it is to be tried again."""
        owner = self.owner
        try:
            async with asyncio.timeout(self.send_seconds):
                if item["kind"] == "blobs":
                    await self.hm.publish_blobs([Blob(b["cid"], bytes(b["data"])) for b in item["body"]["blobs"]])
                else:
                    await self._document(item)
        except Refused as exc:
            log.warning("publication %s (%s) refused for good: %s", item["id"], item["what"], exc)
            await self.app.db.write(pub_q.failed, item["id"], owner, str(exc), self.app.now_ms())
            return True
        except (HmError, TimeoutError) as exc:
            if isinstance(exc, HmError) and 400 <= (exc.status or 0) < 500:   # refused: trying again changes nothing
                await self.app.db.write(pub_q.failed, item["id"], owner, str(exc), self.app.now_ms())
                return True
            reason = str(exc) if isinstance(exc, HmError) else \
                f"the Seed hypermedia server at {self.hm.display} did not take it within {self.send_seconds:g} s"
            now = self.app.now_ms()
            at = now + backoff_ms(item["attempts"] + 1, self.retry_ms)
            await self.app.db.write(pub_q.retry_later, item["id"], owner, reason, at, now)
            return False
        await self.app.db.write(self._sent_job(item))
        log.info("published %s (%s) to %s", item["id"], item["what"], self.hm.display)
        return True

    def _sent_job(self, item: dict):  # noqa: ANN202
        account, name, url = item["accountId"], item["identityName"], self.hm.base_url

        def job(conn):  # noqa: ANN001
            if pub_q.sent(conn, item["id"], self.owner) and item["subject"].startswith("identity:"):
                identities_q.mark_published(conn, account, name, url, self.app.now_ms())
        return job

    async def _document(self, item: dict) -> None:
        """An agent's document, built now against what the server holds, as the agent's write
        would have (server/tools/hm_tools.py), under the authority checked again."""
        account, name, agent_id, body = item["accountId"], item["identityName"], item["agentId"], item["body"]
        seed = await self.app.db.aread(identities_q.open_seed, self.app.secrets, account, name)
        if seed is None:
            raise Refused(f"the signing identity {name} is gone")
        agent = await self.app.db.aread(agents_q.get_agent, agent_id) if agent_id else None
        definition = (agent or {}).get("definition") or {}
        if agent is None or agent["account"] != account:
            raise Refused("the agent that wrote it is gone")
        if name not in signing_keys_of(definition) or not publish_granted(definition):
            raise Refused(f"the agent may no longer publish as {name}")
        try:
            await self.hm.publish_document(seed, body.get("markdown"), item["subject"], int(body["ts"]),
                                           check_links=body.get("checkLinks", True) is True,
                                           metadata=body.get("metadata"))
        except ValueError as exc:   # a link gone bad, a document moved meanwhile: the writer's to fix
            raise Refused(str(exc)) from None
