"""The structure drawn from the imports: no import circle in server/ or clients/, and protocol/
imports nothing but the standard library and its declared dependencies. Read from the source
with `ast`, so a circle hidden behind `if TYPE_CHECKING:` counts too; imports inside functions
are the deliberate lazy ones (the `seed-agents` dispatcher, the optional PostgreSQL driver, and
what a process loads only when it first needs it: the app behind `serve`, the MCP SDK, croniter,
the CLI's httpx)."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.imports import PACKAGES, ROOT, imports_of, modules

# protocol/'s third-party imports, each a dependency declared in pyproject.toml.
PROTOCOL_DEPENDENCIES = {"cbor2", "nacl", "multiformats", "yaml",  # yaml: Seed front matter (hm_markdown)
                         "httptools",  # httptools: the HTTP reader's parser (pure: bytes in, callbacks out)
                         "jsonschema",   # jsonschema: tool inputs (pure)
                         "cbrrr",   # cbrrr: stored DAG-CBOR read back (dagcbor.decode_trusted; pure)
                         "orjson",   # orjson: v1's JSON text (framing_v1; pure)
                         "libipld"}   # libipld: a v1 replay page's stored DAG-CBOR (dagcbor; pure)


def _graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, known) for name, path in known.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_circle():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_protocol_imports_only_the_standard_library_and_its_dependencies():
    for name, imports in _graph().items():
        if not name.startswith("protocol"):
            continue
        for imported in imports:
            top = imported.partition(".")[0]
            assert (top == "protocol" or top in sys.stdlib_module_names
                    or top in PROTOCOL_DEPENDENCIES), f"{name} imports {imported}"


def test_clients_import_no_server_code():
    for name, imports in _graph().items():
        if name.startswith("clients"):
            assert not [i for i in imports if i.partition(".")[0] == "server"], name


def _may_import(folder: Path) -> set[str]:
    """The `May import:` paragraph of a folder's docstring: the packages and modules its modules
    may import besides their own folder (parenthesised remarks are words for the reader)."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    assert "May import:" in doc, f"{folder}/__init__.py says nothing of what it may import"
    text = doc.split("May import:", 1)[1].split("\n\n", 1)[0]
    text = re.sub(r"\([^)]*\)", "", text)
    return {name.strip().rstrip(".").strip() for name in text.replace("\n", " ").split(",") if name.strip()}


def _server_folders() -> list[Path]:
    return sorted(p for p in (ROOT / "server").iterdir() if (p / "__init__.py").is_file())


def test_each_server_folder_imports_only_what_its_docstring_allows():
    graph = _graph()
    for folder in _server_folders():
        unit = f"server.{folder.name}"
        allowed = _may_import(folder)
        for name, imports in graph.items():
            if not (name == unit or name.startswith(unit + ".")):
                continue
            for imported in imports:
                if imported.partition(".")[0] not in (*PACKAGES, "schema"):
                    continue
                if imported == unit or imported.startswith(unit + "."):
                    continue
                assert any(imported == a or imported.startswith(a + ".") for a in allowed), (
                    f"{name} imports {imported}, which {folder.name}/__init__.py does not allow "
                    f"(May import: {', '.join(sorted(allowed))})")


def test_the_layer_rule_sees_the_imports_it_judges():
    # The graph names modules as the repository shows them; were the namespaced imports
    # misread, every folder would pass the rule above with nothing to judge.
    graph = _graph()
    assert "server.verification.dispatch" in graph["server.transport.connection"]
    assert "server.database.port" in graph["server.store.runs"] | set().union(
        *(graph[m] for m in graph if m.startswith("server.store.")))
    assert _may_import(ROOT / "server" / "operations") == {"protocol"}


def _unit(module: str) -> str:
    """A server module's unit: its folder under server/ (`server.runtime`), or itself when it
    sits at the root (`server.app`)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_the_server_folders_import_each_other_in_one_direction():
    # No two folders (or root modules) import each other, even through others: the layers read
    # from top to bottom with nothing running back up, whatever the modules inside do.
    units: dict[str, set[str]] = {}
    for name, imports in _graph().items():
        if name.startswith("server."):
            units.setdefault(_unit(name), set()).update(
                _unit(i) for i in imports if i.startswith("server.") and _unit(i) != _unit(name))
    assert "server.runtime" in units["server.triggers"]   # the graph is read at all
    assert _circles(units) == []


def _protocol_folders() -> list[Path]:
    return sorted(p for p in (ROOT / "protocol").iterdir() if (p / "__init__.py").is_file())


def test_protocol_is_four_domains_and_nothing_flat():
    # protocol/ holds its sub-packages and its own __init__ only: a new module goes where its
    # idea lives (wire, hm, agent, api), not beside them.
    assert [p.name for p in _protocol_folders()] == ["agent", "api", "hm", "wire"]
    assert sorted(p.name for p in (ROOT / "protocol").glob("*.py")) == ["__init__.py"]


def test_each_protocol_domain_imports_only_what_its_docstring_allows():
    # The domains are layered: wire at the bottom, hm and agent on it, api on all three. The
    # lazy imports inside functions count too, so no domain reaches up even where it waits.
    known = modules()
    for folder in _protocol_folders():
        unit = f"protocol.{folder.name}"
        allowed = {a for a in _may_import(folder) if a.startswith("protocol.")}
        for path in folder.rglob("*.py"):
            for imported in imports_of(path, known, everywhere=True):
                if not imported.startswith("protocol") or imported == unit or imported.startswith(unit + "."):
                    continue
                assert any(imported == a or imported.startswith(a + ".") for a in allowed), (
                    f"{path.relative_to(ROOT)} imports {imported}, which {folder.name}/__init__.py does "
                    f"not allow (May import: {', '.join(sorted(allowed)) or 'nothing else in protocol/'})")


def test_the_protocol_rule_sees_the_imports_it_judges():
    assert _may_import(ROOT / "protocol" / "wire") == {"nothing else in protocol/"}
    assert _may_import(ROOT / "protocol" / "api") == {"protocol.wire", "protocol.hm", "protocol.agent"}
    imported = imports_of(ROOT / "protocol" / "api" / "actions.py", modules())
    assert "protocol.hm.blocks" in imported and "protocol.agent.reasoning" in imported
