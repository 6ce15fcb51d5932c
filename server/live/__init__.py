"""Live events: the hub that fans each appended event out to the sockets subscribed to its key
(`hub.py`, `frames.py`: each framing's frame built once), a socket's subscription with replay
from `afterSeq` and no gap (`subscriptions.py`), publishing to this server and, through the
cluster relay, to the others (`broadcaster.py`), access changes reaching live subscribers at
once (`grants.py`), and several servers on one PostgreSQL database carried into each other's hub
(`cluster.py`).

May import: protocol, server.store, server.database.
"""
