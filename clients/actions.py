"""Action maps, one builder per action of CONTRACT section 4, without `ts` (the client adds it
when it signs). Optional fields are omitted, never sent as null, as the contract asks; the one
null the contract knows (UpdateSession.modelOverride, to clear it) is sent as `CLEAR`."""
from __future__ import annotations

from collections.abc import Sequence

from seed_agents.protocol.wire.envelope import NULL

CLEAR = NULL  # update_session(model_override=CLEAR) sends modelOverride: null


def _action(action_name: str, /, **fields) -> dict:
    action = {"_": action_name}
    action.update((k, v) for k, v in fields.items() if v is not None)
    return action


def register_signer(capability: bytes) -> dict:
    return _action("RegisterSigner", capability=bytes(capability))


def unregister_signer(signer_id: str) -> dict:
    """Signed by the account's own key: the delegate's key no longer acts for it."""
    return _action("UnregisterSigner", signerId=signer_id)


def set_secret(name: str, value: bytes, metadata: dict | None = None) -> dict:
    return _action("SetSecret", name=name, value=bytes(value), metadata=metadata)


def set_model_provider(name: str, provider: dict) -> dict:
    return _action("SetModelProvider", name=name, provider=provider)


def list_model_providers(agent_id: str | None = None) -> dict:
    return _action("ListModelProviders", agentId=agent_id)


def create_agent(definition: dict, client_request_id: str | None = None) -> dict:
    return _action("CreateAgent", definition=definition, clientRequestId=client_request_id)


def get_agent(agent_id: str) -> dict:
    return _action("GetAgent", agentId=agent_id)


def list_agents() -> dict:
    return _action("ListAgents")


def create_session(agent_id: str, title: str | None = None,
                   client_request_id: str | None = None) -> dict:
    return _action("CreateSession", agentId=agent_id, title=title, clientRequestId=client_request_id)


def list_sessions(agent_id: str | None = None, limit: int | None = None,
                  cursor: dict | None = None, parent_session_id: str | None = None,
                  include_children: bool | None = None) -> dict:
    """`cursor` is a previous response's `nextCursor` ({updatedBefore, idBefore}), verbatim."""
    return _action("ListSessions", agentId=agent_id, limit=limit, cursor=cursor,
                   parentSessionId=parent_session_id, includeChildren=include_children)


def get_session(session_id: str, after_seq: int | None = None, limit: int | None = None) -> dict:
    return _action("GetSession", sessionId=session_id, afterSeq=after_seq, limit=limit)


def get_session_head(session_id: str) -> dict:
    """The session's signed head (docs/protocol.md, "Verifiable history")."""
    return _action("GetSessionHead", sessionId=session_id)


def get_session_chain(session_id: str, after_seq: int | None = None, limit: int | None = None) -> dict:
    """The links the server recorded for the session's events, and the user envelopes, a page at a time."""
    return _action("GetSessionChain", sessionId=session_id, afterSeq=after_seq, limit=limit)


def content_parts(text: str, context_lines: Sequence[str] | None = None) -> list[dict]:
    """A text part, then a context part when there are lines: context goes to the model only,
    never into the stored `content`."""
    parts: list[dict] = [{"type": "text", "text": text}]
    if context_lines:
        parts.append({"type": "context", "lines": list(context_lines)})
    return parts


def message_session(session_id: str, text: str, context_lines: Sequence[str] | None = None,
                    client_message_id: str | None = None) -> dict:
    return _action("MessageSession", sessionId=session_id, content=content_parts(text, context_lines),
                   clientMessageId=client_message_id)


def stop_session(session_id: str) -> dict:
    return _action("StopSession", sessionId=session_id)


def subscribe(key: str, after_seq: int | None = None) -> dict:
    return _action("Subscribe", key=key, afterSeq=after_seq)


def update_agent(agent_id: str, definition: dict) -> dict:
    return _action("UpdateAgent", agentId=agent_id, definition=definition)


