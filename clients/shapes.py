"""The shapes of responses and records (CONTRACT section 4), as TypedDicts for editors and
readers. At run time they are plain dicts, exactly as decoded from the wire; `total=False`
marks fields the server may omit."""
from __future__ import annotations

from typing import Literal, TypedDict


class AgentActivity(TypedDict, total=False):
    at: int                   # always present: the latest event's time
    kind: str                 # always present: that event's `type` (message, error, ...)
    sessionId: str            # the session of the latest message
    messageAt: int
    messageFrom: Literal["user", "assistant"]


class AgentInfo(TypedDict, total=False):
    id: str
    account: str
    definition: dict          # {name, systemPrompt (text or block tree), modelProvider, model, ...}
    stateDir: str
    status: Literal["idle", "running", "stopped", "error"]
    createdAt: int
    updatedAt: int
    accessRole: Literal["owner", "reader", "writer"]
    publicRead: bool
    busy: bool                # a run of the agent is queued or running
    activity: AgentActivity   # absent until the agent's first event


class SessionActivity(TypedDict):
    messageAt: int
    messageFrom: Literal["user", "assistant"]


class SessionInfo(TypedDict, total=False):
    id: str
    account: str
    agentId: str
    title: str
    status: Literal["idle", "streaming", "stopped", "error"]
    createdAt: int
    updatedAt: int
    parentSessionId: str
    runId: str
    childSessionCount: int
    modelOverride: dict       # {provider, model, reasoningLevel?}
    description: str
    activity: SessionActivity  # absent until the session's first message
    plan: dict                 # the live checklist {title?, steps, ownerRunId, settledAt?}
    continuedFromSessionId: str   # continue_session: the predecessor ...
    continuedBySessionId: str     # ... and the successor
    thoroughness: Literal["quick", "normal", "deep"]


class RedactedModelProvider(TypedDict):
    id: str
    name: str
    type: str
    hasSecrets: bool          # the config names a secret; which one is never shown
    createdAt: int
    updatedAt: int


class RedactedSecret(TypedDict, total=False):
    id: str
    name: str
    metadata: dict
    hasValue: bool            # always True; the value is never returned
    createdAt: int
    updatedAt: int


class SessionListCursor(TypedDict):
    updatedBefore: int
    idBefore: str


class RunError(TypedDict):
    code: str
    message: str


class RunInfo(TypedDict, total=False):
    id: str
    account: str
    rootRunId: str
    parentRunId: str
    depth: int
    kind: Literal["agent"]
    agentId: str
    sessionId: str
    origin: Literal["user", "agent", "system"]
    title: str
    status: Literal["queued", "claimed", "running", "waiting", "succeeded", "failed", "canceled"]
    attempt: int
    createdAt: int
    updatedAt: int
    startedAt: int
    finishedAt: int
    usage: dict               # {input, output, cacheRead, cacheWrite, total}
    error: RunError


class SessionEvent(TypedDict):
    id: str
    sessionId: str
    seq: int
    event: dict               # {type: "message", role, content, ...} | {type: "error", message} | ...
    createdAt: int


class RegisterSignerResponse(TypedDict):
    accountId: str
    signerId: str


class SetSecretResponse(TypedDict):
    secret: RedactedSecret


class SetModelProviderResponse(TypedDict):
    provider: RedactedModelProvider


class NameResponse(TypedDict):           # DeleteModelProvider
    name: str


class ListModelProvidersResponse(TypedDict):
    providers: list[RedactedModelProvider]


class CreateAgentResponse(TypedDict):
    agentId: str


class GetAgentResponse(TypedDict):
    agent: AgentInfo
    sessions: list[SessionInfo]


class ListAgentsResponse(TypedDict):
    agents: list[AgentInfo]


class CreateSessionResponse(TypedDict):
    sessionId: str


class ListSessionsResponse(TypedDict, total=False):
    sessions: list[SessionInfo]
    agents: list[AgentInfo]
    nextCursor: SessionListCursor


class GetSessionResponse(TypedDict, total=False):
    session: SessionInfo
    events: list[SessionEvent]
    systemPromptMarkdown: str
    nextAfterSeq: int
    continuation: dict        # a successor's edge and manifest (docs/protocol.md "Session continuations")


class MessageSessionResponse(TypedDict):
    sessionId: str
    assistantEventId: str     # "" unless the reply already finished
    userEventId: str
    runId: str


class StopSessionResponse(TypedDict):
    sessionId: str
    stopped: bool             # False when no run was live or queued


class UpdateAgentResponse(TypedDict):   # `_: "GetAgentResponse"`, as the reference answers
    agent: AgentInfo
    sessions: list[SessionInfo]


class AgentIdResponse(TypedDict):       # DeleteAgent
    agentId: str


class UpdateSessionResponse(TypedDict):
    session: SessionInfo


class DeleteSessionResponse(TypedDict):
    sessionId: str
    agentId: str


class RetrySessionResponse(TypedDict):
    sessionId: str
    assistantEventId: str     # ""
    runId: str


class GetRunResponse(TypedDict):
    run: RunInfo


class ListRunsResponse(TypedDict):
    runs: list[RunInfo]


class CancelRunResponse(TypedDict):
    runId: str
    canceled: bool            # False when the run had already ended


class AgentCollaboratorInfo(TypedDict):
    accountId: str
    role: Literal["owner", "reader", "writer"]
    status: Literal["accepted", "pending"]
    createdAt: int
    updatedAt: int


class AgentInviteInfo(TypedDict):
    agentId: str
    agentName: str
    ownerAccountId: str
    role: Literal["reader", "writer"]
    createdAt: int
    updatedAt: int


class InviteAgentCollaboratorResponse(TypedDict):
    collaborator: AgentCollaboratorInfo


class ListAgentCollaboratorsResponse(TypedDict):
    agentId: str
    publicRead: bool
    collaborators: list[AgentCollaboratorInfo]   # the owner first


class RemoveAgentCollaboratorResponse(TypedDict):
    agentId: str
    accountId: str


class ListAgentInvitesResponse(TypedDict):
    invites: list[AgentInviteInfo]


class AgentResponse(TypedDict):            # AcceptAgentInvite, SetAgentPublicRead
    agent: AgentInfo


class SigningIdentity(TypedDict, total=False):
    id: str
    name: str                 # what agent definitions name: signingKey, signingKeys
    accountId: str            # the key's own Seed account (z6Mk...)
    label: str
    icon: str                 # ipfs://<cid> of the published avatar
    serverUrl: str            # the HM server its profile is published to; absent: none
    createdAt: int
    updatedAt: int
