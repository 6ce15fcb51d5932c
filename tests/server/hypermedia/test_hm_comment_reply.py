"""The reference's comment-reply flow, end to end: an agent publishes a document; someone comments
on it; the agent's `document-comment` trigger fires from the HM server's activity feed; the agent
answers in a comment threaded under that comment, which the fake HM server accepts (every
signature and CID checked) and serves back."""
from __future__ import annotations

import json
import time

from seed_agents.protocol.hm import hm_blobs
from seed_agents.server.hypermedia.client import HmClient
from seed_agents.server.main import start_server

from tests.conftest import server_config
from tests.fakes.hm_server import FakeHmServer
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.triggers_helpers import create_trigger, get_trigger
from tests.waiting import until
from tests.wsraw import V2Client, keypair

READER_SEED = bytes(range(7, 39))


def call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


async def test_someone_comments_the_trigger_fires_and_the_agent_answers_in_the_thread(tmp_path, request):
    async with FakeHmServer() as hm, FakeOpenAI() as model:
        server = await start_server(server_config(tmp_path, "sqlite", request, allow_provider_base_url=True,
                                                  hm_server_url=hm.base_url, activity_poll_interval=3600.0))
        try:
            kp = keypair("comment-reply")
            c = await V2Client.open(server.url)
            me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Answering agent"}))["identity"]
            await c.call(kp, {"_": "SetSecret", "name": "k", "value": b"sk-test"})
            await c.call(kp, {"_": "SetModelProvider", "name": "p", "provider": {
                "type": "custom", "baseUrl": model.base_url, "secretRefs": {"apiKey": "k"}}})
            agent_id = (await c.call(kp, {"_": "CreateAgent", "definition": {
                "name": "Answerer", "systemPrompt": "You answer comments.", "modelProvider": "p", "model": "m",
                "signingKey": me["name"]}}))["agentId"]
            doc = f"hm://{me['accountId']}/faq"

            # The agent's document, published by a turn of its own.
            sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            model.enqueue(Script(chunks=[], tool_calls=[call("d", "write", {
                "address": doc, "content": "Ask us anything.", "options": {"name": "FAQ"}})]), Script(chunks=["done"]))
            await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "go"}]})
            await until(lambda: hm.of_type("Ref") and any(b.value.get("path") == "/faq" for b in hm.of_type("Ref")),
                        20, what="the document published")

            trigger = await create_trigger(c, kp, agent_id, {"type": "document-comment", "resource": doc},
                                           name="answer", prompt="Someone commented on your FAQ: answer them.")
            monitor = server.app.triggers.activity
            await until(lambda: monitor.idle, 10, step=0.01, what="the monitor's baseline")

            # Someone else comments on it.
            async with HmClient(hm.base_url, timeout=5) as reader:
                await reader.publish_blobs(hm_blobs.new_account_blobs(READER_SEED, "Reader", 1_767_225_600_000))
                # (now: the monitor skips what happened before its trigger existed)
                asked = await reader.prepare_comment(READER_SEED, "How do kites fly?", doc, int(time.time() * 1000))
                await reader.publish_comment_blob(asked["blob"])
            question = asked["commentId"]

            # The trigger's turn answers in the thread (the model is told the comment's id).
            model.enqueue(Script(chunks=[], tool_calls=[call("r", "write", {
                "address": doc, "content": "With wind under them.",
                "options": {"action": "comment", "replyTo": question}})]), Script(chunks=["answered"]))
            await monitor.poll_once()
            firing = await until(lambda: _first_firing(c, kp, trigger["id"]), 10, what="the firing")
            assert firing["status"] == "created" and firing["activityKey"] == f"blob-{asked['blob'].cid}"

            thread = await until(lambda: hm.comments_on(me["accountId"], "/faq")[1:] or None, 30,
                                 what="the agent's answer")
            answer = thread[0]
            assert answer["author"] == me["accountId"] and answer["replyParent"] == question
            assert answer["threadRoot"] == question and answer["replyParentVersion"] == asked["blob"].cid
            assert answer["content"][0]["block"]["text"] == "With wind under them."
            # What the model was given: the prompt, and the comment (as data) in the context lines.
            events = (await c.call(kp, {"_": "GetSession", "sessionId": firing["sessionId"]}))["events"]
            first = events[0]["event"]
            assert first["content"] == "Someone commented on your FAQ: answer them."
            assert any(asked["blob"].cid in line for line in first.get("contextLines", []))
            await c.close()
        finally:
            await server.stop()


async def _first_firing(c, kp, trigger_id):
    firings = (await get_trigger(c, kp, trigger_id))["firings"]
    return firings[-1] if firings else None
