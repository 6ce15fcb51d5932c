"""Action handlers: each takes the app, a verified envelope and its parsed action, and returns
the response value. None of them knows which framing carried the request."""
from __future__ import annotations

from server.handlers import (agent_lifecycle, agents, messages, provider_models, provider_removal,
                             providers,
                             runs, secrets, sessions, sharing, signers, subscribe)

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
    "UpdateAgent": agent_lifecycle.update_agent,
    "DeleteAgent": agent_lifecycle.delete_agent,
    "UpdateSession": sessions.update_session,
    "DeleteSession": sessions.delete_session,
    "RetrySession": messages.retry_session,
    "GetRun": runs.get_run,
    "ListRuns": runs.list_runs,
    "CancelRun": runs.cancel_run,
    "DeleteModelProvider": provider_removal.delete_model_provider,
    "InviteAgentCollaborator": sharing.invite_agent_collaborator,
    "ListAgentCollaborators": sharing.list_agent_collaborators,
    "RemoveAgentCollaborator": sharing.remove_agent_collaborator,
    "ListAgentInvites": sharing.list_agent_invites,
    "AcceptAgentInvite": sharing.accept_agent_invite,
    "DeclineAgentInvite": sharing.decline_agent_invite,
    "SetAgentPublicRead": sharing.set_agent_public_read,
}
