"""The OpenAI-compatible provider against a real fake server on 127.0.0.1."""

import asyncio
import json
import socket
import time

import httpx
import pytest

from seed_agents.server.providers.base import ChatMessage, ProviderError, ProviderSpec, TextDelta, Usage
from seed_agents.server.providers.openai_compat import OpenAICompatProvider

from tests.fakes.openai_server import FakeOpenAI, Script

KEY = "sk-test-SEKRIT-4f1c9a7e22"  # distinctive, so any leak is easy to spot
MESSAGES = [ChatMessage("system", "You are terse."), ChatMessage("user", "Say hi")]


@pytest.fixture
async def client():
    # trust_env=False: no proxy from the environment may sit between us and 127.0.0.1.
    async with httpx.AsyncClient(trust_env=False) as c:
        yield c


@pytest.fixture
async def fake():
    async with FakeOpenAI() as f:
        yield f


def provider(base_url, client, *, key=KEY, defaults=None, type="openai", **timeouts):
    spec = ProviderSpec(type=type, base_url=base_url, api_key=key, model_defaults=defaults or {})
    # Short defaults so a test that goes wrong fails in seconds, not in a minute.
    timeouts = {"first_token_timeout": 5.0, "idle_timeout": 5.0, **timeouts}
    return OpenAICompatProvider(spec, client, **timeouts)


async def collect(p, model="gpt-test", messages=MESSAGES):
    return [item async for item in p.stream(model, messages)]


async def failure(p, **kwargs) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(p, **kwargs)
    assert KEY not in info.value.message and KEY not in str(info.value)
    return info.value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the happy path ------------------------------------------------------------------------


async def test_streams_deltas_in_order_then_usage(fake, client):
    fake.default = Script(chunks=["Hel", "lo", ", ", "world"])
    items = await collect(provider(fake.base_url, client))
    assert items == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(", "),
        TextDelta("world"),
        Usage(input=7, output=2, cache_read=3, cache_write=0, total=9),
    ]


async def test_sends_model_messages_stream_and_bearer_key(fake, client):
    p = provider(fake.base_url + "/", client)  # a trailing slash must not double up
    await collect(p, model="my-model")
    [req] = fake.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    assert req.body == {
        "model": "my-model",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_model_defaults_are_merged_but_never_override_the_call(fake, client):
    defaults = {
        "temperature": 0.3,
        "max_tokens": 64,
        "model": "wrong",
        "messages": [],
        "stream": False,
        "stream_options": {"include_usage": False, "extra": 1},
    }
    await collect(provider(fake.base_url, client, defaults=defaults), model="right")
    body = fake.requests[0].body
    assert body["temperature"] == 0.3 and body["max_tokens"] == 64
    assert body["model"] == "right"
    assert body["messages"][1] == {"role": "user", "content": "Say hi"}
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "extra": 1}


async def test_no_key_means_no_authorization_header(fake, client):
    items = await collect(provider(fake.base_url, client, key=None, type="ollama"))
    assert "authorization" not in fake.requests[0].headers
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "Hello world"


async def test_name_is_the_provider_type(fake, client):
    assert provider(fake.base_url, client, type="groq").name == "groq"


async def test_connection_is_reused_across_calls(fake, client):
    p = provider(fake.base_url, client)
    for _ in range(5):
        await collect(p)
    assert len(fake.requests) == 5
    assert fake.connections == 1


async def test_usage_variants_and_ignored_noise(fake, client):
    events = [
        '{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}',
        '{"choices":[{"index":0,"delta":{"content":null},"finish_reason":null}]}',
        '{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
        '{"choices":[{"index":1,"delta":{"content":"other choice"},"finish_reason":null}]}',
        '{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],'
        ' "x_groq":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}',
        # DeepSeek's cache field; the last usage seen wins; a missing total is the sum.
        '{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,'
        '"prompt_cache_hit_tokens":6}}',
    ]
    fake.default = Script(raw_events=events)
    items = await collect(provider(fake.base_url, client))
    assert items == [
        TextDelta("a"),
        TextDelta("b"),
        Usage(input=10, output=4, cache_read=6, total=14),
    ]


