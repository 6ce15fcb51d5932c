"""One route per action: the protocol's half (how it is parsed, whether it is a read) joined with
the server's (its handler, whether it may run inline).

Adding an action is one line in `seed_agents.protocol.api.actions.ACTIONS` and one line in `HANDLING` below;
the server refuses to import unless both name the same actions.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from seed_agents.protocol.api.actions import ACTIONS

from .handlers import (
    agent_lifecycle,
    agents,
    attachments,
    history,
    identities,
    mcp,
    memory_download,
    memory_files,
    messages,
    provider_models,
    provider_oauth,
    provider_removal,
    providers,
    public_chat,
    run_signals,
    runs,
    secrets,
    session_tools,
    sessions,
    sharing,
    signers,
    subscribe,
    tools,
    triggers,
    uploads,
)

Handler = Callable[..., Awaitable[dict]]   # (app, verified envelope, parsed action) -> response


@dataclass(frozen=True, slots=True)
class Handling:
    handler: Handler
    # The handler never awaits (a read from the loop thread's reader), so v2 answers it in the
    # socket's reader without a task per request. tests/server/test_routes.py proves it never awaits.
    inline: bool = False
    # Several servers: the handler makes the action's replay claim in its own statements
    # (server/store/handed_claim.py), where the dispatcher made it alone before.
    claims: bool = False


def _inline(handler: Handler) -> Handling:
    return Handling(handler, inline=True)


HANDLING: dict[str, Handling] = {
    "RegisterSigner": Handling(signers.register_signer),
    "SetSecret": Handling(secrets.set_secret),
    "SetModelProvider": Handling(providers.set_model_provider),
    "ListModelProviders": _inline(providers.list_model_providers),
    "ListProviderModels": Handling(provider_models.list_provider_models),
    "CreateAgent": Handling(agents.create_agent),
    # These three decode definitions and may answer megabytes: they read off the loop
    # (`db.aread(..., large=True)`), so they await and run as the socket's tasks.
    "GetAgent": Handling(agents.get_agent),
    "ListAgents": Handling(agents.list_agents),
    "CreateSession": Handling(sessions.create_session, claims=True),
    "ListSessions": Handling(sessions.list_sessions),
    "GetSession": Handling(sessions.get_session, inline=True, claims=True),
    "GetSessionHead": _inline(history.get_session_head),
    "GetSessionChain": Handling(history.get_session_chain),
    "MessageSession": Handling(messages.message_session, claims=True),
    "StopSession": Handling(messages.stop_session),
    "Subscribe": Handling(subscribe.subscribe),
    "UpdateAgent": Handling(agent_lifecycle.update_agent),
    "DeleteAgent": Handling(agent_lifecycle.delete_agent),
    "UpdateSession": Handling(sessions.update_session),
    "DeleteSession": Handling(sessions.delete_session),
    "RetrySession": Handling(messages.retry_session),
    "GetRun": Handling(runs.get_run),
    "ListRuns": Handling(runs.list_runs),
    "CancelRun": Handling(runs.cancel_run),
    "DeleteModelProvider": Handling(provider_removal.delete_model_provider),
    "InviteAgentCollaborator": Handling(sharing.invite_agent_collaborator),
    "ListAgentCollaborators": Handling(sharing.list_agent_collaborators),
    "RemoveAgentCollaborator": Handling(sharing.remove_agent_collaborator),
    "ListAgentInvites": Handling(sharing.list_agent_invites),
    "AcceptAgentInvite": Handling(sharing.accept_agent_invite),
    "DeclineAgentInvite": Handling(sharing.decline_agent_invite),
    "SetAgentPublicRead": Handling(sharing.set_agent_public_read),
    "SetAgentPublicChat": Handling(public_chat.set_agent_public_chat),
    "UnregisterSigner": Handling(signers.unregister_signer),
    # --- signing identities ---
    "ListSigningIdentities": Handling(identities.list_signing_identities),
    "CreateSigningIdentity": Handling(identities.create_signing_identity),
    "ImportSigningIdentity": Handling(identities.import_signing_identity),
    "UpdateSigningIdentity": Handling(identities.update_signing_identity),
    "DeleteSigningIdentity": Handling(identities.delete_signing_identity),

    # --- files: memory, attachments, uploads ---
    "ListAgentMemory": Handling(memory_files.list_agent_memory),
    "ReadAgentMemoryFile": Handling(memory_files.read_agent_memory_file),
    "WriteAgentMemoryFile": Handling(memory_files.write_agent_memory_file),
    "DeleteAgentMemoryFile": Handling(memory_files.delete_agent_memory_file),
    "DownloadAgentMemoryFile": Handling(memory_download.download_agent_memory_file),
    "UploadAgentMemoryFileToIpfs": Handling(memory_files.upload_agent_memory_file_to_ipfs),
    "SearchAgentMemory": Handling(memory_files.search_agent_memory),
    "UploadSessionAttachment": Handling(attachments.upload_session_attachment),
    "ReadSessionAttachment": Handling(attachments.read_session_attachment),
    "BeginFileUpload": Handling(uploads.begin_file_upload),
    "AppendFileUploadChunk": Handling(uploads.append_file_upload_chunk),
    "CommitFileUpload": Handling(uploads.commit_file_upload),
    "AbortFileUpload": Handling(uploads.abort_file_upload),

    # --- tools, delegation and the run tree ---
    "ListAgentTools": Handling(tools.list_agent_tools),
    "SaveAgentTool": Handling(tools.save_agent_tool),
    "DeleteAgentTool": Handling(tools.delete_agent_tool),
    "InvokeSessionTool": Handling(session_tools.invoke_session_tool),
    "SignalRun": Handling(run_signals.signal_run),
    "GetRunJournal": Handling(run_signals.get_run_journal),
    "ListMcpServers": Handling(mcp.list_mcp_servers),
    "SetMcpServer": Handling(mcp.set_mcp_server),
    "DeleteMcpServer": Handling(mcp.delete_mcp_server),
    "RefreshMcpServer": Handling(mcp.refresh_mcp_server),

    # --- triggers ---
    "ListAgentTriggers": Handling(triggers.list_agent_triggers),
    "GetAgentTrigger": Handling(triggers.get_agent_trigger),
    "CreateAgentTrigger": Handling(triggers.create_agent_trigger),
    "UpdateAgentTrigger": Handling(triggers.update_agent_trigger),
    "DeleteAgentTrigger": Handling(triggers.delete_agent_trigger),
    "FireAgentTrigger": Handling(triggers.fire_agent_trigger),
    "MergeAgentTriggers": Handling(triggers.merge_agent_triggers),

    # --- subscription sign-in (--subscription-auth) ---
    "StartProviderOAuth": Handling(provider_oauth.start_provider_oauth),
    "SubmitProviderOAuthCode": Handling(provider_oauth.submit_provider_oauth_code),
    "GetProviderOAuthStatus": Handling(provider_oauth.get_provider_oauth_status),
    "CancelProviderOAuth": Handling(provider_oauth.cancel_provider_oauth),

}


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    read: bool        # feeds the replay guard (CONTRACT section 2, step 6)
    handler: Handler
    inline: bool
    claims: bool = False


def _join() -> dict[str, Route]:
    unhandled, unknown = ACTIONS.keys() - HANDLING.keys(), HANDLING.keys() - ACTIONS.keys()
    if unhandled or unknown:
        raise ImportError(f"server/routes.py and seed_agents.protocol.api.actions.ACTIONS disagree: no handler for "
                          f"{sorted(unhandled)}, no action for {sorted(unknown)}")
    if any(h.inline and not ACTIONS[n].read for n, h in HANDLING.items()):
        raise ImportError("only reads may run inline")
    return {name: Route(name, kind.read, HANDLING[name].handler, HANDLING[name].inline, HANDLING[name].claims)
            for name, kind in ACTIONS.items()}


ROUTES: dict[str, Route] = _join()
INLINE_ACTIONS = frozenset(name for name, route in ROUTES.items() if route.inline)
