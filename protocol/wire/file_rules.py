"""The reference's rules for files (CONTRACT section 8, "Files"): memory paths, attachment names and
ids, MIME types inferred from names, text detection, and the size limits. Pure: text and bytes in,
values out, a ProtocolError naming the problem otherwise.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

from .errors import ProtocolError, quote

MAX_MEMORY_PATH_BYTES = 512   # a normalized memory path, as UTF-8
MAX_MEMORY_PATH_DEPTH = 16    # segments
MAX_ATTACHMENT_NAME_BYTES = 256
MAX_SESSION_ATTACHMENT_BYTES = 100 * 1024 * 1024
MAX_SESSION_ATTACHMENTS = 200
MAX_UPLOAD_CHUNK_BYTES = 8 * 1024 * 1024
MAX_UPLOAD_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
UPLOAD_TTL_MS = 60 * 60 * 1000
MAX_ACTIVE_UPLOADS_PER_ACCOUNT = 8
MAX_MESSAGE_ATTACHMENTS = 16
# Bytes of one action's own content (WriteAgentMemoryFile, UploadSessionAttachment): one upload
# chunk, so every upload action fits the same frame limit (protocol/wire/frame_limits.py).
MAX_INLINE_CONTENT_BYTES = MAX_UPLOAD_CHUNK_BYTES

_ATTACHMENT_ID = re.compile(r"[0-9a-f]{64}")
_SHA256_HEX = _ATTACHMENT_ID
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

MIME_TYPES = {
    "md": "text/markdown", "txt": "text/plain", "csv": "text/csv", "json": "application/json",
    "html": "text/html", "css": "text/css", "js": "text/javascript", "ts": "text/plain",
    "xml": "application/xml", "yaml": "text/plain", "yml": "text/plain", "png": "image/png",
    "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
    "avif": "image/avif", "svg": "image/svg+xml", "ico": "image/x-icon", "mp3": "audio/mpeg",
    "wav": "audio/wav", "ogg": "audio/ogg", "m4a": "audio/mp4", "flac": "audio/flac",
    "mp4": "video/mp4", "webm": "video/webm", "mov": "video/quicktime", "mkv": "video/x-matroska",
    "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip",
    "tar": "application/x-tar", "wasm": "application/wasm",
}


def infer_mime_type(name: str) -> str | None:
    """The MIME type of a file name's extension, when it is one the reference knows."""
    _, dot, ext = name.rpartition(".")
    return MIME_TYPES.get(ext.lower()) if dot else None


def extension_for(mime_type: str) -> str | None:
    bare = mime_type.split(";")[0].strip().lower()
    for ext, mime in MIME_TYPES.items():
        if mime == bare:
            return ext
    return None


def memory_path(raw: object) -> str:
    """A memory path normalized as the reference does (`\\` is `/`, empty and `.` segments go),
    or a 400: not text, a NUL, empty, deeper than 16, a `..` segment, longer than 512 bytes."""
    if type(raw) is not str:
        raise ProtocolError(400, "Memory path must be a string")
    if "\x00" in raw:
        raise ProtocolError(400, "Memory path contains an invalid character")
    segments = [s for s in raw.replace("\\", "/").split("/") if s not in ("", ".")]
    if not segments:
        raise ProtocolError(400, "Memory path is required")
    if len(segments) > MAX_MEMORY_PATH_DEPTH:
        raise ProtocolError(400, f"Memory path is nested too deeply (at most {MAX_MEMORY_PATH_DEPTH} levels)")
    if ".." in segments:
        raise ProtocolError(400, 'Memory path cannot contain ".."')
    path = "/".join(segments)
    if len(path.encode()) > MAX_MEMORY_PATH_BYTES:
        raise ProtocolError(400, f"Memory path is too long (at most {MAX_MEMORY_PATH_BYTES} bytes)")
    if _CONTROL.search(path):
        raise ProtocolError(400, "Memory path contains a control character")
    return path


def attachment_name(raw: object) -> str:
    """A client's file name as a safe display name: its last path segment, control characters
    removed, 'file' when nothing is left, its last 64 characters when over 256 bytes."""
    base = raw.strip().replace("\\", "/").split("/")[-1] if type(raw) is str else ""
    cleaned = _CONTROL.sub("", base).strip()
    if not cleaned:
        return "file"
    return cleaned[-64:] if len(cleaned.encode()) > MAX_ATTACHMENT_NAME_BYTES else cleaned


def attachment_id(raw: str) -> str:
    if not _ATTACHMENT_ID.fullmatch(raw):
        raise ProtocolError(400, f"Invalid attachment id: {quote(raw, 80)}")
    return raw


def sha256_hex(raw: str, field: str) -> str:
    value = raw.lower()
    if not _SHA256_HEX.fullmatch(value):
        raise ProtocolError(400, f"{field} must be 64 hexadecimal digits (a SHA-256), got {quote(raw, 80)}")
    return value


def utf8_or_none(data: bytes) -> str | None:
    """The text of clean UTF-8 bytes (no NUL), else None: the reference's test for text files."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def default_download_path(url_path: str, fallback: str) -> str:
    """`downloads/<last URL segment>` with `\\` and `..` defused, as the reference names downloads."""
    last = unquote([s for s in url_path.split("/") if s][-1] if url_path.strip("/") else "")
    safe = last.replace("\\", "-").replace("..", "-")[:128]
    return f"downloads/{safe or fallback}"
