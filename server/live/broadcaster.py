"""Publishing: the routing of CONTRACT section 5, built once and handed to whoever publishes.

Each event is built (and later encoded) once, then handed to the subscribers of every key it is
routed to; an event keeps its own key (`sessions/<id>` also when an `agents/` or `account/`
subscriber receives it). The hub indexes subscribers by key, so publishing costs only the
subscribers of those keys.

Two halves, so a publication crosses servers once:
- `LocalSink` publishes on this server alone. The cluster relay (server/live/cluster.py) calls it
  for another server's publication.
- `Broadcaster` is what handlers, the runtime and the tools call (it is a
  server/publisher.Publisher): it finds the owner a publication is routed to, tells the
  optional relay (several servers on one database), then the local sink. A SQLite server has no
  relay, and publishing pays one `is None` test.
"""
from __future__ import annotations

from typing import Protocol

from seed_agents.protocol.wire import events

from ..store import agents as agents_q
from ..store import codec
from ..store import sessions as sessions_q
from .frames import Outgoing


class Relay(Protocol):
    """What the cluster carries to the other servers (server/live/cluster.py is the one)."""

    def append(self, session_id: str, seq: int, owner: str, body: bytes) -> None: ...
    def partial(self, session_id: str, partial_id: str, patch: dict, owner: str) -> None: ...
    def run_partial(self, run: dict, patch: dict) -> None: ...
    def session(self, session: dict, created: bool) -> None: ...
    def agent(self, agent: dict, created: bool) -> None: ...
    def run(self, run: dict, owner: str | None) -> None: ...
    def journal(self, run: dict, seq: int, owner: str | None) -> None: ...
    def gone(self, key: str, notice: dict) -> None: ...
    def notice(self, account_id: str, reason: str, agent_id: str | None, session_id: str | None,
               only: bool) -> None: ...


def _text_bytes(value: str) -> int:   # (as server/cache.text_bytes counts)
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def _notice(reason: str, agent_id: str | None, session_id: str | None) -> dict:
    value: dict = {"reason": reason}
    if agent_id is not None:
        value["agentId"] = agent_id
    if session_id is not None:
        value["sessionId"] = session_id
    return value


