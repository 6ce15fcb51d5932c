"""Flat views of a pyinstrument session: where the server's event-loop thread spends its time.

    python -m bench.profile FILE.pyisession [--top N]

Self time is a function's own samples (not its callees'); inclusive time counts callees too.
Shares are of the sampled wall time; "busy" excludes the selector wait (an idle loop).
"""
from __future__ import annotations

import sys
from collections import defaultdict

IDLE_FUNCTIONS = {("select", "selectors.py")}


def _name(frame) -> tuple[str, str]:
    path = frame.file_path or ""
    short = path.split("site-packages/")[-1] if "site-packages/" in path else path
    if "/work/" in short or "/main/" in short:
        short = short.split("/main/")[-1]
    elif "/lib/python" in short:
        short = short.split("/lib/")[-1]
    return frame.function or "?", f"{short}:{frame.line_no}"


def _walk(frame, stack, self_t, incl_t, idle):
    # pyinstrument keeps a frame's own samples in synthetic "[self]" leaf children.
    children = [c for c in frame.children if not c.is_synthetic_leaf]
    own = frame.time - sum(c.time for c in children)
    key = _name(frame)
    fn, where = key
    base = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    is_idle = (fn, base) in IDLE_FUNCTIONS
    if is_idle:
        idle[0] += frame.time
    self_t[key] += max(own, 0.0)
    if key not in stack:  # count recursion once
        incl_t[key] += frame.time
    if not is_idle:
        stack = stack | {key}
        for c in children:
            _walk(c, stack, self_t, incl_t, idle)


def flat(session) -> dict:
    root = session.root_frame(trim_stem=False)
    self_t: dict = defaultdict(float)
    incl_t: dict = defaultdict(float)
    idle = [0.0]
    if root is not None:
        _walk(root, frozenset(), self_t, incl_t, idle)
    total = root.time if root is not None else 0.0
    return {"total": total, "idle": idle[0], "self": dict(self_t), "inclusive": dict(incl_t),
            "duration": session.duration, "samples": session.sample_count, "cpu_time": session.cpu_time}


def flat_report(session, top: int = 30) -> str:
    f = flat(session)
    total, idle = f["total"] or 1e-9, f["idle"]
    busy = max(total - idle, 1e-9)
    lines = [f"sampled {f['total']:.2f} s of the event-loop thread ({f['samples']} samples), "
             f"process CPU {f['cpu_time']:.2f} s; idle in select {idle:.2f} s "
             f"({100 * idle / total:.1f}%), busy {busy:.2f} s", "",
             f"top {top} by SELF time (share of busy time):"]
    for (fn, where), t in sorted(f["self"].items(), key=lambda kv: -kv[1])[:top]:
        if (fn, where.rsplit(":", 1)[0].rsplit("/", 1)[-1]) in IDLE_FUNCTIONS:
            continue
        lines.append(f"  {100 * t / busy:5.1f}%  {t:7.3f} s  {fn}  ({where})")
    lines += ["", f"top {top} by INCLUSIVE time (share of busy time):"]
    skip = {"<module>", "run", "_run_module_as_main", "_run_code", "main", "run_forever",
            "run_until_complete", "_run_once", "serve_until_signalled", "MainThread"}
    shown = 0
    for (fn, where), t in sorted(f["inclusive"].items(), key=lambda kv: -kv[1]):
        if fn in skip or "runpy" in where:
            continue
        lines.append(f"  {100 * t / busy:5.1f}%  {t:7.3f} s  {fn}  ({where})")
        shown += 1
        if shown >= top:
            break
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from pyinstrument.session import Session

    top = 30
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
    print(flat_report(Session.load(argv[0]), top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
