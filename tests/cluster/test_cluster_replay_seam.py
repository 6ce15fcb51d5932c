"""The replay/live seam with replay pages read off the event loop (server/live/subscriptions.py,
SessionSubscription.start; docs/storage.md "Reads off the loop"): on a shared store each page
is read on a reader thread while the loop serves others, and appends published meanwhile are
not sent live (the subscription is still replaying); the seam is closed by one last read on the
loop with no await between it and the switch to live.

Raced here on one PostgreSQL server: two writers send turns (each an append of the user's message
and one of the reply) to the same sessions while subscribers join at random moments with random
`afterSeq` values; every subscriber ends with exactly the session's seqs past its afterSeq, none
missing and none sent twice on the wire (scenario 1 of tests/cluster/test_cluster_servers.py, all
roles on one server).
"""
from __future__ import annotations

import random

from seed_agents.protocol.wire.keys import Keypair

from tests.cluster.test_cluster_servers import LIMITS, seed_for_test, shared_sessions, start_servers
from tests.cluster.test_cluster_servers import wire_seqs  # noqa: F401  (fixture)
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)


async def test_subscribers_joining_during_appends_on_postgresql_miss_and_repeat_nothing(
        tmp_path, postgres_url, wire_seqs):  # noqa: F811
    seed = seed_for_test()
    print(f"seed {seed} (SEED_AGENTS_TEST_SEED={seed} replays it)")
    (srv,) = await start_servers(tmp_path, 1, ["--storage-url", postgres_url, *LIMITS])
    try:
        await shared_sessions([srv, srv], [srv, srv], srv, Keypair.generate(), random.Random(seed),
                              seed, wire_seqs)
    finally:
        srv.kill()
