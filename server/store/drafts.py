"""Agent drafts (table `agent_drafts`, the reference's): documents an agent writes with the
`draft.*` commands of `write hm://` (server/tools/hm_drafts.py), kept per (account, agent) until
published. Content is the draft's blocks (API block nodes) and its metadata, both DAG-CBOR."""
from __future__ import annotations

from . import codec

_COLUMNS = ("id, title, content, metadata, edit_target, location_target, path_name, visibility, status,"
            " created_at, updated_at, published_at, published_id, published_version")


def insert_draft(conn, draft_id: str, account_id: str, agent_id: str, title: str, blocks: list, metadata: dict,  # noqa: ANN001
                 edit: str | None, location: str | None, path: str | None, visibility: str | None,
                 now: int) -> dict:
    conn.execute(
        "INSERT INTO agent_drafts (id, account_id, agent_id, title, content_format, content, metadata, edit_target,"
        " location_target, path_name, visibility, status, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, 'json', ?, ?, ?, ?, ?, ?, 'idle', ?, ?)",
        (draft_id, account_id, agent_id, title, codec.encode(blocks), codec.encode(metadata), edit, location, path,
         visibility, now, now))
    return get_draft(conn, account_id, agent_id, draft_id)


def get_draft(conn, account_id: str, agent_id: str, draft_id: str) -> dict | None:  # noqa: ANN001
    """The agent's draft, or None (a deleted one too)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM agent_drafts WHERE account_id = ? AND agent_id = ? AND id = ?"
                       " AND status <> 'deleted'", (account_id, agent_id, draft_id)).fetchone()
    return None if row is None else _draft(row)


def update_draft(conn, account_id: str, agent_id: str, draft_id: str, title: str, blocks: list, metadata: dict,  # noqa: ANN001
                 edit: str | None, location: str | None, path: str | None, visibility: str | None,
                 now: int) -> dict | None:
    """New content and metadata; the targets kept where None is given (the reference's COALESCE)."""
    conn.execute(
        "UPDATE agent_drafts SET title = ?, content = ?, metadata = ?, edit_target = coalesce(?, edit_target),"
        " location_target = coalesce(?, location_target), path_name = coalesce(?, path_name),"
        " visibility = coalesce(?, visibility), updated_at = ? WHERE account_id = ? AND agent_id = ? AND id = ?"
        " AND status <> 'deleted'",
        (title, codec.encode(blocks), codec.encode(metadata), edit, location, path, visibility, now, account_id,
         agent_id, draft_id))
    return get_draft(conn, account_id, agent_id, draft_id)


def list_drafts(conn, account_id: str, agent_id: str, limit: int) -> list[dict]:  # noqa: ANN001
    """The agent's drafts (not deleted), most recently changed first, without their content."""
    rows = conn.execute(
        "SELECT id, title, status, edit_target, location_target, updated_at FROM agent_drafts"
        " WHERE account_id = ? AND agent_id = ? AND status <> 'deleted' ORDER BY updated_at DESC, id LIMIT ?",
        (account_id, agent_id, limit)).fetchall()
    return [{"id": i, "name": title, "status": status, "edit_target": edit, "location_target": location,
             "updated_at": updated} for i, title, status, edit, location, updated in rows]


def mark_deleted(conn, account_id: str, agent_id: str, draft_id: str, now: int) -> bool:  # noqa: ANN001
    conn.execute("UPDATE agent_drafts SET status = 'deleted', updated_at = ? WHERE account_id = ? AND agent_id = ?"
                 " AND id = ? AND status <> 'deleted'", (now, account_id, agent_id, draft_id))
    return conn.changes() == 1


def mark_published(conn, account_id: str, agent_id: str, draft_id: str, published_id: str | None,  # noqa: ANN001
                   version: str | None, now: int) -> None:
    conn.execute("UPDATE agent_drafts SET status = 'published', published_at = ?, published_id = ?,"
                 " published_version = ?, updated_at = ? WHERE account_id = ? AND agent_id = ? AND id = ?",
                 (now, published_id, version, now, account_id, agent_id, draft_id))


def _draft(row: tuple) -> dict:
    (draft_id, title, content, metadata, edit, location, path, visibility, status, created_at, updated_at,
     published_at, published_id, published_version) = row
    return {"id": draft_id, "name": title, "blocks": codec.decode(bytes(content)),
            "metadata": codec.decode(bytes(metadata)) if metadata is not None else {}, "edit": edit,
            "location": location, "path": path, "visibility": visibility, "status": status,
            "createdAt": created_at, "updatedAt": updated_at, "publishedAt": published_at,
            "publishedId": published_id, "publishedVersion": published_version}
