"""MEMORY.md: render the generated block, read hand-written lines, detect drift.

memctl owns only the lines between the two markers (and the topic files in
memory-index/, wholly). Index lines keep the title and hook they were written
with (by Claude Code, by hand, or by memctl); a line for a live fact found
outside the block, or in a MEMORY.md without markers (Claude Code's own
index), moves into the block, so no fact is listed twice. Claude Code loads
only the first 200 lines of MEMORY.md: when the index would be longer, the
facts that matter most (pinned, then importance, then recency) stay in it and
the rest go to one topic file per type, linked from the block: pinned facts
first, then the best of every type (no type with facts drops to zero lines),
then the facts written or used lately, then every type in proportion to its
size (`fair_order`). The rules are in docs/FORMAT.md, section `memory/MEMORY.md`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable, NamedTuple

from .config import FACT_TYPES
from .fact import NAME_RE, Fact
from .tsv import visible
from .values import unit_value

BEGIN = "<!-- memctl:index:begin -->"
END = "<!-- memctl:index:end -->"
TOPIC_DIR = "memory-index"  # beside MEMORY.md: the facts that do not fit in its first lines
SEPARATOR = " — "  # Claude Code's own: `- [Title](file.md) — hook`
# The link target is bare (`note.md`), or in angle brackets when the file name
# has a space or a parenthesis (`<my note.md>`, CommonMark's form); `%20` is read too.
# A line in another Markdown form is one too: `+` or `1.` for the bullet, the link in bold, a title
# holding `[ ]` (or an escaped `\]`), a `./` before the file name.
_LINE_RE = re.compile(
    r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\*\*|__)?\[(?P<title>(?:\\[\[\]]|[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\((?:<(?P<angled>[^<>\n]+)>|(?P<target>[^)\s]+))\)(?:\*\*|__)?"
    r"\s*(?:(?:-|—|–|:)\s*(?P<desc>.*))?$"
)


@dataclass(frozen=True)
class IndexLine:
    lineno: int  # 1-based
    target: str  # the linked file, relative to MEMORY.md (a topic file's `../x.md` reads as `x.md`)
    description: str  # the hook, as written
    generated: bool  # inside the memctl block, or in a topic file
    title: str = ""
    file: str = ""  # "" for MEMORY.md, else the topic file relative to MEMORY.md's folder


@dataclass(frozen=True)
class Drift:
    kind: str  # "missing", "orphan" (line without a live file), "duplicate", "too-long", "too-big"
    target: str
    lineno: int
    message: str
    file: str = ""  # "" for MEMORY.md, else the topic file


class _Entry(NamedTuple):
    fact: Fact
    title: str
    hook: str
    group: str  # group_of(fact), computed once: the limit's search renders the block many times


@dataclass(frozen=True)
class Layout:
    """What the index files should hold: MEMORY.md, and each topic file (None: remove it)."""

    memory: str
    topics: dict[str, str | None]
    moved: tuple[str, ...] = ()  # a person's lines found inside the block, now kept below it


def _target(match: re.Match[str]) -> str:
    """The file a matched index line links to, as a file name (`<a b.md>` and `a%20b.md` read as `a b.md`)."""
    target = match.group("angled") or match.group("target")
    if "%" in target:
        from urllib.parse import unquote  # noqa: PLC0415

        target = unquote(target)
    return target.removeprefix("./")


def link_target(file_name: str) -> str:
    """A file name as a Markdown link destination: `%` and `#` escaped (a bare `#` starts a fragment),
    `<` and `>` too (no destination holds them as written: a pushed `a<b.md` was listed in a line no
    reader took for memctl's, kept below the block, and added again by every write)."""
    name = file_name.replace("%", "%25").replace("#", "%23").replace("<", "%3C").replace(">", "%3E")
    return f"<{name}>" if any(c in "()" or c.isspace() for c in name) else name  # (U+3000 as a space too)


def title_for(fact: Fact) -> str:
    """The title memctl gives a fact's new line: its name (the stem, brackets escaped, when the name
    cannot be a link text: `a]b.md` is `[a\\]b](a]b.md)`)."""
    name = fact.name.strip()
    if not name or any(c in name for c in "[]\n\r") or name == fact.file_name:
        return fact.stem.replace("[", "\\[").replace("]", "\\]")
    return name


def format_line(title: str, target: str, hook: str) -> str:
    r"""One index line; a hook of several lines (a YAML block description) becomes one, a TAB in it a
    space, and any other control character in title or hook shows as `\x1b` (a description written by
    hand or pushed by another clone: an ESC would act on the terminal of whoever reads MEMORY.md)."""
    hook = visible(" ".join(part.strip() for part in hook.splitlines() if part.strip()).replace("\t", " "))
    line = f"- [{visible(title.replace(chr(9), ' '))}]({link_target(target)})"
    return line + SEPARATOR + hook if hook else line


def topic_file(group: str) -> str:
    return f"{TOPIC_DIR}/{group}.md"


def is_topic_link(target: str) -> bool:
    return target.startswith(TOPIC_DIR + "/")


def group_of(fact: Fact) -> str:
    """The `## heading` (and topic file) a fact is listed under: its type, when that is a slug."""
    return fact.type if NAME_RE.match(fact.type) else "other"


def parse_lines(text: str, file: str = "") -> list[IndexLine]:
    """The index lines of MEMORY.md (file="") or of a topic file (every line there is generated)."""
    found = []
    inside = bool(file)
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            inside = True
            continue
        if stripped == END:
            inside = bool(file)
            continue
        match = _LINE_RE.match(line)
        if match is None:
            continue
        target = _target(match)
        if file:
            target = target[3:] if target.startswith("../") else f"{TOPIC_DIR}/{target}"
        if target.endswith(".md"):
            found.append(IndexLine(number, target, (match.group("desc") or "").strip(), inside,
                                   match.group("title").strip(), file))
    return found


def _block_span(lines: list[str]) -> tuple[int, int] | None:
    stripped = [line.strip() for line in lines]
    if BEGIN in stripped and END in stripped[stripped.index(BEGIN) :]:
        start = stripped.index(BEGIN)
        return start, stripped.index(END, start)
    return None


def damaged_block(text: str) -> tuple[int, str] | None:
    """(line, what is wrong) when the generated block's markers are not one begin line followed
    by one end line; None when they are, or when there are none (the block is then added).

    Regenerating a damaged block would write a second one, or take the user's text after a
    lone begin marker for memctl's: writers refuse and doctor reports it instead.
    """
    stripped = [line.strip() for line in text.split("\n")]
    begins = [i + 1 for i, line in enumerate(stripped) if line == BEGIN]
    ends = [i + 1 for i, line in enumerate(stripped) if line == END]
    if not begins and not ends:
        return None
    if len(begins) > 1:
        return begins[1], f"a second {BEGIN} (also at line {begins[0]})"
    if len(ends) > 1:
        return ends[1], f"a second {END} (also at line {ends[0]})"
    if not ends:
        return begins[0], f"{BEGIN} has no {END} after it"
    if not begins:
        return ends[0], f"{END} has no {BEGIN} before it"
    if ends[0] < begins[0]:
        return ends[0], f"{END} comes before {BEGIN} (line {begins[0]})"
    return None


def user_text(text: str, adopted: set[str]) -> str:
    """The text that regeneration keeps (outside the block, and a person's lines inside it, which go just
    below it), without the index lines for `adopted` files and without blank lines.

    Two versions of MEMORY.md with the same user text differ only in lines
    that memctl takes into its block (Claude Code's appended index lines), in
    the blank lines around them, and in where a person's line inside the block
    stands (moved below it by a write that did not commit).
    """
    lines = text.split("\n")
    span = _block_span(lines)
    if span is not None:
        lines = lines[: span[0]] + _written_inside(lines[span[0] + 1 : span[1]]) + lines[span[1] + 1 :]
    return "\n".join(line for line in lines if line.strip() and not ((m := _LINE_RE.match(line)) and _target(m) in adopted))


def rank_key(importance_for: Callable[[str], float]) -> Callable[[Fact], tuple]:
    """Most important first: pinned, then importance, then the latest `updated` (or `created`), then stem."""

    def key(fact: Fact) -> tuple:
        importance = unit_value(fact.meta("importance"))
        if importance is None:
            importance = importance_for(fact.type)
        when = 0.0
        stamp = fact.meta("updated") or fact.meta("created")
        if stamp:
            try:
                when = datetime.fromisoformat(str(stamp)).timestamp()
            except (ValueError, OverflowError, OSError):
                pass
        return (not fact.pinned, -importance, -when, fact.stem)

    return key


def _known(text: str, topics: dict[str, str]) -> dict[str, tuple[str, str]]:
    """target -> (title, hook) as last written: topic files, then the block, then lines outside it (newest)."""
    lines = [line for file, body in sorted(topics.items()) for line in parse_lines(body, file)]
    memory = parse_lines(text)
    lines += [line for line in memory if line.generated] + [line for line in memory if not line.generated]
    known = {}
    for line in lines:
        title = "" if line.title in ("", line.target) else line.title  # memctl once wrote the file name there
        known[line.target] = (title, line.description)
    return known


def fair_order(entries: list[_Entry], rank: Callable[[Fact], tuple], recent: set[str] = frozenset()) -> list[_Entry]:
    """The order in which facts keep their line in MEMORY.md when not all fit (deterministic).

    Pinned facts first (by `rank`); then each type's best, larger types first,
    so no type with facts drops to zero lines; then the facts in `recent`
    (file names written or used in the last days); then the rest. Within
    the last two, each type in proportion to its size: a type's i-th fact
    comes at (i + 1) / (its facts), so any prefix holds every type's share.
    """
    ranked = sorted(entries, key=lambda e: rank(e.fact))
    size: dict[str, int] = {}
    for entry in ranked:
        size[entry.group] = size.get(entry.group, 0) + 1
    pinned = [e for e in ranked if e.fact.pinned]
    placed = {id(e) for e in pinned}
    best: dict[str, _Entry] = {}
    for entry in ranked:
        if id(entry) not in placed and entry.group not in best and entry.group not in {e.group for e in pinned}:
            best[entry.group] = entry
    firsts = sorted(best.values(), key=lambda e: (-size[e.group], e.group))
    placed |= {id(e) for e in firsts}

    def shared(chosen: list[_Entry]) -> list[_Entry]:
        seen: dict[str, int] = {}
        keyed = []
        for position, entry in enumerate(chosen):
            seen[entry.group] = seen.get(entry.group, 0) + 1
            keyed.append(((seen[entry.group]) / size[entry.group], -size[entry.group], entry.group, position, entry))
        return [item[-1] for item in sorted(keyed, key=lambda item: item[:4])]

    lately = [e for e in ranked if id(e) not in placed and e.fact.file_name in recent]
    placed |= {id(e) for e in lately}
    rest = [e for e in ranked if id(e) not in placed]
    return pinned + firsts + shared(lately) + shared(rest)


def render_block(entries: Iterable[_Entry], overflow: dict[str, int] | None = None) -> list[str]:
    """The generated lines (markers included): the entries grouped by type, sorted by stem;
    `overflow` adds per type a line linking the topic file that holds its other facts."""
    groups: dict[str, list[_Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.group, []).append(entry)
    overflow = overflow or {}
    names = set(groups) | set(overflow)
    order = [t for t in FACT_TYPES if t in names] + sorted(t for t in names if t not in FACT_TYPES)
    lines = [BEGIN]
    for group in order:
        lines.append(f"## {group}")
        lines.extend(format_line(e.title, e.fact.file_name, e.hook)
                     for e in sorted(groups.get(group, []), key=lambda e: e.fact.stem))
        if overflow.get(group):
            lines.append(format_line(f"{overflow[group]} more {group} fact{'s' if overflow[group] != 1 else ''}", topic_file(group),
                                     "not loaded at session start; open this list when they may matter"))
    lines.append(END)
    return lines


def _topic_text(group: str, entries: list[_Entry], limit_lines: int) -> str:
    head = [
        f"# More {group} facts",
        "",
        f"Generated by memctl (docs/FORMAT.md): Claude Code loads only the first {limit_lines} lines of",
        "MEMORY.md, so the facts that rank below the ones listed there are listed here.",
        "",
    ]
    body = [format_line(e.title, "../" + e.fact.file_name, e.hook) for e in sorted(entries, key=lambda e: e.fact.stem)]
    return "\n".join(head + body) + "\n"


def regenerate(text: str, facts: list[Fact], archived: set[str] = frozenset(), **options) -> str:
    """MEMORY.md alone, regenerated (see `build_layout`, which also gives the topic files)."""
    return build_layout(text, facts, archived, **options).memory


def build_layout(
    text: str,
    facts: list[Fact],
    archived: set[str] = frozenset(),
    *,
    topics: dict[str, str] | None = None,
    refresh: set[str] = frozenset(),
    limit_lines: int | None = None,
    limit_bytes: int | None = None,
    rank: Callable[[Fact], tuple] | None = None,
    recent: set[str] = frozenset(),
) -> Layout:
    """MEMORY.md with the block replaced, and the topic files; the user's text is kept byte for byte.

    Each live fact keeps the title and hook its line had (`refresh`: file names
    whose hook becomes the description again, because memctl changed it).
    Lines outside the block that point at a live fact, or at a file memctl has
    archived (`archived`: file names in archive/), leave the user's text: the
    live ones are listed in the block instead. When MEMORY.md would pass
    `limit_lines` / `limit_bytes`, the facts first in `fair_order` (by `rank`,
    `recent`: file names written or used lately) stay in the block and the
    others are listed in `memory-index/<type>.md`.
    """
    topics = topics or {}
    known = _known(text, topics)
    live = {f.file_name for f in facts}
    adopted = live | set(archived)
    entries = []
    for fact in facts:
        title, hook = known.get(fact.file_name, ("", ""))
        if fact.file_name in refresh or not hook:
            hook = fact.description
        entries.append(_Entry(fact, title or title_for(fact), hook, group_of(fact)))

    lines = text.split("\n") if text else []
    span = _block_span(lines)
    hole = "\0block"  # where the block goes
    moved = () if span is None else tuple(_written_inside(lines[span[0] + 1 : span[1]]))
    outside = lines if span is None else lines[: span[0]] + [hole, *moved] + lines[span[1] + 1 :]
    kept: list[str] = []
    removed = False
    heading, emptied = None, set()  # the headings outside the block whose lines moved into it
    for line in outside:
        if line == hole:
            heading = None  # (a heading above the block heads no line after it)
        match = _LINE_RE.match(line) if line != hole else None
        if match and _target(match) in adopted:
            if span is None and hole not in kept and _target(match) in live:
                kept.append(hole)  # a first run on a hand-written index: the block goes where its lines were
            if heading is not None:
                emptied.add(heading)
            removed = True
            continue
        if _SECTION_RE.match(line):
            heading = len(kept)
        kept.append(line)
    if emptied:  # (on a first run the block takes their place; later, it is text of its own under them)
        kept = _without_empty_sections(kept, emptied, hole if span is None else None)
    if removed:
        while len(kept) > 1 and kept[-1] == "" and kept[-2] == "":
            kept.pop()
    if hole not in kept:
        while kept and kept[-1] == "":
            kept.pop()
        if kept:
            kept.append("")
        kept += [hole, ""]  # the final newline
    at = kept.index(hole)
    before, after = kept[:at], kept[at + 1 :]

    def assemble(block: list[str]) -> str:
        result = "\n".join(before + block + after)
        return result if result.endswith("\n") else result + "\n"

    ranked = fair_order(entries, rank, recent) if rank else entries

    def attempt(n: int) -> tuple[str, list[_Entry]]:
        rest = ranked[n:]
        overflow: dict[str, int] = {}
        for entry in rest:
            overflow[entry.group] = overflow.get(entry.group, 0) + 1
        return assemble(render_block(ranked[:n], overflow)), rest

    def fits(memory: str) -> bool:
        return ((limit_lines is None or memory.count("\n") <= limit_lines)
                and (limit_bytes is None or len(memory.encode("utf-8")) <= limit_bytes))

    memory, rest = attempt(len(ranked))
    if not fits(memory):
        # the largest n that fits (0 when even the user's text does not); n lines never fit in fewer
        low, high = 0, min(len(ranked) - 1, limit_lines if limit_lines is not None else len(ranked))
        while low < high:
            mid = (low + high + 1) // 2
            if fits(attempt(mid)[0]):
                low = mid
            else:
                high = mid - 1
        memory, rest = attempt(low)
    by_group: dict[str, list[_Entry]] = {}
    for entry in rest:
        by_group.setdefault(entry.group, []).append(entry)
    new_topics: dict[str, str | None] = {name: None for name in topics}
    for group, group_entries in by_group.items():
        new_topics[topic_file(group)] = _topic_text(group, group_entries, limit_lines or 200)
    return Layout(memory, new_topics, moved)


_HEADING_RE = re.compile(r"^## [a-z][a-z0-9_-]*$")  # a group heading render_block writes (a type slug, `other`)


def frame_lines(text: str) -> set[int]:
    """The line numbers (from 1) of what frames the index lines in memctl's block: its two markers and
    the `## type` headings between them."""
    lines = text.split("\n")
    span = _block_span(lines)
    if span is None:
        return set()
    return {span[0] + 1, span[1] + 1} | {n + 1 for n in range(span[0] + 1, span[1]) if _HEADING_RE.match(lines[n].rstrip())}


_SECTION_RE = re.compile(r"^#{1,6} \S")


def is_heading(line: str) -> bool:
    """A markdown heading (`# Memory`, `## Workflow`): what an index's lines are grouped under."""
    return _SECTION_RE.match(line) is not None


def _without_empty_sections(kept: list[str], emptied: set[int], hole: str | None) -> list[str]:
    """`kept` without the headings in `emptied` that head nothing any more (every line under them moved
    into the block): `## フィードバック` left above memctl's `## feedback`, or alone at the end. `hole`:
    the block's place, which counts as nothing (a first run), or None (it heads the block then)."""
    drop = set()
    for at in emptied:
        end = next((n for n in range(at + 1, len(kept)) if _SECTION_RE.match(kept[n])), len(kept))
        if all(not line.strip() or line == hole for line in kept[at + 1 : end]):
            drop.add(at)
            if at + 1 < len(kept) and not kept[at + 1].strip():
                drop.add(at + 1)  # and the blank line under it
    return [line for n, line in enumerate(kept) if n not in drop]


def _written_inside(block: list[str]) -> list[str]:
    """The lines between the markers that memctl never writes there (prose, a note, a heading of the
    person's): regenerating the block would drop them, so they are kept just below it."""
    return [line for line in block if line.strip() and not _HEADING_RE.match(line.rstrip()) and not _generated(line)]


def _generated(line: str) -> bool:
    """An index line as render_block writes it: a link to a fact file or a topic file beside MEMORY.md."""
    match = _LINE_RE.match(line.rstrip("\r"))
    if match is None:
        return False
    target = _target(match)
    return target.endswith(".md") and "://" not in target and not target.startswith(("../", "/"))


def drift(
    text: str,
    facts: list[Fact],
    topics: dict[str, str] | None = None,
    *,
    limit_lines: int | None = None,
    limit_bytes: int | None = None,
) -> list[Drift]:
    """What differs between the index (MEMORY.md and the topic files it links) and the live facts."""
    topics = topics or {}
    damaged = damaged_block(text)
    if damaged is not None:
        return [Drift("damaged-block", "", damaged[0], f"the generated block is damaged: {damaged[1]}")]
    memory = parse_lines(text)
    linked = {line.target for line in memory if is_topic_link(line.target)}
    lines = [line for line in memory if not is_topic_link(line.target)]
    lines += [line for file in sorted(topics) if file in linked for line in parse_lines(topics[file], file)]
    by_file = {f.file_name: f for f in facts}
    problems = []
    for target in sorted(linked - set(topics)):
        first = next(line for line in memory if line.target == target)
        problems.append(Drift("orphan", target, first.lineno, f"index line points at {target}, which does not exist"))
    seen: dict[str, IndexLine] = {}
    for line in lines:
        if line.target not in by_file:
            problems.append(Drift("orphan", line.target, line.lineno,
                                  f"index line points at {line.target}, which is not a live fact", line.file))
        elif line.target in seen:
            first = seen[line.target]
            problems.append(Drift("duplicate", line.target, line.lineno,
                                  f"{line.target} is listed twice (also at {first.file or 'MEMORY.md'}:{first.lineno})",
                                  line.file))
        else:
            seen[line.target] = line
    for file_name in sorted(by_file):
        if file_name not in seen:
            problems.append(Drift("missing", file_name, 0, f"{file_name} is not listed in MEMORY.md"))
    count, size = text.count("\n"), len(text.encode("utf-8"))
    if limit_lines is not None and count > limit_lines:
        problems.append(Drift("too-long", "", limit_lines + 1,
                              f"{count} lines; Claude Code loads only the first {limit_lines}"))
    if limit_bytes is not None and size > limit_bytes:
        problems.append(Drift("too-big", "", 0, f"{size} bytes; Claude Code loads only the first {limit_bytes}"))
    return problems
