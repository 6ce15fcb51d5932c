"""`seed-agents providers login NAME` against a real server and the fake authorization server on
127.0.0.1: it prints the URL, takes the pasted redirect from stdin, says when the sign-in is done,
and the provider it sets answers a turn through the subscription; tokens never in its output."""
from __future__ import annotations

import asyncio
import sys

from tests.conftest import running_server, server_config
from tests.fakes.oauth_server import FakeOAuth
from tests.clients.test_cli_commands import ROOT, cli_env, run_cli


async def test_providers_login_prints_the_url_takes_the_redirect_and_the_provider_works(tmp_path, request):
    async with FakeOAuth() as fake:
        cfg = server_config(tmp_path, "sqlite", request, subscription_auth=True,
                            subscription_authorize_url=fake.url("/oauth/authorize"),
                            subscription_token_url=fake.url("/oauth/token"),
                            subscription_base_url=fake.url("/backend-api"),
                            session_title_generation=False)   # (the scripts feed the turns alone)
        async with running_server(cfg) as server:
            env = cli_env(tmp_path, server.url)
            assert (await run_cli(env, "keygen"))[0] == 0
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "seed_agents.server.console", "providers", "login", "chatgpt",
                "--model", "gpt-5.4", cwd=str(ROOT), env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            try:
                url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
                assert url.startswith(fake.url("/oauth/authorize") + "?"), url
                redirect = fake.authorize(url)
                out, err = await asyncio.wait_for(proc.communicate(redirect.encode() + b"\n"), 20)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            err = err.decode()
            assert proc.returncode == 0, err
            assert "signed in: provider chatgpt uses your ChatGPT subscription" in err
            assert out.decode() == "seed-agents agents create --name NAME --provider chatgpt --model gpt-5.4\n"
            for token in (fake.issued[-1]["access_token"], fake.issued[-1]["refresh_token"]):
                assert token not in err and token not in out.decode()

            code, out, err = await run_cli(env, "providers", "list")
            assert code == 0, err
            assert [line.split() for line in out.splitlines() if line.startswith("chatgpt ")] == [
                ["chatgpt", "openai", "subscription", "gpt-5.4"]]
            code, out, err = await run_cli(env, "agents", "create", "--name", "sub", "--provider", "chatgpt")
            assert code == 0, err
            session_id = (await run_cli(env, "sessions", "create", out.strip()))[1].strip()
            fake.replies = [{"text": ["Hi from ", "ChatGPT"]}]
            code, out, err = await run_cli(env, "send", session_id, "hello")
            assert (code, out) == (0, "Hi from ChatGPT\n"), err

            # A wrong paste fails clearly, and nothing is set.
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "seed_agents.server.console", "providers", "login", "other",
                cwd=str(ROOT), env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(
                proc.communicate(b"http://localhost:1455/auth/callback?code=x&state=forged\n"), 20)
            assert proc.returncode == 1 and "state mismatch" in err.decode() and "Traceback" not in err.decode()
            code, out, _ = await run_cli(env, "providers", "list")
            assert not any(line.startswith("other ") for line in out.splitlines())
