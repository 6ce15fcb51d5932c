"""Sharing: agent_collaborators (pending invitations and accepted grants, keyed by (agent,
account)) and agents.public_read (seed-agents-storage.txt). An agent's content stays under its
owner's account; these rows only say who else may reach it.

AgentCollaboratorInfo = {accountId, role, status, createdAt, updatedAt};
AgentInviteInfo = {agentId, agentName, ownerAccountId, role, createdAt, updatedAt}.
"""
from __future__ import annotations

from seed_agents.protocol.wire.dagcbor import peek_text

from ..database.port import Conn
from . import agents as agents_q
from . import codec
from . import sessions as sessions_q


def collaborator_info(account_id: str, role: str, status: str, created_at: int, updated_at: int) -> dict:
    return {"accountId": account_id, "role": role, "status": status, "createdAt": created_at,
            "updatedAt": updated_at}


def accepted_role(conn: Conn, agent_id: str, account_id: str) -> str | None:
    """The accepted grant's role (primary-key search), None when pending or absent."""
    row = conn.execute(ACCEPTED_ROLE, (agent_id, account_id)).fetchone()
    return None if row is None else row[0]


ACCEPTED_ROLE = "SELECT role FROM agent_collaborators WHERE agent_id = ? AND account_id = ? AND status = 'accepted'"


def get(conn: Conn, agent_id: str, account_id: str) -> dict | None:
    row = conn.execute("SELECT account_id, role, status, created_at, updated_at FROM agent_collaborators"
                       " WHERE agent_id = ? AND account_id = ?", (agent_id, account_id)).fetchone()
    return None if row is None else collaborator_info(*row)


def invite(conn: Conn, agent_id: str, account_id: str, role: str, now: int) -> dict:
    """Invite, or change the role of an existing invitation or grant: an accepted grant stays
    accepted (re-inviting only changes the role), a pending one stays pending."""
    row = conn.execute(
        "INSERT INTO agent_collaborators (agent_id, account_id, role, status, created_at, updated_at)"
        " VALUES (?, ?, ?, 'pending', ?, ?)"
        " ON CONFLICT (agent_id, account_id) DO UPDATE SET role = excluded.role,"
        " updated_at = max(agent_collaborators.updated_at, excluded.updated_at)"
        " RETURNING account_id, role, status, created_at, updated_at",
        (agent_id, account_id, role, now, now)).fetchone()
    return collaborator_info(*row)


def remove(conn: Conn, agent_id: str, account_id: str) -> dict | None:
    """Delete a grant or invitation; the row as it was, or None when there was none."""
    row = conn.execute("DELETE FROM agent_collaborators WHERE agent_id = ? AND account_id = ?"
                       " RETURNING account_id, role, status, created_at, updated_at",
                       (agent_id, account_id)).fetchone()
    return None if row is None else collaborator_info(*row)


def accept(conn: Conn, agent_id: str, account_id: str, now: int) -> str | None:
    """Accept an invitation (accepting an accepted one again changes nothing); its role, or
    None when the account has no invitation to the agent."""
    row = conn.execute(
        "UPDATE agent_collaborators SET status = 'accepted',"
        " accepted_at = CASE WHEN status = 'accepted' THEN accepted_at ELSE ?1 END,"
        " updated_at = CASE WHEN status = 'accepted' THEN updated_at ELSE max(updated_at, ?1) END"
        " WHERE agent_id = ?2 AND account_id = ?3 RETURNING role",
        (now, agent_id, account_id)).fetchone()
    return None if row is None else row[0]


def decline(conn: Conn, agent_id: str, account_id: str) -> bool:
    """Delete a pending invitation; False when there is none (an accepted grant is not an
    invitation: the owner removes it)."""
    conn.execute("DELETE FROM agent_collaborators WHERE agent_id = ? AND account_id = ? AND status = 'pending'",
                 (agent_id, account_id))
    return conn.changes() == 1


