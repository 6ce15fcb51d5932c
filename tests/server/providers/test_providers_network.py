"""The provider network policy (issue 12, finding 3): classes, parsing, and enforcement on real
connections to a fake provider on 127.0.0.1 through the guarded client the runtime uses."""

import ipaddress
import logging

import pytest

from seed_agents.server.providers.base import ChatMessage, ProviderError, ProviderSpec, TextDelta
from seed_agents.server.providers.network import NetworkPolicy, address_class, is_loopback_host, provider_client
from seed_agents.server.providers.openai_compat import OpenAICompatProvider

from tests.fakes.openai_server import FakeOpenAI, Script

ip = ipaddress.ip_address


@pytest.mark.parametrize("address, cls", [
    ("8.8.8.8", "public"), ("2606:4700:4700::1111", "public"),
    ("127.0.0.1", "loopback"), ("127.9.9.9", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "loopback"), ("::", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"),
    ("100.64.0.1", "private"), ("fd12:3456::1", "private"), ("::ffff:10.0.0.1", "private"),
    ("64:ff9b::a00:1", "private"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"), ("100.100.100.200", "metadata"),
    ("::ffff:169.254.169.254", "metadata"),
    ("224.0.0.1", "reserved"), ("192.0.2.1", "reserved"),
])
def test_address_classes(address, cls):
    assert address_class(ip(address)) == cls


def test_defaults_follow_the_listen_address():
    local = NetworkPolicy.for_server("", "127.0.0.1")
    exposed = NetworkPolicy.for_server("", "0.0.0.0")
    for host in ("127.0.0.1", "::1", "localhost"):
        assert is_loopback_host(host)
    for host in ("0.0.0.0", "::", "", "192.168.1.5", "example.org"):
        assert not is_loopback_host(host)
    for address in ("8.8.8.8", "127.0.0.1", "10.0.0.1", "fd12::1"):
        assert local.allows(ip(address))
    for address in ("169.254.169.254", "fd00:ec2::254", "169.254.3.3"):
        assert not local.allows(ip(address))
    assert exposed.allows(ip("8.8.8.8"))
    for address in ("127.0.0.1", "::1", "0.0.0.0", "10.0.0.1", "192.168.1.1", "169.254.169.254",
                    "fd00:ec2::254", "fe80::1", "::ffff:127.0.0.1"):
        assert not exposed.allows(ip(address))


def test_explicit_lists():
    policy = NetworkPolicy.for_server("public, 10.0.5.0/24", "0.0.0.0")
    assert policy.allows(ip("10.0.5.7")) and not policy.allows(ip("10.0.6.1"))
    assert policy.allows(ip("::ffff:10.0.5.7"))
    # Metadata needs an explicit CIDR or `any`, whatever classes are listed.
    assert not NetworkPolicy.parse("link-local,private").allows(ip("169.254.169.254"))
    assert NetworkPolicy.parse("169.254.169.254/32").allows(ip("169.254.169.254"))
    assert NetworkPolicy.parse("any").allows(ip("169.254.169.254"))
    with pytest.raises(ValueError, match="'intranet' is neither"):
        NetworkPolicy.parse("public,intranet")
    with pytest.raises(ValueError):
        NetworkPolicy.parse(" , ")


async def _reply(client, base_url):
    spec = ProviderSpec("custom", base_url=base_url)
    p = OpenAICompatProvider(spec, client, first_token_timeout=5, idle_timeout=5)
    items = [i async for i in p.stream("m", [ChatMessage("user", "hi")])]
    return "".join(i.text for i in items if isinstance(i, TextDelta))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_public_policy_refuses_loopback_after_resolution(host):
    async with FakeOpenAI() as fake:
        async with provider_client(NetworkPolicy.parse("public")) as client:
            with pytest.raises(ProviderError) as info:
                await _reply(client, f"http://{host}:{fake.port}/v1")
        assert "outside the networks this server lets providers reach" in info.value.message
        assert fake.connections == 0   # refused before any connection was made


async def test_the_loopback_policy_allows_the_same_server():
    async with FakeOpenAI(Script(chunks=["fine"])) as fake:
        async with provider_client(NetworkPolicy.for_server("", "127.0.0.1")) as client:
            assert await _reply(client, f"http://localhost:{fake.port}/v1") == "fine"
            assert await _reply(client, fake.base_url) == "fine"
        assert fake.connections >= 1


async def test_every_new_connection_of_one_client_is_checked(monkeypatch):
    # DNS rebinding: a name that first resolves to an allowed address and then to a refused one.
    # While the first connection is busy, the same client (one pool) needs a second connection
    # for the same host: it is resolved and checked again, and refused.
    import seed_agents.server.providers.outbound_guard as outbound_guard

    async with FakeOpenAI(Script(chunks=["a", "b"], chunk_delay=0.3)) as fake:
        answers = iter([[ip("127.0.0.1")], [ip("169.254.169.254")]])

        async def resolve(host, port):
            return next(answers)

        monkeypatch.setattr(outbound_guard, "resolve", resolve)
        async with provider_client(NetworkPolicy.parse("loopback")) as client:
            spec = ProviderSpec("custom", base_url=f"http://rebind.test:{fake.port}/v1")
            p = OpenAICompatProvider(spec, client, first_token_timeout=5, idle_timeout=5)
            first = p.stream("m", [ChatMessage("user", "hi")])
            assert await anext(first) == TextDelta("a")   # its connection is in use
            with pytest.raises(ProviderError, match="outside the networks"):
                await _reply(client, f"http://rebind.test:{fake.port}/v1")
            await first.aclose()
        assert fake.connections == 1


async def test_httpx_request_lines_are_quiet_and_redacted(caplog):
    async with FakeOpenAI() as fake:
        async with provider_client(NetworkPolicy.parse("loopback")) as client:
            caplog.set_level(logging.DEBUG)
            assert logging.getLogger("httpx").getEffectiveLevel() >= logging.WARNING
            # Even if an operator turns httpx up, credentials in URLs are redacted.
            logging.getLogger("httpx").setLevel(logging.INFO)
            try:
                await client.get(f"http://user:pw-SEKRIT@127.0.0.1:{fake.port}/v1/models?key=SEKRIT2")
            finally:
                logging.getLogger("httpx").setLevel(logging.WARNING)
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines and all("SEKRIT" not in line for line in lines)
    assert f"http://127.0.0.1:{fake.port}/v1/models" in lines[0]
