"""docs/architecture.md "Where a change lands", checked against the code rather than against
itself: for an action, a provider type, a tool, an address form and a cluster message kind, a
scratch copy of the tree gets a new one by editing only the code files the table's row names
(placeholders filled in), and a fresh interpreter then finds it working there: routed and
parsed, offered, dispatched, handled. A row that names too few files fails (the edit needs a
file the row does not name), and so does code that comes to need another file (the new thing
is not reached)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("server", "protocol", "clients", "schema", "seed_agents")


def table_row(kind: str) -> list[str]:
    """The files a row names; a provider's row up to its new family's files (the change below is
    a type of a known family, which the row says needs its first file alone)."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Where a change lands", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| a") and len(cells) == 2 and cells[0] == kind:
            return re.findall(r"`([\w/<>.-]+\.py|[\w/<>.-]+/)`", cells[1].split("a new family adds")[0])
    raise AssertionError(f"no row {kind!r} in the table")


def _append(text: str):
    return lambda source: source.rstrip() + "\n\n\n" + textwrap.dedent(text).strip() + "\n"


def _before(anchor: str, text: str):
    def edit(source: str) -> str:
        assert source.count(anchor) == 1, anchor
        return source.replace(anchor, text + anchor)
    return edit


def _after(anchor: str, text: str):
    def edit(source: str) -> str:
        assert source.count(anchor) == 1, anchor
        return source.replace(anchor, anchor + text)
    return edit


