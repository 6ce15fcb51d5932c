"""Seed Agents: the server Seed Hypermedia clients talk to when they run AI agents.

The repository's top-level folders install under this one name (pyproject.toml,
`[tool.setuptools.package-dir]`): `seed_agents.server` is `server/`, `seed_agents.protocol` is
`protocol/`, `seed_agents.clients` is `clients/` and `seed_agents.schema` is `schema/`. This
folder holds only the namespace itself and `python -m seed_agents`.
"""
from pathlib import Path as _Path

# Run from a source tree that is not the installed one (`PYTHONPATH=<tree>`, as bench/'s
# before-and-after runs start an older or newer tree beside this one), the folders beside this
# one are the tree's: look for `seed_agents.server` and the rest there first. An installed wheel
# has them inside this folder, and its parent (site-packages) holds no pyproject.toml.
_tree = _Path(__file__).resolve().parent.parent
if (_tree / "pyproject.toml").is_file() and (_tree / "server" / "__init__.py").is_file():
    __path__.append(str(_tree))   # noqa: F821 (the package's own __path__)
del _Path, _tree
