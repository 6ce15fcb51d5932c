"""The agent model: what an agent is given and how its tools are described. The tool registry
and tool documents, the authored (lambda) tool ABI, the model's preamble, the plan and what a
run owes, the provider table and reasoning levels, and the fields only an agent's owner may
change.

May import: protocol.wire.
"""
