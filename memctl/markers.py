"""Unresolved git merge-conflict markers in a memctl file.

A merge that stopped half-way leaves `<<<<<<< ours`, `=======`, `>>>>>>> theirs`
lines in the file. Read as data they would become a fact's text, a ledger row or
a number in STATE.md, and the next write would commit them, so doctor names them
(file:line) and writers refuse the file until it is resolved.

A line `<<<<<<<` or `>>>>>>>` (alone or followed by a space) is a marker; a
`=======` or `|||||||` line only between them (alone, `=======` is a markdown
heading underline).
"""

from __future__ import annotations

_OPEN, _CLOSE = b"<<<<<<<", b">>>>>>>"


def _is(line: bytes, marker: bytes) -> bool:
    return line.startswith(marker) and (len(line) == 7 or line[7:8] in (b" ", b"\r"))


def conflict_lines(data: bytes) -> list[int]:
    """1-based numbers of the marker lines in `data` (empty when there are none)."""
    if _OPEN not in data and _CLOSE not in data:
        return []  # the common case: one scan at memchr speed
    found = []
    inside = False
    for number, line in enumerate(data.split(b"\n"), 1):
        if _is(line, _OPEN):
            inside = True
            found.append(number)
        elif _is(line, _CLOSE):
            inside = False
            found.append(number)
        elif inside and (_is(line, b"=======") or _is(line, b"|||||||")):
            found.append(number)
    return found


def first_conflict(data: bytes) -> int | None:
    lines = conflict_lines(data)
    return lines[0] if lines else None


def refuse_conflicts(data: bytes, rel: str) -> None:
    """Refused when `data` (the file `rel`) holds conflict markers."""
    line = first_conflict(data)
    if line is not None:
        from .errors import Refused  # noqa: PLC0415

        raise Refused(f"{rel}:{line}: unresolved merge conflict markers; nothing was written",
                      hint=f"resolve the conflict in {rel} (keep the right lines, delete the <<<<<<< ======= >>>>>>> lines), then commit it")
