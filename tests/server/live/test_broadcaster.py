"""The Broadcaster (server/live/broadcaster.py) with a fake local sink and a fake cluster relay:
every publication reaches the relay once (when the cluster has set one) and then the local sink
once, in order; without a relay it reaches the local sink alone. No socket, no server: the owner
lookups read a fake storage, counted.
"""
from __future__ import annotations

from seed_agents.server.live.broadcaster import Broadcaster
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import codec
from seed_agents.server.store import sessions as sessions_q


class Log(list):
    """(who, what, args) of every call made to the fakes, in order."""


class Recorder:
    def __init__(self, who: str, log: Log) -> None:
        self._who, self._log = who, log

    def __getattr__(self, name: str):  # noqa: ANN204 - any method the broadcaster calls
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kwargs) -> None:
            self._log.append((self._who, name, args, kwargs))
        return call


class Cache:
    def __init__(self) -> None:
        self.values: dict = {}

    def get(self, key):  # noqa: ANN001, ANN201
        return self.values.get(key)

    def put(self, key, value, size: int) -> None:  # noqa: ANN001
        assert size > 0
        self.values[key] = value


class Db:
    """The two owner reads, counted."""

    def __init__(self) -> None:
        self.reads: list[tuple] = []

    def read(self, fn, *args):  # noqa: ANN001, ANN201
        self.reads.append((fn, *args))
        if fn is sessions_q.get_session:
            return {"id": args[0], "account": "u1"} if args[0] != "missing" else None
        if fn is agents_q.agent_account:
            return "u2" if args[0] != "missing" else None
        raise AssertionError(f"unexpected read {fn}")


def broadcaster(with_relay: bool) -> tuple[Broadcaster, Log, Db]:
    log, db = Log(), Db()
    b = Broadcaster(Recorder("local", log), db,
                    {"session_owner": Cache(), "agent_owner": Cache(), "definitions": Cache()})
    if with_relay:
        b.relay = Recorder("relay", log)
    return b, log, db


EVENT = {"seq": 3, "event": {"type": "message", "role": "user", "content": "hi"}}
SESSION = {"id": "s1", "agentId": "a1", "account": "u1"}
AGENT = {"id": "a1", "account": "u1", "definition": {"name": "x"}}
RUN = {"id": "r1", "agentId": "a1", "account": "u1"}


def publications(b: Broadcaster) -> list[tuple[str, tuple, dict]]:
    """Every publication the Publisher protocol offers, once, and the relay call each makes."""
    b.publish_append("s1", EVENT, b"body")
    b.publish_partial("s1", "p1", {"textDelta": "x"})
    b.publish_session(SESSION, created=True)
    b.publish_agent(AGENT)
    b.publish_run(RUN)
    b.publish_journal(RUN, {"seq": 2, "runId": "r1", "entry": {}})
    b.publish_run_partial(RUN, {"progress": {"fraction": 0.5}})
    b.publish_gone("sessions/s1", {"reason": "session-deleted"})
    b.notify_account("u1", "agent-updated", agent_id="a1")
    b.notify_only("u3", "agent-invites-changed", agent_id="a1")
    return [
        ("append", ("s1", 3, "u1", b"body"), {}),
        ("partial", ("s1", "p1", {"textDelta": "x"}, "u1"), {}),
        ("session", (SESSION, True), {}),
        ("agent", (AGENT, False), {}),
        ("run", (RUN, "u1"), {}),
        ("journal", (RUN, 2, "u1"), {}),
        ("run_partial", (RUN, {"progress": {"fraction": 0.5}}), {}),
        ("gone", ("sessions/s1", {"reason": "session-deleted"}), {}),
        ("notice", ("u1", "agent-updated", "a1", None), {"only": False}),
        ("notice", ("u3", "agent-invites-changed", "a1", None), {"only": True}),
    ]


LOCAL = ["append", "partial", "session", "agent", "run", "journal", "run_partial", "gone", "notify_account",
         "notify_only"]


def test_each_publication_reaches_the_relay_once_then_the_local_sink_once_in_order():
    b, log, _ = broadcaster(with_relay=True)
    relayed = publications(b)
    assert [who for who, *_ in log] == ["relay", "local"] * len(relayed)
    assert [(name, args, kwargs) for who, name, args, kwargs in log if who == "relay"] == relayed
    assert [name for who, name, _a, _k in log if who == "local"] == LOCAL


