"""RegisterSigner: a delegate presents a Capability blob from the account it will act for."""
from __future__ import annotations

from seed_agents.protocol.wire.capability import parse_capability
from seed_agents.protocol.wire.errors import ProtocolError

from ..store import accounts as accounts_q
from .context import HandlerContext


async def register_signer(ctx: HandlerContext, env, action) -> dict:
    # Any fault in the blob is a 400, and so is one dated beyond the clock window (a capability
    # from the future: docs/protocol.md, "Capabilities").
    cap = parse_capability(action.capability, now_ms=ctx.now_ms(),
                           window_ms=ctx.config.clock_window_ms)
    if cap.delegate != env.signer:
        raise ProtocolError(400, "capability delegate does not match the envelope signer; "
                                 "the delegate must send RegisterSigner for itself")
    now = ctx.now_ms()

    def job(conn):
        accounts_q.ensure_account(conn, cap.issuer_id, now)
        accounts_q.add_signer(conn, cap.issuer_id, cap.delegate_id, cap.role, cap.cid, cap.blob, now,
                              cap.expires_at)

    await ctx.db.write(job)
    ctx.remember_signer(cap.issuer_id, cap.delegate_id, cap.expires_at)
    return {"_": "RegisterSignerResponse", "accountId": cap.issuer_id, "signerId": cap.delegate_id}


UNREGISTERED = "the account unregistered the signer this socket acted with"


async def unregister_signer(ctx: HandlerContext, env, action) -> dict:
    """The account takes a delegate's key back (a lost or leaked device): signed by the
    account's own key only, never by a delegate. Live: the sockets that acted through that
    signer are closed (1008), and the next action it signs is refused (403)."""
    if env.signer != env.account:
        raise ProtocolError(403, "only the account's own key may unregister a signer")
    account_id, signer_id = env.account_id, action.signer_id

    def job(conn):
        return accounts_q.remove_signer(conn, account_id, signer_id)

    removed = await ctx.db.write(job)
    if not removed:
        raise ProtocolError(404, f"signer {signer_id} is not registered for this account")
    ctx.forget_signer(account_id, signer_id)
    return {"_": "UnregisterSignerResponse", "accountId": account_id, "signerId": signer_id}
