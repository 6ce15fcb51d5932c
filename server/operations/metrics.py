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
        # Several servers on PostgreSQL (server/live/cluster.py, server/runtime/leasing.py).
        self.runs_requeued = Counter("seed_agents_runs_requeued", "Runs this server put back in the "
                                     "queue: a lease ran out (a server died or stalled), or it stopped",
                                     registry=r)
        self.cluster_notices = Gauge("seed_agents_cluster_notices", "Notices sent to and received from "
                                     "the other servers", ["direction"], registry=r)
        self.cluster_resyncs = Gauge("seed_agents_cluster_resyncs", "Times this server re-read the "
                                     "database after losing notices (LISTEN reconnected)", registry=r)
        self.cluster_partials_dropped = Gauge("seed_agents_cluster_partials_dropped", "Partials too large "
                                              "for a notice, not sent to the other servers", registry=r)
        # The database's group commit (server/database/): how many jobs a commit carries.
        self.db_commits = Gauge("seed_agents_db_commits", "Write transactions committed (one fsync each on "
                                "SQLite)", registry=r)
        self.db_write_jobs = Gauge("seed_agents_db_write_jobs", "Write jobs those commits carried", registry=r)
        self.latency = Histogram(
            "seed_agents_action_seconds", "Action latency from frame to response", ["action"], registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

        # The tool loop (server/runtime/tool_loop.py).
        self.tool_calls = Counter("seed_agents_tool_calls", "Tool calls answered, by verb and outcome "
                                  "(ok, error)", ["tool", "outcome"], registry=r)
        self.tool_step_overhead = Histogram(
            "seed_agents_tool_step_overhead_seconds", "The loop's own time in one tool step: the step's wall "
            "time less the model's stream and the tools' run time (recording, checks, publishing)", registry=r,
            buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
        )

        # Triggers (server/triggers/).
        self.trigger_firings = Counter("seed_agents_trigger_firings", "Trigger firings written here, by "
                                       "source type and status (created, skipped, error)", ["source", "status"],
                                       registry=r)
        self.trigger_wakeups = Counter("seed_agents_trigger_scheduler_wakeups", "Times the schedule timer "
                                       "ended (a slot came, a trigger changed, or its 30 s cap)", registry=r)

        self.cache_bytes = Gauge("seed_agents_cache_bytes", "Bytes held by an in-memory cache (its entries' "
                                 "sizes plus a fixed overhead each)", ["cache"], registry=r)
        self.cache_entries = Gauge("seed_agents_cache_entries", "Entries in an in-memory cache", ["cache"],
                                   registry=r)
        self.cache_budget = Gauge("seed_agents_cache_budget_bytes", "Byte budget of an in-memory cache",
                                  ["cache"], registry=r)
        self.outbound_bytes = Gauge("seed_agents_outbound_bytes", "Bytes queued to WebSocket clients and not "
                                    "yet written (all sockets)", registry=r)
        self.outbound_bytes_max = Gauge("seed_agents_outbound_bytes_max_socket", "Most bytes queued to one "
                                        "socket and not yet written, now", registry=r)
        self.http_connections = Gauge("seed_agents_http_connections", "Open HTTP connections (not yet "
                                      "upgraded to a WebSocket)", registry=r)
        self.web_fetches = Gauge("seed_agents_web_fetches", "Web page reads and downloads now: fetching, or "
                                 "waiting for a slot of their account (--web-fetches-per-account)", ["state"],
                                 registry=r)
        self.http_dropped = Counter("seed_agents_http_dropped", "HTTP connections dropped by a hostile-client "
                                    "bound", ["reason"], registry=r)

        self._action_children: dict[tuple[str, int], tuple] = {}

    def watch_cache(self, cache) -> None:
        """Export a seed_agents.server.cache.ByteBudgetCache: read when /metrics is scraped."""
        self.cache_bytes.labels(cache.name).set_function(lambda: cache.bytes)
        self.cache_entries.labels(cache.name).set_function(lambda: len(cache))
        self.cache_budget.labels(cache.name).set(cache.budget)

    def watch_cluster(self, cluster) -> None:
        """The notice counters of `cluster` (server/live/cluster.py), read when scraped."""
        self.cluster_notices.labels("sent").set_function(lambda: cluster.sent)
        self.cluster_notices.labels("received").set_function(lambda: cluster.received)
        self.cluster_resyncs.set_function(lambda: cluster.resyncs)
        self.cluster_partials_dropped.set_function(lambda: cluster.dropped_partials)

    def watch_database(self, db) -> None:
        """The group commit's counters of `db` (its `batches` and `jobs`), read when scraped."""
        self.db_commits.set_function(lambda: db.batches)
        self.db_write_jobs.set_function(lambda: db.jobs)

    def watch_outbound(self, connections) -> None:
        """Export the bytes queued to the open sockets (`connections`: objects with `outbound`)."""
        def held() -> list[int]:
            return [c.outbound.held_bytes() for c in list(connections) if getattr(c, "outbound", None)]

        self.outbound_bytes.set_function(lambda: sum(held()))
        self.outbound_bytes_max.set_function(lambda: max(held(), default=0))

    def watch_http(self, http_connections) -> None:
        """Export the count of open HTTP connections (the transport's set), read when scraped."""
        self.http_connections.set_function(lambda: len(http_connections))

    def watch_web(self, slots) -> None:
        """The web fetches of every account (server/providers/outbound_slots.py), read when scraped."""
        self.web_fetches.labels("fetching").set_function(lambda: slots.running)
        self.web_fetches.labels("waiting").set_function(lambda: slots.waiting)

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
