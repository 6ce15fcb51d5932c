"""An agent's hm:// writes over the wire (a real server, a scripted model, the fake HM server): the
"Publish Seed content" grant holds, a comment and a threaded reply are published with the
reference's result fields, and a collaborator's turn publishes under the agent's grants and
identities, never the collaborator's."""
from __future__ import annotations

import asyncio
import json

import pytest

from seed_agents.server.main import start_server

from tests.conftest import server_config
from tests.fakes.hm_server import FakeHmServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.wsraw import V2Client, flatten, keypair

NOT_GRANTED = 'Publishing is not enabled for this agent. The owner can grant "Publish Seed content"'


@pytest.fixture
async def hm():
    async with FakeHmServer() as h:
        yield h


@pytest.fixture
async def server(tmp_path, hm, storage, request):
    running = await start_server(server_config(tmp_path, storage, request, allow_provider_base_url=True,
                                               hm_server_url=hm.base_url))
    try:
        yield running
    finally:
        await running.stop()


def call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


async def make_agent(c, kp, base_url, **definition):
    assert (await c.call(kp, {"_": "SetSecret", "name": "k", "value": b"sk-test"}))["_"] == "SetSecretResponse"
    provider = {"type": "custom", "baseUrl": base_url, "secretRefs": {"apiKey": "k"}}
    assert (await c.call(kp, {"_": "SetModelProvider", "name": "p", "provider": provider}))["_"] \
        == "SetModelProviderResponse"
    r = await c.call(kp, {"_": "CreateAgent", "definition": {
        "name": "Writer", "systemPrompt": "You publish.", "modelProvider": "p", "model": "m", **definition}})
    return r["agentId"]


async def open_session(c, kp, agent_id):
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    await c.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
    await c.event_where(lambda e: e.get("_") == "replayed")
    return sid


async def run_turn(c, kp, sid, text="go", timeout=30):
    """Send a message; the tool results of the turn, in order, once the session settles."""
    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    appends = []
    async with asyncio.timeout(timeout):
        while True:
            e = await c.event()
            appends += flatten(e)
            if e["_"] == "change" and e["key"] == f"sessions/{sid}" and e["value"]["status"] != "streaming" \
                    and any(a["event"].get("type") in ("message", "error") and a["event"].get("role") != "user"
                            for a in appends):
                return [a["event"] for a in appends if a["event"].get("type") == "tool_result"]


