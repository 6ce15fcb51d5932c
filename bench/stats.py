"""Statistics of measured figures: percentiles, the median/min/max summary over runs, and
latency figures."""
from __future__ import annotations

import statistics


def percentile(values, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 100]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def summary(values, digits: int = 3) -> dict:
    """{median, min, max, runs} of one figure measured once per run."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "runs": []}
    return {"median": round(statistics.median(vals), digits), "min": round(min(vals), digits),
            "max": round(max(vals), digits), "runs": [round(v, digits) for v in vals]}


def latency_figures(latencies_s: list[float]) -> dict:
    ms = [x * 1000.0 for x in latencies_s]
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
            "max_ms": max(ms) if ms else float("nan")}
