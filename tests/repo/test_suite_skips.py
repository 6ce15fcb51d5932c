"""`make test` ends with one line per reason tests were skipped (tests/conftest.py), so a run
without PostgreSQL says so and says how to run them, instead of a bare `N skipped`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest
from tests.pg import postgres_url  # noqa: F401


@pytest.mark.parametrize("n", range(3))
def test_on_postgresql(postgres_url, n):
    pass


def test_without_chromium():
    pytest.skip("chromium is not installed")


def test_runs():
    pass
'''


def test_the_run_ends_with_one_line_per_skip_reason(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k not in ("SEED_AGENTS_TEST_POSTGRES_URL", "CI")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"   # only the hook under test: a quicker start
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           str(tmp_path / "test_sample.py")], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert lines[-3].startswith("1 passed, 4 skipped in ")   # pytest's own totals, then the reasons
    assert lines[-2:] == [
        "3 PostgreSQL tests skipped: set SEED_AGENTS_TEST_POSTGRES_URL (postgresql://USER:PASSWORD@HOST/DB) "
        "or run .ci/run, which starts a cluster and sets it",
        "1 test skipped: chromium is not installed"]
