"""The handlers' port (server/handlers/context.py): what dispatch hands a handler is the one
`HandlerContext` the composition root built, holding the port's fields and nothing else; the
App itself never reaches a handler."""
from __future__ import annotations

import dataclasses

from seed_agents.clients import AgentsClient
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server import routes
from seed_agents.server.app import App
from seed_agents.server.handlers.context import HandlerContext
from seed_agents.server.store import agents as agents_q

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


async def test_a_handler_is_handed_the_context_not_the_app(server, monkeypatch):
    seen = []
    route = routes.ROUTES["ListAgents"]

    async def spy(ctx, env, action):
        seen.append(ctx)
        return await route.handler(ctx, env, action)

    monkeypatch.setitem(routes.ROUTES, "ListAgents", dataclasses.replace(route, handler=spy))
    async with AgentsClient.connect(server.url, Keypair.generate()) as c:
        assert (await c.list_agents())["agents"] == []
    assert len(seen) == 1
    ctx = seen[0]
    assert type(ctx) is HandlerContext and not isinstance(ctx, App)
    assert ctx is server.app.context
    for locator in ("hub", "connections", "cluster", "guard", "metrics", "start"):
        assert not hasattr(ctx, locator), locator
    # Its parts are the ones the root built, once.
    app = server.app
    assert (ctx.db, ctx.broadcaster, ctx.runtime, ctx.grants, ctx.triggers, ctx.heads) == (
        app.db, app.broadcaster, app.runtime, app.grants, app.triggers, app.heads)


def test_the_context_holds_the_ports_fields_and_nothing_else():
    names = {f.name for f in dataclasses.fields(HandlerContext)}
    assert names == {"db", "config", "now_ms", "broadcaster", "runtime", "grants", "triggers", "secrets",
                     "heads", "cache", "publications", "remember_signer", "forget_signer"}
    # Slots and no __dict__: nothing else can be hung on it later (no hub, sockets or cluster).
    assert set(HandlerContext.__slots__) == names


async def test_the_clock_injected_into_the_app_is_the_handlers_clock(server):
    """Tests move the server's clock on the App; the handlers read it through their context."""
    app = server.app
    real = app.now_ms
    moved = real() + 20_000   # inside the clock window (30 s), so the action is still accepted
    try:
        app.now_ms = lambda: moved
        assert app.context.now_ms() == moved
        async with AgentsClient.connect(server.url, Keypair.generate()) as c:
            agent_id = (await c.create_agent(ECHO))["agentId"]
    finally:
        app.now_ms = real
    assert app.context.now_ms is real
    assert app.db.read(agents_q.get_agent, agent_id)["createdAt"] == moved
