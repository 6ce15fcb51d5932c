"""Issue 15: the access table as a property. Random sequences of invite, accept, decline,
remove, public read on/off and actions by random accounts run against a real server over real
sockets (one v2 socket per account); every answer's status must equal what a small reference
model of the access table predicts, and ListAgents / ListAgentInvites must show what it says.
"""
from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_config
from tests.wsraw import V2Client, keypair, setup_session

NAMES = ("O", "A", "B", "C")
KEYS = {n: keypair(f"prop-{n}") for n in NAMES}
RANK = {None: 0, "reader": 1, "writer": 2, "owner": 3}


class Model:
    """The access table of CONTRACT section 4, on one agent owned by O."""

    def __init__(self) -> None:
        self.public = False
        self.rows: dict[str, tuple[str, str]] = {}   # account -> (role, status)

    def role(self, who: str) -> str | None:
        if who == "O":
            return "owner"
        role, status = self.rows.get(who, (None, None))
        if status == "accepted":
            return role
        return "reader" if self.public else None

    def need(self, who: str, level: str) -> int | None:
        """404 without access, 403 with too little, None when allowed."""
        role = self.role(who)
        if role is None:
            return 404
        return 403 if RANK[role] < RANK[level] else None

    def step(self, op: tuple) -> int:
        kind, who = op[0], op[1]
        if kind == "invite":
            _, _, target, role = op
            refused = self.need(who, "owner")
            if refused:
                return refused
            if target == "O":
                return 400
            status = self.rows.get(target, (None, "pending"))[1]
            self.rows[target] = (role, status)
            return 200
        if kind == "remove":
            target = op[2]
            refused = self.need(who, "owner")
            if refused:
                return refused
            if target not in self.rows:
                return 404
            del self.rows[target]
            return 200
        if kind == "accept":
            if who not in self.rows:
                return 404
            self.rows[who] = (self.rows[who][0], "accepted")
            return 200
        if kind == "decline":
            if self.rows.get(who, (None, None))[1] != "pending":
                return 404
            del self.rows[who]
            return 200
        if kind == "public":
            refused = self.need(who, "owner")
            if refused:
                return refused
            self.public = op[2]
            return 200
        level = {"GetAgent": "reader", "ListAgentCollaborators": "reader", "GetSession": "reader",
                 "Subscribe": "reader", "UpdateSession": "writer", "CreateSession": "writer",
                 "UpdateAgent": "writer"}[kind]
        return self.need(who, level) or 200


def action(op: tuple, agent_id: str, session_id: str) -> dict:
    kind = op[0]
    if kind == "invite":
        return {"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": KEYS[op[2]].account_id,
                "role": op[3]}
    if kind == "remove":
        return {"_": "RemoveAgentCollaborator", "agentId": agent_id, "accountId": KEYS[op[2]].account_id}
    if kind == "accept":
        return {"_": "AcceptAgentInvite", "agentId": agent_id}
    if kind == "decline":
        return {"_": "DeclineAgentInvite", "agentId": agent_id}
    if kind == "public":
        return {"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": op[2]}
    return {"GetAgent": {"_": "GetAgent", "agentId": agent_id},
            "ListAgentCollaborators": {"_": "ListAgentCollaborators", "agentId": agent_id},
            "GetSession": {"_": "GetSession", "sessionId": session_id},
            "Subscribe": {"_": "Subscribe", "key": "agents/" + agent_id},
            "UpdateSession": {"_": "UpdateSession", "sessionId": session_id, "title": "t"},
            "CreateSession": {"_": "CreateSession", "agentId": agent_id},
            "UpdateAgent": {"_": "UpdateAgent", "agentId": agent_id, "definition": {
                "name": "n", "systemPrompt": "p", "modelProvider": "echo", "model": "m"}}}[kind]


who = st.sampled_from(NAMES)
ops = st.one_of(
    st.tuples(st.just("invite"), who, who, st.sampled_from(["reader", "writer"])),
    st.tuples(st.just("remove"), who, who),
    st.tuples(st.just("accept"), who),
    st.tuples(st.just("decline"), who),
    st.tuples(st.just("public"), who, st.booleans()),
    st.tuples(st.sampled_from(["GetAgent", "ListAgentCollaborators", "GetSession", "Subscribe",
                               "UpdateSession", "CreateSession", "UpdateAgent"]), who),
)


class Harness:
    """A server and one socket per account on an event loop of their own thread, so the
    synchronous hypothesis test can drive them."""

    def __init__(self, tmp_path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.tmp_path = tmp_path
        self.run(self._start())

    def run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        from seed_agents.server.main import start_server

        self.server = await start_server(make_config(self.tmp_path, rate_per_second=100_000, rate_burst=100_000))
        self.clients = {n: await V2Client.open(self.server.url) for n in NAMES}

    async def _stop(self) -> None:
        for c in self.clients.values():
            await c.close()
        await self.server.stop()

    def close(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def scenario(self, steps: list[tuple]) -> None:
        owner = self.clients["O"]
        agent_id, session_id = await setup_session(owner, KEYS["O"])
        model = Model()
        for op in steps:
            expected = model.step(op)
            got = await self.clients[op[1]].call(KEYS[op[1]], action(op, agent_id, session_id))
            status = got["status"] if got["_"] == "Error" else 200
            assert status == expected, (op, got, model.rows, model.public)
        for name in NAMES[1:]:
            c = self.clients[name]
            listed = {a["id"]: a["accessRole"] for a in (await c.call(KEYS[name], {"_": "ListAgents"}))["agents"]}
            row = model.rows.get(name)
            if row is not None and row[1] == "accepted":
                assert listed.get(agent_id) == row[0], (name, listed, model.rows)
            else:
                assert agent_id not in listed, (name, listed, model.rows)
            invites = (await c.call(KEYS[name], {"_": "ListAgentInvites"}))["invites"]
            pending = [i["agentId"] for i in invites if i["agentId"] == agent_id]
            assert pending == ([agent_id] if row is not None and row[1] == "pending" else []), (name, invites)
        # Let the subscriptions made along the way end before the next example.
        await owner.call(KEYS["O"], {"_": "DeleteAgent", "agentId": agent_id})
        for c in self.clients.values():
            while not c.events.empty():
                c.events.get_nowait()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = Harness(tmp_path_factory.mktemp("sharing-prop"))
    yield h
    h.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ops, min_size=1, max_size=25))
def test_access_outcomes_follow_the_reference_model(harness, steps):
    harness.run(harness.scenario(steps))


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ops, min_size=1, max_size=60))
def test_access_outcomes_follow_the_reference_model_long(harness, steps):
    harness.run(harness.scenario(steps))
