"""What the repository's modules import, read from their source with `ast`, for the tests that
judge imports. Names are as the repository shows them (`server.app`, not the installed
`seed_agents.server.app`), and relative imports are resolved, so `from ..app import App` in
server/runtime/runner.py reads as `server.app`."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "server", "clients")
NAMESPACE = "seed_agents"


def local(name: str) -> str:
    """`seed_agents.server.app` -> `server.app` (the folders install under the namespace)."""
    return name.removeprefix(NAMESPACE + ".") if name != NAMESPACE else name


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(packages=PACKAGES) -> dict[str, Path]:
    return {module_name(path): path for package in packages for path in (ROOT / package).rglob("*.py")}


def imports_of(path: Path, known: dict[str, Path] | None = None, *, everywhere: bool = False) -> set[str]:
    """The modules `path` imports: at module level (in `if` and `try` blocks too, so a circle
    behind `if TYPE_CHECKING:` counts), or `everywhere` (inside functions too). `from pkg import
    name` counts as `pkg.name` when that is one of the `known` modules, else as `pkg`."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = modules() if known is None else known
    found: set[str] = set()

    def note(node) -> None:
        if isinstance(node, ast.Import):
            found.update(local(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = local(node.module or "")
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)

    def visit(nodes) -> None:
        for node in nodes:
            note(node)
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    tree = ast.parse(path.read_text(), str(path))
    if everywhere:
        for node in ast.walk(tree):
            note(node)
    else:
        visit(tree.body)
    return found
