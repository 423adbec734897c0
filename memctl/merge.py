"""Pure resolvers for memctl's own files when two histories meet (docs/SYNC.md).

Each takes the three versions a merge sees (the merge base, ours, theirs) as
text and returns the merged text, never with conflict markers. `memctl sync`
and the git merge drivers (`memctl merge-driver KIND ...`) call the same
functions, so `git pull` and `memctl sync` resolve alike.

- MEMORY.md: the generated block is merged as a set of lines keyed by the file
  they link to; the text outside the block is merged as text. Its topic files
  (memory-index/<type>.md, wholly generated) are merged the same way.
- STATE.md: a snapshot; the side with the newer `updated:` wins.
- ledgers: ours as it is, then the rows theirs added (a merge must extend its
  first parent byte for byte: `ledger verify`); a header is never doubled.
- facts: the version with the newer `updated:` stays in place; the other is
  returned so that the caller keeps it as a conflict (memory/conflicts/).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from difflib import SequenceMatcher
from typing import NamedTuple

from . import clock
from .config import FACT_TYPES
from .index import BEGIN, END

KINDS = ("index", "topic", "state", "ledger", "fact", "archive")
CONFLICTS_DIR = "conflicts"  # beside the fact files: memory/conflicts/<stem>.<8 hex>.md

_UPDATED_RE = re.compile(r"^\s*updated:\s*['\"]?([^'\"\s]+)", re.M)
_HEADING_RE = re.compile(r"^##\s+(\S.*?)\s*$")
# a title as index._LINE_RE reads it: brackets escaped (`a\]b`) or in pairs (`D [draft]`)
_LINK_RE = re.compile(r"^\s*[-*]\s+\[(?:\\[\[\]]|[^\[\]\n]|\[[^\[\]\n]*\])*\]\((?:<([^<>\n]+)>|([^)\s]+))\)")


class FactMerge(NamedTuple):
    text: str  # what stays in place
    loser: str | None  # the other version, to keep as a conflict (None: nothing lost)
    how: str  # "clean" | "ours" | "theirs" (which side's version stayed in place)


# ---------------------------------------------------------------- text

def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _hunks(base: list[str], side: list[str]) -> list[tuple[int, int, list[str]]]:
    matcher = SequenceMatcher(None, base, side, autojunk=False)
    return [(i1, i2, side[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _apply(base: list[str], start: int, end: int, hunks: list[tuple[int, int, list[str]]]) -> list[str]:
    out: list[str] = []
    pos = start
    for i1, i2, lines in hunks:
        out += base[pos:i1] + lines
        pos = i2
    return out + base[pos:end]


def _merge_lines(b: list, o: list, t: list) -> tuple[list, bool]:
    """Three-way merge of line lists; an overlap keeps ours, then the lines only theirs has."""
    same = 0  # the shared history is usually a long common prefix: skip it before diffing
    for x, y, z in zip(b, o, t):
        if not x == y == z:
            break
        same += 1
    head, b, o, t = b[:same], b[same:], o[same:], t[same:]
    tagged = sorted([(i1, i2, lines, 0) for i1, i2, lines in _hunks(b, o)]
                    + [(i1, i2, lines, 1) for i1, i2, lines in _hunks(b, t)], key=lambda h: (h[0], h[1]))
    out = head
    pos = 0
    clean = True
    i = 0
    while i < len(tagged):
        start, end = tagged[i][0], tagged[i][1]
        group = [tagged[i]]
        i += 1
        # Overlapping ranges, or two insertions at the same place; changes that only touch stay apart.
        while i < len(tagged) and (tagged[i][0] < end or tagged[i][0] == start):
            end = max(end, tagged[i][1])
            group.append(tagged[i])
            i += 1
        out += b[pos:start]
        mine = _apply(b, start, end, [(h[0], h[1], h[2]) for h in group if h[3] == 0])
        other = _apply(b, start, end, [(h[0], h[1], h[2]) for h in group if h[3] == 1])
        sides = {h[3] for h in group}
        if sides == {0}:
            out += mine
        elif sides == {1}:
            out += other
        elif mine == other:
            out += mine
        else:
            clean = False
            out += _with_rest(mine, other)
        pos = end
    return out + b[pos:], clean


def _with_rest(mine: list, other: list) -> list:
    """`mine`, then the lines of `other` that `mine` does not hold (counted: a line twice there, twice here)."""
    have = Counter(mine)
    extra = []
    for line in other:
        if have[line]:
            have[line] -= 1
        else:
            extra.append(line)
    return mine + extra


def _terminated(lines: list) -> list:
    if lines and not lines[-1].endswith(lines[-1][:0] + ("\n" if isinstance(lines[-1], str) else b"\n")):
        lines[-1] += "\n" if isinstance(lines[-1], str) else b"\n"  # a torn last line is never glued to the next
    return lines


def merge_text(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """A three-way line merge; where both sides changed the same lines, ours then theirs' other lines.

    Returns (text, clean). Never writes conflict markers: an overlap keeps
    ours and adds the lines theirs has that ours has not (`clean` is False).
    """
    if ours == theirs or theirs == base:
        return ours, True
    if ours == base:
        return theirs, True
    merged, clean = _merge_lines(*(_terminated(_lines(x)) for x in (base, ours, theirs)))
    return "".join(merged), clean


# ---------------------------------------------------------------- MEMORY.md

def _split_index(text: str) -> tuple[str, dict[str, tuple[str, str]]] | None:
    """(text with an empty block, {target: (type, line)}), or None when there is no block."""
    lines = text.split("\n")
    stripped = [line.strip() for line in lines]
    if BEGIN not in stripped or END not in stripped[stripped.index(BEGIN):]:
        return None
    start = stripped.index(BEGIN)
    end = stripped.index(END, start)
    entries: dict[str, tuple[str, str]] = {}
    heading = "other"
    for line in lines[start + 1:end]:
        found = _HEADING_RE.match(line)
        if found:
            heading = found.group(1)
            continue
        link = _LINK_RE.match(line)
        if link:
            entries[link.group(1) or link.group(2)] = (heading, line)
    rest = "\n".join(lines[:start] + [BEGIN, END] + lines[end + 1:])
    return rest, entries


def _merge_entries(base: dict, ours: dict, theirs: dict) -> tuple[dict, bool]:
    """Index lines keyed by the file they link to, merged three-way; and whether no line changed on both sides."""
    entries = {}
    clean = True
    for target in sorted({*base, *ours, *theirs}):
        b, o, t = base.get(target), ours.get(target), theirs.get(target)
        clean = clean and (o == t or o == b or t == b)
        value = _merge_entry(b, o, t)
        if value is not None:
            entries[target] = value
    return entries, clean


def _topic_lines(text: str) -> tuple[list[str], dict[str, str]]:
    """A topic file (memory-index/<type>.md, wholly generated): its lines before the first link, and its links by target."""
    head: list[str] = []
    entries: dict[str, str] = {}
    for line in text.split("\n"):
        link = _LINK_RE.match(line)
        if link:
            entries[link.group(1) or link.group(2)] = line
        elif not entries:
            head.append(line)
    while head and not head[-1]:
        head.pop()
    return head, entries


def merge_topic_checked(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """A topic file as MEMORY.md's block: its lines merged by the fact they link to, in the order memctl
    writes them (by stem); False when a line changed on both sides (the caller regenerates it from the facts)."""
    if ours == theirs or theirs == base:
        return ours, True
    if ours == base:
        return theirs, True
    (_, b), (head, o), (t_head, t) = (_topic_lines(x) for x in (base, ours, theirs))
    entries, clean = _merge_entries(b, o, t)
    body = [entries[target] for target in sorted(entries, key=lambda target: target.removesuffix(".md"))]
    return "\n".join((head or t_head) + [""] + body) + "\n", clean


def _merge_entry(base, ours, theirs):
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    # Both changed the line differently: pick one the same way from either side;
    # `memctl sync` regenerates the block from the merged facts afterwards.
    return max(x for x in (ours, theirs) if x is not None) if (ours and theirs) else (ours or theirs)


def _stem(target: str) -> str:
    return target[:-3] if target.endswith(".md") else target


def render_entries(entries: dict[str, tuple[str, str]]) -> list[str]:
    groups: dict[str, list[tuple[str, str]]] = {}
    for target, (heading, line) in entries.items():
        groups.setdefault(heading, []).append((_stem(target), line))
    order = [t for t in FACT_TYPES if t in groups] + sorted(t for t in groups if t not in FACT_TYPES)
    lines = [BEGIN]
    for heading in order:
        lines.append(f"## {heading}")
        lines += [line for _, line in sorted(groups[heading])]
    return lines + [END]


def merge_index(base: str, ours: str, theirs: str) -> str:
    """MEMORY.md: the block as a three-way set of lines keyed by their file; the rest as text."""
    return merge_index_checked(base, ours, theirs)[0]


def merge_index_checked(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """merge_index, and whether it was clean: False when a line changed on both sides (or there was
    no block to merge by line), so that the block should be regenerated from the merged facts."""
    if ours == theirs or theirs == base:
        return ours, True
    if ours == base:
        return theirs, True
    parts = [_split_index(x) for x in (base, ours, theirs)]
    if parts[1] is None or parts[2] is None:
        return merge_text(base, ours, theirs)[0], False
    b_rest, b_entries = parts[0] if parts[0] is not None else (base, {})
    (o_rest, o_entries), (t_rest, t_entries) = parts[1], parts[2]
    entries, clean = _merge_entries(b_entries, o_entries, t_entries)
    rest, text_clean = merge_text(b_rest, o_rest, t_rest)
    lines = rest.split("\n")
    stripped = [line.strip() for line in lines]
    block = render_entries(entries)
    if BEGIN in stripped and END in stripped[stripped.index(BEGIN):]:
        start = stripped.index(BEGIN)
        end = stripped.index(END, start)
        lines = lines[:start] + block + lines[end + 1:]
    else:
        lines = [line for line in lines if line.strip() not in (BEGIN, END)]
        while lines and lines[-1] == "":
            lines.pop()
        lines += block + [""]
    merged = "\n".join(lines)
    return (merged if merged.endswith("\n") else merged + "\n"), clean and text_clean


# MEMORY.md and its topic files, by merge kind: each resolver gives (merged text, clean).
INDEX_MERGES = {"index": merge_index_checked, "topic": merge_topic_checked}


# ---------------------------------------------------------------- snapshots and facts

def updated_of(text: str) -> datetime | None:
    """The `updated:` timestamp in a file's frontmatter (facts, STATE.md), in UTC; None when absent."""
    if not text.startswith("---"):
        return None
    end = re.search(r"^(?:---|\.\.\.)\s*$", text[3:], re.M)
    front = text[3:3 + end.start()] if end else text
    found = _UPDATED_RE.search(front)
    if not found:
        return None
    try:
        value = datetime.fromisoformat(found.group(1))
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except (ValueError, OverflowError):  # (9999-12-31T23:59:59-14:00 is past year 9999 in UTC: every sync failed)
        return None


