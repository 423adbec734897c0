"""STATE.md: how things stand now, one small file per scope.

`update` renders `state/STATE.md` (or `state/<scope>/STATE.md`) from the
summaries declared in memctl.toml's `[state]` plus numbers given as JSON,
overwrites it atomically and commits it, so that `git log` is its history.
`history` reads the numbers back from every committed version; `check` finds
the snapshots that are older than allowed, because an agent acting on a
snapshot that a dead job stopped refreshing days ago is the failure this
module exists to prevent.

A snapshot's frontmatter carries its numbers in a machine-readable block:

    ---
    updated: 2026-10-26T09:00:00+09:00
    generator: memctl state update
    numbers:
      completed: 48
      ledger.article-themes.rows: 2
    ---

The frontmatter is a fixed subset of YAML that this module writes and reads
itself (no YAML library: `state check` runs from cron and should stay cheap).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from . import clock
from .clock import format_duration  # noqa: F401  (jobs and this module word ages with it)
from .errors import BadInput, GitError, NotFound
from .fsutil import STATE_LIMIT, TooBig, atomic_write, link_on_way, read_state, refuse_link, tree_files
from .store import Store, commit, refuse_uncommitted

STATE_FILE = "STATE.md"
GENERATOR = "memctl state update"
DEFAULT_MAX_AGE = "24h"
DEFAULT_MESSAGE = "state: update {file} (date:{date} {numbers})"
DEFAULT_JSON_TITLE = "Numbers"
MAX_NUMBERS = 100  # numbers are a summary, never a raw log
MAX_NOTE_CHARS = 2000
MAX_CELL_CHARS = 60
SUMMARY_KINDS = ("facts", "ledger", "episodes")

SCOPE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$")  # not `-` first, as fact and ledger names
def _spacing(key: str) -> bool:
    """Whether a key holds a space, a line or paragraph separator, a control or an invisible format
    character of Unicode's (U+3000, U+00A0, U+2028, U+0085, U+200B): none of them shows, and U+2028 and
    U+0085 end a line for str.splitlines() and for editors."""
    import unicodedata  # noqa: PLC0415

    return any(unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc", "Cf") for c in key if c > "\x7f")


# A key is written bare in the frontmatter: no spaces, colons, quotes or YAML indicators.
KEY_RE = re.compile(r"^[A-Za-z0-9_\u0080-\U0010ffff][A-Za-z0-9_.\-\u0080-\U0010ffff]{0,79}$")
RESERVED_PREFIXES = ("facts", "ledger.", "episodes.")
_DURATION_RE = re.compile(r"(\d+)\s*([wdhms])")
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_HINT = "a number and a unit: 30m, 24h, 2d, 1w, 1h30m"
_PLACEHOLDER_RE = re.compile(r"\{([^{}\s]+)\}")

Number = int | float


# ---------------------------------------------------------------- durations

def parse_duration(value: Any, what: str = "duration") -> int:
    """Seconds from `24h`, `90m`, `1d12h`, `1w`, `30s`, or a whole number of seconds (TOML)."""
    if isinstance(value, bool):
        raise BadInput(f"{what}: expected a duration like 24h, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise BadInput(f"{what}: {value} must be more than 0 seconds", hint=_DURATION_HINT)
        return value
    text = str(value).strip().lower().replace(" ", "")
    if not text or _DURATION_RE.sub("", text) != "":
        raise BadInput(f"{what}: {value!r} is not a duration", hint=_DURATION_HINT)
    seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION_RE.findall(text))
    if seconds <= 0:
        raise BadInput(f"{what}: {value!r} must be more than 0 seconds", hint=_DURATION_HINT)
    return seconds


# ---------------------------------------------------------------- configuration

@dataclass(frozen=True)
class Summary:
    """One `[[state.summaries]]` entry."""

    kind: str  # facts | ledger | episodes
    ledger: str | None = None
    by: str | None = None  # ledger: counts by this column
    top: int = 10  # ledger: how many values of `by` to list
    newest: int = 0  # ledger: the newest N rows
    columns: tuple[str, ...] = ()  # ledger: columns shown for the newest rows (default all)
    title: str | None = None


@dataclass(frozen=True)
class StateConfig:
    scope: str | None
    title: str
    max_age: int  # seconds
    message: str
    key_numbers: tuple[str, ...]
    json_title: str
    summaries: tuple[Summary, ...] | None  # None: the defaults (facts, every ledger, episodes today)


_STATE_KEYS = {"title", "max_age", "message", "key_numbers", "json_title", "summaries", "scopes"}
_SUMMARY_KEYS = {"kind", "ledger", "by", "top", "newest", "columns", "title"}


def check_scope(scope: str | None) -> str | None:
    if scope is None:
        return None
    if not SCOPE_RE.match(scope):
        raise BadInput(f"invalid state scope {scope!r}", hint="1-80 ASCII letters, digits, - or _, not - first (no /, no ..)")
    return scope


def _str(table: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"memctl.toml: {where} {key} must be a non-empty string")
    return value


def _int(table: Mapping[str, Any], key: str, where: str, default: int, low: int, high: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"memctl.toml: {where} {key} = {value!r} must be a whole number from {low} to {high}")
    return value


def _summary(entry: Any, where: str) -> Summary:
    from .ledger import COLUMN_RE, check_name  # noqa: PLC0415

    if not isinstance(entry, dict):
        raise BadInput(f"memctl.toml: {where} must be a table")
    unknown = sorted(set(entry) - _SUMMARY_KEYS)
    if unknown:
        raise BadInput(f"memctl.toml: {where} has an unknown key {unknown[0]!r}", hint="keys: " + ", ".join(sorted(_SUMMARY_KEYS)))
    kind = entry.get("kind")
    if kind not in SUMMARY_KINDS:
        raise BadInput(f"memctl.toml: {where} kind = {kind!r} must be one of {', '.join(SUMMARY_KINDS)}")
    title = _str(entry, "title", where, "-") if "title" in entry else None
    if kind != "ledger":
        extra = sorted(set(entry) - {"kind", "title"})
        if extra:
            raise BadInput(f"memctl.toml: {where} key {extra[0]!r} applies only to kind = \"ledger\"")
        return Summary(kind=kind, title=title)
    name = entry.get("ledger")
    if not isinstance(name, str):
        raise BadInput(f"memctl.toml: {where} needs ledger = \"NAME\"")
    try:
        check_name(name)
    except BadInput as exc:
        raise BadInput(f"memctl.toml: {where}: {exc.message}", hint=exc.hint) from None
    columns = entry.get("columns", [])
    if not isinstance(columns, list) or not all(isinstance(c, str) and COLUMN_RE.match(c) for c in columns):
        raise BadInput(f"memctl.toml: {where} columns must be a list of column names")
    by = entry.get("by")
    if by is not None and (not isinstance(by, str) or not COLUMN_RE.match(by)):
        raise BadInput(f"memctl.toml: {where} by = {by!r} is not a column name")
    return Summary(
        kind="ledger", ledger=name, by=by, title=title, columns=tuple(columns),
        top=_int(entry, "top", where, 10, 1, 1000), newest=_int(entry, "newest", where, 0, 0, 100),
    )


def _settings(table: Mapping[str, Any], where: str, base: StateConfig | None, scope: str | None) -> StateConfig:
    allowed = _STATE_KEYS if base is None else _STATE_KEYS - {"scopes"}
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise BadInput(f"memctl.toml: [{where}] has an unknown key {unknown[0]!r}", hint="keys: " + ", ".join(sorted(allowed)))
    title = _str(table, "title", f"[{where}]", base.title if base else "STATE")
    message = _str(table, "message", f"[{where}]", base.message if base else DEFAULT_MESSAGE)
    json_title = _str(table, "json_title", f"[{where}]", base.json_title if base else DEFAULT_JSON_TITLE)
    max_age = parse_duration(table["max_age"], f"memctl.toml: [{where}] max_age") if "max_age" in table else (
        base.max_age if base else parse_duration(DEFAULT_MAX_AGE))
    keys = table.get("key_numbers", list(base.key_numbers) if base else [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and KEY_RE.match(k) for k in keys):
        raise BadInput(f"memctl.toml: [{where}] key_numbers must be a list of number names")
    summaries = base.summaries if base else None
    if "summaries" in table:
        entries = table["summaries"]
        if not isinstance(entries, list):
            raise BadInput(f"memctl.toml: [{where}] summaries must be an array of tables ([[{where}.summaries]])")
        summaries = tuple(_summary(e, f"[[{where}.summaries]] #{i}") for i, e in enumerate(entries, 1))
    return StateConfig(scope, title, max_age, message, tuple(keys), json_title, summaries)


def state_config(store: Store, scope: str | None = None) -> StateConfig:
    """The `[state]` settings, with `[state.scopes.<scope>]` laid over them."""
    table = store.config.raw.get("state", {})
    if not isinstance(table, dict):
        raise BadInput("memctl.toml: state must be a table ([state])")
    base = _settings(table, "state", None, None)
    scopes = table.get("scopes", {})
    if not isinstance(scopes, dict):
        raise BadInput("memctl.toml: [state] scopes must be a table ([state.scopes.NAME])")
    for name in scopes:
        if not SCOPE_RE.match(name):
            raise BadInput(f"memctl.toml: invalid state scope [state.scopes.{name}]", hint="1-80 ASCII letters, digits, - or _, not - first")
    if scope is None:
        return base
    override = scopes.get(scope, {})
    if not isinstance(override, dict):
        raise BadInput(f"memctl.toml: [state.scopes.{scope}] must be a table")
    cfg = _settings(override, f"state.scopes.{scope}", base, scope)
    if "title" not in override:
        cfg = StateConfig(scope, f"{base.title} ({scope})", cfg.max_age, cfg.message, cfg.key_numbers, cfg.json_title, cfg.summaries)
    return cfg


# ---------------------------------------------------------------- the file

@dataclass(frozen=True)
class Snapshot:
    updated: str | None
    numbers: dict[str, Number] = field(default_factory=dict)
    body: str = ""
    generator: str | None = GENERATOR


def _number_text(value: Number) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def render(snapshot: Snapshot) -> str:
    lines = ["---"]
    if snapshot.updated:
        lines.append(f"updated: {snapshot.updated}")
    if snapshot.generator:
        lines.append(f"generator: {snapshot.generator}")
    if snapshot.numbers:
        lines.append("numbers:")
        lines += [f"  {key}: {_number_text(value)}" for key, value in snapshot.numbers.items()]
    lines.append("---")
    return "\n".join(lines) + "\n" + snapshot.body


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _parse_number(text: str) -> Number | None:
    text = _scalar(text)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_BODY_NUMBER_RE = re.compile(r"^- ([^:]{1,80}): (-?\d+(?:\.\d+)?)\s*$")


def parse(text: str) -> Snapshot:
    """Read a STATE.md; one written by hand or by an older memctl reads as well as it can."""
    lines = text.split("\n")
    updated = generator = None
    numbers: dict[str, Number] = {}
    body_start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            body_start = end + 1
            in_numbers = False
            for line in lines[1:end]:
                if in_numbers and line.startswith((" ", "\t")) and ":" in line:
                    key, _, value = line.strip().partition(":")
                    number = _parse_number(value)
                    if number is not None:
                        numbers[_scalar(key)] = number
                    continue
                in_numbers = False
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "updated":
                    updated = _scalar(value) or None
                elif key == "generator":
                    generator = _scalar(value) or None
                elif key == "numbers" and not value.strip():
                    in_numbers = True
    body = "\n".join(lines[body_start:])
    if not numbers:
        # A snapshot without a numbers block (hand-written, or older): `- label: 12` lines.
        for line in lines[body_start:]:
            match = _BODY_NUMBER_RE.match(line)
            if match:
                number = _parse_number(match.group(2))
                key = re.sub(r"\s+", "_", match.group(1).strip())
                if number is not None and KEY_RE.match(key):
                    numbers.setdefault(key, number)
    return Snapshot(updated, numbers, body, generator)


def state_path(store: Store, scope: str | None = None) -> Path:
    scope = check_scope(scope)
    path = store.state_dir / STATE_FILE if scope is None else store.state_dir / scope / STATE_FILE
    refuse_link(store.root, path)  # never read or write a STATE.md through a link (docs/RELIABILITY.md)
    return path


def _read(path: Path) -> Snapshot | None:
    """The snapshot in `path`; None when there is none, or it is over its limit (not read: doctor names it,
    and the next update writes a new one over it)."""
    try:
        return parse(read_state(path).decode("utf-8", errors="replace"))
    except (FileNotFoundError, TooBig):
        return None


def _previous(store: Store, path: Path) -> Snapshot | None:
    """The snapshot a new one counts from (`ledger.<name>.new`): the last committed one, so that the numbers
    in git's history add up (a `--no-commit` preview written since is no step of it: rows appended before
    it were never "new" in any commit); None before the first commit; outside git, the file on disk."""
    from . import gitstore  # noqa: PLC0415

    try:
        if gitstore.toplevel(store.root) is None:
            return _read(path)
        data = gitstore.committed_bytes(store.root, path, STATE_LIMIT)
    except GitError:
        return _read(path)
    return parse(data.decode("utf-8", errors="replace")) if data is not None else None


# ---------------------------------------------------------------- input

def check_numbers(data: Any, source: str = "JSON") -> dict[str, Number]:
    """A flat JSON object of numbers; anything else is refused before a file is touched."""
    arg = "numbers" if source == "numbers" else None
    if not isinstance(data, dict):
        raise BadInput(f"{source}: expected a JSON object of numbers, got {type(data).__name__}",
                       hint='e.g. {"completed": 48, "in_progress": 0}', arg=arg)
    if len(data) > MAX_NUMBERS:
        raise BadInput(f"{source}: {len(data)} numbers; at most {MAX_NUMBERS}", hint="STATE.md holds summaries, never raw logs", arg=arg)
    numbers: dict[str, Number] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not KEY_RE.match(key) or _spacing(key):
            raise BadInput(f"{source}: invalid key {key!r}", hint="letters, digits, _ . -; no spaces (U+3000 and U+2028 "
                           "included) or colons; at most 80", arg=arg)
        if key.startswith(RESERVED_PREFIXES):
            raise BadInput(f"{source}: key {key!r} is reserved for memctl's own summaries", hint="rename it, e.g. tasks.completed", arg=arg)
        if isinstance(value, int) and not isinstance(value, bool) and not _fits_a_double(value):  # (math.isfinite overflowed)
            raise BadInput(f"{source}: {key!r} must be a finite number, not a whole number of {len(str(abs(value)))} digits",
                           hint="give a number a double can hold (up to about 1.8e308)", arg=arg)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else type(value).__name__
            if isinstance(value, float):  # 1e400 is read as inf
                raise BadInput(f"{source}: {key!r} must be a finite number, not {value}", hint="give a number a double "
                               "can hold (up to about 1.8e308)", arg=arg)
            raise BadInput(f"{source}: {key!r} must be a number, not {kind}", hint="STATE.md holds summarised numbers, never raw logs", arg=arg)
        numbers[key] = value
    return numbers


def _fits_a_double(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def parse_numbers_json(text: str, source: str = "stdin") -> dict[str, Number]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                       hint='give one JSON object, e.g. {"completed": 48}') from None
    except ValueError:  # a whole number of over 4,300 digits (Python's limit on reading one)
        raise BadInput(f"{source}: a number of over 4300 digits", hint="give a number a double can hold (up to about 1.8e308)") from None
    return check_numbers(data, source)


def _check_note(note: str | None) -> str | None:
    if note is None:
        return None
    note = note.strip()
    if not note:
        return None
    if len(note) > MAX_NOTE_CHARS or "\0" in note:
        raise BadInput(f"note: at most {MAX_NOTE_CHARS} characters of text", hint="keep long text in a fact file", arg="note")
    from .private import hide  # <private> text is hidden even when secrets are allowed (secrets: _scrubbed)

    return hide(note)[0]


def _scrubbed(note: str | None, given: dict[str, Number]) -> tuple[str | None, dict[str, Number]]:
    """The note with its secrets redacted (secrets.scrub warns); a key a redactor would change is refused,
    since a redacted key is no key (docs/RELIABILITY.md, Secrets)."""
    from .secrets import scrub  # noqa: PLC0415

    keys = list(given)
    cleaned = scrub(keys, "state update", quiet=True)
    for n, (key, clean) in enumerate(zip(keys, cleaned), 1):
        if clean != key:
            raise BadInput(f"numbers: key {n} looks like a secret (redacted it reads {clean!r})",
                           hint="name the number by what it counts (or allow secrets to store it as given)", arg="numbers")
    return (scrub([note], "state update")[0] if note is not None else None), given


# ---------------------------------------------------------------- summaries

@dataclass(frozen=True)
class Section:
    title: str
    lines: tuple[str, ...]


def _cell(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= MAX_CELL_CHARS else value[: MAX_CELL_CHARS - 1] + "…"


def _day_of(stamp: object, now: datetime) -> str | None:
    """The day (YYYY-MM-DD) `stamp` falls on in `now`'s time zone: a fact updated at 23:30-08:00 was
    updated on the next day in Tokyo (its text's date is not that day). None when it is no time."""
    text = str(stamp).strip() if stamp else ""
    try:
        if len(text) == 10:  # a bare date is its own day
            return datetime.fromisoformat(text).date().isoformat()
        return clock.in_zone_of(clock.parse_date(text), now).date().isoformat() if text else None
    except (ValueError, OverflowError):
        return None


def _facts_section(store: Store, summary: Summary, today: str, now: datetime) -> tuple[Section, dict[str, Number]]:
    from . import facts  # noqa: PLC0415

    found = facts.live_facts(store, quiet=True)
    live = [f for f in found if not clock.expired(f.meta("expires"), now)]  # as recall, context and MEMORY.md see them
    by_type = Counter(f.type or "untyped" for f in live)
    changed = sorted(f.name or f.stem for f in live if _day_of(f.meta("updated") or f.meta("created"), now) == today)
    numbers: dict[str, Number] = {"facts": len(live)}
    lines = [f"- total: {len(live)}"]
    if len(found) > len(live):  # not yet archived (a `forget --policies` job does it)
        numbers["facts.expired"] = len(found) - len(live)
        lines.append(f"- expired, not archived yet: {len(found) - len(live)}")
    for fact_type, count in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])):
        numbers[f"facts.{fact_type}"] = count
        lines.append(f"- {fact_type}: {count}")
    numbers["facts.changed_today"] = len(changed)
    shown = ", ".join(changed[:10]) + (f" (+{len(changed) - 10} more)" if len(changed) > 10 else "")
    lines.append(f"- changed today: {len(changed)}" + (f" ({shown})" if changed else ""))
    return Section(summary.title or "Facts", tuple(lines)), numbers