def test_the_local_sink_gets_what_the_publisher_was_given():
    b, log, _ = broadcaster(with_relay=False)
    publications(b)
    calls = [(name, args, kwargs) for _who, name, args, kwargs in log]
    assert calls[0] == ("append", ("s1", EVENT, b"body", "u1"), {})
    assert calls[2] == ("session", (SESSION,), {"created": True})
    assert calls[3] == ("agent", (AGENT,), {"created": False})
    assert calls[4] == ("run", (RUN, "u1"), {})
    assert calls[8] == ("notify_account", ("u1", "agent-updated"), {"agent_id": "a1", "session_id": None})


def test_without_a_relay_every_publication_stays_on_this_server():
    b, log, _ = broadcaster(with_relay=False)
    publications(b)
    assert {who for who, *_ in log} == {"local"}
    assert [name for _who, name, _a, _k in log] == LOCAL


def test_a_relay_set_later_gets_only_what_is_published_after():
    """The cluster sets the relay once it listens (App.start): nothing before is sent twice."""
    b, log, _ = broadcaster(with_relay=False)
    b.publish_append("s1", EVENT, b"body")
    b.relay = Recorder("relay", log)
    b.publish_append("s1", {**EVENT, "seq": 4}, b"body4")
    assert [(who, name) for who, name, _a, _k in log] == [("local", "append"), ("relay", "append"), ("local", "append")]
    assert log[1][2] == ("s1", 4, "u1", b"body4")


def test_owners_are_read_once_then_cached():
    b, log, db = broadcaster(with_relay=True)
    for seq in (1, 2, 3):
        b.publish_append("s1", {**EVENT, "seq": seq}, b"b")
    b.publish_partial("s1", "p1", {"textDelta": "y"})
    assert db.reads == [(sessions_q.get_session, "s1")]
    run = {"id": "r9", "agentId": "a9"}   # no `account`: the agent's owner is read, then cached
    b.publish_run(run)
    b.publish_run(run)
    assert db.reads[1:] == [(agents_q.agent_account, "a9")]
    assert [args for who, name, args, _k in log if who == "local" and name == "run"] == [(run, "u2")] * 2


def test_a_session_or_agent_without_an_owner_still_publishes():
    b, log, _ = broadcaster(with_relay=True)
    b.publish_append("missing", EVENT, b"b")
    b.publish_run({"id": "r1", "agentId": "missing"})
    assert [(who, name, args[-2] if name == "append" else args[-1]) for who, name, args, _k in log] == [
        ("relay", "append", ""), ("local", "append", b"b"), ("relay", "run", None), ("local", "run", None)]


def test_a_change_is_routed_by_the_kind_of_its_key():
    b, log, _ = broadcaster(with_relay=True)
    b.publish_change("sessions/s1", SESSION)
    b.publish_change("agents/a1", AGENT)
    b.publish_change("runs/r1", RUN)
    b.publish_change("other/x", {"v": 1})   # no other kind is relayed
    assert [(who, name) for who, name, _a, _k in log] == [
        ("relay", "session"), ("local", "session"), ("relay", "agent"), ("local", "agent"),
        ("relay", "run"), ("local", "run"), ("local", "change")]
    assert log[1][3] == {"created": False} and log[-1][2] == ("other/x", {"v": 1})


def test_a_stored_definition_is_decoded_once_per_version_for_relay_and_local_alike():
    b, log, _ = broadcaster(with_relay=True)
    raw = codec.encode({"name": "x", "n": 1})
    b.publish_agent({**AGENT, "definition": raw})
    relayed, delivered = log[0][2][0], log[1][2][0]
    assert relayed["definition"] == {"name": "x", "n": 1} and delivered is relayed
    b.publish_agent({**AGENT, "definition": raw})
    assert log[3][2][0]["definition"] is relayed["definition"]   # the cached decode, not a new one
    b.publish_agent({**AGENT, "definition": codec.encode({"name": "x", "n": 2})})
    assert log[5][2][0]["definition"] == {"name": "x", "n": 2}
