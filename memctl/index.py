"""MEMORY.md: render the generated block, read hand-written lines, detect drift.

memctl owns only the lines between the two markers. A MEMORY.md without
markers (Claude Code's own index) is read as it is; the first regeneration puts
the block where the first index line was and leaves every other line alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .config import FACT_TYPES
from .fact import Fact

BEGIN = "<!-- memctl:index:begin -->"
END = "<!-- memctl:index:end -->"
# The link target is bare (`note.md`), or in angle brackets when the file name
# has a space or a parenthesis (`<my note.md>`, CommonMark's form); `%20` is read too.
_LINE_RE = re.compile(
    r"^\s*[-*]\s+\[(?P<title>[^\]]*)\]\((?:<(?P<angled>[^<>\n]+)>|(?P<target>[^)\s]+))\)"
    r"\s*(?:(?:-|—|–|:)\s*(?P<desc>.*))?$"
)


@dataclass(frozen=True)
class IndexLine:
    lineno: int  # 1-based
    target: str  # the linked file, relative to MEMORY.md
    description: str
    generated: bool  # inside the memctl block


@dataclass(frozen=True)
class Drift:
    kind: str  # "missing" (fact not listed), "orphan" (line without a live file), "stale"
    target: str
    lineno: int
    message: str


def _target(match: re.Match[str]) -> str:
    """The file a matched index line links to, as a file name (`<a b.md>` and `a%20b.md` read as `a b.md`)."""
    target = match.group("angled") or match.group("target")
    if "%" in target:
        from urllib.parse import unquote  # noqa: PLC0415

        target = unquote(target)
    return target


def link_target(file_name: str) -> str:
    """A file name as a Markdown link destination."""
    return f"<{file_name}>" if any(c in file_name for c in " ()") else file_name


def index_line(fact: Fact) -> str:
    return f"- [{fact.file_name}]({link_target(fact.file_name)}) - {fact.description}"


def render_block(facts: Iterable[Fact]) -> list[str]:
    """The generated lines (markers included): live facts grouped by type."""
    groups: dict[str, list[Fact]] = {}
    for fact in facts:
        groups.setdefault(fact.type or "other", []).append(fact)
    order = [t for t in FACT_TYPES if t in groups] + sorted(t for t in groups if t not in FACT_TYPES)
    lines = [BEGIN]
    for fact_type in order:
        lines.append(f"## {fact_type}")
        lines.extend(index_line(f) for f in sorted(groups[fact_type], key=lambda f: f.stem))
    lines.append(END)
    return lines


def parse_lines(text: str) -> list[IndexLine]:
    found = []
    inside = False
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            inside = True
            continue
        if stripped == END:
            inside = False
            continue
        match = _LINE_RE.match(line)
        if match is None:
            continue
        target = _target(match)
        if target.endswith(".md"):
            found.append(IndexLine(number, target, (match.group("desc") or "").strip(), inside))
    return found


def outside_block(text: str) -> str:
    """The text outside the generated block (what belongs to the user)."""
    lines = text.split("\n")
    stripped = [line.strip() for line in lines]
    if BEGIN in stripped and END in stripped[stripped.index(BEGIN) :]:
        start = stripped.index(BEGIN)
        end = stripped.index(END, start)
        lines = lines[:start] + lines[end + 1 :]
    return "\n".join(lines)


def regenerate(text: str, facts: list[Fact], archived: set[str] = frozenset()) -> str:
    """MEMORY.md with the block replaced; text outside the markers is kept byte for byte.

    The one exception: a hand-written line pointing at a file that memctl has
    archived (`archived`: file names in archive/) is dropped, since it would
    otherwise list a forgotten fact.
    """
    if archived:
        live = {f.file_name for f in facts}
        kept = []
        for line in text.split("\n"):
            match = _LINE_RE.match(line)
            if match and _target(match) in archived and _target(match) not in live:
                continue
            kept.append(line)
        text = "\n".join(kept)
    block = render_block(facts)
    lines = text.split("\n") if text else []
    stripped = [line.strip() for line in lines]
    if BEGIN in stripped and END in stripped[stripped.index(BEGIN) :]:
        start = stripped.index(BEGIN)
        end = stripped.index(END, start)
        new = lines[:start] + block + lines[end + 1 :]
    else:
        # First run on a hand-written index: hand lines that point at live facts
        # move into the block (at the first one's place); everything else stays.
        live = {f.file_name for f in facts}
        keep: list[str] = []
        insert_at = None
        for line in lines:
            match = _LINE_RE.match(line)
            if match and _target(match) in live:
                if insert_at is None:
                    insert_at = len(keep)
                continue
            keep.append(line)
        if insert_at is None:
            while keep and keep[-1] == "":
                keep.pop()
            if keep:
                keep.append("")
            insert_at = len(keep)
            keep.append("")  # final newline
        new = keep[:insert_at] + block + keep[insert_at:]
    result = "\n".join(new)
    return result if result.endswith("\n") else result + "\n"


def drift(text: str, facts: list[Fact]) -> list[Drift]:
    """What differs between MEMORY.md and the live facts."""
    lines = parse_lines(text)
    by_file = {f.file_name: f for f in facts}
    listed = {line.target for line in lines}
    problems = []
    for line in lines:
        fact = by_file.get(line.target)
        if fact is None:
            problems.append(
                Drift("orphan", line.target, line.lineno, f"index line points at {line.target}, which is not a live fact")
            )
        elif line.generated and line.description != fact.description:
            problems.append(
                Drift("stale", line.target, line.lineno, f"index line for {line.target} has an old description")
            )
    for file_name in sorted(by_file):
        if file_name not in listed:
            problems.append(Drift("missing", file_name, 0, f"{file_name} is not listed in MEMORY.md"))
    return problems