def _ledger_section(store: Store, summary: Summary, previous: Snapshot | None) -> tuple[Section, dict[str, Number]]:
    from . import ledger  # noqa: PLC0415

    name = summary.ledger or ""
    try:
        opened = ledger.open_ledger(store, name)
    except NotFound as exc:  # the summary is the user's setting: name it, not only the ledger
        raise NotFound(f"memctl.toml: [state] summary of ledger {name!r}: {exc.message}",
                       hint=f"create the ledger, or fix ledger = {name!r} in [[state.summaries]]") from None
    for column in (summary.by, *summary.columns):
        if column and column not in opened.columns:
            raise BadInput(f"memctl.toml: [state] summary of ledger {name!r}: no column {column!r}",
                           hint=f"columns: {', '.join(opened.columns)}")
    if opened.path.is_file():  # a conflict's marker lines read as rows: a wrong count, committed (writers refuse too)
        from .markers import refuse_conflicts  # noqa: PLC0415

        refuse_conflicts(opened.path.read_bytes(), store.rel(opened.path))
    rows = list(ledger.iter_rows(opened))
    key = f"ledger.{name}"
    numbers: dict[str, Number] = {f"{key}.rows": len(rows)}
    lines = [f"- rows: {len(rows)}"]
    before = previous.numbers.get(f"{key}.rows") if previous else None
    if isinstance(before, int) and 0 <= before <= len(rows):
        # Ledgers are append-only, so the count difference is exactly what was added.
        numbers[f"{key}.new"] = len(rows) - before
        lines.append(f"- new since last update: {len(rows) - before}")
    if summary.by:
        counts = Counter(row.values[summary.by] for row in rows)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        lines.append(f"- by {summary.by}:")
        lines += [f"  - {_cell(value) or '(empty)'}: {count}" for value, count in ranked[: summary.top]]
        if len(ranked) > summary.top:
            lines.append(f"  - ({len(ranked) - summary.top} more values)")
    if summary.newest:
        columns = summary.columns or opened.columns
        lines.append(f"- newest {min(summary.newest, len(rows))}:")
        lines += [f"  - {' · '.join(_cell(row.values[c]) for c in columns)}" for row in reversed(rows[-summary.newest:])]
    return Section(summary.title or f"Ledger {name}", tuple(lines)), numbers


