"""Which embedded JavaScript engine runs workflows: the four things a workflow host needs, measured.

A workflow (issue 34) runs agent-written JavaScript inside the server process, so the engine must
(1) cap its memory, (2) interrupt a loop that never awaits, (3) call back into Python from inside
the script, and (4) let the host drain promise jobs itself, one slice at a time. It must also let
the server's other threads run while a script computes (the GIL), or one hostile loop stalls every
client. Each candidate runs in its own interpreter, because `quickjs` and `python-quickjs-ng` both
install a module named `quickjs`:

    python bench/workflow_engines.py                       # the engine in this venv
    python bench/workflow_engines.py --python /tmp/v-quickjs-ng/bin/python --python ...

Prints one row per candidate: cold context, host call cost, what a runaway loop and a runaway
allocation do, and the worst stall of a Python thread while the engine spins (bounded: each probe
has its own cap and the whole probe a 60 s wall).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

PROBE = r'''
import json, sys, threading, time, resource

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

out = {}
try:
    import quickjs
    import importlib.metadata as md
    name = "quickjs"
    for dist in ("quickjs", "python-quickjs-ng", "edwh-quickjs-ng"):
        try:
            out["dist"] = dist + " " + md.version(dist); break
        except md.PackageNotFoundError:
            pass
except ImportError:
    quickjs = None
    import py_mini_racer, importlib.metadata as md
    out["dist"] = "mini-racer " + md.version("mini-racer")

if quickjs is not None:
    def fresh(mem=64 << 20, secs=None):
        c = quickjs.Context()
        c.set_memory_limit(mem)
        if secs is not None:
            c.set_time_limit(secs)
        return c
    t = time.perf_counter()
    for _ in range(20):
        c = fresh(); c.eval("1+1"); del c
    out["cold_context_ms"] = (time.perf_counter() - t) / 20 * 1000
    c = fresh()
    c.add_callable("h", lambda x: x + 1)
    t = time.perf_counter(); c.eval("var s=0; for (var i=0;i<20000;i++) s=h(s);")
    out["host_call_us"] = (time.perf_counter() - t) / 20000 * 1e6
    c.eval("var got=null; Promise.resolve(41).then(function(v){got=v+1})")
    before = c.eval("got")
    while c.execute_pending_job():
        pass
    out["promise_jobs_by_host"] = before is None and c.eval("got") == 42
    c = fresh(secs=0.3)
    t = time.perf_counter()
    try:
        c.eval("while(true){}"); out["loop"] = "not stopped"
    except Exception as e:
        out["loop"] = f"{type(e).__name__}: {str(e)[:40]}"
    out["loop_stopped_after_ms"] = (time.perf_counter() - t) * 1000
    c = fresh(mem=32 << 20)
    t = time.perf_counter()
    try:
        c.eval("var a=[]; while(true) a.push(new Array(100000).fill(1))"); out["alloc"] = "not stopped"
    except Exception as e:
        out["alloc"] = f"{type(e).__name__}: {str(e)[:40]}"
    out["alloc_stopped_after_ms"] = (time.perf_counter() - t) * 1000
    out["usable_after_cap"] = c.eval("1+2") == 3
    # The fuel must hold while the host can still be reached: a host call under a time limit,
    # and a promise job that never ends.
    c = fresh(secs=0.3)
    c.add_callable("h", lambda x: x + 1)
    try:
        out["host_call_under_fuel"] = c.eval("h(1)") == 2
    except Exception as e:
        out["host_call_under_fuel"] = f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"
    c = fresh(secs=0.3)
    c.eval("Promise.resolve().then(function(){ while(true){} })")
    t = time.perf_counter()
    done = threading.Event()
    def job():
        try:
            c.execute_pending_job()
            out["spinning_job"] = "not stopped"
        except Exception as e:
            out["spinning_job"] = f"stopped: {str(e).splitlines()[0][:40]}"
        done.set()
    threading.Thread(target=job, daemon=True).start()
    if not done.wait(5):
        out["spinning_job"] = "not stopped after 5 s"
    out["spinning_job_ms"] = (time.perf_counter() - t) * 1000
    def spin():
        cc = fresh(secs=1.0)
        try:
            cc.eval("while(true){}")
        except Exception:
            pass
else:
    from py_mini_racer import MiniRacer
    t = time.perf_counter()
    for _ in range(5):
        c = MiniRacer(); c.eval("1+1"); c.close()
    out["cold_context_ms"] = (time.perf_counter() - t) / 5 * 1000
    # Host functions are async from JS (a promise per call), answered on V8's own thread.
    c = MiniRacer()
    out["host_call_us"] = None       # (wrap_py_function: async, a promise per call, answered on V8's thread)
    out["promise_jobs_by_host"] = False  # V8 drains its microtasks itself, never one slice at a time
    out["host_call_under_fuel"] = "async only"
    out["spinning_job"] = "eval timeout only"
    t = time.perf_counter()
    try:
        c.eval("while(true){}", timeout_sec=0.3); out["loop"] = "not stopped"
    except Exception as e:
        out["loop"] = f"{type(e).__name__}: {str(e)[:40]}"
    out["loop_stopped_after_ms"] = (time.perf_counter() - t) * 1000
    c = MiniRacer(); c.set_hard_memory_limit(32 << 20)
    t = time.perf_counter()
    try:
        c.eval("var a=[]; while(true) a.push(new Array(100000).fill(1))", timeout_sec=10); out["alloc"] = "not stopped"
    except Exception as e:
        out["alloc"] = f"{type(e).__name__}: {str(e)[:40]}"
    out["alloc_stopped_after_ms"] = (time.perf_counter() - t) * 1000
    try:
        out["usable_after_cap"] = c.eval("1+2") == 3
    except Exception:
        out["usable_after_cap"] = False
    def spin():
        cc = MiniRacer()
        try:
            cc.eval("while(true){}", timeout_sec=1.0)
        except Exception:
            pass

# Does a Python thread keep running while the engine spins for 1 s in another thread?
worst = 0.0
th = threading.Thread(target=spin); th.start()
deadline = time.monotonic() + 5
while th.is_alive() and time.monotonic() < deadline:
    t = time.perf_counter(); time.sleep(0.001); worst = max(worst, time.perf_counter() - t)
th.join(5)
out["python_thread_worst_stall_ms"] = worst * 1000
out["max_rss_mib"] = rss_mib()
print(json.dumps(out))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", default=[], help="an interpreter with one candidate installed")
    args = parser.parse_args()
    for python in args.python or [sys.executable]:
        try:
            done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"{python}: probe exceeded 60 s")
            continue
        if done.returncode != 0:
            print(f"{python}: {done.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(done.stdout)
        print(json.dumps(row, indent=None))


if __name__ == "__main__":
    main()
