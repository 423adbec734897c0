"""One fact file: parse and render, byte-stable.

A fact is YAML frontmatter between two `---` lines and a markdown body. YAML is
loaded with a safe loader that also leaves timestamps as strings, so that a
parse followed by a render gives back the same bytes. Unknown keys are kept
in their order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from . import clock
from .errors import BadInput
from .fsutil import FACT_LIMIT, TooBig, read_bounded, shown
from .markers import first_conflict

# Not `-` first: a file `-x.md` is an option to grep, rm and ls in the folder (`grep deploy *`).
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$")
MAX_DESCRIPTION = 1000  # hard limit; 150 is the recommendation
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BASE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


def _without_timestamps(resolvers: dict) -> dict:
    return {
        key: [(tag, regexp) for tag, regexp in entries if tag != _TIMESTAMP]
        for key, entries in resolvers.items()
    }


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """Safe YAML; dates and times stay strings so they re-render unchanged."""


class _Dumper(_BASE_DUMPER):  # type: ignore[misc, valid-type]
    """Block mappings, flow lists (`tags: [a, b]`), no quoting of timestamps."""


class _WideDumper(yaml.SafeDumper):
    """_Dumper with PyYAML's own emitter, which writes a character beyond U+FFFF (an emoji) as it is:
    libyaml's writes it as `\\U0001F680`, which grep and people cannot read."""


_Loader.yaml_implicit_resolvers = _without_timestamps(_BASE_LOADER.yaml_implicit_resolvers)
for _dumper in (_Dumper, _WideDumper):
    _dumper.yaml_implicit_resolvers = _without_timestamps(yaml.SafeDumper.yaml_implicit_resolvers)
    _dumper.ignore_aliases = lambda self, data: True  # type: ignore[method-assign]  (a value used twice is written twice: see parse)
    _dumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
    _dumper.add_representer(tuple, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", list(v), flow_style=True))
    _dumper.add_representer(dict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=False))
del _dumper


class FactParseError(Exception):
    """A fact file that cannot be read; `line` is 1-based (0 when unknown)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.message = message
        self.line = line


class NoFrontmatter(FactParseError):
    """A markdown file that does not start with a frontmatter at all (a note, an empty file): no fact."""


@dataclass(frozen=True)
class Fact:
    stem: str
    front: dict[str, Any]
    body: str = ""
    archived: bool = False
    path: Path | None = field(default=None, compare=False)

    def meta(self, key: str, default: Any = None) -> Any:
        """A metadata value: `metadata.<key>`, else a top-level `<key>` (Claude Code layout)."""
        metadata = self.front.get("metadata")
        if isinstance(metadata, dict) and key in metadata:
            return metadata[key]
        return self.front.get(key, default)

    @property
    def name(self) -> str:
        value = self.front.get("name")
        return str(value) if value is not None else ""

    @property
    def description(self) -> str:
        value = self.front.get("description")
        return str(value) if value is not None else ""

    @property
    def type(self) -> str:
        value = self.meta("type")
        return str(value) if value is not None else ""

    @property
    def tags(self) -> list[str]:
        value = self.meta("tags") or []
        if isinstance(value, str):
            return [value]
        return [str(t) for t in value] if isinstance(value, list) else []

    @property
    def supersedes(self) -> list[str]:
        value = self.meta("supersedes") or []
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def pinned(self) -> bool:
        """`pinned: true` only: a quoted "false" or "yes" is not a pin (doctor says so: value_problems)."""
        return self.meta("pinned") is True

    @property
    def file_name(self) -> str:
        return f"{self.stem}.md"

    def with_meta(self, **changes: Any) -> "Fact":
        """A copy with metadata keys set (None removes); a key already at top level stays there."""
        front = dict(self.front)
        metadata = dict(front.get("metadata") or {}) if isinstance(front.get("metadata"), dict) else {}
        for key, value in changes.items():
            target = front if (key in front and key not in metadata and key != "metadata") else metadata
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
        if metadata or "metadata" in front:
            front["metadata"] = metadata
        return replace(self, front=front)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "stem": self.stem,
            "path": str(self.path) if self.path else self.file_name,
            "description": self.description,
            "type": self.type,
            "archived": self.archived,
            "metadata": {k: v for k, v in (self.front.get("metadata") or {}).items()}
            if isinstance(self.front.get("metadata"), dict)
            else {},
            "body": self.body,
        }


def validate_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise BadInput(
            f"invalid fact name {shown!r}",
            hint="use 1-80 ASCII letters, digits, '-' or '_', not '-' first",
        )
    if name.casefold() == "memory":  # memory/MEMORY.md is the index (one file, whatever the case, on macOS)
        raise BadInput(f"{name!r} cannot name a fact: memory/MEMORY.md is the index", hint="choose another name")
    return name


# What ends a line for someone: git, grep and editors (\n, \r), and str.splitlines() and some editors too
# (\v \f \x1c-\x1e U+0085 U+2028 U+2029); NUL never goes into a file.
LINE_BREAKS = "\n\r\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def validate_description(text: str) -> str:
    if not text or not text.strip():
        raise BadInput("description is empty", hint="give a one-line description", kind="description-empty")
    if any(c in text for c in LINE_BREAKS):
        raise BadInput("description must be one line", hint="put details in the body, why or how", kind="description-lines")
    control = next((c for c in text if (c < " " and c != "\t") or "\x7f" <= c <= "\x9f"), None)
    if control is not None:  # an ESC would reach MEMORY.md, `list` and what the hooks put in an agent's context
        raise BadInput(f"description holds a control character ({control!r} at {text.index(control) + 1})",
                       hint="a description is plain text: remove it", kind="description-control")
    if len(text) > MAX_DESCRIPTION:
        raise BadInput(f"description is {len(text):,} characters, more than the {MAX_DESCRIPTION:,} a description may hold",
                       hint="keep it to one line of about 150 (what MEMORY.md shows); put details in the body",
                       kind="description-long")
    return text


def split(text: str) -> tuple[str, str, int]:
    """(frontmatter text, body, line number where the frontmatter starts)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        raise NoFrontmatter("no YAML frontmatter (the file must start with a '---' line)", 1)
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r") in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), 2
    raise FactParseError("frontmatter is not closed by a '---' line", 1)


