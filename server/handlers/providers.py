"""SetModelProvider and ListModelProviders: per-account provider configs, secrets by reference only."""
from __future__ import annotations

from server.store import providers as providers_q


async def set_model_provider(app, env, action) -> dict:
    now = app.now_ms()
    await app.db.write(providers_q.set_provider, env.account_id, action.name, action.provider, now)
    return {"_": "SetModelProviderResponse", "name": action.name}


def redact(config: dict) -> dict:
    # Configs hold secret *names* only, never values; still, drop anything that looks inline.
    out = {k: v for k, v in config.items() if k not in ("apiKey", "key", "token")}
    return out


async def list_model_providers(app, env, action) -> dict:
    rows = app.db.read(providers_q.list_providers, env.account_id)
    providers = [] if any(r["name"] == "echo" for r in rows) else [
        {"name": "echo", "provider": {"type": "echo"}, "builtIn": True}]
    providers += [{"name": r["name"], "provider": redact(r["config"]),
                   "createdAt": r["createdAt"], "updatedAt": r["updatedAt"]} for r in rows]
    return {"_": "ListModelProvidersResponse", "providers": providers}