async def test_sse_comments_and_missing_usage_are_fine(fake, client):
    fake.default = Script(usage=None, raw_events=[
        '{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}',
    ])
    assert await collect(provider(fake.base_url, client)) == [TextDelta("ok")]


# -- HTTP and transport errors -----------------------------------------------------------


async def test_http_500_shows_status_and_phrase_and_logs_the_body_without_the_key(
        fake, client, caplog):
    # The fake echoes the Authorization header back, as a careless proxy might.
    fake.default = Script(
        status=500,
        error_body=lambda req: f"upstream broke; you sent {req.headers['authorization']}",
    )
    err = await failure(provider(fake.base_url, client))
    assert err.message == "provider openai: HTTP 500 (the provider failed)"
    assert err.status == 500
    # The remote body is for the operator's log only, scrubbed.
    logged = caplog.text
    assert "upstream broke" in logged and "[redacted]" in logged and KEY not in logged


async def test_logged_error_body_is_excerpted_and_scrubbed_before_cutting(fake, client, caplog):
    # The key straddles the excerpt limit: cutting first would leave a prefix of it behind.
    body = "x" * 290 + KEY + "y" * 5000
    fake.default = Script(status=502, error_body=body)
    err = await failure(provider(fake.base_url, client))
    assert "HTTP 502" in err.message and "xxx" not in err.message
    assert KEY[:8] not in caplog.text
    assert len(caplog.text) < 1000


async def test_http_401_is_a_fixed_phrase_never_the_remote_text(fake, client):
    fake.default = Script(
        status=401,
        error_body=json.dumps({"error": {"message": "Incorrect API key provided", "code": "x"}}),
    )
    err = await failure(provider(fake.base_url, client))
    assert err.message.endswith("HTTP 401 (the provider refused the API key)")
    assert "Incorrect" not in err.message


async def test_connection_refused(client):
    url = f"http://127.0.0.1:{free_port()}/v1"
    err = await failure(provider(url, client))
    assert "refused the connection" in err.message
    assert url not in err.message   # errors reach clients (readers of a session too): no URL


async def test_tls_to_a_plain_http_server_fails_clearly(fake, client):
    err = await failure(provider(fake.base_url.replace("http://", "https://"), client))
    assert "TLS" in err.message


async def test_key_in_the_base_url_is_scrubbed(client):
    await failure(provider(f"http://user:{KEY}@127.0.0.1:{free_port()}/v1", client))
    # A query in a base URL is refused outright (paths are appended to it), key unshown.
    with pytest.raises(ProviderError) as refused:
        provider(f"http://127.0.0.1:{free_port()}/v1?token={KEY}", client)
    assert "query" in refused.value.message and KEY not in refused.value.message


async def test_a_server_that_ignores_stream_true_is_a_clear_error(fake, client):
    fake.default = Script(json_body='{"choices":[{"message":{"content":"whole reply"}}]}')
    err = await failure(provider(fake.base_url, client))
    assert "answered with something other than an event stream" in err.message
    assert "whole reply" not in err.message


# -- broken streams ----------------------------------------------------------------------


async def test_dropped_mid_stream_is_an_error_after_the_deltas_already_sent(fake, client):
    fake.default = Script(chunks=["one ", "two ", "three"], drop_after=2)
    got = []
    with pytest.raises(ProviderError) as info:
        async for item in provider(fake.base_url, client).stream("m", MESSAGES):
            got.append(item)
    assert got == [TextDelta("one "), TextDelta("two ")]
    assert "the connection broke mid-stream (the reply was cut off)" in info.value.message


async def test_clean_eof_without_done_or_finish_reason_is_an_error(fake, client):
    fake.default = Script(finish_reason=None, done=False)
    err = await failure(provider(fake.base_url, client))
    assert "stream ended without [DONE]" in err.message


