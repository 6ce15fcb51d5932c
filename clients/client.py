"""`AgentsClient`: the asyncio client for the Seed Agents server (v2 framing).

    async with AgentsClient.connect("ws://127.0.0.1:3050/agents/ws", keypair) as client:
    # or AgentsClient.connect("http://127.0.0.1:3050", keypair): actions over HTTP, no subscribe
        agent = await client.create_agent({"name": "helper", "systemPrompt": "",
                                           "modelProvider": "echo", "model": "echo"})
        session = await client.create_session(agent["agentId"])
        async with await client.subscribe(f"sessions/{session['sessionId']}") as sub:
            await client.message_session(session["sessionId"], "hello")
            async for item in sub:
                ...

Every method signs a fresh envelope (ts = now), sends `{id, envelope}` and returns the
response map (keys documented in `seed_agents.clients.shapes`); an `{_: "Error"}` response raises
`AgentsError(status, message)`. Calls may run concurrently on one client. On a dropped socket
the client reconnects by itself and resumes subscriptions; calls in flight at that moment
raise AgentsError(0, reason="lost"): retry them, writes with the same idempotency id.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from seed_agents.protocol.api.actions import ACTIONS
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.principals import principal_from_string, principal_to_string

from . import actions
from .errors import AgentsError, HistoryError
from .history import Follower, export_session, server_public_key
from .http_transport import HttpTransport, is_http_url
from .shapes import (
    AgentIdResponse,
    AgentResponse,
    CancelRunResponse,
    CreateAgentResponse,
    CreateSessionResponse,
    DeleteSessionResponse,
    GetAgentResponse,
    GetRunResponse,
    GetSessionResponse,
    InviteAgentCollaboratorResponse,
    ListAgentCollaboratorsResponse,
    ListAgentInvitesResponse,
    ListAgentsResponse,
    ListModelProvidersResponse,
    ListRunsResponse,
    ListSessionsResponse,
    MessageSessionResponse,
    NameResponse,
    RegisterSignerResponse,
    RemoveAgentCollaboratorResponse,
    RetrySessionResponse,
    SetModelProviderResponse,
    SetSecretResponse,
    StopSessionResponse,
    UpdateAgentResponse,
    UpdateSessionResponse,
)
from .subscription import DEFAULT_BUFFER, Subscription
from .transport import Transport

DEFAULT_URL = "ws://127.0.0.1:3050/agents/ws"
FULL_DEFINITION = ("name", "systemPrompt", "modelProvider", "model")   # what UpdateAgent requires


def merged_definition(stored: dict, changes: dict) -> dict:
    """`stored` with `changes` applied: a key of `changes` replaces the stored one; None removes it."""
    merged = dict(stored)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


class AgentsClient:
    def __init__(self, url: str, keypair: Keypair, *, account: bytes | str | None = None,
                 reconnect: bool = True, connect_timeout: float = 10.0,
                 request_timeout: float | None = None, buffer_size: int = DEFAULT_BUFFER,
                 on_state: Callable[[str, str], None] | None = None,
                 server_key: str | None = None) -> None:
        """Prefer `await AgentsClient.connect(...)`; this only prepares.

        `account`: the account to act for when `keypair` is a delegated signer (principal
        bytes or a `z6Mk...` id); by default the key's own account. `reconnect=False` makes a
        dropped socket final (subscriptions then raise AgentsError(0)). `connect_timeout`: the
        longest wait for a socket, first dial or reconnect, before AgentsError(0,
        "unreachable"). `request_timeout`: the longest wait for an answer (None: no limit; a
        dropped socket fails the call anyway). `buffer_size`: items buffered per subscription.
        `on_state(state, detail)` is called with "disconnected" and "connected" around each
        reconnect. `server_key`: the server's key id (`z6Mk...`, from its health answer) to pin:
        then every GetSession page from the start and every session replay from the start is
        checked against the session's signed head, and a history that was edited, dropped or
        reordered, or a head another key signed, raises HistoryError naming the event
        (docs/protocol.md, "Verifiable history").
        """
        self.url = url
        self.keypair = keypair
        self.server_key = None if server_key is None else server_public_key(server_key)
        self._followers: dict[str, Follower] = {}   # session -> its chain as verified so far
        if isinstance(account, str):
            account = principal_from_string(account)
        self.account: bytes = account if account is not None else keypair.principal
        self._last_ts = 0
        # http(s)://HOST:PORT: actions over HTTP POST (no subscriptions); ws(s)://: the v2 socket.
        kind = HttpTransport if is_http_url(url) else Transport
        self._transport = kind(url, self._sign, reconnect=reconnect,
                               connect_timeout=connect_timeout, request_timeout=request_timeout,
                               buffer_size=buffer_size, on_state=on_state)

    @classmethod
    def connect(cls, url: str, keypair: Keypair, **options) -> "_Connecting":
        """`client = await AgentsClient.connect(url, keypair)` or `async with
        AgentsClient.connect(url, keypair) as client:`. Raises AgentsError(0,
        reason="unreachable") when the server cannot be reached (no retry on this first dial)."""
        return _Connecting(cls(url, keypair, **options))

    async def open(self) -> "AgentsClient":
        await self._transport.open()
        return self

    async def close(self) -> None:
        """Close the socket; open subscriptions end and calls in flight raise AgentsError."""
        await self._transport.close()

    async def __aenter__(self) -> "AgentsClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._transport.connected

    @property
    def account_id(self) -> str:
        return principal_to_string(self.account)

    def _sign(self, action: dict) -> dict:
        # Strictly increasing ts per client: Ed25519 is deterministic, so two identical actions
        # in the same millisecond would be byte-identical and the second refused as a replay.
        now = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = now
        return build_envelope(self.keypair, {**action, "ts": now}, account=self.account, ts=now)

    # -- generic ---------------------------------------------------------------------------
    async def call(self, action: dict) -> dict:
        """Any action map `{_: "<Name>", ...fields}` (no ts); returns its response map."""
        return await self._transport.request(action)

    async def subscribe(self, key: str, after_seq: int | None = None) -> Subscription:
        """Subscribe to `account/<id>`, `agents/<id>`, `sessions/<id>` or `runs/<id>`; see
        `seed_agents.clients.subscription` for what the iterator yields and how it survives reconnects."""
        follower = None
        if self.server_key is not None and key.startswith("sessions/") and not after_seq:
            follower = Follower(key.removeprefix("sessions/"), self.server_key)
        if follower is None:
            return await self._transport.subscribe(key, after_seq)
        return await self._transport.subscribe(key, after_seq, follower)

    # -- actions (CONTRACT section 4) --------------------------------------------------------
    async def register_signer(self, capability: bytes) -> RegisterSignerResponse:
        """Register this client's key as a signer for the capability's issuer; afterwards
        calls with `account=<issuer>` pass. The delegate sends it for itself (account = its own
        key). The server binds a socket to the account of its first action, so when this
        client acts for another account the registration goes over a short client of its own
        (over HTTP too, where it is signed for the key's own account)."""
        action = actions.register_signer(capability)
        if self.account == self.keypair.principal:
            return await self.call(action)  # type: ignore[return-value]
        async with AgentsClient.connect(self.url, self.keypair, reconnect=False,
                                        connect_timeout=self._transport.connect_timeout) as own:
            return await own.call(action)  # type: ignore[return-value]

    async def unregister_signer(self, signer_id: str) -> RegisterSignerResponse:
        """Take back a delegate's key (a lost device): signed by the account's own key; the
        server closes the sockets that acted through it."""
        return await self.call(actions.unregister_signer(signer_id))  # type: ignore[return-value]

    async def set_secret(self, name: str, value: bytes, metadata: dict | None = None) -> SetSecretResponse:
        return await self.call(actions.set_secret(name, value, metadata))  # type: ignore[return-value]

    async def set_model_provider(self, name: str, provider: dict) -> SetModelProviderResponse:
        return await self.call(actions.set_model_provider(name, provider))  # type: ignore[return-value]

    async def list_model_providers(self, agent_id: str | None = None) -> ListModelProvidersResponse:
        return await self.call(actions.list_model_providers(agent_id))  # type: ignore[return-value]

    async def create_agent(self, definition: dict,
                           client_request_id: str | None = None) -> CreateAgentResponse:
        return await self.call(actions.create_agent(definition, client_request_id))  # type: ignore[return-value]

    async def get_agent(self, agent_id: str) -> GetAgentResponse:
        return await self.call(actions.get_agent(agent_id))  # type: ignore[return-value]

    async def list_agents(self) -> ListAgentsResponse:
        return await self.call(actions.list_agents())  # type: ignore[return-value]

    async def create_session(self, agent_id: str, title: str | None = None,
                             client_request_id: str | None = None) -> CreateSessionResponse:
        return await self.call(actions.create_session(agent_id, title, client_request_id))  # type: ignore[return-value]

    async def list_sessions(self, agent_id: str | None = None, limit: int | None = None,
                            cursor: dict | None = None, parent_session_id: str | None = None,
                            include_children: bool | None = None) -> ListSessionsResponse:
        """`cursor`: the previous page's `nextCursor`, passed back as it came."""
        action = actions.list_sessions(agent_id, limit, cursor, parent_session_id, include_children)
        return await self.call(action)  # type: ignore[return-value]

    async def get_session(self, session_id: str, after_seq: int | None = None,
                          limit: int | None = None) -> GetSessionResponse:
        """With a pinned server key, a page that starts at the beginning, or where the last
        verified page of this session ended, is checked against the head it carries."""
        response = await self.call(actions.get_session(session_id, after_seq, limit))
        if self.server_key is not None:
            await self._check_page(session_id, after_seq or 0, response)
        return response  # type: ignore[return-value]

    async def _check_page(self, session_id: str, after_seq: int, response: dict) -> None:
        follower = self._followers.get(session_id)
        if after_seq == 0 or follower is None or follower.seq != after_seq:
            if after_seq:
                return   # a page from the middle: nothing verified to extend
            follower = Follower(session_id, self.server_key)
        self._followers[session_id] = follower
        try:
            for event in response.get("events") or []:
                follower.add(event)
            if "head" in response:
                follower.head(response["head"])
            elif response.get("events"):
                raise HistoryError(f"the server sent session {session_id}'s events without a signed head")
        except HistoryError as error:
            self._followers.pop(session_id, None)
            raise await follower.locate(self.call, error) from None

    async def verify_session(self, session_id: str) -> int:
        """Read the whole session from its first event and check it against its signed head
        (pinned key required); returns how many events were verified."""
        if self.server_key is None:
            raise HistoryError("pin the server key first (AgentsClient(..., server_key=...))")
        after = 0
        self._followers.pop(session_id, None)
        while True:
            page = await self.get_session(session_id, after)
            if "nextAfterSeq" not in page:
                return self._followers[session_id].seq if session_id in self._followers else 0
            after = page["nextAfterSeq"]

    async def export_session(self, session_id: str, path: str):  # noqa: ANN201
        """Write the session as a CAR file (events, user envelopes, the signed head) and return
        what it proves (seed_agents.protocol.api.history.Proof), checked as `seed-agents verify` does."""
        return await export_session(self.call, session_id, path)

    async def message_session(self, session_id: str, text: str,
                              context_lines: Sequence[str] | None = None,
                              client_message_id: str | None = None) -> MessageSessionResponse:
        """Send `text` (one text part, plus a context part when `context_lines` are given)."""
        action = actions.message_session(session_id, text, context_lines, client_message_id)
        return await self.call(action)  # type: ignore[return-value]

    async def stop_session(self, session_id: str) -> StopSessionResponse:
        return await self.call(actions.stop_session(session_id))  # type: ignore[return-value]

    async def update_agent(self, agent_id: str, definition: dict) -> UpdateAgentResponse:
        """Change an agent's definition. UpdateAgent replaces the whole definition (CONTRACT), so a
        partial one (`{"model": "m"}`) is merged here with the stored one (GetAgent first): its
        keys replace the stored ones, a key given as None is removed. A full definition (with
        `name`, `systemPrompt`, `modelProvider` and `model`) is sent as it is. Two updates at once:
        the last one wins."""
        if isinstance(definition, dict) and not all(key in definition for key in FULL_DEFINITION):
            stored = (await self.get_agent(agent_id))["agent"]["definition"]
            definition = merged_definition(stored, definition)
        return await self.call(actions.update_agent(agent_id, definition))  # type: ignore[return-value]

    async def delete_agent(self, agent_id: str) -> AgentIdResponse:
        return await self.call(actions.delete_agent(agent_id))  # type: ignore[return-value]

    async def update_session(self, session_id: str, title: str | None = None,
                             model_override: dict | None = None,
                             thoroughness: str | None = None) -> UpdateSessionResponse:
        """`model_override=actions.CLEAR` clears the override; None leaves it as it is (and the
        same for `thoroughness`: quick, normal, deep)."""
        return await self.call(actions.update_session(session_id, title, model_override,  # type: ignore[return-value]
                                                      thoroughness))

    async def delete_session(self, session_id: str) -> DeleteSessionResponse:
        return await self.call(actions.delete_session(session_id))  # type: ignore[return-value]

    async def retry_session(self, session_id: str) -> RetrySessionResponse:
        return await self.call(actions.retry_session(session_id))  # type: ignore[return-value]

    async def get_run(self, run_id: str) -> GetRunResponse:
        return await self.call(actions.get_run(run_id))  # type: ignore[return-value]

    async def list_runs(self, *, root_run_id: str | None = None, session_id: str | None = None,
                        agent_id: str | None = None, status: str | None = None,
                        limit: int | None = None) -> ListRunsResponse:
        action = actions.list_runs(root_run_id=root_run_id, session_id=session_id, agent_id=agent_id,
                                   status=status, limit=limit)
        return await self.call(action)  # type: ignore[return-value]

    async def cancel_run(self, run_id: str) -> CancelRunResponse:
        return await self.call(actions.cancel_run(run_id))  # type: ignore[return-value]

    async def delete_model_provider(self, name: str) -> NameResponse:
        return await self.call(actions.delete_model_provider(name))  # type: ignore[return-value]

    # -- sharing (owner: invite, remove, public read; invitee: accept, decline) -------------
    async def invite_agent_collaborator(self, agent_id: str, account_id: str,
                                        role: str) -> InviteAgentCollaboratorResponse:
        return await self.call(actions.invite_agent_collaborator(agent_id, account_id, role))  # type: ignore[return-value]

    async def list_agent_collaborators(self, agent_id: str) -> ListAgentCollaboratorsResponse:
        return await self.call(actions.list_agent_collaborators(agent_id))  # type: ignore[return-value]

    async def remove_agent_collaborator(self, agent_id: str, account_id: str) -> RemoveAgentCollaboratorResponse:
        return await self.call(actions.remove_agent_collaborator(agent_id, account_id))  # type: ignore[return-value]

    async def list_agent_invites(self) -> ListAgentInvitesResponse:
        return await self.call(actions.list_agent_invites())  # type: ignore[return-value]

    async def accept_agent_invite(self, agent_id: str) -> AgentResponse:
        return await self.call(actions.accept_agent_invite(agent_id))  # type: ignore[return-value]

    async def decline_agent_invite(self, agent_id: str) -> AgentIdResponse:
        return await self.call(actions.decline_agent_invite(agent_id))  # type: ignore[return-value]

    async def set_agent_public_read(self, agent_id: str, public_read: bool) -> AgentResponse:
        return await self.call(actions.set_agent_public_read(agent_id, public_read))  # type: ignore[return-value]

    async def set_agent_public_chat(self, agent_id: str, public_chat: bool, limits: dict | None = None,
                                    tools: list[str] | None = None) -> AgentResponse:
        """Open the agent to every signed account (or close it): `limits` {messagesPerHour,
        tokensPerDay, tokensPerDayAll}, `tools` the callables granted to visitors."""
        return await self.call(actions.set_agent_public_chat(agent_id, public_chat, limits, tools))  # type: ignore[return-value]

    # -- signing identities (Seed account keys the server holds for the account's agents) ---
    async def list_signing_identities(self, agent_id: str | None = None) -> dict:
        """{identities: [SigningIdentity]} (seed_agents.clients.shapes.SigningIdentity), newest first."""
        return await self.call(actions.list_signing_identities(agent_id))

    async def create_signing_identity(self, label: str | None = None,
                                      client_request_id: str | None = None) -> dict:
        """{identity: SigningIdentity}: a new key, published to the server's HM server if it has one."""
        return await self.call(actions.create_signing_identity(label, client_request_id))

    async def import_signing_identity(self, seed: bytes, label: str | None = None,
                                      client_request_id: str | None = None) -> dict:
        return await self.call(actions.import_signing_identity(seed, label, client_request_id))

    async def update_signing_identity(self, name: str, label: str, icon: bytes | None = None,
                                      mime_type: str | None = None) -> dict:
        return await self.call(actions.update_signing_identity(name, label, icon, mime_type))

    async def delete_signing_identity(self, name: str) -> dict:
        return await self.call(actions.delete_signing_identity(name))

    # -- files: memory, attachments, chunked uploads ---------------------------------------
    async def list_agent_memory(self, agent_id: str) -> dict:
        return await self.call(actions.list_agent_memory(agent_id))

    async def read_agent_memory_file(self, agent_id: str, path: str, offset: int | None = None,
                                     length: int | None = None) -> dict:
        return await self.call(actions.read_agent_memory_file(agent_id, path, offset, length))

    async def write_agent_memory_file(self, agent_id: str, path: str, content: str | bytes) -> dict:
        return await self.call(actions.write_agent_memory_file(agent_id, path, content))

    async def delete_agent_memory_file(self, agent_id: str, path: str) -> dict:
        return await self.call(actions.delete_agent_memory_file(agent_id, path))

    async def download_agent_memory_file(self, agent_id: str, url: str, path: str | None = None) -> dict:
        return await self.call(actions.download_agent_memory_file(agent_id, url, path))

    async def search_agent_memory(self, agent_id: str, query: str, limit: int | None = None) -> dict:
        return await self.call(actions.search_agent_memory(agent_id, query, limit))

    async def upload_session_attachment(self, session_id: str, name: str, content: bytes,
                                        mime_type: str | None = None) -> dict:
        return await self.call(actions.upload_session_attachment(session_id, name, content, mime_type))

    async def read_session_attachment(self, session_id: str, attachment_id: str, offset: int | None = None,
                                      length: int | None = None) -> dict:
        return await self.call(actions.read_session_attachment(session_id, attachment_id, offset, length))

    async def upload_file(self, target: dict, data, size: int | None = None, *, chunk_bytes: int = 3 << 20,
                          on_progress: Callable[[int, int], None] | None = None) -> dict:
        """Upload in chunks (Begin, Append..., Commit with the bytes' sha256), as the desktop does
        for files over 2 MiB; `data` is bytes or a binary file object (read a chunk at a time).
        Returns the CommitFileUploadResponse; on a failure the upload is aborted."""
        import hashlib

        total = len(data) if size is None else size
        begin = await self.call(actions.begin_file_upload(target, total))
        upload_id = begin["uploadId"]
        step = min(chunk_bytes, begin["maxChunkBytes"])
        digest = hashlib.sha256()
        sent = 0
        try:
            while sent < total:
                chunk = data[sent:sent + step] if isinstance(data, (bytes, bytearray, memoryview)) else data.read(step)
                if not chunk:
                    raise AgentsError(400, f"the file ended after {sent} of {total} bytes")
                digest.update(chunk)
                await self.call(actions.append_file_upload_chunk(upload_id, sent, chunk))
                sent += len(chunk)
                if on_progress is not None:
                    on_progress(sent, total)
            return await self.call(actions.commit_file_upload(upload_id, digest.hexdigest()))
        except BaseException:
            try:
                await self.call(actions.abort_file_upload(upload_id))
            except Exception:  # noqa: BLE001 - the upload may be gone already; it is swept anyway
                pass
            raise

    async def read_file_ranges(self, read_action: Callable[[int, int], dict], size: int, *,
                               range_bytes: int = 8 << 20):
        """Yield a file's bytes range by range (`read_action(offset, length)` builds the read)."""
        offset = 0
        while offset < size:
            answer = await self.call(read_action(offset, range_bytes))
            data = answer["data"] if "data" in answer else answer["file"].get("data", b"")
            if not data:
                return
            yield bytes(data)
            offset += len(data)

    async def message_with_attachments(self, session_id: str, text: str, attachment_ids: Sequence[str],
                                       client_message_id: str | None = None) -> MessageSessionResponse:
        return await self.call(actions.message_with_attachments(session_id, text, attachment_ids,
                                                                client_message_id))  # type: ignore[return-value]

    # -- triggers (CONTRACT section 8) --------------------------------------------------------
    async def list_agent_triggers(self, agent_id: str) -> dict:
        return await self.call(actions.list_agent_triggers(agent_id))

    async def get_agent_trigger(self, trigger_id: str) -> dict:
        """The trigger, the sessions it started, its recent firings, and for editors of a
        webhook trigger `webhook: {path, secret}`."""
        return await self.call(actions.get_agent_trigger(trigger_id))

    async def create_agent_trigger(self, agent_id: str, trigger: dict, client_request_id: str | None = None) -> dict:
        return await self.call(actions.create_agent_trigger(agent_id, trigger, client_request_id))

    async def update_agent_trigger(self, trigger_id: str, patch: dict) -> dict:
        return await self.call(actions.update_agent_trigger(trigger_id, patch))

    async def delete_agent_trigger(self, trigger_id: str) -> dict:
        return await self.call(actions.delete_agent_trigger(trigger_id))

    async def fire_agent_trigger(self, trigger_id: str, client_request_id: str | None = None) -> dict:
        """Fire a trigger now, by hand (this server's extension): {firingId, firingStatus, sessionId?}."""
        return await self.call(actions.fire_agent_trigger(trigger_id, client_request_id))

    # -- tools, delegation and the run tree ------------------------------------------------------
    async def list_agent_tools(self, agent_id: str) -> dict:
        """{agentId, tools: [AgentToolInfo]} (builtins, authored tools, MCP tools; each with its CID)."""
        return await self.call(actions.list_agent_tools(agent_id))

    async def save_agent_tool(self, agent_id: str, tool: dict, previous_name: str | None = None,
                              enabled: bool | None = None) -> dict:
        return await self.call(actions.save_agent_tool(agent_id, tool, previous_name=previous_name, enabled=enabled))

    async def delete_agent_tool(self, agent_id: str, name: str) -> dict:
        return await self.call(actions.delete_agent_tool(agent_id, name))

    async def invoke_session_tool(self, session_id: str, verb: str, value) -> dict:  # noqa: ANN001
        return await self.call(actions.invoke_session_tool(session_id, verb, value))

    async def signal_run(self, run_id: str, signal: str, payload=None) -> dict:  # noqa: ANN001
        """{runId, delivered}: delivered is False when the run was not waiting for this signal."""
        return await self.call(actions.signal_run(run_id, signal, payload))

    async def get_run_journal(self, run_id: str, after_seq: int | None = None, limit: int | None = None) -> dict:
        return await self.call(actions.get_run_journal(run_id, after_seq, limit))

    async def list_mcp_servers(self) -> dict:
        return await self.call(actions.list_mcp_servers())

    async def set_mcp_server(self, name: str, url: str, headers: dict | None = None,
                             secret_headers: dict | None = None, enabled: bool | None = None) -> dict:
        return await self.call(actions.set_mcp_server(name, url, headers, secret_headers, enabled))

    async def delete_mcp_server(self, name: str) -> dict:
        return await self.call(actions.delete_mcp_server(name))

    async def refresh_mcp_server(self, name: str) -> dict:
        return await self.call(actions.refresh_mcp_server(name))


class _Connecting:
    """What `AgentsClient.connect` returns: await it, or use it with `async with`."""

    def __init__(self, client: AgentsClient) -> None:
        self._client = client

    def __await__(self):
        return self._client.open().__await__()

    async def __aenter__(self) -> AgentsClient:
        return await self._client.open()

    async def __aexit__(self, *exc) -> None:
        await self._client.close()


__all__ = ["AgentsClient", "AgentsError", "Subscription", "DEFAULT_URL"]


def _derived(name: str, builder):
    async def send(self: AgentsClient, *args, **kwargs) -> dict:
        return await self.call(builder(*args, **kwargs))

    send.__name__ = send.__qualname__ = name
    send.__doc__ = builder.__doc__ or f"Send `{name}`'s action (clients/actions.py) and return its response."
    send.__wrapped__ = builder   # inspect.signature shows the builder's parameters
    return send


def _derive_methods() -> None:
    """Every action of `seed_agents.protocol.api.actions.ACTIONS` is a method: written above when it does more
    than send its builder's map (typed answers, uploads in chunks), else derived here from the
    builder of the same name in clients/actions.py. So adding an action to the client is adding
    its builder."""
    for action in ACTIONS:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()
        builder = getattr(actions, name, None)
        if builder is not None and name not in vars(AgentsClient):
            setattr(AgentsClient, name, _derived(name, builder))


_derive_methods()
