"""`--allowed-origins` (docs/operations.md "Security"): a web page from an origin the operator
did not allow gets 403 on the WebSocket upgrade and on POST /api/message; an allowed origin and
requests with no Origin (scripts, the CLI) work. Unset, the setting is the Seed desktop's own
origins on a loopback listen address (a page the user merely visits cannot drive the server),
and `*` on any other (the Seed web app calls a hosted server from its own origin;
tests/e2e/test_browser.py drives a real browser both ways)."""
from __future__ import annotations

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.server.config import ConfigError, load_config

from tests.conftest import make_config, running_server
from tests.httpraw import base_url
from tests.wsraw import V2, keypair

APP = "https://app.example"


@pytest.fixture
async def strict(tmp_path):
    async with running_server(make_config(tmp_path, allowed_origins=f"{APP},http://localhost:5173")) as running:
        yield running


async def open_with(url: str, origin: str | None):
    return await connect(url, subprotocols=[V2], origin=origin, proxy=None, open_timeout=5)


async def post_with(server, origin: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/cbor"}
    if origin is not None:
        headers["Origin"] = origin
    body = sign_envelope(keypair("origins"), {"_": "ListAgents"})
    async with httpx.AsyncClient() as http:
        return await http.post(base_url(server) + "/api/message", content=body, headers=headers)


async def test_a_page_from_another_origin_gets_403_on_the_upgrade(strict):
    with pytest.raises(InvalidStatus) as refused:
        await open_with(strict.url, "https://evil.example")
    response = refused.value.response
    assert response.status_code == 403
    assert b"--allowed-origins" in response.body
    # With a list set, CORS names the matched origin; a refused one is named by none.
    assert "Access-Control-Allow-Origin" not in response.headers
    assert response.headers["Vary"] == "Origin"


@pytest.mark.parametrize("origin", [APP, APP + "/", "HTTP://LOCALHOST:5173", None])
async def test_allowed_origins_and_requests_without_one_get_a_socket(strict, origin):
    ws = await open_with(strict.url, origin)
    await ws.close()


async def test_a_page_from_another_origin_gets_403_on_post(strict):
    r = await post_with(strict, "https://evil.example")
    assert r.status_code == 403
    assert "access-control-allow-origin" not in r.headers and r.headers["vary"] == "Origin"
    answer = dagcbor.decode(r.content)
    assert answer["_"] == "Error" and answer["status"] == 403 and "--allowed-origins" in answer["message"]
    for origin in (APP, None):
        r = await post_with(strict, origin)
        assert r.status_code == 200 and dagcbor.decode(r.content)["_"] == "ListAgentsResponse"
        # A request from no page is told `*` (only browsers read the header).
        assert r.headers.get("access-control-allow-origin") == (APP if origin else "*")


DESKTOP = ["http://localhost:17654", "http://localhost:17664", "http://localhost:5173", "file://"]


async def test_by_default_a_loopback_server_lets_in_only_the_desktops_origins(server):
    assert server.app.config.allowed_origins == ""   # the default: by listen address
    for origin in ("https://evil.example", "http://127.0.0.1:17654", "http://localhost:3051", "null"):
        with pytest.raises(InvalidStatus) as refused:
            await open_with(server.url, origin)
        assert refused.value.response.status_code == 403
        r = await post_with(server, origin)
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    async with httpx.AsyncClient() as http:
        r = await http.options(base_url(server) + "/api/message",
                               headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert r.status_code == 204 and "access-control-allow-origin" not in r.headers
    for origin in [*DESKTOP, None]:
        ws = await open_with(server.url, origin)
        await ws.close()
        r = await post_with(server, origin)
        assert r.status_code == 200 and dagcbor.decode(r.content)["_"] == "ListAgentsResponse"
        assert r.headers["access-control-allow-origin"] == (origin or "*")


def test_by_default_a_server_listening_beyond_loopback_lets_any_origin_in():
    from seed_agents.server.transport.origins import policy

    for host in ("0.0.0.0", "::", "192.168.1.5", "agents.example"):
        assert policy("", host).any and policy("", host).cors("https://app.example") == "*"
    for host in ("127.0.0.1", "localhost", "::1", "[::1]"):
        assert not policy("", host).any and policy("", host).allows("http://localhost:17660")
    assert policy("*", "127.0.0.1").any   # the operator's `*` wins on loopback too


@pytest.mark.parametrize("value", ["https://app.example/path", "app.example", " , "])
def test_a_value_that_is_not_an_origin_is_refused_at_start(value):
    with pytest.raises(ConfigError, match="SEED_AGENTS_ALLOWED_ORIGINS"):
        load_config(None, {"SEED_AGENTS_ALLOWED_ORIGINS": value})


async def test_with_a_list_the_preflight_names_the_matched_origin_never_a_star(strict):
    async with httpx.AsyncClient() as http:
        for origin, named in ((APP, APP), ("HTTP://LOCALHOST:5173/", "http://localhost:5173"),
                              ("https://evil.example", None)):
            r = await http.options(base_url(strict) + "/api/message",
                                   headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
            assert r.status_code == 204 and r.headers.get("access-control-allow-origin") == named
            assert r.headers["vary"] == "Origin"
        r = await http.get(base_url(strict) + "/api/health", headers={"Origin": APP})
        assert r.headers["access-control-allow-origin"] == APP
