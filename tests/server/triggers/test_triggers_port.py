"""The triggers' port (server/triggers/port.py): `Triggers`, the schedule loop, the activity
monitor, `firing.admit`, a headless tool run and the webhook endpoint all work from the one
`TriggerContext` the composition root built, never from the App."""
from __future__ import annotations

import dataclasses

from seed_agents.server.app import App
from seed_agents.server.triggers.port import TriggerContext


def test_the_context_holds_the_ports_fields_and_nothing_else():
    names = {f.name for f in dataclasses.fields(TriggerContext)}
    assert names == {"db", "config", "now_ms", "broadcaster", "runtime", "metrics", "secrets", "clock", "tasks"}
    assert set(TriggerContext.__slots__) == names   # nothing else can be hung on it later


async def test_the_triggers_are_built_from_the_port_not_the_app(server):
    app = server.app
    triggers = app.triggers
    ctx = triggers.ctx
    assert type(ctx) is TriggerContext and not isinstance(ctx, App)
    assert (ctx.db, ctx.broadcaster, ctx.runtime, ctx.metrics, ctx.secrets) == (
        app.db, app.broadcaster, app.runtime, app.metrics, app.secrets)
    assert triggers.scheduler.ctx is ctx and triggers.clock is ctx.clock
    for part in (triggers, triggers.scheduler):
        assert not any(isinstance(v, App) for v in vars(part).values()), part
    for locator in ("hub", "connections", "cluster", "triggers", "context"):
        assert not hasattr(ctx, locator), locator


async def test_the_clock_injected_into_the_app_is_the_triggers_real_clock(server):
    app = server.app
    real = app.now_ms
    try:
        app.now_ms = lambda: 1234
        assert app.triggers.ctx.now_ms() == 1234
    finally:
        app.now_ms = real
    assert app.triggers.ctx.now_ms is real
