"""The tools an agent's model calls during a turn: `surface.py` dispatches a call (checked
against its declaration in protocol/tool_registry.py) to the module of its group.

May import: protocol, server.store, server.runtime (parked runs, publishing), server.triggers
(the agent's own triggers), server.mcp, server.hypermedia, server.providers, server.operations.
"""
