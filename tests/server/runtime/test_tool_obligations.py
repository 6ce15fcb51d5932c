"""The reference's live check of agent obligations (`agents/e2e/obligations-live-check.ts` with
`e2e/scripted-provider.ts`, seed-hypermedia/seed 7819d47), its cases kept as our own test: a
plan-shaped task, a step left open at the end of an answer, the continuation prompt the runtime
hands itself, and the settled checklist afterwards; and the stubborn model that never closes its
plan (three prompts, then the run ends succeeded, owing it, with a notice on the log).

The scripted model is the reference's, over the real OpenAI-compatible wire (an `ollama`
provider, as the script configures)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import make_config, running_server
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, Script
from tests.waiting import until
from tests.wsraw import V2Client, keypair

CONTINUATION = "This turn is ending with work you committed to still open"
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def say(text: str) -> Script:
    return Script(chunks=[text], usage=USAGE)


def plan_call(call_id: str, steps: list[tuple[str, str, str]]) -> Script:
    arguments = json.dumps({"title": "Colors", "steps": [{"id": i, "label": label, "status": status}
                                                         for i, label, status in steps]})
    return Script(chunks=[], tool_calls=[{"id": f"plan-{call_id}", "name": "plan", "arguments": arguments}],
                  usage=USAGE)


def scripted_model(stubborn: bool):
    """scripted-provider.ts: 1 publishes a two-step plan with the second open; 2 answers as if
    finished; 3 (only if the runtime hands the turn back) closes the plan; then it says so."""
    calls = 0

    def respond(request: RecordedRequest) -> Script:
        nonlocal calls
        calls += 1
        transcript = json.dumps(request.body["messages"])
        if calls == 1:
            return plan_call("t1", [("s1", "Name three colors", "done"), ("s2", "Write the sentence", "pending")])
        if calls == 2:
            return say("Red, blue and green — the red kite flew past a blue door onto green grass.")
        if not stubborn and CONTINUATION in transcript and calls == 3:
            return plan_call("t3", [("s1", "Name three colors", "done"), ("s2", "Write the sentence", "done")])
        return say("Anything else?" if stubborn else "Both steps are closed out.")

    return respond


@pytest.fixture
async def server(tmp_path):
    async with running_server(make_config(tmp_path, allow_provider_base_url=True)) as running:
        yield running


async def obligations_check(server, stubborn: bool) -> list[tuple[bool, str]]:
    kp = keypair("obligations-stubborn" if stubborn else "obligations")
    checks: list[tuple[bool, str]] = []

    def check(ok: bool, label: str) -> None:
        checks.append((bool(ok), label))

    async with FakeOpenAI(scripted_model(stubborn)) as fake:
        c = await V2Client.open(server.url)
        r = await c.call(kp, {"_": "SetModelProvider", "name": "scripted",
                              "provider": {"type": "ollama", "baseUrl": fake.base_url}})
        assert r["_"] == "SetModelProviderResponse", r
        agent = await c.call(kp, {"_": "CreateAgent", "definition": {
            "name": "ObligationLiveCheck", "systemPrompt": "You keep a plan.", "modelProvider": "scripted",
            "model": "scripted-model", "tools": []}})
        session = await c.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]})
        sid = session["sessionId"]
        await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [
            {"type": "text", "text": "Name three colors, then write one sentence using all three. Track it with a plan."}]})

        async def tree_settled() -> bool:   # the script polls ListRuns until the tree settles
            roots = (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
            if not roots:
                return False
            tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": roots[0]["rootRunId"]}))["runs"]
            return all(run["status"] in ("succeeded", "failed", "canceled") for run in tree)

        await until(tree_settled, 30, step=0.05)

        detail = await c.call(kp, {"_": "GetSession", "sessionId": sid})
        runs = (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
        events = [e["event"] for e in detail["events"]]
        prompts = [e for e in events if CONTINUATION in str(e.get("content", ""))]
        expected = 3 if stubborn else 1
        check(len(prompts) == expected, f"continuation prompts: expected {expected}, got {len(prompts)}")
        check(prompts[0].get("actor") == "system", "the prompt is stamped actor 'system'")
        check("Write the sentence" in prompts[0]["content"], "the prompt names the step that was left open")
        plan = detail["session"].get("plan") or {}
        if stubborn:
            notices = [e for e in events if "This run ended with work still open" in str(e.get("content", ""))]
            check(len(notices) == 1, f"one visible unmet-obligations notice (got {len(notices)})")
            check(notices and notices[0].get("actor") == "system", "the notice is stamped actor 'system'")
            check(any(s["status"] == "pending" for s in plan.get("steps", [])),
                  "nothing was ticked off on the agent's behalf")
            check("settledAt" not in plan, "an unsettled plan carries no settle date")
            check(runs[0]["status"] == "succeeded", "an unfinished plan is not a failure")
            check(runs[0].get("unmetObligations") == [{"kind": "plan", "steps": ["Write the sentence"]}],
                  f"the run surfaces what it owed ({runs[0].get('unmetObligations')})")
        else:
            check(plan.get("steps") and all(s["status"] == "done" for s in plan["steps"]),
                  "the checklist ended fully settled")
            check(isinstance(plan.get("settledAt"), int), "the moment it settled is dated on the plan")
            check(runs[0]["status"] == "succeeded", "the run succeeded")
            check("unmetObligations" not in runs[0], "the run ended owing nothing")
        meta = [e for e in events if e["type"] == "message" and e["role"] == "assistant"][-1].get("meta", {})
        check(meta.get("model") == "scripted-model" and meta.get("provider") == "ollama",
              "assistant messages carry model/provider")
        check((meta.get("usage") or {}).get("total", 0) > 0, "assistant messages carry per-turn token usage")
        check(isinstance(meta.get("durationMs"), int), "assistant messages carry wall time")
        # The checklist is handed to the model each step, and never reaches the log.
        check(any("<plan_state>" in json.dumps(r.body["messages"]) for r in fake.requests[1:]),
              "the model was shown its live checklist")
        check(not any("<plan_state>" in str(e.get("content", "")) for e in events),
              "the injected checklist never reaches the log")
        await c.call(kp, {"_": "DeleteAgent", "agentId": agent["agentId"]})
        await c.close()
    return checks


async def test_the_obligations_live_check_passes(server):
    checks = await obligations_check(server, stubborn=False)
    assert [label for ok, label in checks if not ok] == []
    assert len(checks) == 12   # the reference's 10, and the two about the injected checklist


async def test_a_stubborn_model_ends_owing_its_plan(server):
    checks = await obligations_check(server, stubborn=True)
    assert [label for ok, label in checks if not ok] == []