# An anchor or alias starts a node: at the start, or after a space, a line end or a flow indicator.
# `R&D` or `a*b` cannot be one, so they skip the scan; what may be one is scanned precisely.
_MAYBE_ANCHOR = re.compile(r"(?:\A|[\s\[{,])[&*]")


def _refuse_anchors(fm: str, first_line: int) -> None:
    """YAML anchors and aliases (`&a`, `*a`) let 400 bytes stand for a billion values (an alias bomb):
    a fact's frontmatter never needs them, so they are refused, found by the scanner (tokens only,
    nothing expanded). Only called when `&` or `*` may start a node (_MAYBE_ANCHOR), so the common path stays
    the C loader alone."""
    try:
        for token in yaml.scan(fm, Loader=_Loader):
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                raise FactParseError("a YAML anchor or alias (&name, *name) in the frontmatter: memctl does not read them "
                                     "(write each value out)", first_line + token.start_mark.line)
    except yaml.YAMLError:
        return  # not YAML at all: the load says where


_TOP_LEVEL_LINE = re.compile(r"^([a-zA-Z_-]+):\s+(.+)$")
_NEEDS_QUOTES = re.compile(r"[{}\[\]*&#!|>%@`]|: ")


def _as_claude_code_reads_it(fm: str) -> dict | None:
    """A frontmatter that is not YAML read as Claude Code 2.1 reads it (its fallback): a top-level
    `key: value` whose value holds a character YAML gives a meaning to (`description: Note: never log
    tokens`, `name: #1 優先度`) taken as quoted text, a leading tab as two spaces; None when that is
    no mapping either. A file Claude Code reads is then no broken fact here (memctl quotes it when it
    rewrites the file)."""
    lines = []
    given = fm.split("\n")
    for n, line in enumerate(given):
        found = _TOP_LEVEL_LINE.match(line.rstrip("\r"))
        value = found.group(2) if found else ""
        # A value that starts as YAML structure (a flow mapping or list, a quoted or block scalar, an
        # anchor, alias, tag or comment) is left as YAML: quoted, `metadata: {type: feedback}` would be
        # one string, and memctl's next write of the file would drop what it held. But a one-line title
        # or description that is no YAML on its own (`description: [WIP] never merge`, `*never* force-push`,
        # `"Use "double" quotes"`) is text to Claude Code, so here too (a list, `tags: [a, b`, stays broken).
        structure = value[:1] in "{[\"'|>&*!#"
        text = found is not None and found.group(1) in ("name", "description") and not _continued(given, n)
        if found and (text and not _yaml_alone(line) if structure else _NEEDS_QUOTES.search(value)):
            line = f'{found.group(1)}: "' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines.append(re.sub(r"^\t+", lambda tabs: "  " * len(tabs.group(0)), line))
    try:
        front = yaml.load("\n".join(lines), Loader=_Loader)
    except yaml.YAMLError:
        return None
    return front if isinstance(front, dict) else None


