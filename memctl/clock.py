"""The current time, with an override for tests and reproducible demos."""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone

DATE_HINT = "an ISO-8601 date or time, e.g. 2026-12-01 or 2026-12-01T09:00"  # what every date a user types may be
SKEW = 300  # seconds: another machine's clock may run this far ahead before a date it wrote is not believed


def now() -> datetime:
    """Local time with its UTC offset; MEMCTL_NOW (ISO-8601) overrides it."""
    fixed = os.environ.get("MEMCTL_NOW")
    if fixed:
        try:
            value = datetime.fromisoformat(fixed)
        except ValueError:
            from .errors import BadInput  # noqa: PLC0415

            raise BadInput(f"MEMCTL_NOW={fixed!r} is not an ISO-8601 time", hint="e.g. MEMCTL_NOW=2026-05-01T09:00:00+09:00, "
                           "or unset it for the real clock") from None
        return value if value.tzinfo else value.astimezone()
    return datetime.now().astimezone()


def _local(when: datetime) -> bool:
    """Whether `when` is written in the local time zone's offset of its instant (TZ, summer time included):
    the real clock's times are, and a MEMCTL_NOW with this machine's offset."""
    return when.astimezone().utcoffset() == when.utcoffset()


def in_zone_of(when: datetime, reference: datetime) -> datetime:
    """`when` on the wall clock `reference` is read on: the local zone with its summer-time rules when
    `reference` is local time (an instant before the clocks moved keeps the offset of then), else
    `reference`'s fixed offset."""
    return when.astimezone() if _local(reference) else when.astimezone(reference.tzinfo)


def midnight(when: datetime) -> datetime:
    """The start of `when`'s day: local midnight with the offset in force then, not `when`'s (on the day the
    clocks move they differ by an hour), when `when` is local time; else midnight at `when`'s offset."""
    if _local(when):
        day = datetime(when.year, when.month, when.day)
        start = day.astimezone()
        if start.date() < day.date():  # no 00:00 that day (Santiago, Beirut: summer time begins at midnight)
            start = (day + timedelta(hours=1)).astimezone()  # the day's first hour, as the clocks were set
        return start
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def summer_time_ended(then: datetime, later: datetime) -> int:
    """Seconds the local clock was set back between two instants (the hour of an autumn night), else 0:
    a daily job due at the same wall-clock time runs 25 hours after its last run that day."""
    try:
        return max(0, int((then.astimezone().utcoffset() - later.astimezone().utcoffset()).total_seconds()))
    except (OverflowError, ValueError):  # a placeholder date (0001-01-01: Go's zero time) has no local offset
        return 0


def stamp() -> str:
    return now().isoformat(timespec="seconds")


def placeholder(when: datetime) -> bool:
    """A time that stands for none: Go's zero time (year 1), .NET's DateTime.MaxValue (year 9999)."""
    return when.year <= 1 or when.year >= 9999


def parse_date(text: str) -> datetime:
    """An ISO date or timestamp (full-width digits too: ２０２６－０３－１１); a bare date means local midnight.
    ValueError for one that is none, or that has no instant here (year 9999's last second with no offset,
    west of UTC)."""
    value = datetime.fromisoformat(_ascii(text))
    try:
        return value if value.tzinfo else value.astimezone()
    except OverflowError:
        raise ValueError(f"{text!r} is out of range") from None


def earliest(text: str) -> datetime:
    """The earliest instant a date written `text` may mean: a bare date (no time) begins first where the
    day begins first, at UTC+14, whatever this machine's zone (another clone's `2026-12-08` is not in
    the future here until that day has begun somewhere); ValueError as parse_date."""
    value = parse_date(text)
    if any(c in _ascii(text) for c in "Tt:"):  # a time is written: the instant it says
        return value
    return value.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=timezone(timedelta(hours=14)))


def expired(value: object, at: datetime | None = None) -> bool:
    """Whether a fact's `expires` value is past at `at` (default: now); a value that is no ISO-8601
    date never expires (docs/FORMAT.md)."""
    try:
        return bool(value) and expiry(str(value)) <= (at or now())
    except (ValueError, OverflowError):  # (9999-12-31, .NET's MaxValue: its next day is past datetime's range)
        return False


def expiry(text: str) -> datetime:
    """When an `expires` value is past: a bare date (`2027-03-31`) at the end of that day, local time (the
    fact is current all that day, wherever it is read); a timestamp at itself (without an offset: local)."""
    value, local = expiry_wall(text)
    return value.astimezone() if local else value


def expiry_wall(text: str) -> tuple[datetime, bool]:
    """expiry() before the reader's time zone places it: (the wall-clock time, True) for a bare date or a
    time without an offset, (the instant, False) for a timestamp with one. ValueError: no ISO-8601 date."""
    text = _ascii(text)
    value = datetime.fromisoformat(text)
    try:
        date.fromisoformat(text)
        value += timedelta(days=1)  # naive local midnight: the next day's, summer time or not
    except ValueError:
        pass
    return value, value.tzinfo is None


def _ascii(text: object) -> str:
    """`text` stripped, with full-width digits and signs as ASCII (an IME's date) when it has any."""
    text = str(text).strip()
    if not text.isascii():
        import unicodedata  # noqa: PLC0415

        text = unicodedata.normalize("NFKC", text)
    return text


def format_duration(seconds: float) -> str:
    """`45s`, `12m`, `25h`, `25h30m`, `3d4h`: what state.parse_duration reads back (rounded down)."""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    if total < 3 * 86400:
        hours, minutes = divmod(total // 60, 60)
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(total // 3600, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"
