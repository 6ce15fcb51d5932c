"""Exactly-once effects for actions that carry a client id (CONTRACT section 4, Idempotency).

The check, the effect and the record run in one job of the single writer thread, so two
concurrent requests with one id cannot both see "absent": the second finds the first's record.
"""
from __future__ import annotations

from typing import Callable

from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..store import codec
from ..store import idempotency as idem_q


def once(conn, account_id: str, action: str, client_id: str | None, fingerprint: bytes, now: int,
         effect: Callable[[object], tuple[dict, list]]) -> tuple[dict, list]:
    """Run `effect(conn) -> (response, to_publish)` at most once per (account, action, id).

    A repeat with the same request returns the first response and nothing to publish; a repeat
    with a different request is 409."""
    if client_id is None:
        return effect(conn)
    prior = idem_q.idem_get(conn, account_id, action, client_id)
    if prior is not None:
        prior_fp, prior_response = prior
        if bytes(prior_fp) != fingerprint:
            raise ProtocolError(409, f"{action} id {quote(client_id)} was already used with a different request")
        return codec.decode(prior_response), []
    response, to_publish = effect(conn)
    idem_q.idem_put(conn, account_id, action, client_id, fingerprint, codec.encode(response), now)
    return response, to_publish
