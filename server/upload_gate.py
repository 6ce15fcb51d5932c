"""How many upload-sized frames (protocol/frame_limits.py) the server works on at once.

A socket's upload chunk takes a slot before it is even split from its frame, and holds it until
its answer: the copies a chunk costs on its way to the database (the envelope, the decoded
content, the chunks handed to the driver) then exist for a few chunks at a time server-wide,
while every other uploader holds only the frame it sent (docs/operations.md, "Files"). Re-entrant
within one task, so the WebSocket reader and dispatch can both ask.
"""
from __future__ import annotations

import asyncio
import contextvars
from contextlib import asynccontextmanager

UPLOAD_SLOTS = 4

_held: contextvars.ContextVar[bool] = contextvars.ContextVar("upload_slot_held", default=False)


class UploadGate:
    def __init__(self, slots: int = UPLOAD_SLOTS) -> None:
        self._slots = asyncio.Semaphore(slots)

    @asynccontextmanager
    async def slot(self):
        if _held.get():
            yield
            return
        async with self._slots:
            token = _held.set(True)
            try:
                yield
            finally:
                _held.reset(token)