def collaborators_of(conn: Conn, agent_id: str) -> list[dict]:
    """Every invitation and grant of an agent (primary-key range): accepted first, then by age."""
    rows = conn.execute("SELECT account_id, role, status, created_at, updated_at FROM agent_collaborators"
                        " WHERE agent_id = ?", (agent_id,)).fetchall()
    infos = [collaborator_info(*row) for row in rows]
    infos.sort(key=lambda c: (c["status"] != "accepted", c["createdAt"], c["accountId"]))
    return infos


def members(conn: Conn, agent_id: str) -> dict[str, tuple[str, str]]:
    """account -> (role, status) of every collaborator row of an agent (primary-key range)."""
    return {acct: (role, status) for acct, role, status in conn.execute(
        "SELECT account_id, role, status FROM agent_collaborators WHERE agent_id = ?", (agent_id,))}


def invites_of(conn: Conn, account_id: str) -> list[dict]:
    """The account's pending invitations, newest first (agent_collaborators_by_account); only
    the agent's name and owner are disclosed."""
    rows = conn.execute(
        "SELECT c.agent_id, a.account_id, a.definition, c.role, c.created_at, c.updated_at"
        " FROM agent_collaborators c INDEXED BY agent_collaborators_by_account"
        " JOIN agents a ON a.id = c.agent_id"
        " WHERE c.account_id = ? AND c.status = 'pending' ORDER BY c.updated_at DESC",
        (account_id,)).fetchall()
    invites = []
    for agent_id, owner, definition, role, created_at, updated_at in rows:
        # Read from the stored bytes: a definition is never decoded just for its name.
        name = peek_text(bytes(definition), "name")
        invites.append({"agentId": agent_id, "agentName": name or "",
                        "ownerAccountId": owner, "role": role, "createdAt": created_at,
                        "updatedAt": updated_at})
    return invites


def set_public_read(conn: Conn, agent_id: str, public_read: bool, now: int) -> None:
    conn.execute("UPDATE agents SET public_read = ?, updated_at = max(updated_at, ?) WHERE id = ?",
                 (int(public_read), now, agent_id))


# -- listings: what is shared with an account (ListAgents, ListSessions) ----------------------
# Kept apart from store/agents.py and store/sessions.py: those list an account's own rows;
# these add the agents it collaborates on, each read through an index.

def shared_agents(conn: Conn, account_id: str) -> dict[str, str]:
    """agent id -> role of the account's accepted grants (agent_collaborators_by_account)."""
    return {agent_id: role for agent_id, role in conn.execute(
        "SELECT agent_id, role FROM agent_collaborators INDEXED BY agent_collaborators_by_account"
        " WHERE account_id = ? AND status = 'accepted'", (account_id,))}


def list_shared_agents(conn: Conn, account_id: str) -> list[dict]:
    """AgentInfo of each agent shared with the account (accepted), with its role."""
    out = []
    for agent_id, role in shared_agents(conn, account_id).items():
        agent = agents_q.get_agent(conn, agent_id, role)
        if agent is not None:
            out.append(agent)
    return out


def shared_agent_rows(conn: Conn, account_id: str, limit: int, cursor: dict | None) -> list[tuple]:
    """Rows (store/agents._COLUMNS) of at most `limit` agents shared with the account (accepted),
    newest update first, past `cursor`: one page in SQL, definitions not decoded."""
    where = ("id IN (SELECT agent_id FROM agent_collaborators WHERE account_id = ? AND status = 'accepted')")
    params: list = [account_id]
    if cursor is not None:
        where += " AND updated_at <= ? AND (updated_at < ? OR id > ?)"
        params += [cursor["updatedBefore"], cursor["updatedBefore"], cursor["idAfter"]]
    return conn.execute(f"SELECT {agents_q._COLUMNS} FROM agents WHERE {where} ORDER BY updated_at DESC, id LIMIT ?",
                        (*params, limit)).fetchall()


