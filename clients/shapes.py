"""The shapes of responses and records (CONTRACT section 4), as TypedDicts for editors and
readers. At run time they are plain dicts, exactly as decoded from the wire; `total=False`
marks fields the server may omit."""
from __future__ import annotations

from typing import Literal, TypedDict


class AgentInfo(TypedDict):
    id: str
    account: str
    definition: dict          # {name, systemPrompt, modelProvider, model, ...}
    stateDir: str
    status: Literal["idle", "running", "stopped", "error"]
    createdAt: int
    updatedAt: int


class SessionInfo(TypedDict, total=False):
    id: str
    account: str
    agentId: str
    title: str
    status: Literal["idle", "streaming", "stopped", "error"]
    createdAt: int
    updatedAt: int


class SessionEvent(TypedDict):
    id: str
    sessionId: str
    seq: int
    event: dict               # {type: "message", role, content, ...} | {type: "error", message} | ...
    createdAt: int


class RegisterSignerResponse(TypedDict):
    accountId: str
    signerId: str


class NameResponse(TypedDict):           # SetSecret, SetModelProvider
    name: str


class ListModelProvidersResponse(TypedDict):
    providers: list[dict]


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
    nextCursor: str


class GetSessionResponse(TypedDict, total=False):
    session: SessionInfo
    events: list[SessionEvent]
    systemPromptMarkdown: str
    nextAfterSeq: int


class MessageSessionResponse(TypedDict):
    sessionId: str
    assistantEventId: str     # "" unless the reply already finished
    userEventId: str
    runId: str


class StopSessionResponse(TypedDict):
    sessionId: str
