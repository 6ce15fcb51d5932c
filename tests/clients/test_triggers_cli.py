"""`seed-agents triggers ls/show/add/rm/fire` against a real server: one run as the installed
command (a child process), the rest through the same `seed_agents.clients.cli.main` in this process (a
thread of its own), to keep the suite fast."""
from __future__ import annotations

import asyncio
import contextlib
import io

from seed_agents.clients.cli import main

from tests.clients.test_cli_commands import cli_env, run_cli


async def cli(capture_env, *args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main([*args, "--url", capture_env["SEED_AGENTS_URL"], "--key", capture_env["SEED_AGENTS_KEY"]])

    code = await asyncio.to_thread(run)
    return code, out.getvalue(), err.getvalue()


async def test_add_list_fire_show_and_remove(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await cli(env, "keygen"))[0] == 0
    code, out, err = await cli(env, "agents", "create", "--name", "bot", "--system-prompt", "hi")
    assert code == 0, err
    agent_id = out.strip()
    code, out, err = await cli(env, "triggers", "add", agent_id, "hook", "--prompt", "Handle it", "--webhook")
    assert code == 0, err
    hook_id = out.strip()
    assert f"/agents/hooks/{hook_id}" in err and "whsec_" in err
    code, out, err = await cli(env, "triggers", "add", agent_id, "daily", "--prompt", "Morning",
                               "--weekly", "mon,tue,wed,thu,fri 08:30", "--tz", "Europe/Berlin")
    assert code == 0, err
    daily_id = out.strip()
    code, out, err = await cli(env, "triggers", "add", agent_id, "bad", "--prompt", "x", "--cron", "99 * * * *")
    assert code == 1 and "cron expression" in err
    code, out, err = await cli(env, "triggers", "add", agent_id, "two", "--prompt", "x", "--every", "5m", "--webhook")
    assert code == 2 and "exactly one of" in err
    # The installed command, as a person types it.
    code, out, err = await run_cli(env, "triggers", "ls", agent_id)
    assert code == 0, err
    assert out.splitlines()[0].split()[:4] == ["ID", "STATE", "NAME", "SOURCE"]
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert rows[hook_id].split()[1:4] == ["on", "hook", "webhook"]
    assert "weekly mon,tue,wed,thu,fri 08:30 Europe/Berlin" in rows[daily_id]

    code, out, err = await cli(env, "triggers", "fire", hook_id, "--data", '{"n": 1}', "--idempotency-key", "k1")
    assert code == 0, err
    firing_id, status = out.split()[:2]
    assert status == "created" and "session" in out
    code, again, err = await cli(env, "triggers", "fire", hook_id, "--data", '{"n": 1}', "--idempotency-key", "k1")
    assert code == 0 and again.split()[0] == firing_id
    code, out, err = await cli(env, "triggers", "fire", hook_id, "--data", '{"n": 2}', "--idempotency-key", "k1")
    assert code == 1 and "409" in err
    code, out, err = await cli(env, "triggers", "fire", daily_id)   # a schedule: fired by hand
    assert code == 0 and out.split()[1] == "created" and " session " in out, err
    code, out, _ = await cli(env, "triggers", "show", hook_id)
    assert "webhook: POST" in out and "webhook:k1" in out and "created" in out

    code, out, err = await cli(env, "triggers", "rm", daily_id)
    assert code == 0 and daily_id in out
    code, out, _ = await cli(env, "triggers", "ls", agent_id)
    assert daily_id not in out and hook_id in out
    code, out, err = await cli(env, "triggers", "rm", daily_id)
    assert code == 1 and "not found" in err
