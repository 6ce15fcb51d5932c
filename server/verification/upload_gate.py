"""How many upload-sized frames (protocol/wire/frame_limits.py) the server works on at once.

A socket's upload chunk takes a slot before it is even split from its frame, and holds it until
its answer: the copies a chunk costs on its way to the database (the envelope, the decoded
content, the chunks handed to the driver) then exist for a few chunks at a time server-wide,
while every other uploader holds only the frame it sent (docs/operations.md, "Files"). Re-entrant
within one task, so the WebSocket reader and dispatch can both ask.

A chunk's signature clock is checked against the time its frame arrived (`arrived_ms`), not the
time its turn came: under load a chunk may wait longer than the clock window, and its sender
did nothing wrong.
"""
from __future__ import annotations

import asyncio
import contextvars
from contextlib import asynccontextmanager

UPLOAD_SLOTS = 4

_held: contextvars.ContextVar[bool] = contextvars.ContextVar("upload_slot_held", default=False)
_arrived: contextvars.ContextVar[int | None] = contextvars.ContextVar("upload_arrived_ms", default=None)


def arrived_ms(now_ms: int) -> int:
    """When the frame being handled arrived, if it waited for a slot; else `now_ms`."""
    arrived = _arrived.get()
    return now_ms if arrived is None else arrived


class UploadGate:
    def __init__(self, slots: int = UPLOAD_SLOTS) -> None:
        self._slots = asyncio.Semaphore(slots)

    @asynccontextmanager
    async def slot(self, arrived_ms: int | None = None):
        if _held.get():
            yield
            return
        async with self._slots:
            token, when = _held.set(True), _arrived.set(arrived_ms)
            try:
                yield
            finally:
                _arrived.reset(when)
                _held.reset(token)
