"""Agent state directories (`<data_dir>/agents/<agentId>`): made at CreateAgent, removed after
DeleteAgent's transaction commits, and reconciled at start.

The database is the truth. DeleteAgent commits first and removes the directory after, so a
crash in between leaves a directory without a row: start-up removes it. A row whose directory
is missing (a crash between CreateAgent's commit and its mkdir, or a directory removed by
hand) gets an empty one again: an agent is never deleted because a directory went away. Only
directories under `<data_dir>/agents/` are touched; a row pointing elsewhere is left alone.
"""
from __future__ import annotations

import logging
import os
import shutil

from ..database.filemodes import make_private_dir

log = logging.getLogger("seed_agents.state_dirs")


def agents_root(data_dir: str) -> str:
    return os.path.join(os.path.abspath(data_dir), "agents")


def _inside(root: str, path: str) -> bool:
    path = os.path.abspath(path)
    return os.path.dirname(path) == root


def make_state_dir(data_dir: str, state_dir: str) -> None:
    if _inside(agents_root(data_dir), state_dir):
        make_private_dir(state_dir)   # 0700 whatever the umask, `agents/` included


def remove_state_dir(data_dir: str, state_dir: str) -> None:
    if _inside(agents_root(data_dir), state_dir):
        shutil.rmtree(state_dir, ignore_errors=True)


def reconcile_state_dirs(data_dir: str, agent_ids: set[str], state_dirs: list[str]) -> tuple[int, int]:
    """(removed, created): orphan directories removed, missing ones made (file work only; the
    caller reads the rows, before the server accepts actions)."""
    root = agents_root(data_dir)
    removed = created = 0
    if os.path.isdir(root):
        for entry in os.scandir(root):
            if entry.is_dir(follow_symlinks=False) and entry.name not in agent_ids:
                log.warning("removing the state directory of a deleted agent: %s", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    for state_dir in state_dirs:
        if _inside(root, state_dir) and not os.path.isdir(state_dir):
            make_private_dir(state_dir)   # 0700 whatever the umask, `agents/` included
            created += 1
    return removed, created
