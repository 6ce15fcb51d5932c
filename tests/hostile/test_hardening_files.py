"""Issue 12, finding 9: the data dir is 0700 and the database files 0600 whatever the umask, and
the server warns at start about ones that are wider. The server is a child process started
under umask 022 (the usual one, under which it used to make 0755 and 0644)."""
from __future__ import annotations

import os
import stat

import pytest

from tests.procs import ServerProcess
from tests.wsraw import V2Client, keypair, setup_session

A = keypair("files-A")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def server_in(tmp_path, data_dir) -> ServerProcess:
    # the harness keeps its log in tmp_path/srv; the server's own data dir is a fresh path
    # (argparse: the last --data-dir wins)
    return ServerProcess(tmp_path / "srv", extra=["--data-dir", str(data_dir)])


async def test_fresh_data_dir_and_database_are_owner_only(tmp_path, umask_022, monkeypatch):
    # without the variable the server also creates its secrets key file in the data dir
    monkeypatch.delenv("SEED_AGENTS_SECRETS_KEY", raising=False)
    data = tmp_path / "deep" / "data"
    srv = server_in(tmp_path, data).start()
    try:
        client = await V2Client.open(srv.url)
        await setup_session(client, A)   # writes, so the WAL has content
        await client.close()
        assert mode(data) == 0o700
        names = sorted(os.listdir(data))
        for name in ("agents.sqlite", "agents.sqlite-wal", "agents.sqlite-shm", "secrets.key"):
            assert name in names, names
        for name in names:   # files 0600; folders (agents/ and each agent's state) 0700
            want = 0o700 if (data / name).is_dir() else 0o600
            assert mode(data / name) == want, (name, oct(mode(data / name)))
        for state in (data / "agents").iterdir():
            assert mode(state) == 0o700, (state, oct(mode(state)))
        assert "accessible to other local users" not in srv.log.read_text()
    finally:
        srv.kill()


async def test_wider_modes_are_named_in_a_warning_at_start(tmp_path, umask_022):
    data = tmp_path / "data"
    srv = server_in(tmp_path, data).start()
    srv.kill()
    os.chmod(data, 0o755)
    os.chmod(data / "agents.sqlite", 0o644)
    srv.start()
    try:
        client = await V2Client.open(srv.url)   # still serves
        await setup_session(client, A)
        await client.close()
        log = srv.log.read_text()
        assert f"{data} is accessible to other local users (mode 755); chmod 700" in log, log[-2000:]
        assert f"{data / 'agents.sqlite'} is accessible to other local users (mode 644); chmod 600" in log
    finally:
        srv.kill()
