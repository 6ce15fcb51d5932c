"""Agent memory: a tree of files per agent, kept in the database (bytes in server/store/blobs.py),
indexed for full-text search as text files are written.

The tree has file rows only; a directory is any prefix of a file's path (as `mkdir -p` would make
it), so it exists while it holds a file. Paths are normalized by `seed_agents.protocol.wire.file_rules.memory_path`
before they reach these functions.

Functions for the agent's tools (read, write, search, list) and for the memory actions; each runs
inside one read or write transaction, given by the caller (`db.read(fn, ...)`,
`db.write(fn, ...)`):

- `list_memory(conn, agent_id)` -> (entries, total bytes): every file and directory, by path.
- `list_dir(conn, agent_id, path | None)` -> {path, entries, totalBytes}: one level.
- `file_info(conn, agent_id, path)` -> FileInfo | None.
- `read_file(conn, agent_id, path, max_bytes)` -> AgentMemoryFile (text as `content`, else `data`).
- `write_file(conn, agent_id, account_id, path, data, now, limits)` -> AgentMemoryEntry.
- `delete_path(conn, agent_id, path)` -> bool: one file, or a directory and all under it.
- `search(conn, agent_id, query, limit)` -> [{path, score, snippet, size, updatedAt, mimeType?}].
- `delete_agent_memory(conn, agent_id)`: every file, with DeleteAgent.
- `checkout(conn, agent_id, max_bytes)` / `commit_workspace(...)`: the whole memory handed to a
  code sandbox, and what the code changed written back in the caller's one transaction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from seed_agents.protocol.wire.file_rules import infer_mime_type, utf8_or_none

from . import blobs, file_quota
from .errors import Refused

MAX_INDEXED_CHARS = 256 * 1024   # characters of a text file that search sees (its start)
MAX_SEARCH_RESULTS = 50
SNIPPET_WORDS = 12
_MARK = "**"   # around matched words in a snippet


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Operator bounds a write is checked against (server/config.py)."""

    quota: int | None = None        # bytes per account (server/store/file_quota.py), None: none
    max_files: int = 10_000         # files per agent


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    updated_at: int
    is_text: bool
    blob_id: int

    def entry(self) -> dict:
        return entry(self.path, self.size, self.updated_at)


def entry(path: str, size: int, updated_at: int, kind: str = "file") -> dict:
    """An AgentMemoryEntry."""
    out = {"path": path, "type": kind, "size": size if kind == "file" else 0, "updatedAt": updated_at}
    mime = infer_mime_type(path) if kind == "file" else None
    if mime:
        out["mimeType"] = mime
    return out


def _under(path: str) -> tuple[str, str]:
    """Bounds of the paths strictly under directory `path`: `path/` <= p < `path0` ('0' follows '/')."""
    return path + "/", path + "0"


def list_memory(conn, agent_id: str) -> tuple[list[dict], int]:
    """Every file and directory of the agent's memory, sorted by path, and the files' bytes."""
    files = conn.execute("SELECT path, size, updated_at FROM memory_files WHERE agent_id = ? ORDER BY path",
                         (agent_id,)).fetchall()
    dirs: dict[str, int] = {}
    total = 0
    for path, size, updated in files:
        total += size
        parts = path.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            dirs[d] = max(dirs.get(d, 0), updated)
    entries = [entry(p, s, u) for p, s, u in files] + [entry(d, 0, u, "dir") for d, u in dirs.items()]
    entries.sort(key=lambda e: e["path"].encode())
    return entries, total


def list_dir(conn, agent_id: str, path: str | None) -> dict:
    """One level of the tree: the files and directories directly in `path` (None: the root),
    directories with `entryCount`; 404 for no such directory, 400 for a file."""
    if path:
        if file_info(conn, agent_id, path) is not None:
            raise Refused(400, f"Memory path is a file, not a directory: {path}")
        lo, hi = _under(path)
        rows = conn.execute("SELECT path, size, updated_at FROM memory_files WHERE agent_id = ? AND path >= ?"
                            " AND path < ? ORDER BY path", (agent_id, lo, hi)).fetchall()
        if not rows:
            raise Refused(404, f"Memory directory not found: {path}")
        prefix = lo
    else:
        rows = conn.execute("SELECT path, size, updated_at FROM memory_files WHERE agent_id = ? ORDER BY path",
                            (agent_id,)).fetchall()
        prefix = ""
    entries: dict[str, dict] = {}
    total = 0
    for p, size, updated in rows:
        rest = p[len(prefix):]
        head, slash, _ = rest.partition("/")
        if not slash:
            entries[p] = entry(p, size, updated)
            total += size
        else:
            d = prefix + head
            e = entries.setdefault(d, {**entry(d, 0, updated, "dir"), "entryCount": 0, "_names": set()})
            e["updatedAt"] = max(e["updatedAt"], updated)
            e["_names"].add(rest[len(head) + 1:].split("/")[0])
    for e in entries.values():
        names = e.pop("_names", None)
        if names is not None:
            e["entryCount"] = len(names)
    return {"path": path or "", "entries": sorted(entries.values(), key=lambda e: e["path"].encode()),
            "totalBytes": total}


