"""Which way of reading a provider's stream costs the least CPU per text delta?

`python -m bench.providers_sse [--deltas 3000] [--rounds 5]`

The fake Anthropic, Gemini and OpenAI-compatible servers (tests/fakes) run in a child process on
127.0.0.1, so the CPU time measured here (`time.process_time`) is the client's alone. Each round
streams one reply of `--deltas` text deltas through each option; the median CPU time per delta
is reported, and as a ratio to our provider (httpx + httpx-sse) for the same API:

- anthropic: our AnthropicProvider vs the official `anthropic` SDK (`messages.create(stream=True)`)
- google:    our GoogleProvider vs the official `google-genai` SDK (`generate_content_stream`)
- openai:    our OpenAICompatProvider (httpx-sse) vs the same provider before it moved to
             httpx-sse (loaded from git: it parsed `data:` lines by hand, a timeout per line);
             and, to isolate the parser, a bare httpx-sse loop vs a bare hand-written line loop
             (no timeouts, no provider logic)

Loopback only, bounded in count and time; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "bench-key"


# -- the fakes, in a child process ---------------------------------------------------------------
async def _serve(deltas: int) -> None:
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.google_server import FakeGoogle
    from tests.fakes.openai_server import FakeOpenAI
    from tests.fakes.openai_server import Script as OpenAIScript
    from tests.fakes.sse_base import Script

    chunks = [f"tok{i} " for i in range(deltas)]
    async with FakeAnthropic(Script(chunks=chunks)) as ant, FakeGoogle(Script(chunks=chunks)) as goo, \
            FakeOpenAI(OpenAIScript(chunks=chunks)) as oai:
        print(json.dumps({"anthropic": ant.base_url, "google": goo.base_url, "openai": oai.base_url}),
              flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)   # until EOF


# -- the options ---------------------------------------------------------------------------------
async def ours(kind: str, base_url: str, client: httpx.AsyncClient) -> int:
    from seed_agents.server.providers.base import ChatMessage, ProviderSpec, TextDelta
    from seed_agents.server.providers.registry import ProviderSettings, make_provider

    spec = ProviderSpec("custom" if kind == "openai" else kind, base_url=base_url, api_key=KEY)
    provider = make_provider(spec, client, ProviderSettings(allow_base_url=True))
    n = 0
    async for item in provider.stream("bench-model", [ChatMessage("user", "go")]):
        n += isinstance(item, TextDelta)
    return n


_SDKS: dict[str, object] = {}   # each SDK client is made once (outside the timing), as a server would


async def anthropic_sdk(base_url: str, client: httpx.AsyncClient) -> int:
    import anthropic

    # The SDK brings its own HTTP client (recent versions refuse an httpx one).
    sdk = _SDKS.get("anthropic") or _SDKS.setdefault(
        "anthropic", anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0))
    n = 0
    stream = await sdk.messages.create(model="bench-model", max_tokens=4096, stream=True,
                                       messages=[{"role": "user", "content": "go"}])
    async for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            n += 1
    return n


async def google_sdk(base_url: str, client: httpx.AsyncClient) -> int:
    from google import genai
    from google.genai import types

    sdk = _SDKS.get("google") or _SDKS.setdefault("google", genai.Client(
        api_key=KEY, http_options=types.HttpOptions(base_url=base_url, api_version="v1beta")))
    n = 0
    async for chunk in await sdk.aio.models.generate_content_stream(model="bench-model",
                                                                   contents="go"):
        n += bool(chunk.text)
    return n


async def hand_parser(base_url: str, client: httpx.AsyncClient) -> int:
    body = {"model": "bench-model", "messages": [{"role": "user", "content": "go"}],
            "stream": True, "stream_options": {"include_usage": True}}
    n = 0
    async with client.stream("POST", base_url + "/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {KEY}"}) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    n += 1
    return n


_BEFORE = "0194a68"   # the last commit whose OpenAI-compatible provider parsed SSE lines by hand


def _old_provider_class():
    """That provider, loaded from git, so the before/after is measured in one run."""
    import types

    source = subprocess.run(["git", "show", f"{_BEFORE}:server/providers/openai_compat.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("seed_agents.server.providers._openai_compat_before")
    module.__package__ = "seed_agents.server.providers"
    exec(compile(source, "openai_compat_before.py", "exec"), module.__dict__)
    return module.OpenAICompatProvider


async def old_provider(base_url: str, client: httpx.AsyncClient) -> int:
    from seed_agents.server.providers.base import ChatMessage, ProviderSpec, TextDelta

    cls = _SDKS.get("old") or _SDKS.setdefault("old", _old_provider_class())
    provider = cls(ProviderSpec("custom", base_url=base_url, api_key=KEY), client)
    n = 0
    async for item in provider.stream("bench-model", [ChatMessage("user", "go")]):
        n += isinstance(item, TextDelta)
    return n


async def sse_loop(base_url: str, client: httpx.AsyncClient) -> int:
    """The library alone: httpx-sse's events with the same minimal handling as hand_parser."""
    from httpx_sse import EventSource

    body = {"model": "bench-model", "messages": [{"role": "user", "content": "go"}],
            "stream": True, "stream_options": {"include_usage": True}}
    n = 0
    async with client.stream("POST", base_url + "/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {KEY}"}) as response:
        async for event in EventSource(response).aiter_sse():
            if event.data == "[DONE]":
                break
            chunk = json.loads(event.data)
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    n += 1
    return n


