"""A workflow step's cost beside a plain tool step, on a server child process, in one run.

A workflow step is one `await ctx.call('read', {address: '~/self'})` in a script child: the VM's
slice, the journal's `call` and `result` entries and the session's `tool_call` / `tool_result`
events (two transactions), the tool itself. It is measured from the script child's own run times
(RunInfo startedAt to finishedAt), a script of STEPS such calls against an empty script (the
engine's start, the source, the ending), so

    workflow step = (p50 run of STEPS calls - p50 run of none) / STEPS

and the same for `await ctx.log(...)` (journal only, no tool). The plain tool step is
InvokeSessionTool `read ~/self` timed from this process (the action's round trip, the surface,
its two events), interleaved with the workflows so both see the same machine. The fake
OpenAI-compatible provider (a separate process answering at once) plays the parent that
delegates each script. `python -m bench.workflow_step [--rounds N]` prints JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx

from bench.load import Rpc, keypair
from bench.processes import FakeProvider, Server
from bench.stats import latency_figures

STEPS = 50
SCRIPTS = {
    "empty": "export default async function (input, ctx) { return 0; }",
    "call": ("export default async function (input, ctx) {\n"
             f"  for (let i = 0; i < {STEPS}; i++) await ctx.call('read', {{address: '~/self'}});\n"
             "  return 1;\n}"),
    "log": ("export default async function (input, ctx) {\n"
            f"  for (let i = 0; i < {STEPS}; i++) await ctx.log('info', 'step ' + i);\n"
            "  return 1;\n}"),
}


async def one_script(rpc: Rpc, kp, agent_id: str, fake: httpx.AsyncClient, script: str) -> float:  # noqa: ANN001
    """The script child's run time (ms, the server's clock) of one delegated script."""
    delegate = {"chunks": [], "tool_calls": [
        {"id": "d1", "name": "delegate", "arguments": json.dumps({"title": "bench", "script": script})}]}
    for answer in (delegate, {"chunks": ["done"]}):
        (await fake.post("/_fake/script", json=answer)).raise_for_status()
    session = await rpc.call(kp, {"_": "CreateSession", "agentId": agent_id})
    sent = await rpc.call(kp, {"_": "MessageSession", "sessionId": session["sessionId"],
                               "content": [{"type": "text", "text": "run it"}]})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = (await rpc.call(kp, {"_": "ListRuns", "rootRunId": sent["runId"]}))["runs"]
        root = next(r for r in runs if r["id"] == sent["runId"])
        child = next((r for r in runs if r.get("kind") == "workflow"), None)
        if root["status"] in ("succeeded", "failed", "canceled"):
            if child is None or child["status"] != "succeeded":
                raise RuntimeError(f"the script child did not succeed: {child}")
            return child["finishedAt"] - child["startedAt"]
        await asyncio.sleep(0.05)
    raise TimeoutError("the delegated script did not end within 60 s")


async def measure(url: str, fake_url: str, rounds: int) -> dict:
    kp = keypair("workflow-step-bench")
    rpc = await Rpc.open(url)
    try:
        await rpc.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {"type": "custom",
                                                                                   "baseUrl": fake_url}})
        agent = await rpc.call(kp, {"_": "CreateAgent", "definition": {
            "name": "flow", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}})
        agent_id = agent["agentId"]
        sid = (await rpc.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        runs: dict[str, list[float]] = {name: [] for name in SCRIPTS}
        plain: list[float] = []
        async with httpx.AsyncClient(base_url=fake_url.rsplit("/v1", 1)[0], timeout=30) as fake:
            await one_script(rpc, kp, agent_id, fake, SCRIPTS["call"])   # warm-up
            for _ in range(rounds):
                for name, script in SCRIPTS.items():
                    runs[name].append(await one_script(rpc, kp, agent_id, fake, script))
                for _ in range(5):
                    t = time.perf_counter()
                    r = await rpc.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "read",
                                            "input": {"address": "~/self"}})
                    if r.get("_") != "InvokeSessionToolResponse" or "error" in r:
                        raise RuntimeError(r)
                    plain.append((time.perf_counter() - t) * 1000)
    finally:
        await rpc.close()
    p50 = {name: sorted(values)[len(values) // 2] for name, values in runs.items()}
    plain_p50 = sorted(plain)[len(plain) // 2]
    call_step = (p50["call"] - p50["empty"]) / STEPS
    log_step = (p50["log"] - p50["empty"]) / STEPS
    return {"steps": STEPS, "rounds": rounds,
            "workflow_run_ms_p50": p50,
            "workflow_call_step_ms": round(call_step, 2), "workflow_log_step_ms": round(log_step, 2),
            "plain_tool_step_ms": latency_figures([v / 1000 for v in plain]),
            "call_step_over_plain_step": round(call_step / plain_p50, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    with FakeProvider("plain") as fake, Server("workflow-step") as server:
        print(json.dumps(asyncio.run(measure(server.url, fake.base_url, args.rounds)), indent=2))


if __name__ == "__main__":
    main()
