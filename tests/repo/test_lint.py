"""The lint and the type check, as part of the suite (so `make test` and CI run them): ruff over
the shipped code and mypy over `server/`, `protocol/` and `clients/`, both configured in
pyproject.toml (docs/architecture.md, "Tooling"). `make lint` runs this file alone."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("server", "protocol", "clients", "seed_agents")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_ruff_finds_nothing():
    out = _run(["ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                *SHIPPED], ROOT)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def _mypy_tree(tmp_path: Path) -> Path:
    """The folders under the names the code imports them by (seed_agents.server is server/, as
    pyproject.toml's package-dir maps them): mypy follows no such mapping, so a tree of symbolic
    links gives it one. Kept in .venv when there is one, so mypy's cache stays valid across runs."""
    venv = ROOT / ".venv"
    base = venv / "mypy-tree" if venv.is_dir() else tmp_path / "mypy-tree"
    pkg = base / "seed_agents"
    pkg.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "server", "protocol", "clients"):
        link = pkg / name
        if not link.is_symlink():
            link.symlink_to(ROOT / "seed_agents" / name if name.endswith(".py") else ROOT / name)
    return base


def test_mypy_finds_nothing(tmp_path):
    base = _mypy_tree(tmp_path)
    out = _run(["mypy", "--config-file", str(ROOT / "pyproject.toml"),
                "--cache-dir", str(base / ".mypy_cache"), "--python-executable", sys.executable,
                "-p", "seed_agents.server", "-p", "seed_agents.protocol", "-p", "seed_agents.clients"],
               base)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "Success" in out.stdout, out.stdout


def test_the_client_library_ships_its_annotations():
    # PEP 561: without py.typed, a program type-checking against seed_agents.clients sees Any.
    assert (ROOT / "clients" / "py.typed").is_file()
    from tests.repo.test_packaging import _pyproject
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["seed_agents.clients"]
