"""When a schedule fires: its slots, as Unix milliseconds, in the schedule's time zone.

A slot is a moment a schedule names. `first_slot` is where a new (or re-timed) schedule starts,
`next_slot` the slot after a moment, `due_slots` the slots between the one a trigger waited for
and now (a server that was down fires the latest and records the rest as skipped).

Wall-clock schedules (weekly, cron) are read in their IANA zone (`zoneinfo`; the `tzdata`
package stands in where the system has no zone files). Across DST each slot fires once:
- a time that does not exist on a spring-forward day (02:30 in Europe/Berlin on the last Sunday
  of March) is taken with the offset in force before the jump, so it fires once, at 03:30 new time;
- a time that happens twice on a fall-back day (02:30 in Berlin, 01:30 in New York) fires at its
  first occurrence only (`fold=0`).
Intervals count absolute time from their anchor, so DST does not touch them.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
MAX_DUE_SLOTS = 1_000   # slots listed at once past a long outage (older ones are not recorded)
_CRON_PROBE_FROM = 946_684_800_000   # 2000-01-01 UTC: where `check` looks for a cron's first match


class ScheduleError(ValueError):
    """The schedule names a zone or a cron expression that does not exist."""


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from None


def check(schedule: dict) -> None:
    """ScheduleError when the schedule cannot be computed (unknown zone, bad cron)."""
    kind = schedule["kind"]
    if kind in ("weekly", "once", "cron"):
        zone(schedule.get("timezone"))
    if kind == "cron":
        from croniter import croniter  # 20 ms of imports (dateutil), only for cron schedules

        expression = schedule["expression"]
        if len(expression.split()) != 5 or not croniter.is_valid(expression):
            raise ScheduleError(f"cron expression {expression!r} is not valid: five fields "
                                "(minute hour day-of-month month day-of-week), e.g. '30 9 * * 1-5'")
        # A valid expression may still name no moment at all (February 31st): croniter then
        # gives up after searching years ahead. Such a trigger would never fire, so it is refused.
        if _next_cron({"expression": expression, "timezone": "UTC"}, _CRON_PROBE_FROM) is None:
            raise ScheduleError(f"cron expression {expression!r} never matches a date (e.g. February 31st); "
                                "check its day-of-month and month fields")


def period_ms(schedule: dict) -> int:
    return schedule["every"] * (HOUR_MS if schedule["unit"] == "hours" else MINUTE_MS)


def first_slot(schedule: dict, anchor: int) -> int | None:
    """The first slot of a schedule made (or re-timed) at `anchor`: an interval's first is one
    period later, a one-time schedule's is its time (past or not: it fires once, as soon as it
    can), a wall-clock schedule's is its first slot after the anchor."""
    kind = schedule["kind"]
    if kind == "interval":
        return anchor + period_ms(schedule)
    if kind == "once":
        return schedule["runAt"]
    return next_slot(schedule, anchor, anchor)


def next_slot(schedule: dict, after: int, anchor: int) -> int | None:
    """The first slot strictly after `after` (None: there is none, e.g. a one-time schedule)."""
    kind = schedule["kind"]
    if kind == "interval":
        period = period_ms(schedule)
        if after < anchor:
            return anchor + period
        return anchor + ((after - anchor) // period + 1) * period
    if kind == "once":
        return None
    if kind == "weekly":
        return _next_weekly(schedule, after)
    return _next_cron(schedule, after)


def due_slots(schedule: dict, due: int, now: int, anchor: int) -> tuple[list[int], int | None]:
    """(the slots from `due` to `now` inclusive, oldest first and at most MAX_DUE_SLOTS of the
    latest; the next slot after `now`)."""
    slots: list[int] = []
    slot: int | None = due
    if schedule["kind"] == "interval" and now - due > MAX_DUE_SLOTS * period_ms(schedule):
        # A long outage of a short interval: jump to the latest slots without walking them all.
        period = period_ms(schedule)
        slot = anchor + ((now - anchor) // period - MAX_DUE_SLOTS + 1) * period
    while slot is not None and slot <= now:
        slots.append(slot)
        if len(slots) > MAX_DUE_SLOTS:
            slots.pop(0)
        slot = next_slot(schedule, slot, anchor)
    return slots, slot


# -- wall-clock schedules ----------------------------------------------------------------------
def _utc_ms(local: datetime) -> int:
    """A zone-aware wall time (fold=0: the first of a repeated hour, the pre-jump offset in a
    gap) as Unix ms."""
    return int(local.astimezone(timezone.utc).timestamp() * 1000)


def _next_weekly(schedule: dict, after: int) -> int:
    tz = zone(schedule["timezone"])
    hour, minute = (int(part) for part in schedule["timeOfDay"].split(":"))
    days = set(schedule["daysOfWeek"])   # 0 = Sunday, as the reference counts
    day = datetime.fromtimestamp(after / 1000, tz).date() - timedelta(days=1)
    for _ in range(9):   # a slot is at most a week (plus a day's offset) away
        if (day.weekday() + 1) % 7 in days:
            slot = _utc_ms(datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz, fold=0))
            if slot > after:
                return slot
        day += timedelta(days=1)
    raise AssertionError("a weekly schedule with days always has a slot within a week")


def _next_cron(schedule: dict, after: int) -> int | None:
    """The cron's first slot after `after`; None when it matches no date (refused by `check`, but
    a trigger stored before that check must not fail the scheduler)."""
    from croniter import CroniterBadDateError, croniter

    tz = zone(schedule.get("timezone"))
    start = datetime.fromtimestamp(after / 1000, tz)
    # croniter answers in wall time; the slot is the first moment after `after` whose wall time
    # matches (a nonexistent time resolved as above, a repeated one taken once).
    it = croniter(schedule["expression"], start.replace(tzinfo=None))
    for _ in range(1_000):
        try:
            local = it.get_next(datetime)
        except CroniterBadDateError:
            return None
        slot = _utc_ms(local.replace(tzinfo=tz, fold=0))
        if slot > after:
            return slot
    return None
