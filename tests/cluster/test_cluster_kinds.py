"""The cluster's message kinds are a table (server/live/cluster.py KINDS): every kind a server
sends has a row that handles it, and a notice is dispatched by that row alone. Unit tests with a
fake local sink: no database, no bus."""
from __future__ import annotations

import ast
import logging
from types import SimpleNamespace

from seed_agents.server.live import cluster as cluster_module
from seed_agents.server.live.cluster import KINDS, Cluster

from tests.imports import ROOT


def _sent_kinds() -> set[str]:
    """The letters the sending methods put on the wire: `self._put(["x", ...])`."""
    tree = ast.parse((ROOT / "server" / "live" / "cluster.py").read_text())
    letters = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_put"
                and node.args and isinstance(node.args[0], ast.List) and node.args[0].elts
                and isinstance(node.args[0].elts[0], ast.Constant)):
            letters.add(node.args[0].elts[0].value)
    return letters


def test_every_kind_sent_has_a_row_and_every_row_is_sent():
    sent = _sent_kinds()
    assert len(sent) >= 10   # the reader above sees the senders
    assert sent == set(KINDS)


class FakeSink:
    def __init__(self) -> None:
        self.calls: list = []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))


def _cluster() -> tuple[Cluster, FakeSink, list]:
    sink = FakeSink()
    changed: list = []
    hub = SimpleNamespace(has_subscribers=lambda key: key == "account/acc")
    app = SimpleNamespace(broadcaster=SimpleNamespace(local=sink), hub=hub, runtime=None,
                          triggers=SimpleNamespace(changed=lambda: changed.append(True)),
                          grants=SimpleNamespace(audience=lambda agent_id: ()))
    return Cluster(app, bus=None), sink, changed


def test_a_notice_is_handled_by_its_row():
    cluster, sink, changed = _cluster()
    cluster.handle(["n", "acc", "trigger-updated", "ag", None, 0])
    assert sink.calls == [("notify_account", ("acc", "trigger-updated"), {"agent_id": "ag", "session_id": None})]
    assert changed == [True]   # a trigger changed elsewhere: the local timer looks again
    cluster.handle(["p", "s1", "run-1", {"textDelta": "hi"}, "acc"])   # the owner's account follows
    assert sink.calls[-1] == ("partial", ("s1", "run-1", {"textDelta": "hi"}, "acc"), {})


def test_an_unknown_kind_is_logged_and_ignored(caplog):
    cluster, sink, _ = _cluster()
    with caplog.at_level(logging.WARNING, logger=cluster_module.log.name):
        cluster.handle(["?", "whatever"])
        cluster.handle([])
    assert sink.calls == []
    assert sum("unknown kind" in r.getMessage() for r in caplog.records) == 2


def test_an_append_carries_its_small_body_and_is_delivered_without_a_read():
    """Kind "e": the stored body in the notice; the receiving server reads nothing (its fake app
    has no database) and delivers the same bytes. A body too large for a notice goes as "a"."""
    from seed_agents.protocol.wire import dagcbor

    sender, _, _ = _cluster()
    sent: list = []
    sender._put = lambda entry: sent.append(entry) or True
    body = dagcbor.encode({"seq": 7, "event": {"role": "user", "content": "hi"}})
    sender.append("s1", 7, "acc", body)
    sender.append("s1", 8, "acc", b"x" * (cluster_module.APPEND_BODY_BYTES + 1))
    assert [e[0] for e in sent] == ["e", "a"] and sent[1] == ["a", "s1", 8, "acc"]
    receiver, sink, _ = _cluster()
    receiver.handle(sent[0])
    assert sink.calls == [("append", ("s1", {"seq": 7, "event": {"role": "user", "content": "hi"}}, body, "acc"), {})]
    receiver.handle(["e", "s1", 7, "other", sent[0][4]])   # nobody here follows that session or account
    assert len(sink.calls) == 1
