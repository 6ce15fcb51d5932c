"""The publication queue's rows (table `hm_publications`): what the Seed hypermedia server did not
take, kept until it does (server/hypermedia/publications.py sends them).

An item is pending until sent (then its row goes) or refused (status 'failed', kept so the owner
sees why, never retried). Items of one (account, subject) go one at a time, oldest first: a
rename waits for the account's creation, a document's second version for its first. A server
takes an item by a lease (`claim`): one conditional UPDATE, so of two servers on one PostgreSQL
database exactly one wins it, and a server killed while holding it leaves it to the others once
the lease runs out. Times are the server's clock, as the activity feed's poll lease's are.
"""
from __future__ import annotations

from . import codec

_ITEM = ("id, account_id, subject, seq, kind, identity_name, agent_id, what, body, server_url, status,"
         " attempts, next_attempt_at, last_error, created_at")


def enqueue(conn, *, item_id: str, account_id: str, subject: str, kind: str, identity_name: str,  # noqa: ANN001
            agent_id: str | None, what: str, body: dict, server_url: str, now: int,
            failed_with: str | None = None, retry_at: int | None = None) -> dict:
    """A new pending item, after every item of its subject: due at once, or, when it was just
    tried (`failed_with` says why), at `retry_at`."""
    seq = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM hm_publications WHERE account_id = ? AND subject = ?",
                       (account_id, subject)).fetchone()[0]
    conn.execute(
        "INSERT INTO hm_publications (id, account_id, subject, seq, kind, identity_name, agent_id, what, body,"
        " server_url, status, attempts, last_error, next_attempt_at, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
        (item_id, account_id, subject, seq, kind, identity_name, agent_id, what, codec.encode(body), server_url,
         0 if failed_with is None else 1, failed_with, now if retry_at is None else retry_at, now, now))
    return get(conn, item_id)


def get(conn, item_id: str) -> dict | None:  # noqa: ANN001
    row = conn.execute(f"SELECT {_ITEM} FROM hm_publications WHERE id = ?", (item_id,)).fetchone()
    return None if row is None else _item(row)


def has_pending(conn, account_id: str, *subjects: str) -> bool:  # noqa: ANN001
    """Does any of the subjects have an item still waiting (so a new one must queue behind it)?"""
    return any(conn.execute("SELECT 1 FROM hm_publications WHERE account_id = ? AND subject = ?"
                            " AND status = 'pending' LIMIT 1", (account_id, subject)).fetchone() is not None
               for subject in subjects)


# A pending item is claimable when it is due, nobody holds it (or the holder's lease ran out),
# and no older pending item of its subject, nor of its identity (the account before the
# documents it signs), waits before it.
_CLAIMABLE = """
SELECT p.id FROM hm_publications p
WHERE p.status = 'pending' AND p.next_attempt_at <= ?
  AND (p.lease_owner IS NULL OR p.lease_expires_at < ?)
  AND NOT EXISTS (
      SELECT 1 FROM hm_publications o
      WHERE o.account_id = p.account_id AND o.status = 'pending'
        AND (o.subject = p.subject OR o.subject = 'identity:' || p.identity_name)
        AND (o.created_at < p.created_at OR (o.created_at = p.created_at AND o.seq < p.seq)))
ORDER BY p.created_at, p.seq
LIMIT ?
"""


def claim(conn, owner: str, now: int, lease_ms: int, limit: int, due_by: int | None = None) -> list[dict]:  # noqa: ANN001
    """Up to `limit` claimable items (oldest first), now held by `owner` until now + lease_ms;
    `due_by`: those due by then (a server that starts, or sees the HM server answer again, tries
    everything waiting at once, backoff or not).
    Each is taken by a conditional UPDATE: on PostgreSQL another server's concurrent claim of the
    same row waits for this one's transaction and then finds the lease taken."""
    taken = []
    for (item_id,) in conn.execute(_CLAIMABLE, (now if due_by is None else due_by, now, limit)).fetchall():
        row = conn.execute(
            "UPDATE hm_publications SET lease_owner = ?, lease_expires_at = ?, updated_at = ?"
            " WHERE id = ? AND status = 'pending' AND (lease_owner IS NULL OR lease_expires_at < ?)"
            f" RETURNING {_ITEM}", (owner, now + lease_ms, now, item_id, now)).fetchone()
        if row is not None:
            taken.append(_item(row))
    return taken


