"""`python -m seed_agents`: the same as the `seed-agents` command."""
from seed_agents.server.console import main

if __name__ == "__main__":
    raise SystemExit(main())
