"""Transport: the server's one port and the bytes on it. `listener.py` accepts connections;
`httpconn.py` answers HTTP/1.1 (protocol/wire/framing_http.py decides each answer); an upgrade on
`/agents/ws` becomes a `wsconn.py` WebSocket whose frames `connection.py` reads and writes
through its framing and `outbound.py`'s queue. `peers.py` and `origins.py` bound and admit
clients per address and origin; `memtrim.py` gives memory back after connections end. Nothing
here knows what an action means: it hands verified work to server/verification/.

May import: protocol, server.verification, server.live, server.routes, server.http_routes (the
HTTP route table, filled at start), server.operations, server.ratelimit.
"""
