"""The reads behind the listing in an agent's system prompt (server/runtime/preamble.py builds and
caches it; the text is protocol/agent/preamble.py): what the listing depends on, and the listing."""
from __future__ import annotations

from seed_agents.protocol.agent import preamble as text
from seed_agents.protocol.api.actions_identities import signing_keys_of

from ..database.port import Conn
from . import identities as identities_q


def fingerprint(conn: Conn, agent: dict) -> tuple:
    """What the listing depends on, in a few aggregate reads (primary-key and index ranges)."""
    agent_id, account = agent["id"], agent["account"]
    memory = conn.execute("SELECT count(*), coalesce(max(updated_at), 0), coalesce(sum(size), 0),"
                          " coalesce(sum(length(path)), 0) FROM memory_files WHERE agent_id = ?",
                          (agent_id,)).fetchone()
    triggers = conn.execute("SELECT count(*), coalesce(max(updated_at), 0), coalesce(sum(enabled), 0)"
                            " FROM agent_triggers WHERE agent_id = ?", (agent_id,)).fetchone()
    members = conn.execute("SELECT count(*), coalesce(max(updated_at), 0) FROM agent_collaborators"
                           " WHERE agent_id = ? AND status = 'accepted'", (agent_id,)).fetchone()
    identities = conn.execute("SELECT count(*), coalesce(max(updated_at), 0) FROM signing_identities"
                              " WHERE account_id = ?", (account,)).fetchone()
    return (agent.get("updatedAt"), bool(agent.get("publicRead")), tuple(memory), tuple(triggers),
            tuple(members), tuple(identities))


def read_listing(conn: Conn, agent: dict) -> tuple[list[str], list[str], list[tuple[str, str]], list[dict]]:
    """(memory paths, active trigger names, accepted collaborators (account, role), identities)."""
    agent_id, account = agent["id"], agent["account"]
    paths = [r[0] for r in conn.execute("SELECT path FROM memory_files WHERE agent_id = ? ORDER BY path",
                                        (agent_id,))]
    triggers = [r[0] for r in conn.execute("SELECT name FROM agent_triggers WHERE agent_id = ? AND enabled = 1"
                                           " ORDER BY name LIMIT ?", (agent_id, text.MAX_TRIGGERS))]
    members = [(r[0], r[1]) for r in conn.execute(
        "SELECT account_id, role FROM agent_collaborators WHERE agent_id = ? AND status = 'accepted'"
        " ORDER BY created_at, account_id LIMIT ?", (agent_id, text.MAX_MEMBERS))]
    names = signing_keys_of(agent.get("definition") or {})
    identities = identities_q.list_identities(conn, account, names) if names else []
    order = {n: i for i, n in enumerate(names)}
    identities.sort(key=lambda i: order.get(i["name"], len(order)))
    return paths, triggers, members, identities
