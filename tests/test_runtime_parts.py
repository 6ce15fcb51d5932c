"""The runtime is its own part: it sees the app only as a Publisher, and the app is one."""
from __future__ import annotations

import inspect

from server.app import App
from server.runtime.publisher import Publisher


def test_the_app_is_a_publisher():
    """Every method the runtime may call exists on the app with the same parameters (so a
    rename on either side fails here, not in the middle of a turn)."""
    methods = [n for n, v in vars(Publisher).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert {"publish_append", "publish_partial", "publish_run", "notify_account"} <= set(methods)
    for name in methods:
        wanted = list(inspect.signature(getattr(Publisher, name)).parameters)
        have = list(inspect.signature(getattr(App, name)).parameters)
        assert have[:len(wanted)] == wanted, (name, have, wanted)


def test_the_runtime_never_imports_the_app():
    import ast
    from pathlib import Path

    for path in (Path(__file__).resolve().parents[1] / "server" / "runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("server.app", "server.handlers") and not (
                    node.module or "").startswith("server.handlers"), (path.name, node.module)


def test_each_scheduling_strategy_is_a_run_queue():
    """Local and leased scheduling (server/runtime/scheduling.py) each have every `RunQueue`
    method with its parameters and its sync or async kind, so the turn can call either the same
    way. Checked without PostgreSQL: the leased strategy drifting from the protocol fails here
    even where the cluster tests are skipped."""
    from server.runtime.leased_queue import LeasedQueue
    from server.runtime.local_queue import LocalQueue
    from server.runtime.scheduling import RunQueue

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
    from pathlib import Path

    runtime = Path(__file__).resolve().parents[1] / "server" / "runtime"
    for name in ("runner.py", "tool_loop.py", "parked.py", "history.py"):
        for node in ast.walk(ast.parse((runtime / name).read_text())):
            if isinstance(node, ast.ImportFrom):
                imported = {f"{node.module}.{a.name}" for a in node.names} | {node.module}
                assert "server.store.leases" not in imported, (name, node.module)
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("shared", "leases"), (name, node.lineno)
