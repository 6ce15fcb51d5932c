"""The actions a client may sign, typed and bounded (CONTRACT sections 4 and 8): `actions`
(`parse_action`) with one module per family of actions (`actions_*`), `fields` (the bounds
they share), and `history`, the verifiable chain of what they did (docs/protocol.md,
"Verifiable history"). It names the agent model's and the hypermedia codec's values, so it
sits above both.

May import: protocol.wire, protocol.hm, protocol.agent.
"""
