"""Issue 15: sharing an agent, end to end over real sockets, with an owner, a writer, a reader
and a stranger (each on its own v2 socket; one v1 socket for the v1 error event)."""
from __future__ import annotations

import uuid

import pytest

from tests.wsraw import V1, Party, V2Client, keypair, setup_session

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")

OWNER, WRITER, READER, STRANGER = (keypair("share-owner"), keypair("share-writer"),
                                   keypair("share-reader"), keypair("share-stranger"))


async def parties(server):
    out = []
    for kp in (OWNER, WRITER, READER, STRANGER):
        out.append(Party(kp, await V2Client.open(server.url)))
    return out


async def close(*ps):
    for p in ps:
        await p.client.close()


async def shared(server):
    """An owner's agent and session; WRITER accepted as writer, READER as reader."""
    o, w, r, s = await parties(server)
    agent_id, session_id = await setup_session(o.client, OWNER)
    for p, role in ((w, "writer"), (r, "reader")):
        got = await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id,
                          "accountId": p.kp.account_id, "role": role})
        assert got["collaborator"]["status"] == "pending" and got["collaborator"]["role"] == role
        accepted = await p.ok({"_": "AcceptAgentInvite", "agentId": agent_id})
        assert accepted["agent"]["id"] == agent_id and accepted["agent"]["accessRole"] == role
    return o, w, r, s, agent_id, session_id


def text(t: str) -> list:
    return [{"type": "text", "text": t}]


async def test_invite_accept_list_and_roles(server):
    o, w, r, s = await parties(server)
    try:
        agent_id, session_id = await setup_session(o.client, OWNER)
        inv = await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id,
                          "accountId": READER.account_id, "role": "reader"})
        c = inv["collaborator"]
        assert c["accountId"] == READER.account_id and c["status"] == "pending"
        assert set(c) == {"accountId", "role", "status", "createdAt", "updatedAt"}
        # A pending invitee sees the invitation (name and owner only), and nothing else.
        invites = (await r.ok({"_": "ListAgentInvites"}))["invites"]
        assert invites == [{"agentId": agent_id, "agentName": "Echo", "ownerAccountId": OWNER.account_id,
                            "role": "reader", "createdAt": c["createdAt"], "updatedAt": c["updatedAt"]}]
        assert await r.status({"_": "GetAgent", "agentId": agent_id}) == 404
        assert await r.status({"_": "GetSession", "sessionId": session_id}) == 404
        assert await r.status({"_": "Subscribe", "key": "agents/" + agent_id}) == 404
        assert (await r.ok({"_": "ListAgents"}))["agents"] == []
        accepted = await r.ok({"_": "AcceptAgentInvite", "agentId": agent_id})
        assert accepted["agent"]["accessRole"] == "reader"
        assert (await r.ok({"_": "AcceptAgentInvite", "agentId": agent_id}))["agent"]["id"] == agent_id
        assert (await r.ok({"_": "ListAgentInvites"}))["invites"] == []
        got = await r.ok({"_": "GetAgent", "agentId": agent_id})
        assert got["agent"]["accessRole"] == "reader" and [x["id"] for x in got["sessions"]] == [session_id]
        listed = (await r.ok({"_": "ListAgents"}))["agents"]
        assert [(a["id"], a["accessRole"]) for a in listed] == [(agent_id, "reader")]
        sessions = await r.ok({"_": "ListSessions"})
        assert [x["id"] for x in sessions["sessions"]] == [session_id]
        assert sessions["sessions"][0]["account"] == OWNER.account_id   # the owner's data
        assert [(a["id"], a["accessRole"]) for a in sessions["agents"]] == [(agent_id, "reader")]
        assert [x["id"] for x in (await r.ok({"_": "ListSessions", "agentId": agent_id}))["sessions"]] == [session_id]
        # The collaborator list: owner first; pending invitations only for the owner.
        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": WRITER.account_id,
                    "role": "writer"})
        mine = await o.ok({"_": "ListAgentCollaborators", "agentId": agent_id})
        assert mine["agentId"] == agent_id and mine["publicRead"] is False
        assert [(x["accountId"], x["role"], x["status"]) for x in mine["collaborators"]] == [
            (OWNER.account_id, "owner", "accepted"), (READER.account_id, "reader", "accepted"),
            (WRITER.account_id, "writer", "pending")]
        theirs = await r.ok({"_": "ListAgentCollaborators", "agentId": agent_id})
        assert [x["accountId"] for x in theirs["collaborators"]] == [OWNER.account_id, READER.account_id]
        # Decline: the invitation goes; declining again is 404.
        assert (await w.ok({"_": "DeclineAgentInvite", "agentId": agent_id}))["agentId"] == agent_id
        assert await w.status({"_": "DeclineAgentInvite", "agentId": agent_id}) == 404
        assert await w.status({"_": "AcceptAgentInvite", "agentId": agent_id}) == 404
        assert await w.status({"_": "GetAgent", "agentId": agent_id}) == 404
        # The owner's own listing is unchanged, with its role.
        own = (await o.ok({"_": "ListAgents"}))["agents"]
        assert [(a["id"], a["accessRole"]) for a in own] == [(agent_id, "owner")]
    finally:
        await close(o, w, r, s)