def _episodes_section(store: Store, summary: Summary, now: datetime) -> tuple[Section, dict[str, Number]]:
    from . import episodes  # noqa: PLC0415

    found = [e for e in episodes.list_episodes(store, since=clock.midnight(now)) if _at(e.ts, now)]
    by_type = Counter(e.type for e in found)
    numbers: dict[str, Number] = {"episodes.today": len(found)}
    lines = [f"- total: {len(found)}"]
    for episode_type, count in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])):
        numbers[f"episodes.today.{episode_type}"] = count
        lines.append(f"- {episode_type}: {count}")
    return Section(summary.title or "Episodes today", tuple(lines)), numbers


def _at(ts: str, now: datetime) -> bool:
    """Not in the future (a MEMCTL_NOW in the past must not count later episodes)."""
    try:
        return clock.parse_date(ts) <= now
    except ValueError:
        return False


def _default_summaries(store: Store) -> tuple[Summary, ...]:
    from . import ledger  # noqa: PLC0415

    ledgers = [Summary(kind="ledger", ledger=l.name) for l in ledger.list_ledgers(store)]
    return (Summary(kind="facts"), *ledgers, Summary(kind="episodes"))


def build(store: Store, cfg: StateConfig, given: Mapping[str, Number], previous: Snapshot | None,
          now: datetime, note: str | None = None) -> tuple[str, dict[str, Number]]:
    """The body and the numbers of a new snapshot."""
    sections: list[Section] = []
    numbers: dict[str, Number] = dict(given)
    if given:
        sections.append(Section(cfg.json_title, tuple(f"- {k}: {_number_text(v)}" for k, v in given.items())))
    today = now.date().isoformat()
    summaries = cfg.summaries if cfg.summaries is not None else _default_summaries(store)
    for summary in summaries:
        if summary.kind == "facts":
            section, found = _facts_section(store, summary, today, now)
        elif summary.kind == "ledger":
            section, found = _ledger_section(store, summary, previous)
        else:
            section, found = _episodes_section(store, summary, now)
        sections.append(section)
        numbers.update(found)
    if note:
        sections.append(Section("Note", tuple(note.split("\n"))))
    body = f"# {cfg.title}\n" + "".join("\n## " + s.title + "\n" + "".join(line + "\n" for line in s.lines) for s in sections)
    return body, numbers


