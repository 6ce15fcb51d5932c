"""Activity triggers against a fake HM server's real feed over HTTP: the first poll sets a
baseline, new events fire oldest first across pages, the watermark survives a restart, one event
seen twice (or as a comment and its citation twin) fires once, a failing feed is recorded. Plus
the matching rules on the reference's event shapes."""
from __future__ import annotations

import time

import pytest

from seed_agents.protocol.hm import hm_activity as activity

from tests.fakes.hm_activity import FakeHMActivity, citation_event, comment_event, doc_update_event
from tests.triggers_helpers import create_trigger, get_trigger, make_agent, session_reply
from tests.waiting import until
from tests.wsraw import V2Client, keypair

DOC_OWNER = "z6MktzJVpNrSeef3BGfuMF2LZCsntYYmtJVp72mgBnDqx2iz"
AUTHOR = "z6MkgisVMELvqnsCo3dYmtVpy8PiqPGMVwfAyBWFn84vebq4"
ME = "z6MknRGBsPMcrn5nAXWHmR4RjNuVTRK5a2rthFy188et7LKs"


def now_ms() -> int:
    return int(time.time() * 1000)


async def start(tmp_path, request, fake, name="srv", storage="sqlite", **settings):
    from seed_agents.server.main import start_server

    from tests.conftest import server_config

    (tmp_path / name).mkdir(exist_ok=True)
    return await start_server(server_config(tmp_path / name, storage, request, hm_server_url=fake.base_url,
                                            activity_poll_interval=3600.0, activity_page_size=2,
                                            activity_max_pages=3, **settings))


async def settle(monitor) -> None:
    """Until the monitor's own passes (woken by trigger changes) are done."""
    await until(lambda: monitor.idle, 10, step=0.01, what="the monitor idle")


async def firings(c, kp, trigger_id) -> list[dict]:
    return (await get_trigger(c, kp, trigger_id))["firings"][::-1]


async def test_paging_baseline_watermark_restart_and_one_firing_per_event(tmp_path, request):
    async with FakeHMActivity() as fake:
        t = now_ms()
        fake.publish(*(comment_event(f"bafyold{i}", AUTHOR, DOC_OWNER, t - 60_000 + i) for i in range(4)))
        server = await start(tmp_path, request, fake)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        doc = await create_trigger(c, a, agent_id, {"type": "document-comment", "resource": f"hm://{DOC_OWNER}"},
                                   name="comments", prompt="Answer the comment")
        mention = await create_trigger(c, a, agent_id, {"type": "user-mention", "mentionedAccounts": [ME]},
                                       name="mentions", prompt="You were mentioned")
        monitor = server.app.triggers.activity
        await settle(monitor)   # creating them woke the monitor: its first pass sets the baseline
        assert await firings(c, a, doc["id"]) == []   # older comments never fire
        assert fake.list_requests()[:2] == [
            {"pageSize": "2", "currentAccount": a.account_id, "order": "observed"},
            {"pageSize": "2", "currentAccount": a.account_id, "order": "observed", "pageToken": "2"}]

        # Five new comments: three pages of two, handled oldest first.
        t = now_ms()
        fake.publish(*(comment_event(f"bafynew{i}", AUTHOR, DOC_OWNER, t + i, text=f"c{i}") for i in range(5)))
        fake.requests.clear()
        await monitor.poll_once()
        assert [r.get("pageToken", "") for r in fake.list_requests()] == ["", "2", "4"]
        assert all(r["currentAccount"] == a.account_id and r["order"] == "observed" for r in fake.list_requests())
        got = await firings(c, a, doc["id"])
        assert [f["activityKey"] for f in got] == [f"blob-bafynew{i}" for i in range(5)]
        assert all(f["status"] == "created" for f in got)
        events = await session_reply(c, a, got[0]["sessionId"])
        assert events[0]["content"] == "Answer the comment" and "bafynew0" in events[0]["contextLines"][-1]

        # Nothing new: one page is enough to see that.
        fake.requests.clear()
        await monitor.poll_once()
        assert len(fake.requests) == 1 and len(await firings(c, a, doc["id"])) == 5

        # A comment mentioning me and its citation twin, seen in two different polls: one firing.
        fake.publish(comment_event("bafymention", AUTHOR, "z6MkOther", now_ms(), mention=ME))
        await monitor.poll_once()
        fake.publish(citation_event("bafymention", AUTHOR, ME, now_ms()))
        await monitor.poll_once()
        assert [f["activityKey"] for f in await firings(c, a, mention["id"])] == ["blob-bafymention"]
        await c.close()
        await server.stop()

        # Down for a while; two more comments meanwhile. The watermark resumes after the last.
        fake.publish(comment_event("bafylate1", AUTHOR, DOC_OWNER, now_ms()),
                     comment_event("bafylate2", AUTHOR, DOC_OWNER, now_ms() + 1))
        server = await start(tmp_path, request, fake)
        c = await V2Client.open(server.url)
        await settle(server.app.triggers.activity)   # its first pass, at start
        got = await firings(c, a, doc["id"])
        assert [f["activityKey"] for f in got][5:] == ["blob-bafylate1", "blob-bafylate2"] and len(got) == 7

        # A lost watermark (the row deleted): the feed is read again from the top, and every
        # event it shows was claimed already: nothing fires twice.
        await server.app.db.write(lambda conn: conn.execute("DELETE FROM activity_watermarks"))
        await server.app.triggers.activity.poll_once()
        assert len(await firings(c, a, doc["id"])) == 7
        assert len(await firings(c, a, mention["id"])) == 1
        await c.close()
        await server.stop()


