"""Keeping API keys and URL credentials out of messages and logs.

`scrub` removes a key in every form it can take inside an error text or a logged body: as is,
JSON-escaped (with and without `ensure_ascii`), Python-repr-escaped, percent-encoded (path and
form styles), and base64 (standard and URL-safe, at each of the three byte alignments, as in a
Basic `Authorization` header). `redact_urls` drops the userinfo and query string of every
http(s) URL in a text, and `display_url` does it for one URL.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

REDACTED = "[redacted]"

# Base64 fragments shorter than this would match ordinary text too often to be worth removing.
_MIN_B64_FRAGMENT = 8


def secret_forms(secret: str) -> set[str]:
    """Every spelling of `secret` that `scrub` looks for (longer than nothing)."""
    forms = {secret}
    for ensure_ascii in (True, False):
        forms.add(json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1])
    forms.add(repr(secret)[1:-1])
    forms.add(secret.encode("unicode_escape").decode("ascii"))
    forms.add(quote(secret, safe=""))
    forms.add(quote(secret))
    forms.add(quote_plus(secret))
    raw = secret.encode("utf-8")
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(_b64_core(raw, shift, encode))
    stripped = secret.strip()
    if stripped and stripped != secret:
        forms |= secret_forms(stripped)
    return {f for f in forms if f and (len(f) >= _MIN_B64_FRAGMENT or f == secret)}


def _b64_core(raw: bytes, shift: int, encode) -> str:  # noqa: ANN001
    """The base64 characters that depend on `raw` alone when it starts `shift` bytes into a
    3-byte group: whatever precedes or follows it, an encoding containing `raw` contains this."""
    encoded = encode(b"\0" * shift + raw).decode("ascii")
    start = 4 if shift else 0
    end = ((shift + len(raw)) // 3) * 4
    return encoded[start:end]


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every form of each non-empty secret replaced by a marker."""
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms |= secret_forms(secret)
    # Longest first, so a form that contains a shorter one is removed whole.
    for form in sorted(forms, key=len, reverse=True):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


_URL = re.compile(r"https?://[^\s\"'<>]+", re.IGNORECASE)


def display_url(url: str) -> str:
    """`url` without userinfo, query string or fragment (the places credentials hide)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port is not None else "")
    except ValueError:   # a malformed URL: keep only what comes before any '@', '?' or '#'
        return re.split(r"[?#]", url.rsplit("@", 1)[-1], maxsplit=1)[0]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_urls(text: str) -> str:
    """Every http(s) URL in `text` shown by `display_url`."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: display_url(m.group()), text)