def commit_message(template: str, *, rel: str, now: datetime, numbers: Mapping[str, Number],
                   key_numbers: tuple[str, ...], given: Mapping[str, Number]) -> str:
    """Fill `{date}`, `{time}`, `{file}`, `{numbers}` and `{<number name>}` (missing ones read `-`)."""
    if key_numbers:
        keys = [k for k in key_numbers if k in numbers]
    elif given:
        keys = list(given)
    else:
        keys = [k for k in numbers if k in ("facts", "episodes.today") or (k.startswith("ledger.") and k.endswith(".rows"))]
    values = {
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M"),
        "file": rel,
        "numbers": " ".join(f"{k}:{_number_text(numbers[k])}" for k in keys),
        **{k: _number_text(v) for k, v in numbers.items()},
    }
    text = _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), "-"), template)
    return re.sub(r"\s+\)", ")", re.sub(r"[ \t]+", " ", text)).strip()


# ---------------------------------------------------------------- operations

@dataclass(frozen=True)
class Updated:
    path: Path
    snapshot: Snapshot
    message: str
    commit: str | None


def update(store: Store, *, scope: str | None = None, numbers: Mapping[str, Any] | None = None,
           note: str | None = None, commit_changes: bool = True, allow_secrets: bool = False) -> Updated:
    """Render the scope's STATE.md from its summaries and `numbers`, write it, commit it.
    A secret in the note is redacted, with a warning, and a number named by one is refused, unless `allow_secrets`."""
    path = state_path(store, scope)
    cfg = state_config(store, scope)
    given = check_numbers(dict(numbers or {}), "numbers")
    note = _check_note(note)
    if not allow_secrets:
        note, given = _scrubbed(note, given)
    with store.lock(commits=commit_changes):
        if path.is_file():
            from .markers import refuse_conflicts  # noqa: PLC0415

            with contextlib.suppress(TooBig):  # (one over its limit is not read: replaced)
                refuse_conflicts(read_state(path), store.rel(path))
            if not _as_written(store, path):  # memctl's own snapshot, left uncommitted by --no-commit: replaced
                refuse_uncommitted(store, [path], commit_changes)  # a hand edit: overwritten, and in no commit
        previous = _previous(store, path)
        now = clock.now()
        body, found = build(store, cfg, given, previous, now, note)
        snapshot = Snapshot(now.isoformat(timespec="seconds"), found, body, GENERATOR)
        rel = store.rel(path)
        message = commit_message(cfg.message, rel=rel, now=now, numbers=found, key_numbers=cfg.key_numbers, given=given)
        atomic_write(path, render(snapshot))
        _written(store, path, render(snapshot).encode("utf-8"))
        sha = commit(store, [path], message, enabled=commit_changes)
    return Updated(path, snapshot, message, sha)


