"""`seed-agents identities ...` and `agents create` making the agent an account of its own,
against a real server (no HM server: created locally). The first command runs as the installed
command does, in a child process; the rest run `seed_agents.clients.cli.main` in a thread (the same code,
without a Python start per command)."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.clients.cli import main
from seed_agents.protocol.wire.keys import Keypair

from tests.clients.test_cli_commands import cli_env, run_cli


@pytest.fixture
def cli(server, tmp_path, monkeypatch, capsys):
    env = cli_env(tmp_path, server.url)
    for name in ("HOME", "SEED_AGENTS_KEY", "SEED_AGENTS_URL"):
        monkeypatch.setenv(name, env[name])

    async def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, list(args))
        out, err = capsys.readouterr()
        return code, out, err

    run.env = env
    return run


async def test_identities_from_the_command_line(cli, tmp_path):
    env = cli.env
    assert (await run_cli(env, "keygen"))[0] == 0

    # agents create: an identity named after the agent first, then the agent signing with it.
    code, out, err = await run_cli(env, "agents", "create", "--name", "Scout")  # as installed
    assert code == 0, err
    agent_id = out.strip()
    code, out, err = await cli("identities", "list")
    assert code == 0, err
    header, line = out.splitlines()
    assert header.split() == ["NAME", "ACCOUNT", "LABEL", "HM", "SERVER"]
    name, account, label = line.split()[:3]
    assert name == "hm-account-" + account[:16] and label == "Scout" and line.endswith("  not published")
    code, out, err = await cli("identities", "list", "--agent", agent_id)
    assert code == 0 and out.splitlines()[1].split()[0] == name, err
    # --no-identity: no account made.
    code, out, err = await cli("agents", "create", "--name", "Plain", "--no-identity")
    assert code == 0, err
    assert len((await cli("identities", "list"))[1].splitlines()) == 2

    # import: the seed from a file (hex here), never the command line; a bad file is one sentence.
    seed = bytes(range(100, 132))
    (tmp_path / "seed.hex").write_text(seed.hex() + "\n")
    code, out, err = await cli("identities", "import", "--seed-file", str(tmp_path / "seed.hex"),
                                   "--label", "Mine")
    assert code == 0, err
    imported = out.strip()
    assert imported == "hm-account-" + Keypair.from_seed(seed).account_id[:16]
    (tmp_path / "short").write_bytes(b"\x01" * 31)
    code, out, err = await cli("identities", "import", "--seed-file", str(tmp_path / "short"))
    assert code == 2 and "must hold a 32-byte Ed25519 seed" in err and "Traceback" not in err

    # rename, and delete: refused while the agent signs with it, with the agent named.
    code, out, err = await cli("identities", "rename", imported, "Mine, renamed")
    assert code == 0 and "Mine, renamed" in out, err
    code, out, err = await cli("identities", "delete", name)
    assert code == 1 and "still used by agent 'Scout'" in err and agent_id in err, err
    code, out, err = await cli("identities", "delete", imported)
    assert (code, out) == (0, f"deleted signing identity {imported}\n"), err
    code, out, err = await cli("identities", "create", "--label", "Spare")
    assert code == 0 and out.strip().startswith("hm-account-"), err
    listed = (await cli("identities", "list"))[1]
    assert imported not in listed and out.strip() in listed and name in listed
