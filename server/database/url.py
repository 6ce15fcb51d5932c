"""The storage URL: `sqlite:FILE` (the default) or `postgresql://...` (CONTRACT section 7).

The one parser of storage URLs: seed_agents.server.config reads --storage-url / SEED_AGENTS_STORAGE_URL
with it, and the drivers are chosen by it. A parsed URL shows itself only in redacted form (`str`,
`repr`, `display`): a password in the user-info or in a `password=` query parameter becomes
`***`. Parse errors never quote the input either, since it may hold a password; they name the
scheme and what is wrong, and whoever must show the input shows `redact(text)`. Only `dsn()`
gives the real text, for the driver's connect call.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "***"
_SECRET_PARAMS = {"password", "sslpassword"}


class StorageURLError(ValueError):
    """The storage URL is missing or malformed; the message never contains a password."""


@dataclass(frozen=True)
class StorageURL:
    scheme: str                   # "sqlite" or "postgresql"
    path: str | None = None       # the SQLite file (sqlite only)
    _dsn: str = field(default="", repr=False, compare=False)
    display: str = ""             # redacted, safe for logs and errors

    @property
    def is_sqlite(self) -> bool:
        return self.scheme == "sqlite"

    @property
    def is_postgresql(self) -> bool:
        return self.scheme == "postgresql"

    def dsn(self) -> str:
        """The connection string with its credentials, for the driver only: never log it."""
        return self._dsn

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"StorageURL({self.display!r})"


def sqlite_url(path: str) -> StorageURL:
    """The default URL for a database file path (`sqlite:` + the path)."""
    if not path:
        raise StorageURLError(_NO_FILE)
    text = f"sqlite:{path}"
    return StorageURL("sqlite", path, text, text)


_NO_FILE = "sqlite: needs a file path, e.g. sqlite:./data/agents.sqlite"


def parse_storage_url(text: str | None) -> StorageURL:
    if text is None or not text.strip():
        raise StorageURLError("storage URL is missing: use sqlite:FILE or postgresql://...")
    text = text.strip()
    scheme, sep, rest = text.partition(":")
    scheme = scheme.lower()
    if not sep:
        raise StorageURLError("no scheme: use sqlite:FILE or postgresql://...")
    if scheme == "sqlite":
        return _sqlite(rest)
    if scheme in ("postgresql", "postgres"):
        return _postgresql(text)
    shown = scheme if scheme.isalnum() and len(scheme) <= 20 else "?"
    raise StorageURLError(f"scheme {shown!r} is not supported: use sqlite:FILE or postgresql://...")


def _sqlite(rest: str) -> StorageURL:
    path = rest
    if rest.startswith("//"):
        # URL form: sqlite:///abs/path or sqlite://localhost/abs/path; a remote host is not a file.
        authority, _, tail = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise StorageURLError("sqlite:// names a host; SQLite needs a local file (sqlite:FILE)")
        path = "/" + tail
        if path == "/":
            path = ""
    if not path:
        raise StorageURLError(_NO_FILE)
    return sqlite_url(path)


def _postgresql(text: str) -> StorageURL:
    try:
        parts = urlsplit(text)
        port = parts.port  # raises ValueError on a bad port
    except ValueError:
        raise StorageURLError("postgresql://: malformed host or port") from None
    if not text.lower().startswith(("postgresql://", "postgres://")):
        raise StorageURLError("a PostgreSQL URL must start with postgresql://")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not parts.hostname and not any(k == "host" for k, _ in query):
        raise StorageURLError("postgresql:// names no host")
    if port is not None and not 0 < port < 65536:
        raise StorageURLError("postgresql://: port out of range")
    return StorageURL("postgresql", None, text, _redact(parts, query))


def redact(text: str) -> str:
    """Any URL-like text (parsed or not, of any scheme) safe to show: a user-info password and
    secret query parameters become ***. For quoting the input of a refused URL."""
    try:
        parts = urlsplit(text)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "(a URL that cannot be parsed)"
    if not text.strip():
        return text
    return _redact(parts, query, parts.scheme)


def _redact(parts, query: list[tuple[str, str]], scheme: str = "postgresql") -> str:
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{hostport}" if has_password else f"{user}@{hostport}"
    shown_query = urlencode([(k, REDACTED if k.lower() in _SECRET_PARAMS else v) for k, v in query],
                            safe="*/=-,")
    return urlunsplit((scheme, netloc, parts.path, shown_query, ""))


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
_CONNINFO_SECRET = re.compile(r"\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.I)


def scrub(text: str, url: StorageURL) -> str:
    """`text` with its passwords blanked: inside each URL it quotes (user-info password, secret
    query parameters), in `password=...` of a libpq conninfo, and as a whole word. For driver
    error messages, which should never echo one, but a log line must not depend on that. A
    password is never blanked inside another word: `p` must not turn `port 5999` into `***ort`."""
    if not url.is_postgresql:
        return text
    text = _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
    text = _CONNINFO_SECRET.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    # A password echoed alone is blanked as a whole word only (never inside another word).
    for secret in _passwords(url):
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", REDACTED, text)
    return text


def _passwords(url: StorageURL) -> list[str]:
    parts = urlsplit(url.dsn())
    found = [unquote(parts.password)] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in _SECRET_PARAMS and v]
    # The decoded form and the raw (percent-encoded) form may both appear in a message.
    raw = parts.netloc.rpartition("@")[0].partition(":")[2] if "@" in parts.netloc else ""
    if raw:
        found.append(raw)
    return sorted(set(found), key=len, reverse=True)
