"""Code and docs cite the wire contract as "CONTRACT section N": docs/contract.md is the
repository's copy of it (../shared/CONTRACT.md, where that folder is beside the clone, must
still equal it), and every section cited is one of its numbered sections."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPY = ROOT / "docs" / "contract.md"
ORIGINAL = ROOT.parent / "shared" / "CONTRACT.md"
CITED = re.compile(r"CONTRACT (?:section|§) ?(\d+)")


def _sources():
    for folder in ("server", "protocol", "clients", "schema", "docs", "bench", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".sql") and path != COPY:
                yield path
    yield ROOT / "README.md"


def test_every_cited_section_is_in_the_contract():
    sections = set(re.findall(r"^## (\d+)\.", COPY.read_text(), re.M))
    assert {"1", "2", "8"} <= sections
    cited = {}
    for path in _sources():
        for number in CITED.findall(path.read_text(errors="replace")):
            cited.setdefault(number, path.relative_to(ROOT))
    assert cited, "no citation found: the pattern no longer matches how the code cites"
    missing = {n: str(p) for n, p in cited.items() if n not in sections}
    assert not missing, f"cited sections that docs/contract.md lacks: {missing}"


@pytest.mark.skipif(not ORIGINAL.is_file(), reason="the contract's shared original is not here (only the "
                                                     "workspace this project is developed in has it); "
                                                     "docs/contract.md is used as is")
def test_the_copy_equals_the_original():
    assert COPY.read_bytes() == ORIGINAL.read_bytes(), "docs/contract.md differs from ../shared/CONTRACT.md"
