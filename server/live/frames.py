"""One event to deliver, as the publishers hand it to the hub. Each framing's WebSocket frame
for it is built at most once, on first use, and shared by every socket of that framing."""
from __future__ import annotations

from seed_agents.protocol.wire.ws_frame import ws_frame


class Outgoing:
    __slots__ = ("key", "seq", "value", "body", "variants", "_frames")

    def __init__(self, key: str, value: dict, *, seq: int = 0, body: bytes | None = None) -> None:
        self.key = key
        self.value = value       # the event map (for append: {_, key, event})
        self.seq = seq           # seq of a durable append, else 0
        self.body = body         # stored DAG-CBOR of the SessionEvent, for appends
        # An AgentInfo change carries the caller's accessRole: role -> the event as that role
        # sees it, for the subscribers that are not the owner (at most two more, built once).
        self.variants: dict[str, "Outgoing"] | None = None
        self._frames: dict[str, bytes] = {}

    def frame(self, framing) -> bytes:
        """The complete WebSocket frame of this event in `framing` (protocol/wire/framing_v1.py, _v2.py)."""
        frame = self._frames.get(framing.name)
        if frame is None:
            frame = self._frames[framing.name] = ws_frame(framing.event(self.value, self.body))
        return frame
