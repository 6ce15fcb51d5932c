"""The runtime is its own part: it sees the app only as a Publisher, and the app is one."""
from __future__ import annotations

import inspect

from seed_agents.server.app import App
from seed_agents.server.runtime.publisher import Publisher


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
                assert node.module not in ("seed_agents.server.app", "seed_agents.server.handlers") and not (
                    node.module or "").startswith("seed_agents.server.handlers"), (path.name, node.module)