async def test_eof_without_done_after_a_finish_reason_is_accepted(fake, client):
    # Decision (see openai_compat): the model said it finished, so the reply is whole.
    fake.default = Script(done=False)
    items = await collect(provider(fake.base_url, client))
    assert items[:2] == [TextDelta("Hello"), TextDelta(" world")]
    assert isinstance(items[-1], Usage)


async def test_malformed_json_chunk(fake, client):
    fake.default = Script(raw_events=['{"choices":[{"delta":{"content":"ok"}}]}', "{not json"])
    err = await failure(provider(fake.base_url, client))
    assert "malformed JSON" in err.message and "{not json" not in err.message


async def test_error_object_in_the_stream(fake, client):
    fake.default = Script(raw_events=['{"error":{"message":"Rate limit reached","code":429}}'])
    err = await failure(provider(fake.base_url, client))
    assert err.message.endswith("HTTP 429 (rate limited by the provider)")
    assert err.status == 429 and "Rate limit reached" not in err.message


# -- timeouts and cancellation -----------------------------------------------------------


async def test_first_token_timeout(fake, client):
    fake.default = Script(first_delay=30)
    started = time.monotonic()
    err = await failure(provider(fake.base_url, client, first_token_timeout=0.2))
    assert "no first token within 0.2 s" in err.message
    assert time.monotonic() - started < 2
    await fake.wait_for_disconnect(timeout=2)


async def test_first_token_timeout_covers_a_server_that_never_answers(fake, client):
    fake.default = Script(hang=True)  # not even the response headers
    err = await failure(provider(fake.base_url, client, first_token_timeout=0.2))
    assert "no first token within 0.2 s" in err.message
    await fake.wait_for_disconnect(timeout=2)


async def test_idle_timeout_between_chunks(fake, client):
    fake.default = Script(chunks=["a", "b"], chunk_delay=30)
    got = []
    with pytest.raises(ProviderError) as info:
        async for item in provider(fake.base_url, client, idle_timeout=0.2).stream("m", MESSAGES):
            got.append(item)
    assert got == [TextDelta("a")]
    assert "no data for 0.2 s" in info.value.message
    await fake.wait_for_disconnect(timeout=2)


async def test_slow_but_steady_stream_is_not_an_idle_timeout(fake, client):
    fake.default = Script(chunks=["a", "b", "c"], first_delay=0.1, chunk_delay=0.1)
    p = provider(fake.base_url, client, first_token_timeout=0.5, idle_timeout=0.5)
    assert [i.text for i in await collect(p) if isinstance(i, TextDelta)] == ["a", "b", "c"]


@pytest.mark.parametrize("script", [Script(first_delay=30), Script(hang=True)])
async def test_cancel_while_waiting_for_the_first_token_aborts_the_request(fake, client, script):
    fake.default = script
    # No timer of ours can end the request within this test (60 s): only the cancel can.
    task = asyncio.create_task(collect(provider(fake.base_url, client, first_token_timeout=60)))
    await fake.wait_for_requests(1)   # the request is out: the provider waits for its first token
    assert len(client._transport._pool.connections) == 1
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    took = time.monotonic() - started
    # The abort is done when the cancel is: the connection is closed (gone from the pool), not
    # left open for a timeout, and the fake sees it go.
    assert client._transport._pool.connections == []
    await fake.wait_for_disconnect(timeout=10)
    # The cancel takes under a millisecond of CPU (and the fake sees the close 10-25 ms later at
    # load 15); the bound separates it from our 60 s timer, not the test process's turn at the
    # CPU under -n 4 (a 1 s bound on the fake's view failed there now and then).
    assert took < 5


async def test_cancel_mid_stream_aborts_the_request(fake, client):
    fake.default = Script(chunks=["a", "b"], chunk_delay=30)
    first = asyncio.Event()

    async def consume():
        async for _ in provider(fake.base_url, client).stream("m", MESSAGES):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_for_disconnect(timeout=2)
    # The pool is still usable after an aborted stream.
    fake.default = Script()
    assert TextDelta("Hello") in await collect(provider(fake.base_url, client))
