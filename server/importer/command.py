"""`seed-agents import REFERENCE_DATA_DIR`: the units, progress, summary and check.

Each unit (an account's providers and secrets, an agent with its collaborators, triggers and
tools, a batch of memory files, a batch of sessions, a batch of one session's events, a batch
of runs, ...) is one write job: it commits whole or not at all. Every row keeps its reference
id, and every insert leaves a row already here alone (server/store/imports.py), so running the
command again, after a crash, a Ctrl-C or to completion, writes only what is missing.
"""
from __future__ import annotations

import argparse
import collections
import gc
import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.file_rules import (MAX_SESSION_ATTACHMENT_BYTES, attachment_name, infer_mime_type,
                                             memory_path)

from ..config import SETTINGS, ConfigError, load_config
from ..database import database_for
from ..database.errors import SchemaGateError, StorageError
from ..store import attachments as attachments_q
from ..store import blobs as blobs_q
from ..store import codec, key_check
from ..store import imports as q
from ..store import memory as memory_q
from ..store.identities import identity_aad
from ..store.secrets import SecretBox, SecretsKeyError, load_secrets_key
from ..store.secrets_table import secret_aad
from ..store.errors import Refused
from ..triggers import schedule as sched
from . import convert, events
from .convert import Skip
from .reference import MAX_FILE_BYTES, Reference, ReferenceError, read_file, row_name

PROG = "seed-agents import"
EVENT_BATCH = 20000
ROW_BATCH = 500
SESSION_BATCH = 5000   # session rows are small, and a commit each 500 cost more than they did
MEMORY_BATCH_BYTES = 8 << 20
SAMPLE_SESSIONS = 20


@dataclass
class Table:
    """What became of one table's rows."""
    seen: int = 0
    new: int = 0
    present: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def skip(self, what: str, why: str) -> None:
        self.skipped += 1
        if len(self.reasons) < 5:
            self.reasons.append(f"{what}: {why}")