def agents_page(conn: Conn, account_id: str, limit: int, cursor: dict | None,
                max_bytes: int) -> tuple[list[dict], dict | None]:
    """ListAgents of an account that may collaborate: its own agents (one keyset range of
    agents_by_account, store/agents.list_agents_page) merged with those shared with it (one
    page of them, store-side: shared_agent_rows), newest update first, paged the same way: at
    most `limit`, ending before `max_bytes`, with the same {updatedBefore, idAfter} cursor. Only
    the agents of the page are decoded."""
    own, own_next = agents_q.list_agents_page(conn, account_id, limit, cursor, max_bytes)
    roles = shared_agents(conn, account_id)
    if not roles:
        return own, own_next
    rows = shared_agent_rows(conn, account_id, limit + 1, cursor)
    # (order key, cost, own AgentInfo or shared row)
    items: list[tuple[tuple, int, dict | tuple]] = [((-a["updatedAt"], a["id"]), len(codec.encode(a["definition"])), a)
                                                   for a in own]
    items += [((-r[6], r[0]), len(r[2]), r) for r in rows]
    items.sort(key=lambda item: item[0])
    if own_next is not None:   # own agents past that page are not read: stop at its last one
        last = (-own[-1]["updatedAt"], own[-1]["id"])
        items = [item for item in items if item[0] <= last]
    page: list[dict] = []
    size = 0
    for _order, cost, agent in items:
        cost += agents_q.AGENT_INFO_OVERHEAD
        if len(page) == limit or (page and size + cost > max_bytes):
            break
        page.append(agent if isinstance(agent, dict) else agents_q.agent_info(agent, roles.get(agent[0], "reader")))
        size += cost
    more = len(page) < len(items) or own_next is not None
    next_cursor = {"updatedBefore": page[-1]["updatedAt"], "idAfter": page[-1]["id"]} if more and page else None
    return page, next_cursor


def merge_agents(own: list[dict], shared: list[dict]) -> list[dict]:
    """One list, newest update first (ListAgents' order)."""
    if not shared:
        return own
    return sorted(own + shared, key=lambda a: (-a["updatedAt"], a["id"]))


def sessions_page(conn: Conn, account_id: str, agent_ids, limit: int,
                  cursor: dict | None, include_children: bool) -> tuple[list[dict], dict | None]:
    """ListSessions without a filter for an account that collaborates: its own sessions and
    those of the agents shared with it, newest update first, keyset paged like
    store/sessions.list_sessions. Each source (the account, then each shared agent) is one range
    of its index (sessions_by_account, sessions_by_agent) of at most limit + 1 rows, so their
    merge's first limit + 1 rows are exactly the page and whether more remain."""
    where: list[str] = []
    extra: list = []
    if not include_children:
        where.append("parent_session_id IS NULL")
    if cursor is not None:
        updated_before, id_before = sessions_q._cursor(cursor)
        where.append("updated_at <= ? AND (updated_at < ? OR id < ?)")
        extra = [updated_before, updated_before, id_before]
    rest = "".join(" AND " + w for w in where)
    rows: list[tuple] = []
    sources = [("account_id", account_id)] + [("agent_id", a) for a in agent_ids]
    for column, value in sources:
        # (a shared agent's visitor sessions are its visitors' and its owner's: not listed here)
        only = " AND visitor_id IS NULL" if column == "agent_id" else ""
        sql = f"SELECT {sessions_q._COLUMNS} FROM sessions WHERE {column} = ?{only}{rest} {sessions_q._ORDER} LIMIT ?"
        rows += conn.execute(sql, (value, *extra, limit + 1)).fetchall()
    rows.sort(key=lambda r: (r[6], r[0]), reverse=True)   # (updated_at, id) both descending
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = {"updatedBefore": rows[-1][6], "idBefore": rows[-1][0]} if more and rows else None
    return [sessions_q.session_info(row) for row in rows], next_cursor
