"""Live events: the hub that fans each appended event out to the sockets subscribed to its key
(`hub.py`, `frames.py`: each framing's frame built once), a socket's subscription with replay
from `afterSeq` and no gap (`subscriptions.py`), access changes reaching live subscribers at
once (`grants.py`), and several servers on one PostgreSQL database carried into each other's hub
(`cluster.py`).

May import: protocol, server.handlers (the access roles), server.store, server.storage.
"""