# Each kind: {placeholder: value}, the edits by file, and what a fresh interpreter must find.
CHANGES = {
    "an action": ({"<area>": "identities"}, {
        "protocol/api/actions_identities.py": _append('''
            @dataclass(frozen=True)
            class CountSigningIdentities:
                ts: int


            ACTIONS["CountSigningIdentities"] = read(lambda f, ts: CountSigningIdentities(ts))
        '''),
        "server/handlers/identities.py": _append('''
            async def count_signing_identities(ctx: HandlerContext, env, action) -> dict:
                return {"_": "CountSigningIdentitiesResponse", "count": 7}
        '''),
        "server/routes.py": _after('    "DeleteSigningIdentity": Handling(identities.delete_signing_identity),\n',
                                   '    "CountSigningIdentities": Handling(identities.count_signing_identities),\n'),
        "clients/actions.py": _append('''
            def count_signing_identities() -> dict:
                return _action("CountSigningIdentities")
        '''),
    }, '''
        import asyncio
        from seed_agents.clients import actions
        from seed_agents.clients.client import AgentsClient
        from seed_agents.protocol.api.actions import parse_action
        from seed_agents.server.routes import ROUTES

        built = actions.count_signing_identities()
        parsed = parse_action({**built, "ts": 1})
        route = ROUTES["CountSigningIdentities"]
        assert type(parsed).__name__ == "CountSigningIdentities" and route.read
        assert asyncio.run(route.handler(None, None, parsed))["count"] == 7
        assert hasattr(AgentsClient, "count_signing_identities")
    '''),
    "a provider": ({}, {
        "protocol/agent/providers.py": _after('    ProviderType("custom", "openai"),\n',
                                        '    ProviderType("scratch", "openai", "https://scratch.invalid/v1", hosted=True,\n'
                                        '                 images=rules.openai_images),\n'),
    }, '''
        from seed_agents.protocol.agent.reasoning import model_reasoning_support
        from seed_agents.server.providers import registry
        from seed_agents.server.providers.capabilities import accepts_images
        from seed_agents.server.providers.openai_compat import OpenAICompatProvider

        assert "scratch" in registry.SUPPORTED_TYPES and "scratch" in registry.KEY_REQUIRED
        assert registry.FAMILIES[registry.table.family_of("scratch")] is OpenAICompatProvider
        assert accepts_images("scratch", "gpt-4o") and model_reasoning_support("scratch", "gpt-5") is None
    '''),
    "a tool": ({"<group>": "session_tools"}, {
        "protocol/agent/tool_registry.py": [
            _before("VERBS = {t.name: t for t in (", (
                "_CLOCK = Tool(name='clock', label='Clock', description='The server time in ms.',\n"
                "              input_schema={'type': 'object', 'additionalProperties': False, 'properties': {}},\n"
                "              render={'kind': 'clock', 'label': 'Clock'}, runtimes=('agent-service',))\n\n")),
            _after("CALLABLES = {t.name: t for t in (", "_CLOCK, "),
        ],
        "server/tools/session_tools.py": _append('''
            def clock(ctx: ToolContext, tool_input: dict) -> ToolResult:
                return ToolResult({"summary": "The time.", "now": ctx.now_ms()})
        '''),
        "server/tools/surface.py": [
            _before("\n@dataclass(frozen=True)\nclass CallableTool:\n",
                    "\nasync def _clock(surface, tool_input, call_id):\n"
                    "    return session_tools.clock(surface.ctx, tool_input)\n\n"),
            _after('    CallableTool("navigate", _navigate, read_only=True),\n',
                   '    CallableTool("clock", _clock, read_only=True),\n'),
        ],
    }, '''
        import asyncio
        from seed_agents.server.tools import surface
        from seed_agents.server.tools.authority import Authority
        from seed_agents.server.tools.context import ToolContext

        offered = surface.offered_callables(False)
        assert "clock" in offered
        call = [s for s in surface.provider_tools(callables=offered) if s.name == "call"][0]
        assert "clock" in call.description
        agent = {"id": "a1", "account": "acc", "definition": {}}
        ctx = ToolContext(None, None, lambda: 42, "acc", agent, "s1", "r1", callables=offered,
                          authority=Authority.of_agent(agent, "model", offered, False))
        result = asyncio.run(surface.ToolSurface(ctx)._call({"tool": "clock", "input": {}}))
        assert result.output["now"] == 42, result
        assert not surface.side_effects("call", '{"tool": "clock"}')   # a read: a crash may run it again
    '''),
    "an address form": ({"<group>": "session_tools"}, {
        "server/tools/session_tools.py": _append('''
            def read_clock(ctx) -> ToolResult:
                return ToolResult({"summary": "The time.", "now": ctx.now_ms()})
        '''),
        "server/tools/surface.py": [
            lambda s: s.replace("\nADDRESS_FORMS: tuple[AddressForm, ...] = (\n",
                                '\nasync def _read_clock(surface, address, params):\n'
                                '    return session_tools.read_clock(surface.ctx)\n\n\n'
                                'ADDRESS_FORMS: tuple[AddressForm, ...] = (\n'
                                '    AddressForm("clock:", ("clock:",), (), _read_clock),\n', 1),
        ],
    }, '''
        import asyncio
        from types import SimpleNamespace
        from seed_agents.server.tools import surface

        form = surface.form_of("clock:now")
        assert form is not None and form.name == "clock:" and form.needs("read") == "reader"
        got = asyncio.run(form.read(SimpleNamespace(ctx=SimpleNamespace(now_ms=lambda: 42)), "clock:now", {}))
        assert got.output["now"] == 42
    '''),
    "a cluster message kind": ({}, {
        "server/live/cluster.py": [
            _after("    def signer_gone(self, account_id: str, signer_id: str) -> None:\n"
                   '        """UnregisterSigner here: the others forget the signer and close its sockets too."""\n'
                   '        self._put(["u", account_id, signer_id])\n', '''
    def ping(self, text: str) -> None:
        self._put(["z", text])

    def _on_ping(self, entry: list) -> None:
        self.app.pinged.append(entry[1])
'''),
            _after('    "u": Cluster._on_signer_gone,  # a signer unregistered\n',
                   '    "z": Cluster._on_ping,\n'),
        ],
    }, '''
        from types import SimpleNamespace
        from seed_agents.server.live.cluster import Cluster

        app = SimpleNamespace(broadcaster=SimpleNamespace(local=None), pinged=[])
        cluster = Cluster(app, bus=None)
        cluster.ping("hello")
        import json
        cluster.handle(json.loads(cluster._queue[-1]))
        assert app.pinged == ["hello"]
    '''),
}


def _scratch(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "tree"
    root.mkdir()
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for name in COPIED:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_a_new_one_needs_only_the_files_its_row_names(kind, tmp_path):
    fill, edits, check = CHANGES[kind]
    named = []
    for path in table_row(kind):
        for key, value in fill.items():
            path = path.replace(key, value)
        if not path.startswith("tests/") and "<" not in path:
            named.append(path)
    assert sorted(edits) == sorted(named), f"{kind}: the table names {named}, the change edits {sorted(edits)}"
    root = _scratch(tmp_path)
    for path, edit in edits.items():
        target = root / path
        source = target.read_text()
        for one in edit if isinstance(edit, list) else [edit]:
            source = one(source)
        assert source != target.read_text(), path
        target.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONPATH"] = str(root)
    script = "import seed_agents, sys\nassert seed_agents.__path__[-1] == sys.argv[1], seed_agents.__path__\n" \
             + textwrap.dedent(check)
    done = subprocess.run([sys.executable, "-c", script, str(root)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]


def test_the_scratch_tree_is_the_one_imported(tmp_path):
    """The check runs against the copy, not the installed tree: a copy with a broken route
    table fails to import."""
    root = _scratch(tmp_path)
    (root / "server" / "routes.py").write_text("raise ImportError('the scratch copy')\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", "import seed_agents.server.routes"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "the scratch copy" in done.stderr
