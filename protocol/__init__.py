"""Everything a client signs and the server checks: pure code, no sockets, no disk, no clock.

Modules: errors (ProtocolError), dagcbor (strict DAG-CBOR), principals, keys, envelope (signing
and steps 1-4 of verification), capability, actions (typed actions and bounds), events, v2
(v2 request frames). See docs/architecture.md.
"""
