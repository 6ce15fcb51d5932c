"""Action maps, one builder per action of CONTRACT section 4, without `ts` (the client adds it
when it signs). Optional fields are omitted, never sent as null, as the contract asks."""
from __future__ import annotations

from collections.abc import Sequence


def _action(action_name: str, /, **fields) -> dict:
    action = {"_": action_name}
    action.update((k, v) for k, v in fields.items() if v is not None)
    return action


def register_signer(capability: bytes) -> dict:
    return _action("RegisterSigner", capability=bytes(capability))


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
                  cursor: str | None = None) -> dict:
    return _action("ListSessions", agentId=agent_id, limit=limit, cursor=cursor)


def get_session(session_id: str, after_seq: int | None = None, limit: int | None = None) -> dict:
    return _action("GetSession", sessionId=session_id, afterSeq=after_seq, limit=limit)


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