@pytest.mark.storages("sqlite", "postgresql")
async def test_the_publish_grant_holds(server, hm):
    kp = keypair("grant-owner")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Granted"}))["identity"]
    doc = f"hm://{me['accountId']}/notes"
    async with FakeOpenAI() as fake:
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("w1", "write", {"address": doc, "content": "hi", "options": {"name": "Notes"}}),
            call("w2", "write", {"address": doc, "content": "hi", "options": {"action": "comment"}})]),
            Script(chunks=["done"]))
        denied = await make_agent(c, kp, fake.base_url, signingKey=me["name"], tools=["search"])
        published = len(hm.published)
        results = await run_turn(c, kp, await open_session(c, kp, denied))
        assert [NOT_GRANTED in (r.get("error") or "") for r in results] == [True, True]
        assert len(hm.published) == published

        fake.enqueue(Script(chunks=[], tool_calls=[
            call("w3", "write", {"address": doc, "content": "hi", "options": {"name": "Notes"}})]),
            Script(chunks=["done"]))
        r = await c.call(kp, {"_": "UpdateAgent", "agentId": denied, "definition": {
            "name": "Writer", "systemPrompt": "You publish.", "modelProvider": "p", "model": "m",
            "signingKey": me["name"], "tools": ["search", "publish"]}})
        assert r["_"] == "GetAgentResponse", r
        results = await run_turn(c, kp, await open_session(c, kp, denied))
        assert results[0]["output"]["command"] == "document.create", results
        assert len(hm.published) == published + 1
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_an_agent_comments_and_replies_in_a_thread(server, hm):
    kp = keypair("commenter")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Commenter"}))["identity"]
    doc = f"hm://{me['accountId']}/owls"
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"])
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("d", "write", {"address": doc, "content": "Owls are brown.", "options": {"name": "Owls"}}),
            call("c1", "write", {"address": doc, "content": "First thought.", "options": {"action": "comment"}})]),
            Script(chunks=["ok"]))
        first = await run_turn(c, kp, sid)
        comment = first[1]["output"]
        assert comment["command"] == "comment.create" and comment["type"] == "hypermedia_write_result"
        assert comment["signer"]["publicKey"] == me["accountId"] and comment["message"] == "comment.create completed"
        assert comment["target"] == doc and comment["targetName"] == "Owls"
        assert comment["commentUrl"] == f"{doc}/:comments/{comment['commentId']}"
        assert comment["authorUrl"] == f"hm://{me['accountId']}" and comment["cids"] == [comment["commentCid"]]

        fake.enqueue(Script(chunks=[], tool_calls=[
            call("c2", "write", {"address": doc, "content": "A reply.",
                                 "options": {"action": "comment", "replyTo": comment["commentUrl"]}}),
            call("c3", "write", {"address": doc, "content": "x", "options": {"action": "comment", "name": "n"}}),
            call("r", "read", {"address": f"{doc}/:comments"})]),
            Script(chunks=["ok"]))
        second = await run_turn(c, kp, sid)
        reply = second[0]["output"]
        assert reply["replyCommentId"] == comment["commentId"]
        assert "refused, not ignored" in second[1]["error"] and "name" in second[1]["error"]
        listed = second[2]["output"]["comments"]
        assert [x["id"] for x in listed] == [comment["commentId"], reply["commentId"]]
        assert listed[1]["replyParent"] == comment["commentId"] and "A reply." in listed[1]["markdown"]
    held = hm.comments_on(me["accountId"], "/owls")
    assert held[1]["replyParentVersion"] == comment["commentCid"]
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_a_collaborator_s_turn_publishes_as_the_agent_s_identity(server, hm):
    owner, writer = keypair("collab-owner"), keypair("collab-writer")
    o = await V2Client.open(server.url)
    w = await V2Client.open(server.url)
    mine = (await o.call(owner, {"_": "CreateSigningIdentity", "label": "Owner's"}))["identity"]
    theirs = (await w.call(writer, {"_": "CreateSigningIdentity", "label": "Writer's"}))["identity"]
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(o, owner, fake.base_url, signingKey=mine["name"])
        r = await o.call(owner, {"_": "InviteAgentCollaborator", "agentId": agent_id,
                                 "accountId": writer.account_id, "role": "writer"})
        assert r["_"] == "InviteAgentCollaboratorResponse", r
        assert (await w.call(writer, {"_": "AcceptAgentInvite", "agentId": agent_id}))["_"] \
            == "AcceptAgentInviteResponse"
        sid = await open_session(w, writer, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            # The collaborator's own identity (same name, their account) is not the agent's to use.
            call("x", "write", {"address": f"hm://{theirs['accountId']}/x", "content": "hi",
                                "options": {"name": "X", "signer": theirs["accountId"]}}),
            call("y", "write", {"address": f"hm://{mine['accountId']}/y", "content": "hi",
                                "options": {"name": "Y"}})]),
            Script(chunks=["ok"]))
        results = await run_turn(w, writer, sid)
        assert "you can publish only as" in results[0]["error"]
        assert results[1]["output"]["signer"]["publicKey"] == mine["accountId"]
    published = [b for call_ in hm.published for b in call_ if b.type == "Ref"]
    assert {b.value.get("path") for b in published} == {None, "/y"}  # the owner's home, then /y
    await o.close()
    await w.close()


