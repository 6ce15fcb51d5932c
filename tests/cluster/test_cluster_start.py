"""Starting a server on PostgreSQL (issue 16): an unusable URL stops it before it listens with
one sentence and exit status 2, never showing the password; a server whose secrets key is not
the one the other servers on the database use is refused the same way (its secrets would not
open on them, nor theirs on it)."""
from __future__ import annotations

import base64
import os
from urllib.parse import urlsplit, urlunsplit

from seed_agents.server.database.url import parse_storage_url

from tests.conftest import make_config
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.server.test_config import seed_agents

SECRET = "not-the-password-hunter2"


def with_password(url: str, password: str, port: int | None = None) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{parts.username or 'seed'}:{password}@{host}:{port or parts.port or 5432}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_a_wrong_password_or_an_unreachable_database_stops_the_server_with_one_sentence(tmp_path, postgres_url):
    for url, why in ((with_password(postgres_url, SECRET), "password authentication failed"),
                     (with_password(postgres_url, SECRET, port=1), "Connection refused")):
        code, out, err = seed_agents("serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
                                     "--storage-url", url, env={"SEED_AGENTS_SECRETS_KEY": key()})
        assert (code, out) == (2, ""), err
        assert err.startswith("seed-agents: cannot connect to postgresql://") and why in err, err
        assert SECRET not in err and err.count("\n") == 1, err


async def test_a_server_with_another_secrets_key_is_refused(tmp_path, postgres_url):
    from seed_agents.server.main import start_server

    cfg = make_config(tmp_path / "first")
    cfg.storage_url = parse_storage_url(postgres_url)
    first = await start_server(cfg)   # the suite's fixed key (tests/conftest.py) becomes the database's
    try:
        code, out, err = seed_agents("serve", "--port", "0", "--data-dir", str(tmp_path / "second"),
                                     "--storage-url", postgres_url, env={"SEED_AGENTS_SECRETS_KEY": key()})
        assert (code, out) == (2, ""), err
        assert "secrets key is not the key the other servers" in err and err.count("\n") == 1, err
        assert "give every server the same SEED_AGENTS_SECRETS_KEY" in err
        same = os.environ["SEED_AGENTS_SECRETS_KEY"]
        cfg2 = make_config(tmp_path / "third")
        cfg2.storage_url = parse_storage_url(postgres_url)
        third = await start_server(cfg2)   # the same key: welcome
        await third.stop()
        assert same
    finally:
        await first.stop()
