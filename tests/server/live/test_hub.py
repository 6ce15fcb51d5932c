"""The hub (server/live/hub.py) and the routing of CONTRACT section 5 (LocalSink in
server/live/broadcaster.py) with fake subscriber sinks: no socket, no server.

A fake `Sink` is one subscription; sinks sharing a `Socket` are one connection's subscriptions
(what `follows` answers). Each test publishes and checks exactly who got what.
"""
from __future__ import annotations

from types import SimpleNamespace

from seed_agents.server.live.broadcaster import LocalSink
from seed_agents.server.live.frames import Outgoing
from seed_agents.server.live.hub import Hub


class Socket:
    def __init__(self) -> None:
        self.keys: set[str] = set()


class Sink:
    """One subscription on `key`; records what it is handed, in order."""

    def __init__(self, hub: Hub, key: str, socket: Socket | None = None) -> None:
        self.hub, self.key = hub, key
        self.socket = socket or Socket()
        self.got: list[Outgoing] = []
        self.socket.keys.add(key)
        hub.add(key, self)

    def deliver(self, event: Outgoing) -> None:
        self.got.append(event)

    def follows(self, key: str) -> bool:
        return key in self.socket.keys

    def close(self) -> None:
        self.hub.remove(self.key, self)
        self.socket.keys.discard(self.key)

    def seen(self) -> list[tuple[str, str]]:
        return [(e.value["_"], e.key) for e in self.got]


def ev(key: str, seq: int = 0) -> Outgoing:
    return Outgoing(key, {"_": "change", "key": key, "value": {"n": seq}}, seq=seq)


class Grants:
    def __init__(self, audience: dict[str, list[str]] | None = None) -> None:
        self._audience = audience or {}

    def has_guests(self, agent_id: str) -> bool:
        return False

    def audience(self, agent_id: str) -> list[str]:
        return self._audience.get(agent_id, [])

    def deleted(self) -> None:
        pass


def local(hub: Hub, grants: Grants | None = None) -> tuple[LocalSink, list[int]]:
    count = [0]
    metrics = SimpleNamespace(published=SimpleNamespace(inc=lambda: count.__setitem__(0, count[0] + 1)))
    return LocalSink(hub, metrics, grants or Grants()), count


# -- the hub ------------------------------------------------------------------------------------

def test_an_event_reaches_the_subscribers_of_its_keys_and_nobody_else():
    hub = Hub()
    a1, a2 = Sink(hub, "sessions/s1"), Sink(hub, "sessions/s1")
    other = Sink(hub, "sessions/s2")
    assert hub.publish_to(["sessions/s1"], ev("sessions/s1", 1)) == 2
    assert [e.seq for e in a1.got] == [1] and [e.seq for e in a2.got] == [1] and other.got == []
    # A key nobody follows: delivered to nobody, counted as no publication.
    before = hub.published
    assert hub.publish_to(["sessions/s3"], ev("sessions/s3")) == 0
    assert hub.published == before and a1.got[1:] == [] and other.got == []


def test_events_arrive_in_publication_order():
    hub = Hub()
    sink = Sink(hub, "sessions/s1")
    for seq in range(1, 6):
        hub.publish_to(["sessions/s1"], ev("sessions/s1", seq))
    assert [e.seq for e in sink.got] == [1, 2, 3, 4, 5]


def test_after_unsubscribing_nothing_more_is_delivered():
    hub = Hub()
    gone, stays = Sink(hub, "agents/a1"), Sink(hub, "agents/a1")
    hub.publish_to(["agents/a1"], ev("agents/a1", 1))
    gone.close()
    assert hub.publish_to(["agents/a1"], ev("agents/a1", 2)) == 1
    assert [e.seq for e in gone.got] == [1] and [e.seq for e in stays.got] == [1, 2]
    stays.close()
    assert not hub.has_subscribers("agents/a1")   # the key is forgotten with its last subscriber
    assert hub.publish_to(["agents/a1"], ev("agents/a1", 3)) == 0
    hub.remove("agents/a1", stays)   # removing twice, or an unknown key, is harmless
    hub.remove("agents/none", stays)