async def test_refusals_and_their_statuses(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        invite = {"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": STRANGER.account_id,
                  "role": "reader"}
        assert await r.status(text_message(session_id)) == 403
        r403 = await r.call(text_message(session_id))
        assert r403["message"] == "Write access is required"
        assert await s.status({"_": "GetAgent", "agentId": agent_id}) == 404
        assert await s.status({"_": "GetSession", "sessionId": session_id}) == 404
        assert await w.status(invite) == 403
        assert (await w.call(invite))["message"] == "Only the agent owner can do this"
        assert await r.status(invite) == 403
        assert await s.status(invite) == 404
        assert await o.status({**invite, "accountId": OWNER.account_id}) == 400
        assert await o.status({**invite, "accountId": "not-an-account"}) == 400
        assert await o.status({**invite, "role": "owner"}) == 400
        assert await o.status({"_": "RemoveAgentCollaborator", "agentId": agent_id,
                               "accountId": STRANGER.account_id}) == 404
        for action in ({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": True},
                       {"_": "DeleteAgent", "agentId": agent_id},
                       {"_": "RemoveAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id}):
            assert await w.status(action) == 403, action
            assert await r.status(action) == 403, action
            assert await s.status(action) == 404, action
        # Reader: reads yes, writes 403.
        run = (await w.ok(text_message(session_id)))["runId"]
        for action in ({"_": "GetAgent", "agentId": agent_id}, {"_": "GetSession", "sessionId": session_id},
                       {"_": "ListRuns", "sessionId": session_id}, {"_": "GetRun", "runId": run},
                       {"_": "ListAgentCollaborators", "agentId": agent_id},
                       {"_": "ListModelProviders", "agentId": agent_id}):
            assert await r.status(action) == 200, action
            assert await s.status(action) == 404, action
        for action in ({"_": "CreateSession", "agentId": agent_id},
                       {"_": "UpdateSession", "sessionId": session_id, "title": "t"},
                       {"_": "StopSession", "sessionId": session_id},
                       {"_": "RetrySession", "sessionId": session_id},
                       {"_": "CancelRun", "runId": run},
                       {"_": "DeleteSession", "sessionId": session_id},
                       {"_": "ListProviderModels", "provider": "echo", "agentId": agent_id},
                       {"_": "UpdateAgent", "agentId": agent_id, "definition": {
                           "name": "x", "systemPrompt": "p", "modelProvider": "echo", "model": "m"}}):
            assert await r.status(action) == 403, action
            assert await s.status(action) == 404, action
        # Writer: those are allowed (the session is the owner's; the provider list the owner's).
        assert await w.status({"_": "ListProviderModels", "provider": "echo", "agentId": agent_id}) == 200
        created = await w.ok({"_": "CreateSession", "agentId": agent_id, "title": "by writer"})
        got = await o.ok({"_": "GetSession", "sessionId": created["sessionId"]})
        assert got["session"]["account"] == OWNER.account_id
        assert await w.status({"_": "UpdateSession", "sessionId": created["sessionId"], "title": "t2"}) == 200
        updated = await w.ok({"_": "UpdateAgent", "agentId": agent_id, "definition": {
            "name": "Renamed", "systemPrompt": "p", "modelProvider": "echo", "model": "m"}})
        assert updated["agent"]["accessRole"] == "writer" and updated["agent"]["definition"]["name"] == "Renamed"
        assert await w.status({"_": "DeleteSession", "sessionId": created["sessionId"]}) == 200
        assert await s.status({"_": "Subscribe", "key": "sessions/" + session_id}) == 404
        assert await s.status({"_": "Subscribe", "key": "runs/" + run}) == 404
    finally:
        await close(o, w, r, s)


async def drain(p: Party) -> None:
    """Everything sent to p before now has arrived (a round trip), and is thrown away."""
    await p.ok({"_": "ListAgentInvites"})
    while not p.client.events.empty():
        p.client.events.get_nowait()


def text_message(session_id: str, t: str = "hello") -> dict:
    return {"_": "MessageSession", "sessionId": session_id, "content": text(t)}


async def test_reinvite_changes_the_role_and_keeps_acceptance(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        assert await r.status(text_message(session_id)) == 403
        await r.ok({"_": "Subscribe", "key": "agents/" + agent_id})
        again = await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id,
                            "accountId": READER.account_id, "role": "writer"})
        assert again["collaborator"]["role"] == "writer" and again["collaborator"]["status"] == "accepted"
        assert await r.status(text_message(session_id)) == 200
        assert (await r.ok({"_": "GetAgent", "agentId": agent_id}))["agent"]["accessRole"] == "writer"
        # The open subscription follows the new role at once.
        await o.ok({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": True})
        change = await r.wait_for(lambda e: e["_"] == "change" and e["key"] == "agents/" + agent_id
                                  and e["value"].get("publicRead") is True)
        assert change["value"]["accessRole"] == "writer"
        # A pending invitation re-invited stays pending, with the new role.
        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": STRANGER.account_id,
                    "role": "writer"})
        pend = await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id,
                           "accountId": STRANGER.account_id, "role": "reader"})
        assert pend["collaborator"]["status"] == "pending" and pend["collaborator"]["role"] == "reader"
        assert [i["role"] for i in (await s.ok({"_": "ListAgentInvites"}))["invites"]] == ["reader"]
        # Down again: the writer's next message is refused.
        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id,
                    "role": "reader"})
        assert await r.status(text_message(session_id)) == 403
    finally:
        await close(o, w, r, s)


