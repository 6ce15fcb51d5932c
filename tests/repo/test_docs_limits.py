"""docs/operations.md "Limits" and "Security" match the code: every numeric setting is a row of
the Limits table with its flag, variable and default; every row that names a constant or a
Config/Limits attribute shows its value; every `MAX_*` bound of protocol/api/actions.py is listed;
and every test the Security table cites exists."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from seed_agents.protocol.api import actions
from seed_agents.server import config

ROOT = Path(__file__).resolve().parents[2]
NUMERIC = (config.count, config.rate, config.seconds)
# Rows whose bound lives in code that names no constant (the websockets options in
# server/transport/listener.py, derived from another setting or fixed).
UNNAMED = {"WebSocket message size", "incoming messages buffered per socket"}


def section(name: str) -> str:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    m = re.search(rf"^## {name}\n(.*?)(?=^## )", doc, re.S | re.M)
    assert m, f"docs/operations.md has no '## {name}' section"
    return m.group(1)


def tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of `text`, as rows of cells (header and rule left out)."""
    out, rows = [], None
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if rows is None:
                rows = []          # the header
            elif not set(line) <= set("|-: "):
                rows.append(cells)
        elif rows is not None:
            out.append(rows)
            rows = None
    return out


def numbers(cell: str) -> list[float]:
    return [float(n.replace("_", "")) for n in re.findall(r"(?<![\w.^])\d[\d_]*(?:\.\d+)?", cell)]


def resolve(ref: str):
    """`module.attr` or `module.Class.attr` (a dataclass default) to its value. The docs name code
    as the repository shows it (`server.x`), which installs as `seed_agents.server.x`."""
    parts = ["seed_agents", *ref.split(".")]
    for cut in range(len(parts) - 1, 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
            if isinstance(obj, type):
                obj = obj()   # Config / Limits: their defaults
        return obj
    raise LookupError(ref)


def documented_default(flag: str) -> float:
    """The default the Limits table gives `flag`, e.g. "--mcp-timeout": what a test that runs on a
    shorter bound checks the production bound against."""
    rows = [r for r in limits_rows() if r[1] == f"`{flag}`"]
    assert rows, f"{flag} is not in the Limits table of docs/operations.md"
    return numbers(rows[0][3])[0]


def limits_rows() -> list[list[str]]:
    first = tables(section("Limits"))[0]
    assert all(len(r) == 5 for r in first), [r for r in first if len(r) != 5]
    return first


def test_every_numeric_setting_is_a_limits_row_with_its_default():
    rows = limits_rows()
    for s in config.SETTINGS:
        if s.read not in NUMERIC:
            continue
        matching = [r for r in rows if r[1] == f"`{s.flag}`"]
        assert matching, f"{s.flag} is not in the Limits table of docs/operations.md"
        env = f"`{config.ENV_PREFIX}{s.env}`"
        assert any(r[2] == env for r in matching), (s.flag, env)
        for row in matching:
            assert row[2] in (env, "(same)"), (s.flag, row[2])
            obj, name = config._target(config.Config(), s.attr)
            documented = numbers(row[3])[0]
            assert documented == getattr(obj, name), \
                f"Limits says {s.flag} defaults to {row[3]}, the code says {getattr(obj, name)}"


def test_rows_without_a_flag_show_the_value_of_the_code_they_name():
    checked = 0
    for row in limits_rows():
        if row[1].startswith("`--") or row[1].startswith("(4 ×"):
            continue
        if row[0] in UNNAMED:
            continue
        m = re.fullmatch(r"\(none: `([\w.]+)`\)", row[1])
        assert m, f"Limits row {row[0]!r} names neither a flag nor the code that holds its bound"
        assert numbers(row[3])[0] == resolve(m.group(1)), (row[0], row[3], resolve(m.group(1)))
        checked += 1
    assert checked >= 4


def test_answer_and_field_bounds_match_their_constants_and_every_max_is_listed():
    named: set[str] = set()
    for rows in tables(section("Limits"))[1:]:
        for row in rows:
            refs = re.findall(r"`([\w.]+)`", row[-1])
            assert refs, f"row {row[0]!r} names no constant"
            shown = numbers(row[1])
            for ref in refs:
                value = resolve(ref)
                assert value in shown, f"{row[0]!r}: {ref} is {value}, the docs show {row[1]!r}"
                named.add(ref)
    for name in dir(actions):
        if name.startswith("MAX_") and isinstance(getattr(actions, name), int):
            assert f"protocol.api.actions.{name}" in named, f"protocol/api/actions.py {name} is not in the docs' Limits"


def test_the_tests_the_security_table_cites_exist():
    rows = tables(section("Security"))[0]
    assert len(rows) >= 9
    for row in rows:
        for name in re.findall(r"`(test_[\w]+\.py)`", row[-1]):
            assert list((ROOT / "tests").rglob(name)), f"Security cites {name}, which does not exist"