def test_a_sink_that_unsubscribes_while_being_delivered_to_does_not_stop_the_others():
    """A slow consumer is cut off from inside its own `deliver` (the hub's set changes during
    the fan-out): every other subscriber of the key still gets the event, and the one cut off
    gets nothing after it."""
    hub = Hub()

    class CutOff(Sink):
        def deliver(self, event: Outgoing) -> None:
            super().deliver(event)
            self.close()

    sinks = [Sink(hub, "sessions/s1") for _ in range(3)] + [CutOff(hub, "sessions/s1")]
    sinks += [Sink(hub, "sessions/s1") for _ in range(3)]
    assert hub.publish_to(["sessions/s1"], ev("sessions/s1", 1)) == 7
    assert all([e.seq for e in s.got] == [1] for s in sinks)
    hub.publish_to(["sessions/s1"], ev("sessions/s1", 2))
    assert [e.seq for e in sinks[3].got] == [1]
    assert all([e.seq for e in s.got] == [1, 2] for i, s in enumerate(sinks) if i != 3)


def test_a_socket_following_several_keys_of_an_event_gets_it_once_through_the_most_specific():
    hub = Hub()
    both = Socket()
    by_session = Sink(hub, "sessions/s1", both)
    by_account = Sink(hub, "account/u1", both)
    only_account = Sink(hub, "account/u1")
    assert hub.publish_to(["sessions/s1", "account/u1"], ev("sessions/s1", 1)) == 2
    assert len(by_session.got) == 1 and by_account.got == [] and len(only_account.got) == 1
    # Once the socket leaves the session, its account subscription carries the event.
    by_session.close()
    hub.publish_to(["sessions/s1", "account/u1"], ev("sessions/s1", 2))
    assert [e.seq for e in by_account.got] == [2] and [e.seq for e in by_session.got] == [1]


def test_dropping_a_key_forgets_all_its_subscribers():
    hub = Hub()
    a, b = Sink(hub, "sessions/s1"), Sink(hub, "sessions/s1")
    keep = Sink(hub, "sessions/s2")
    hub.drop("sessions/s1")
    assert not hub.has_subscribers("sessions/s1") and hub.has_subscribers("sessions/s2")
    assert hub.publish_to(["sessions/s1"], ev("sessions/s1")) == 0 and a.got == b.got == []
    assert hub.publish_to(["sessions/s2"], ev("sessions/s2")) == 1 and len(keep.got) == 1


# -- the routing of CONTRACT section 5 (LocalSink over a real hub) ------------------------------

def subscribers(hub: Hub) -> dict[str, Sink]:
    keys = ["sessions/s1", "sessions/s2", "agents/a1", "agents/a2", "account/u1", "account/u2",
            "runs/r1", "runs/r2", "runs/c1"]
    return {key: Sink(hub, key) for key in keys}


def reached(subs: dict[str, Sink]) -> dict[str, list[tuple[str, str]]]:
    """key subscribed -> (event kind, event key) of each event it got; keys that got nothing left out."""
    return {key: sink.seen() for key, sink in subs.items() if sink.got}


def test_an_append_reaches_its_session_and_the_owners_account_keyed_by_the_session():
    hub = Hub()
    subs = subscribers(hub)
    sink, published = local(hub)
    event = {"seq": 4, "event": {"type": "message", "role": "user", "content": "hi"}}
    sink.append("s1", event, b"body", "u1")
    assert reached(subs) == {"sessions/s1": [("append", "sessions/s1")], "account/u1": [("append", "sessions/s1")]}
    got = subs["sessions/s1"].got[0]
    assert got.seq == 4 and got.body == b"body" and got.value["event"] == event and published == [1]
    assert subs["account/u1"].got[0] is got   # one event, built once, shared


def test_a_partial_reaches_its_session_and_account_only():
    hub = Hub()
    subs = subscribers(hub)
    local(hub)[0].partial("s1", "p1", {"textDelta": "x"}, "u1")
    assert reached(subs) == {"sessions/s1": [("appendPartial", "sessions/s1")],
                             "account/u1": [("appendPartial", "sessions/s1")]}
    assert subs["sessions/s1"].got[0].value["patch"] == {"textDelta": "x"}