@pytest.mark.storages("sqlite", "postgresql")   # on PostgreSQL the poller holds a lease on the watermark
async def test_a_failing_feed_is_recorded_and_recovers(tmp_path, request, storage):
    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake, storage=storage)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        trigger = await create_trigger(c, a, agent_id, {"type": "site-update", "resourcePrefix": f"hm://{DOC_OWNER}",
                                                        "eventTypes": ["doc-update"]}, name="site")
        monitor = server.app.triggers.activity
        await settle(monitor)
        fake.fail_with(503)
        fake.publish(doc_update_event("bafydoc1", DOC_OWNER, "docs/a", now_ms()))
        await monitor.poll_once()
        mark = server.app.db.read(lambda conn: conn.execute(
            "SELECT last_error FROM activity_watermarks").fetchone()[0])
        assert "503" in mark
        fake.fail_with(None)
        await monitor.poll_once()
        assert [f["activityKey"] for f in await firings(c, a, trigger["id"])] == ["blob-bafydoc1"]
        await c.close()
        await server.stop()


@pytest.mark.parametrize("source, event, expected", [
    ({"type": "document-comment", "resource": f"hm://{DOC_OWNER}"}, comment_event("c1", AUTHOR, DOC_OWNER, 1), True),
    ({"type": "document-comment", "resource": f"https://hyper.media/hm/{DOC_OWNER}/?v=1"},
     comment_event("c1", AUTHOR, DOC_OWNER, 1, target_path="notes/x"), True),
    ({"type": "document-comment", "resource": f"hm://{DOC_OWNER}", "author": ME}, comment_event("c1", AUTHOR, DOC_OWNER, 1), False),
    ({"type": "document-comment", "resource": f"hm://{DOC_OWNER}/a"}, comment_event("c1", AUTHOR, DOC_OWNER, 1), False),
    ({"type": "user-mention", "mentionedAccounts": [ME]}, comment_event("c1", AUTHOR, DOC_OWNER, 1, mention=ME), True),
    ({"type": "user-mention", "mentionedAccounts": [ME]}, comment_event("c1", ME, DOC_OWNER, 1), False),
    ({"type": "user-mention", "mentionedAccounts": [ME]}, citation_event("c1", AUTHOR, ME, 1), True),
    ({"type": "comment-reply", "parentAuthor": ME},
     comment_event("c1", AUTHOR, DOC_OWNER, 1, reply_parent=f"{ME}/z6Habc"), True),
    ({"type": "comment-reply", "parentAuthor": ME},
     comment_event("c1", AUTHOR, DOC_OWNER, 1, reply_parent=f"{AUTHOR}/z6Habc"), False),
    ({"type": "comment-reply", "resource": f"hm://{DOC_OWNER}"}, comment_event("c1", AUTHOR, DOC_OWNER, 1), False),
    ({"type": "site-update", "resourcePrefix": f"hm://{DOC_OWNER}", "eventTypes": ["change"]},
     doc_update_event("d1", DOC_OWNER, "docs/a", 1), True),
    ({"type": "site-update", "resourcePrefix": f"hm://{DOC_OWNER}", "eventTypes": ["comment"]},
     doc_update_event("d1", DOC_OWNER, "docs/a", 1), False),
    ({"type": "site-update", "resourcePrefix": f"hm://{ME}"}, doc_update_event("d1", DOC_OWNER, "docs/a", 1), False),
    ({"type": "document-comment", "resource": f"hm://{DOC_OWNER}"}, {"type": "comment", "comment": "not a map"}, False),
])
def test_matching(source, event, expected):
    assert activity.matches(source, event) is expected


