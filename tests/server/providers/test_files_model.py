"""What the model receives of a message's attachments, per provider family, through real fake
provider servers on loopback: images inline (in the family's format) when the model accepts
images, text files as text, other files named; a text-only model gets the image named."""
from __future__ import annotations

import base64

import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Script as OpenAIScript
from tests.fakes.sse_base import Script
from tests.server.providers.test_providers_end_to_end import configure, server, session_for, turn  # noqa: F401 (fixture)
from tests.wsraw import V2Client, keypair

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def images_in(type_: str, body: dict) -> list[tuple[str, bytes]]:
    """(mime type, bytes) of every image in the request's last user message."""
    if type_ == "openai":
        content = body["messages"][-1]["content"]
        out = []
        for part in content if isinstance(content, list) else []:
            if part["type"] == "image_url":
                head, data = part["image_url"]["url"].split(",", 1)
                out.append((head[5:].split(";")[0], base64.b64decode(data)))
        return out
    if type_ == "anthropic":
        content = body["messages"][-1]["content"]
        return [(b["source"]["media_type"], base64.b64decode(b["source"]["data"]))
                for b in (content if isinstance(content, list) else []) if b["type"] == "image"]
    parts = body["contents"][-1]["parts"]
    return [(p["inline_data"]["mime_type"], base64.b64decode(p["inline_data"]["data"]))
            for p in parts if "inline_data" in p]


def text_in(type_: str, body: dict) -> str:
    if type_ == "google":
        return "".join(p.get("text", "") for p in body["contents"][-1]["parts"])
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.mark.parametrize("fake_cls, type_, model, vision", [
    (FakeOpenAI, "openai", "gpt-4o-mini", True),
    (FakeAnthropic, "anthropic", "claude-sonnet-4-5", True),
    (FakeGoogle, "google", "gemini-2.0-flash", True),
    (FakeOpenAI, "openai", "gpt-3.5-turbo", False),
])
async def test_the_model_gets_images_text_and_names(server, fake_cls, type_, model, vision):  # noqa: F811
    kp = keypair("M")
    script = (OpenAIScript if fake_cls is FakeOpenAI else Script)(chunks=["ok"])
    async with fake_cls(script) as fake:
        c = await V2Client.open(server.url)
        await configure(c, kp, type_, fake.base_url)
        _, sid = await session_for(c, kp, model=model)
        ids = []
        for name, data, mime in [("cat.png", PNG, "image/png"), ("notes.txt", b"remember the milk", None),
                                 ("bundle.zip", b"PK\x03\x04" + bytes(100), None)]:
            action = {"_": "UploadSessionAttachment", "sessionId": sid, "name": name, "content": data}
            if mime:
                action["mimeType"] = mime
            r = await c.call(kp, action)
            assert r["_"] == "UploadSessionAttachmentResponse", r
            ids.append(r["attachment"]["id"])
        r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [
            {"type": "text", "text": "what is in these?"}, *({"type": "attachment", "id": i} for i in ids)]})
        assert r["_"] == "MessageSessionResponse", r
        _, reply = await turn_done(c)
        assert reply.get("content") == "ok", reply
        body = fake.requests[-1].body
        assert images_in(type_, body) == ([("image/png", PNG)] if vision else [])
        text = text_in(type_, body)
        assert "what is in these?" in text and "remember the milk" in text
        assert "bundle.zip" in text and "cat.png" in text
        await c.close()


async def turn_done(c):
    import asyncio

    from tests.wsraw import flatten

    async with asyncio.timeout(20):
        while True:
            e = await c.event()
            for append in flatten(e):
                if append["event"].get("role") != "user" and append["event"].get("type") in ("message", "error"):
                    return None, append["event"]
