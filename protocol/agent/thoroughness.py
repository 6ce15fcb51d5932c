"""A session's thoroughness (the storage design's `sessions.thoroughness`: quick, normal or deep),
the delegation preset its turns run under. Pure: a table.

The reference's storage design names the column and its three values, and its code at 7819d47 has
no presets, so these are ours. A preset never grants more than the server's own limits (normal is
them): `quick` narrows delegation (children one level down, a few per session) and asks the model
to answer directly; `deep` keeps the limits and asks it to split independent work into parallel
children and check their results. It applies to the whole delegation tree of a session's turn
(the children's sessions carry none of their own)."""
from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("quick", "normal", "deep")
DEFAULT = "normal"


@dataclass(frozen=True)
class Preset:
    name: str
    max_depth: int        # how many levels of children below the root run
    max_children: int     # children per session
    guidance: str | None  # added to the delegate verb's description (what the model is told)


PRESETS = {
    "quick": Preset("quick", 1, 3, "This conversation is set to quick: answer directly and briefly; delegate only "
                                    "when a task cannot be done otherwise (children cannot delegate further, at most 3 "
                                    "per conversation)."),
    "normal": Preset("normal", 3, 10, None),
    "deep": Preset("deep", 3, 10, "This conversation is set to deep: be thorough. Plan first, split independent "
                                  "research into parallel children in one reply, and check what they bring back "
                                  "before you answer."),
}


def preset(level: str | None) -> Preset:
    return PRESETS.get(level or DEFAULT, PRESETS[DEFAULT])
