"""SetModelProvider and ListModelProviders: per-account provider configs, secrets by reference
only. Both answer in RedactedModelProvider = {id, name, type, hasSecrets, createdAt, updatedAt,
defaultModel?}: no other config field (base URL, secret names, model defaults) leaves the server."""
from __future__ import annotations

import hashlib
import uuid

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.providers import BUILTIN_PROVIDER

from ..clock import new_id
from ..store import providers as providers_q
from ..store import secrets_table as secrets_q
from .access import READER, agent_for
from .context import HandlerContext

BUILTIN_ECHO = BUILTIN_PROVIDER   # protocol/agent/providers.py
# Providers per account: ListModelProviders answers them all, so their number is bounded
# (a RedactedModelProvider is a few hundred bytes: 1000 of them stay well under 1 MiB).
MAX_PROVIDERS = 1_000


def auth_info(conn, account_id: str, config: dict) -> dict:  # noqa: ANN001
    """`authMode` and `authStatus` of a subscription provider (the reference's providerAuthInfo),
    and ours, `authError`: the one sentence a failed refresh left; {} for an API-key provider."""
    if config.get("authMode") != "subscription":
        return {}
    secret = (config.get("secretRefs") or {}).get("oauth")
    meta = secrets_q.get_secret_metadata(conn, account_id, secret) if isinstance(secret, str) and secret else None
    if meta is None:
        return {"authMode": "subscription", "authStatus": "needs-login"}
    if meta.get("needsReauth"):
        reason = meta.get("reauthReason")
        return {"authMode": "subscription", "authStatus": "needs-login",
                **({"authError": reason} if isinstance(reason, str) else {})}
    return {"authMode": "subscription", "authStatus": "ok"}


def redacted(row: dict, auth: dict | None = None) -> dict:
    """RedactedModelProvider of a stored row {id, name, config, createdAt, updatedAt}."""
    refs = row["config"].get("secretRefs")
    has_secrets = type(refs) is dict and any(type(v) is str and v for v in refs.values())
    value = {"id": row["id"], "name": row["name"], "type": row["config"].get("type", ""),
             "hasSecrets": has_secrets, "createdAt": row["createdAt"], "updatedAt": row["updatedAt"]}
    model = row["config"].get("defaultModel")
    if type(model) is str and model:
        value["defaultModel"] = model   # a model name is no secret: clients default to it
    if auth:
        value.update(auth)
    return value


def builtin_echo(account_id: str) -> dict:
    """The built-in `echo` every account has. Its id is a UUID v4 in form, derived from the
    account so it is the same in every listing; it has no stored row, so its times are 0."""
    digest = bytearray(hashlib.sha256(f"seed-agents builtin provider echo\x00{account_id}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40   # version 4
    digest[8] = (digest[8] & 0x3F) | 0x80   # RFC 4122 variant
    return {"id": str(uuid.UUID(bytes=bytes(digest))), "name": BUILTIN_ECHO, "type": BUILTIN_ECHO,
            "hasSecrets": False, "createdAt": 0, "updatedAt": 0, "defaultModel": BUILTIN_ECHO}


async def set_model_provider(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()

    def job(conn):
        if providers_q.get_provider(conn, env.account_id, action.name) is None \
                and providers_q.count_providers(conn, env.account_id) >= MAX_PROVIDERS:
            raise ProtocolError(400, f"SetModelProvider: an account has at most {MAX_PROVIDERS} model "
                                     "providers (delete one first: `seed-agents providers delete NAME`)")
        row = providers_q.set_provider(conn, env.account_id, action.name, action.provider, now, new_id())
        return row, auth_info(conn, env.account_id, row["config"])

    row, auth = await ctx.db.write(job)
    ctx.broadcaster.notify_account(env.account_id, "model-provider-changed")
    return {"_": "SetModelProviderResponse", "provider": redacted(row, auth)}


async def list_model_providers(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        owner = env.account_id
        if action.agent_id is not None:
            # The providers of the agent's owner (sharing: a collaborator sees the owner's).
            owner = agent_for(conn, env.account_id, action.agent_id, READER)["account"]
        rows = providers_q.list_providers(conn, owner)
        return owner, [(r, auth_info(conn, owner, r["config"])) for r in rows]

    owner, rows = await ctx.db.aread(read)
    providers = [] if any(r["name"] == BUILTIN_ECHO for r, _ in rows) else [builtin_echo(owner)]
    providers += [redacted(r, auth) for r, auth in rows]
    return {"_": "ListModelProvidersResponse", "providers": providers}
