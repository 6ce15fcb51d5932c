"""Python client for the Seed Agents server: `AgentsClient`, `AgentsError`, key files, and the
`seed-agents` command line (`seed_agents.clients.cli`)."""
from .client import DEFAULT_URL, AgentsClient
from .errors import AgentsError
from .subscription import Subscription

__all__ = ["AgentsClient", "AgentsError", "Subscription", "DEFAULT_URL"]
