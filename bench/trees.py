"""Source trees run side by side (bench/port_ab.py, bench/sqlite_ab.py, bench/front_ab.py,
bench/v1_ab.py): each tree's server starts from its own code, whichever layout that tree has;
their medians side by side in one table."""
from __future__ import annotations

import os
import statistics
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


def medians_table(trees: list[tuple[str, Path]], results: dict[str, list[dict]], figures) -> str:
    """A markdown table of each figure's median per tree, then each tree against the first.
    `figures`: (key, title, unit) or (key, title, unit, scale) rows; a figure some round lacks
    is left out."""
    first = trees[0][0]
    table = ["| figure | " + " | ".join(name for name, _ in trees) + " | "
             + " | ".join(f"{name}/{first}" for name, _ in trees[1:]) + " |",
             "|---" * (1 + 2 * len(trees) - 1) + "|"]
    for key, title, unit, *rest in figures:
        scale = rest[0] if rest else 1
        if not all(key in x for rows in results.values() for x in rows):
            continue
        med = {name: statistics.median(x[key] for x in rows) for name, rows in results.items()}
        table.append(f"| {title} | " + " | ".join(f"{med[n] * scale:.4g} {unit}" for n, _ in trees) + " | "
                     + " | ".join(f"{med[n] / med[first]:.3f}" if med[first] else "-" for n, _ in trees[1:]) + " |")
    return "\n".join(table)
