"""Live access: the subscriptions that reach an agent through a grant or public read, so a
change of access reaches them at once (CONTRACT section 5: "a subscriber that loses access ...
stops receiving at once").

- `track` / `untrack` keep an index (account, agent) -> that account's subscriptions of that
  agent, for every subscriber that is not the owner. A revocation costs the revoked account's
  subscriptions of the agent (public read off: the agent's guest subscriptions), never a walk
  of the hub, which stays indexed by key.
- Changes of access to one agent run one at a time (`changing`), and a guest's Subscribe waits
  until none is running (`settled`), then checks and registers with no await in between.
- `cut` ends subscriptions *before* the write that removes access is submitted (and `refresh`
  sweeps again after its commit): from the moment of the commit on, not one event of the agent
  reaches them. Each ends with `{_: "error", key, message, status: 404}`.
- `audience` caches each agent's accepted collaborators, for the account notices they receive.
- Across servers (server/live/cluster.py): every change of access ends in `forget_audience` after its
  commit, which also tells the other servers; each then drops its cached audience and re-checks
  its own guest subscriptions of the agent (`changed_elsewhere`), so a revocation on one server
  ends the subscriptions on all of them as soon as its notice arrives.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from seed_agents.protocol.wire import events

from ..store.roles import OWNER, READER, VISITOR, agent_role, key_role
from ..store import collaborators as collab_q
from .frames import Outgoing

_AUDIENCE_MAX = 100_000


class AccessRelay(Protocol):
    """What a change of access tells the other servers (server/live/cluster.Cluster)."""

    def access(self, agent_id: str) -> None: ...


class Grants:
    def __init__(self, db) -> None:  # noqa: ANN001 (a server/database/port.Storage)
        self.db = db
        # The cluster (server/live/cluster.py) when the database is shared: told of each change
        # of access after its commit. Set by the composition root (server/app.py) once it listens.
        self.relay: AccessRelay | None = None
        self._subs: dict[tuple[str, str], set] = {}       # (account, agent) -> guest subscriptions
        self._accounts: dict[str, set[str]] = {}          # agent -> accounts in _subs
        self._locks: dict[str, list] = {}              # agent -> [lock, users]
        self._audience: dict[str, tuple[str, ...]] = {}   # agent -> accepted collaborators
        self._leaving: dict[str, set[str]] = {}           # agent -> accounts losing access now
        # Moves when a change of access here starts or ends, when one made elsewhere arrives,
        # and when what a key names is deleted: a check read off the loop (Subscribe, GetSession)
        # compares it across its await, and reads again on the loop when it moved (`moved_since`).
        self.epoch = 0
        # The Subscribe check just made (account, key, role, agent id), for `track`: from that
        # handler's last await to the hub's registration nothing awaits, so it still holds.
        self._checked: tuple | None = None

    # -- the index -------------------------------------------------------------------------
    def checked(self, account: str, key: str, role: str | None, agent_id: str | None) -> None:
        """Subscribe's check, made with no await before the registration that follows."""
        self._checked = (account, key, role, agent_id)

    def track(self, sub) -> None:
        """A subscription was just registered in the hub: note its role (AgentInfo in live
        events is the subscriber's view) and index it when it is a guest's."""
        kind, _, ident = sub.key.partition("/")
        if kind == "account":
            return
        account = sub.conn.account_id
        checked, self._checked = self._checked, None
        if checked is not None and checked[0] == account and checked[1] == sub.key:
            role, agent_id = checked[2], checked[3]   # the handler's, still true (no await since)
        else:
            role, agent_id = self.db.read(key_role, account, kind, ident)
        if role == OWNER:   # the class default: nothing stored on the owner's subscriptions
            return
        sub.role = role or READER
        if agent_id is not None:
            sub.agent_id = agent_id
            self._subs.setdefault((account, agent_id), set()).add(sub)
            self._accounts.setdefault(agent_id, set()).add(account)
        if role is None:
            # Not expected (Subscribe checked, with no await since). Ended on the next loop
            # turn, once the connection has finished starting it (its replay task included).
            asyncio.get_running_loop().call_soon(self.cut, [sub], f"{sub.key} not found")

    def untrack(self, sub) -> None:
        agent_id = getattr(sub, "agent_id", None)
        if agent_id is None:
            return
        account = sub.conn.account_id
        subs = self._subs.get((account, agent_id))
        if subs is None:
            return
        subs.discard(sub)
        if not subs:
            del self._subs[(account, agent_id)]
            accounts = self._accounts.get(agent_id)
            if accounts is not None:
                accounts.discard(account)
                if not accounts:
                    del self._accounts[agent_id]

    def has_guests(self, agent_id: str) -> bool:
        return agent_id in self._accounts

    def guest_accounts(self, agent_id: str) -> list[str]:
        return list(self._accounts.get(agent_id, ()))

    def subscriptions(self, account: str, agent_id: str) -> list:
        return list(self._subs.get((account, agent_id), ()))

    # -- serializing changes of access -----------------------------------------------------
    @contextlib.asynccontextmanager
    async def changing(self, agent_id: str):
        """Changes of access to one agent, one at a time."""
        entry = self._locks.get(agent_id)
        if entry is None:
            entry = self._locks[agent_id] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                self.epoch += 1   # from before its first step (a cut, a write) ...
                try:
                    yield
                finally:
                    self.epoch += 1   # ... to after its commit and refresh
        finally:
            entry[1] -= 1
            if entry[1] == 0 and self._locks.get(agent_id) is entry:
                del self._locks[agent_id]

    def moved_since(self, epoch: int, agent_id: str | None) -> bool:
        """Could a change of access (or a deletion) have landed since `epoch` was read, or be
        running on the agent now? Then a check read across an await is stale: read it again."""
        return self.epoch != epoch or self.changing_now(agent_id)

    def deleted(self) -> None:
        """What a key names was deleted (here after its commit, or elsewhere): a check read off the
        loop before it must not stand."""
        self.epoch += 1

    def changing_now(self, agent_id: str | None) -> bool:
        entry = self._locks.get(agent_id)
        return entry is not None and entry[0].locked()

    async def settled(self, agent_id: str) -> None:
        """Wait until no change of access to the agent is running."""
        while True:
            entry = self._locks.get(agent_id)
            if entry is None or not entry[0].locked():
                return
            async with entry[0]:
                pass

    # -- ending and updating subscriptions ---------------------------------------------------
    def cut(self, subs, why: str) -> None:
        """End subscriptions now: an error event naming the key, then nothing more."""
        for sub in subs:
            conn = sub.conn
            note = Outgoing(sub.key, {**events.error_event(f"{why}: subscription {sub.key} ended", 404),
                                      "key": sub.key})
            conn.send_event(note, bounded=False, track=False)
            conn.streams.drop(sub.key, sub)
            self.untrack(sub)   # also when the connection had already let it go

    def cut_account(self, account: str, agent_id: str, why: str) -> None:
        self.cut(self.subscriptions(account, agent_id), why)

    def cut_agent(self, agent_id: str, why: str) -> None:
        for account in self.guest_accounts(agent_id):
            self.cut_account(account, agent_id, why)

    def refresh(self, agent_id: str, accounts, why: str) -> None:
        """After a commit: each account's role on the agent read again; its subscriptions take
        the new role, or end when it has none."""
        for account in accounts:
            subs = self.subscriptions(account, agent_id)
            if not subs:
                continue
            role = self.db.read(agent_role, account, agent_id)
            if role is None:
                self.cut(subs, why)
                continue
            for sub in subs:
                if VISITOR in (role, sub.role) and not sub.key.startswith("agents/"):
                    # a visitor's own session or run (public chat): read again by its key
                    sub.role = self.db.read(key_role, account, *sub.key.split("/", 1))[0]
                    if sub.role is None:
                        self.cut([sub], why)
                else:
                    sub.role = role

    # -- who hears about an agent ------------------------------------------------------------
    def audience(self, agent_id: str) -> tuple[str, ...]:
        """The agent's accepted collaborators (cached; every change of them goes through
        `forget_audience`), less those whose access is being removed right now."""
        accounts = self._audience_of(agent_id)
        leaving = self._leaving.get(agent_id)
        if leaving:
            accounts = tuple(a for a in accounts if a not in leaving and "*" not in leaving)
        return accounts

    @contextlib.contextmanager
    def leaving(self, agent_id: str, accounts):
        """While access is being removed (from before the write until the cache is fresh
        again), the leaving accounts (`"*"`: all) get no more notices of the agent."""
        entry = self._leaving.setdefault(agent_id, set())
        added = set(accounts) - entry
        entry |= added
        try:
            yield
        finally:
            self.forget_audience(agent_id)
            entry -= added
            if not entry and self._leaving.get(agent_id) is entry:
                del self._leaving[agent_id]

    def _audience_of(self, agent_id: str) -> tuple[str, ...]:
        accounts = self._audience.get(agent_id)
        if accounts is None:
            members = self.db.read(collab_q.members, agent_id)
            accounts = tuple(sorted(a for a, (_role, status) in members.items() if status == "accepted"))
            if len(self._audience) >= _AUDIENCE_MAX:
                self._audience.clear()
            self._audience[agent_id] = accounts
        return accounts

    def forget_audience(self, agent_id: str) -> None:
        """After a change of access commits: the cached audience is stale, here and elsewhere."""
        self._audience.pop(agent_id, None)
        if self.relay is not None:
            self.relay.access(agent_id)

    # -- changes made by another server --------------------------------------------------------
    def changed_elsewhere(self, agent_id: str) -> None:
        """Access to the agent changed on another server (committed): each local guest's role is
        read again; a subscription that lost access ends now."""
        self.epoch += 1
        self._audience.pop(agent_id, None)
        self.refresh(agent_id, self.guest_accounts(agent_id), f"access to agent {agent_id} was removed")

    def resync(self) -> None:
        """Notices of changes elsewhere may have been lost: every cached audience is dropped and
        every guest subscription re-checked."""
        self.epoch += 1
        self._audience.clear()
        for agent_id in list(self._accounts):
            self.refresh(agent_id, self.guest_accounts(agent_id), f"access to agent {agent_id} was removed")
