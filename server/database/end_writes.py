"""Writes a write transaction makes once, at its end, in one key order.

A group-committing writer (PostgreSQL's, server/database/postgres/database.py) holds every row
lock a batch takes until the batch's COMMIT. A row that most jobs write (an agent's activity
rollup and status, written by every append, claim and run end of its sessions) is then held
from the first job that touches it to the end of the batch, and another server's batch waits
for it the whole time. With `EndWrites` on the connection, the store folds such a row's changes
in memory (`put`) and writes each row once, after the batch's last job: the lock is held for
that statement and the COMMIT. Rows are flushed in key order, so two servers' batches take them
in one global order.

The store adds and reads entries (server/store/agents.py); the façade marks each job's start
(`mark`), rolls a job's entries back with its savepoint (`rollback`), and calls `flush` before
COMMIT and `clear` when a transaction begins. An entry is (key, state, flush): `state` is
immutable (a new one per change), so a mark is a shallow copy; `flush(conn, key, state)` writes it.
"""
from __future__ import annotations

from typing import Any, Callable

Flush = Callable[[Any, tuple, Any], None]


class EndWrites:
    __slots__ = ("_entries", "_mark")

    def __init__(self) -> None:
        self._entries: dict[tuple, tuple[Any, Flush]] = {}
        self._mark: dict[tuple, tuple[Any, Flush]] = {}

    def get(self, key: tuple) -> Any:
        """The state pending for `key` in this transaction, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: tuple, state: Any, flush: Flush) -> None:
        self._entries[key] = (state, flush)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def mark(self) -> None:
        """A job begins (its savepoint): `rollback` returns here."""
        self._mark = dict(self._entries)

    def rollback(self) -> None:
        """The job since `mark` was rolled back to its savepoint: so are its entries."""
        self._entries = dict(self._mark)

    def clear(self) -> None:
        self._entries = {}
        self._mark = {}

    def flush(self, conn: Any) -> None:
        """Write every entry, in key order (the global lock order), then forget them."""
        entries, self._entries = self._entries, {}
        self._mark = {}
        for key in sorted(entries):
            state, flush = entries[key]
            flush(conn, key, state)
