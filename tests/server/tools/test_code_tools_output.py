"""`execute`'s result fitted to the tool-output bound (server/tools/code_tools.py): the server's
note on how a run ended survives any cut of stderr. Code that floods stderr (a fork bomb's
"Cannot fork" lines) once hid "timed out" behind the cut."""
from __future__ import annotations

import json

from seed_agents.server.tools.code_tools import _fit

NOTE = "[execution timed out after 3 s and was stopped]"


def _value(stdout: str, stderr: str) -> dict:
    return {"summary": "Ran shell code (exit -1, 3020ms).", "exitCode": -1, "success": False, "stdout": stdout,
            "stderr": stderr, "truncated": False, "durationMs": 3020, "changedFiles": []}


def test_a_flooded_stderr_is_cut_and_the_timeout_note_kept_within_the_bound():
    limit = 4000
    out = _fit(_value("x" * 10_000, "/bin/sh: 1: Cannot fork\n" * 2_000), limit, [NOTE])
    assert out["stderr"].endswith("\n" + NOTE)
    assert out["stderr"].startswith("/bin/sh: 1: Cannot fork")
    assert out["truncated"] is True
    assert len(json.dumps(out, ensure_ascii=False)) <= limit


def test_a_small_result_gets_its_note_and_nothing_cut():
    out = _fit(_value("", "oops"), 4000, [NOTE])
    assert out["stderr"] == "oops\n" + NOTE and out["truncated"] is False
    assert _fit(_value("", ""), 4000, [NOTE])["stderr"] == NOTE