WRITTEN = "state-written.json"  # in .memctl/: the hash of each STATE.md as memctl last wrote it


def _written(store: Store, path: Path, data: bytes) -> None:
    import hashlib  # noqa: PLC0415

    table = _written_table(store)
    table[store.rel(path)] = hashlib.sha256(data).hexdigest()
    try:
        store.cache_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(store.cache_dir / WRITTEN, json.dumps(table, sort_keys=True) + "\n")
    except OSError:
        pass  # a cache: without it, an uncommitted snapshot is refused as a hand edit, as before


def _written_table(store: Store) -> dict[str, str]:
    try:
        table = json.loads((store.cache_dir / WRITTEN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def _as_written(store: Store, path: Path) -> bool:
    """Whether STATE.md holds exactly what memctl last wrote there (a `--no-commit` update's snapshot,
    which the daily job's committing update refused as a hand edit, every day after)."""
    import hashlib  # noqa: PLC0415

    try:
        data = read_state(path)
    except (OSError, TooBig):  # (one over its limit is never memctl's)
        return False
    return _written_table(store).get(store.rel(path)) == hashlib.sha256(data).hexdigest()


def show(store: Store, scope: str | None = None) -> tuple[Path, str, Snapshot]:
    path = state_path(store, scope)
    if not path.is_file():
        raise NotFound(f"no {store.rel(path)} yet", hint="update the state first", kind="no-state", scope=scope)
    text = read_state(path, store.rel(path)).decode("utf-8", errors="replace")
    return path, text, parse(text)


@dataclass(frozen=True)
class Version:
    commit: str
    subject: str
    updated: str | None
    numbers: dict[str, Number]

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "subject": self.subject, "updated": self.updated, "numbers": dict(self.numbers)}


def history(store: Store, scope: str | None = None) -> list[Version]:
    """The numbers of every committed version, oldest first."""
    from . import gitstore  # noqa: PLC0415

    path = state_path(store, scope)
    if gitstore.toplevel(store.root) is None:
        raise NotFound(f"{store.root} is not in a git repository; STATE.md has no history", hint="git init")
    found, too_big = [], 0
    for sha, subject, data in gitstore.versions(store.root, path, STATE_LIMIT):
        too_big += data is None
        if not data:
            continue  # deleted in this commit, or over the limit
        snapshot = parse(data.decode("utf-8", errors="replace"))
        found.append(Version(sha, subject, snapshot.updated, snapshot.numbers))
    if too_big:
        from .errors import warn  # noqa: PLC0415
        from .fsutil import shown  # noqa: PLC0415

        warn(f"left out {too_big} committed version{'s' if too_big > 1 else ''} of {store.rel(path)} over {shown(STATE_LIMIT)}: "
             f"a STATE.md may be at most {shown(STATE_LIMIT)} (docs/FORMAT.md, Limits), so memctl does not read it")
    if not found and not path.exists():
        raise NotFound(f"no {store.rel(path)} yet", hint="update the state first", kind="no-state", scope=scope)
    return found


# ---------------------------------------------------------------- staleness

@dataclass(frozen=True)
class Freshness:
    path: str  # relative to the store
    updated: str  # ISO-8601, from `source`
    source: str  # updated (frontmatter) | commit (last commit touching it) | mtime
    age: int  # seconds
    max_age: int  # seconds
    stale: bool
    ahead: bool = False  # dated in the future by every date it has: its age is unknown, so it is stale

    def line(self) -> str:
        if self.ahead:
            return (f"STALE: {self.path} (updated {self.updated}: in the future, by a clock that was wrong; "
                    "its age is unknown until the next update)")
        return f"STALE: {self.path} (updated {self.updated}, {format_duration(self.age)} ago)"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "updated": self.updated, "source": self.source, "age": format_duration(self.age),
                "age_seconds": self.age, "max_age": format_duration(self.max_age), "stale": self.stale, "ahead": self.ahead}


