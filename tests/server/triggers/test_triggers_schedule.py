"""Slots of each schedule kind, across both DST transitions of two zones (pure: no server)."""
from __future__ import annotations

import pytest

from seed_agents.server.triggers import schedule as sched

from tests.triggers_helpers import utc_ms

MIN = 60_000


def slots(schedule: dict, start: str, n: int) -> list[int]:
    out, at = [], utc_ms(start)
    for _ in range(n):
        at = sched.next_slot(schedule, at, at)
        out.append(at)
    return out


def test_interval_counts_absolute_time_from_its_anchor():
    every = {"kind": "interval", "every": 90, "unit": "minutes"}
    anchor = utc_ms("2026-03-29T00:10")   # a DST night in Berlin: intervals do not care
    assert sched.first_slot(every, anchor) == anchor + 90 * MIN
    assert sched.next_slot(every, anchor + 91 * MIN, anchor) == anchor + 180 * MIN
    hours = {"kind": "interval", "every": 2, "unit": "hours"}
    assert sched.next_slot(hours, anchor, anchor) == anchor + 120 * MIN


@pytest.mark.parametrize("zone, spring, fall, spring_slot, fall_slot, fall_week_h", [
    # Berlin: 02:00 -> 03:00 on 2026-03-29; 03:00 -> 02:00 on 2026-10-25, so 02:30 happens twice.
    ("Europe/Berlin", "2026-03-29", "2026-10-25", "2026-03-29T01:30", "2026-10-25T00:30", 1),
    # New York: 02:00 -> 03:00 on 2026-03-08; 02:00 -> 01:00 on 2026-11-01 (02:30 once, in EST).
    ("America/New_York", "2026-03-08", "2026-11-01", "2026-03-08T07:30", "2026-11-01T07:30", 0),
])
def test_weekly_fires_once_on_both_dst_days(zone, spring, fall, spring_slot, fall_slot, fall_week_h):
    weekly = {"kind": "weekly", "daysOfWeek": [0], "timeOfDay": "02:30", "timezone": zone}
    week = 7 * 24 * 60 * MIN
    # 02:30 does not exist on the spring day: it fires once, at 03:30 by the new clock (the
    # offset before the jump); the next Sunday's 02:30 is summer time, an hour less than a week on.
    got = slots(weekly, f"{spring}T00:00", 2)
    assert got == [utc_ms(spring_slot), utc_ms(spring_slot) + week - 60 * MIN]
    # On the fall day a repeated 02:30 fires at its first occurrence only; the next Sunday's is
    # winter time again.
    got = slots(weekly, f"{fall}T00:00", 2)
    assert got == [utc_ms(fall_slot), utc_ms(fall_slot) + week + fall_week_h * 60 * MIN]
    # Walking slot to slot over the whole year gives one slot per Sunday: 52 or 53, no more.
    year = slots(weekly, "2026-01-01T00:00", 60)
    in_2026 = [s for s in year if s < utc_ms("2027-01-01T00:00")]
    assert len(in_2026) == 52 and len(set(in_2026)) == 52


def test_new_york_repeated_hour_fires_once():
    # 01:30 happens twice in New York on 2026-11-01 (05:30 and 06:30 UTC): one slot.
    daily = {"kind": "weekly", "daysOfWeek": list(range(7)), "timeOfDay": "01:30", "timezone": "America/New_York"}
    got = slots(daily, "2026-10-31T12:00", 3)
    assert got == [utc_ms("2026-11-01T05:30"), utc_ms("2026-11-02T06:30"), utc_ms("2026-11-03T06:30")]


def test_weekly_days_and_time():
    weekdays = {"kind": "weekly", "daysOfWeek": [1, 3, 5], "timeOfDay": "09:15", "timezone": "UTC"}
    # 2026-06-01 is a Monday.
    assert slots(weekdays, "2026-06-01T09:15", 3) == [utc_ms("2026-06-03T09:15"), utc_ms("2026-06-05T09:15"),
                                                      utc_ms("2026-06-08T09:15")]


def test_once_has_one_slot():
    once = {"kind": "once", "runAt": utc_ms("2026-05-01T12:00")}
    assert sched.first_slot(once, utc_ms("2026-04-01T00:00")) == utc_ms("2026-05-01T12:00")
    assert sched.next_slot(once, utc_ms("2026-05-01T12:00"), 0) is None


def test_cron_in_a_zone_across_dst():
    cron = {"kind": "cron", "expression": "30 2 * * *", "timezone": "Europe/Berlin"}
    assert slots(cron, "2026-03-28T00:00", 3) == [utc_ms("2026-03-28T01:30"), utc_ms("2026-03-29T01:30"),
                                                  utc_ms("2026-03-30T00:30")]
    assert slots(cron, "2026-10-24T00:00", 3) == [utc_ms("2026-10-24T00:30"), utc_ms("2026-10-25T00:30"),
                                                  utc_ms("2026-10-26T01:30")]
    every_half_hour = {"kind": "cron", "expression": "*/30 * * * *", "timezone": "America/New_York"}
    got = slots(every_half_hour, "2026-11-01T04:50", 4)
    # 01:00 and 01:30 EDT fire; the repeated 01:00 and 01:30 EST do not; then 02:00 EST.
    assert got == [utc_ms("2026-11-01T05:00"), utc_ms("2026-11-01T05:30"), utc_ms("2026-11-01T07:00"),
                   utc_ms("2026-11-01T07:30")]


def test_due_slots_after_an_outage():
    every = {"kind": "interval", "every": 1, "unit": "minutes"}
    due = utc_ms("2026-01-01T00:01")
    got, following = sched.due_slots(every, due, due + 2 * MIN + 10, due)
    assert got == [due, due + MIN, due + 2 * MIN] and following == due + 3 * MIN
    # A year down: only the latest slots are listed, without walking them all.
    got, following = sched.due_slots(every, due, due + 365 * 24 * 60 * MIN, due)
    assert len(got) == sched.MAX_DUE_SLOTS and got[-1] == due + 365 * 24 * 60 * MIN
    assert following == got[-1] + MIN


def test_bad_zone_and_cron_are_refused():
    with pytest.raises(sched.ScheduleError, match="unknown time zone"):
        sched.check({"kind": "weekly", "daysOfWeek": [1], "timeOfDay": "09:00", "timezone": "Mars/Olympus"})
    for bad in ("61 * * * *", "* * *", "every day", "* * * * * *"):
        with pytest.raises(sched.ScheduleError, match="cron expression"):
            sched.check({"kind": "cron", "expression": bad})