async def measure(urls: dict, deltas: int, rounds: int) -> dict:
    options = {
        "anthropic": {"httpx-sse (ours)": lambda c: ours("anthropic", urls["anthropic"], c),
                      "anthropic SDK": lambda c: anthropic_sdk(urls["anthropic"], c)},
        "google": {"httpx-sse (ours)": lambda c: ours("google", urls["google"], c),
                   "google-genai SDK": lambda c: google_sdk(urls["google"], c)},
        "openai": {"httpx-sse (ours)": lambda c: ours("openai", urls["openai"], c),
                   f"provider before ({_BEFORE})": lambda c: old_provider(urls["openai"], c),
                   "bare httpx-sse loop": lambda c: sse_loop(urls["openai"], c),
                   "bare hand-written loop": lambda c: hand_parser(urls["openai"], c)},
    }
    samples: dict[str, dict[str, list[float]]] = {api: {name: [] for name in opts}
                                                  for api, opts in options.items()}
    deadline = time.monotonic() + 300
    async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
        for api, opts in options.items():   # one warm-up each: imports, connections
            for run in opts.values():
                await run(client)
        for _ in range(rounds):
            if time.monotonic() > deadline:
                break
            for api, opts in options.items():
                for name, run in opts.items():
                    cpu = time.process_time()
                    got = await run(client)
                    spent = time.process_time() - cpu
                    if got != deltas:
                        raise RuntimeError(f"{api}/{name}: {got} deltas, expected {deltas}")
                    samples[api][name].append(spent / deltas)
    report = {}
    for api, by_name in samples.items():
        base = statistics.median(by_name["httpx-sse (ours)"])
        report[api] = {name: {"cpu_us_per_delta": round(statistics.median(v) * 1e6, 2),
                              "ratio_to_ours": round(statistics.median(v) / base, 2)}
                       for name, v in by_name.items()}
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.deltas))
        return
    child = subprocess.Popen([sys.executable, "-m", "bench.providers_sse", "--serve",
                              "--deltas", str(args.deltas)], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        urls = json.loads(child.stdout.readline())
        report = asyncio.run(measure(urls, args.deltas, args.rounds))
    finally:
        child.stdin.close()
        child.wait(10)
    print(f"CPU time per text delta, median of {args.rounds} rounds of {args.deltas} deltas "
          f"(client process only):")
    for api, by_name in report.items():
        for name, row in by_name.items():
            print(f"  {api:10} {name:30} {row['cpu_us_per_delta']:8.2f} µs  "
                  f"x{row['ratio_to_ours']:.2f}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
