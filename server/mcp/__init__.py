"""Remote MCP servers through the official `mcp` SDK: discovery and tool calls over Streamable
HTTP, under the provider network policy, a timeout and byte bounds (network.py, remote.py).

May import: protocol, server.providers, server.store.
"""