async def test_writers_message_is_answered_and_seen_live_by_all_three(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        for p in (o, w, r):
            await p.ok({"_": "Subscribe", "key": "sessions/" + session_id})
            await p.ok({"_": "Subscribe", "key": "agents/" + agent_id})
        sent = await w.ok(text_message(session_id, "from the writer"))
        for p in (o, w, r):
            user = await p.wait_for(lambda e: e["_"] == "append" and e["event"]["id"] == sent["userEventId"])
            meta = user["event"]["event"]["meta"]
            assert meta == {"accountId": WRITER.account_id, "signerId": WRITER.account_id}
            reply = await p.wait_for(lambda e: e["_"] == "append" and e["event"]["event"].get("role") == "assistant")
            assert reply["event"]["event"]["content"] == "echo: from the writer"
        # Live AgentInfo carries each subscriber's own role.
        await o.ok({"_": "UpdateAgent", "agentId": agent_id, "definition": {
            "name": "Again", "systemPrompt": "p", "modelProvider": "echo", "model": "m"}})
        for p, role in ((o, "owner"), (w, "writer"), (r, "reader")):
            change = await p.wait_for(lambda e: e["_"] == "change" and e["key"] == "agents/" + agent_id
                                      and e["value"].get("definition", {}).get("name") == "Again")
            assert change["value"]["accessRole"] == role
        # The run is the owner's.
        run = (await o.ok({"_": "GetRun", "runId": sent["runId"]}))["run"]
        assert run["account"] == OWNER.account_id
    finally:
        await close(o, w, r, s)


async def test_public_read(server):
    o, w, r, s = await parties(server)
    try:
        agent_id, session_id = await setup_session(o.client, OWNER)
        assert await s.status({"_": "GetAgent", "agentId": agent_id}) == 404
        got = await o.ok({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": True})
        assert got["agent"]["publicRead"] is True and got["agent"]["accessRole"] == "owner"
        agent = (await s.ok({"_": "GetAgent", "agentId": agent_id}))["agent"]
        assert agent["accessRole"] == "reader" and agent["publicRead"] is True
        assert await s.status({"_": "GetSession", "sessionId": session_id}) == 200
        assert await s.status(text_message(session_id)) == 403
        assert (await s.ok({"_": "ListAgents"}))["agents"] == []    # public agents are never listed
        assert (await s.ok({"_": "ListSessions"}))["sessions"] == []
        assert (await s.ok({"_": "ListAgentCollaborators", "agentId": agent_id}))["publicRead"] is True
        await s.ok({"_": "Subscribe", "key": "sessions/" + session_id})
        await o.ok({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": False})
        end = await s.wait_for(lambda e: e["_"] == "error")
        assert end["key"] == "sessions/" + session_id and end["status"] == 404
        assert await s.status({"_": "GetAgent", "agentId": agent_id}) == 404
        assert await s.status({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": "yes"}) == 400
    finally:
        await close(o, w, r, s)


async def test_removal_ends_subscriptions_with_an_error_event_v1_and_v2(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    v1 = await V1.open(server.url)
    try:
        got = await v1.send(READER, {"_": "Subscribe", "key": "agents/" + agent_id})
        assert got["_"] == "subscribed", got
        first = await v1.recv()
        assert first["_"] == "change" and first["value"]["accessRole"] == "reader"
        await r.ok({"_": "Subscribe", "key": "sessions/" + session_id})
        removed = await o.ok({"_": "RemoveAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id})
        assert removed == {"_": "RemoveAgentCollaboratorResponse", "agentId": agent_id,
                           "accountId": READER.account_id}
        end = await v1.recv()
        assert end["_"] == "error" and end["status"] == 404 and end["key"] == "agents/" + agent_id
        assert "removed" in end["message"]
        end2 = await r.wait_for(lambda e: e["_"] == "error")
        assert end2["key"] == "sessions/" + session_id
        # Nothing more: the owner writes, the reader's sockets stay quiet; the next action is 404.
        await drain(r)
        await o.ok(text_message(session_id))
        await o.ok({"_": "GetSession", "sessionId": session_id})
        await r.client.answer_is_next_frame(READER)
        assert await r.status({"_": "GetAgent", "agentId": agent_id}) == 404
        assert await r.status({"_": "Subscribe", "key": "sessions/" + session_id}) == 404
        nxt = await v1.send(READER, {"_": "ListAgents"})
        assert nxt["_"] == "ListAgentsResponse" and nxt["agents"] == []
    finally:
        await v1.close()
        await close(o, w, r, s)


async def test_account_notices_reach_owner_and_accounts_concerned(server):
    o, w, r, s = await parties(server)
    try:
        agent_id, session_id = await setup_session(o.client, OWNER)
        for p in (o, w, r):
            await p.ok({"_": "Subscribe", "key": "account/" + p.kp.account_id})

        def notice(p, reason):
            key = "account/" + p.kp.account_id
            return p.wait_for(lambda e: e["_"] == "change" and e["key"] == key
                              and e["value"].get("reason") == reason and e["value"].get("agentId") == agent_id)

        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id,
                    "role": "reader"})
        await notice(o, "agent-collaborators-changed")
        await notice(r, "agent-invites-changed")
        await r.ok({"_": "AcceptAgentInvite", "agentId": agent_id})
        await notice(o, "agent-collaborators-changed")
        await notice(r, "agent-invites-changed")
        # A shared agent's notices reach the collaborator's own account key.
        await o.ok(text_message(session_id))
        await notice(r, "session-event")
        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": WRITER.account_id,
                    "role": "writer"})
        await notice(w, "agent-invites-changed")
        await notice(r, "agent-collaborators-changed")
        await w.ok({"_": "DeclineAgentInvite", "agentId": agent_id})
        await notice(w, "agent-invites-changed")
        await o.ok({"_": "RemoveAgentCollaborator", "agentId": agent_id, "accountId": READER.account_id})
        await notice(r, "agent-collaborators-changed")
        await drain(r)
        await o.ok(text_message(session_id, "after"))
        await notice(o, "session-event")
        await r.client.answer_is_next_frame(READER)   # no more notices of that agent for the reader
    finally:
        await close(o, w, r, s)


async def test_delete_agent_ends_guests_and_tells_them(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        await r.ok({"_": "Subscribe", "key": "account/" + READER.account_id})
        await r.ok({"_": "Subscribe", "key": "sessions/" + session_id})
        run = (await o.ok(text_message(session_id)))["runId"]
        await w.ok({"_": "Subscribe", "key": "runs/" + run})
        await o.ok({"_": "DeleteAgent", "agentId": agent_id})
        end = await r.wait_for(lambda e: e["_"] == "error")
        assert end["key"] == "sessions/" + session_id and "deleted" in end["message"]
        await r.wait_for(lambda e: e["_"] == "change" and e["value"].get("reason") == "agent-deleted")
        assert (await w.wait_for(lambda e: e["_"] == "error"))["key"] == "runs/" + run
        assert (await r.ok({"_": "ListAgents"}))["agents"] == []
        assert await w.status({"_": "GetAgent", "agentId": agent_id}) == 404
    finally:
        await close(o, w, r, s)


async def test_missing_agent_and_foreign_look_alike_for_sharing_actions(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        missing = str(uuid.uuid4())
        for make in (lambda i: {"_": "ListAgentCollaborators", "agentId": i},
                     lambda i: {"_": "SetAgentPublicRead", "agentId": i, "publicRead": True}):
            a = await s.call(make(agent_id))
            b = await s.call(make(missing))
            assert a["status"] == b["status"] == 404
            assert a["message"].replace(agent_id, "<id>") == b["message"].replace(missing, "<id>")
    finally:
        await close(o, w, r, s)


async def test_list_sessions_pages_own_and_shared_as_one_list(server):
    o, w, r, s, agent_id, session_id = await shared(server)
    try:
        for i in range(3):
            await o.ok({"_": "CreateSession", "agentId": agent_id, "title": f"o{i}"})
        mine, _ = await setup_session(r.client, READER)
        await r.ok({"_": "CreateSession", "agentId": mine, "title": "r1"})
        everything = (await r.ok({"_": "ListSessions", "limit": 100}))["sessions"]
        assert len(everything) == 6   # 4 of the shared agent, 2 of the reader's own
        order = [(x["updatedAt"], x["id"]) for x in everything]
        assert order == sorted(order, reverse=True)
        paged, cursor = [], None
        while True:
            action = {"_": "ListSessions", "limit": 2}
            if cursor is not None:
                action["cursor"] = cursor
            page = await r.ok(action)
            paged += page["sessions"]
            roles = {a["id"]: a["accessRole"] for a in page["agents"]}
            assert all(roles[x["agentId"]] == ("owner" if x["agentId"] == mine else "reader")
                       for x in page["sessions"])
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert [x["id"] for x in paged] == [x["id"] for x in everything]
        # The stranger's listing shows none of it; the owner's shows only its own.
        assert (await s.ok({"_": "ListSessions"}))["sessions"] == []
        assert {x["agentId"] for x in (await o.ok({"_": "ListSessions"}))["sessions"]} == {agent_id}
    finally:
        await close(o, w, r, s)
