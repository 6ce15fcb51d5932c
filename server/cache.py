"""A least-recently-used cache bounded in bytes: every in-memory cache of the server is one
(system prompts, owners, the runtime's session histories), so none can grow past its budget
whatever clients store. Sizes are what the caller says an entry costs (its text's bytes plus a
fixed overhead), and each cache reports its bytes and entries as metrics."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

ENTRY_OVERHEAD = 120   # bytes a dict slot, the key object and a small value cost in CPython, about


def text_bytes(value: str) -> int:
    """What a str holds, about: one byte a character for ASCII, up to four otherwise."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


class ByteBudgetCache:
    """key -> value, least recently used first; `put` evicts until the sizes fit `budget`. An
    entry larger than the whole budget is not kept (the caller still has its value)."""

    __slots__ = ("name", "budget", "_items", "bytes")

    def __init__(self, name: str, budget: int) -> None:
        self.name = name
        self.budget = budget
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items

    def get(self, key: Any, default: Any = None) -> Any:
        item = self._items.get(key)
        if item is None:
            return default
        self._items.move_to_end(key)
        return item[0]

    def pop(self, key: Any, default: Any = None) -> Any:
        item = self._items.pop(key, None)
        if item is None:
            return default
        self.bytes -= item[1]
        return item[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        self.pop(key)
        size += ENTRY_OVERHEAD
        if size > self.budget:
            return
        while self._items and self.bytes + size > self.budget:
            _key, (_value, old) = self._items.popitem(last=False)
            self.bytes -= old
        self._items[key] = (value, size)
        self.bytes += size

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0