def release(conn, item_ids: list[str], owner: str) -> None:  # noqa: ANN001
    """Give back items claimed and not tried (their due time unchanged)."""
    conn.executemany("UPDATE hm_publications SET lease_owner = NULL, lease_expires_at = NULL"
                     " WHERE id = ? AND lease_owner = ?", [(i, owner) for i in item_ids])


def sent(conn, item_id: str, owner: str) -> bool:  # noqa: ANN001
    """The item went out: its row goes (only by its holder)."""
    conn.execute("DELETE FROM hm_publications WHERE id = ? AND lease_owner = ?", (item_id, owner))
    return conn.changes() == 1


def retry_later(conn, item_id: str, owner: str, error: str, at: int, now: int) -> None:  # noqa: ANN001
    """Not sent this time: one attempt more, the reason, the next try at `at`; the lease let go."""
    conn.execute("UPDATE hm_publications SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,"
                 " lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
                 (error, at, now, item_id, owner))


def failed(conn, item_id: str, owner: str, error: str, now: int) -> None:  # noqa: ANN001
    """Refused for good (the server said no, or the signer may no longer publish): kept, with why."""
    conn.execute("UPDATE hm_publications SET status = 'failed', attempts = attempts + 1, last_error = ?,"
                 " lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
                 (error, now, item_id, owner))


def next_wake(conn, now: int) -> int | None:  # noqa: ANN001
    """When an item next becomes claimable by time (its attempt due, or a lease running out)."""
    row = conn.execute(
        "SELECT min(CASE WHEN lease_owner IS NULL OR lease_expires_at < ? THEN next_attempt_at"
        " WHEN lease_expires_at > next_attempt_at THEN lease_expires_at ELSE next_attempt_at END) FROM hm_publications WHERE status = 'pending'",
        (now,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def counts(conn) -> dict:  # noqa: ANN001
    """{pending, failed}: health's figures."""
    out = {"pending": 0, "failed": 0}
    for status, n in conn.execute("SELECT status, count(*) FROM hm_publications GROUP BY status"):
        out[status] = int(n)
    return out


def of_identities(conn, account_id: str) -> dict[str, list[dict]]:  # noqa: ANN001
    """The account's pending and failed items by identity name, oldest first, as
    ListSigningIdentities shows them."""
    out: dict[str, list[dict]] = {}
    for row in conn.execute(f"SELECT {_ITEM} FROM hm_publications WHERE account_id = ?"
                            " ORDER BY created_at, seq LIMIT 1000", (account_id,)):
        item = _item(row)
        out.setdefault(item["identityName"], []).append(shown(item))
    return out


def drop_identity(conn, account_id: str, name: str) -> None:  # noqa: ANN001
    """An identity deleted: what it had waiting goes with it (nothing may sign as it any more)."""
    conn.execute("DELETE FROM hm_publications WHERE account_id = ? AND identity_name = ?", (account_id, name))


def shown(item: dict) -> dict:
    """What a client sees of an item: PendingPublication = {id, what, status, attempts,
    createdAt, nextAttemptAt?, lastError?, subject?}."""
    out = {"id": item["id"], "what": item["what"], "status": item["status"], "attempts": item["attempts"],
           "createdAt": item["createdAt"]}
    if item["status"] == "pending":
        out["nextAttemptAt"] = item["nextAttemptAt"]
    if item["lastError"]:
        out["lastError"] = item["lastError"]
    if not item["subject"].startswith("identity:"):
        out["subject"] = item["subject"]
    return out


def _item(row: tuple) -> dict:
    (item_id, account_id, subject, seq, kind, identity_name, agent_id, what, body, server_url, status, attempts,
     next_attempt_at, last_error, created_at) = row
    return {"id": item_id, "accountId": account_id, "subject": subject, "seq": seq, "kind": kind,
            "identityName": identity_name, "agentId": agent_id, "what": what, "body": codec.decode(bytes(body)),
            "serverUrl": server_url, "status": status, "attempts": attempts, "nextAttemptAt": next_attempt_at,
            "lastError": last_error, "createdAt": created_at}