async def test_an_agent_moves_forks_redirects_and_deletes(server, hm):
    kp = keypair("mover")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Mover"}))["identity"]
    base = f"hm://{me['accountId']}"
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"])
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("a", "write", {"address": f"{base}/a", "content": "A text.", "options": {"name": "A"}}),
            call("b", "write", {"address": f"{base}/a", "options": {"action": "move", "toPath": "/b"}}),
            call("c", "write", {"address": f"{base}/c", "options": {"action": "fork", "fromUrl": f"{base}/b"}}),
            call("d", "write", {"address": f"{base}/c", "options": {"action": "delete"}}),
            call("e", "write", {"address": f"{base}/b", "options": {"action": "redirect", "toUrl": f"{base}/b"}}),
            call("f", "write", {"address": f"{base}/b", "options": {"action": "delete", "toPath": "/x"}}),
            call("g", "read", {"address": f"{base}/a"}),
            call("h", "read", {"address": f"{base}/c"})]),
            Script(chunks=["ok"]))
        results = await run_turn(c, kp, sid)
        moved, forked, deleted = results[1]["output"], results[2]["output"], results[3]["output"]
        assert moved["command"] == "document.move" and moved["destination"] == f"{base}/b"
        assert moved["redirect"]["target"] == f"{base}/b"
        assert forked["command"] == "document.fork" and forked["id"] == f"{base}/c"
        assert deleted["command"] == "document.delete" and len(deleted["cids"]) == 1
        assert "itself" in results[4]["error"]
        assert "refused, not ignored" in results[5]["error"] and "toPath" in results[5]["error"]
        assert "A text." in results[6]["output"]["markdown"]   # the old address redirects to the new
        assert "was deleted" in results[7]["error"]
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_ipfs_files_go_up_from_memory_and_come_back_verified(server, hm):
    kp = keypair("ipfs-user")
    c = await V2Client.open(server.url)
    big = "kite " * 40_000   # 200 000 bytes (a tool call's arguments are at most 256 KiB): one raw leaf
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url)
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("m1", "write", {"address": "~/memory/notes.md", "content": "Hello IPFS"}),
            call("m2", "write", {"address": "~/memory/big.txt", "content": big}),
            call("u1", "write", {"address": "ipfs://", "options": {"fromPath": "~/memory/notes.md"}}),
            call("u2", "write", {"address": "ipfs://", "options": {"fromPath": "big.txt"}}),
            call("u3", "write", {"address": "ipfs://", "options": {"fromPath": "nothing.md"}}),
            call("u4", "write", {"address": "ipfs://", "options": {"path": "x"}})]),
            Script(chunks=["ok"]))
        results = await run_turn(c, kp, sid)
        assert "output" in results[3], results[3].get("error")
        small, large = results[2]["output"], results[3]["output"]
        assert small["url"] == f"ipfs://{small['cid']}" and small["size"] == 10 and small["path"] == "notes.md"
        assert large["cid"].startswith("bafkrei") and large["size"] == len(big)
        assert "no file" in results[4]["error"] and "refused, not ignored" in results[5]["error"]
        assert hm.file(large["cid"]) == big.encode()

        fake.enqueue(Script(chunks=[], tool_calls=[
            call("r1", "read", {"address": f"ipfs://{small['cid']}"}),
            call("r2", "read", {"address": f"ipfs://{large['cid']}", "options": {"path": "copies/big.txt"}}),
            call("r3", "read", {"address": "~/memory/copies/"}),
            call("r4", "read", {"address": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"})]),
            Script(chunks=["ok"]))
        results = await run_turn(c, kp, sid)
        assert results[0]["output"]["content"] == "Hello IPFS" and results[0]["output"]["path"] == f"ipfs/{small['cid']}"
        # (the big file's result is cut by --max-tool-output-chars; its copy in memory is whole)
        assert "output" in results[1] and "copies/big.txt" in json.dumps(results[1]["output"])
        assert results[2]["output"]["entries"] == [{"path": "copies/big.txt", "type": "file", "size": len(big)}]
        assert "has no file" in results[3]["error"]
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_an_agent_edits_and_deletes_its_own_comments_only(server, hm):
    """comment.update and comment.delete (the reference's raw commands, their fields in
    options.input): the author's comment is replaced on its thread; someone else's is refused."""
    kp = keypair("comment-editor")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Editor"}))["identity"]
    other = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Other"}))["identity"]
    doc = f"hm://{me['accountId']}/kites"
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url, signingKeys=[me["name"], other["name"]])
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("d", "write", {"address": doc, "content": "Kites fly.", "options": {"name": "Kites"}}),
            call("c1", "write", {"address": doc, "content": "First.", "options": {"action": "comment"}}),
            call("c2", "write", {"address": doc, "content": "By the other.",
                                 "options": {"action": "comment", "signer": other["accountId"]}})]),
            Script(chunks=["ok"]))
        made = await run_turn(c, kp, sid)
        first, theirs = made[1]["output"], made[2]["output"]
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("u", "write", {"address": doc, "content": "First, **edited**.",
                                "options": {"action": "comment.update", "input": {"commentId": first["commentUrl"]}}}),
            call("x", "write", {"address": doc, "content": "Not mine.",
                                "options": {"action": "comment.update", "input": {"commentId": theirs["commentId"]}}}),
            call("y", "write", {"address": doc, "options": {"action": "comment.delete", "commentId": "z"}}),
            call("r", "read", {"address": f"{doc}/:comments"})]),
            Script(chunks=["ok"]))
        edited = await run_turn(c, kp, sid)
        updated = edited[0]["output"]
        assert updated["command"] == "comment.update" and updated["commentId"] == first["commentId"]
        assert updated["signer"]["publicKey"] == me["accountId"] and len(updated["cids"]) == 1
        assert "can only edit or delete its own comments" in edited[1]["error"]
        assert "refused, not ignored" in edited[2]["error"] and "commentId" in edited[2]["error"]
        listed = {x["id"]: x for x in edited[3]["output"]["comments"]}
        assert "First, **edited**." in listed[first["commentId"]]["markdown"]
        assert "By the other." in listed[theirs["commentId"]]["markdown"]
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("z", "write", {"address": doc, "options": {"action": "comment.delete", "dryRun": True,
                                                            "input": {"commentId": first["commentId"]}}}),
            call("z2", "write", {"address": doc, "dryRun": True,
                                 "options": {"action": "comment.delete", "input": {"commentId": first["commentId"]}}}),
            call("z3", "write", {"address": doc,
                                 "options": {"action": "comment.delete", "input": {"commentId": first["commentId"]}}}),
            call("r2", "read", {"address": f"{doc}/:comments"})]),
            Script(chunks=["ok"]))
        gone = await run_turn(c, kp, sid)
        assert "refused, not ignored" in gone[0]["error"]
        assert gone[1]["output"]["dryRun"] is True
        assert gone[2]["output"]["command"] == "comment.delete"
        assert [x["id"] for x in gone[3]["output"]["comments"]] == [theirs["commentId"]]
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_document_metadata_with_a_body_and_alone(server, hm):
    """options.metadata over the front matter (options.name wins), and an update with no content:
    the metadata changes, the body stays."""
    kp = keypair("metadata-writer")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Meta"}))["identity"]
    doc = f"hm://{me['accountId']}/gulls"
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"])
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("a", "write", {"address": doc, "content": "---\nname: Front\nsummary: old\n---\nGulls are loud.",
                                "options": {"name": "Gulls", "metadata": {"summary": "Seabirds", "tags": ["x"]}}}),
            call("b", "write", {"address": doc, "options": {"action": "update",
                                                            "metadata": {"summary": "Loud seabirds", "cover": "ipfs://bafkqaaa"}}}),
            call("c", "write", {"address": doc, "options": {"action": "update", "metadata": "summary"}}),
            call("d", "write", {"address": doc, "options": {"action": "update"}}),
            call("e", "read", {"address": f"{doc}/:attributes"}),
            call("f", "read", {"address": doc})]),
            Script(chunks=["ok"]))
        results = await run_turn(c, kp, sid)
    created, updated = results[0]["output"], results[1]["output"]
    assert created["command"] == "document.create" and created["metadata"] == {
        "summary": "Seabirds", "tags": ["x"], "name": "Gulls"}
    assert updated["command"] == "document.update" and updated["version"] != created["version"]
    assert "must be an object" in results[2]["error"]
    assert "options.metadata / options.name alone" in results[3]["error"]
    attributes = results[4]["output"]["metadata"]
    assert attributes["name"] == "Gulls" and attributes["summary"] == "Loud seabirds"
    assert attributes["cover"] == "ipfs://bafkqaaa" and attributes["tags"] == ["x"]
    assert "Gulls are loud." in results[5]["output"]["markdown"]   # the body untouched
    change = [b for b in hm.published[-1] if b.type == "Change"][0]
    assert change.value["body"]["ops"] == [{"type": "SetAttributes", "attrs": [
        {"key": ["summary"], "value": "Loud seabirds"}, {"key": ["cover"], "value": "ipfs://bafkqaaa"}]}]
    await c.close()