def test_keys_collapse_a_citation_onto_its_comment():
    assert activity.firing_key(citation_event("bafyX", AUTHOR, ME, 1)) == "blob-bafyX"
    assert activity.firing_key(comment_event("bafyX", AUTHOR, ME, 1)) == "blob-bafyX"
    assert activity.event_key({"type": "doc-update", "id": "7"}) == "doc-update-7"
    assert activity.event_key({"weird": True}) is None


async def test_a_hostile_feed_page_is_an_error_not_a_crash(tmp_path, request):
    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        await create_trigger(c, a, agent_id, {"type": "document-comment", "resource": f"hm://{DOC_OWNER}"})
        monitor = server.app.triggers.activity
        await settle(monitor)
        deep: object = "x"
        for _ in range(500):
            deep = {"n": deep}
        fake.publish({**comment_event("bafydeep", AUTHOR, DOC_OWNER, now_ms()), "extra": deep})
        await monitor.poll_once()
        mark = server.app.db.read(lambda conn: conn.execute("SELECT last_error FROM activity_watermarks").fetchone()[0])
        assert "plain JSON" in mark
        await c.close()
        await server.stop()


async def test_the_feed_is_read_under_the_network_policy(tmp_path, request):
    """The monitor reads the feed on the runtime's guarded client, as every call to the HM
    server goes: a server whose policy allows only public addresses never connects to the
    feed on 127.0.0.1, and records why on the watermark."""
    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake, provider_networks="public")
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        await create_trigger(c, a, agent_id, {"type": "document-comment", "resource": f"hm://{DOC_OWNER}"})
        monitor = server.app.triggers.activity
        await settle(monitor)
        await monitor.poll_once()
        mark = server.app.db.read(lambda conn: conn.execute("SELECT last_error FROM activity_watermarks").fetchone()[0])
        assert mark.startswith("ListEvents did not answer"), mark
        assert fake.requests == []
        await c.close()
        await server.stop()