class LocalSink:
    """Publishing to this server's subscribers alone (the hub), never to other servers."""

    def __init__(self, hub, metrics, grants) -> None:
        self.hub = hub
        self.metrics = metrics
        self.grants = grants   # guests see their own AgentInfo; collaborators hear notices

    def _send(self, event: Outgoing, *keys: str) -> None:
        self.metrics.published.inc()
        self.hub.publish_to(keys, event)

    def append(self, session_id: str, event: dict, body: bytes, owner: str) -> None:
        key = "sessions/" + session_id
        self._send(Outgoing(key, events.append(key, event), seq=event["seq"], body=body),
                   key, "account/" + owner)

    def run_partial(self, run: dict, patch: dict) -> None:
        root = run.get("rootRunId") or run["id"]
        key = "runs/" + root
        keys = [key] if root == run["id"] else [key, "runs/" + run["id"]]
        self._send(Outgoing(key, {"_": "appendPartial", "key": key, "runId": run["id"], "patch": patch}), *keys)

    def partial(self, session_id: str, partial_id: str, patch: dict, owner: str) -> None:
        key = "sessions/" + session_id
        self._send(Outgoing(key, events.append_partial(key, partial_id, patch)), key, "account/" + owner)

    def change(self, key: str, value: dict) -> None:
        self._send(Outgoing(key, events.change(key, value)), key)

    def session(self, session: dict, *, created: bool = False) -> None:
        key = "sessions/" + session["id"]
        # A visitor's session (public chat) is its visitor's and the owner's alone: not shown to
        # the agent's other readers.
        agent_key = () if "visitorId" in session else ("agents/" + session["agentId"],)
        self._send(Outgoing(key, events.change(key, session)), key, *agent_key, "account/" + session["account"])
        if not created:
            self.notify_account(session["account"], "session-updated", agent_id=session["agentId"],
                                session_id=session["id"])

    def agent(self, agent: dict, *, created: bool = False) -> None:
        key = "agents/" + agent["id"]
        event = Outgoing(key, events.change(key, agent))
        if self.grants.has_guests(agent["id"]):
            event.variants = {role: Outgoing(key, events.change(key, agents_q.as_seen_by(agent, role)))
                              for role in ("writer", "reader")}
        self._send(event, key, "account/" + agent["account"])
        if not created:
            self.notify_account(agent["account"], "agent-updated", agent_id=agent["id"])

    def run(self, run: dict, owner: str | None) -> None:
        run_id = run["id"]
        root = run.get("rootRunId") or run_id
        key = "runs/" + root
        keys = [key] if root == run_id else [key, "runs/" + run_id]
        if owner is not None:
            keys.append("account/" + owner)
        self._send(Outgoing(key, events.change(key, run)), *keys)

    def journal(self, run: dict, entry: dict) -> None:
        root = run.get("rootRunId") or run["id"]
        key = "runs/" + root
        keys = [key] if root == run["id"] else [key, "runs/" + run["id"]]
        self._send(Outgoing(key, events.journal_append(key, entry)), *keys)

    def gone(self, key: str, notice: dict) -> None:
        self.grants.deleted()   # a Subscribe or GetSession check read before it reads again
        self._send(Outgoing(key, events.change(key, notice)), key)
        self.hub.drop(key)

    def notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                       session_id: str | None = None) -> None:
        key = "account/" + account_id
        event = Outgoing(key, events.change(key, _notice(reason, agent_id, session_id)))
        if agent_id is None:
            self._send(event, key)
            return
        self._send(event, key, "agents/" + agent_id)
        for collaborator in self.grants.audience(agent_id):
            if collaborator != account_id:
                self.notify_only(collaborator, reason, agent_id=agent_id, session_id=session_id)

    def notify_only(self, account_id: str, reason: str, *, agent_id: str | None = None,
                    session_id: str | None = None) -> None:
        key = "account/" + account_id
        if self.hub.has_subscribers(key):   # built only for someone
            self._send(Outgoing(key, events.change(key, _notice(reason, agent_id, session_id))), key)


