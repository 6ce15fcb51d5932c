"""Reading one action's fields: the bounds every action shares, `Fields` (a refusal names
`Action.field`), and `ActionKind` (its parser and whether it is a read).

The core actions (protocol/api/actions.py) and each area's actions (protocol/actions_*.py) are
written with these, so an area adds its actions in a module of its own.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..agent import providers
from ..wire.errors import ProtocolError, quote

# Bounds. They keep one request's cost (storage, model context, memory) proportionate; a client
# that crosses one gets a 400 naming the field and the limit.
MAX_NAME = 200  # names of secrets, providers, agents, models
MAX_ID = 200  # agent/session/run ids, clientRequestId, clientMessageId
MAX_TITLE = 1_000
MAX_SYSTEM_PROMPT = 100_000  # characters of text, or of the Markdown a block tree makes
# Bytes of an AgentDefinition as DAG-CBOR: every AgentInfo carries it (ListAgents, GetAgent,
# agent events), so it bounds those answers; a 100,000-character prompt (as text or as the
# desktop's block tree) fits with room to spare.
MAX_DEFINITION_BYTES = 256 * 1024
# Items (values, keys, arrays, maps) of a definition: what decoding one costs (time and memory:
# 256 KiB of empty maps would be 19 MB of Python objects) is per item. A prompt of hundreds of
# blocks fits.
MAX_DEFINITION_ITEMS = 8 * 1024
MAX_MESSAGE_TEXT = 200_000  # all text parts of one message, joined
MAX_CONTENT_PARTS = 256
MAX_CONTEXT_LINES = 10_000  # all context lines of one message
MAX_CONTEXT_LINE = 10_000  # characters in one context line
MAX_SECRET_VALUE = 64 * 1024  # bytes
MAX_CAPABILITY = 64 * 1024  # bytes of a capability blob
MAX_URL = 2_000
MIN_LIMIT, MAX_LIMIT = 1, 10_000
MAX_AGENTS_PAGE = 1_000  # ListAgents.limit: its default and cap (the answer is also bounded in bytes)
# Every integer a client sends is a JavaScript number on the Seed side, and seqs and Unix ms end
# up in SQLite (signed 64-bit): past 2^53 - 1 a JS client cannot even write the value exactly,
# and past 2^63 - 1 SQLite cannot store it. So integer fields are 0..2^53 - 1 unless a field
# says narrower (docs/protocol.md, "Integers"); anything else is a 400 at parse time.
MAX_SAFE_INTEGER = 2**53 - 1

PROVIDER_TYPES = providers.PROVIDER_TYPES   # the provider table (protocol/agent/providers.py)


class Fields:
    """Reads one action's fields, naming `Action.field` in every refusal."""

    __slots__ = ("action", "name")

    def __init__(self, action: dict, name: str) -> None:
        self.action = action
        self.name = name

    def fail(self, field: str, problem: str) -> ProtocolError:
        return ProtocolError(400, f"{self.name}.{field} {problem}")

    def get(self, field: str, required: bool) -> object:
        value = self.action.get(field)
        if value is None and required:
            raise self.fail(field, "is required")
        return value

    def text(self, field: str, limit: int, *, required: bool = True,
             allow_empty: bool = False) -> str | None:
        value = self.get(field, required)
        if value is None:
            return None
        return check_text(value, limit, allow_empty, lambda p: self.fail(field, p))

    def integer(self, field: str, lo: int, hi: int | None, *, required: bool = False) -> int | None:
        """An integer in lo..hi; `hi=None` means the largest safe integer (2^53 - 1)."""
        value = self.get(field, required)
        if value is None:
            return None
        return check_integer(value, lo, MAX_SAFE_INTEGER if hi is None else hi,
                             lambda p: self.fail(field, p))

    def mapping(self, field: str, *, required: bool = True) -> dict | None:
        value = self.get(field, required)
        if value is None:
            return None
        if type(value) is not dict:
            raise self.fail(field, f"must be a map, got {kind_of(value)}")
        return value


def check_integer(value: object, lo: int, hi: int, fail) -> int:  # noqa: ANN001
    """`value` if it is an integer in lo..hi, else `fail(problem)` is raised. Shared with readers
    of integers packed inside other fields (the ListSessions cursor), so every integer a client
    can send meets the same range check before it reaches SQLite."""
    if type(value) is not int:
        raise fail(f"must be an integer, got {kind_of(value)}")
    if not lo <= value <= hi:
        raise fail(f"must be an integer between {lo} and {hi}, got {quote(value)}")
    return value


def check_text(value: object, limit: int, allow_empty: bool, fail) -> str:  # noqa: ANN001
    if type(value) is not str:
        raise fail(f"must be text, got {kind_of(value)}")
    if len(value) > limit:
        raise fail(f"must be text of at most {limit} characters, got {len(value)}")
    if not allow_empty and not value.strip():
        raise fail("must not be empty")
    if "\x00" in value:
        # PostgreSQL text cannot hold it, and no client means it: refused here, on both stores,
        # rather than stored by one and failing every later use on the other.
        raise fail("must not contain the NUL character (U+0000)")
    return value


def kind_of(v: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "text",
            bytes: "a byte string", list: "an array", dict: "a map",
            type(None): "null"}.get(type(v), type(v).__name__)


def id_action(cls: type, field: str):  # noqa: ANN202
    return lambda f, ts: cls(ts, f.text(field, MAX_ID))

def no_fields(cls: type):  # noqa: ANN202
    return lambda f, ts: cls(ts)

@dataclass(frozen=True, slots=True)
class ActionKind:
    """What the contract says of one action name: how its fields are read, and whether it is a
    read. A read may be repeated on the connection that first sent it (CONTRACT section 2, step
    6), so `read` is said here for each action, never derived from its name."""

    parse: Callable[[Fields, int], object]
    read: bool


def read(parse) -> ActionKind:  # noqa: ANN001
    return ActionKind(parse, read=True)


def write(parse) -> ActionKind:  # noqa: ANN001
    return ActionKind(parse, read=False)


_Fields = Fields  # the core actions' spelling
