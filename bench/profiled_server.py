"""The server under pyinstrument, for the bench only (the server code is untouched):

    python -m bench.profiled_server OUT_PREFIX [--window] -- <seed_agents.server.main arguments>

Samples the main thread (the event loop; the database writer thread is not sampled) every
0.5 ms with async mode off, so time the loop spends waiting shows as the selector's select().
With --window it samples only between SIGUSR1 (start) and SIGUSR2 (stop) that the load
process sends around its timed phases (bench.processes.profile_window); the windows are combined.
On exit it writes OUT_PREFIX.pyisession and OUT_PREFIX.txt (call tree) and, with
bench.profile, OUT_PREFIX.top.txt (flat self/inclusive time).
"""
from __future__ import annotations

import signal
import sys

from pyinstrument import Profiler


def main(argv: list[str]) -> int:
    prefix, rest = argv[0], argv[1:]
    window = False
    if rest and rest[0] == "--window":
        window, rest = True, rest[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    profiler = Profiler(interval=0.0005, async_mode="disabled")

    def start(*_):
        if not profiler.is_running:
            profiler.start()

    def stop(*_):
        if profiler.is_running:
            profiler.stop()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    if not window:
        start()
    from seed_agents.server.main import main as server_main

    try:
        rc = server_main(rest)
    finally:
        stop()
        session = profiler.last_session
        if session is not None:
            session.save(prefix + ".pyisession")
            with open(prefix + ".txt", "w") as f:
                f.write(profiler.output_text(unicode=False, color=False, show_all=False))
            from bench.profile import flat_report

            with open(prefix + ".top.txt", "w") as f:
                f.write(flat_report(session))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
