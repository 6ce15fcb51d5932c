"""CreateSession's job as one statement, for a backend where each statement is a round trip
(`traits.batched_reads`: PostgreSQL's writer waits for every one).

One statement with data-modifying CTEs, all seeing one snapshot: the replay claim handed to the
action (server/store/handed_claim.py), the idempotency record looked up, the agent's row and the
caller's accepted grant read; the session and its idempotency record inserted when the claim is
held, no record exists and the caller may write (the agent's owner, or an accepted writer). One
row comes back with what was read and whether the session went in.

The caller (server/handlers/sessions.py, `created_together`) decides the answer from those reads
with the access model's own functions, as the job of one statement at a time does; the insert's
condition is only there so that the writes can travel with the reads. Where the two disagree the
caller's decision stands: an insert it refuses is rolled back with the job's savepoint (it
raises), and an allowed one the statement did not make is made then (`inserts`). So the SQL here
never decides access on its own (tests/server/handlers/test_create_session_job.py compares it
with the one-at-a-time job for every kind of caller)."""
from __future__ import annotations

import re

from . import agents as agents_q
from . import idempotency as idem_q
from . import sessions as sessions_q

# (handed_claim.CLAIM_ROW as a CTE)
_CLAIM = ("claim AS (INSERT INTO accepted_signatures (sig, expires_at) VALUES (:sig, :expires_at)"
          " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
          " WHERE accepted_signatures.expires_at < :claim_now RETURNING sig), ")
_PRIOR = ("prior AS (SELECT fingerprint, response FROM idempotency"
          " WHERE account_id = :account AND action = 'CreateSession' AND client_id = :client_id), ")
_KEPT = (", kept AS (INSERT INTO idempotency (account_id, action, client_id, fingerprint, response, created_at)"
         " SELECT :account, 'CreateSession', :client_id, :fingerprint, :response, :now FROM made)")
_TEMPLATE = (
    "WITH {claim}{prior}"
    "grantee AS (SELECT role FROM agent_collaborators"
    " WHERE agent_id = :agent AND account_id = :account AND status = 'accepted'), "
    "agent AS ({agent_row}), "
    "made AS (INSERT INTO sessions (id, account_id, agent_id, title, status, created_at, updated_at, parent_session_id)"
    " SELECT :session, agent.account_id, :agent, CAST(:title AS TEXT), 'idle', :now, :now, NULL FROM agent"
    " WHERE {held} AND {no_prior}"
    " AND (agent.account_id = :account OR EXISTS (SELECT 1 FROM grantee WHERE role IN ('writer', 'owner')))"
    " RETURNING id){kept} "
    "SELECT {claimed}, (SELECT count(*) FROM made), {prior_cols}, (SELECT role FROM grantee), agent.*"
    " FROM (SELECT 1) AS one{prior_join} LEFT JOIN agent ON true")


def _numbered(template: str) -> tuple[str, list[str]]:
    """`:name` placeholders as `?1`, `?2`, ... in order of first appearance, and those names."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"?{names.index(name) + 1}"

    return re.sub(r":([a-z_]+)", number, template), names


def _text(claimed: bool, idempotent: bool) -> tuple[str, list[str]]:
    agent_row = agents_q.AGENT_ROW.replace("WHERE id = ?", "WHERE id = :agent")
    return _numbered(_TEMPLATE.format(
        claim=_CLAIM if claimed else "", prior=_PRIOR if idempotent else "", agent_row=agent_row,
        held="EXISTS (SELECT 1 FROM claim)" if claimed else "true",
        no_prior="NOT EXISTS (SELECT 1 FROM prior)" if idempotent else "true",
        kept=_KEPT if idempotent else "",
        claimed="(SELECT count(*) FROM claim)" if claimed else "1",
        prior_cols="prior.fingerprint, prior.response" if idempotent else "NULL, NULL",
        prior_join=" LEFT JOIN prior ON true" if idempotent else ""))


_TEXTS = {(c, i): _text(c, i) for c in (False, True) for i in (False, True)}


def statement(claim: tuple | None, account_id: str, agent_id: str, title: str | None, client_id: str | None,
              fingerprint: bytes, response: bytes, now: int, session_id: str) -> tuple[str, tuple]:
    """The statement and its parameters; `claim` is a HandedClaim's (sig, expires_at, now)."""
    sql, names = _TEXTS[(claim is not None, client_id is not None)]
    values = {"account": account_id, "agent": agent_id, "session": session_id, "title": title, "now": now,
              "client_id": client_id, "fingerprint": bytes(fingerprint), "response": bytes(response)}
    if claim is not None:
        values.update(sig=bytes(claim[0]), expires_at=claim[1], claim_now=claim[2])
    return sql, tuple(values[name] for name in names)


def unpack(row: tuple) -> tuple[bool, bool, tuple | None, str | None, tuple | None]:
    """(claim held, session inserted, prior (fingerprint, response) or None, grant, agent row or None)."""
    claimed, made, fingerprint, response, grant, *agent = row
    return (bool(claimed), bool(made), None if fingerprint is None else (fingerprint, response), grant,
            None if agent[0] is None else tuple(agent))


def inserts(session_id: str, account_id: str, owner: str, agent_id: str, title: str | None,
            client_id: str | None, fingerprint: bytes, response: bytes, now: int) -> list[tuple[str, tuple]]:
    """The two inserts alone (the statement's condition disagreed with the caller's decision)."""
    writes = [sessions_q.session_insert(session_id, owner, agent_id, title, now)]
    if client_id is not None:
        writes.append((idem_q.IDEM_PUT, (account_id, "CreateSession", client_id, bytes(fingerprint),
                                         bytes(response), now)))
    return writes
