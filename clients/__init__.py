"""Python client for the Seed Agents server: `AgentsClient`, `AgentsError`, key files, and the
`seed-agents` command line (`clients.cli`)."""
from clients.client import DEFAULT_URL, AgentsClient
from clients.errors import AgentsError
from clients.subscription import Subscription

__all__ = ["AgentsClient", "AgentsError", "Subscription", "DEFAULT_URL"]