def _continued(lines: list[str], n: int) -> bool:
    """Whether line `n`'s value goes on in the next line (indented: a flow list or a quoted text over lines)."""
    return n + 1 < len(lines) and lines[n + 1][:1] in (" ", "\t")


def _yaml_alone(line: str) -> bool:
    try:
        yaml.load(line, Loader=_Loader)
    except yaml.YAMLError:
        return False
    return True


def parse(text: str, stem: str, *, archived: bool = False, path: Path | None = None, plain: bool = False) -> Fact:
    """The fact in a file's text; with `plain` (a Claude Code directory), a file without frontmatter is a
    topic file of Claude Code's own (`debugging.md`), read as a fact named by its stem (plain_fact)."""
    if plain and text.strip("\ufeff \t\r\n") and text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r") != "---":
        return plain_fact(text, stem, archived=archived, path=path)
    fm, body, first_line = split(text)
    if ("&" in fm or "*" in fm) and _MAYBE_ANCHOR.search(fm):
        _refuse_anchors(fm, first_line)
    try:
        front = yaml.load(fm, Loader=_Loader) if fm.strip() else {}
    except yaml.YAMLError as exc:  # (a tag the safe loader refuses, `!!python/...`, stays refused)
        front = None if isinstance(exc, yaml.constructor.ConstructorError) else _as_claude_code_reads_it(fm)
        if front is None:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            line = first_line + mark.line if mark is not None else 1
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise FactParseError(f"invalid YAML frontmatter: {problem}", line) from None
    if not isinstance(front, dict):
        raise FactParseError("frontmatter is not a mapping of keys to values", first_line)
    return Fact(stem=stem, front=front, body=body, archived=archived, path=path)


def plain_fact(text: str, stem: str, *, archived: bool = False, path: Path | None = None) -> Fact:
    """A topic file without frontmatter as a fact: named by its stem, described by its first heading (else
    its first line), cut to one line of about 150 characters; the whole text is its body. Nothing is written."""
    text = text.lstrip("\ufeff")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith("#")), lines[0] if lines else "")
    description = " ".join(first.lstrip("#").split()) or stem
    if len(description) > 150:
        description = description[:149] + "…"
    return Fact(stem=stem, front={"name": stem, "description": description}, body=text, archived=archived, path=path)


def load(path: Path, *, archived: bool = False, plain: bool = False) -> Fact:
    try:
        data = read_bounded(path, FACT_LIMIT, "a fact file")
    except TooBig as exc:
        raise FactParseError(str(exc.details["reason"]), 0) from None
    nul = data.find(b"\x00")
    if nul != -1:
        raise FactParseError("a NUL byte (a binary file, or a damaged one)", data[:nul].count(b"\n") + 1)
    conflict = first_conflict(data)
    if conflict is not None:
        raise FactParseError("unresolved merge conflict markers (resolve them, then commit)", conflict)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FactParseError("not valid UTF-8", line) from None
    return parse(text, path.stem, archived=archived, path=path, plain=plain)


def render(fact: Fact) -> str:
    """The file's text; refused (BadInput) over the size a reader takes (FACT_LIMIT): memctl never writes what it will not read."""
    front = yaml.dump(fact.front, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=1_000_000)
    if "\\U" in front:  # libyaml escaped a character beyond U+FFFF: the same document, with it as it is
        wide = yaml.dump(fact.front, Dumper=_WideDumper, allow_unicode=True, sort_keys=False, width=1_000_000)
        if yaml.load(wide, Loader=_Loader) == fact.front:  # PyYAML's emitter writes U+0085 raw, which reads back as a space
            front = wide
    text = f"---\n{front}---\n{fact.body}"
    if len(text) * 4 > FACT_LIMIT and len(text.encode("utf-8", "surrogatepass")) > FACT_LIMIT:
        raise BadInput(f"the fact {fact.stem!r} would be {len(text.encode('utf-8', 'surrogatepass'))} bytes; a fact file may be at most "
                       f"{shown(FACT_LIMIT)} (docs/FORMAT.md, Limits)", hint="keep the body shorter: a fact is a note, not a document",
                       kind="too-big")
    return text


