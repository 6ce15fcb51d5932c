"""Content-addressed bytes in the database: a blob per distinct sha256, split into chunks.

One chunk table serves SQLite and PostgreSQL, so every server of a cluster reads what any other
wrote and nothing lives on a server's disk. A blob's `refs` counts the memory files and session
attachments naming it: `put` finds an equal blob and adds a reference, `release` takes one away
and frees the blob and its chunks when none is left, in the caller's transaction (each is a row
update, so two servers racing on one blob are ordered by the row lock on PostgreSQL).

A staged upload is a blob with no hash yet (`stage`, `append`); `seal` gives it its hash (or,
when an equal blob exists, moves the reference there and drops the staged bytes).

Reads never hold a whole file: `next_chunk` returns one chunk, and `iter_range` / `read_range`
walk a byte range one chunk (one short read transaction) at a time.
"""
from __future__ import annotations

import codecs
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from .errors import Refused


CHUNK_BYTES = 1 << 20   # bytes of one stored chunk (an upload's chunk is split into these)


def find(conn, sha256: bytes) -> tuple[int, int] | None:
    """(blob id, size) of the sealed blob with this hash, or None."""
    row = conn.execute("SELECT id, size FROM file_blobs WHERE sha256 = ?", (sha256,)).fetchone()
    return None if row is None else (row[0], row[1])


def _insert_chunks(conn, blob_id: int, first_seq: int, start: int, data: bytes | memoryview) -> int:
    """Write `data` as chunks of at most CHUNK_BYTES from `first_seq`; returns the next seq."""
    view = memoryview(data)
    seq = first_seq
    rows = []
    for at in range(0, len(view), CHUNK_BYTES):
        rows.append((blob_id, seq, start + at, bytes(view[at:at + CHUNK_BYTES])))
        seq += 1
    if rows:
        conn.executemany("INSERT INTO file_chunks (blob_id, seq, start, data) VALUES (?, ?, ?, ?)", rows)
    return seq


def put(conn, data: bytes, now: int, sha256: bytes | None = None) -> int:
    """A reference to a blob holding `data` (stored once: an equal blob gains a reference)."""
    digest = sha256 or hashlib.sha256(data).digest()
    row = conn.execute("UPDATE file_blobs SET refs = refs + 1 WHERE sha256 = ? RETURNING id",
                       (digest,)).fetchone()
    if row is not None:
        return row[0]
    blob_id = conn.execute("INSERT INTO file_blobs (sha256, size, refs, created_at) VALUES (?, ?, 1, ?)"
                           " RETURNING id", (digest, len(data), now)).fetchone()[0]
    _insert_chunks(conn, blob_id, 0, 0, data)
    return blob_id


def add_ref(conn, blob_id: int) -> None:
    conn.execute("UPDATE file_blobs SET refs = refs + 1 WHERE id = ?", (blob_id,))
    if conn.changes() != 1:
        raise Refused(404, "the file's bytes are gone (deleted meanwhile)")


def release(conn, blob_id: int) -> bool:
    """Take one reference away; free the blob and its chunks when it was the last. True if freed."""
    row = conn.execute("UPDATE file_blobs SET refs = refs - 1 WHERE id = ? RETURNING refs", (blob_id,)).fetchone()
    if row is None or row[0] > 0:
        return False
    return _free(conn, blob_id)


def release_many(conn, counts: dict[int, int]) -> int:
    """`release` for several blobs at once ({blob id: references dropped}); returns blobs freed."""
    freed = 0
    for blob_id, n in counts.items():
        row = conn.execute("UPDATE file_blobs SET refs = refs - ? WHERE id = ? RETURNING refs",
                           (n, blob_id)).fetchone()
        if row is not None and row[0] <= 0:
            freed += _free(conn, blob_id)
    return freed


def _free(conn, blob_id: int) -> bool:
    # Checked again on the row as it is now: a reference added meanwhile keeps the blob.
    conn.execute("DELETE FROM file_chunks WHERE blob_id = ? AND"
                 " (SELECT refs FROM file_blobs WHERE id = ?) = 0", (blob_id, blob_id))
    conn.execute("DELETE FROM file_blobs WHERE id = ? AND refs = 0", (blob_id,))
    return conn.changes() == 1


# -- staged uploads --------------------------------------------------------------------------
def stage(conn, size: int, now: int) -> int:
    """A new blob with no hash (refs 0) to receive an upload's chunks."""
    return conn.execute("INSERT INTO file_blobs (sha256, size, refs, created_at) VALUES (NULL, ?, 0, ?)"
                        " RETURNING id", (size, now)).fetchone()[0]


def append(conn, blob_id: int, start: int, data: bytes | memoryview) -> None:
    """Add `data` at byte `start` of a staged blob (the caller checked the order)."""
    row = conn.execute("SELECT coalesce(max(seq), -1) FROM file_chunks WHERE blob_id = ?", (blob_id,)).fetchone()
    _insert_chunks(conn, blob_id, row[0] + 1, start, data)


def seal(conn, blob_id: int, sha256: bytes) -> int:
    """Give a staged blob its hash and one reference; returns the blob that now holds the bytes
    (an equal sealed blob gains the reference instead, and the staged bytes are dropped)."""
    existing = conn.execute("UPDATE file_blobs SET refs = refs + 1 WHERE sha256 = ? RETURNING id",
                            (sha256,)).fetchone()
    if existing is not None:
        drop_staged(conn, blob_id)
        return existing[0]
    conn.execute("UPDATE file_blobs SET sha256 = ?, refs = 1 WHERE id = ? AND sha256 IS NULL", (sha256, blob_id))
    if conn.changes() != 1:
        raise Refused(404, "Upload not found")
    return blob_id