async def test_a_trigger_never_fires_for_what_happened_before_it(tmp_path, request):
    """An account's feed read long ago (a stale watermark) holds events from before a new
    trigger: they are new to the watermark but older than the trigger, and do not fire it."""
    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        first = await create_trigger(c, a, agent_id, {"type": "site-update", "resourcePrefix": "hm://elsewhere"},
                                     name="first")
        monitor = server.app.triggers.activity
        await settle(monitor)                       # the watermark exists from now on
        old = now_ms() - 3 * 3_600_000
        fake.publish(comment_event("bafyhoursago", AUTHOR, DOC_OWNER, old))
        late = await create_trigger(c, a, agent_id, {"type": "document-comment", "resource": f"hm://{DOC_OWNER}"},
                                    name="late")
        await settle(monitor)
        fake.publish(comment_event("bafyfresh", AUTHOR, DOC_OWNER, now_ms()))
        await monitor.poll_once()
        assert [f["activityKey"] for f in await firings(c, a, late["id"])] == ["blob-bafyfresh"]
        assert await firings(c, a, first["id"]) == []
        await c.close()
        await server.stop()


ALTERNATIVES = {"type": "activity", "alternatives": [
    {"id": "replies", "source": {"type": "comment-reply", "parentAuthor": ME}},
    {"id": "my-docs", "source": {"type": "document-author-comment", "documentAuthor": ME}}]}


@pytest.mark.parametrize("source, event, expected", [
    # document-author-comment: someone else's comment on a document in the account
    ({"type": "document-author-comment", "documentAuthor": ME}, comment_event("c1", AUTHOR, ME, 1), True),
    ({"type": "document-author-comment", "documentAuthor": ME},
     comment_event("c1", AUTHOR, ME, 1, target_path="notes/x"), True),
    ({"type": "document-author-comment", "documentAuthor": ME}, comment_event("c1", ME, ME, 1), False),  # its own
    ({"type": "document-author-comment", "documentAuthor": ME}, comment_event("c1", AUTHOR, DOC_OWNER, 1), False),
    ({"type": "document-author-comment", "documentAuthor": ME, "resourcePrefix": f"hm://{ME}/notes"},
     comment_event("c1", AUTHOR, ME, 1, target_path="other"), False),
    ({"type": "document-author-comment", "documentAuthor": ME}, doc_update_event("d1", ME, "a", 1), False),
    # activity: any alternative
    (ALTERNATIVES, comment_event("c1", AUTHOR, ME, 1), True),
    (ALTERNATIVES, comment_event("c1", AUTHOR, DOC_OWNER, 1, reply_parent=f"{ME}/z6Habc"), True),
    (ALTERNATIVES, comment_event("c1", AUTHOR, DOC_OWNER, 1), False),
])
def test_matching_author_comments_and_alternatives(source, event, expected):
    assert activity.matches(source, event) is expected


def test_the_alternatives_an_event_matched():
    both = comment_event("c1", AUTHOR, ME, 1, reply_parent=f"{ME}/z6Habc")
    assert activity.matched_alternatives(ALTERNATIVES, both) == ["replies", "my-docs"]
    assert activity.matched_alternatives(ALTERNATIVES, comment_event("c1", AUTHOR, ME, 1)) == ["my-docs"]


async def test_an_activity_trigger_with_alternatives_fires_once_and_records_what_matched(tmp_path, request):
    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        trigger = await create_trigger(c, a, agent_id, ALTERNATIVES, name="either")
        assert trigger["source"] == ALTERNATIVES
        # Refused by name: a schedule among the alternatives, a repeated id, none at all.
        for bad, words in (({"type": "activity", "alternatives": [{"id": "s", "source": {"type": "webhook"}}]},
                            "must be one of the activity filters"),
                           ({"type": "activity", "alternatives": [ALTERNATIVES["alternatives"][0]] * 2},
                            "unique among the alternatives"),
                           ({"type": "activity", "alternatives": []}, "non-empty array"),
                           ({"type": "document-author-comment"}, "documentAuthor")):
            r = await c.call(a, {"_": "CreateAgentTrigger", "agentId": agent_id,
                                 "trigger": {"name": "bad", "source": bad, "prompt": "p"}})
            assert r["_"] == "Error" and r["status"] == 400 and words in r["message"], r
        monitor = server.app.triggers.activity
        await settle(monitor)
        fake.publish(comment_event("bafyboth", AUTHOR, ME, now_ms(), reply_parent=f"{ME}/z6Habc"))
        fake.publish(comment_event("bafymine", ME, ME, now_ms()))   # its own comment: nothing
        await monitor.poll_once()
        fired = await firings(c, a, trigger["id"])
        assert [f["activityKey"] for f in fired] == ["blob-bafyboth"]
        assert fired[0]["activity"]["matched"] == ["replies", "my-docs"]
        await c.close()
        await server.stop()


