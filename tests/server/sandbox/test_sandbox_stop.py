"""A sandbox run stopped while its processes still hold its output pipes leaves nothing for the
garbage collector to close after the event loop has: no "Event loop is closed" traceback at a
server's stop (seen once in the log of a server stopped during its sandbox self-check).

A stand-in `bwrap` (a shell script) plays the sandbox whose processes outlive the outer bwrap
(--die-with-parent takes them down, but not at once): it starts a child in a session of its own
that keeps stdout and stderr open, then waits. The run is cancelled twice, as a stop and a
--tool-timeout can do, which cuts the kill path's wait short; the loop then closes, and the
collector runs. Each case runs in a child interpreter so that its loop, collector and stderr are
its own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SYSTEM_PYTHON = "/usr/bin/python3"   # runnable by nobody (this checkout's may live under /root)
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.access(SYSTEM_PYTHON, os.X_OK),
                                reason="the sandbox runs on Linux, with a python3 under /usr")

CHILD = textwrap.dedent('''
    import asyncio, gc, os, sys, time
    from seed_agents.server.sandbox.bubblewrap import BubblewrapSandbox
    from seed_agents.server.sandbox.port import Job

    fake, held = sys.argv[1], sys.argv[2]

    async def main():
        sandbox = BubblewrapSandbox(bwrap=fake)
        running = asyncio.Event()
        job = Job("python", "print(1)", 30, {}, progress=lambda text: running.set())
        task = asyncio.create_task(sandbox.run(job, checking=True))
        await asyncio.wait_for(running.wait(), 30)   # its output came back: the pipes are read
        task.cancel()
        for _ in range(3):                            # into the kill path's wait
            await asyncio.sleep(0)
        task.cancel()
        try:
            await asyncio.wait_for(task, 30)
        except asyncio.CancelledError:
            pass
        sandbox.readers.shutdown()
        sandbox.writers.shutdown()

    started = time.monotonic()
    asyncio.run(main())
    gc.collect()   # what the interpreter does at exit, here where stderr is still read
    print("stopped in %.1f s" % (time.monotonic() - started))
''')


@pytest.fixture
def stand_in():
    """(the stand-in bwrap, the file its pipe-holding child's pid lands in). A folder of its own
    in /tmp: as root the sandbox runs as nobody, who must run the script and write the pid."""
    folder = tempfile.mkdtemp(prefix="seed-sandbox-stop-")
    os.chmod(folder, 0o777)
    fake, held = os.path.join(folder, "bwrap"), os.path.join(folder, "held")
    holder = "import os, time; os.closerange(3, 4096); time.sleep(60)"   # (the result pipe is not held)
    with open(fake, "w") as f:
        f.write(f'#!/bin/sh\nsetsid {SYSTEM_PYTHON} -c "{holder}" &\necho $! > {held}\n'
                'echo started\nexec sleep 120\n')
    os.chmod(fake, 0o755)
    try:
        yield fake, held
    finally:
        try:
            with open(held) as f:
                os.kill(int(f.read()), 9)   # the holder this test started (its own session)
        except (OSError, ValueError):
            pass
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sandbox_cancelled_twice_while_its_processes_hold_the_pipes_leaves_no_traceback(stand_in):
    fake, held = stand_in
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, fake, held], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "stopped in" in done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert "Event loop is closed" not in done.stderr, done.stderr