def drop_staged(conn, blob_id: int) -> None:
    conn.execute("DELETE FROM file_chunks WHERE blob_id = ?", (blob_id,))
    conn.execute("DELETE FROM file_blobs WHERE id = ? AND sha256 IS NULL", (blob_id,))


# -- reads ----------------------------------------------------------------------------------
def next_chunk(conn, blob_id: int, after_seq: int, below: int | None = None) -> tuple[int, int, bytes] | None:
    """(seq, start, data) of the blob's first chunk after `after_seq` (that starts below byte
    `below`, when given), or None. One row: the unit of every streamed read."""
    row = conn.execute("SELECT seq, start, data FROM file_chunks WHERE blob_id = ? AND seq > ?"
                       " ORDER BY seq LIMIT 1", (blob_id, after_seq)).fetchone()
    if row is None or (below is not None and row[1] >= below):
        return None
    return row[0], row[1], bytes(row[2])


def first_seq_at(conn, blob_id: int, offset: int) -> int:
    """The seq just before the chunk holding byte `offset` (a start for `next_chunk`)."""
    row = conn.execute("SELECT max(seq) FROM file_chunks WHERE blob_id = ? AND start <= ?",
                       (blob_id, offset)).fetchone()
    return -1 if row is None or row[0] is None else row[0] - 1


def iter_range(read: Callable, blob_id: int, offset: int = 0, length: int | None = None) -> Iterator[bytes]:
    """The bytes [offset, offset+length) of a blob, one chunk at a time; `read(fn, *args)` runs
    each step (`db.read`, or a function calling fn with one connection). Memory: one chunk."""
    end = None if length is None else offset + length
    seq = read(first_seq_at, blob_id, offset)
    while end is None or offset < end:
        got = read(next_chunk, blob_id, seq, end)
        if got is None:
            return
        seq, start, data = got
        lo = max(0, offset - start)
        hi = len(data) if end is None else min(len(data), end - start)
        if hi > lo:
            yield data[lo:hi]
            offset = start + hi


def read_range(conn, blob_id: int, offset: int = 0, length: int | None = None) -> bytes:
    """`iter_range` joined, on one connection: for answers already bounded by the caller."""
    return b"".join(iter_range(lambda fn, *a: fn(conn, *a), blob_id, offset, length))


def sha256_of(read: Callable, blob_id: int) -> tuple[bytes, int]:
    """(sha256, bytes) of a blob's chunks, streamed."""
    digest = hashlib.sha256()
    size = 0
    for piece in iter_range(read, blob_id):
        digest.update(piece)
        size += len(piece)
    return digest.digest(), size


@dataclass(frozen=True, slots=True)
class Scan:
    sha256: bytes
    size: int
    text: str | None   # the start (keep_chars characters) of a clean UTF-8 file; None: binary


def scan(conn, blob_id: int, keep_chars: int) -> Scan:
    """One pass over a blob, one chunk at a time: its hash, its size, and whether it is text (clean
    UTF-8 without NUL, the reference's test), keeping the first `keep_chars` characters of text."""
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    size = 0
    head: list[str] = []
    kept = 0
    text = True
    for piece in iter_range(lambda fn, *a: fn(conn, *a), blob_id):
        digest.update(piece)
        size += len(piece)
        if text:
            try:
                part = decoder.decode(piece)
            except UnicodeDecodeError:
                text = False
                continue
            if "\x00" in part:
                text = False
            elif kept < keep_chars:
                head.append(part[:keep_chars - kept])
                kept += len(head[-1])
    if text:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            text = False
    return Scan(digest.digest(), size, "".join(head) if text else None)


# -- the check ------------------------------------------------------------------------------
def check(conn) -> list[str]:
    """What is wrong with the stored bytes (empty when all is well): chunks of no blob, a
    sealed blob whose `refs` differs from the memory files and attachments naming it, a staged
    blob no upload owns, a reference to no blob, a blob whose chunks do not add up to its size."""
    problems = []
    for (blob_id,) in conn.execute("SELECT DISTINCT blob_id FROM file_chunks WHERE blob_id NOT IN"
                                   " (SELECT id FROM file_blobs)"):
        problems.append(f"chunks of blob {blob_id}, which does not exist")
    for blob_id, refs, counted in conn.execute(
            "SELECT b.id, b.refs, (SELECT count(*) FROM memory_files m WHERE m.blob_id = b.id)"
            " + (SELECT count(*) FROM session_attachments a WHERE a.blob_id = b.id)"
            " FROM file_blobs b WHERE b.sha256 IS NOT NULL"):
        if refs != counted or counted == 0:
            problems.append(f"blob {blob_id} has refs {refs} but {counted} references")
    for (blob_id,) in conn.execute("SELECT id FROM file_blobs WHERE sha256 IS NULL AND id NOT IN"
                                   " (SELECT blob_id FROM file_uploads)"):
        problems.append(f"staged blob {blob_id} belongs to no upload")
    for table in ("memory_files", "session_attachments", "file_uploads"):
        for (blob_id,) in conn.execute(f"SELECT blob_id FROM {table} WHERE blob_id NOT IN (SELECT id FROM file_blobs)"):
            problems.append(f"{table} names blob {blob_id}, which does not exist")
    for blob_id, size, stored in conn.execute(
            "SELECT b.id, b.size, coalesce((SELECT sum(length(c.data)) FROM file_chunks c WHERE c.blob_id = b.id), 0)"
            " FROM file_blobs b WHERE b.sha256 IS NOT NULL"):
        if size != stored:
            problems.append(f"blob {blob_id} is {size} bytes but its chunks hold {stored}")
    return problems


def counts(conn) -> dict[str, int]:
    """Rows of each file table (tests and the benchmark)."""
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("file_blobs", "file_chunks", "memory_files", "session_attachments", "file_uploads")}