async def test_two_triggers_combine_in_one_transaction(tmp_path, request):
    """MergeAgentTriggers: the survivor takes both conditions as alternatives and the chosen
    action; the retired trigger is off, marked, keeps its firings, cannot change or fire, and the
    events it admitted never fire the survivor (its claims come along)."""
    from tests.triggers_helpers import call

    async with FakeHMActivity() as fake:
        server = await start(tmp_path, request, fake)
        a = keypair("A")
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        keep = await create_trigger(c, a, agent_id, {"type": "document-comment", "resource": f"hm://{DOC_OWNER}"},
                                    name="docs", prompt="Read the comment")
        mine = await create_trigger(c, a, agent_id, {"type": "document-author-comment", "documentAuthor": ME},
                                    name="mine", prompt="Answer on my documents")
        timer = await create_trigger(c, a, agent_id, {"type": "schedule", "schedule": {
            "kind": "interval", "every": 1, "unit": "hours"}}, name="timer")
        monitor = server.app.triggers.activity
        await settle(monitor)
        fake.publish(comment_event("bafyfirst", AUTHOR, ME, now_ms()))
        await monitor.poll_once()
        assert [f["activityKey"] for f in await firings(c, a, mine["id"])] == ["blob-bafyfirst"]

        r = await call(c, a, {"_": "MergeAgentTriggers", "triggerId": keep["id"], "retiredId": timer["id"]})
        assert r["_"] == "Error" and r["status"] == 400 and "only activity triggers combine" in r["message"], r
        merged = await call(c, a, {"_": "MergeAgentTriggers", "triggerId": keep["id"], "retiredId": mine["id"],
                                   "action": "retired"})
        assert merged["_"] == "MergeAgentTriggersResponse", merged
        survivor, retired = merged["trigger"], merged["retired"]
        assert survivor["source"] == {"type": "activity", "alternatives": [
            {"id": "docs", "source": keep["source"]}, {"id": "mine", "source": mine["source"]}]}
        assert survivor["prompt"] == "Answer on my documents" and survivor["enabled"] is True
        assert retired["enabled"] is False and retired["mergedInto"] == keep["id"]
        assert [f["activityKey"] for f in await firings(c, a, mine["id"])] == ["blob-bafyfirst"]   # kept
        claims = server.app.db.read(lambda conn: conn.execute(
            "SELECT activity_key FROM trigger_event_claims WHERE trigger_id = ?", (keep["id"],)).fetchall())
        assert [k for (k,) in claims] == ["blob-bafyfirst"]   # imported: it never fires the survivor
        for again in ({"_": "UpdateAgentTrigger", "triggerId": mine["id"], "patch": {"enabled": True}},
                      {"_": "FireAgentTrigger", "triggerId": mine["id"]},
                      {"_": "MergeAgentTriggers", "triggerId": mine["id"], "retiredId": keep["id"]}):
            r = await call(c, a, again)
            assert r["_"] == "Error" and r["status"] == 409 and "was combined into" in r["message"], r

        fake.publish(comment_event("bafysecond", AUTHOR, ME, now_ms()))
        await monitor.poll_once()
        fired = await firings(c, a, keep["id"])
        assert [(f["activityKey"], f["activity"]["matched"]) for f in fired] == [("blob-bafysecond", ["mine"])]
        assert [f["activityKey"] for f in await firings(c, a, mine["id"])] == ["blob-bafyfirst"]
        await c.close()
        await server.stop()
