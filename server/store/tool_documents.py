"""Tool documents per agent (the `tool_documents` table): builtins materialized from the shipped
registry, authored lambdas, and the projections of remote MCP tools.

Rows are rewritten only when a document's CID changes (an edit, a new registry, a new discovery),
so listing twice writes nothing. A builtin or MCP row is never deleted by DeleteAgentTool: it is
switched off (`enabled`); an MCP row goes when its server is removed, disabled, or no longer
picked by the agent's `definition.mcpServers` (`sync_mcp`).
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import quote
from seed_agents.protocol.agent.tool_documents import (
    BUILTINS,
    MCP_SEPARATOR,
    builtin_with_cid,
    encode_document,
    mcp_document,
)

from . import codec
from . import mcp_servers as mcp_q
from .errors import Refused

_ROW = "name, kind, cid, doc, enabled, created_at, updated_at"


def _upsert(conn, account_id: str, agent_id: str, doc: dict, now: int, enabled: bool | None = None,
            cid: str | None = None) -> None:
    """`cid`: the document's, when the caller has it (a builtin's): then it is encoded only to be written."""
    data = None
    if cid is None:
        cid, data = encode_document(doc)
    row = conn.execute("SELECT cid FROM tool_documents WHERE account_id = ? AND agent_id = ? AND name = ?",
                       (account_id, agent_id, doc["name"])).fetchone()
    if data is None and (row is None or row[0] != cid):
        data = encode_document(doc)[1]
    if row is None:
        conn.execute("INSERT INTO tool_documents (account_id, agent_id, name, kind, cid, doc, enabled, created_at,"
                     " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (account_id, agent_id, doc["name"], doc["kind"], cid, data, 1 if enabled in (None, True) else 0,
                      now, now))
    elif row[0] != cid:
        conn.execute("UPDATE tool_documents SET kind = ?, cid = ?, doc = ?, updated_at = ?"
                     " WHERE account_id = ? AND agent_id = ? AND name = ?",
                     (doc["kind"], cid, data, now, account_id, agent_id, doc["name"]))
    if enabled is not None and row is not None:
        conn.execute("UPDATE tool_documents SET enabled = ?, updated_at = ? WHERE account_id = ? AND agent_id = ?"
                     " AND name = ? AND enabled <> ?", (int(enabled), now, account_id, agent_id, doc["name"],
                                                         int(enabled)))


def ensure_builtins(conn, account_id: str, agent_id: str, now: int) -> None:
    for name in BUILTINS:
        doc, cid = builtin_with_cid(name)
        _upsert(conn, account_id, agent_id, doc, now, cid=cid)


def sync_mcp(conn, account_id: str, agent_id: str, picked: list[str], now: int) -> None:
    """The agent's MCP rows become the tools of the enabled servers it picks, as last discovered."""
    wanted: dict[str, dict] = {}
    if picked:
        for server in mcp_q.list_servers(conn, account_id):
            if server["name"] in picked and server["enabled"]:
                for tool in server["tools"]:
                    doc = mcp_document(server["name"], tool)
                    wanted[doc["name"]] = doc
    rows = conn.execute("SELECT name FROM tool_documents WHERE account_id = ? AND agent_id = ? AND kind = 'mcp'",
                        (account_id, agent_id)).fetchall()
    for (name,) in rows:
        if name not in wanted:
            conn.execute("DELETE FROM tool_documents WHERE account_id = ? AND agent_id = ? AND name = ?",
                         (account_id, agent_id, name))
    for doc in wanted.values():
        _upsert(conn, account_id, agent_id, doc, now)


def refresh(conn, agent: dict, now: int) -> None:
    """Builtins and MCP projections of one agent brought up to date (listing and run start)."""
    ensure_builtins(conn, agent["account"], agent["id"], now)
    picked = agent["definition"].get("mcpServers")
    sync_mcp(conn, agent["account"], agent["id"], [p for p in picked if type(p) is str]
             if type(picked) is list else [], now)


def refreshed(conn, agent: dict, rows: list[dict], now: int) -> tuple[list[dict], bool]:
    """(the agent's documents as `refresh` would leave them, whether it would change anything),
    read-only: a run starts with its tools at once, and the write (when one is needed) is queued
    without being waited for."""
    have = {r["doc"]["name"]: r for r in rows}
    out = {name: r for name, r in have.items() if r["doc"]["kind"] != "mcp"}
    changed = False
    for name in BUILTINS:
        doc, cid = builtin_with_cid(name)
        row = have.get(name)
        if row is None or row["cid"] != cid:
            changed = True
            out[name] = {"doc": doc, "cid": cid, "enabled": True if row is None else row["enabled"],
                         "createdAt": now if row is None else row["createdAt"], "updatedAt": now}
    picked = agent["definition"].get("mcpServers")
    picked = [p for p in picked if type(p) is str] if type(picked) is list else []
    wanted = {}
    if picked:
        for server in mcp_q.list_servers(conn, agent["account"]):
            if server["name"] in picked and server["enabled"]:
                for tool in server["tools"]:
                    doc = mcp_document(server["name"], tool)
                    wanted[doc["name"]] = doc
    mcp_rows = {n: r for n, r in have.items() if r["doc"]["kind"] == "mcp"}
    for name, doc in wanted.items():
        cid = encode_document(doc)[0]
        row = mcp_rows.get(name)
        if row is None or row["cid"] != cid:
            changed = True
            row = {"doc": doc, "cid": cid, "enabled": True if row is None else row["enabled"],
                   "createdAt": now if row is None else row["createdAt"], "updatedAt": now}
        out[name] = row
    changed = changed or bool(set(mcp_rows) - set(wanted))
    return [out[n] for n in sorted(out)], changed


