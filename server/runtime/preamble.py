"""The reads behind the model's system prompt (the text itself: protocol/agent/preamble.py): the
agent's memory and active triggers, the identities it may publish as, and in a shared agent its
members with their display names (asked of the HM server, 1 s each, remembered 5 minutes).

Kept per agent in the byte-bounded "preambles" cache (server/cache.py) under a fingerprint of
what it lists, read in one small transaction each turn (counts and latest updates of memory
files, triggers, collaborators and the account's identities, and the agent's own update time):
a change made anywhere, on this server or another on the same database, gives another
fingerprint and the listing is read again. UpdateAgent and DeleteAgent also drop the entry
(handlers/sessions.forget_system_prompt). The time is put in every turn, never cached.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from seed_agents.protocol.agent import preamble as text
from seed_agents.protocol.agent.tool_documents import builtin_document

from ..cache import ByteBudgetCache, text_bytes
from ..store import agent_listing as listing_q

log = logging.getLogger(__name__)

NAME_TTL_MS = 5 * 60_000     # a display name is asked again after this (the reference's)
NAME_MISS_TTL_MS = 30_000    # a failed lookup is retried after this
NAME_TIMEOUT = 1.0           # seconds for one Account lookup


@dataclass(frozen=True, slots=True)
class Listing:
    """What a turn's preamble lists besides the tools, as text."""

    fingerprint: tuple
    memory: str       # the index's memory line
    triggers: tuple[str, ...]
    roster: str       # "" unless shared
    identities: str   # "" without identities
    built_at: int     # ms, for the display names' age

    def bytes(self) -> int:
        return (text_bytes(self.memory) + text_bytes(self.roster) + text_bytes(self.identities)
                + sum(text_bytes(t) for t in self.triggers) + 400)


class Preambles:
    """The system prompt of each turn. `now_ms` is the clock the prompt's time is read from
    (injectable: tests set it)."""

    def __init__(self, runtime, cache: ByteBudgetCache) -> None:  # noqa: ANN001
        self.runtime = runtime
        self.cache = cache
        self.now_ms = runtime.now_ms
        self.names: dict[str, tuple[str, int]] = {}   # account -> (display name, good until); bounded below

    async def system_prompt(self, agent: dict, prompt: str, surface, visitor: bool = False) -> tuple[str, bool]:  # noqa: ANN001
        """(the agent's prompt with the whole preamble, whether the agent is shared: its signed
        human messages then carry <message_sender> blocks). `surface`: the turn's tools. A
        visitor's session (public chat) lists nothing of the owner's: no listing is read."""
        if visitor:
            return text.assemble_visitor(prompt, self.now_ms()), False
        listing = await self.listing(agent)
        index = text.space_index(tools_of(surface), listing.memory, list(listing.triggers))
        return text.assemble(prompt, self.now_ms(), roster=listing.roster, index=index,
                             identities=listing.identities), bool(listing.roster)

    async def listing(self, agent: dict) -> Listing:
        db, now = self.runtime.db, self.now_ms()
        print_ = db.read(listing_q.fingerprint, agent)
        cached = self.cache.get(agent["id"])
        if cached is not None and cached.fingerprint == print_ and not (
                cached.roster and now - cached.built_at > NAME_TTL_MS):
            return cached
        paths, triggers, collaborators, identities = db.read(listing_q.read_listing, agent)
        roster = ""
        if collaborators or agent.get("publicRead"):
            members = [{"accountId": agent["account"], "role": "owner"},
                       *({"accountId": a, "role": r} for a, r in collaborators)]
            await self._name(members, now)
            roster = text.members_roster(members)
        listing = Listing(print_, text.memory_line(paths), tuple(triggers), roster,
                          text.identities_block([{"name": i.get("label") or i["name"], "publicKey": i["accountId"]}
                                                 for i in identities]), now)
        self.cache.put(agent["id"], listing, listing.bytes())
        return listing

    def forget(self, agent_id: str) -> None:
        self.cache.pop(agent_id, None)

    async def _name(self, members: list[dict], now: int) -> None:
        """Each member's displayName from the HM server's Account (untrusted: bounded later)."""
        hm = self.runtime.hm
        if hm is None:
            return

        async def one(member: dict) -> None:
            known = self.names.get(member["accountId"])
            if known is not None and known[1] > now:
                name = known[0]
            else:
                name, ttl = "", NAME_MISS_TTL_MS
                try:
                    async with asyncio.timeout(NAME_TIMEOUT):
                        answer = await hm.account(member["accountId"])
                    raw = (answer.get("metadata") or {}).get("name") if answer.get("type") == "account" else None
                    name, ttl = (raw.strip()[:text.MAX_DISPLAY_NAME] if isinstance(raw, str) else ""), NAME_TTL_MS
                except Exception as exc:   # an HM server down or odd: the roster keeps the ids
                    log.debug("no display name for %s: %s", member["accountId"], exc)
                if len(self.names) >= 10_000:
                    self.names.clear()   # bounded: names are asked again, at most once a turn each
                self.names[member["accountId"]] = (name, now + ttl)
            if name:
                member["displayName"] = name

        await asyncio.gather(*(one(m) for m in members))


def tools_of(surface) -> list[dict]:  # noqa: ANN001
    """The turn's callable tools as the index lists them: builtins offered, then the agent's own."""
    if surface is None:
        return []
    tools = [{"name": n, "summary": builtin_document(n)["summary"], "kind": "builtin"} for n in surface.ctx.callables]
    docs = surface.agent_docs.docs if surface.agent_docs is not None else {}
    tools += [{"name": n, "summary": d.get("summary") or "", "kind": d.get("kind")} for n, d in sorted(docs.items())]
    return tools
