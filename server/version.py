"""This build's version: the installed distribution's metadata (pyproject.toml's `version`), the
one place it is written."""
from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "seed-agents"


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:   # run from a source tree that was never installed
        return "unknown"


VERSION = package_version()
