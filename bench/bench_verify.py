"""Envelope verification throughput against raw Ed25519 verification.

Builds a typical signed MessageSession envelope, then measures in one run:
- envelopes/s: `verify_envelope(frame, now_ms=...)` on the frame bytes (clock window on), i.e.
  decode + canonical check + field checks + signature;
- raw/s: PyNaCl's Ed25519 verify (`crypto_sign_open`, the call verify_envelope makes) of the same
  signing input.
Many short rounds alternate between the two and the best round of each counts (as timeit takes
the minimum): on a shared machine a noisy neighbour then penalises neither side more than the
other. Prints the figures; writes nothing.

    python -m bench.bench_verify [--quick]
"""

from __future__ import annotations

import sys
import time

from nacl.bindings import crypto_sign_open

from protocol.envelope import signing_input, verify_envelope
from protocol.dagcbor import decode
from protocol.keys import Keypair
from protocol.envelope import sign_envelope

TARGET_RATIO = 0.85
_NOW_MS = 1_767_225_607_000


def _typical_frame() -> bytes:
    keypair = Keypair.from_seed(bytes(range(32)))
    action = {
        "_": "MessageSession",
        "sessionId": "8e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        "content": [
            {"type": "text", "text": "Summarise the attached notes, please.",
             "clientMessageId": "msg-0001"},
            {"type": "context", "lines": ["note line 1", "ligne 2 — é", ""]},
        ],
        "clientMessageId": "msg-0001",
    }
    return sign_envelope(keypair, action, ts=_NOW_MS)


def _rate(fn, iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return iterations / (time.perf_counter() - start)


def run(quick: bool = False) -> dict:
    frame = _typical_frame()
    envelope = decode(frame)
    message = signing_input(envelope)
    sm = envelope["sig"] + message
    public_key = envelope["signer"][2:]

    def verify_frame() -> None:
        verify_envelope(frame, now_ms=_NOW_MS)

    def verify_raw() -> None:
        crypto_sign_open(sm, public_key)

    verify_frame()  # warm the caches the server would have warm (key orders, ids)
    iterations, rounds = (100, 15) if quick else (200, 60)
    best_envelopes = best_raw = 0.0
    for _ in range(rounds):
        best_envelopes = max(best_envelopes, _rate(verify_frame, iterations))
        best_raw = max(best_raw, _rate(verify_raw, iterations))
    ratio = best_envelopes / best_raw
    return {
        "frame_bytes": len(frame),
        "envelopes_per_s": round(best_envelopes, 1),
        "raw_verifies_per_s": round(best_raw, 1),
        "ratio": round(ratio, 4),
        "target_ratio": TARGET_RATIO,
        "overhead_us": round((1 / best_envelopes - 1 / best_raw) * 1e6, 2),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    result = run(quick="--quick" in args)
    print(f"frame: {result['frame_bytes']} bytes (MessageSession)")
    print(f"envelopes verified/s: {result['envelopes_per_s']:.0f}")
    print(f"raw Ed25519 verifies/s: {result['raw_verifies_per_s']:.0f}")
    print(f"ratio: {result['ratio']:.3f} (target >= {TARGET_RATIO}); "
          f"overhead {result['overhead_us']} us per envelope")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
