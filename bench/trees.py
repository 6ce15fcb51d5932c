"""Source trees run side by side (bench/port_ab.py, bench/sqlite_ab.py): each tree's server
starts from its own code, whichever layout that tree has."""
from __future__ import annotations

import os
from pathlib import Path


def tree_env(tree: Path) -> dict:
    """The environment of a tree's processes: its own code first, and no SEED_AGENTS_* setting
    of the caller's (a SEED_AGENTS_STORAGE_URL would move the server off its SQLite file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_AGENTS_")}
    env["PYTHONPATH"] = str(tree)
    return env


def server_module(tree: Path) -> str:
    """`python -m` of the tree's server: under the seed_agents namespace since the package owns
    its names, as a bare `server` package in trees from before."""
    return "seed_agents.server.main" if (tree / "seed_agents" / "__init__.py").is_file() else "server.main"
