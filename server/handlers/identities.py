"""Signing identities (CONTRACT section 8): Seed account keys the server holds for an account's
agents. Answers carry SigningIdentity = {id, name, accountId, label?, icon?, serverUrl?,
createdAt, updatedAt}; the seed never leaves the server.

With an HM server set (`--hm-server-url`), creating an identity publishes the new account and
renaming it (or giving it an icon) republishes its profile, BEFORE anything is written: a refused
publication is a 502 and nothing is stored; a created identity whose server does not answer at
all is stored unpublished (as one made offline) and goes up whole at its first update. Import publishes nothing (the account may already
have a profile of its own). Decisions are in docs/protocol.md, "Signing identities".
"""
from __future__ import annotations

import logging
import os

import filetype

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.api.actions_identities import SEED_SIZE, signing_keys_of
from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.wire.keys import Keypair

from ..clock import new_id
from ..hypermedia import identity_publish, publications
from ..store import codec
from ..store import idempotency as idem_q
from ..store import identities as identities_q
from ..store import publications as pub_q
from .access import OWNER, READER, agent_for
from .context import HandlerContext
from .idempotency import once

log = logging.getLogger("seed_agents.identities")

# Identities per account: ListSigningIdentities answers them all (a few hundred bytes each).
MAX_IDENTITIES = 1_000
# What a profile avatar may be: images a browser (and so the Seed desktop) shows, told by their
# bytes, never by the mimeType a client claims.
ICON_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP",
              "image/avif": "AVIF", "image/bmp": "BMP", "image/x-icon": "ICO"}


def identity_name(identity_id: str) -> str:
    """The name agents use for an identity, as the reference makes it."""
    return "hm-account-" + identity_id[:16]


def _publishing(ctx: HandlerContext) -> bool:  # noqa: ANN001
    return bool(ctx.config.hm_server_url)