FUTURE_SKEW = timedelta(days=1)  # clocks differ: an `updated:` up to a day ahead is believed


def _believed(text: str) -> datetime | None:
    """A version's `updated:`, unless it lies more than a day ahead of this clock: a version pushed
    with `updated: 2099-...` would otherwise win every merge of its fact (or STATE.md)."""
    value = updated_of(text)
    return None if value is not None and value > clock.now() + FUTURE_SKEW else value


def _newer(ours: str, theirs: str) -> bool:
    """Whether ours is the newer snapshot: later `updated:`; a tie or no date (or one far in the future)
    goes to the larger text. Every machine picks the same version, but for a date within a day of one
    machine's clock and past the other's (clocks that differ by more than a day): the other version
    is kept as a conflict copy either way, so the choice loses nothing."""
    o, t = _believed(ours), _believed(theirs)
    if o is not None and t is not None and o != t:
        return o > t
    if (o is None) != (t is None):
        return o is not None
    return ours >= theirs


def merge_state(base: str, ours: str, theirs: str) -> str:
    """STATE.md: a snapshot of now, so the newer one wins whole (the other stays in history)."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return ours if _newer(ours, theirs) else theirs


def merge_fact(base: str, ours: str, theirs: str) -> FactMerge:
    """One fact changed on both sides: the newer version stays in place, the other is the loser."""
    if ours == theirs or theirs == base:
        return FactMerge(ours, None, "clean")
    if ours == base:
        return FactMerge(theirs, None, "clean")
    if _newer(ours, theirs):
        return FactMerge(ours, theirs, "ours")
    return FactMerge(theirs, ours, "theirs")


def conflict_name(stem: str, loser: str) -> str:
    """The conflict copy's file name: the same name for the same version on every machine."""
    digest = hashlib.sha1(loser.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{stem}.{digest}.md"


def merge_config(base: str, ours: str, theirs: str) -> str | None:
    """memctl.toml when both sides only appended tables (each machine declared a ledger, say):
    ours, then theirs' new tables but those ours already holds exactly (`[ledgers.episodes]`, which
    memctl declares on each machine's first `episode add`). None for anything else, or when the result
    is not valid TOML (the same table declared on both sides differently): that is a real conflict,
    for a human."""
    if not (ours.startswith(base) and theirs.startswith(base)):
        return None
    import tomllib  # noqa: PLC0415

    try:
        have = tomllib.loads(ours)
    except tomllib.TOMLDecodeError:
        return None
    added = "".join(chunk for chunk in _tables(theirs[len(base):]) if not _held(chunk, have))
    added = added.rstrip("\n") + "\n" if added.strip() else ""
    merged = ours + ("" if ours.endswith("\n") or not ours or not added else "\n") + added
    try:
        tomllib.loads(merged)
    except tomllib.TOMLDecodeError:
        return None
    return merged


def _tables(text: str) -> list[str]:
    """TOML text cut before each line that opens a table (`[name]`, `[[name]]`)."""
    chunks = [""]
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("[") and chunks[-1].strip():
            chunks.append("")
        chunks[-1] += line
    return chunks


def _held(chunk: str, have: dict) -> bool:
    """Whether `chunk` (one table, as `_tables` cut it) is a table `have` already holds, the same."""
    import tomllib  # noqa: PLC0415

    header = chunk.lstrip().split("\n", 1)[0]
    if not header.startswith("[") or header.startswith("[["):
        return False
    try:
        path, table = tomllib.loads(header), tomllib.loads(chunk)
    except tomllib.TOMLDecodeError:
        return False
    while isinstance(path, dict) and len(path) == 1 and next(iter(path.values())):
        key = next(iter(path))
        path, table, have = path[key], table.get(key), have.get(key) if isinstance(have, dict) else None
    if not (isinstance(path, dict) and len(path) == 1 and isinstance(have, dict) and isinstance(table, dict)):
        return False
    key = next(iter(path))
    return key in have and have[key] == table.get(key)


# ---------------------------------------------------------------- ledgers

def lost_line(old: bytes, new: bytes) -> int | None:
    """The 1-based line of `old` that `new` no longer holds (a row removed or rewritten; lines may have
    been added anywhere, as a union merge does), or None. A torn last line of `old` may be completed."""
    kept = old[: old.rfind(b"\n") + 1]
    if new.startswith(kept):
        return None
    have = Counter(new.splitlines())
    for number, line in enumerate(kept.splitlines(), start=1):
        if not have[line]:
            return number
        have[line] -= 1
    return None


def merge_ledger(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """A ledger: every row of both sides, each side's rows in their order (git's union merge).

    Rows are never dropped or rewritten, so `ledger verify` passes (when a side
    removed or rewrote a row, which memctl never does, every row of ours is kept
    and theirs' other rows follow: nothing is lost; `sync` refuses such a
    remote before it merges); rows both
    sides added at the same place come ours first, then theirs; when both sides
    created the ledger, its header is kept once. Readers order rows by their
    `ts` column (`episode list`).
    """
    if ours == theirs or theirs == base:
        return ours
    if lost_line(base, ours) is not None or lost_line(base, theirs) is not None:  # a side removed or rewrote a row: none is lost
        return b"".join(_with_rest(_terminated(ours.splitlines(keepends=True)), _terminated(theirs.splitlines(keepends=True))))
    if ours == base:
        return theirs
    merged, _ = _merge_lines(*(_terminated(x.splitlines(keepends=True)) for x in (base, ours, theirs)))
    return b"".join(merged)
