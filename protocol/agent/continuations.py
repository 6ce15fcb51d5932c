"""Session continuations (continue_session): the manifest of a successor session and the first
message it starts from. Pure: ids, counts and the clock are arguments.

A conversation that has grown long, or whose thread has run its course while the work goes on,
continues in a fresh session. The successor starts from exactly what the manifest says: the
handoff the agent wrote and the list of sources it cited are **loaded** (they are the successor's
first message); the predecessor's transcript and plan are left **cold** (named, readable through
`thread:<id>`, never loaded). The manifest is stored with the edge (`session_continuations`) and
shown by GetSession, so a person can see what the successor was given and what it was not.
"""
from __future__ import annotations

MAX_HANDOFF_CHARS = 20_000
MAX_REASON_CHARS = 500
MAX_SOURCES = 50
MAX_SOURCE_CHARS = 2_000
MAX_TITLE_CHARS = 120
MAX_CHAIN = 20        # successors after one origin session: a chain that keeps continuing itself ends
VERSION = 1
OPEN = "<session_continuation>"
CLOSE = "</session_continuation>"


def _inert(text: str) -> str:
    """The agent's text inside our frame, unable to close it (or open another) early."""
    for tag in (OPEN, CLOSE, "<handoff>", "</handoff>"):
        text = text.replace(tag, tag.replace("<", "‹").replace(">", "›"))
    return text


def build_manifest(*, handoff: str, reason: str | None, sources: list[str], predecessor_id: str,
                   predecessor_events: int, plan: dict | None) -> dict:
    """What the successor starts from (loaded) and what it does not (cold)."""
    manifest: dict = {"version": VERSION, "handoff": handoff, "sources": list(sources),
                      "loaded": [{"kind": "handoff", "chars": len(handoff)},
                                 {"kind": "sources", "count": len(sources)}],
                      "cold": [{"kind": "thread", "address": f"thread:{predecessor_id}",
                                "events": predecessor_events}]}
    if reason:
        manifest["reason"] = reason
    steps = (plan or {}).get("steps") or []
    if steps:
        open_steps = sum(1 for s in steps if s.get("status") not in ("done", "failed", "skipped"))
        manifest["cold"].append({"kind": "plan", "address": f"thread:{predecessor_id}",
                                 "steps": len(steps), "open": open_steps})
    return manifest


def first_message(manifest: dict, predecessor_id: str, predecessor_title: str | None) -> str:
    """The successor's first message (stored as the server's: role user, actor system)."""
    named = f"thread:{predecessor_id}" + (f" (“{_inert(predecessor_title)[:200]}”)" if predecessor_title else "")
    lines = [OPEN, f"This conversation continues {named}."]
    if manifest.get("reason"):
        lines.append(f"Why it continues here: {_inert(manifest['reason'])}")
    lines += ["", "What the previous session handed over:", "<handoff>", _inert(manifest["handoff"]), "</handoff>"]
    if manifest["sources"]:
        lines += ["", "Sources it cited (not loaded: read the ones you need):"]
        lines += [f"- {_inert(source)}" for source in manifest["sources"]]
    cold = []
    for item in manifest["cold"]:
        if item["kind"] == "thread":
            cold.append(f"- the previous conversation, {item['address']} ({item['events']} events)")
        elif item["kind"] == "plan":
            cold.append(f"- its checklist ({item['steps']} steps, {item['open']} left open), in {item['address']}")
    lines += ["", "Left cold (not loaded; read it with the read verb only if you need it):", *cold,
              "", "Carry on with the work from the handoff.", CLOSE]
    return "\n".join(lines)
