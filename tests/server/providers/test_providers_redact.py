"""The key scrubber and URL redaction (issue 12, findings 4 and 10)."""

import base64
import json
from urllib.parse import quote, quote_plus

import pytest

from seed_agents.server.providers.base import ProviderError
from seed_agents.server.providers.redact import REDACTED, display_url, redact_urls, scrub

KEYS = [
    "sk-plain-0123456789abcdef",
    'sk-with"quotes\'and\\backslash-42',
    "sk-line\nbreak\r\ttab-7788",
    "sk-ünïcödé-ключ-鍵-🔑-99",
    "sk with spaces & ampersands=+/%",
]


def forms(key: str) -> list[str]:
    raw = key.encode()
    return [
        key,
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        repr(key)[1:-1],
        quote(key, safe=""),
        quote(key),
        quote_plus(key),
        base64.b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),          # a Basic Authorization header
        base64.b64encode(b"xy" + raw + b"tail").decode(),
        base64.urlsafe_b64encode(b"z" + raw).decode(),
    ]


@pytest.mark.parametrize("key", KEYS)
def test_every_form_of_the_key_is_scrubbed(key):
    for form in forms(key):
        text = f'{{"error": "bad key {form}", "again": "{form}"}}'
        out = scrub(text, [key])
        assert REDACTED in out
        assert form not in out, form
        assert key not in out
        # No long piece of the key survives either (a base64 fragment may keep its edges).
        if form == key:
            assert out == f'{{"error": "bad key {REDACTED}", "again": "{REDACTED}"}}'


def test_provider_error_scrubs_escaped_forms():
    key = KEYS[1]
    err = ProviderError(f"upstream said {json.dumps({'k': key})}", secret=key)
    assert json.dumps(key)[1:-1] not in err.message and REDACTED in err.message


def test_short_or_empty_keys_do_not_eat_the_text():
    assert scrub("nothing here", [None, ""]) == "nothing here"
    assert scrub("a b c", ["zz"]) == "a b c"


@pytest.mark.parametrize("url, shown", [
    ("https://user:SEKRIT@api.example/v1?key=SEKRIT#frag", "https://api.example/v1"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("http://[::1]:11434/v1?x=1", "http://[::1]:11434/v1"),
])
def test_display_url_drops_userinfo_and_query(url, shown):
    assert display_url(url) == shown


def test_redact_urls_in_free_text():
    text = 'HTTP Request: POST https://a:SEKRIT@h.example/v1/x?key=SEKRIT "HTTP/1.1 200 OK"'
    assert redact_urls(text) == 'HTTP Request: POST https://h.example/v1/x "HTTP/1.1 200 OK"'
