"""`make run` installs the server alone, `make test` adds the test extras, `make bench` the
bench extras, each by uv or else pip, with progress shown (what make would run, read with
`make -n` in a copy of the Makefile: nothing is installed here; the cold install itself is
measured in docs/operations.md, "Installing")."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def dry_run(tmp_path, target: str, *extra: str) -> str:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    proc = subprocess.run(["make", "-n", target, *extra], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def installs(script: str) -> set[str]:
    return set(re.findall(r"-e '(\.[^']*)'", script))


def test_run_installs_the_server_alone_test_and_bench_their_extras(tmp_path):
    run = dry_run(tmp_path, "run")
    assert installs(run) == {"."}
    assert "python3 -m venv --without-pip .venv" in run and ".venv/bin/seed-agents serve" in run
    assert "uv pip install --python .venv/bin/python -e '.'" in run                # uv first
    assert "pip install --disable-pip-version-check --progress-bar on -e '.'" in run  # pip as fallback
    assert "--quiet" not in run and " -q " not in run                                # progress shown
    assert installs(dry_run(tmp_path, "test")) == {".[test]"}
    assert ".[test,bench]" in installs(dry_run(tmp_path, "bench"))
    pip_only = dry_run(tmp_path, "run", "INSTALLER=pip")
    assert '[ "pip" = uv ]' in pip_only   # the uv branch is never taken


def test_run_after_test_installs_nothing_more(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    dry_run(tmp_path, "run")   # copies the files first
    (tmp_path / ".venv" / ".installed").touch()   # `make test` installed a superset, after pyproject
    proc = subprocess.run(["make", ".venv/.installed-run"], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".venv" / ".installed-run").exists() and "installing" not in proc.stdout
