"""Triggers: agent work started by a schedule, a webhook call, Seed activity or a run's end.
Every part takes its port (`port.TriggerContext`, built by the composition root), never the App.

May import: protocol, server.store, server.database, server.runtime, server.tools,
server.hypermedia (the activity feed), server.providers, server.clock, server.ratelimit,
server.http_routes (the webhook endpoint), server.publisher (the publishing port).
"""
