"""Python client for the Seed Agents server: `AgentsClient`, `AgentsError`, key files, and the
`seed-agents` command line (`seed_agents.clients.cli`)."""
from seed_agents.clients.client import DEFAULT_URL, AgentsClient
from seed_agents.clients.errors import AgentsError
from seed_agents.clients.subscription import Subscription

__all__ = ["AgentsClient", "AgentsError", "Subscription", "DEFAULT_URL"]