class Broadcaster:
    """Publishing for everyone above live/: this server's subscribers, and the other servers'
    through the relay when the database is shared. Publications happen after their commit."""

    def __init__(self, local: LocalSink, db, caches: dict) -> None:
        self.local = local
        self.relay: Relay | None = None   # set once the cluster listens (App.start)
        self._db = db
        # Owners never change, so they are cached (bounded in bytes; a miss is one primary-key
        # read); decoded definitions are kept per agent and version.
        self._session_owners = caches["session_owner"]
        self._agent_owners = caches["agent_owner"]
        self._definitions = caches["definitions"]

    def publish_append(self, session_id: str, event: dict, body: bytes) -> None:
        """A durable event: to its session and to the account that owns the session."""
        owner = self._session_owner(session_id)
        if self.relay is not None:
            self.relay.append(session_id, event["seq"], owner, body)
        self.local.append(session_id, event, body, owner)

    def publish_partial(self, session_id: str, partial_id: str, patch: dict) -> None:
        owner = self._session_owner(session_id)
        if self.relay is not None:
            self.relay.partial(session_id, partial_id, patch, owner)
        self.local.partial(session_id, partial_id, patch, owner)

    def publish_change(self, key: str, value: dict) -> None:
        """The new value of what `key` names, routed by its kind (see publish_session,
        publish_agent, publish_run); an update, never a creation."""
        kind = key.partition("/")[0]
        if kind == "sessions":
            self.publish_session(value)
        elif kind == "agents":
            self.publish_agent(value)
        elif kind == "runs":
            self.publish_run(value)
        else:   # no other kind is published today; such a change stays on this server
            self.local.change(key, value)

    def publish_session(self, session: dict, *, created: bool = False) -> None:
        """SessionInfo: to the session, its agent and its account; every change after the
        creation is also announced as `session-updated`."""
        if self.relay is not None:
            self.relay.session(session, created)
        self.local.session(session, created=created)

    def publish_agent(self, agent: dict, *, created: bool = False) -> None:
        """AgentInfo: to the agent and its account; every change after the creation (status,
        definition, activity) is also announced as `agent-updated`. `accessRole` is each
        subscriber's own: guests of the agent get the writer's or reader's copy (built once)."""
        agent = self.agent_decoded(agent)
        if self.relay is not None:
            self.relay.agent(agent, created)
        self.local.agent(agent, created=created)

    def publish_run(self, run: dict) -> None:
        """RunInfo: as a `change` on `runs/<rootRunId>` (the key a client follows a tree by;
        the value's `id` says which run changed), to the subscribers of the root, of the run
        itself when it is not the root, and of its account."""
        owner = run.get("account") or self._agent_owner(run["agentId"])
        if self.relay is not None:
            self.relay.run(run, owner)
        self.local.run(run, owner)

    def publish_journal(self, run: dict, entry: dict) -> None:
        """A run journal entry (RunJournalEntryInfo of `run`): to `runs/<rootRunId>`, the key a
        tree is followed by, and to the run's own key when it is not the root."""
        if self.relay is not None:
            self.relay.journal(run, entry["seq"], run.get("account") or self._agent_owner(run["agentId"]))
        self.local.journal(run, entry)

    def publish_run_partial(self, run: dict, patch: dict) -> None:
        """A workflow's live progress: `appendPartial` {runId, patch} on `runs/<rootRunId>` (and
        the run's own key), never stored; relayed like a reply's patch, so a subscriber on another
        server of a cluster sees it too (the run's plan and journal stay its durable state)."""
        if self.relay is not None:
            self.relay.run_partial(run, patch)
        self.local.run_partial(run, patch)

    def publish_gone(self, key: str, notice: dict) -> None:
        """The last event of a deleted session or agent: `change` with the deletion notice
        (`{reason, agentId, sessionId?}`) to that key's subscribers, who then receive nothing
        more (the hub forgets the key)."""
        if self.relay is not None:
            self.relay.gone(key, notice)
        self.local.gone(key, notice)

    def notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                       session_id: str | None = None) -> None:
        """An account notice: to the account, and to the agent it names; a notice naming a
        shared agent also reaches each accepted collaborator's `account/<id>`, keyed by it."""
        if self.relay is not None:
            self.relay.notice(account_id, reason, agent_id, session_id, only=False)
        self.local.notify_account(account_id, reason, agent_id=agent_id, session_id=session_id)

    def notify_only(self, account_id: str, reason: str, *, agent_id: str | None = None,
                    session_id: str | None = None) -> None:
        """An account notice to that account's own key alone (an invitee, a removed
        collaborator, each collaborator of a shared agent)."""
        if self.relay is not None:
            self.relay.notice(account_id, reason, agent_id, session_id, only=True)
        self.local.notify_only(account_id, reason, agent_id=agent_id, session_id=session_id)

    def agent_decoded(self, agent: dict) -> dict:
        """The AgentInfo with its definition decoded, when the writer left it as stored bytes
        (store/agents.agent_info): decoded once per agent and version, then reused."""
        raw = agent["definition"]
        if type(raw) is not bytes:
            return agent
        known = self._definitions.get(agent["id"])
        if known is None or known[0] != raw:
            known = (raw, codec.decode(raw))
            self._definitions.put(agent["id"], known, 4 * len(raw) + 256)
        return {**agent, "definition": known[1]}

    def _session_owner(self, session_id: str) -> str:
        owner = self._session_owners.get(session_id)
        if owner is None:
            session = self._db.read(sessions_q.get_session, session_id)
            owner = session["account"] if session is not None else ""
            self._session_owners.put(session_id, owner, _text_bytes(session_id) + len(owner))
        return owner

    def _agent_owner(self, agent_id: str) -> str | None:
        owner = self._agent_owners.get(agent_id)
        if owner is None:
            owner = self._db.read(agents_q.agent_account, agent_id)
            if owner is None:
                return None
            self._agent_owners.put(agent_id, owner, _text_bytes(agent_id) + len(owner))
        return owner
