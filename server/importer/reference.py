"""A reference server's data directory, read-only, read as untrusted input.

The reference (seed-hypermedia/seed, agents/src/sqlite-schema.sql and sqlite.ts) keeps one SQLite
file, `agents.sqlite`, and per agent a folder `agents/<id>/` holding `memory/` (the agent's files)
and `session-attachments/<sessionId>/<sha256>.bin` + `.json`. Its secrets are AES-256-GCM with a
key kept in its own database (`server_config.secret_encryption_key_v1`), sealed as nonce || ciphertext.

Nothing here writes: the database is opened with `mode=ro` (SQLite refuses every write through
that connection), and the folders are only listed and read.
"""
from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import dataclass
from typing import Iterator

import cbor2
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.errors import DagCborError

DB_NAME = "agents.sqlite"
# The reference's schema version this import reads (server_config.schema_migration_version, the
# length of sqlite.ts's migration list at 7819d47). An older database is read where its tables
# and columns are there; one that lacks them is sent to a current reference server first, which
# migrates it when it opens it.
CURRENT_VERSION = 15
# A CBOR column larger than this is refused (the reference caps an event near 2 MiB; its
# largest columns are tool documents and journals of a few hundred KiB).
MAX_CBOR_BYTES = 32 << 20
MAX_CBOR_ITEMS = 1 << 20
# A memory file or attachment larger than this is reported and left behind.
MAX_FILE_BYTES = 1 << 30

# The tables and the columns this import reads, in the order they are brought over.
TABLES: dict[str, tuple[str, ...]] = {
    "accounts": ("id", "created_at"),
    "account_authorizations": ("account_id", "signer", "role", "capability", "created_at"),
    "model_providers": ("id", "account_id", "name", "type", "config_cbor", "created_at", "updated_at"),
    "secrets": ("id", "account_id", "name", "ciphertext", "metadata_cbor", "created_at", "updated_at"),
    "agents": ("id", "account_id", "definition_cbor", "state_dir", "status", "public_read", "created_at",
               "updated_at"),
    "agent_collaborators": ("agent_id", "account_id", "role", "status", "created_at", "updated_at",
                            "accepted_at"),
    "agent_triggers": ("id", "account_id", "agent_id", "name", "enabled", "source_cbor", "prompt",
                       "continuation_cbor", "created_at", "updated_at", "last_checked_at", "last_fired_at",
                       "last_error"),
    "tool_documents": ("account_id", "agent_id", "name", "kind", "cid", "doc_cbor", "enabled", "created_at",
                       "updated_at"),
    "sessions": ("id", "account_id", "agent_id", "title", "title_source", "status", "parent_session_id",
                 "run_id", "plan_cbor", "model_override_cbor", "description", "created_at", "updated_at"),
    "session_events": ("id", "session_id", "seq", "event_cbor", "created_at"),
    "runs": ("id", "account_id", "root_run_id", "parent_run_id", "parent_tool_call_id", "continued_from_run_id",
             "depth", "kind", "agent_id", "session_id", "trigger_firing_id", "origin", "title", "source_text",
             "input_cbor", "output_cbor",
             "error_cbor", "status", "wait_cbor", "attempt", "not_before", "budget_cbor", "usage_cbor",
             "plan_cbor", "created_at", "started_at", "finished_at", "updated_at"),
    "run_journal": ("run_id", "seq", "entry_cbor", "created_at"),
    "run_event_waits": ("run_id", "wait_id", "account_id", "match_cbor", "timeout_at", "created_at"),
    "trigger_firings": ("id", "account_id", "agent_id", "trigger_id", "activity_key", "session_id",
                        "activity_cbor", "status", "error", "created_at"),
    "activity_watermarks": ("account_id", "server_url", "cursor_cbor", "last_poll_at", "last_success_at",
                            "last_error"),
    "action_idempotency": ("account_id", "action", "client_request_id", "request_cbor", "response_cbor",
                           "created_at"),
    "agent_drafts": ("id", "account_id", "agent_id", "title", "content_format", "content_cbor", "metadata_cbor",
                     "edit_target", "location_target", "path_name", "visibility", "status", "created_at",
                     "updated_at", "published_at", "published_id", "published_version"),
}
# Each table's row key, as errors and reports name a row.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "accounts": ("id",), "account_authorizations": ("account_id", "signer"), "model_providers": ("id",),
    "secrets": ("id",), "agents": ("id",), "agent_collaborators": ("agent_id", "account_id"),
    "agent_triggers": ("id",), "tool_documents": ("agent_id", "name"), "sessions": ("id",),
    "session_events": ("session_id", "seq"), "runs": ("id",), "run_journal": ("run_id", "seq"),
    "run_event_waits": ("run_id", "wait_id"), "trigger_firings": ("id",),
    "activity_watermarks": ("account_id", "server_url"), "action_idempotency": ("account_id", "client_request_id"),
    "agent_drafts": ("id",),
}


