"""Shared fixtures: a real server on a free loopback port over a real SQLite file in tmp_path."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# A fixed secrets key for in-process servers, so tests never write key files outside tmp_path.
os.environ.setdefault("SEED_AGENTS_SECRETS_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")


def make_config(tmp_path, **limits):
    from server.config import Config

    cfg = Config(host="127.0.0.1", port=0, db_path=str(tmp_path / "agents.sqlite"), data_dir=str(tmp_path))
    cfg.shutdown_timeout = 2.0
    for name, value in limits.items():
        if hasattr(cfg.limits, name):
            setattr(cfg.limits, name, value)
        else:
            setattr(cfg, name, value)
    return cfg


@pytest.fixture
async def server(tmp_path):
    from server.main import start_server

    running = await start_server(make_config(tmp_path))
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
def conn(tmp_path):
    """A fresh database file opened through the gate, for the store's own tests."""
    from server.store.gate import open_database

    c = open_database(str(tmp_path / "db.sqlite"))
    yield c
    c.close()
