"""The current time, with an override for tests and reproducible demos."""

from __future__ import annotations

import os
from datetime import datetime


def now() -> datetime:
    """Local time with its UTC offset; MEMCTL_NOW (ISO-8601) overrides it."""
    fixed = os.environ.get("MEMCTL_NOW")
    if fixed:
        value = datetime.fromisoformat(fixed)
        return value if value.tzinfo else value.astimezone()
    return datetime.now().astimezone()


def stamp() -> str:
    return now().isoformat(timespec="seconds")


def parse_date(text: str) -> datetime:
    """An ISO date or timestamp; a bare date means local midnight."""
    value = datetime.fromisoformat(str(text).strip())
    return value if value.tzinfo else value.astimezone()