def delete_agent(agent_id: str) -> dict:
    return _action("DeleteAgent", agentId=agent_id)


def update_session(session_id: str, title: str | None = None, model_override: dict | None = None,
                   thoroughness: str | None = None) -> dict:
    """`model_override`: {provider, model, reasoningLevel?} sets it, CLEAR clears it, None leaves it;
    `thoroughness` (quick, normal, deep) likewise."""
    return _action("UpdateSession", sessionId=session_id, title=title, modelOverride=model_override,
                   thoroughness=thoroughness)


def delete_session(session_id: str) -> dict:
    return _action("DeleteSession", sessionId=session_id)


def retry_session(session_id: str) -> dict:
    return _action("RetrySession", sessionId=session_id)


def get_run(run_id: str) -> dict:
    return _action("GetRun", runId=run_id)


def list_runs(*, root_run_id: str | None = None, session_id: str | None = None,
              agent_id: str | None = None, status: str | None = None, limit: int | None = None) -> dict:
    """Exactly one of root_run_id, session_id, agent_id (the server refuses otherwise)."""
    return _action("ListRuns", rootRunId=root_run_id, sessionId=session_id, agentId=agent_id,
                   status=status, limit=limit)


def cancel_run(run_id: str) -> dict:
    return _action("CancelRun", runId=run_id)


def delete_model_provider(name: str) -> dict:
    return _action("DeleteModelProvider", name=name)


# -- subscription sign-in (servers started with --subscription-auth) ---------------------------

def start_provider_oauth(provider_type: str = "openai") -> dict:
    """Begins "Sign in with ChatGPT": the answer's `authUrl` is opened in a browser."""
    return _action("StartProviderOAuth", providerType=provider_type)


def submit_provider_oauth_code(login_id: str, code: str) -> dict:
    """`code`: the redirect URL the browser ended on, `code#state`, or the bare code."""
    return _action("SubmitProviderOAuthCode", loginId=login_id, code=code)


def get_provider_oauth_status(login_id: str) -> dict:
    return _action("GetProviderOAuthStatus", loginId=login_id)


def cancel_provider_oauth(login_id: str) -> dict:
    return _action("CancelProviderOAuth", loginId=login_id)


# The names every action's builder also has: the snake case of the action's ("OAuth" -> "o_auth").
start_provider_o_auth = start_provider_oauth
submit_provider_o_auth_code = submit_provider_oauth_code
get_provider_o_auth_status = get_provider_oauth_status
cancel_provider_o_auth = cancel_provider_oauth


# -- sharing ----------------------------------------------------------------------------------

def invite_agent_collaborator(agent_id: str, account_id: str, role: str) -> dict:
    """`role`: "reader" or "writer"; inviting again changes the role."""
    return _action("InviteAgentCollaborator", agentId=agent_id, accountId=account_id, role=role)


def list_agent_collaborators(agent_id: str) -> dict:
    return _action("ListAgentCollaborators", agentId=agent_id)


def remove_agent_collaborator(agent_id: str, account_id: str) -> dict:
    return _action("RemoveAgentCollaborator", agentId=agent_id, accountId=account_id)


def list_agent_invites() -> dict:
    return _action("ListAgentInvites")


def accept_agent_invite(agent_id: str) -> dict:
    return _action("AcceptAgentInvite", agentId=agent_id)


def decline_agent_invite(agent_id: str) -> dict:
    return _action("DeclineAgentInvite", agentId=agent_id)


def set_agent_public_read(agent_id: str, public_read: bool) -> dict:
    return _action("SetAgentPublicRead", agentId=agent_id, publicRead=public_read)


def set_agent_public_chat(agent_id: str, public_chat: bool, limits: dict | None = None,
                          tools: list[str] | None = None) -> dict:
    fields: dict = {"agentId": agent_id, "publicChat": public_chat}
    if limits is not None:
        fields["limits"] = limits
    if tools is not None:
        fields["tools"] = tools
    return _action("SetAgentPublicChat", **fields)


