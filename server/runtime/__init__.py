"""The runtime: runs turns. A queued run becomes a turn (`runner.py`): its history
(`history.py`), the model's stream and the tool loop (`tool_loop.py`), the events it publishes
(through `server/publisher.py`), and runs parked while children or signals are awaited
(`parked.py`). Runs reach the turn through one `RunQueue` (`scheduling.py`): `local_queue.py`
when one process owns the store, `leased_queue.py` when several servers share it (the leases:
`leasing.py`).

May import: protocol, server.store, server.database, server.tools, server.sandbox, server.providers,
server.hypermedia, server.operations, server.config, server.clock, server.cache,
server.publisher.
"""
