"""The world the authority tests run in (tests/server/handlers/test_access_matrix.py, tests/hostile/test_authority_findings.py):
a server child process on SQLite or PostgreSQL, its fakes (a Seed HM server with an activity feed,
a scripted OpenAI-style model, a web page and SearXNG) on a background event loop, and accounts
in every role on a shared agent, spoken to over HTTP (`POST /api/message`, signed envelopes).

The owner has a shared agent A (a writer and a reader collaborator, a session SA with a run and
an attachment), a public agent P (public read on, a session SP), an agent V open to visitors
(public chat on, public read off: the owner's session SO with its run RV, and the visitor's own
session SV), and a private agent B whose session SB holds a secret nobody else may read (and its
run RB). A stranger has no role at all.
"""
from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.fakes.hm_server import FakeHmServer
from tests.fakes.loopback import send_json
from tests.fakes.mcp_server import McpFake
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.fakes.web_server import FakeWeb
from tests.pg import PG_URL_ENV, with_schema
from tests.procs import ServerProcess
from tests.wsraw import keypair

SECRET = "my bank PIN is 4321"     # in the owner's private session: nobody else may read it
PIN = "4321"
PERSONS = ("owner", "writer", "reader", "public", "stranger", "visitor")
# What the owner grants visitors of P (public chat): a network callable and P's MCP tool.
VISITOR_TOOLS = ["navigate", "calc__add"]


class Background:
    """An event loop in a daemon thread, for the fakes of synchronous tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="authority-fakes", daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 10.0):  # noqa: ANN001, ANN201
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class FeedHm(FakeHmServer):
    """The fake HM server, also answering the activity feed (`GET /api/ListEvents`, empty) and
    remembering the query each feed read and search sent (whose account it asked as)."""

    def __init__(self) -> None:
        super().__init__()
        self.feed_queries: list[dict] = []
        self.search_queries: list[dict] = []

    async def _route(self, request, writer) -> None:  # noqa: ANN001
        url = urlsplit(request.path)
        if (request.method, url.path) == ("GET", "/api/ListEvents"):
            self.feed_queries.append(dict(parse_qsl(url.query)))
            return await send_json(writer, 200, {"json": {"events": [], "nextPageToken": ""}})
        if (request.method, url.path) == ("GET", "/api/Search"):
            self.search_queries.append(dict(parse_qsl(url.query)))
        return await super()._route(request, writer)


def first_user(body: dict) -> str:
    """The first user message's text, without the <message_sender> block a shared agent's model
    sees in front of a person's message (protocol/agent/preamble.py)."""
    for m in body.get("messages", ()):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return re.sub(r"\A<message_sender>\n.*?\n</message_sender>\n\n", "", m["content"], flags=re.S)
    return ""


class Model:
    """The scripted model: a turn whose first message is a key of `plans` makes that plan's tool
    calls, step by step, then answers "done"; anything else is answered "ok"."""

    def __init__(self) -> None:
        self.plans: dict[str, list[list[dict]]] = {}

    def __call__(self, request) -> Script:  # noqa: ANN001
        body = request.body or {}
        steps = self.plans.get(first_user(body).strip())
        if steps is None:
            return Script(chunks=["ok"])
        # Each step's calls are answered before the next request: the next step is the first whose
        # calls the conversation does not hold yet (by id: a turn resumed after its delegate calls
        # parked may hand back its earlier steps merged into fewer assistant messages).
        made = {c.get("id") for m in body.get("messages", ()) if m.get("role") == "assistant"
                for c in m.get("tool_calls") or ()}
        for step in steps:
            if not all(c["id"] in made for c in step):
                return Script(chunks=[], tool_calls=step)
        return Script(chunks=["done"])


