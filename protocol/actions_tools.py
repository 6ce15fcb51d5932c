"""Tools, delegation and the run tree: tool documents, InvokeSessionTool, SignalRun, GetRunJournal, MCP servers (CONTRACT section 8).

Each action: its frozen dataclass, its parser (written with protocol.fields) and one line in
`ACTIONS`, which protocol/actions.py merges into the one table the server routes by.
"""
from __future__ import annotations

from .fields import ActionKind

ACTIONS: dict[str, ActionKind] = {
}
