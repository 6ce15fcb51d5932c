"""SetSecret: values are sealed with AES-256-GCM before they reach the database. The answer is
RedactedSecret = {id, name, metadata?, hasValue: true, createdAt, updatedAt}: never the value."""
from __future__ import annotations

from ..clock import new_id
from ..store import secrets_table as secrets_q
from .context import HandlerContext


async def set_secret(ctx: HandlerContext, env, action) -> dict:
    sealed = ctx.secrets.seal(action.value, secrets_q.secret_aad(env.account_id, action.name))
    now = ctx.now_ms()
    info = await ctx.db.write(secrets_q.set_secret, env.account_id, action.name, sealed, action.metadata, now,
                              new_id())
    secret = {"id": info["id"], "name": info["name"]}
    if "metadata" in info:
        secret["metadata"] = info["metadata"]
    secret.update(hasValue=True, createdAt=info["createdAt"], updatedAt=info["updatedAt"])
    return {"_": "SetSecretResponse", "secret": secret}
