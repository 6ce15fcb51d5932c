"""The `seed-agents` console command: `serve` and `--version` here, everything else in
`seed_agents.clients.cli`. The dispatch lives on the server's side so that `clients/` never imports
`server/` (a client install needs none of the server's code)."""
from __future__ import annotations

import sys


def version_line() -> str:
    from seed_agents.schema import CURRENT_VERSION

    from .operations.version import VERSION

    return f"seed-agents {VERSION} (schema version {CURRENT_VERSION})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        from .main import main as serve_main  # the server's code only when serving

        return serve_main(argv[1:])
    if argv[:1] == ["import"]:
        from .importer.command import main as import_main  # writes to the store: the server's code

        return import_main(argv[1:])
    if argv[:1] in (["--version"], ["-V"]):
        print(version_line())
        return 0
    from seed_agents.clients.cli import main as client_main

    return client_main(argv)


if __name__ == "__main__":
    sys.exit(main())
