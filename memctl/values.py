"""How memctl reads a number a hand may have written in a fact's metadata (`importance`, `confidence`).

One rule for every reader (recall's score, MEMORY.md's order, `--json`, doctor): a number
from 0 to 1, clamped into that range when outside it; nothing usable (absent, `true`, `high`,
`.nan`, `.inf`) reads as None, and the reader takes the type's default. `--json` prints null
then, never NaN or Infinity (which are not JSON). Light: recall imports it, so no PyYAML here.
"""

from __future__ import annotations

import math
from typing import Any


def unit_value(value: Any) -> float | None:
    """`value` as a number from 0 to 1 (clamped), or None when it is no finite number (a bool is none)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return min(1.0, max(0.0, number)) if math.isfinite(number) else None


OFF = ("", "0", "false", "no", "off")  # an environment switch set to one of these (any case) is off


def env_on(name: str) -> bool:
    """Whether the environment switch `name` (MEMCTL_NO_COMMIT, MEMCTL_NO_SERVER, MEMCTL_NO_FAST) is on:
    set to anything but OFF. `MEMCTL_NO_COMMIT=no` turned commits off, for it was not "" or "0"."""
    import os

    return os.environ.get(name, "").strip().lower() not in OFF


def json_kind(value: Any) -> str:
    """What a decoded JSON value is, with its article, for an error saying what was given instead:
    "an array", "a string", "a number", "a boolean", "an object", "null"."""
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number", dict: "an object"}
    return kinds.get(type(value), "null")
