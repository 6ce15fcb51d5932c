"""The package owns its names: the repository's folders install as `seed_agents.server`,
`seed_agents.protocol`, `seed_agents.clients` and `seed_agents.schema`, and nothing else goes
into site-packages (a top-level `schema` or `server` would collide with other packages)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("server", "protocol", "clients", "schema")
NAMESPACE = "seed_agents"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    found = {NAMESPACE}
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((NAMESPACE, *init.parent.relative_to(ROOT).parts)))
    return found


def test_the_package_list_names_every_package_folder():
    setuptools = _pyproject()["tool"]["setuptools"]
    assert set(setuptools["packages"]) == _package_folders()
    assert setuptools["package-dir"] == {NAMESPACE: NAMESPACE,
                                         **{f"{NAMESPACE}.{f}": f for f in FOLDERS}}


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append(node.module)
    return out


def test_no_code_imports_the_bare_folder_names():
    # Inside a checkout `import server` would still work (the current directory is on the
    # path) and load a second copy of every module beside seed_agents.server's.
    for folder in (*FOLDERS, "tests", "bench", NAMESPACE):
        for path in (ROOT / folder).rglob("*.py"):
            bare = [m for m in _imports(path) if m.partition(".")[0] in FOLDERS]
            assert not bare, f"{path.relative_to(ROOT)} imports {bare}"


def test_python_dash_m_seed_agents_works_outside_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-m", NAMESPACE, "--version"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("seed-agents ")
    # ...and the bare names are not importable there: nothing of ours is installed under them
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print([n for n in ('server', 'protocol', 'clients', 'schema') "
                            "if u.find_spec(n) and 'seed' in str(u.find_spec(n).origin)])"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_a_built_wheel_holds_only_the_namespace(tmp_path):
    # Built from a copy, so the checkout gets no build/ or egg-info folder.
    src = tmp_path / "src"
    src.mkdir()
    for name in (*FOLDERS, NAMESPACE):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.build_wheel(sys.argv[1]))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dist")], cwd=src,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    wheel = tmp_path / "dist" / out.stdout.strip().splitlines()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {NAMESPACE, f"{NAMESPACE}-{_pyproject()['project']['version']}.dist-info"}
    assert f"{NAMESPACE}/server/app.py" in names
    assert f"{NAMESPACE}/__main__.py" in names
    assert f"{NAMESPACE}/schema/baseline.sql" in names
    assert f"{NAMESPACE}/schema/migrations/0001_initial.sql" in names
    assert f"{NAMESPACE}/schema/postgres/0001_initial.sql" in names
    entry = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert f"seed-agents = {NAMESPACE}.server.console:main" in entry
