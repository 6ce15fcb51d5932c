"""Prometheus metrics, one registry per server instance (tests run several in one process)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.connections = Gauge("seed_agents_connections", "Open WebSocket connections", ["framing"], registry=r)
        self.subscriptions = Gauge("seed_agents_subscriptions", "Active subscriptions", registry=r)
        self.actions = Counter("seed_agents_actions", "Actions answered", ["action", "status"], registry=r)
        self.verify_failures = Counter("seed_agents_verify_failures", "Envelopes refused", ["reason"], registry=r)
        self.replayed = Counter("seed_agents_events_replayed", "Durable events sent during replay", registry=r)
        self.published = Counter("seed_agents_events_published", "Events published to the hub", registry=r)
        self.slow_consumers = Counter("seed_agents_slow_consumers", "Sockets cut off for not reading", registry=r)
        self.runs = Counter("seed_agents_runs", "Runs finished", ["status"], registry=r)
        self.latency = Histogram(
            "seed_agents_action_seconds", "Action latency from frame to response", ["action"], registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

        self._action_children: dict[tuple[str, int], tuple] = {}

    def action_done(self, name: str, status: int, seconds: float) -> None:
        # labels() costs a few microseconds a call; the hot path reuses the children.
        children = self._action_children.get((name, status))
        if children is None:
            children = (self.actions.labels(name, str(status)), self.latency.labels(name))
            self._action_children[(name, status)] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