# -- signing identities -------------------------------------------------------------------------

def list_signing_identities(agent_id: str | None = None) -> dict:
    """With `agent_id`: the identities of that agent's owner (a collaborator sees only those the
    agent's definition names)."""
    return _action("ListSigningIdentities", agentId=agent_id)


def create_signing_identity(label: str | None = None, client_request_id: str | None = None) -> dict:
    return _action("CreateSigningIdentity", label=label, clientRequestId=client_request_id)


def import_signing_identity(seed: bytes, label: str | None = None,
                            client_request_id: str | None = None) -> dict:
    """`seed`: the 32 bytes of the account key's Ed25519 seed."""
    return _action("ImportSigningIdentity", seed=bytes(seed), label=label, clientRequestId=client_request_id)


def update_signing_identity(name: str, label: str, icon: bytes | None = None,
                            mime_type: str | None = None, file_name: str | None = None) -> dict:
    """A new label (the published profile's name) and, with `icon`, a new avatar image."""
    value = None
    if icon is not None:
        value = {k: v for k, v in (("data", bytes(icon)), ("mimeType", mime_type), ("fileName", file_name))
                 if v is not None}
    return _action("UpdateSigningIdentity", name=name, label=label, icon=value)


def delete_signing_identity(name: str) -> dict:
    return _action("DeleteSigningIdentity", name=name)


# -- files: agent memory, session attachments, chunked uploads --------------------------------
def list_agent_memory(agent_id: str) -> dict:
    return _action("ListAgentMemory", agentId=agent_id)


def read_agent_memory_file(agent_id: str, path: str, offset: int | None = None, length: int | None = None) -> dict:
    return _action("ReadAgentMemoryFile", agentId=agent_id, path=path, offset=offset, length=length)


def write_agent_memory_file(agent_id: str, path: str, content: str | bytes) -> dict:
    return _action("WriteAgentMemoryFile", agentId=agent_id, path=path, content=content)


def delete_agent_memory_file(agent_id: str, path: str) -> dict:
    return _action("DeleteAgentMemoryFile", agentId=agent_id, path=path)


def download_agent_memory_file(agent_id: str, url: str, path: str | None = None) -> dict:
    return _action("DownloadAgentMemoryFile", agentId=agent_id, url=url, path=path)


def search_agent_memory(agent_id: str, query: str, limit: int | None = None) -> dict:
    return _action("SearchAgentMemory", agentId=agent_id, query=query, limit=limit)


def upload_session_attachment(session_id: str, name: str, content: bytes, mime_type: str | None = None) -> dict:
    return _action("UploadSessionAttachment", sessionId=session_id, name=name, mimeType=mime_type,
                   content=bytes(content))


def read_session_attachment(session_id: str, attachment_id: str, offset: int | None = None,
                            length: int | None = None) -> dict:
    return _action("ReadSessionAttachment", sessionId=session_id, attachmentId=attachment_id, offset=offset,
                   length=length)


def begin_file_upload(target: dict, size: int) -> dict:
    """`target`: {kind: 'memory', agentId, path} or {kind: 'session-attachment', sessionId, name, mimeType?}."""
    return _action("BeginFileUpload", target={k: v for k, v in target.items() if v is not None}, size=size)


def append_file_upload_chunk(upload_id: str, offset: int, content: bytes) -> dict:
    return _action("AppendFileUploadChunk", uploadId=upload_id, offset=offset, content=bytes(content))


def commit_file_upload(upload_id: str, sha256: str | None = None) -> dict:
    return _action("CommitFileUpload", uploadId=upload_id, sha256=sha256)


def abort_file_upload(upload_id: str) -> dict:
    return _action("AbortFileUpload", uploadId=upload_id)