def test_a_session_change_reaches_session_agent_and_account_then_the_update_notice():
    hub = Hub()
    subs = subscribers(hub)
    session = {"id": "s1", "agentId": "a1", "account": "u1", "title": "t"}
    local(hub)[0].session(session)
    notice = ("change", "account/u1")
    assert reached(subs) == {"sessions/s1": [("change", "sessions/s1")],
                             "agents/a1": [("change", "sessions/s1"), notice],
                             "account/u1": [("change", "sessions/s1"), notice]}
    assert subs["account/u1"].got[1].value["value"] == {"reason": "session-updated", "agentId": "a1",
                                                         "sessionId": "s1"}
    # Its creation is the change alone (no session-updated notice).
    hub2 = Hub()
    subs2 = subscribers(hub2)
    local(hub2)[0].session(session, created=True)
    assert reached(subs2) == {"sessions/s1": [("change", "sessions/s1")], "agents/a1": [("change", "sessions/s1")],
                              "account/u1": [("change", "sessions/s1")]}


def test_a_visitors_session_change_is_not_shown_to_the_agents_readers():
    hub = Hub()
    subs = subscribers(hub)
    local(hub)[0].session({"id": "s1", "agentId": "a1", "account": "u1", "visitorId": "v1"}, created=True)
    assert reached(subs) == {"sessions/s1": [("change", "sessions/s1")], "account/u1": [("change", "sessions/s1")]}


def test_an_agent_change_reaches_the_agent_and_its_account():
    hub = Hub()
    subs = subscribers(hub)
    local(hub)[0].agent({"id": "a1", "account": "u1", "definition": {}}, created=True)
    assert reached(subs) == {"agents/a1": [("change", "agents/a1")], "account/u1": [("change", "agents/a1")]}


def test_a_run_change_reaches_its_tree_itself_and_its_account():
    hub = Hub()
    subs = subscribers(hub)
    local(hub)[0].run({"id": "c1", "rootRunId": "r1"}, "u1")
    assert reached(subs) == {"runs/r1": [("change", "runs/r1")], "runs/c1": [("change", "runs/r1")],
                             "account/u1": [("change", "runs/r1")]}
    hub2 = Hub()
    subs2 = subscribers(hub2)
    local(hub2)[0].run({"id": "r2"}, None)   # a root run, no owner known: its own key alone
    assert reached(subs2) == {"runs/r2": [("change", "runs/r2")]}


def test_an_account_notice_reaches_the_account_the_agent_and_subscribed_collaborators():
    hub = Hub()
    subs = subscribers(hub)
    sink, _ = local(hub, Grants({"a1": ["u1", "u2", "u3"]}))   # u3 follows nothing: built for nobody
    sink.notify_account("u1", "agent-updated", agent_id="a1")
    assert reached(subs) == {"account/u1": [("change", "account/u1")], "agents/a1": [("change", "account/u1")],
                             "account/u2": [("change", "account/u2")]}
    assert subs["account/u2"].got[0].value["value"] == {"reason": "agent-updated", "agentId": "a1"}
    # A notice naming no agent stays on the account's own key.
    hub2 = Hub()
    subs2 = subscribers(hub2)
    local(hub2)[0].notify_account("u1", "model-provider-changed")
    assert reached(subs2) == {"account/u1": [("change", "account/u1")]}


def test_a_gone_key_gets_its_last_event_then_nothing():
    hub = Hub()
    subs = subscribers(hub)
    sink, _ = local(hub)
    notice = {"reason": "session-deleted", "agentId": "a1", "sessionId": "s1"}
    sink.gone("sessions/s1", notice)
    assert reached(subs) == {"sessions/s1": [("change", "sessions/s1")]}
    assert subs["sessions/s1"].got[0].value["value"] == notice
    sink.append("s1", {"seq": 9, "event": {}}, b"b", "u1")
    assert subs["sessions/s1"].seen() == [("change", "sessions/s1")]   # nothing after the notice
    assert subs["account/u1"].seen() == [("append", "sessions/s1")]   # the account still hears it
