"""tests/ mirrors the code (docs/architecture.md, "Tests"): every test file sits in the folder of
what it tests, never flat in tests/, whose root holds only the helpers the folders share
(conftest.py, procs.py, wsraw.py, fakes/, vectors/, ...). A test file in the wrong place is not
lost (pytest finds it anywhere), but a red test should name the part of the code that broke."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# The folders a test file may sit in: the code's top-level folders and server/'s layers, plus
# the suites that cut across them. A new server/ layer gets its folder here.
FOLDERS = {"protocol", "clients", "schema", "e2e", "hostile", "cluster", "repo", "server"} | {
    f"server/{p.name}" for p in (TESTS.parent / "server").iterdir() if (p / "__init__.py").is_file()}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "desktop_client" not in p.parts)


def test_no_test_file_sits_flat_in_tests():
    flat = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert flat == [], f"move these into the folder of what they test (docs/architecture.md, 'Tests'): {flat}"


def test_every_test_file_sits_in_a_folder_of_the_scheme():
    for path in _test_files():
        folder = path.parent.relative_to(TESTS).as_posix()
        assert folder in FOLDERS, f"{path.relative_to(TESTS)}: {folder}/ is not one of tests/'s folders"


def test_test_file_names_are_unique_across_folders():
    # pytest imports each test file by its bare name (no __init__.py in the folders, so the
    # shared helpers stay `tests.procs` and the like): two files of one name would collide.
    seen: dict[str, Path] = {}
    for path in _test_files():
        assert path.name not in seen, f"{path} and {seen[path.name]} share a name"
        seen[path.name] = path


def test_the_folders_hold_the_suite():
    # The guard above judges what is there: were the suite not found, it would pass on nothing.
    assert len(_test_files()) > 150
    assert {p.parent.relative_to(TESTS).as_posix() for p in _test_files()} >= {
        "protocol", "clients", "e2e", "hostile", "cluster", "server/runtime", "server/store"}