def state_files(store: Store) -> list[Path]:
    """Every STATE.md under state/: the store's own first, then the scopes by name."""
    if link_on_way(store.root, store.state_dir) is not None or not store.state_dir.is_dir():
        return []
    found = sorted(p for p in tree_files(store.state_dir, STATE_FILE) if link_on_way(store.root, p) is None and p.is_file())
    return sorted(found, key=lambda p: (p.parent != store.state_dir, str(p)))


def _committed_at(store: Store, path: Path) -> datetime | None:
    """The date of the last commit touching `path`, when the file is as committed."""
    from . import gitstore  # noqa: PLC0415

    try:
        if gitstore.toplevel(store.root) is None or gitstore.dirty_paths(store.root, [path]):
            return None  # uncommitted changes: the commit does not date what is on disk
        entries = gitstore.log(store.root, path)
    except GitError:
        return None
    return datetime.fromisoformat(entries[0].date) if entries else None


SKEW = clock.SKEW  # seconds: another machine's clock may run this far ahead before `updated:` is not believed


def unbelievable_updated(snapshot: Snapshot | None) -> str | None:
    """Why a snapshot's `updated:` cannot date it (not a date, or in the future: a hand edit, a wrong clock),
    else None. Its age is then taken from the last commit, or the file's mtime."""
    if not snapshot or not snapshot.updated:
        return None
    try:
        stated = clock.parse_date(snapshot.updated)
    except ValueError:
        return f"updated: {snapshot.updated!r} is not an ISO-8601 date"
    if (stated - clock.now()).total_seconds() > SKEW:
        return f"updated: {snapshot.updated} is in the future (a hand edit, or a clock that is wrong)"
    return None


