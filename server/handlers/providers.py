"""SetModelProvider and ListModelProviders: per-account provider configs, secrets by reference
only. Both answer in RedactedModelProvider = {id, name, type, hasSecrets, createdAt, updatedAt}:
no config field (base URL, secret names, model defaults) ever leaves the server."""
from __future__ import annotations

import hashlib
import uuid

from server.clock import new_id
from server.handlers.access import own_agent
from server.store import providers as providers_q

BUILTIN_ECHO = "echo"


def redacted(row: dict) -> dict:
    """RedactedModelProvider of a stored row {id, name, config, createdAt, updatedAt}."""
    refs = row["config"].get("secretRefs")
    has_secrets = type(refs) is dict and any(type(v) is str and v for v in refs.values())
    return {"id": row["id"], "name": row["name"], "type": row["config"].get("type", ""),
            "hasSecrets": has_secrets, "createdAt": row["createdAt"], "updatedAt": row["updatedAt"]}


def builtin_echo(account_id: str) -> dict:
    """The built-in `echo` every account has. Its id is a UUID v4 in form, derived from the
    account so it is the same in every listing; it has no stored row, so its times are 0."""
    digest = bytearray(hashlib.sha256(f"seed-agents builtin provider echo\x00{account_id}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40   # version 4
    digest[8] = (digest[8] & 0x3F) | 0x80   # RFC 4122 variant
    return {"id": str(uuid.UUID(bytes=bytes(digest))), "name": BUILTIN_ECHO, "type": "echo",
            "hasSecrets": False, "createdAt": 0, "updatedAt": 0}


async def set_model_provider(app, env, action) -> dict:
    now = app.now_ms()
    row = await app.db.write(providers_q.set_provider, env.account_id, action.name, action.provider, now,
                             new_id())
    app.notify_account(env.account_id, "model-provider-changed")
    return {"_": "SetModelProviderResponse", "provider": redacted(row)}


async def list_model_providers(app, env, action) -> dict:
    def read(conn):
        owner = env.account_id
        if action.agent_id is not None:
            # The providers of the agent's owner (sharing: a collaborator sees the owner's).
            owner = own_agent(conn, env.account_id, action.agent_id)["account"]
        return owner, providers_q.list_providers(conn, owner)

    owner, rows = app.db.read(read)
    providers = [] if any(r["name"] == BUILTIN_ECHO for r in rows) else [builtin_echo(owner)]
    providers += [redacted(r) for r in rows]
    return {"_": "ListModelProvidersResponse", "providers": providers}