def compose_body(body: str | None, why: str | None, how: str | None) -> str:
    """The body of a new fact: free text, then **Why:** and **How to apply:** lines."""
    parts = [body.rstrip("\n")] if body else []
    if why:
        parts.append(f"**Why:** {why.strip()}")
    if how:
        parts.append(f"**How to apply:** {how.strip()}")
    return "\n".join(parts) + "\n" if parts else ""


_WHY_RE = re.compile(r"^\*\*Why:\*\*.*?(?=^\*\*How to apply:\*\*|\Z)", re.M | re.S)
_HOW_RE = re.compile(r"^\*\*How to apply:\*\*.*?(?=^\*\*Why:\*\*|\Z)", re.M | re.S)


def update_body(current: str, body: str | None, why: str | None, how: str | None) -> str:
    """Replace only the parts given: free text, the Why line, the How-to-apply line."""
    if body is not None:
        kept_why = _WHY_RE.search(current)
        kept_how = _HOW_RE.search(current)
        new = body.rstrip("\n")
        extra = [m.group(0).rstrip("\n") for m in (kept_why, kept_how) if m]
        current = "\n".join([p for p in [new, *extra] if p]) + "\n"
    for value, regex, label in ((why, _WHY_RE, "**Why:**"), (how, _HOW_RE, "**How to apply:**")):
        if value is None:
            continue
        line = f"{label} {value.strip()}\n"
        if regex.search(current):
            current = regex.sub(lambda _m: line, current, count=1)
        else:
            current = (current if current.endswith("\n") or not current else current + "\n") + line
    return current


UNIT_KEYS = ("importance", "confidence")
DATE_KEYS = ("created", "updated", "expires")


def value_problems(fact: Fact, now: datetime | None = None) -> list[tuple[str, str]]:
    """(key, message) for each metadata value that is not what docs/FORMAT.md says, and what is read instead.

    memctl reads such a value without failing (a hand edit must not hide a fact), so nothing but
    doctor would tell the user that `importance: high` is the type's default, `expires: next friday`
    never expires, or `pinned: "yes"` is not a pin. With `now`: a `created` or `updated` more than
    clock.SKEW ahead of it too (written under a clock that ran ahead: until then recall counts the
    fact as just written, and nothing calls it stale).
    """
    problems = []
    for key in UNIT_KEYS:
        value = fact.meta(key)
        if value is None:
            continue
        try:
            number = float(value) if not isinstance(value, bool) else float("nan")
        except (TypeError, ValueError):
            number = float("nan")
        if number != number:
            problems.append((key, f"{key} {str(value)!r} is not a number from 0 to 1: the type's default is used"))
        elif not 0.0 <= number <= 1.0:
            problems.append((key, f"{key} {value} is outside 0 to 1: read as {min(1.0, max(0.0, number)):g}"))
    for key in DATE_KEYS:
        value = fact.meta(key)
        if value is None or value == "":
            continue
        try:
            when = clock.earliest(str(value))  # (parse_date's reading, which every reader of these keys uses)
        except ValueError:
            effect = "the fact never expires" if key == "expires" else "it is ignored"
            problems.append((key, f"{key} {str(value)!r} is not an ISO-8601 date (YYYY-MM-DD, or with a time): {effect}"))
            continue
        if now is not None and key != "expires" and (when - now).total_seconds() > clock.SKEW:
            problems.append((key, f"{key} {str(value)!r} is in the future (written under a clock that ran ahead?): "
                                  "until then recall counts the fact as just written and nothing calls it stale"))
    pinned = fact.meta("pinned")
    if pinned is not None and not isinstance(pinned, bool):
        problems.append(("pinned", f"pinned {str(pinned)!r} is not true or false: read as not pinned"))
    return problems
