"""`seed-agents serve` configuration as a person meets it: --help, --version, the docs' tables,
and every configuration mistake answered by one sentence and exit status 2, never a traceback."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seed_agents.server.config import (
    BEGIN,
    DOCS,
    END,
    ENV_PREFIX,
    SETTINGS,
    add_arguments,
    default_text,
    load_config,
    markdown_table,
)

ROOT = Path(__file__).resolve().parents[2]


def seed_agents(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 30):
    """`seed-agents ARGS...` as the installed console command runs it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    full_env.update(PYTHONPATH=str(ROOT), **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "seed_agents.server.console", *args], cwd=str(cwd or ROOT),
                          env=full_env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def test_docs_hold_exactly_the_generated_settings_table():
    table = markdown_table()
    for rel in DOCS:
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert text.count(BEGIN) == 1 and text.count(END) == 1, rel
        inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
        assert inside == f"\n{table}\n", f"{rel} is stale: run python -m seed_agents.server.config --write-docs"
    for s in SETTINGS:
        assert f"`{ENV_PREFIX}{s.env}`" in table and (s.flag is None or f"`{s.flag} " in table)


def test_markdown_command_prints_the_table():
    proc = subprocess.run([sys.executable, "-m", "seed_agents.server.config", "--markdown"], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == markdown_table() + "\n"


def test_serve_help_says_what_each_flag_does_its_default_and_its_variable():
    code, out, err = seed_agents("serve", "--help")
    assert code == 0, err
    # argparse may wrap a long default after a hyphen (`seed-\nagents`): join such words again.
    flat = re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(out.split()))
    for s in SETTINGS:
        if s.flag is None:
            continue
        assert f"{s.flag} {s.metavar}" in flat
        assert f"env {ENV_PREFIX}{s.env})" in flat, s.flag
        assert f"(default {' '.join(default_text(s).replace('`', '').split())}; env {ENV_PREFIX}{s.env})" in flat, s.flag
        assert s.metavar.isupper() and "_" not in s.metavar.replace("PER_SECOND", ""), s.flag
    # Defaults read as a person types them: no Python spellings.
    for word in ("False", "True", "None"):
        assert f"(default {word}" not in flat
    assert "(default false; env SEED_AGENTS_ALLOW_PROVIDER_BASE_URL)" in flat
    assert "--port PORT TCP port" in flat and "(default 3050; env SEED_AGENTS_HTTP_PORT)" in flat
    assert "--max-frame-bytes BYTES largest envelope (larger is 413) (default 1048576;" in flat
    assert "--ping-interval SECONDS" in flat and "--data-dir DIR" in flat
    assert "MAX_FRAME" not in out.replace("MAX_FRAME_BYTES", "")


def test_version_prints_the_version_and_the_schema_version():
    from importlib import metadata

    from seed_agents.schema import CURRENT_VERSION

    code, out, err = seed_agents("--version")
    assert (code, err) == (0, "")
    assert out == f"seed-agents {metadata.version('seed-agents')} (schema version {CURRENT_VERSION})\n"


MISTAKES = [
    (["--port", "99999"], {},
     "seed-agents serve: --port '99999': a port must be a whole number from 0 to 65535"),
    (["--port", "http"], {}, "seed-agents serve: --port 'http': must be a whole number"),
    (["--log-level", "LOUD"], {},
     "seed-agents serve: --log-level 'LOUD': must be one of DEBUG, INFO, WARNING, ERROR"),
    (["--log-format", "xml"], {}, "seed-agents serve: --log-format 'xml': must be one of text, json"),
    ([], {"SEED_AGENTS_MAX_DEPTH": "deep"},
     "seed-agents serve: SEED_AGENTS_MAX_DEPTH='deep': must be a whole number"),
    ([], {"SEED_AGENTS_RATE_LIMIT": "fast"},
     "seed-agents serve: SEED_AGENTS_RATE_LIMIT='fast': must be a number (e.g. 100 or 2.5)"),
    ([], {"SEED_AGENTS_HTTP_PORT": "-1"},
     "seed-agents serve: SEED_AGENTS_HTTP_PORT='-1': a port must be a whole number from 0 to 65535"),
    (["--max-inflight", "0"], {},
     "seed-agents serve: --max-inflight '0': must be a whole number of at least 1"),
    (["--storage-url", "postgresql://agents:hunter2@db.example/agents", "--db-path", "b.sqlite"], {},
     "seed-agents serve: the storage URL names a PostgreSQL database and --db-path a SQLite file; "
     "give one of --storage-url and --db-path"),
    ([], {"SEED_AGENTS_STORAGE_URL": "postgres://agents:hunter2@db.example/agents?password=hunter2",
          "SEED_AGENTS_DB_PATH": "b.sqlite"},
     "seed-agents serve: the storage URL names a PostgreSQL database and --db-path a SQLite file; "
     "give one of --storage-url and --db-path"),
    (["--storage-url", "postgresql://agents:hunter2@db.example:99999/agents"], {},
     "seed-agents serve: --storage-url 'postgresql://agents:***@db.example:99999/agents': "
     "postgresql://: malformed host or port"),
    ([], {"SEED_AGENTS_STORAGE_URL": "mysql://root:hunter2@db/x"},
     "seed-agents serve: SEED_AGENTS_STORAGE_URL='mysql://root:***@db/x': scheme 'mysql' is not "
     "supported: use sqlite:FILE or postgresql://..."),
    (["--storage-url", "sqlite:"], {},
     "seed-agents serve: --storage-url 'sqlite:': sqlite: needs a file path, e.g. "
     "sqlite:./data/agents.sqlite"),
    (["--storage-url", "   "], {},
     "seed-agents serve: --storage-url '   ': storage URL is missing: use sqlite:FILE or "
     "postgresql://..."),
    (["--storage-url", "sqlite:a.sqlite", "--db-path", "b.sqlite"], {},
     "seed-agents serve: the storage URL names a.sqlite and the db path b.sqlite; give one of "
     "--storage-url and --db-path"),
    ([], {"SEED_AGENTS_SECRETS_KEY": "ab!c"},
     "seed-agents: secrets key in $SEED_AGENTS_SECRETS_KEY is not valid base64; set it to base64 "
     "of 32 random bytes (`head -c 32 /dev/urandom | base64`) or unset it to use the key file"),
    ([], {"SEED_AGENTS_SECRETS_KEY": "c2hvcnQ="},
     "seed-agents: secrets key in $SEED_AGENTS_SECRETS_KEY must be base64 of 32 bytes, it decodes "
     "to 5 bytes; set it to base64 of 32 random bytes (`head -c 32 /dev/urandom | base64`) or "
     "unset it to use the key file"),
    ([], {"SEED_AGENTS_HM_SERVER_URL": "hyper.media"},
     "seed-agents serve: SEED_AGENTS_HM_SERVER_URL='hyper.media': must be an http:// or https:// URL "
     "with a host (e.g. https://hyper.media)"),
]


