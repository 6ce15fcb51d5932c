"""Action handlers: each takes the app, a verified envelope and its parsed action, and returns
the response value. None of them knows which framing carried the request."""
from __future__ import annotations

from server.handlers import (agents, messages, provider_models, providers, secrets, sessions, signers,
                             subscribe)

HANDLERS = {
    "RegisterSigner": signers.register_signer,
    "SetSecret": secrets.set_secret,
    "SetModelProvider": providers.set_model_provider,
    "ListModelProviders": providers.list_model_providers,
    "ListProviderModels": provider_models.list_provider_models,
    "CreateAgent": agents.create_agent,
    "GetAgent": agents.get_agent,
    "ListAgents": agents.list_agents,
    "CreateSession": sessions.create_session,
    "ListSessions": sessions.list_sessions,
    "GetSession": sessions.get_session,
    "MessageSession": messages.message_session,
    "StopSession": messages.stop_session,
    "Subscribe": subscribe.subscribe,
}