@pytest.mark.storages("sqlite", "postgresql")
async def test_drafts_are_kept_until_published(server, hm):
    """draft.create / update / get / list / delete / publish, as the reference's raw commands:
    kept in the store (nothing reaches the HM server) until draft.publish, which publishes the
    draft's blocks as a new document, or as a new version of its edit target."""
    kp = keypair("drafter")
    c = await V2Client.open(server.url)
    me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Drafter"}))["identity"]
    base = f"hm://{me['accountId']}"
    async with FakeOpenAI() as fake:
        agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"])
        sid = await open_session(c, kp, agent_id)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("a", "write", {"address": f"{base}/plans", "content": "Plan **one**.",
                                "options": {"action": "draft.create", "name": "Plans", "metadata": {"summary": "s"}}}),
            call("b", "write", {"address": f"{base}/x", "content": "No name.", "options": {"action": "draft.create"}}),
            call("c", "write", {"address": base, "content": "Scrap.",
                                "options": {"action": "draft.create", "name": "Scrap"}})]),
            Script(chunks=["ok"]))
        made = await run_turn(c, kp, sid)
        plans, scrap = made[0]["output"], made[2]["output"]
        assert plans["command"] == "draft.create" and plans["name"] == "Plans" and "signer" not in plans
        assert plans["metadata"] == {"summary": "s", "name": "Plans"}
        assert "requires a name" in made[1]["error"]
        published_before = len(hm.published)
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("u", "write", {"address": base, "content": "Plan **two**.",
                                "options": {"action": "draft.update", "input": {"draftId": plans["draftId"]}}}),
            call("g", "write", {"address": base, "options": {"action": "draft.get",
                                                             "input": {"draftId": plans["draftId"]}}}),
            call("d", "write", {"address": base, "options": {"action": "draft.delete",
                                                             "input": {"draftId": scrap["draftId"]}}}),
            call("l", "write", {"address": base, "options": {"action": "draft.list"}}),
            call("g2", "write", {"address": base, "options": {"action": "draft.get",
                                                              "input": {"draftId": scrap["draftId"]}}})]),
            Script(chunks=["ok"]))
        kept = await run_turn(c, kp, sid)
        assert len(hm.published) == published_before   # drafts stay here
        got = kept[1]["output"]
        assert "Plan **two**." in got["markdown"] and got["status"] == "idle" and got["path"] == "/plans"
        assert kept[2]["output"]["status"] == "deleted"
        assert [(d["id"], d["name"]) for d in kept[3]["output"]["drafts"]] == [(plans["draftId"], "Plans")]
        assert "Draft not found" in kept[4]["error"]
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("p", "write", {"address": base, "options": {"action": "draft.publish",
                                                             "input": {"draftId": plans["draftId"]}}}),
            call("r", "read", {"address": f"{base}/plans"}),
            call("e", "write", {"address": base, "content": "Plan **three**.",
                                "options": {"action": "draft.create", "name": "Plans",
                                            "input": {"edit": f"{base}/plans"}}})]),
            Script(chunks=["ok"]))
        done = await run_turn(c, kp, sid)
        published = done[0]["output"]
        assert published["command"] == "draft.publish" and published["published"] == "document.create"
        assert published["id"] == f"{base}/plans" and published["signer"]["publicKey"] == me["accountId"]
        assert [b.type for b in hm.published[-1]] == ["Change", "Change", "Ref"]
        # (new content replaces the draft's metadata with its own, as the reference's draft.update;
        # the name stays the draft's)
        assert "Plan **two**." in done[1]["output"]["markdown"] and done[1]["output"]["metadata"] == {"name": "Plans"}
        edit_id = done[2]["output"]["draftId"]
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("p2", "write", {"address": base, "options": {"action": "draft.publish",
                                                              "input": {"draftId": edit_id}}}),
            call("r2", "read", {"address": f"{base}/plans"}),
            call("l2", "write", {"address": base, "options": {"action": "draft.list"}})]),
            Script(chunks=["ok"]))
        edited = await run_turn(c, kp, sid)
        assert edited[0]["output"]["published"] == "document.update", edited
        assert "Plan **three**." in edited[1]["output"]["markdown"]
        assert {d["status"] for d in edited[2]["output"]["drafts"]} == {"published"}
    await c.close()
