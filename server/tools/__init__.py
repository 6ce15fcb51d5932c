"""The tools an agent's model calls during a turn: `surface.py` dispatches a call (checked
against its declaration in protocol/agent/tool_registry.py) to the module of its group.

May import: protocol, server.store, server.mcp, server.hypermedia, server.providers, server.sandbox,
server.operations, server.publisher.

Never the runtime or the triggers that run the tools: what a tool needs of them comes in its
context (the publisher; a parked run is a `Park` it returns) or from the app's `Triggers` it is
handed.
"""