class Report:
    ORDER = ("accounts", "signers", "providers", "secrets", "signing identities", "agents", "collaborators",
             "triggers", "tool documents", "memory files", "sessions", "events", "attachments", "runs",
             "run journal", "run waits", "trigger firings", "activity watermarks", "idempotency", "drafts")

    def __init__(self) -> None:
        self.tables = {name: Table() for name in self.ORDER}

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]

    def table(self, dry_run: bool) -> str:
        head = ("TABLE", "IN REFERENCE", "WOULD COME" if dry_run else "IMPORTED", "ALREADY HERE", "SKIPPED")
        rows = [head] + [(n, str(t.seen), str(t.new), str(t.present), str(t.skipped))
                         for n, t in self.tables.items()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        for name, t in self.tables.items():
            if t.skipped:
                lines.append(f"{name}: {t.skipped} skipped, for example:")
                lines.extend(f"  - {r}" for r in t.reasons)
        return "\n".join(lines)


class Progress:
    """One line on stderr, rewritten in place on a terminal (else a line every few seconds):
    counts and the rate of events."""

    def __init__(self, total_events: int, stream=sys.stderr) -> None:
        self.total = total_events
        self.stream = stream
        self.tty = stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.events = 0
        self.phase = ""

    def show(self, phase: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        rate = self.events / max(now - self.start, 1e-6)
        pct = f" ({100 * self.events // self.total}%)" if self.total else ""
        line = f"importing {phase}: events {self.events:,}/{self.total:,}{pct}, {rate:,.0f} events/s"
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def done(self) -> float:
        elapsed = time.monotonic() - self.start
        if self.tty:
            self.stream.write("\n")
        return elapsed


class Importer:
    def __init__(self, ref: Reference, db, box: SecretBox | None, data_dir: str, *, dry_run: bool,
                 event_batch: int = EVENT_BATCH, pool=None, jobs: int = 1, out=sys.stdout,
                 err=sys.stderr) -> None:
        self.ref, self.db, self.box, self.data_dir = ref, db, box, data_dir
        self.dry = dry_run
        self.event_batch = event_batch
        self.pool, self.jobs = pool, jobs   # worker processes checking events (events.pool), or None
        self.report = Report()
        self.out, self.err = out, err
        self.progress = Progress(ref.count("session_events"), err)
        self.agents: dict[str, dict] = {}        # imported (or already here): agent id -> reference row
        self.sessions: dict[str, dict] = {}      # session id -> reference row
        self.runs: set[str] = set()
        self.now = int(time.time() * 1000)

    def write(self, fn, *args):
        return None if self.dry else self.db.write_sync(fn, *args)

    def _note(self, table: str, new: bool | None) -> None:
        t = self.report[table]
        if new is None or new:
            t.new += 1
        else:
            t.present += 1

    # -- the whole import ----------------------------------------------------------------------
    def run(self) -> None:
        self.accounts()
        self.secrets_and_providers()
        self.agent_units()
        self.session_units()
        self.run_units()
        self.firing_units()
        self.idempotency_units()
        elapsed = self.progress.done()
        rate = self.progress.events / elapsed if elapsed > 0 else 0.0
        self.out.write(self.report.table(self.dry) + "\n")
        self.out.write(f"{'read' if self.dry else 'imported'} {self.progress.events:,} events in {elapsed:.1f} s "
                       f"({rate:,.0f} events/s)\n")

    def accounts(self) -> None:
        rows = list(self.ref.rows("accounts"))
        t = self.report["accounts"]
        t.seen = len(rows)

        def job(conn, part):
            return [q.account(conn, r["id"], r["created_at"]) for r in part]
        for start in range(0, len(rows), ROW_BATCH):
            part = rows[start:start + ROW_BATCH]
            for new in (self.write(job, part) or [None] * len(part)):
                self._note("accounts", new)
        signers = list(self.ref.rows("account_authorizations"))
        self.report["signers"].seen = len(signers)
        for r in signers:
            role = str(r["role"]).lower()
            if role not in ("owner", "agent"):
                self.report["signers"].skip(row_name("account_authorizations", r), f"its role {r['role']!r} is unknown")
                continue
            cap = r["capability"]
            capability = bytes(cap) if isinstance(cap, (bytes, bytearray)) else None
            self._note("signers", self.write(q.signer, r["account_id"], r["signer"], role, capability, r["created_at"]))
        self.progress.show("accounts")

    def secrets_and_providers(self) -> None:
        providers = list(self.ref.rows("model_providers"))
        self.report["providers"].seen = len(providers)
        for r in providers:
            try:
                config = convert.provider_config(r)
            except Skip as exc:
                self.report["providers"].skip(row_name("model_providers", r), str(exc))
                continue
            self._note("providers", self.write(q.provider, r["account_id"], r["name"], codec.encode(config), r["id"],
                                               r["created_at"], r["updated_at"]))
        for r in self.ref.rows("secrets"):
            metadata = convert.cbor(r, "secrets", "metadata_cbor", optional=True)
            kind = "signing identities" if convert.identity_of(metadata) else "secrets"
            t = self.report[kind]
            t.seen += 1
            plain = self.ref.open_secret(r)
            try:
                if kind == "secrets":
                    sealed = self.box.seal(plain, secret_aad(r["account_id"], r["name"])) if self.box else b""
                    self._note(kind, self.write(q.secret, r["account_id"], r["name"], sealed, convert.enc(metadata),
                                                r["id"], r["created_at"], r["updated_at"]))
                    continue
                assert isinstance(metadata, dict)   # identity_of said so
                name, identity_id, label, server_url = convert.identity(r, plain, metadata)
                sealed = self.box.seal(plain, identity_aad(r["account_id"], name)) if self.box else b""
                self._note(kind, self.write(q.identity, r["account_id"], name, r["id"], identity_id, sealed, label,
                                            server_url, r["created_at"], r["updated_at"]))
            except Skip as exc:
                t.skip(row_name("secrets", r), str(exc))
            finally:
                plain = b""   # the plaintext goes no further than the seal
        self.progress.show("secrets")

    def agent_units(self) -> None:
        rows = list(self.ref.rows("agents", order="created_at, id"))
        self.report["agents"].seen = len(rows)
        collaborators = _group(self.ref.rows("agent_collaborators"), "agent_id")
        triggers = _group(self.ref.rows("agent_triggers", order="created_at, id"), "agent_id")
        tools = _group(self.ref.rows("tool_documents", order="created_at, name"), "agent_id")
        self.report["collaborators"].seen = sum(map(len, collaborators.values()))
        self.report["triggers"].seen = sum(map(len, triggers.values()))
        self.report["tool documents"].seen = sum(map(len, tools.values()))
        drafts = _group(self.ref.rows("agent_drafts", order="created_at, id"), "agent_id")
        self.report["drafts"].seen = sum(map(len, drafts.values()))
        for d in drafts.pop(None, []):
            self.report["drafts"].skip(row_name("agent_drafts", d), "it belongs to no agent")
        for r in rows:
            try:
                definition = convert.definition(r)
                if r["status"] not in ("idle", "running", "stopped", "error"):
                    raise Skip(f"its status {r['status']!r} is not an agent status here")
            except Skip as exc:
                self.report["agents"].skip(row_name("agents", r), str(exc))
                for table, group in (("collaborators", collaborators), ("triggers", triggers),
                                     ("tool documents", tools), ("drafts", drafts)):
                    for _ in group.get(r["id"], ()):
                        self.report[table].skip(f"of agent {r['id']!r}", "its agent was not imported")
                continue
            unit = self._agent_unit(r, definition, collaborators.get(r["id"], []), triggers.get(r["id"], []),
                                    tools.get(r["id"], []), drafts.get(r["id"], []))
            results = self.write(_apply, unit) or [None] * len(unit)
            for (table, *_), new in zip(unit, results):
                self._note(table, new)
            self.agents[r["id"]] = r
            self.memory_unit(r)
            self.progress.show("agents")

    def _agent_unit(self, r: dict, definition: dict, collaborators: list, triggers: list, tools: list,
                    drafts: list) -> list:
        """[(report table, store function, args...)], written in one transaction."""
        state_dir = os.path.join(self.data_dir, "agents", r["id"])
        unit: list = [("agents", q.agent, r["id"], r["account_id"], codec.encode(definition), state_dir,
                       "idle" if r["status"] == "running" else r["status"], bool(r["public_read"]),
                       r["created_at"], r["updated_at"])]
        for c in collaborators:
            if c["role"] not in ("reader", "writer") or c["status"] not in ("pending", "accepted"):
                self.report["collaborators"].skip(row_name("agent_collaborators", c), "its role or status is unknown")
                continue
            unit.append(("collaborators", q.collaborator, c["agent_id"], c["account_id"], c["role"], c["status"],
                         c["accepted_at"], c["created_at"], c["updated_at"]))
        for t in triggers:
            try:
                name, source, prompt, continuation, enabled = convert.trigger(t)
            except Skip as exc:
                self.report["triggers"].skip(row_name("agent_triggers", t), str(exc))
                continue
            due = None
            if enabled and source["type"] == "schedule":
                try:
                    due = sched.first_slot(source["schedule"], self.now)
                except sched.ScheduleError as exc:
                    self.report["triggers"].skip(row_name("agent_triggers", t), f"its schedule: {exc}")
                    continue
            unit.append(("triggers", q.trigger, (t["id"], t["account_id"], t["agent_id"], name, int(enabled),
                                                 source["type"], codec.encode(source), codec.encode(prompt),
                                                 convert.enc(continuation), t["created_at"], t["updated_at"],
                                                 t["last_checked_at"], t["last_fired_at"], t["last_error"], due)))
        for d in tools:
            if d["kind"] != "lambda":
                # This server writes its own builtin documents (with its own contracts) for every agent.
                self.report["tool documents"].skip(row_name("tool_documents", d),
                                                   "a builtin: this server keeps its own builtin documents")
                continue
            try:
                doc = convert.tool_document(d)
            except Skip as exc:
                self.report["tool documents"].skip(row_name("tool_documents", d), str(exc))
                continue
            unit.append(("tool documents", q.tool_document, d["account_id"], d["agent_id"], d["name"], "lambda",
                         d["cid"], doc, bool(d["enabled"]), d["created_at"], d["updated_at"]))
        for d in drafts:
            try:
                unit.append(("drafts", q.draft, convert.draft(d)))
            except Skip as exc:
                self.report["drafts"].skip(row_name("agent_drafts", d), str(exc))
        return unit

    def memory_unit(self, r: dict) -> None:
        t = self.report["memory files"]
        folder = self.ref.agent_dir(r["id"], r["state_dir"])
        batch: list = []
        size = 0
        for disk in self.ref.memory_files(folder):
            t.seen += 1
            try:
                path = memory_path(disk.path)
            except (ProtocolError, Refused) as exc:
                t.skip(f"memory file {disk.path!r} of agent {r['id']!r}", exc.message)
                continue
            if disk.size > MAX_FILE_BYTES:
                t.skip(f"memory file {disk.path!r} of agent {r['id']!r}", f"it is over {MAX_FILE_BYTES} bytes")
                continue
            batch.append((path, disk))
            size += disk.size
            if size >= MEMORY_BATCH_BYTES or len(batch) >= ROW_BATCH:
                self._memory_batch(r, batch)
                batch, size = [], 0
        if batch:
            self._memory_batch(r, batch)

    def _memory_batch(self, r: dict, batch: list) -> None:
        files = [(path, read_file(disk), disk.mtime_ms) for path, disk in batch]

        def job(conn):
            out: list = []
            for path, data, mtime in files:
                if q.memory_present(conn, r["id"], path):
                    out.append(False)   # never over a file already here (the owner may have changed it)
                    continue
                try:   # (its checks come before any write of its own)
                    memory_q.write_file(conn, r["id"], r["account_id"], path, data, mtime)
                except Refused as exc:
                    out.append(exc.message)
                    continue
                out.append(True)
            return out
        for (path, _, _), new in zip(files, self.write(job) or [None] * len(files)):
            if isinstance(new, str):
                self.report["memory files"].skip(f"memory file {path!r} of agent {r['id']!r}", new)
            else:
                self._note("memory files", new)

    def session_units(self) -> None:
        rows = list(self.ref.rows("sessions", order="created_at, id"))
        t = self.report["sessions"]
        t.seen = len(rows)
        self.report["events"].seen = self.progress.total
        by_id = {r["id"]: r for r in rows}
        ordered: list[dict] = []
        placed: set[str] = set()
        for r in rows:   # a parent before its children, whatever the times say
            chain = []
            while r is not None and r["id"] not in placed and r not in chain:
                chain.append(r)
                r = by_id.get(r["parent_session_id"])
            for c in reversed(chain):
                placed.add(c["id"])
                ordered.append(c)
        batch: list[tuple] = []
        for r in ordered:
            try:
                if r["agent_id"] not in self.agents:
                    raise Skip("its agent was not imported")
                if r["parent_session_id"] is not None and r["parent_session_id"] not in self.sessions:
                    raise Skip("its parent session was not imported")
                batch.append(convert.session(r))
            except Skip as exc:
                t.skip(row_name("sessions", r), str(exc))
                self.report["events"].skip(f"of session {r['id']!r}", "its session was not imported")
                continue
            self.sessions[r["id"]] = r
        for start in range(0, len(batch), SESSION_BATCH):
            part = batch[start:start + SESSION_BATCH]
            results = self.write(q.sessions, part) or [None] * len(part)
            for new in results:
                self._note("sessions", new)
        done = {} if self.dry else self.db.read(q.sessions_present, list(self.sessions))
        self.write_events(self.event_tasks(done))
        for r in self.sessions.values():
            self.attachment_unit(r)

    def event_tasks(self, done: dict[str, int]) -> Iterator[list[tuple[str, str, int, int]]]:
        """The events past each session's `last_seq` here, as units of at most `event_batch`
        events: lists of pieces (session id, agent id, after seq, up to seq), sessions in id
        order (the order of our primary key, so a unit's rows go into the table in its order).
        A unit may span sessions (short sessions would otherwise cost a transaction each) and
        commits whole."""
        spans = self.ref.event_spans()
        task: list[tuple[str, str, int, int]] = []
        size = 0
        for sid in sorted(self.sessions):
            after = done.get(sid, 0)
            self.report["events"].present += after
            self.progress.events += after
            top, agent_id = spans.get(sid, 0), self.sessions[sid]["agent_id"]
            while after < top:
                take = min(top - after, self.event_batch - size)
                task.append((sid, agent_id, after, after + take))
                size += take
                after += take
                if size >= self.event_batch:
                    yield task
                    task, size = [], 0
        if task:
            yield task

    def write_events(self, tasks: Iterator[list]) -> None:
        """Each unit checked (by the worker processes when there are any, a few units ahead of
        the writer, never more: memory stays bounded) and written in order; the first row that
        fails a check stops the import, the units before it committed."""
        if self.pool is None:
            checked: Iterator[list] = (events.check_task(task, self.ref.db) for task in tasks)
        else:
            checked = _ahead(self.pool, tasks, 2 * self.jobs)
        t = self.report["events"]
        # Without the cycle collector meanwhile: each event makes a few containers (its decoded
        # payload), which set off collections that walk every long-lived object (the session
        # rows) again and again; nothing here makes a cycle, refcounts free it all.
        gc.disable()
        try:
            for pending in checked:
                written = [len(piece[3]) for piece in pending] if self.dry else self.db.write_sync(
                    q.append_events, pending)
                for piece, n in zip(pending, written):
                    t.new += n
                    t.present += len(piece[3]) - n   # another import wrote them meanwhile
                    self.progress.events += len(piece[3])
                self.progress.show("events")
        finally:
            gc.enable()

    def attachment_unit(self, r: dict) -> None:
        t = self.report["attachments"]
        agent = self.agents[r["agent_id"]]
        for info, disk, problem in self.ref.attachments(self.ref.agent_dir(agent["id"], agent["state_dir"]), r["id"]):
            t.seen += 1
            what = f"attachment {disk.path!r} of session {r['id']!r}"
            if problem:
                t.skip(what, problem)
                continue
            if disk.size > MAX_SESSION_ATTACHMENT_BYTES:
                t.skip(what, f"it is over {MAX_SESSION_ATTACHMENT_BYTES} bytes")
                continue
            data = read_file(disk)
            if hashlib.sha256(data).hexdigest() != disk.path:
                t.skip(what, "its bytes do not hash to its name (damaged)")
                continue
            name = attachment_name(info.get("name") if isinstance(info.get("name"), str) else disk.path)
            mime = info.get("mimeType") if isinstance(info.get("mimeType"), str) else infer_mime_type(name)
            created = info.get("createdAt") if isinstance(info.get("createdAt"), int) else disk.mtime_ms

            def job(conn, data=data, name=name, mime=mime, created=created, key=disk.path):
                if q.attachment_present(conn, r["id"], key):
                    return False
                attachments_q.save(conn, r["id"], r["account_id"], name, mime, data, created)
                return True
            try:
                self._note("attachments", self.write(job))
            except (ProtocolError, Refused) as exc:
                t.skip(what, exc.message)

    def run_units(self) -> None:
        rows = list(self.ref.rows("runs", order="depth, created_at, id"))
        t = self.report["runs"]
        t.seen = len(rows)
        batch: list[dict] = []
        for r in rows:
            try:
                if r["agent_id"] not in self.agents:
                    raise Skip("its agent was not imported")
                if r["session_id"] is not None and r["session_id"] not in self.sessions:
                    raise Skip("its session was not imported")
                if r["parent_run_id"] is not None and r["parent_run_id"] not in self.runs:
                    raise Skip("its parent run was not imported")
                batch.append(convert.run(r))
            except Skip as exc:
                t.skip(row_name("runs", r), str(exc))
                continue
            self.runs.add(r["id"])
        for start in range(0, len(batch), ROW_BATCH):
            part = batch[start:start + ROW_BATCH]
            for new in (self.write(_apply, [("runs", q.run, row) for row in part]) or [None] * len(part)):
                self._note("runs", new)
        journal = self.report["run journal"]
        entries: dict[str, list] = {}
        for e in self.ref.rows("run_journal", order="run_id, seq"):
            journal.seen += 1
            if e["run_id"] not in self.runs:
                journal.skip(row_name("run_journal", e), "its run was not imported")
                continue
            entry = convert.cbor(e, "run_journal", "entry_cbor")
            entries.setdefault(e["run_id"], []).append((e["seq"], dagcbor.encode(entry), e["created_at"]))
        for run_id, items in entries.items():
            n = self.write(q.journal, run_id, items)
            journal.new += len(items) if n is None or n else 0
            journal.present += 0 if n is None or n else len(items)
        waits = self.report["run waits"]
        for w in self.ref.rows("run_event_waits"):
            waits.seen += 1
            if w["run_id"] not in self.runs:
                waits.skip(row_name("run_event_waits", w), "its run was not imported")
                continue
            match = convert.cbor(w, "run_event_waits", "match_cbor")
            self._note("run waits", self.write(q.wait, w["run_id"], w["wait_id"], w["account_id"],
                                                dagcbor.encode(match), w["timeout_at"], w["created_at"]))
        self.progress.show("runs")

    def firing_units(self) -> None:
        t = self.report["trigger firings"]
        triggers = {r["id"] for r in self.ref.rows("agent_triggers")}
        for f in self.ref.rows("trigger_firings", order="created_at, id"):
            t.seen += 1
            if f["agent_id"] not in self.agents or f["trigger_id"] not in triggers:
                t.skip(row_name("trigger_firings", f), "its agent or trigger was not imported")
                continue
            self._note("trigger firings", self.write(q.firing, convert.firing(f)))
        w = self.report["activity watermarks"]
        for m in self.ref.rows("activity_watermarks"):
            w.seen += 1
            cursor = convert.cbor(m, "activity_watermarks", "cursor_cbor")
            self._note("activity watermarks", self.write(q.watermark, (
                m["account_id"], m["server_url"], dagcbor.encode(cursor), m["last_poll_at"], m["last_success_at"],
                m["last_error"])))

    def idempotency_units(self) -> None:
        """The answers the reference remembers by client id, so a desktop retrying a request
        after the move gets the answer it missed rather than a second session, agent or turn. A
        record that names an agent or session not imported here is left behind (its retry would
        answer an id this server does not have)."""
        t = self.report["idempotency"]
        batch: list[tuple] = []
        for r in self.ref.rows("action_idempotency", order="created_at, account_id, action, client_request_id"):
            t.seen += 1
            try:
                fingerprint, response, action, answer = convert.idempotency(r)
                for key in ("agentId", "sessionId"):
                    for where in (action, answer):
                        named = where.get(key)
                        if isinstance(named, str) and named not in (self.agents if key == "agentId" else self.sessions):
                            raise Skip(f"its {key} {named!r} was not imported")
            except Skip as exc:
                t.skip(row_name("action_idempotency", r), str(exc))
                continue
            batch.append(("idempotency", q.idempotency, r["account_id"], r["action"], r["client_request_id"],
                          fingerprint, response, r["created_at"]))
        for start in range(0, len(batch), ROW_BATCH):
            part = batch[start:start + ROW_BATCH]
            for new in (self.write(_apply, part) or [None] * len(part)):
                self._note("idempotency", new)

    # -- the check -----------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Counts on both sides, then a sample of contents: events byte for byte in meaning,
        memory files by hash. Returns the differences, [] when all match."""
        problems: list[str] = []
        sids = list(self.sessions)
        per_session = self.ref.event_counts()
        expect_events = sum(per_session.get(s, 0) for s in sids)
        for table, column, ids, expected in (
                ("agents", "id", list(self.agents), len(self.agents)),
                ("sessions", "id", sids, len(sids)),
                ("session_events", "session_id", sids, expect_events),
                ("runs", "id", list(self.runs), len(self.runs))):
            got = self.db.read(q.counts, table, column, ids)
            if got != expected:
                problems.append(f"{table}: {expected} expected here, {got} found")
        rng = random.Random(0)
        for sid in rng.sample(sids, min(SAMPLE_SESSIONS, len(sids))):
            rows = self.ref.event_rows(sid, 0, 200)
            ours = self.db.read(q.event_bodies, sid, [r[1] for r in rows]) if rows else {}
            for event_id, seq, event_cbor, created_at in rows:
                body = ours.get(seq)
                if body is None:
                    problems.append(f"session {sid}: event {seq} is missing")
                    break
                stored = codec.decode(body)
                payload = convert.decode_cbor(event_cbor, "session_events", {"session_id": sid, "seq": seq},
                                              "event_cbor", undefined_as_null=True)[0]
                if stored.get("id") != event_id or stored.get("event") != payload or stored.get("createdAt") != created_at:
                    problems.append(f"session {sid}: event {seq} differs from the reference's")
                    break
        for agent_id, r in list(self.agents.items())[:SAMPLE_SESSIONS]:
            for disk in self.ref.memory_files(self.ref.agent_dir(agent_id, r["state_dir"])):
                try:
                    path = memory_path(disk.path)
                except (ProtocolError, Refused):
                    continue
                info = self.db.read(memory_q.file_info, agent_id, path)
                if info is None:
                    problems.append(f"agent {agent_id}: memory file {path} is missing")
                    continue
                ours, _ = blobs_q.sha256_of(lambda fn, *a: self.db.read(fn, *a), info.blob_id)
                if ours != hashlib.sha256(read_file(disk)).digest() and info.updated_at == disk.mtime_ms:
                    problems.append(f"agent {agent_id}: memory file {path} differs from the reference's")
        return problems


def _group(rows, key: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r[key], []).append(r)
    return out


def _stop(pool, importer: Importer) -> None:
    """The workers' end once every unit is written (before the check, which reads here)."""
    if pool is not None:
        pool.close()
        pool.join()
    importer.pool = None


def _ahead(pool, tasks: Iterator[list], depth: int) -> Iterator[list]:
    """The pool's results in task order, with at most `depth` tasks given out at a time."""
    inflight: collections.deque = collections.deque()
    for task in tasks:
        inflight.append(pool.apply_async(events.check_task, (task,)))
        if len(inflight) >= depth:
            yield inflight.popleft().get()
    while inflight:
        yield inflight.popleft().get()


def _apply(conn, unit: list) -> list[bool]:
    return [fn(conn, *args) for _table, fn, *args in unit]


# -- the command ---------------------------------------------------------------------------------
TARGET_FLAGS = ("--data-dir", "--db-path", "--storage-url")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Bring a reference (TypeScript) Seed agents server's data into this server's "
        "store: accounts, providers and secrets (sealed again under this server's key), signing identities, "
        "agents, collaborators, triggers, tools, memory, sessions with every event and seq, attachments, runs.",
        epilog="The reference database is only read. Safe to run again: it resumes after a crash or Ctrl-C and "
               "writes only what is missing. Exit status: 0 done, 1 the check found a difference, 2 the "
               "reference data or the target cannot be used, 130 interrupted.")
    parser.add_argument("reference", metavar="REFERENCE_DATA_DIR",
                        help="the reference server's data directory (holding agents.sqlite and agents/), "
                             "or its agents.sqlite")
    parser.add_argument("--dry-run", action="store_true",
                        help="read and check everything, write nothing, and say what would come over")
    parser.add_argument("--batch-events", type=int, default=EVENT_BATCH, metavar="N",
                        help=f"events per transaction (default {EVENT_BATCH})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="processes checking events while the import writes; 1 checks them in the import "
                             "process itself (default: the number of CPUs)")
    for s in SETTINGS:
        if s.flag in TARGET_FLAGS:
            parser.add_argument(s.flag, dest=s.attr, metavar=s.metavar, default=None,
                                help=f"where this server keeps its data, as for serve (env SEED_AGENTS_{s.env})")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 1 <= args.batch_events <= 1_000_000:
        print(f"{PROG}: --batch-events must be 1 to 1000000", file=sys.stderr)
        return 2
    if not 1 <= args.jobs <= 64:
        print(f"{PROG}: --jobs must be 1 to 64", file=sys.stderr)
        return 2
    try:
        config = load_config(argparse.Namespace(**{a: getattr(args, a, None) for a in ("data_dir", "db_path",
                                                                                         "storage_url")}))
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        ref = Reference(args.reference)
        ref.check()
    except ReferenceError as exc:
        print(f"{PROG}: refused: {exc}", file=sys.stderr)
        return 2
    db = lock = pool = None
    try:
        # The workers are forked before the store's writer thread exists (events.pool).
        pool = events.pool(args.jobs, ref.db_path) if args.jobs > 1 else None
        box = None
        if not args.dry_run:
            try:
                box = SecretBox(load_secrets_key(config.data_dir, os.environ))
            except SecretsKeyError as exc:
                print(f"{PROG}: {exc}", file=sys.stderr)
                return 2
            db = database_for(config)
            lock = db.process_lock()
            if lock is not None:
                lock.acquire()
            db.start_sync()
            if not db.write_sync(key_check.same_key, box):
                print(f"{PROG}: the target database's secrets were sealed with another secrets key than "
                      f"{config.data_dir}'s; use the server's own data dir or SEED_AGENTS_SECRETS_KEY", file=sys.stderr)
                return 2
        where = db.path if db is not None else "(nothing: --dry-run)"
        print(f"{'checking' if args.dry_run else 'importing'} {ref.db_path} (reference schema {ref.version}) "
              f"into {where}", file=sys.stderr)
        if db is not None:
            db.write_sync(q.bulk_settings)
        importer = Importer(ref, db, box, config.data_dir, dry_run=args.dry_run, event_batch=args.batch_events,
                            pool=pool, jobs=args.jobs)
        importer.run()
        _stop(pool, importer)
        pool = None
        if args.dry_run:
            return 0
        problems = importer.check()
        if problems:
            print("check: differences found:\n" + "\n".join(f"  - {p}" for p in problems))
            return 1
        print("check: counts and a sample of contents match the reference")
        return 0
    except ReferenceError as exc:
        print(f"\n{PROG}: stopped: {exc}; what was written before it is kept, and nothing of the row's unit",
              file=sys.stderr)
        return 2
    except (StorageError, SchemaGateError, OSError) as exc:
        print(f"\n{PROG}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; every finished unit is kept: run the same command again to go on",
              file=sys.stderr)
        return 130
    finally:
        if pool is not None:
            pool.terminate()   # stopped on an error or Ctrl-C: no worker outlives the import
            pool.join()
        ref.close()
        if db is not None:
            try:
                db.close_sync()
            except Exception:  # noqa: BLE001 (closing after a failure: the failure is what is said)
                pass
        if lock is not None:
            lock.release()


if __name__ == "__main__":
    sys.exit(main())
