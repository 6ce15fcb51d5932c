"""Shared fixtures: a real server on a free loopback port over a real SQLite file in tmp_path."""
from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.pg import postgres_base_url, postgres_url  # noqa: E402,F401  (fixtures, for `server` on PostgreSQL)

# A fixed secrets key for in-process servers, so tests never write key files outside tmp_path.
os.environ.setdefault("SEED_AGENTS_SECRETS_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")


# No test reaches beyond 127.0.0.1: servers started here and every child process (which inherits
# this variable) run offline unless a test points them at a fake HM server.
os.environ["SEED_AGENTS_HM_SERVER_URL"] = ""
# Scripted providers see only the requests a test scripts: session titling (a model call after a
# turn) is asked for where tested (tests/server/runtime/test_session_titles.py).
os.environ["SEED_AGENTS_SESSION_TITLE_GENERATION"] = "false"


def make_config(tmp_path, **limits):
    from seed_agents.server.config import Config

    cfg = Config(host="127.0.0.1", port=0, db_path=str(tmp_path / "agents.sqlite"), data_dir=str(tmp_path),
                 hm_server_url=None)
    cfg.shutdown_timeout = 2.0
    cfg.session_title_generation = False   # (above: asked for where tested)
    cfg.code_exec = "off"   # the sandbox's self-check costs CPU at every start: asked for where used
    for name, value in limits.items():
        if hasattr(cfg.limits, name):
            setattr(cfg.limits, name, value)
        else:
            setattr(cfg, name, value)
    return cfg


# -- which storage a `server` runs on -------------------------------------------------------
# `@pytest.mark.storages("sqlite", "postgresql")` on a module or test runs each test that uses
# the `server` fixture once per storage named (the closest marker wins, so one test can narrow
# its module's list); PostgreSQL gives each run a fresh schema (tests/pg.py) and skips with the
# reason where none is reachable. SEED_AGENTS_TEST_STORAGE (e.g. `postgresql`, or
# `sqlite,postgresql`) runs every unmarked test of the `server` fixture on the storages it
# lists, to explore; `make test` leaves it unset.
STORAGES = ("sqlite", "postgresql")
STORAGE_ENV = "SEED_AGENTS_TEST_STORAGE"


def pytest_configure(config):
    config.addinivalue_line("markers", "storages(*kinds): run the test's `server` fixture on each "
                                       "storage named: 'sqlite', 'postgresql' (tests/conftest.py)")


def pytest_generate_tests(metafunc):
    if "storage" not in metafunc.fixturenames:   # no `server` of this file (or a module's own)
        return
    marker = metafunc.definition.get_closest_marker("storages")
    kinds = tuple(marker.args) if marker is not None else tuple(
        k.strip() for k in os.environ.get(STORAGE_ENV, "").split(",") if k.strip())
    if not kinds:
        return
    unknown = set(kinds) - set(STORAGES)
    if unknown:
        raise pytest.UsageError(f"unknown storage {sorted(unknown)}; choose from {STORAGES}")
    metafunc.parametrize("storage", kinds, indirect=True)


@pytest.fixture
def storage(request):
    """The storage the `server` fixture runs on: 'sqlite' unless parametrized (above)."""
    return getattr(request, "param", "sqlite")


def server_config(tmp_path, storage: str, request, **limits):
    """make_config, on the storage named: for 'postgresql', a fresh schema (tests/pg.py)."""
    cfg = make_config(tmp_path, **limits)
    if storage == "postgresql":
        from seed_agents.server.database.url import parse_storage_url

        cfg.storage_url = parse_storage_url(request.getfixturevalue("postgres_url"))
    return cfg


@asynccontextmanager
async def running_server(cfg) -> AsyncIterator:
    """A real server started in this process with `cfg`, stopped at the end."""
    from seed_agents.server.main import start_server

    running = await start_server(cfg)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def server(tmp_path, storage, request):
    async with running_server(server_config(tmp_path, storage, request)) as running:
        yield running


@pytest.fixture
def conn(tmp_path):
    """A fresh database file opened through the gate, for the store's own tests."""
    from seed_agents.server.database.sqlite.gate import open_database

    c = open_database(str(tmp_path / "db.sqlite"))
    yield c
    c.close()


# -- why tests were skipped: one line per reason, after the totals ---------------------------------
_SKIP_KINDS = (("no PostgreSQL: ", "PostgreSQL"),)   # reason prefix -> what the tests need


def _skip_lines(terminalreporter) -> list[str]:
    from collections import Counter

    reasons: Counter = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    lines = []
    for reason, n in reasons.most_common():
        kind = next((k for prefix, k in _SKIP_KINDS if reason.startswith(prefix)), "")
        for prefix, _ in _SKIP_KINDS:
            reason = reason.removeprefix(prefix)
        lines.append(f"{n} {kind + ' ' if kind else ''}test{'s' if n != 1 else ''} skipped: {reason}")
    return lines


def pytest_terminal_summary(terminalreporter):
    terminalreporter.config._seed_skip_lines = _skip_lines(terminalreporter)


def pytest_unconfigure(config):
    """After pytest's own totals line, so `make test` ends with the reasons."""
    lines = getattr(config, "_seed_skip_lines", None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if lines and reporter is not None:
        for line in lines:
            reporter.write_line(line)
