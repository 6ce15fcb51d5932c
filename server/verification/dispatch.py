"""The verification pipeline of CONTRACT section 2, then the handler; the same for v1 and v2.

`execute` never raises: every failure becomes an Error response value with a contract status.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass

from seed_agents.protocol.api.actions import parse_action
from seed_agents.protocol.wire.envelope import VerifiedEnvelope, verify_envelope
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.events import error_response as error
from seed_agents.protocol.wire.frame_limits import envelope_limit, frame_limit

from ..operations import accesslog
from ..routes import ROUTES
from ..store import handed_claim
from ..store.errors import InvalidCursor, NotFound, Refused, UnstorableText
from ..store.handed_claim import HandedClaim
from .upload_gate import arrived_ms

log = logging.getLogger("seed_agents.dispatch")

_THREAD_VERIFY_BYTES = 64 * 1024   # frames larger than this are verified on a worker thread

NOT_AUTHORIZED = ("Signer is not authorized for this account: send RegisterSigner with a "
                  "Capability from the account, then retry")


@dataclass(slots=True)
class Outcome:
    response: dict
    envelope: VerifiedEnvelope | None = None
    action: object | None = None
    junk: bool = False   # refused by a verification step (1-6): not the account's own action


def _limit(envelope, default: int) -> int:
    """The frame limit of this envelope's action (an upload action's is larger; verification
    then proves the name read from the bytes is the action's: a canonical envelope is required)."""
    return envelope_limit(envelope, default) if type(envelope) is bytes and len(envelope) > default else default


def _verify_failure_reason(status: int) -> str:
    return {400: "malformed", 401: "signature_or_clock", 413: "too_large"}.get(status, str(status))


async def execute(app, conn, envelope) -> Outcome:
    """`envelope` is the frame bytes (v1) or the decoded envelope map (v2)."""
    if type(envelope) is bytes and len(envelope) > app.config.limits.max_frame:
        # An upload chunk (protocol/wire/frame_limits.py): only a few are worked on at once in the
        # whole server, so concurrent uploads cost memory per chunk in flight, not per client.
        async with app.upload_gate.slot(app.now_ms()):
            return await _execute(app, conn, envelope)
    return await _execute(app, conn, envelope)