def when_updated(store: Store, path: Path) -> tuple[datetime, str]:
    """When a snapshot was last refreshed: `updated:`, else (none, or not believable) the last commit, else the mtime."""
    snapshot = _read(path)
    if snapshot and snapshot.updated and unbelievable_updated(snapshot) is None:
        return clock.parse_date(snapshot.updated), "updated"
    committed = _committed_at(store, path)
    if committed is not None:
        return committed, "commit"
    return datetime.fromtimestamp(path.stat().st_mtime).astimezone(), "mtime"


def _scope_of(store: Store, path: Path) -> str | None:
    parent = path.parent
    return None if parent == store.state_dir else parent.name


def scopes(store: Store) -> list[str | None]:
    """The scope of every STATE.md (None: the store's own), in state_files' order."""
    return [_scope_of(store, path) for path in state_files(store)]


def check(store: Store, max_age: int | None = None) -> list[Freshness]:
    """Every STATE.md with its age; `stale` when older than `max_age` (else its scope's max_age).

    No STATE.md at all is NotFound: a check that found nothing to check must not pass for a fresh one.
    """
    now = clock.now()
    results = []
    paths = state_files(store)
    if not paths:
        raise NotFound(f"no {store.rel(store.state_dir / STATE_FILE)} yet, so nothing to check", hint="memctl state update")
    for path in paths:
        scope = _scope_of(store, path)
        limit = max_age if max_age is not None else state_config(store, scope if scope and SCOPE_RE.match(scope) else None).max_age
        when, source = when_updated(store, path)
        age = int((now - when).total_seconds())
        # A snapshot whose commit (or mtime) is in the future too proves nothing: the job that wrote it under a
        # clock that ran ahead may be dead since. The night the clocks go back, a daily job's gap is 25 hours.
        ahead = age < -SKEW
        stale = ahead or age > limit + clock.summer_time_ended(when, now)
        results.append(Freshness(store.rel(path), when.isoformat(timespec="seconds"), source, max(age, 0), limit, stale, ahead))
    return results


