"""Triggers: agent work started by a schedule, a webhook call, Seed activity or a run's end.

May import: protocol, server.store, server.database, server.runtime, server.tools,
server.hypermedia (the activity feed), server.providers, server.clock, server.ratelimit,
server.http_routes (the webhook endpoint).
"""