class Api:
    """Signed actions over HTTP, answered as decoded maps (an error: `{_: Error, status}`)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=4))

    def call(self, kp, action: dict) -> dict:  # noqa: ANN001
        r = self.http.post(self.base + "/api/message", content=sign_envelope(kp, action, ts=unique_ts()),
                           headers={"Content-Type": "application/cbor", "Accept": "application/cbor"})
        answer = dagcbor.decode(r.content, max_size=max(len(r.content), 1), max_items=None)
        if answer.get("_") == "Error":
            assert answer["status"] == r.status_code, (answer, r.status_code)
        return answer

    def ok(self, kp, action: dict) -> dict:  # noqa: ANN001
        answer = self.call(kp, action)
        assert answer.get("_") != "Error", (action["_"], answer)
        return answer

    def events(self, kp, session_id: str) -> list[dict]:  # noqa: ANN001
        return [e["event"] if "event" in e else e for e in self.ok(kp, {"_": "GetSession", "sessionId": session_id,
                                                                          "limit": 1000}).get("events", [])]

    def close(self) -> None:
        self.http.close()


def until(what: str, check, timeout: float = 30.0, step: float = 0.05):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(step)


@dataclass
class World:
    storage: str
    api: Api
    server: ServerProcess
    hm: FeedHm
    web: FakeWeb
    model: Model
    fakes: Background
    model_fake: FakeOpenAI
    mcp: McpFake
    keys: dict = field(default_factory=dict)      # role -> keypair
    ids: dict = field(default_factory=dict)       # names of the world's things -> ids
    base_definition: dict = field(default_factory=dict)

    def kp(self, role: str):  # noqa: ANN201
        return self.keys[role]

    def session_of(self, role: str) -> str:
        """The session a person's InvokeSessionTool names: the public agent's for `public`, the
        visitor's own for `visitor`."""
        return {"public": self.ids["sp"], "visitor": self.ids.get("sv", "")}.get(role, self.ids["sa"])

    def agent_of(self, role: str) -> str:
        return {"public": self.ids["p"], "visitor": self.ids.get("v", "")}.get(role, self.ids["a"])

    def invoke(self, role: str, verb: str, tool_input: dict, session_id: str | None = None) -> dict:
        return self.api.call(self.kp(role), {"_": "InvokeSessionTool", "sessionId": session_id or self.session_of(role),
                                             "verb": verb, "input": tool_input})

    def wait_idle(self, session_id: str, timeout: float = 30.0) -> dict:
        owner = self.kp("owner")
        return until(f"session {session_id} idle", lambda: (
            s := self.api.ok(owner, {"_": "GetSession", "sessionId": session_id, "limit": 1})["session"]
        )["status"] != "streaming" and s, timeout)

    def close(self) -> None:
        self.api.close()
        self.server.kill()
        self.fakes.run(self.hm.close())
        self.fakes.run(self.web.close())
        self.fakes.run(self.model_fake.close())
        self.fakes.run(self.mcp.stop())
        self.fakes.close()


def pg_schema_url() -> tuple[str, callable]:
    """A fresh PostgreSQL schema for one module's server, and its drop."""
    import os

    import psycopg

    base = os.environ[PG_URL_ENV]
    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    return with_schema(base, schema), drop


LAMBDA = "double"   # agent A's authored tool
MCP_KEY = "mcp-secret-key"   # the MCP server's secret header (the owner's)
MCP_TOOL = "calc__add"       # agent A's tool from the owner's MCP server `calc` (the SDK's own server)


def start_world(data_dir: Path, storage: str, storage_url: str | None = None, *, flags: tuple[str, ...] = (),
                label: str = "") -> World:
    fakes = Background()
    hm, web, model = FeedHm(), FakeWeb(), Model()
    model_fake = FakeOpenAI(model)
    for fake in (hm, web, model_fake):
        fakes.run(fake.start())
    mcp = McpFake("calc", MCP_KEY)
    fakes.run(mcp.__aenter__(), timeout=60)   # (the SDK's imports take seconds on a busy machine)
    extra = ["--rate-limit", "100000", "--rate-burst", "100000", "--hm-server-url", hm.base_url,
             "--searxng-url", web.url(""), "--allow-provider-base-url", "true",
             "--trigger-max-per-agent", "500", "--trigger-firings-per-hour", "100000", "--webhook-rate-limit", "10000",
             "--code-exec", "bubblewrap",
             # sign-in on, its token endpoint a closed loopback port (nothing leaves 127.0.0.1)
             "--subscription-auth", "true", "--subscription-authorize-url", "http://127.0.0.1:9/oauth/authorize",
             "--subscription-token-url", "http://127.0.0.1:9/oauth/token", *flags]
    if storage_url is not None:
        extra += ["--storage-url", storage_url]
    server = ServerProcess(data_dir, extra=extra).start(timeout=60)
    api = Api(f"http://127.0.0.1:{server.port}")
    world = World(storage, api, server, hm, web, model, fakes, model_fake, mcp)
    try:
        _populate(world, label or storage)
    except BaseException:
        world.close()
        raise
    return world