@pytest.mark.parametrize("args,env,sentence", MISTAKES, ids=[" ".join(m[0]) or str(m[1]) for m in MISTAKES])
def test_a_configuration_mistake_is_one_sentence_and_exit_2(tmp_path, args, env, sentence):
    port = [] if "SEED_AGENTS_HTTP_PORT" in env else ["--port", "0"]
    code, out, err = seed_agents("serve", "--data-dir", str(tmp_path / "data"), *port,
                                 *args, env=env, cwd=tmp_path, timeout=15)
    assert (code, out, err) == (2, "", sentence + "\n")
    assert "hunter2" not in err


def test_an_unusable_data_dir_is_one_sentence_and_exit_2(tmp_path):
    # Permission bits do not stop root (the tests may run as root), so the data dir is a file.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    code, out, err = seed_agents("serve", "--port", "0", "--data-dir", str(blocker), cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == f"seed-agents: the data dir {blocker} is not a directory\n"
    code, out, err = seed_agents("serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
                                 "--db-path", str(blocker / "agents.sqlite"), cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == f"seed-agents: the database folder {blocker} is not a directory\n"
    code, out, err = seed_agents("serve", "--port", "0", "--data-dir", str(blocker / "sub"), cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err.startswith(f"seed-agents: cannot create the data dir {blocker / 'sub'}: ")
    assert "Traceback" not in err and err.count("\n") == 1


def test_sqlite_storage_url_sets_the_database_file():
    cfg = load_config(None, env={"SEED_AGENTS_STORAGE_URL": "sqlite:/tmp/x/a.sqlite",
                                 "SEED_AGENTS_DATA_DIR": "/tmp/y"})
    assert (cfg.db_path, cfg.data_dir) == ("/tmp/x/a.sqlite", "/tmp/y")
    assert load_config(None, env={"SEED_AGENTS_STORAGE_URL": "sqlite:///abs/b.sqlite"}).db_path == "/abs/b.sqlite"
    assert load_config(None, env={"SEED_AGENTS_DATA_DIR": "/d"}).db_path == "/d/agents.sqlite"
    pg = load_config(None, env={"SEED_AGENTS_STORAGE_URL": "postgres://u:hunter2@h/d"}).storage_url
    assert pg.is_postgresql and "hunter2" not in f"{pg} {pg!r}"


def test_flags_win_over_variables_which_win_over_defaults():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = load_config(parser.parse_args(["--port", "8080"]),
                      env={"SEED_AGENTS_HTTP_PORT": "3999", "SEED_AGENTS_HTTP_HOSTNAME": "0.0.0.0"})
    assert (cfg.host, cfg.port, cfg.log_level) == ("0.0.0.0", 8080, "INFO")
    assert load_config(parser.parse_args([]), env={"SEED_AGENTS_HTTP_PORT": "3999"}).port == 3999


def test_make_run_passes_only_what_the_user_set():
    def planned(*args: str, **env: str) -> str:
        full_env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "DATA_DIR")}
        proc = subprocess.run(["make", "-n", "-W", "pyproject.toml", "run", *args], cwd=str(ROOT),
                              env=dict(full_env, **env), capture_output=True, text=True, timeout=30)
        return [line for line in proc.stdout.splitlines() if "seed-agents serve" in line][0].split()

    assert planned()[1:] == ["serve"]
    assert planned("PORT=8080", "HOST=0.0.0.0")[1:] == ["serve", "--host", "0.0.0.0", "--port", "8080"]
    assert planned(SEED_AGENTS_HTTP_PORT="3999")[1:] == ["serve"]   # the variable reaches the server
