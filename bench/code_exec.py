"""`execute` start-to-result for a one-line program, per backend and runtime, in one run.

Three levels, interleaved so each sees the same machine:

- the sandbox's own cost: the one-line program (`print(6 * 7)`, `echo 42`,
  `console.log(6 * 7)`) run as a plain child process (no isolation: the floor), under
  `unshare -Urnpf` (util-linux namespaces alone, no filesystem view: the cheapest isolation at
  hand, not installable from PyPI), and through the bubblewrap backend of server/sandbox/ (the
  whole policy: namespaces, read-only system, tmpfs workspace, limits, workspace hand-back);
- end to end: InvokeSessionTool `call execute` of the same program on a server child process,
  beside InvokeSessionTool `read ~/memory` (a trivial verb), so the difference is what a call of
  code costs over any tool call.

`python -m bench.code_exec [--runs N]` prints p50 / p99 / max in milliseconds as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time

from seed_agents.server.sandbox.bubblewrap import BubblewrapSandbox
from seed_agents.server.sandbox.port import Job

from bench.load import Rpc, keypair
from bench.processes import Server
from bench.stats import latency_figures

ONE_LINE = {"python": "print(6 * 7)", "shell": "echo $((6 * 7))", "ts": "console.log(6 * 7)"}


def plain_argv(sandbox: BubblewrapSandbox, runtime: str) -> list[str]:
    return {"python": [sandbox.python, "-c", ONE_LINE["python"]], "shell": [sandbox.shell, "-c", ONE_LINE["shell"]],
            "ts": [sandbox.node, "--input-type=module", "-e", ONE_LINE["ts"]]}[runtime]


async def child(argv: list[str]) -> float:
    t = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if out.strip() != b"42":
        raise RuntimeError(f"{argv[0]}: {out!r} {err!r}")
    return time.perf_counter() - t


async def sandboxed(sandbox: BubblewrapSandbox, runtime: str) -> float:
    t = time.perf_counter()
    out = await sandbox.run(Job(runtime, ONE_LINE[runtime], 20, {}))
    if out.stdout.strip() != b"42":
        raise RuntimeError(f"{runtime}: {out}")
    return time.perf_counter() - t


async def port_level(runs: int) -> dict:
    sandbox = BubblewrapSandbox(concurrency=1)
    availability = await sandbox.check()
    if not availability.available:
        raise SystemExit(f"the sandbox is not available here: {availability.reason}")
    unshare = shutil.which("unshare")
    out = {}
    for runtime in availability.runtimes:
        plain, ns, bw = [], [], []
        for _ in range(runs):
            plain.append(await child(plain_argv(sandbox, runtime)))
            if unshare:
                ns.append(await child([unshare, "-Urnpf", "--mount-proc", *plain_argv(sandbox, runtime)]))
            bw.append(await sandboxed(sandbox, runtime))
        out[runtime] = {"plain": latency_figures(plain), "bubblewrap": latency_figures(bw),
                        **({"unshare": latency_figures(ns)} if ns else {})}
    return out


async def end_to_end(runs: int) -> dict:
    with Server("code-exec", extra=["--code-exec", "bubblewrap"]) as server:
        kp = keypair("code-exec-bench")
        rpc = await Rpc.open(server.url)
        try:
            agent = await rpc.call(kp, {"_": "CreateAgent", "definition": {
                "name": "coder", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}})
            session = await rpc.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]})
            sid = session["sessionId"]

            async def invoke(verb: str, value: dict) -> float:
                t = time.perf_counter()
                r = await rpc.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": verb, "input": value})
                if r.get("_") != "InvokeSessionToolResponse" or "error" in r:
                    raise RuntimeError(r)
                return time.perf_counter() - t

            execute = {"tool": "execute", "input": {"runtime": "python", "code": ONE_LINE["python"]}}
            deadline = time.monotonic() + 30
            while True:   # the server's self-check runs in the background from its start
                r = await rpc.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call", "input": execute})
                if "error" not in r or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            reads, calls = [], []
            for _ in range(runs):
                reads.append(await invoke("read", {"address": "~/memory/"}))
                calls.append(await invoke("call", execute))
            return {"read_memory": latency_figures(reads), "call_execute_python": latency_figures(calls)}
        finally:
            await rpc.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    result = {"port": asyncio.run(port_level(args.runs)), "server": asyncio.run(end_to_end(args.runs))}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