def _populate(w: World, label: str) -> None:
    api = w.api
    for role in PERSONS:
        w.keys[role] = keypair(f"authority {label} {role}")
    owner = w.kp("owner")
    api.ok(owner, {"_": "SetSecret", "name": "k", "value": b"sk-test"})
    api.ok(owner, {"_": "SetModelProvider", "name": "p", "provider": {
        "type": "custom", "baseUrl": w.model_fake.base_url, "secretRefs": {"apiKey": "k"}}})
    identity = api.ok(owner, {"_": "CreateSigningIdentity", "label": "Owner's voice"})["identity"]
    other_identity = api.ok(owner, {"_": "CreateSigningIdentity", "label": "Owner's other voice"})["identity"]
    w.ids.update(identity=identity["name"], identity_account=identity["accountId"],
                 other_identity=other_identity["name"])
    # The owner's MCP server, its secret header sealed; agents A and P pick it (an owner-only field).
    listed = api.ok(owner, {"_": "SetMcpServer", "name": "calc", "url": w.mcp.url,
                            "secretHeaders": {"x-api-key": MCP_KEY}})["server"]
    assert listed["status"]["state"] == "ok", listed
    w.base_definition = {"name": "Shared", "systemPrompt": "You use tools.", "modelProvider": "p", "model": "m",
                         "signingKey": identity["name"], "mcpServers": ["calc"]}
    w.ids["a"] = api.ok(owner, {"_": "CreateAgent", "definition": w.base_definition})["agentId"]
    w.ids["p"] = api.ok(owner, {"_": "CreateAgent", "definition": {**w.base_definition, "name": "Public"}})["agentId"]
    api.ok(owner, {"_": "SaveAgentTool", "agentId": w.ids["a"], "tool": {   # an authored tool of A's (code)
        "name": LAMBDA, "description": "Doubles.", "runtime": "python", "input": {"type": "object"},
        "source": "def main(input):\n    return {'twice': 2 * input.get('n', 1)}\n"}})
    w.ids["b"] = api.ok(owner, {"_": "CreateAgent", "definition": {
        "name": "Private", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})["agentId"]
    # An agent of another account (the stranger's): the owner's agents may not delegate to it.
    w.ids["x"] = api.ok(w.kp("stranger"), {"_": "CreateAgent", "definition": {
        "name": "Stranger's", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})["agentId"]
    for role in ("writer", "reader"):
        api.ok(owner, {"_": "InviteAgentCollaborator", "agentId": w.ids["a"], "accountId": w.kp(role).account_id,
                       "role": role})
        api.ok(w.kp(role), {"_": "AcceptAgentInvite", "agentId": w.ids["a"]})
    api.ok(owner, {"_": "SetAgentPublicRead", "agentId": w.ids["p"], "publicRead": True})
    w.ids["v"] = api.ok(owner, {"_": "CreateAgent", "definition": {**w.base_definition, "name": "Visited"}})["agentId"]
    api.ok(owner, {"_": "SetAgentPublicChat", "agentId": w.ids["v"], "publicChat": True, "tools": VISITOR_TOOLS,
                   "limits": {"messagesPerHour": 1000, "tokensPerDay": 10**8, "tokensPerDayAll": 10**9}})
    w.ids["sv"] = api.ok(w.kp("visitor"), {"_": "CreateSession", "agentId": w.ids["v"], "title": "visiting"})[
        "sessionId"]
    for name, agent in (("sa", "a"), ("sp", "p"), ("sb", "b"), ("so", "v")):
        w.ids[name] = api.ok(owner, {"_": "CreateSession", "agentId": w.ids[agent], "title": f"session {name}"})[
            "sessionId"]
    # Each session has a run (and SB the owner's secret); A and P hold the same memory file.
    for name, text in (("sa", "hello shared"), ("sp", "hello public"), ("sb", SECRET), ("so", "hello visited")):
        sent = api.ok(owner, {"_": "MessageSession", "sessionId": w.ids[name],
                              "content": [{"type": "text", "text": text}]})
        w.ids["r" + ("v" if name == "so" else name[1])] = sent["runId"]
        w.wait_idle(w.ids[name])
    for agent in ("a", "p"):
        api.ok(owner, {"_": "WriteAgentMemoryFile", "agentId": w.ids[agent], "path": "notes/a.md",
                       "content": b"kites have forked tails"})
    w.ids["att"] = api.ok(owner, {"_": "UploadSessionAttachment", "sessionId": w.ids["sa"], "name": "note.txt",
                                  "content": b"an attached note"})["attachment"]["id"]
    w.ids["page"] = w.web.url("/page.html")
    # A document of the owner's identity, published by the owner in person.
    w.ids["doc"] = f"hm://{identity['accountId']}/matrix"
    r = w.invoke("owner", "write", {"address": w.ids["doc"], "content": "Matrix doc."})
    assert "error" not in r, r
