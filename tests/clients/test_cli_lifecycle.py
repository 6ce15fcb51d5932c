"""`seed-agents sessions rename|thoroughness|delete|retry|list --top-level` and `agents delete`, as a person
runs them: a child process against a real server."""
from __future__ import annotations

from tests.clients.test_cli_commands import cli_env, run_cli


async def test_rename_delete_retry_and_agent_delete(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    agent_id = (await run_cli(env, "agents", "create", "--name", "bot"))[1].strip()
    sid = (await run_cli(env, "sessions", "create", agent_id))[1].strip()
    code, out, err = await run_cli(env, "sessions", "rename", sid, "Named by me")
    assert code == 0 and sid in out and "Named by me" in out, err
    code, out, _ = await run_cli(env, "sessions", "list", "--top-level")
    assert sid in out and "Named by me" in out
    code, out, err = await run_cli(env, "sessions", "thoroughness", sid, "quick")
    assert (code, out.strip()) == (0, f"{sid}  thoroughness quick"), err
    code, out, err = await run_cli(env, "sessions", "thoroughness", sid, "default")
    assert (code, out.strip()) == (0, f"{sid}  thoroughness normal (the default)"), err
    code, out, err = await run_cli(env, "sessions", "thoroughness", sid, "thorough")
    assert code == 2 and "invalid choice" in err
    code, out, err = await run_cli(env, "sessions", "retry", sid)
    assert code == 1 and "409" in err and "nothing to retry" in err and "Traceback" not in err, err
    code, out, err = await run_cli(env, "sessions", "delete", sid)
    assert code == 0 and out.strip() == f"deleted session {sid}", err
    code, out, _ = await run_cli(env, "sessions", "list")
    assert sid not in out
    code, out, err = await run_cli(env, "agents", "delete", agent_id)
    assert code == 0 and out.strip() == f"deleted agent {agent_id}", err
    code, out, _ = await run_cli(env, "agents", "list")
    assert agent_id not in out
