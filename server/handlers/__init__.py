"""Action handlers: each takes its port (`context.HandlerContext`: storage, clock, broadcaster,
run control, access changes, trigger administration, config), a verified envelope and its
parsed action, and returns the response value. None of them knows which framing carried the request; server/routes.py
says which handler answers which action.

May import: protocol, server.store, server.runtime, server.tools, server.triggers, server.mcp,
server.hypermedia, server.providers, server.clock, server.cache, server.publisher (the
publishing port), server.database (the storage port's type).
"""
