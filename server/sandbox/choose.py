"""The sandbox this server offers, chosen once at start: the configured backend, or none with the
reason health gives. The backend's self-check (a one-line program in each runtime) runs in the
background from the start (`check`); until it passes, nothing is offered."""
from __future__ import annotations

import logging
import sys

from ..providers.network import NetworkPolicy
from .bubblewrap import BubblewrapSandbox
from .port import Availability, Limits, Sandbox

log = logging.getLogger("seed_agents.sandbox")
MAX_TIMEOUT_S = 300   # the reference's MAX_EXEC_TIMEOUT_SECS


class NoSandbox:
    """What runs when nothing can: every run refused with the reason health gives."""

    name = "none"

    def __init__(self, availability: Availability) -> None:
        self.availability = availability

    async def check(self) -> Availability:
        return self.availability

    async def run(self, job):  # noqa: ANN001, ANN201
        from .port import SandboxError   # noqa: PLC0415
        raise SandboxError(self.availability.reason)


def sandbox_for(config) -> Sandbox:  # noqa: ANN001
    if config.code_exec == "off":
        return NoSandbox(Availability(False, (), "Code execution is disabled by configuration (--code-exec off)",
                                      "config-disabled"))
    if not sys.platform.startswith("linux"):
        return NoSandbox(Availability(False, (), "The bubblewrap sandbox runs on Linux only", "unsupported-platform"))
    limits = Limits(memory_bytes=config.exec_memory_bytes, max_files=config.memory_max_files)
    # With --exec-network the code reaches out only through the run's proxy, under the web tools'
    # policy (--web-networks: public only by default), never the providers' wider one.
    network = NetworkPolicy.for_web(config.web_networks) if config.exec_network else None
    return BubblewrapSandbox(limits, network=network, concurrency=config.exec_concurrency)


async def check(sandbox) -> Availability:  # noqa: ANN001
    availability = await sandbox.check()
    if availability.available:
        log.info("code sandbox: %s, runtimes %s", sandbox.name, ", ".join(availability.runtimes))
    else:
        log.warning("code sandbox unavailable: %s", availability.reason)
    return availability