class ReferenceError(Exception):
    """The reference data cannot be imported as it is; one sentence naming what and where."""


def row_name(table: str, row: dict) -> str:
    """`sessions row id=…`: how a report names a row."""
    keys = ROW_KEYS.get(table, ())
    return f"{table} row " + ", ".join(f"{k}={row.get(k)!r}" for k in keys)


def decode_cbor(data: object, table: str, row: dict, column: str, *, undefined_as_null: bool = False
                ) -> tuple[object, bool]:
    """(value, canonical) of a CBOR column: strict DAG-CBOR first; the reference's encoder also
    writes JavaScript's `undefined` for a missing optional field, which is read as the reference
    answers it: a session event's as null (`undefined_as_null`), any other column's as absent.
    Anything else is a ReferenceError naming the row."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ReferenceError(f"{row_name(table, row)}: {column} is not a blob ({type(data).__name__})")
    data = bytes(data)
    if len(data) > MAX_CBOR_BYTES:
        raise ReferenceError(f"{row_name(table, row)}: {column} is {len(data)} bytes, over the "
                             f"{MAX_CBOR_BYTES} this import reads")
    value, canonical = dagcbor.decode_if_canonical(data)   # the common case, at C speed
    if canonical:
        return value, True
    # Not canonical (the reference's `undefined`, or another encoder's key order): read once with
    # cbor2 under an item bound, and kept only if what it read encodes as DAG-CBOR (our bytes are
    # then stored, never the reference's).
    try:
        dagcbor.check_items(data, MAX_CBOR_ITEMS)
        value = _scrub(cbor2.loads(data, tag_hook=dagcbor._tag_hook, max_depth=dagcbor.DEFAULT_MAX_DEPTH,
                                   allow_indefinite=False, allow_duplicate_keys=False),
                       undefined_as_null)
        dagcbor.encode(value)
    except DagCborError as exc:
        raise ReferenceError(f"{row_name(table, row)}: {column} is not valid DAG-CBOR ({exc})") from None
    except Exception as exc:  # noqa: BLE001 (any fault of untrusted bytes is the row's)
        raise ReferenceError(f"{row_name(table, row)}: {column} is not valid DAG-CBOR "
                             f"({type(exc).__name__}: {str(exc)[:200]})") from None
    return value, False


def _scrub(value: object, keep: bool) -> object:
    # `keep`: a map entry holding `undefined` stays, as null (how the reference answers an event
    # it stored so); else it is dropped (how it answers a definition, which it normalizes first).
    if value is cbor2.undefined:
        return None
    if isinstance(value, dict):
        return {k: _scrub(v, keep) for k, v in value.items() if keep or v is not cbor2.undefined}
    if isinstance(value, list):
        return [_scrub(v, keep) for v in value]
    return value


@dataclass
class FileOnDisk:
    path: str        # relative, '/'-separated
    full: str
    size: int
    mtime_ms: int


# Read through a memory map (read-only): the events are read in session order through an index
# whose rows sit in another order in the table, and each page fetched by a read() call cost more
# than the checks of its rows (bench/import_rate.py). Nothing is written through it.
MMAP_BYTES = 1 << 32


def open_read_only(db_path: str) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        db.execute("PRAGMA query_only = 1")
        db.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        return db
    except sqlite3.Error as exc:
        raise ReferenceError(f"cannot open {db_path} read-only: {exc}") from None


class Reference:
    """An open reference data directory."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.db_path = os.path.join(self.data_dir, DB_NAME)
        if os.path.isfile(data_dir):   # the database file itself was named
            self.db_path, self.data_dir = os.path.abspath(data_dir), os.path.dirname(os.path.abspath(data_dir))
        if not os.path.isfile(self.db_path):
            raise ReferenceError(f"{data_dir} holds no reference database ({DB_NAME} not found)")
        self.db = open_read_only(self.db_path)
        self.version = 0
        self.columns: dict[str, set[str]] = {}
        self.key: bytes | None = None

    def close(self) -> None:
        self.db.close()

    # -- the checks before anything is read --------------------------------------------------
    def check(self) -> None:
        """Refuse a file that is not SQLite, is damaged, or is of a schema version this import
        does not know; learn which tables and columns it has."""
        try:
            problems = [r[0] for r in self.db.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            raise ReferenceError(f"{self.db_path} is not a readable SQLite database: {exc}") from None
        if problems != ["ok"]:
            raise ReferenceError(f"{self.db_path} is damaged: {'; '.join(problems)}")
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "server_config" not in tables or "session_events" not in tables:
            raise ReferenceError(f"{self.db_path} is not a reference agents database (no server_config or "
                                 "session_events table)")
        row = self.db.execute("SELECT value FROM server_config WHERE key = 'schema_migration_version'").fetchone()
        raw = row[0] if row else None
        if isinstance(raw, (bytes, bytearray)):
            raw = bytes(raw).decode("utf-8", "replace")
        try:
            self.version = int(str(raw).strip())
        except ValueError:
            raise ReferenceError(f"{self.db_path}: server_config row key='schema_migration_version' holds "
                                 f"{raw!r}, not a schema version (a reference database from before version "
                                 "tracking; open it once with a current reference server first)") from None
        if self.version > CURRENT_VERSION or self.version < 1:
            raise ReferenceError(f"{self.db_path}: reference schema version {self.version} is "
                                 f"{'newer than' if self.version > 0 else 'not'} the version this import reads "
                                 f"({CURRENT_VERSION}); {'a newer seed-agents may read it' if self.version > 0 else ''}"
                                 .rstrip("; "))
        older = " (an older reference database: open it once with a current reference server, which migrates it)"
        for table, columns in TABLES.items():
            if table not in tables:
                if self.version < CURRENT_VERSION and table != "sessions":
                    continue   # an older schema without it: nothing of that kind to bring
                raise ReferenceError(f"{self.db_path}: the table {table} is missing"
                                     f"{older if self.version < CURRENT_VERSION else ''}")
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in have]
            if missing:
                raise ReferenceError(f"{self.db_path}: the table {table} lacks the column(s) {', '.join(missing)}"
                                     f"{older if self.version < CURRENT_VERSION else ''}")
            self.columns[table] = have
        key = self.db.execute("SELECT value FROM server_config WHERE key = 'secret_encryption_key_v1'").fetchone()
        if key is not None:
            if not isinstance(key[0], (bytes, bytearray)) or len(key[0]) != 32:
                raise ReferenceError(f"{self.db_path}: server_config row key='secret_encryption_key_v1' is not "
                                     "a 32-byte key")
            self.key = bytes(key[0])

    # -- rows --------------------------------------------------------------------------------
    def count(self, table: str, where: str = "", params: tuple = ()) -> int:
        if table not in self.columns:
            return 0
        return self.db.execute(f"SELECT count(*) FROM {table} {where}", params).fetchone()[0]

    def rows(self, table: str, where: str = "", params: tuple = (), order: str = "") -> Iterator[dict]:
        """Rows as dicts of the columns this import reads; a row SQLite cannot read (a damaged
        page) is a ReferenceError naming the table."""
        if table not in self.columns:
            return
        columns = TABLES[table]
        sql = f"SELECT {', '.join(columns)} FROM {table} {where} {('ORDER BY ' + order) if order else ''}"
        try:
            for values in self.db.execute(sql, params):
                yield dict(zip(columns, values))
        except sqlite3.DatabaseError as exc:
            raise ReferenceError(f"{self.db_path}: reading {table} failed: {exc}") from None

    def event_counts(self) -> dict[str, int]:
        """{session id: its events} (from the index, as `event_spans`)."""
        if "session_events" not in self.columns:
            return {}
        return dict(self.db.execute("SELECT session_id, count(*) FROM session_events GROUP BY session_id"))

    def event_spans(self) -> dict[str, int]:
        """{session id: its highest seq} (from the index on (session_id, seq): no event is read)."""
        if "session_events" not in self.columns:
            return {}
        try:
            return dict(self.db.execute("SELECT session_id, max(seq) FROM session_events GROUP BY session_id"))
        except sqlite3.DatabaseError as exc:
            raise ReferenceError(f"{self.db_path}: reading session_events failed: {exc}") from None

    def event_rows(self, session_id: str, after_seq: int, limit: int) -> list[tuple]:
        """[(id, seq, event_cbor, created_at)] of one session past `after_seq`, in seq order."""
        try:
            return self.db.execute(
                "SELECT id, seq, event_cbor, created_at FROM session_events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?", (session_id, after_seq, limit)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ReferenceError(f"{self.db_path}: reading session_events of session {session_id!r} failed: "
                                 f"{exc}") from None

    # -- secrets -----------------------------------------------------------------------------
    def open_secret(self, row: dict) -> bytes:
        """A secret's plaintext (AES-256-GCM under the reference's own key); ReferenceError when
        it does not open."""
        if self.key is None:
            raise ReferenceError(f"{row_name('secrets', row)}: the reference database has no secrets key")
        blob = row["ciphertext"]
        if not isinstance(blob, (bytes, bytearray)) or len(blob) <= 12 + 16:
            raise ReferenceError(f"{row_name('secrets', row)}: the ciphertext is too short")
        try:
            return AESGCM(self.key).decrypt(bytes(blob[:12]), bytes(blob[12:]), None)
        except InvalidTag:
            raise ReferenceError(f"{row_name('secrets', row)}: the secret does not open with the reference's "
                                 "key (damaged, or sealed with another key)") from None

    # -- files -------------------------------------------------------------------------------
    def agent_dir(self, agent_id: str, state_dir: object) -> str:
        """The agent's folder: the one the row names when it is inside this data directory, else
        `agents/<id>` here (a data directory that was moved keeps its layout)."""
        here = os.path.join(self.data_dir, "agents", agent_id)
        if isinstance(state_dir, str) and os.path.isdir(state_dir):
            real = os.path.realpath(state_dir)
            if real.startswith(os.path.realpath(self.data_dir) + os.sep):
                return real
        return here

    def memory_files(self, agent_dir: str) -> Iterator[FileOnDisk]:
        """Regular files under `memory/`, sorted; symbolic links are not followed."""
        root = os.path.join(agent_dir, "memory")
        if not os.path.isdir(root) or os.path.islink(root):
            return
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(folder, name)
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                yield FileOnDisk(rel, full, st.st_size, int(st.st_mtime * 1000))

    def attachments(self, agent_dir: str, session_id: str) -> Iterator[tuple[dict | None, FileOnDisk, str]]:
        """(info from its .json or None, the .bin file, a problem or "") per attachment of a session."""
        folder = os.path.join(agent_dir, "session-attachments", session_id)
        if not os.path.isdir(folder) or os.path.islink(folder):
            return
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".bin"):
                continue
            full = os.path.join(folder, name)
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                continue
            disk = FileOnDisk(name[:-4], full, st.st_size, int(st.st_mtime * 1000))
            info, problem = None, ""
            try:
                with open(full[:-4] + ".json", "rb") as f:
                    raw = f.read(64 * 1024 + 1)
                info = json.loads(raw) if len(raw) <= 64 * 1024 else None
                if not isinstance(info, dict):
                    info, problem = None, "its .json is not a JSON object (or is over 64 KiB)"
            except FileNotFoundError:
                problem = "its .json is missing"
            except (OSError, ValueError) as exc:
                problem = f"its .json cannot be read ({exc})"
            yield info, disk, problem


def read_file(disk: FileOnDisk) -> bytes:
    """A file's bytes, at most MAX_FILE_BYTES (the caller checked the size)."""
    with open(disk.full, "rb") as f:
        return f.read(MAX_FILE_BYTES + 1)
