"""`seed-agents import`: the real command on a real reference data directory (made by the
reference's own code, tests/reference_data/), then a real server child process reading the
imported data over the wire, answering the desktop's reads as the reference answered them
(tests/reference_data/fixture/answers.json), on SQLite and PostgreSQL."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.keys import Keypair
from tests.procs import ROOT, ServerProcess
from tests.reference_data.grow import FIXTURE, copy_fixture, grow
from tests.waiting import until_sync

ANSWERS = json.loads((FIXTURE / "answers.json").read_text())
OWNER = Keypair.from_seed(bytes([7] * 32))    # make_fixture.ts's fixed keys
GUEST = Keypair.from_seed(bytes([9] * 32))


def run_import(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "seed_agents", "import", *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=timeout)


def target(tmp_path: Path, storage: str, request) -> list[str]:
    args = ["--data-dir", str(tmp_path / "ours")]
    if storage == "postgresql":
        args += ["--storage-url", request.getfixturevalue("postgres_url")]
    return args


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def summary(out: str) -> dict[str, tuple[int, int, int, int]]:
    """TABLE -> (in reference, imported, already here, skipped) from the summary table."""
    rows = {}
    for line in out.splitlines():
        parts = line.rsplit(None, 4)
        if len(parts) == 5 and all(p.isdigit() for p in parts[1:]):
            rows[parts[0]] = tuple(int(p) for p in parts[1:])
    return rows


def same_fields(ours: dict, theirs: dict, where: str, ignore=()) -> None:
    """Every field the reference answered, answered the same here (we may add fields)."""
    for key, value in theirs.items():
        if key in ignore:
            continue
        assert ours.get(key) == value, f"{where}.{key}: ours {ours.get(key)!r}, the reference's {value!r}"


async def desktop_reads(url: str) -> None:
    """The desktop's reads on the imported server, against what the reference answered."""
    async with AgentsClient.connect(url, OWNER) as c:
        agents = {a["id"]: a for a in (await c.call({"_": "ListAgents"}))["agents"]}
        assert set(agents) == {a["id"] for a in ANSWERS["agents"]}
        for theirs in ANSWERS["agents"]:
            same_fields(agents[theirs["id"]], theirs, "ListAgents", ignore=("stateDir",))
        for agent_id, theirs in ANSWERS["sessionLists"].items():
            ours = {s["id"]: s for s in (await c.call({"_": "ListSessions", "agentId": agent_id}))["sessions"]}
            assert set(ours) == {s["id"] for s in theirs}
            for s in theirs:
                same_fields(ours[s["id"]], s, "ListSessions")
            memory = (await c.call({"_": "ListAgentMemory", "agentId": agent_id}))["entries"]
            # updatedAt is the file's time on disk, which a git checkout does not keep.
            shape = [(e["path"], e["type"], e["size"], e.get("mimeType")) for e in ANSWERS["memory"][agent_id]]
            assert [(e["path"], e["type"], e["size"], e.get("mimeType")) for e in memory] == shape
            triggers = {t["id"]: t for t in (await c.call({"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"]}
            for t in ANSWERS["triggers"][agent_id]:
                same_fields(triggers[t["id"]], t, "ListAgentTriggers")
            tools = {t["name"]: t for t in (await c.call({"_": "ListAgentTools", "agentId": agent_id}))["tools"]}
            for t in ANSWERS["tools"][agent_id]:
                assert tools[t["name"]]["cid"] == t["cid"], t["name"]
                same_fields(tools[t["name"]], t, "ListAgentTools", ignore=("createdAt", "updatedAt"))
        for session_id, theirs in ANSWERS["sessions"].items():
            got = await c.call({"_": "GetSession", "sessionId": session_id})
            assert got["events"] == theirs["events"]      # every event, same ids, same seq, same payload
            same_fields(got["session"], theirs["session"], "GetSession")
            # A desktop that kept afterSeq goes on where it was.
            later = await c.call({"_": "GetSession", "sessionId": session_id, "afterSeq": 5})
            assert later["events"] == [e for e in theirs["events"] if e["seq"] > 5]
        memory_file = await c.call({"_": "ReadAgentMemoryFile", "agentId": ANSWERS["agents"][-1]["id"],
                                    "path": "profile.md"})
        assert memory_file["file"]["content"] == "# Profile\n\nLikes short answers.\n"
        providers = (await c.call({"_": "ListModelProviders"}))["providers"]
        assert [p for p in providers if p["name"] == "scripted"][0]["hasSecrets"] is True
        identities = (await c.call({"_": "ListSigningIdentities"}))["identities"]
        assert [i["label"] for i in identities] == ["Fixture writer"]
    # The collaborator the owner invited reads the shared agent as a writer.
    async with AgentsClient.connect(url, GUEST) as c:
        shared = [a for a in (await c.call({"_": "ListAgents"}))["agents"] if a["accessRole"] == "writer"]
        assert [a["definition"]["name"] for a in shared] == ["Helper"]


def remembered_answers(ref: Path) -> list[tuple[str, str, dict, dict]]:
    """(action, client id, request, response) of each answer the reference remembers."""
    import cbor2
    with sqlite3.connect(f"file:{ref / 'agents.sqlite'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT action, client_request_id, request_cbor, response_cbor FROM action_idempotency"
                          " ORDER BY created_at").fetchall()
    return [(a, cid, {k: v for k, v in cbor2.loads(req).items() if v is not cbor2.undefined}, cbor2.loads(resp))
            for a, cid, req, resp in rows]


async def retried_requests(url: str, remembered: list) -> None:
    """A desktop that sent CreateSession to the reference and lost the answer retries it against
    the imported server, as the desktop does (a new ts, the same clientRequestId): it gets the
    reference's answer, and no second session is made."""
    (action, client_id, request, response), = remembered   # the fixture's one: make_fixture.ts's 'fixture-chat'
    assert (action, client_id) == ("CreateSession", "fixture-chat")
    async with AgentsClient.connect(url, OWNER) as c:
        listed = {s["id"] for s in (await c.call({"_": "ListSessions", "agentId": request["agentId"]}))["sessions"]}
        assert response["sessionId"] in listed
        again = await c.call({"_": "CreateSession", **request, "clientRequestId": client_id})
        assert again == response
        after = {s["id"] for s in (await c.call({"_": "ListSessions", "agentId": request["agentId"]}))["sessions"]}
        assert after == listed
        # The same id with another request is refused, as the reference refuses it.
        with pytest.raises(AgentsError) as refused:
            await c.call({"_": "CreateSession", **request, "title": "Another", "clientRequestId": client_id})
        assert refused.value.status == 409


@pytest.mark.parametrize("storage", ["sqlite", "postgresql"])
def test_import_then_a_server_answers_the_desktop_as_the_reference_did(tmp_path, storage, request):
    ref = copy_fixture(tmp_path / "ref")
    before = digest(ref / "agents.sqlite")
    where = target(tmp_path, storage, request)
    done = run_import(str(ref), *where)
    assert done.returncode == 0, done.stderr + done.stdout
    table = summary(done.stdout)
    with sqlite3.connect(f"file:{ref / 'agents.sqlite'}?mode=ro", uri=True) as db:
        events, sessions = db.execute("SELECT (SELECT count(*) FROM session_events),"
                                      " (SELECT count(*) FROM sessions)").fetchone()
    assert table["events"] == (events, events, 0, 0) and table["sessions"] == (sessions, sessions, 0, 0)
    assert table["tool documents"][1] == 1 and table["idempotency"] == (1, 1, 0, 0)
    assert "check: counts and a sample of contents match the reference" in done.stdout
    assert "events/s" in done.stderr
    assert digest(ref / "agents.sqlite") == before   # the reference is only read

    again = run_import(str(ref), *where)   # twice is the same as once
    assert again.returncode == 0, again.stderr
    for name, (seen, new, present, skipped) in summary(again.stdout).items():
        assert new == 0 and present + skipped == seen, name

    extra = ["--storage-url", where[-1]] if storage == "postgresql" else []
    srv = ServerProcess(tmp_path / "ours", extra=extra).start()
    try:
        asyncio.run(desktop_reads(srv.url))
        asyncio.run(retried_requests(srv.url, remembered_answers(ref)))
    finally:
        srv.terminate()


def test_dry_run_says_what_would_come_and_writes_nothing(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    done = run_import(str(ref), "--dry-run", "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 0, done.stderr
    assert "WOULD COME" in done.stdout
    table = summary(done.stdout)
    assert table["events"][1] == table["events"][0] > 0
    assert table["idempotency"] == (1, 1, 0, 0)
    assert "a builtin: this server keeps its own builtin documents" in done.stdout
    assert not (tmp_path / "ours").exists()


def test_a_killed_import_resumes_to_the_same_store(tmp_path):
    ref = tmp_path / "ref"
    total = grow(ref, 20_000)
    ours = tmp_path / "ours"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "seed_agents", "import", str(ref), "--data-dir", str(ours),
                             "--batch-events", "7"], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)

    def some_events() -> bool:
        try:
            db = sqlite3.connect(f"file:{ours / 'agents.sqlite'}?mode=ro", uri=True, timeout=0.2)
            try:
                return db.execute("SELECT count(*) FROM session_events").fetchone()[0] > 500
            finally:
                db.close()
        except sqlite3.Error:
            return False
    try:
        until_sync(some_events, 120, step=0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    done = run_import(str(ref), "--data-dir", str(ours))
    assert done.returncode == 0, done.stderr + done.stdout
    events = summary(done.stdout)["events"]
    assert events[0] == total and events[1] + events[2] == total and events[2] > 500
    db = sqlite3.connect(ours / "agents.sqlite")
    try:
        assert db.execute("SELECT count(*) FROM session_events").fetchone()[0] == total
        # Dense seq per session, none repeated, none missing.
        assert db.execute("SELECT count(*) FROM sessions s WHERE last_seq <> (SELECT count(*) FROM session_events e"
                          " WHERE e.session_id = s.id)").fetchone()[0] == 0
    finally:
        db.close()


def test_two_imports_at_once_into_one_postgresql_database_leave_one_copy(tmp_path, request):
    url = request.getfixturevalue("postgres_url")
    ref = tmp_path / "ref"
    total = grow(ref, 3_000)
    env = dict(os.environ, PYTHONPATH=str(ROOT), SEED_AGENTS_SECRETS_KEY="A" * 43 + "=")
    procs = [subprocess.Popen([sys.executable, "-m", "seed_agents", "import", str(ref), "--storage-url", url,
                               "--data-dir", str(tmp_path / f"d{i}"), "--batch-events", "50"], cwd=str(ROOT), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err + out
    tables = [summary(out) for out, _ in outs]
    assert tables[0]["events"][1] + tables[1]["events"][1] == total   # each event written once
    import psycopg
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM session_events").fetchone()[0] == total
        assert conn.execute("SELECT count(*) FROM agents").fetchone()[0] == 2


# -- bad input -------------------------------------------------------------------------------------
def test_a_damaged_or_foreign_reference_is_refused_in_one_sentence(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    db = ref / "agents.sqlite"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])   # truncated
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 2 and "refused" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ours").exists()
    db.write_bytes(os.urandom(8192))
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 2 and "is not a readable SQLite database" in done.stderr, done.stderr
    done = run_import(str(tmp_path / "nowhere"), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 2 and "holds no reference database" in done.stderr


def test_a_newer_reference_schema_is_refused_naming_its_version(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    with sqlite3.connect(ref / "agents.sqlite") as db:
        db.execute("UPDATE server_config SET value = '99' WHERE key = 'schema_migration_version'")
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 2, done.stderr
    assert "reference schema version 99 is newer than the version this import reads (15)" in done.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])   # checked in the import process, and in worker processes
def test_a_hostile_event_stops_the_import_naming_the_row_and_keeps_whole_units(tmp_path, jobs):
    ref = copy_fixture(tmp_path / "ref")
    with sqlite3.connect(ref / "agents.sqlite") as db:
        sid, count = db.execute("SELECT session_id, count(*) FROM session_events GROUP BY session_id"
                                " ORDER BY 2 DESC LIMIT 1").fetchone()
        # A map header promising a million entries, then nothing: not DAG-CBOR.
        db.execute("UPDATE session_events SET event_cbor = x'ba000f4240' WHERE session_id = ? AND seq = 9", (sid,))
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"), "--batch-events", "4", "--jobs", jobs)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"session_events row session_id='{sid}', seq=9: event_cbor is not valid DAG-CBOR" in done.stderr
    assert "Traceback" not in done.stderr
    with sqlite3.connect(tmp_path / "ours" / "agents.sqlite") as db:
        # Batches of 4: seq 1-8 went in whole; nothing of the batch holding the bad row.
        assert db.execute("SELECT last_seq, (SELECT count(*) FROM session_events WHERE session_id = ?)"
                          " FROM sessions WHERE id = ?", (sid, sid)).fetchone() == (8, 8)
    # A missing event (seq 6 of the session gone) is refused the same way, naming the next one.
    with sqlite3.connect(ref / "agents.sqlite") as db:
        db.execute("UPDATE session_events SET event_cbor = x'a0' WHERE session_id = ? AND seq = 9", (sid,))
        db.execute("DELETE FROM session_events WHERE session_id = ? AND seq = 6", (sid,))
    done = run_import(str(ref), "--data-dir", str(tmp_path / "fresh"), "--batch-events", "4", "--jobs", jobs)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"session_events row session_id='{sid}', seq=7: the seq numbers of session '{sid}' jump from 5 to 7"
            in done.stderr), done.stderr
    assert "Traceback" not in done.stderr


def test_a_row_that_breaks_our_rules_is_reported_and_skipped(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    import cbor2
    with sqlite3.connect(ref / "agents.sqlite") as db:
        agent_id, = db.execute("SELECT id FROM agents ORDER BY created_at DESC LIMIT 1").fetchone()
        db.execute("UPDATE agents SET definition_cbor = ? WHERE id = ?",
                   (cbor2.dumps({"name": 7, "systemPrompt": "x", "modelProvider": "p", "model": "m"}), agent_id))
        db.execute("UPDATE model_providers SET config_cbor = ?", (cbor2.dumps("not a map"),))
        owner, = db.execute("SELECT account_id FROM agents WHERE id = ?", (agent_id,)).fetchone()
        remembered = [("ImportSigningIdentity", "with-seed", {"label": "x"}, {"_": "ImportSigningIdentityResponse"}),
                      ("CreateSession", "gone", {"agentId": agent_id}, {"_": "CreateSessionResponse", "sessionId": "s"}),
                      ("CreateSession", "odd", {"agentId": agent_id}, {"_": "Error"})]
        db.executemany("INSERT INTO action_idempotency (account_id, action, client_request_id, request_cbor,"
                       " response_cbor, created_at) VALUES (?, ?, ?, ?, ?, 1)",
                       [(owner, a, cid, cbor2.dumps(req), cbor2.dumps(resp)) for a, cid, req, resp in remembered])
    other, = [a["id"] for a in ANSWERS["agents"] if a["id"] != agent_id]
    deep = ref / "agents" / other / "memory" / Path(*["d"] * 20)
    deep.mkdir(parents=True)
    (deep / "too-deep.md").write_text("nested past our depth")
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 0, done.stderr + done.stdout
    table = summary(done.stdout)
    assert table["agents"] == (2, 1, 0, 1) and table["providers"] == (1, 0, 0, 1)
    assert table["memory files"][3] == 1 and "Memory path is nested too deeply" in done.stdout
    assert f"agents row id='{agent_id}': breaks this server's rules: CreateAgent.definition.name" in done.stdout
    assert table["idempotency"][0] == 4 and table["idempotency"][3] >= 3
    assert (f"client_request_id='with-seed': the reference keeps this request without its seed, so a retry could "
            "not be matched to it") in done.stdout
    assert f"client_request_id='gone': its agentId '{agent_id}' was not imported" in done.stdout
    assert "client_request_id='odd': its response is not a CreateSessionResponse" in done.stdout
    with sqlite3.connect(tmp_path / "ours" / "agents.sqlite") as db:
        assert db.execute("SELECT count(*) FROM agents WHERE id = ?", (agent_id,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM sessions WHERE agent_id = ?", (agent_id,)).fetchone()[0] == 0


def test_a_server_started_on_a_reference_database_says_to_import_it(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "seed_agents", "serve", "--port", "0", "--data-dir", str(ref),
                           "--code-exec", "off"], cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert (f"a reference (TypeScript) Seed agents server's database, which this server does not run on; bring its "
            f"data into a new data dir with `seed-agents import {ref} --data-dir NEW_DIR`") in done.stderr
    assert "Traceback" not in done.stderr


def test_a_secret_that_does_not_open_stops_the_import_and_never_shows_a_value(tmp_path):
    ref = copy_fixture(tmp_path / "ref")
    with sqlite3.connect(ref / "agents.sqlite") as db:
        db.execute("UPDATE server_config SET value = ? WHERE key = 'secret_encryption_key_v1'", (bytes(32),))
    done = run_import(str(ref), "--data-dir", str(tmp_path / "ours"))
    assert done.returncode == 2
    assert "the secret does not open with the reference's key" in done.stderr
    assert "sk-fixture" not in done.stderr + done.stdout