async def _execute(app, conn, envelope) -> Outcome:
    started = time.perf_counter()
    name = "unknown"
    limits = app.config.limits
    verified = False
    riding = False
    handed: HandedClaim | None = None
    try:
        # Every frame costs the connection's own bucket first: a stream of frames that never
        # verify meets a limit before each costs a signature check, and is never charged to an
        # account it merely names.
        if not conn.own_bucket.take():
            raise ProtocolError(429, "rate limit: too many actions on this connection; slow down")
        # A socket bound to an account (by one of that account's own verified actions) skips the
        # signature check when the account's bucket is already empty: a look, not a charge.
        if conn.account_id is not None and not app.limiter.ready(conn.account_id):
            raise ProtocolError(429, "rate limit: too many actions for this account; slow down")
        try:
            if type(envelope) is bytes and len(envelope) > _THREAD_VERIFY_BYTES:
                # Hashing (and counting the items of) a large frame takes milliseconds: done off
                # the loop, so the other clients' requests are served meanwhile (the signature
                # check releases the GIL).
                env = await asyncio.to_thread(
                    verify_envelope, envelope, now_ms=arrived_ms(app.now_ms()), window_ms=app.config.clock_window_ms,
                    max_size=_limit(envelope, limits.max_frame), max_depth=limits.max_depth)
            else:
                env = verify_envelope(envelope, now_ms=arrived_ms(app.now_ms()), window_ms=app.config.clock_window_ms,
                                      max_size=_limit(envelope, limits.max_frame), max_depth=limits.max_depth)
        except ProtocolError as exc:
            app.metrics.verify_failures.labels(_verify_failure_reason(exc.status)).inc()
            raise
        if type(envelope) is bytes and len(envelope) > frame_limit(env.name, limits.max_frame):
            raise ProtocolError(413, f"envelope of {len(envelope)} bytes is over the limit of {limits.max_frame}")
        route = ROUTES.get(env.name)
        name = env.name if route is not None else "unknown"
        # Step 5: the signer acts for the account, or is registered for it.
        if env.signer != env.account and not app.signer_known(env.account_id, env.signer_id):
            app.metrics.verify_failures.labels("unauthorized_signer").inc()
            raise ProtocolError(403, NOT_AUTHORIZED)
        # RegisterSigner is signed by the delegate for itself, right before it retries for the
        # issuer's account on the same socket: it must not bind the socket to itself.
        binds = env.name != "RegisterSigner"
        if binds:
            conn.check_bind(env.account_id)  # 403 on a switch; 429 (then close 1008) past the socket limit
        if not app.limiter.ready(env.account_id):
            raise ProtocolError(429, "rate limit: too many actions for this account; slow down")
        # Step 6: replay. Nothing above charged or bound anything to the account, so a captured
        # envelope replayed from another connection (409 here) costs its owner nothing.
        is_read = route is not None and route.read
        now = app.now_ms()
        fresh, expires_at = app.guard.claim(env.sig, conn_id=conn.id, is_read=is_read, ts=env.ts, now=now)
        if fresh and app.db.shared and route is not None and route.claims:
            # The handler makes the claim in its own statements (one round trip, and for a write
            # one commit, fewer), before its effect and its answer; if it did not, it is made
            # below before anything is answered (server/store/handed_claim.py).
            handed = HandedClaim(env.sig, expires_at, now,
                                 make=functools.partial(app.claim_everywhere, env.sig, expires_at, is_read, now))
        elif fresh and app.db.shared:
            # Several servers: the signature's row in the shared database is the claim that
            # counts, made before anything is answered (another server may have taken it).
            await app.claim_everywhere(env.sig, expires_at, is_read, now)
            if not app.limiter.ready(env.account_id):   # the await let other frames spend it
                raise ProtocolError(429, "rate limit: too many actions for this account; slow down")
        # Verified as the account, every step included: only now is the account charged (the
        # token seen above is still there: looked at again after any await) and the socket bound.
        app.limiter.take(env.account_id)
        binding = binds and conn.account_id is None   # (undone if a handed claim is refused)
        if binds:
            conn.bind_account(env.account_id)
        conn.signers.add(env.signer_id)   # UnregisterSigner closes the sockets it acted on
        verified = True
        if not is_read:
            # Carried by the next write submitted (this action's own, unless another comes first),
            # and the writer commits in order: a write's claim is durable before its response
            # goes out, without a job and a wake-up of the writer of its own.
            riding = app.save_signatures(ride=True)
        elif app.guard.must_persist(is_read, env.ts, now):
            await app.save_signatures_durably()   # signed ahead of our clock (replay_guard.py)
        action = parse_action(env.action)
        if handed is None:
            response = await route.handler(app.context, env, action)
        else:
            response = await _with_claim(app, conn, route, env, action, handed, binding)
        outcome = Outcome(response, env, action)
    except (ProtocolError, Refused) as exc:
        # A rate limit is not junk: it is already bounded, and it is what an honest client
        # that sends too fast sees.
        outcome = Outcome(error(exc.status, exc.message), junk=not verified and exc.status != 429)
    except NotFound as exc:   # a row that vanished between check and use
        outcome = Outcome(error(404, str(exc)))
    except InvalidCursor as exc:
        outcome = Outcome(error(400, f"cursor: {exc}"))
    except UnstorableText as exc:
        outcome = Outcome(error(400, str(exc)))
    except Exception:  # a bug must not take the connection down; the detail goes to the log
        log.exception("action %s failed", name)
        outcome = Outcome(error(500, "internal error"))
    if riding:   # the action wrote nothing (or failed): its claim goes now, before the answer
        app.db.release_riders()
    status = outcome.response.get("status", 200) if outcome.response.get("_") == "Error" else 200
    app.metrics.action_done(name, status, time.perf_counter() - started)
    accesslog.record(conn, name, outcome, status, time.perf_counter() - started)
    return outcome


async def _with_claim(app, conn, route, env, action, handed: HandedClaim, binding: bool) -> dict:
    """The handler, holding the replay claim handed to it; the claim is made (or refused, 409)
    before anything is answered, whatever the handler did. A refused copy ends as one refused
    before its handler does: it neither charges the account nor binds the socket (both, made
    before the handler ran, are undone), and this server's guard forgets the signature."""
    token = handed_claim.hand(handed)
    try:
        try:
            response = await route.handler(app.context, env, action)
        except Exception:
            await handed.ensure()   # (refused: the 409 is the answer, not what the handler met)
            raise
        await handed.ensure()
        return response
    finally:
        handed_claim.take_back(token)
        if handed.refused:
            app.guard.forget(env.sig)
            app.limiter.refund(env.account_id)
            if binding and conn.account_id == env.account_id:
                conn.unbind_account()