def message_with_attachments(session_id: str, text: str, attachment_ids: Sequence[str],
                             client_message_id: str | None = None) -> dict:
    """MessageSession with a text part and one `attachment` part per id."""
    content = [{"type": "text", "text": text}] + [{"type": "attachment", "id": a} for a in attachment_ids]
    return _action("MessageSession", sessionId=session_id, content=content, clientMessageId=client_message_id)


# -- triggers -----------------------------------------------------------------------------------

def list_agent_triggers(agent_id: str) -> dict:
    return _action("ListAgentTriggers", agentId=agent_id)


def get_agent_trigger(trigger_id: str) -> dict:
    return _action("GetAgentTrigger", triggerId=trigger_id)


def create_agent_trigger(agent_id: str, trigger: dict, client_request_id: str | None = None) -> dict:
    """`trigger`: {name, source, prompt, enabled?, continuation?} (AgentTriggerInput)."""
    return _action("CreateAgentTrigger", agentId=agent_id, trigger=trigger, clientRequestId=client_request_id)


def update_agent_trigger(trigger_id: str, patch: dict) -> dict:
    return _action("UpdateAgentTrigger", triggerId=trigger_id, patch=patch)


def delete_agent_trigger(trigger_id: str) -> dict:
    return _action("DeleteAgentTrigger", triggerId=trigger_id)


def fire_agent_trigger(trigger_id: str, client_request_id: str | None = None) -> dict:
    return _action("FireAgentTrigger", triggerId=trigger_id, clientRequestId=client_request_id)


def merge_agent_triggers(trigger_id: str, retired_id: str, action: str | None = None) -> dict:
    """Combine `retired_id` into `trigger_id` (both activity triggers of one agent)."""
    return _action("MergeAgentTriggers", triggerId=trigger_id, retiredId=retired_id, action=action)


# -- tools, delegation and the run tree -------------------------------------------------------

def list_agent_tools(agent_id: str) -> dict:
    return _action("ListAgentTools", agentId=agent_id)


def save_agent_tool(agent_id: str, tool: dict, previous_name: str | None = None,
                    enabled: bool | None = None) -> dict:
    """An authored tool ({name, description, input, output?, source, runtime}), or a builtin or
    MCP tool's switch ({name} with `enabled`)."""
    return _action("SaveAgentTool", agentId=agent_id, tool=tool, previousName=previous_name, enabled=enabled)


def delete_agent_tool(agent_id: str, name: str) -> dict:
    return _action("DeleteAgentTool", agentId=agent_id, name=name)


def invoke_session_tool(session_id: str, verb: str, value: object = None) -> dict:
    return _action("InvokeSessionTool", sessionId=session_id, verb=verb, input=value)


def signal_run(run_id: str, signal: str, payload: object = None) -> dict:
    return _action("SignalRun", runId=run_id, signal=signal, payload=payload)


def get_run_journal(run_id: str, after_seq: int | None = None, limit: int | None = None) -> dict:
    return _action("GetRunJournal", runId=run_id, afterSeq=after_seq, limit=limit)


def list_mcp_servers() -> dict:
    return _action("ListMcpServers")


def set_mcp_server(name: str, url: str, headers: dict | None = None, secret_headers: dict | None = None,
                   enabled: bool | None = None) -> dict:
    """`secret_headers` values are sealed on the server as secrets and never come back."""
    return _action("SetMcpServer", name=name, url=url, headers=headers or None,
                   secretHeaders=secret_headers or None, enabled=enabled)


def delete_mcp_server(name: str) -> dict:
    return _action("DeleteMcpServer", name=name)


def refresh_mcp_server(name: str) -> dict:
    return _action("RefreshMcpServer", name=name)


# -- provider models, IPFS ---------------------------------------------------------------------

def list_provider_models(provider: str, agent_id: str | None = None) -> dict:
    return _action("ListProviderModels", provider=provider, agentId=agent_id)


def upload_agent_memory_file_to_ipfs(agent_id: str, path: str) -> dict:
    return _action("UploadAgentMemoryFileToIpfs", agentId=agent_id, path=path)