def _row(row: tuple) -> dict:
    name, kind, cid, doc, enabled, created_at, updated_at = row
    return {"doc": codec.decode(doc), "cid": cid, "enabled": bool(enabled), "createdAt": created_at,
            "updatedAt": updated_at}


def list_documents(conn, account_id: str, agent_id: str) -> list[dict]:
    rows = conn.execute(f"SELECT {_ROW} FROM tool_documents WHERE account_id = ? AND agent_id = ? ORDER BY name",
                        (account_id, agent_id)).fetchall()
    return [_row(r) for r in rows]


def get_document(conn, account_id: str, agent_id: str, name: str) -> dict | None:
    row = conn.execute(f"SELECT {_ROW} FROM tool_documents WHERE account_id = ? AND agent_id = ? AND name = ?",
                       (account_id, agent_id, name)).fetchone()
    return None if row is None else _row(row)


def save_lambda(conn, account_id: str, agent_id: str, doc: dict, enabled: bool | None,
                previous_name: str | None, now: int) -> dict:
    """Create an authored tool, or edit the one `previous_name` names (renaming it in the same
    transaction), as the reference does: the desktop's Add tool dialog sends no `previousName`,
    so a name already taken is 409, never a silent replacement of that tool; an edit of a tool
    that is gone is 404. A rename keeps the tool's createdAt and its switch."""
    name = doc["name"]
    existing = get_document(conn, account_id, agent_id, name)
    if previous_name is not None:
        before = existing if previous_name == name else get_document(conn, account_id, agent_id, previous_name)
        if before is None:
            raise Refused(404, f"tool {quote(previous_name)} not found")
        if before["doc"]["kind"] != "lambda":
            raise Refused(400, f"{quote(previous_name)} is a {before['doc']['kind']} tool and cannot be edited")
    if existing is not None and existing["doc"]["kind"] != "lambda":
        raise Refused(400, f"{quote(name)} is a {existing['doc']['kind']} tool and cannot be replaced")
    if existing is not None and previous_name != name:
        raise Refused(409, f"a tool named {quote(name)} already exists")
    if previous_name is not None and previous_name != name:
        conn.execute("UPDATE tool_documents SET name = ? WHERE account_id = ? AND agent_id = ? AND name = ?",
                     (name, account_id, agent_id, previous_name))
    _upsert(conn, account_id, agent_id, doc, now, enabled)
    return get_document(conn, account_id, agent_id, name)


def set_enabled(conn, account_id: str, agent_id: str, name: str, enabled: bool, now: int) -> dict | None:
    conn.execute("UPDATE tool_documents SET enabled = ?, updated_at = ? WHERE account_id = ? AND agent_id = ?"
                 " AND name = ? AND enabled <> ?", (int(enabled), now, account_id, agent_id, name, int(enabled)))
    return get_document(conn, account_id, agent_id, name)


def delete_lambda(conn, account_id: str, agent_id: str, name: str) -> bool:
    existing = get_document(conn, account_id, agent_id, name)
    if existing is None:
        return False
    kind = existing["doc"]["kind"]
    if kind != "lambda":
        raise Refused(400, f"{quote(name)} is a {kind} tool: disable it (SaveAgentTool with enabled: false)"
                                 " instead" + (", or remove its MCP server" if kind == "mcp" else ""))
    conn.execute("DELETE FROM tool_documents WHERE account_id = ? AND agent_id = ? AND name = ?",
                 (account_id, agent_id, name))
    return True


def delete_server_documents(conn, account_id: str, server: str) -> int:
    """Every agent's projections of one MCP server's tools (the server was removed)."""
    prefix = server + MCP_SEPARATOR
    rows = conn.execute("SELECT agent_id, name FROM tool_documents WHERE account_id = ? AND kind = 'mcp'",
                        (account_id,)).fetchall()
    gone = [(a, n) for a, n in rows if n.startswith(prefix)]
    for agent_id, name in gone:
        conn.execute("DELETE FROM tool_documents WHERE account_id = ? AND agent_id = ? AND name = ?",
                     (account_id, agent_id, name))
    return len(gone)


def delete_agent_documents(conn, agent_id: str) -> None:
    conn.execute("DELETE FROM tool_documents WHERE agent_id = ?", (agent_id,))
