"""The store's SQL, written once in SQLite's dialect, rewritten for PostgreSQL.

`seed_agents.server.store` is one set of query functions for both drivers. Its SQL uses the common ground of
the two databases (`ON CONFLICT`, `RETURNING`, row values, `coalesce`, `CASE`), and only these
spellings differ; `to_postgres` rewrites them, once per distinct statement (cached):

- placeholders: `?` becomes PostgreSQL's own `$1`, `$2`, ... in order, and a numbered `?N`
  becomes `$N` (one parameter however often it appears, so PostgreSQL types it once; the
  server binds them: psycopg's `RawCursor`, which leaves `%` alone);
- the two-argument scalar `max(a, b)` / `min(a, b)` becomes `GREATEST` / `LEAST` (the one-
  argument aggregates are left alone);
- `rowid` (SQLite's insertion order, the run queue's tie-break) becomes `pos`, the identity
  column PostgreSQL's `runs` table has for it;
- an `INDEXED BY name` hint (SQLite's planner needs it where PostgreSQL's does not) is dropped,
  and so is the unary `+` before a column (`AND +account_id = ?`, SQLite's way of keeping an
  index out of the plan; PostgreSQL has no unary `+` for text);
- `LIMIT -1 OFFSET n` (SQLite's "no limit", which it needs before an OFFSET) becomes `OFFSET n`.

Quoted text ('...', "...") is copied untouched. Pure code: no connection, testable with strings.
"""
from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_INDEXED_BY = re.compile(r"INDEXED\s+BY\s+[A-Za-z_][A-Za-z_0-9]*\s*", re.IGNORECASE)
_NO_LIMIT = re.compile(r"LIMIT\s+-1\s+(?=OFFSET\b)", re.IGNORECASE)


class Statement:
    """A rewritten statement: its PostgreSQL text and how many parameters it binds (`$1` to
    `$count`; a caller's parameters past a numbered statement's highest `?N` are not sent)."""

    __slots__ = ("text", "count")

    def __init__(self, text: str, count: int) -> None:
        self.text = text
        self.count = count

    def params(self, params) -> tuple:
        return tuple(params) if len(params) == self.count else tuple(params[:self.count])


@lru_cache(maxsize=4096)
def to_postgres(sql: str) -> Statement:
    out: list[str] = []
    numbers: set[int] = set()
    plain = 0
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in ("'", '"'):
            end = sql.find(c, i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == c:   # a doubled quote inside
                end = sql.find(c, end + 2)
            end = n - 1 if end == -1 else end
            out.append(sql[i:end + 1])
            i = end + 1
        elif c == "?":
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            if j > i + 1:
                number = int(sql[i + 1:j])
                numbers.add(number)
            else:
                plain += 1
                number = plain
            out.append(f"${number}")
            i = j
        elif c == "+" and i + 1 < n and (sql[i + 1].isalpha() or sql[i + 1] == "_") and _is_prefix(sql, i):
            i += 1   # the hint's `+` goes; the column stays
        elif c.isalpha() or c == "_":
            m = _WORD.match(sql, i)
            word = m.group(0)
            lower = word.lower()
            if lower == "indexed" and _INDEXED_BY.match(sql, i):
                i = _INDEXED_BY.match(sql, i).end()
                continue
            if lower == "limit" and _NO_LIMIT.match(sql, i):
                i = _NO_LIMIT.match(sql, i).end()
                continue
            if lower in ("max", "min") and _is_scalar_call(sql, m.end()):
                out.append("GREATEST" if lower == "max" else "LEAST")
            elif lower == "rowid":
                out.append("pos")
            else:
                out.append(word)
            i = m.end()
        else:
            out.append(c)
            i += 1
    if numbers and plain:
        raise ValueError("a statement mixes ? and ?N placeholders")
    if numbers and numbers != set(range(1, max(numbers) + 1)):
        # PostgreSQL cannot type a parameter the statement never uses.
        raise ValueError("a statement's numbered placeholders skip a number")
    return Statement("".join(out), max(numbers) if numbers else plain)


# Words after which a `+` starts an operand (is unary) rather than adding to one.
_BEFORE_OPERAND = frozenset({"and", "or", "not", "where", "on", "when", "then", "else", "select", "by",
                             "set", "having", "returning", "case"})


def _is_prefix(sql: str, at: int) -> bool:
    """Is the `+` at `at` unary (nothing it could add to before it)?"""
    i = at - 1
    while i >= 0 and sql[i].isspace():
        i -= 1
    if i < 0 or sql[i] in "(,=<>!":
        return True
    if not (sql[i].isalnum() or sql[i] == "_"):
        return False
    j = i
    while j >= 0 and (sql[j].isalnum() or sql[j] == "_"):
        j -= 1
    return sql[j + 1:i + 1].lower() in _BEFORE_OPERAND


def _is_scalar_call(sql: str, at: int) -> bool:
    """Is the word ending at `at` called with two or more arguments (a comma at its top level)?"""
    i, n = at, len(sql)
    while i < n and sql[i].isspace():
        i += 1
    if i >= n or sql[i] != "(":
        return False
    depth = 0
    quote = None
    for j in range(i, n):
        c = sql[j]
        if quote:
            if c == quote:
                quote = None
        elif c in ("'", '"'):
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return False
        elif c == "," and depth == 1:
            return True
    return False
