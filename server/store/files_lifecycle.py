"""Files go with what holds them: DeleteAgent and DeleteSession remove the memory, attachments
and uploads in progress in their own transaction, freeing bytes nothing else references."""
from __future__ import annotations

from . import attachments, memory, uploads


def delete_agent_files(conn, agent_id: str, session_ids: list[str]) -> None:
    uploads.drop_for(conn, agent_id=agent_id, session_ids=session_ids)
    attachments.delete_session_attachments(conn, session_ids)
    memory.delete_agent_memory(conn, agent_id)


def delete_session_files(conn, session_id: str) -> None:
    uploads.drop_for(conn, session_ids=[session_id])
    attachments.delete_session_attachments(conn, [session_id])
