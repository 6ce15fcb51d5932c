"""Issue 36's public chat over real sockets, on SQLite and PostgreSQL: an owner opens an agent
to every signed account; two visitors chat in sessions of their own, unseen by each other and by
the agent's reader; the owner's memory, sessions and tools stay the owner's; the owner's limits
(messages an hour, tokens a day per visitor and for all visitors) answer 429; closing stops a
visitor's live run and refuses the next message. A scripted model shows what it was handed in a
visitor's session: no memory listing, no roster, no identities, only the granted tools."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.server.runtime.test_tool_loop import hm, server, web  # noqa: F401 (fixtures)
from tests.waiting import until
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")

OWNER, ALICE, BOB, READER = (keypair("chat-owner"), keypair("chat-alice"), keypair("chat-bob"),
                             keypair("chat-reader"))
MEMORY_TEXT = "the owner's diary: kites have forked tails"


def text(t: str) -> list:
    return [{"type": "text", "text": t}]


class Model:
    """The scripted model: a message naming a plan makes its tool calls, then answers "done";
    anything else is answered "ok". Every request is kept, so a test reads what a turn was handed."""

    def __init__(self) -> None:
        self.plans: dict[str, list[dict]] = {}
        self.hold: asyncio.Event | None = None

    def __call__(self, request) -> Script:  # noqa: ANN001
        messages = (request.body or {}).get("messages", ())
        first = next((m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)), "")
        if first.strip() == "hold" and self.hold is not None:
            return Script(chunks=["held"], hold=self.hold)
        calls = self.plans.get(first.strip())
        if calls and not any(m.get("role") == "tool" for m in messages):
            return Script(chunks=[], tool_calls=calls)
        return Script(chunks=["done" if calls else "ok"])


class Person:
    def __init__(self, kp, client: V2Client) -> None:
        self.kp, self.client = kp, client

    async def call(self, action: dict) -> dict:
        return await self.client.call(self.kp, action)

    async def ok(self, action: dict) -> dict:
        r = await self.call(action)
        assert r["_"] == action["_"] + "Response", (action, r)
        return r

    async def refused(self, action: dict) -> tuple[int, str]:
        r = await self.call(action)
        assert r["_"] == "Error", (action, r)
        return r["status"], r["message"]

    async def say(self, session_id: str, words: str) -> dict:
        """A message, then its run waited for (as this person reads it)."""
        sent = await self.ok({"_": "MessageSession", "sessionId": session_id, "content": text(words)})

        async def ended():
            run = (await self.ok({"_": "GetRun", "runId": sent["runId"]}))["run"]
            return run["status"] in ("succeeded", "failed", "canceled") and run
        return await until(ended, timeout=60, what=f"the run of {words!r}")


async def world(server, fake):  # noqa: F811
    people = [Person(kp, await V2Client.open(server.url)) for kp in (OWNER, ALICE, BOB, READER)]
    owner = people[0]
    await owner.ok({"_": "SetSecret", "name": "k", "value": b"sk-test"})
    await owner.ok({"_": "SetModelProvider", "name": "p", "provider": {
        "type": "custom", "baseUrl": fake.base_url, "secretRefs": {"apiKey": "k"}}})
    identity = (await owner.ok({"_": "CreateSigningIdentity", "label": "Owner's voice"}))["identity"]
    agent_id = (await owner.ok({"_": "CreateAgent", "definition": {
        "name": "Kite Guide", "systemPrompt": "You answer questions about kites.", "modelProvider": "p",
        "model": "m", "signingKey": identity["name"]}}))["agentId"]
    await owner.ok({"_": "WriteAgentMemoryFile", "agentId": agent_id, "path": "notes/diary.md",
                    "content": MEMORY_TEXT.encode()})
    own = (await owner.ok({"_": "CreateSession", "agentId": agent_id, "title": "owner's own"}))["sessionId"]
    await owner.say(own, "my private plan")
    await owner.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id,
                    "role": "reader"})
    await people[3].ok({"_": "AcceptAgentInvite", "agentId": agent_id})
    return people, agent_id, own, identity


async def close_all(people) -> None:
    for p in people:
        await p.client.close()


def system_prompt(request) -> str:
    return request.body["messages"][0]["content"]


async def test_visitors_chat_alone_within_what_the_owner_granted(server, web):  # noqa: F811
    model = Model()
    async with FakeOpenAI(model) as fake:
        people, agent_id, own, identity = await world(server, fake)
        owner, alice, bob, reader = people
        try:
            # closed: a visitor finds nothing, and only the owner may open it
            assert (await alice.refused({"_": "CreateSession", "agentId": agent_id}))[0] == 404
            assert (await alice.refused({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True}))[0] == 404
            assert (await reader.refused({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True}))[0] == 403
            for bad in ({"limits": {"messagesPerHour": 0}}, {"limits": {"tokensPerDay": "lots"}},
                        {"limits": {"perMinute": 1}}, {"tools": ["execute"]}, {"tools": ["search_memory"]},
                        {"tools": "web_search"}, {"publicChat": "yes"}):
                action = {"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True, **bad}
                status, message = await owner.refused(action)
                assert status == 400 and message.startswith("SetAgentPublicChat."), (bad, message)
            opened = await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True,
                                     "limits": {"messagesPerHour": 4, "tokensPerDay": 100_000},
                                     "tools": ["web_search"]})
            settings = {"messagesPerHour": 4, "tokensPerDay": 100_000, "tokensPerDayAll": 500_000,
                        "tools": ["web_search"]}
            assert opened["agent"]["publicChat"] == settings and opened["agent"]["accessRole"] == "owner"
            listed = await owner.ok({"_": "ListAgentCollaborators", "agentId": agent_id})
            assert listed["publicChat"] == settings
            assert "publicChat" not in await reader.ok({"_": "ListAgentCollaborators", "agentId": agent_id})

            # a visitor's view of the agent: its name and the chat's terms, nothing of the definition
            seen = (await alice.ok({"_": "GetAgent", "agentId": agent_id}))
            assert seen["agent"]["accessRole"] == "visitor" and seen["sessions"] == []
            assert seen["agent"]["definition"] == {"name": "Kite Guide", "systemPrompt": "", "modelProvider": "",
                                                   "model": ""}
            assert seen["agent"]["publicChat"] == settings and "activity" not in seen["agent"]
            assert "kites." not in json.dumps(seen) and identity["name"] not in json.dumps(seen)

            # each visitor has sessions of its own
            sa = (await alice.ok({"_": "CreateSession", "agentId": agent_id, "title": "alice asks"}))["sessionId"]
            sb = (await bob.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            model.plans["search and snoop"] = [
                {"id": "w", "name": "call", "arguments": json.dumps({"tool": "web_search", "input": {"query": "kites"}})},
                {"id": "m", "name": "read", "arguments": json.dumps({"address": "~/memory/notes/diary.md"})},
                {"id": "s", "name": "call", "arguments": json.dumps({"tool": "search_memory", "input": {"query": "kites"}})},
                {"id": "t", "name": "read", "arguments": json.dumps({"address": f"thread:{own}"})}]
            before = len(fake.requests)
            run = await alice.say(sa, "search and snoop")
            assert run["status"] == "succeeded", run

            # what the model was handed in a visitor's session
            handed = fake.requests[before]
            prompt = system_prompt(handed)
            assert prompt.startswith("You answer questions about kites.")
            assert "This is a public conversation" in prompt and "The current time is: " in prompt
            for owners in ("private persistent memory", "diary", "memory/", "<conversation_members>",
                           "<available_signing_identities>", identity["accountId"], "<space>", "<message_sender>"):
                assert owners not in json.dumps(handed.body), owners
            offered = {t["function"]["name"]: t["function"]["description"] for t in handed.body["tools"]}
            assert set(offered) == {"call"} and "web_search" in offered["call"]
            assert "search_memory" not in offered["call"] and "navigate" not in offered["call"]
            assert [m for m in handed.body["messages"] if m["role"] == "user"] == [
                {"role": "user", "content": "search and snoop"}]

            got = await alice.ok({"_": "GetSession", "sessionId": sa})
            assert got["systemPromptMarkdown"] == "" and got["session"]["visitorId"] == ALICE.account_id
            owners_view = await owner.ok({"_": "GetSession", "sessionId": sa})
            assert owners_view["systemPromptMarkdown"] == "You answer questions about kites."
            events = [e["event"] if "event" in e else e for e in got["events"]]
            results = {e["toolCallId"]: e for e in events if e.get("type") == "tool_result"}
            assert "error" not in results["w"], results["w"]   # the granted tool ran
            assert "visitor" in results["m"]["error"] and "visitor" in results["t"]["error"]
            assert "not a tool this agent's owner granted" in results["s"]["error"]
            assert MEMORY_TEXT not in json.dumps(events) and "my private plan" not in json.dumps(events)

            # isolation: nobody but alice and the owner reads alice's session
            for person in (bob, reader):
                for action in ({"_": "GetSession", "sessionId": sa}, {"_": "Subscribe", "key": f"sessions/{sa}"},
                               {"_": "MessageSession", "sessionId": sa, "content": text("hi")},
                               {"_": "ListRuns", "sessionId": sa}, {"_": "GetRun", "runId": run["id"]}):
                    assert (await person.refused(action))[0] == 404, (person.kp.account_id, action)
            assert (await bob.ok({"_": "ListSessions", "agentId": agent_id}))["sessions"][0]["id"] == sb
            assert [s["id"] for s in (await bob.ok({"_": "ListSessions", "agentId": agent_id}))["sessions"]] == [sb]
            # (AgentInfo.activity may name the latest session, a visitor's too: its id, never its content)
            assert sa not in json.dumps((await reader.ok({"_": "ListSessions", "agentId": agent_id}))["sessions"])
            assert sa not in json.dumps((await reader.ok({"_": "ListSessions"}))["sessions"])
            assert sa not in json.dumps((await reader.ok({"_": "GetAgent", "agentId": agent_id}))["sessions"])
            assert run["id"] not in json.dumps(await reader.ok({"_": "ListRuns", "agentId": agent_id}))
            mine = await owner.ok({"_": "ListSessions", "agentId": agent_id})
            visiting = {s["id"]: s.get("visitorId") for s in mine["sessions"]}
            assert visiting[sa] == ALICE.account_id and visiting[sb] == BOB.account_id and visiting[own] is None
            assert (await owner.ok({"_": "GetSession", "sessionId": sa}))["session"]["visitorId"] == ALICE.account_id

            # a visitor reaches nothing else of the agent, and nothing of the owner
            for action in ({"_": "GetSession", "sessionId": own}, {"_": "GetRun", "runId": "nope"}):
                assert (await alice.refused(action))[0] == 404
            for action in ({"_": "ListAgentMemory", "agentId": agent_id},
                           {"_": "ReadAgentMemoryFile", "agentId": agent_id, "path": "notes/diary.md"},
                           {"_": "ListRuns", "agentId": agent_id}, {"_": "Subscribe", "key": f"agents/{agent_id}"},
                           {"_": "ListAgentCollaborators", "agentId": agent_id},
                           {"_": "UpdateSession", "sessionId": sa, "title": "mine"},
                           {"_": "DeleteSession", "sessionId": sa},
                           {"_": "InvokeSessionTool", "sessionId": sa, "verb": "read",
                            "input": {"address": "~/memory/notes/diary.md"}},
                           {"_": "ListAgentTriggers", "agentId": agent_id},
                           {"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": False},
                           {"_": "UpdateAgent", "agentId": agent_id, "definition": {
                               "name": "Mine", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}}):
                status, message = await alice.refused(action)
                assert status == 403, (action, status, message)
            providers = await alice.call({"_": "ListModelProviders", "agentId": agent_id})
            assert providers["_"] == "Error" and providers["status"] in (403, 404), providers
            assert (await alice.ok({"_": "Subscribe", "key": f"sessions/{sa}"}))["key"] == f"sessions/{sa}"
        finally:
            await close_all(people)


async def test_the_owners_limits_hold_and_closing_stops_visitors(server):  # noqa: F811
    model = Model()
    async with FakeOpenAI(model) as fake:
        people, agent_id, _own, _identity = await world(server, fake)
        owner, alice, bob, reader = people
        try:
            await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True,
                            "limits": {"messagesPerHour": 2}})
            sa = (await alice.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            for n in range(2):
                assert (await alice.say(sa, f"question {n}"))["status"] == "succeeded"
            status, message = await alice.refused({"_": "MessageSession", "sessionId": sa, "content": text("more")})
            assert status == 429 and "2 messages an hour" in message, message
            # another visitor's count is its own; a reader of the agent chats as a visitor
            sr = (await reader.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            assert (await reader.say(sr, "a reader asks"))["status"] == "succeeded"
            assert (await owner.ok({"_": "GetSession", "sessionId": sr}))["session"]["visitorId"] == READER.account_id

            # tokens: each run reserves what is left, and gives back what it did not use
            used = (await alice.ok({"_": "GetAgent", "agentId": agent_id}))["agent"]["publicChatUsage"]
            assert used["messages"] == 2 and 0 < used["tokens"] < 100_000, used
            per_turn = used["tokens"] // 2
            await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True,
                            "limits": {"messagesPerHour": 100, "tokensPerDay": used["tokens"] + per_turn,
                                       "tokensPerDayAll": 10**6}})
            sent = 0
            while sent < 5:
                r = await alice.call({"_": "MessageSession", "sessionId": sa, "content": text(f"again {sent}")})
                if r["_"] == "Error":
                    break
                sent += 1

                async def ended(run_id=r["runId"]):
                    got = (await alice.ok({"_": "GetRun", "runId": run_id}))["run"]
                    return got["status"] in ("succeeded", "failed", "canceled")
                await until(ended, timeout=60)
            assert r["_"] == "Error" and r["status"] == 429 and "tokens a day" in r["message"], r
            assert 1 <= sent <= 3, sent

            # all visitors together: bob has his own day left, but the agent's total is spent
            spent = {}
            for person in (alice, reader, owner):
                spent[person] = (await person.ok({"_": "GetAgent", "agentId": agent_id}))["agent"]["publicChatUsage"]
            spent_all = spent[owner]["tokens"]   # (the owner sees all visitors together)
            assert spent_all == spent[alice]["tokens"] + spent[reader]["tokens"], spent
            assert spent[owner]["messages"] == spent[alice]["messages"] + spent[reader]["messages"] == 3 + sent
            await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True,
                            "limits": {"messagesPerHour": 100, "tokensPerDay": 10**6, "tokensPerDayAll": spent_all}})
            sb = (await bob.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            status, message = await bob.refused({"_": "MessageSession", "sessionId": sb, "content": text("hi")})
            assert status == 429 and "together" in message, message

            # closing: the visitor's live run stops, the next message and session are refused
            await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": True,
                            "limits": {"messagesPerHour": 100, "tokensPerDay": 10**6, "tokensPerDayAll": 10**7}})
            model.hold = asyncio.Event()
            sb2 = (await bob.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            held = await bob.ok({"_": "MessageSession", "sessionId": sb2, "content": text("hold")})
            status, message = await bob.refused({"_": "MessageSession", "sessionId": sb2, "content": text("twice")})
            assert status == 429 and "still being answered" in message, message

            async def status_of(run_id: str) -> str:
                return (await owner.ok({"_": "GetRun", "runId": run_id}))["run"]["status"]

            async def running(run_id: str) -> bool:
                return await status_of(run_id) == "running"
            await until(lambda: running(held["runId"]), timeout=30)
            # a visitor stops its own reply (and only its own)
            assert (await alice.refused({"_": "StopSession", "sessionId": sb2}))[0] == 404
            assert (await bob.ok({"_": "StopSession", "sessionId": sb2}))["stopped"] is True

            async def canceled(run_id: str) -> bool:
                return await status_of(run_id) == "canceled"
            await until(lambda: canceled(held["runId"]), timeout=30)
            held = await bob.ok({"_": "MessageSession", "sessionId": sb2, "content": text("hold")})
            await until(lambda: running(held["runId"]), timeout=30)
            await owner.ok({"_": "SetAgentPublicChat", "agentId": agent_id, "publicChat": False})
            model.hold.set()

            async def stopped():
                run = (await owner.ok({"_": "GetRun", "runId": held["runId"]}))["run"]
                return run["status"] in ("succeeded", "failed", "canceled") and run
            assert (await until(stopped, timeout=30))["status"] == "canceled"
            assert (await bob.refused({"_": "MessageSession", "sessionId": sb2, "content": text("after")}))[0] == 404
            assert (await bob.refused({"_": "GetSession", "sessionId": sb2}))[0] == 404
            assert (await bob.refused({"_": "CreateSession", "agentId": agent_id}))[0] == 404
            # a reader of the agent keeps reading it, but not its visitor session
            assert (await reader.refused({"_": "GetSession", "sessionId": sr}))[0] == 404
            assert (await reader.refused({"_": "CreateSession", "agentId": agent_id}))[0] == 403
            assert "publicChat" not in (await owner.ok({"_": "GetAgent", "agentId": agent_id}))["agent"]
            # the owner keeps every visitor session
            assert (await owner.ok({"_": "GetSession", "sessionId": sb2}))["session"]["visitorId"] == BOB.account_id
        finally:
            await close_all(people)
