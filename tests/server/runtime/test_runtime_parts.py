"""The runtime is its own part: it sees publishing only as a Publisher, and the server's
Broadcaster (server/live/broadcaster.py) is one."""
from __future__ import annotations

import inspect

from seed_agents.server.live.broadcaster import Broadcaster
from seed_agents.server.publisher import Publisher

from tests.imports import ROOT, imports_of


def test_the_broadcaster_is_a_publisher():
    """Every method the runtime may call exists on the broadcaster with the same parameters (so a
    rename on either side fails here, not in the middle of a turn)."""
    methods = [n for n, v in vars(Publisher).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert {"publish_append", "publish_partial", "publish_run", "notify_account"} <= set(methods)
    for name in methods:
        wanted = list(inspect.signature(getattr(Publisher, name)).parameters)
        have = list(inspect.signature(getattr(Broadcaster, name)).parameters)
        assert have[:len(wanted)] == wanted, (name, have, wanted)


def test_the_runtime_never_imports_the_app():
    for path in (ROOT / "server" / "runtime").glob("*.py"):
        imported = imports_of(path, everywhere=True)
        assert not [m for m in imported if m == "server.app" or m.startswith("server.handlers")], (
            path.name, sorted(imported))


def test_each_scheduling_strategy_is_a_run_queue():
    """Local and leased scheduling (server/runtime/scheduling.py) each have every `RunQueue`
    method with its parameters and its sync or async kind, so the turn can call either the same
    way. Checked without PostgreSQL: the leased strategy drifting from the protocol fails here
    even where the cluster tests are skipped."""
    from seed_agents.server.runtime.leased_queue import LeasedQueue
    from seed_agents.server.runtime.local_queue import LocalQueue
    from seed_agents.server.runtime.scheduling import RunQueue

    methods = [n for n, v in vars(RunQueue).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert {"start", "stop", "kick", "holds", "still_ours", "release"} <= set(methods)
    for strategy in (LocalQueue, LeasedQueue):
        for name in methods:
            wanted, have = getattr(RunQueue, name), getattr(strategy, name, None)
            assert inspect.isfunction(have), (strategy.__name__, name)
            assert inspect.iscoroutinefunction(have) == inspect.iscoroutinefunction(wanted), (strategy.__name__, name)
            assert list(inspect.signature(have).parameters) == list(inspect.signature(wanted).parameters), (
                strategy.__name__, name)


def test_the_turn_never_asks_which_strategy():
    """The turn's modules reach leases only through their queue: none imports the lease
    queries or the lease loop, or reads the store's `shared` flag."""
    import ast

    runtime = ROOT / "server" / "runtime"
    for name in ("runner.py", "tool_loop.py", "parked.py", "history.py"):
        imported = imports_of(runtime / name, everywhere=True)
        assert "server.store.leases" not in imported, (name, sorted(imported))
        for node in ast.walk(ast.parse((runtime / name).read_text())):
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("shared", "leases"), (name, node.lineno)