def file_info(conn, agent_id: str, path: str) -> FileInfo | None:
    row = conn.execute("SELECT size, updated_at, is_text, blob_id FROM memory_files WHERE agent_id = ? AND path = ?",
                       (agent_id, path)).fetchone()
    return None if row is None else FileInfo(path, row[0], row[1], bool(row[2]), row[3])


def _is_dir(conn, agent_id: str, path: str) -> bool:
    lo, hi = _under(path)
    return conn.execute("SELECT 1 FROM memory_files WHERE agent_id = ? AND path >= ? AND path < ? LIMIT 1",
                        (agent_id, lo, hi)).fetchone() is not None


def read_file(conn, agent_id: str, path: str, max_bytes: int) -> dict:
    """An AgentMemoryFile: `encoding: utf8` with `content`, or `binary` with `data`. 404 when
    there is no such file, 400 for a directory, 413 past `max_bytes` (read it in ranges)."""
    info = file_info(conn, agent_id, path)
    if info is None:
        if _is_dir(conn, agent_id, path):
            raise Refused(400, f"Memory path is a directory, not a file: {path}")
        raise Refused(404, f"Memory file not found: {path}")
    if info.size > max_bytes:
        raise Refused(413, f"Memory file {path} is {info.size} bytes, more than the {max_bytes} one "
                                 f"answer carries; read it in ranges (offset, length)")
    data = blobs.read_range(conn, info.blob_id)
    return file_value(info, data)


def file_value(info: FileInfo, data: bytes, offset: int | None = None) -> dict:
    out = {"path": info.path, "size": info.size, "updatedAt": info.updated_at}
    mime = infer_mime_type(info.path)
    if mime:
        out["mimeType"] = mime
    text = utf8_or_none(data) if info.is_text and offset is None else None
    if text is not None:
        out.update(encoding="utf8", content=text)
    else:
        out.update(encoding="binary", data=data)
    if offset is not None:
        out["offset"] = offset
    return out


def _check_place(conn, agent_id: str, path: str) -> None:
    """400 when `path` is a directory, or one of its parents is a file."""
    if _is_dir(conn, agent_id, path):
        raise Refused(400, f"Memory path is a directory, not a file: {path}")
    parts = path.split("/")
    parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
    if parents:
        marks = ",".join("?" * len(parents))
        row = conn.execute(f"SELECT path FROM memory_files WHERE agent_id = ? AND path IN ({marks}) LIMIT 1",
                           (agent_id, *parents)).fetchone()
        if row is not None:
            raise Refused(400, f"Memory path {path} is under {row[0]}, which is a file")


def check_writable(conn, agent_id: str, account_id: str, path: str, size: int, limits: MemoryLimits) -> None:
    """Every refusal a write of `size` bytes at `path` would meet, checked before any byte is
    stored (BeginFileUpload asks this up front, as the reference validates its target)."""
    _check_place(conn, agent_id, path)
    old = file_info(conn, agent_id, path)
    if old is None:
        n = conn.execute("SELECT count(*) FROM memory_files WHERE agent_id = ?", (agent_id,)).fetchone()[0]
        if n >= limits.max_files:
            raise Refused(413, f"Agent memory holds {n} files, the most one agent may have; delete some first")
    file_quota.charge(conn, account_id, size, limits.quota, freeing=0 if old is None else old.size)


def write_file(conn, agent_id: str, account_id: str, path: str, data: bytes, now: int,
               limits: MemoryLimits = MemoryLimits()) -> dict:
    """Store `data` at `path` (replacing a file there), indexed for search when it is text.
    `account_id` is the agent's owner (the quota's account). Returns the AgentMemoryEntry."""
    check_writable(conn, agent_id, account_id, path, len(data), limits)
    blob_id = blobs.put(conn, data, now)
    return link(conn, agent_id, account_id, path, blob_id, len(data), utf8_or_none(data), now)


