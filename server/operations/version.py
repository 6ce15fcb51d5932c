"""This build's version: the installed distribution's metadata (pyproject.toml's `version`), the
one place it is written; and the commit it runs, when known."""
from __future__ import annotations

import functools
import os
import subprocess
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "seed-agents"


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:   # run from a source tree that was never installed
        return "unknown"


VERSION = package_version()


@functools.cache
def build_commit() -> str | None:
    """The commit this server runs, when known: SEED_AGENTS_COMMIT, else the checkout's HEAD."""
    commit = os.environ.get("SEED_AGENTS_COMMIT")
    if commit:
        return commit
    root = Path(__file__).resolve().parents[2]   # server/operations/version.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