async def list_signing_identities(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        owner, names = env.account_id, None
        if action.agent_id is not None:
            # The owner's identities of a shared agent. A collaborator sees only those the agent's
            # definition names: the owner's other keys stay private.
            agent = agent_for(conn, env.account_id, action.agent_id, READER)
            owner = agent["account"]
            names = None if agent["accessRole"] == OWNER else signing_keys_of(agent["definition"])
        identities = identities_q.list_identities(conn, owner, names)
        waiting = pub_q.of_identities(conn, owner) if identities else {}
        return [with_pending(i, waiting.get(i["name"])) for i in identities]

    return {"_": "ListSigningIdentitiesResponse", "identities": await ctx.db.aread(read, large=True)}


def with_pending(identity: dict, items: list[dict] | None) -> dict:
    """SigningIdentity with what of it the HM server has not taken yet (ours, beyond the
    reference): `pendingPublications`, oldest first, absent when nothing waits."""
    return {**identity, "pendingPublications": items} if items else identity


async def _answered_before(ctx: HandlerContext, env, action_name: str, client_id: str | None) -> dict | None:  # noqa: ANN001
    """The first answer to this clientRequestId, so a retry neither makes a second key nor
    publishes again (409 when the id came with another request). `once` checks again in the
    write, which settles two concurrent first tries."""
    if client_id is None:
        return None
    prior = await ctx.db.aread(idem_q.idem_get, env.account_id, action_name, client_id)
    if prior is None:
        return None
    if bytes(prior[0]) != request_fingerprint(env.action):
        raise ProtocolError(409, f"{action_name} id {quote(client_id)} was already used with a different request")
    return codec.decode(prior[1])


def _room_for_one(conn, account_id: str, action_name: str) -> None:  # noqa: ANN001
    if identities_q.count_identities(conn, account_id) >= MAX_IDENTITIES:
        raise ProtocolError(409, f"{action_name}: an account holds at most {MAX_IDENTITIES} signing "
                                 "identities (delete one with DeleteSigningIdentity first)")


async def _store_new(ctx: HandlerContext, env, action, action_name: str, seed: bytes, label: str | None,  # noqa: ANN001
                     server_url: str | None, origin: str, now: int,
                     queued: tuple[list, str | None] | None = None) -> dict:
    identity_id = Keypair.from_seed(seed).account_id
    name = identity_name(identity_id)
    account_id = env.account_id
    sealed = ctx.secrets.seal(seed, identities_q.identity_aad(account_id, name))

    def effect(conn):
        existing = identities_q.get_identity(conn, account_id, name)
        if existing is not None:
            raise ProtocolError(409, f"This account key is already on the server ({existing['accountId']}, "
                                     f"named {existing['name']})")
        _room_for_one(conn, account_id, action_name)
        identity = identities_q.insert_identity(conn, account_id, name, identity_id, new_id(), sealed,
                                                label, server_url, origin, now)
        if queued is not None:
            item = _enqueue(conn, ctx, account_id, name, queued, "the new account", now)
            identity = with_pending(identity, [pub_q.shown(item)])
        return {"_": action_name + "Response", "identity": identity}, []

    def job(conn):
        return once(conn, account_id, action_name, action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, _ = await ctx.db.write(job)
    _wake(ctx)
    return response


def _enqueue(conn, ctx: HandlerContext, account_id: str, name: str, queued: tuple, what: str, now: int) -> dict:  # noqa: ANN001
    """The blobs the HM server did not take (`queued`: them, and why not, None when they wait
    behind earlier ones untried), queued in the action's own transaction."""
    blobs, reason = queued
    return pub_q.enqueue(conn, item_id=new_id(), account_id=account_id, subject=f"identity:{name}", kind="blobs",
                         identity_name=name, agent_id=None, what=what, body=publications.blobs_body(blobs),
                         server_url=ctx.config.hm_server_url, now=now, failed_with=reason,
                         retry_at=None if reason is None else now + int(ctx.config.hm_publish_retry * 1000))


def _wake(ctx: HandlerContext) -> None:
    if ctx.publications is not None:
        ctx.publications.wake()


async def create_signing_identity(ctx: HandlerContext, env, action) -> dict:
    prior = await _answered_before(ctx, env, "CreateSigningIdentity", action.client_request_id)
    if prior is not None:
        return prior
    await ctx.db.aread(_room_for_one, env.account_id, "CreateSigningIdentity")   # before publishing anything
    now = ctx.now_ms()
    seed = os.urandom(SEED_SIZE)
    identity_id = Keypair.from_seed(seed).account_id
    label = action.label or f"Agent account {identity_id[:10]}"
    server_url: str | None = None
    queued: tuple[list, str | None] | None = None
    if _publishing(ctx):
        blobs = identity_publish.account_blobs(seed, label, now)
        try:
            await identity_publish.publish(ctx, blobs, "the agent account")
            server_url = ctx.config.hm_server_url
        except identity_publish.Unreachable as exc:
            # Beyond the reference: no network is no reason to refuse a key. It is kept here,
            # and the same blobs are queued (server/hypermedia/publications.py) in the same
            # transaction; serverUrl is set once they went out.
            log.warning("%s; the identity %s is kept here and its publication queued", exc.message, identity_id)
            queued = (blobs, exc.message)
    return await _store_new(ctx, env, action, "CreateSigningIdentity", seed, label, server_url,
                            "created", now, queued)


async def import_signing_identity(ctx: HandlerContext, env, action) -> dict:
    prior = await _answered_before(ctx, env, "ImportSigningIdentity", action.client_request_id)
    if prior is not None:
        return prior
    # Nothing is published: the account may already exist with a profile and content of its
    # own, which a fresh profile would overwrite. The label is only what the client says;
    # serverUrl is where the agents signing with it publish (the reference's choice).
    return await _store_new(ctx, env, action, "ImportSigningIdentity", action.seed, action.label,
                            ctx.config.hm_server_url or None, "imported", ctx.now_ms())


def _check_icon(data: bytes) -> None:
    found = filetype.guess_mime(data)
    if found not in ICON_TYPES:
        what = f"its bytes are {found}" if found else "its bytes are no image format known here"
        raise ProtocolError(400, f"UpdateSigningIdentity.icon.data must be an image "
                                 f"({', '.join(ICON_TYPES.values())}); {what}")


async def update_signing_identity(ctx: HandlerContext, env, action) -> dict:
    account_id = env.account_id
    if action.icon is not None:
        _check_icon(action.icon.data)
        if not _publishing(ctx):
            raise ProtocolError(400, "UpdateSigningIdentity.icon needs an HM server to publish the image "
                                     "to, and this server has none (--hm-server-url)")
    current = await ctx.db.aread(identities_q.get_identity, account_id, action.name)
    if current is None:
        raise ProtocolError(404, f"signing identity {quote(action.name)} not found")
    now = ctx.now_ms()
    icon_uri, server_url = None, None
    queued: tuple[list, str | None] | None = None
    if _publishing(ctx):
        seed = await ctx.db.aread(identities_q.open_seed, ctx.secrets, account_id, action.name)
        origin = await ctx.db.aread(identities_q.origin_of, account_id, action.name)
        if seed is None or origin is None:
            raise ProtocolError(404, f"signing identity {quote(action.name)} not found")
        # What waits for the HM server goes first: a rename queues behind it, in order.
        waiting = await ctx.db.aread(pub_q.has_pending, account_id, f"identity:{action.name}")
        # An account this server made before it had an HM server was never published: it goes up
        # whole (profile and home document). An imported one only ever gets a profile.
        with_home = origin == "created" and "serverUrl" not in current and not waiting
        blobs, icon_uri = identity_publish.profile_blobs(
            seed, action.label, now, action.icon.data if action.icon else None, current.get("icon"),
            with_home=with_home)
        what = "the new account" if with_home else "the profile"
        if waiting:
            queued = (blobs, None)
        else:
            try:
                await identity_publish.publish(ctx, blobs, "the agent account" if with_home
                                               else "the agent account profile")
                server_url = ctx.config.hm_server_url
            except identity_publish.Unreachable as exc:
                log.warning("%s; the change to %s is kept here and its publication queued", exc.message, action.name)
                queued = (blobs, exc.message)

    def job(conn):
        if identities_q.get_identity(conn, account_id, action.name) is None:   # deleted meanwhile
            raise ProtocolError(404, f"signing identity {quote(action.name)} not found")
        identity = identities_q.update_identity(conn, account_id, action.name, action.label, icon_uri,
                                                server_url, now)
        if queued is not None:
            _enqueue(conn, ctx, account_id, action.name, queued, what, now)
        return with_pending(identity, pub_q.of_identities(conn, account_id).get(action.name))

    identity = await ctx.db.write(job)
    _wake(ctx)
    return {"_": "UpdateSigningIdentityResponse", "identity": identity}


async def delete_signing_identity(ctx: HandlerContext, env, action) -> dict:
    account_id = env.account_id

    def job(conn):
        # In the writer, with the check: no agent can start naming the key in between.
        if identities_q.get_identity(conn, account_id, action.name) is None:
            raise ProtocolError(404, f"signing identity {quote(action.name)} not found")
        users = identities_q.agents_signing_with(conn, account_id, action.name)
        if users:
            named = ", ".join(f"{quote(name)} ({agent_id})" for agent_id, name in users[:3])
            more = f" and {len(users) - 3} more" if len(users) > 3 else ""
            raise ProtocolError(409, f"signing identity {quote(action.name)} is still used by agent "
                                     f"{named}{more}: remove it from the agent's signingKey and "
                                     "signingKeys first")
        identities_q.delete_identity(conn, account_id, action.name)
        identities_q.forget_idempotency(conn, account_id, action.name)
        pub_q.drop_identity(conn, account_id, action.name)   # nothing signs as it any more

    await ctx.db.write(job)
    return {"_": "DeleteSigningIdentityResponse", "name": action.name}


def check_signing_keys(conn, owner: str, definition: dict, prior: dict | None, role: str) -> None:  # noqa: ANN001
    """An agent definition may name only identities of its owner (400 otherwise), and only the
    owner changes which ones (403): the keys live on the owner's account and decide what the
    agent may publish as. `prior` is the definition being replaced (None on create)."""
    names = signing_keys_of(definition)
    if prior is not None and role != OWNER and set(names) != set(signing_keys_of(prior)):
        raise ProtocolError(403, "Only the agent owner can change the agent's signing identities "
                                 "(signingKey, signingKeys)")
    missing = identities_q.missing_names(conn, owner, names)
    if missing:
        raise ProtocolError(400, f"definition signing key {quote(missing[0])} is not a signing identity "
                                 "of the agent's owner (create or import it first)")
