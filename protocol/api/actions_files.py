"""Files: agent memory, session attachments and chunked uploads (CONTRACT section 8).

Each action: its frozen dataclass, its parser (written with seed_agents.protocol.api.fields) and one line in
`ACTIONS`, which protocol/api/actions.py merges into the one table the server routes by. Shapes are
the reference's (`agents/protocol/src/index.ts`); our additions, each optional, are said in
docs/protocol.md ("Files"): `SearchAgentMemory`, ranged reads (`offset`, `length`) and
CommitFileUpload's `sha256`.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ..wire.errors import ProtocolError
from .fields import MAX_ID, MAX_NAME, MAX_URL, ActionKind, Fields, kind_of, read, write
from ..wire.file_rules import (
    MAX_INLINE_CONTENT_BYTES, MAX_SESSION_ATTACHMENT_BYTES, MAX_UPLOAD_CHUNK_BYTES, MAX_UPLOAD_TOTAL_BYTES,
    attachment_id, attachment_name, memory_path, sha256_hex,
)

MAX_QUERY = 1_000        # characters of a search query
MAX_MIME_TYPE = 200


@dataclass(frozen=True)
class ListAgentMemory:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class ReadAgentMemoryFile:
    ts: int
    agent_id: str
    path: str
    offset: int | None = None   # a byte range (ours): for files larger than one answer
    length: int | None = None


@dataclass(frozen=True)
class WriteAgentMemoryFile:
    ts: int
    agent_id: str
    path: str
    content: bytes   # text arrives as str and is stored as its UTF-8


@dataclass(frozen=True)
class DeleteAgentMemoryFile:
    ts: int
    agent_id: str
    path: str


@dataclass(frozen=True)
class DownloadAgentMemoryFile:
    ts: int
    agent_id: str
    url: str
    path: str | None = None   # None: downloads/<the URL's last segment>


@dataclass(frozen=True)
class UploadAgentMemoryFileToIpfs:
    ts: int
    agent_id: str
    path: str


@dataclass(frozen=True)
class SearchAgentMemory:
    ts: int
    agent_id: str
    query: str
    limit: int | None = None


@dataclass(frozen=True)
class UploadSessionAttachment:
    ts: int
    session_id: str
    name: str
    mime_type: str | None
    content: bytes


@dataclass(frozen=True)
class ReadSessionAttachment:
    ts: int
    session_id: str
    attachment_id: str
    offset: int | None = None
    length: int | None = None


@dataclass(frozen=True)
class FileUploadTarget:
    kind: str                   # memory | session-attachment
    agent_id: str | None = None
    path: str | None = None
    session_id: str | None = None
    name: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True)
class BeginFileUpload:
    ts: int
    target: FileUploadTarget
    size: int


@dataclass(frozen=True)
class AppendFileUploadChunk:
    ts: int
    upload_id: str
    offset: int
    content: bytes


@dataclass(frozen=True)
class CommitFileUpload:
    ts: int
    upload_id: str
    sha256: str | None = None   # hex; when given, bytes that hash otherwise are refused


@dataclass(frozen=True)
class AbortFileUpload:
    ts: int
    upload_id: str


# --- parsers ------------------------------------------------------------------------------
def _path(f: Fields, field: str = "path", *, required: bool = True) -> str | None:
    raw = f.get(field, required)
    if raw is None:
        return None
    try:
        return memory_path(raw)
    except ProtocolError as exc:
        raise f.fail(field, f"is refused: {exc.message}") from None


def _bytes(f: Fields, field: str, limit: int, *, allow_text: bool, allow_empty: bool) -> bytes:
    value = f.get(field, True)
    if type(value) is str and allow_text:
        value = value.encode()
    elif type(value) is not bytes:
        wanted = "text or a byte string" if allow_text else "a byte string"
        raise f.fail(field, f"must be {wanted}, got {kind_of(value)}")
    if len(value) > limit:
        raise ProtocolError(413, f"{f.name}.{field} is {len(value)} bytes; the limit is {limit} "
                                 f"(larger files go in chunks: BeginFileUpload)")
    if not value and not allow_empty:
        raise f.fail(field, "must not be empty")
    return value


def _range(f: Fields) -> tuple[int | None, int | None]:
    return f.integer("offset", 0, None), f.integer("length", 0, None)


def _mime(f: Fields) -> str | None:
    value = f.text("mimeType", MAX_MIME_TYPE, required=False, allow_empty=True)
    return value.strip() or None if value is not None else None


def _read_memory(f: Fields, ts: int) -> ReadAgentMemoryFile:
    return ReadAgentMemoryFile(ts, f.text("agentId", MAX_ID), _path(f), *_range(f))


def _write_memory(f: Fields, ts: int) -> WriteAgentMemoryFile:
    return WriteAgentMemoryFile(ts, f.text("agentId", MAX_ID), _path(f),
                                _bytes(f, "content", MAX_INLINE_CONTENT_BYTES, allow_text=True, allow_empty=True))


def _download(f: Fields, ts: int) -> DownloadAgentMemoryFile:
    url = f.text("url", MAX_URL).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise f.fail("url", "must be an http:// or https:// URL")
    return DownloadAgentMemoryFile(ts, f.text("agentId", MAX_ID), url, _path(f, required=False))


def _search(f: Fields, ts: int) -> SearchAgentMemory:
    return SearchAgentMemory(ts, f.text("agentId", MAX_ID), f.text("query", MAX_QUERY), f.integer("limit", 1, 50))


def _upload_attachment(f: Fields, ts: int) -> UploadSessionAttachment:
    return UploadSessionAttachment(
        ts, f.text("sessionId", MAX_ID), attachment_name(f.text("name", 10_000, allow_empty=True)), _mime(f),
        _bytes(f, "content", MAX_INLINE_CONTENT_BYTES, allow_text=False, allow_empty=False))


def _read_attachment(f: Fields, ts: int) -> ReadSessionAttachment:
    raw = f.text("attachmentId", MAX_ID)
    try:
        ident = attachment_id(raw)
    except ProtocolError as exc:
        raise f.fail("attachmentId", f"is refused: {exc.message}") from None
    return ReadSessionAttachment(ts, f.text("sessionId", MAX_ID), ident, *_range(f))


def _target(f: Fields) -> FileUploadTarget:
    t = Fields(f.mapping("target"), f"{f.name}.target")
    kind = t.text("kind", MAX_NAME)
    if kind == "memory":
        return FileUploadTarget(kind, agent_id=t.text("agentId", MAX_ID), path=_path(t))
    if kind == "session-attachment":
        name = t.text("name", 10_000)
        return FileUploadTarget(kind, session_id=t.text("sessionId", MAX_ID), name=attachment_name(name),
                                mime_type=_mime(t))
    raise t.fail("kind", "must be 'memory' or 'session-attachment'")


def _begin(f: Fields, ts: int) -> BeginFileUpload:
    target = _target(f)
    size = f.integer("size", 0, None, required=True)
    cap = MAX_UPLOAD_TOTAL_BYTES if target.kind == "memory" else MAX_SESSION_ATTACHMENT_BYTES
    if size > cap:
        what = "file" if target.kind == "memory" else "attachment"
        raise ProtocolError(413, f"Upload of {size} bytes exceeds the maximum {what} size of {cap} bytes")
    if size == 0 and target.kind != "memory":
        raise f.fail("size", "must be at least 1 for an attachment")
    return BeginFileUpload(ts, target, size)


def _append(f: Fields, ts: int) -> AppendFileUploadChunk:
    return AppendFileUploadChunk(ts, f.text("uploadId", MAX_ID), f.integer("offset", 0, None, required=True),
                                 _bytes(f, "content", MAX_UPLOAD_CHUNK_BYTES, allow_text=False, allow_empty=False))


def _commit(f: Fields, ts: int) -> CommitFileUpload:
    raw = f.text("sha256", 100, required=False)
    digest = None
    if raw is not None:
        try:
            digest = sha256_hex(raw, "sha256")
        except ProtocolError as exc:
            raise f.fail("sha256", exc.message.removeprefix("sha256 ")) from None
    return CommitFileUpload(ts, f.text("uploadId", MAX_ID), digest)


def _agent_path(cls):  # noqa: ANN001, ANN202
    return lambda f, ts: cls(ts, f.text("agentId", MAX_ID), _path(f))


ACTIONS: dict[str, ActionKind] = {
    "ListAgentMemory": read(lambda f, ts: ListAgentMemory(ts, f.text("agentId", MAX_ID))),
    "ReadAgentMemoryFile": read(_read_memory),
    "WriteAgentMemoryFile": write(_write_memory),
    "DeleteAgentMemoryFile": write(_agent_path(DeleteAgentMemoryFile)),
    "DownloadAgentMemoryFile": write(_download),
    "UploadAgentMemoryFileToIpfs": write(_agent_path(UploadAgentMemoryFileToIpfs)),
    "SearchAgentMemory": read(_search),
    "UploadSessionAttachment": write(_upload_attachment),
    "ReadSessionAttachment": read(_read_attachment),
    "BeginFileUpload": write(_begin),
    "AppendFileUploadChunk": write(_append),
    "CommitFileUpload": write(_commit),
    "AbortFileUpload": write(lambda f, ts: AbortFileUpload(ts, f.text("uploadId", MAX_ID))),
}
