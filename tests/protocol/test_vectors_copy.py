"""tests/vectors/ is the repository's own copy of the reference vectors, so a clone stands alone.
Where the original folder (../shared/vectors beside the repository) exists, the copy must still
equal it file for file; in a lone clone that one check is skipped, visibly."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.vectors import VECTORS_DIR

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT.parent / "shared" / "vectors"


def test_the_vectors_live_in_the_repository():
    names = {p.name for p in VECTORS_DIR.iterdir()}
    assert {"README.md", "principals.json", "dag-cbor.json", "envelopes.json",
            "capabilities.json"} <= names
    assert VECTORS_DIR.resolve().is_relative_to(ROOT)


@pytest.mark.skipif(not ORIGINAL.is_dir(), reason="the vectors' shared original is not here (only the "
                                                   "workspace this project is developed in has it); "
                                                   "the copy in tests/vectors/ is used as is")
def test_the_copy_equals_the_original():
    original = {p.name: p.read_bytes() for p in ORIGINAL.iterdir() if p.is_file()}
    copy = {p.name: p.read_bytes() for p in VECTORS_DIR.iterdir() if p.is_file()}
    assert sorted(copy) == sorted(original)
    for name in original:
        assert copy[name] == original[name], f"tests/vectors/{name} differs from {ORIGINAL / name}"