def problems(store: Store) -> list:
    """doctor: a stale snapshot is an error (agents would act on it), bad [state] config too."""
    from .facts import Problem  # noqa: PLC0415

    try:
        state_config(store)
        found = check(store)
    except NotFound:
        return []  # no snapshot yet: nothing can be stale
    except BadInput as exc:
        return [Problem("memctl.toml", 0, "state-config", exc.one_line())]
    unbelievable, too_big = [], []
    for path in state_files(store):  # each read once
        try:
            why = unbelievable_updated(parse(read_state(path, store.rel(path)).decode("utf-8", errors="replace")))
        except TooBig as exc:
            too_big.append(Problem(store.rel(path), 0, "too-big", f"{exc.details['reason']} (the next `memctl state update` "
                                   "replaces it)"))
            continue
        except FileNotFoundError:  # (gone since it was listed)
            continue
        if why:
            unbelievable.append((store.rel(path), why))
    return too_big + [
        Problem(f.path, 0, "state-stale", (f"stale: updated {f.updated}, in the future (its {f.source}'s date, by a clock "
                "that was wrong): its age is unknown" if f.ahead else f"stale: updated {f.updated}, {format_duration(f.age)} ago")
                + f" (limit {format_duration(f.max_age)}; is the job that runs `memctl state update` alive?)")
        for f in found if f.stale
    ] + [Problem(rel, 0, "state-updated", f"{why}: its age is taken from its last commit (or mtime) instead", "warning")
         for rel, why in unbelievable]

