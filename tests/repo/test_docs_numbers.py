"""The docs say what the code does: the version and schema numbers docs/operations.md gives come
from the code, the "Where a change lands" table of docs/architecture.md names files that exist
and keeps to its counts, and no doc cites an issue number a reader of the repository can't follow."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import seed_agents.schema.postgres as pg_schema
import seed_agents.server.transport.httpconn as httpconn_module
from seed_agents import schema
from seed_agents.server.operations.version import VERSION

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_version_is_the_packages():
    assert VERSION == metadata.version("seed-agents")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'^version = "{re.escape(VERSION)}"$', pyproject, re.M)
    httpconn = Path(httpconn_module.__file__).read_text()
    assert not re.search(r'^VERSION = "', httpconn, re.M), "the version is written in one place"


def test_operations_gives_this_builds_schema_versions():
    doc = (DOCS / "operations.md").read_text()
    assert f'"schemaVersion": {schema.CURRENT_VERSION}, "storage": "sqlite"' in doc
    assert f"`PRAGMA user_version`, {schema.CURRENT_VERSION} in this" in doc
    assert f"PostgreSQL's own sequence, {pg_schema.CURRENT_VERSION} in this build" in doc
    assert f"`schema.CURRENT_VERSION` ({schema.CURRENT_VERSION})" in doc


def _where_a_change_lands() -> dict[str, list[str]]:
    doc = (DOCS / "architecture.md").read_text()
    section = doc.split("## Where a change lands", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| a") and len(cells) == 2:
            rows[cells[0]] = re.findall(r"`([\w/<>.-]+\.py|[\w/<>.-]+/)`", cells[1])
    return rows


def test_the_change_table_names_real_files_and_keeps_its_counts():
    rows = _where_a_change_lands()
    assert set(rows) == {"an action", "a provider", "a storage backend", "a scheduling strategy", "a framing",
                         "an HTTP route", "a tool", "an address form", "a cluster message kind"}
    for kind, paths in rows.items():
        for path in paths:
            concrete = path.replace("<area>", "identities").replace("<backend>", "postgres") \
                .replace("<family>", "anthropic").replace("<name>", "v2") \
                .replace("<strategy>", "leased").replace("<folder>/<module>", "triggers/webhook") \
                .replace("<group>", "session_tools")
            assert (ROOT / concrete).exists(), f"{kind}: {path} ({concrete}) does not exist"
    code = lambda kind: [p for p in rows[kind] if not p.startswith("tests/")]   # noqa: E731
    assert len(code("an action")) <= 4, rows["an action"]
    assert len(code("a provider")) <= 3, rows["a provider"]
    assert len(code("a scheduling strategy")) <= 3, rows["a scheduling strategy"]
    assert len(code("an HTTP route")) <= 2, rows["an HTTP route"]


def test_no_doc_cites_an_issue_number():
    found = []
    for path in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\b[Ii]ssues? \d+\b", line):
                found.append(f"{path.name}:{n}")
    assert found == []


def test_contract_sections_cited_are_the_ones_meant():
    """CONTRACT's sections: 2 the envelope, 3 transport, 4 actions, 5 subscriptions and events,
    6 limits, 7 running it (storage), 8 the rest. A citation past 8 names nothing."""
    for path in sorted(DOCS.glob("*.md")):
        for m in re.finditer(r"CONTRACT (?:section |§)(\d+)", path.read_text()):
            assert 1 <= int(m.group(1)) <= 8, f"{path.name}: {m.group(0)}"
