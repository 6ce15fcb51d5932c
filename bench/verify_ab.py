"""Envelope verification before and after a change, in one run ("the honest fast path
stays as fast as today"):

    python -m bench.verify_ab [--before REF] [--rounds N] [--quick]

Two trees' `protocol/` package: `--before` (a git ref, extracted with `git archive` into a
temporary directory) and this working tree. Each round runs `bench.bench_verify` (this tree's
benchmark code) once per tree, each in a child process whose `protocol` is that tree's, in
alternating order (A B, then B A), so drift of the shared machine falls on both alike. Reported:
envelopes verified per second for the typical and the rich MessageSession, best of the rounds
per tree, and after/before; then what one decode bomb (a ListAgents whose action holds a
million empty maps, junk-signed and self-signed) costs each tree. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "cd23a61"   # main before the honest fast path

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])   # (a tree from before the seed_agents name imports `protocol`)
import seed_agents
# The tree's protocol/ as seed_agents.protocol, ahead of the installed one (which an editable
# install maps to this checkout whatever PYTHONPATH says).
seed_agents.__path__.insert(0, sys.argv[1])
from seed_agents import protocol
assert protocol.__file__.startswith(sys.argv[1]), protocol.__file__
from bench.bench_verify import run
r = run(quick=sys.argv[2] == "quick")
from seed_agents.protocol.wire.envelope import sign_envelope, verify_envelope
from seed_agents.protocol.wire.keys import Keypair
kp = Keypair.from_seed(bytes(32))
frame = sign_envelope(kp, {"_": "ListAgents", "junk": []}, ts=0)
at = frame.index(b"\x64junk\x80") + 5
frame = frame[:at] + b"\x9a" + (10**6).to_bytes(4, "big") + b"\xa0" * 10**6 + frame[at + 1:]
bombs = {"junk": frame[:7] + bytes(range(64)) + frame[71:],
         "signed": frame[:7] + kp.sign(frame[:7] + bytes(64) + frame[71:]) + frame[71:]}
for name, data in bombs.items():
    t = time.perf_counter()
    try:
        verify_envelope(data, now_ms=None)
        outcome = "verified"
    except Exception as exc:
        outcome = getattr(exc, "status", type(exc).__name__)
    r["bomb_" + name + "_ms"] = round((time.perf_counter() - t) * 1000, 1)
    r["bomb_" + name + "_status"] = outcome
print(json.dumps(r))
"""


def extract(ref: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", ref, "protocol"], cwd=ROOT, check=True,
                          capture_output=True, timeout=60).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into)
    return into


def measure(tree: Path, quick: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tree), "quick" if quick else "full"],
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verify_ab")
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(args.before, Path(tmp)), "after": ROOT}
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for i in range(args.rounds):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            for name in order:
                runs[name].append(measure(trees[name], args.quick))
    best = {name: {key: max(r[key] for r in rs) for key in ("envelopes_per_s", "rich_envelopes_per_s")}
            for name, rs in runs.items()}
    for name in ("before", "after"):
        last = runs[name][-1]
        print(f"{name:6}: typical {best[name]['envelopes_per_s']:8.0f}/s  rich {best[name]['rich_envelopes_per_s']:8.0f}/s"
              f"  junk bomb {last['bomb_junk_ms']} ms ({last['bomb_junk_status']})"
              f"  signed bomb {last['bomb_signed_ms']} ms ({last['bomb_signed_status']})")
    for key in ("envelopes_per_s", "rich_envelopes_per_s"):
        print(f"after/before {key}: {best['after'][key] / best['before'][key]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