def link(conn, agent_id: str, account_id: str, path: str, blob_id: int, size: int, text: str | None,
         now: int) -> dict:
    """Point `path` at a blob the caller holds a reference to (a write, or a committed upload);
    the reference of the file it replaces is released. `text`: the file's text when it is text
    (its start is indexed), else None."""
    old = conn.execute("SELECT id, blob_id FROM memory_files WHERE agent_id = ? AND path = ?",
                       (agent_id, path)).fetchone()
    if old is not None:
        file_id = old[0]
        conn.execute("UPDATE memory_files SET blob_id = ?, size = ?, is_text = ?, updated_at = ? WHERE id = ?",
                     (blob_id, size, int(text is not None), now, file_id))
        conn.execute("DELETE FROM memory_search WHERE rowid = ?", (file_id,))
        blobs.release(conn, old[1])
    else:
        file_id = conn.execute("INSERT INTO memory_files (agent_id, account_id, path, blob_id, size, is_text,"
                               " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                               (agent_id, account_id, path, blob_id, size, int(text is not None), now)).fetchone()[0]
    if text is not None:
        conn.execute("INSERT INTO memory_search (rowid, agent_id, path, body) VALUES (?, ?, ?, ?)",
                     (file_id, agent_id, path, text[:MAX_INDEXED_CHARS]))
    return entry(path, size, now)


def delete_path(conn, agent_id: str, path: str) -> bool:
    """Delete the file at `path`, or the directory `path` with everything under it; False when
    nothing was there. Bytes no longer referenced are freed in this transaction."""
    lo, hi = _under(path)
    rows = conn.execute("DELETE FROM memory_files WHERE agent_id = ? AND (path = ? OR (path >= ? AND path < ?))"
                        " RETURNING id, blob_id", (agent_id, path, lo, hi)).fetchall()
    _forget(conn, rows)
    return bool(rows)


def _forget(conn, rows) -> None:
    if not rows:
        return
    conn.executemany("DELETE FROM memory_search WHERE rowid = ?", [(file_id,) for file_id, _ in rows])
    counts: dict[int, int] = {}
    for _, blob_id in rows:
        counts[blob_id] = counts.get(blob_id, 0) + 1
    blobs.release_many(conn, counts)


def delete_agent_memory(conn, agent_id: str) -> int:
    """Every memory file of the agent (DeleteAgent's transaction); returns how many."""
    rows = conn.execute("DELETE FROM memory_files WHERE agent_id = ? RETURNING id, blob_id", (agent_id,)).fetchall()
    _forget(conn, rows)
    return len(rows)


def checkout(conn, agent_id: str, max_bytes: int) -> dict[str, tuple[int, bytes]] | None:
    """Every file of the agent's memory: path -> (blob id, bytes); None when they are more than
    `max_bytes` together (nothing is read then)."""
    rows = conn.execute("SELECT path, blob_id, size FROM memory_files WHERE agent_id = ? ORDER BY path",
                        (agent_id,)).fetchall()
    if sum(r[2] for r in rows) > max_bytes:
        return None
    return {path: (blob_id, blobs.read_range(conn, blob_id)) for path, blob_id, _ in rows}


def commit_workspace(conn, agent_id: str, account_id: str, base: dict[str, int], written: dict[str, bytes],
                     removed: list[str], now: int, limits: MemoryLimits = MemoryLimits()) -> list[str]:
    """What a sandbox run changed, in the caller's transaction (all of it or, on a refusal, none):
    `written` files stored as new versions, `removed` ones deleted. A file removed by the run that
    someone else wrote since the checkout (`base`: path -> blob id then) is kept; returns those."""
    kept = []
    for path in removed:
        row = conn.execute("SELECT blob_id FROM memory_files WHERE agent_id = ? AND path = ?",
                           (agent_id, path)).fetchone()
        if row is None:
            continue
        if row[0] != base.get(path):
            kept.append(path)
            continue
        delete_path(conn, agent_id, path)
    for path, data in sorted(written.items()):
        write_file(conn, agent_id, account_id, path, data, now, limits)
    return kept


# -- search ---------------------------------------------------------------------------------
_WORDS = re.compile(r"\w+", re.UNICODE)


def search(conn, agent_id: str, query: str, limit: int = 20) -> list[dict]:
    """The agent's text files matching `query`, best first: [{path, score, snippet, size,
    updatedAt, mimeType?}]. Words are matched whole (every word must occur, in the path or the
    text); on PostgreSQL a query with no usable word, or no match, falls back to a plain
    case-insensitive substring match (ILIKE), as SQLite does for a query with no word. Snippets
    mark matches with **. Only the first MAX_INDEXED_CHARS characters of a file are searched."""
    limit = max(1, min(limit, MAX_SEARCH_RESULTS))
    words = _WORDS.findall(query)
    rows = _SEARCH[conn.traits.text_search](conn, agent_id, words, limit) if words else []
    if not rows and query.strip():
        rows = _search_plain(conn, agent_id, query.strip(), limit)
    out = []
    for path, score, snippet, size, updated in rows:
        item = {"path": path, "score": round(float(score), 6), "snippet": snippet, "size": size, "updatedAt": updated}
        mime = infer_mime_type(path)
        if mime:
            item["mimeType"] = mime
        out.append(item)
    return out


def _search_fts5(conn, agent_id: str, words: list[str], limit: int) -> list[tuple]:
    match = " ".join('"' + w.replace('"', '""') + '"' for w in words[:32])
    # Rank first (FTS5 reads only the index for that), then make snippets of the top rows alone:
    # a snippet re-reads its document, and a common word matches most of them.
    top = conn.execute("SELECT rowid, -rank FROM memory_search WHERE memory_search MATCH ?"
                       " AND rank MATCH 'bm25(0.0, 4.0, 1.0)' AND agent_id = ? ORDER BY rank LIMIT ?",
                       (match, agent_id, limit)).fetchall()
    if not top:
        return []
    score = dict(top)
    marks = ",".join("?" * len(top))
    rows = conn.execute(
        f"SELECT s.rowid, s.path, snippet(memory_search, 2, '{_MARK}', '{_MARK}', '…', {SNIPPET_WORDS}),"
        " f.size, f.updated_at FROM memory_search s JOIN memory_files f ON f.id = s.rowid"
        f" WHERE memory_search MATCH ? AND s.rowid IN ({marks})", (match, *score)).fetchall()
    out = [(path, score[rowid], snippet, size, updated) for rowid, path, snippet, size, updated in rows]
    out.sort(key=lambda r: (-r[1], r[0]))
    return out


def _search_pg(conn, agent_id: str, words: list[str], limit: int) -> list[tuple]:
    text = " ".join(words)
    # Ranked and cut in the inner query; headlines (which re-parse the text) for the top rows only.
    return conn.execute(
        "SELECT top.path, top.score, ts_headline('simple', top.body, top.q,"
        f" 'StartSel={_MARK}, StopSel={_MARK}, MaxWords={SNIPPET_WORDS * 2}, MinWords={SNIPPET_WORDS // 2}, MaxFragments=1'),"
        " f.size, f.updated_at FROM (SELECT s.pos, s.path, s.body, q, ts_rank(s.vector, q) AS score"
        " FROM memory_search s, plainto_tsquery('simple', ?) q WHERE s.agent_id = ? AND s.vector @@ q"
        " ORDER BY score DESC, s.path LIMIT ?) top JOIN memory_files f ON f.id = top.pos"
        " ORDER BY top.score DESC, top.path", (text, agent_id, limit)).fetchall()


# The memory index each backend has (its traits name it): FTS5 on SQLite, tsvector on PostgreSQL.
_SEARCH = {"fts5": _search_fts5, "tsvector": _search_pg}


def _search_plain(conn, agent_id: str, needle: str, limit: int) -> list[tuple]:
    """Substring match, case-insensitive (ILIKE on PostgreSQL, LIKE on SQLite: ASCII case only),
    ranked by where it first occurs; the snippet is cut around that place here."""
    pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    op = conn.traits.like_ci
    rows = conn.execute(
        f"SELECT s.path, s.body, f.size, f.updated_at FROM memory_search s JOIN memory_files f ON f.id = s.rowid"
        f" WHERE s.agent_id = ? AND (s.body {op} ? ESCAPE '\\' OR s.path {op} ? ESCAPE '\\') ORDER BY s.path LIMIT ?",
        (agent_id, pattern, pattern, limit)).fetchall()
    out = []
    low = needle.lower()
    for path, body, size, updated in rows:
        at = body.lower().find(low)
        if at < 0:
            snippet, score = body[:120], 0.5
        else:
            lo, hi = max(0, at - 60), at + len(needle) + 60
            snippet = (("…" if lo else "") + body[lo:at] + _MARK + body[at:at + len(needle)] + _MARK
                       + body[at + len(needle):hi] + ("…" if hi < len(body) else ""))
            score = 1.0 / (1 + at / 1000)
        out.append((path, score, snippet, size, updated))
    out.sort(key=lambda r: -r[1])
    return out
