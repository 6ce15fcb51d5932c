"""Verification: the pipeline every action passes before its handler (CONTRACT section 2),
the same for every framing: signature, clock window, capability, rate, then the route's handler
(`dispatch.py`); each signature accepted once (`replay_guard.py`); how many upload-sized frames
are verified at once (`upload_gate.py`).

May import: protocol, server.routes, server.store, server.operations.
"""
