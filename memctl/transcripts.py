"""Import agent transcripts into the episodes ledger (docs/TRANSCRIPTS.md).

The parsing is pure (memctl/importers/); this module reads the files, works
out what is new, redacts, and appends. What is new is decided by the ledger
itself: every imported episode carries `record:<id>` in its refs, so a record
whose id is already there is never imported again, whatever happened to the
caches. `.memctl/imports.json` only remembers, per transcript, the byte
offset where the last import stopped (and a hash of the bytes before it), so
a grown transcript is read from there; deleting it costs a full re-read,
never a duplicate.

Everything is read, redacted and checked before the one append: an import
writes all of its new episodes in one write and one commit, or nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

from . import clock, episodes, ledger
from .errors import BadInput, NotFound, warn
from .fsutil import atomic_write
from .importers import MAX_LINE_BYTES, TYPES, Parsed, Turn, cut, lines, redact
from .importers.hosts import HOSTS, Host
from .store import Store

FORMATS = tuple(HOSTS)
MAX_CHARS = 2000
MAX_FILE_MB = 256
STATE_FILE = "imports.json"
_TAIL = 64  # bytes before the resume offset that must be unchanged to trust it
_ID_SALTS = 16
AHEAD = timedelta(days=1)  # a record dated further ahead of this machine's clock is named (a clock was wrong)


@dataclass(frozen=True)
class Settings:
    max_chars: int = MAX_CHARS
    max_file_mb: float = MAX_FILE_MB
    redact_patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileReport:
    path: str
    records: int  # complete records read this time (after the resume point)
    imported: int
    already: int  # turns whose record was imported before
    bad: int
    left_out: int
    torn: bool  # the last line was incomplete and is left for the next import
    resumed_at: int  # byte offset reading started at
    problem: str = ""  # why the file was skipped (only when skipping is allowed)
    first_bad: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Result:
    files: list[FileReport]
    episodes: list[episodes.Episode]
    redacted: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False
    commit: str | None = None

    @property
    def bad(self) -> int:
        return sum(f.bad for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.episodes), "redacted": dict(sorted(self.redacted.items())),
            "bad_records": self.bad, "dry_run": self.dry_run, "commit": self.commit,
            "files": [f.to_dict() for f in self.files], "episodes": [e.to_dict() for e in self.episodes],
        }


# ---------------------------------------------------------------- settings and files


def settings_for(store: Store) -> Settings:
    max_chars, max_mb, patterns = checked_settings(store.config.raw)
    from . import trust  # noqa: PLC0415

    if patterns:  # a pattern a commit not made here added runs only once approved (memctl/trust.py)
        allowed = trust.acted_on(store, [trust.PATTERN_KEY + p for p in patterns])
        patterns = [p for p in patterns if trust.PATTERN_KEY + p in allowed]
    kept = [p for p in trust.removed_patterns(store) if p not in patterns]  # taken out by a change not made here
    if kept:
        from .errors import warn  # noqa: PLC0415

        warn(f"{len(kept)} redaction pattern(s) approved here were taken out of memctl.toml by a change not made on this "
             f"machine ({', '.join(repr(p) for p in kept)}); still applied until the removal is approved",
             hint="review it, then approve it with `memctl trust`")
    return Settings(max_chars, float(max_mb), tuple(patterns + kept))


def checked_settings(raw: dict[str, Any]) -> tuple[int, float, list[str]]:
    """`[import]` of a parsed memctl.toml, checked: (max_chars, max_file_mb, redact_patterns as written)."""
    from .config import number, section  # noqa: PLC0415

    table = section(raw, "import")
    max_chars = table.get("max_chars", MAX_CHARS)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 100 <= max_chars <= 60_000:
        raise BadInput(f"memctl.toml: [import] max_chars must be a whole number from 100 to 60000, got {max_chars!r}")
    max_mb = number(table, "max_file_mb", MAX_FILE_MB, "[import]", low=0.001, high=1_000_000)  # (nan, 1e400: no cap at all)
    patterns = table.get("redact_patterns", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise BadInput("memctl.toml: [import] redact_patterns must be a list of strings (regular expressions)")
    from .importers.redact import compiled  # noqa: PLC0415

    for pattern in patterns:
        compiled(pattern)
    return max_chars, max_mb, list(patterns)


def project_transcripts(fmt: str, project: str | os.PathLike) -> list[Path]:
    """The transcript files of a project for a host: a folder of them, or the host's own folder for
    a working directory (memctl/importers/places.py; docs/TRANSCRIPTS.md, per host)."""
    from .importers import places

    _host(fmt)
    return places.project_transcripts(fmt, project)


def _host(fmt: str) -> Host:
    if fmt not in HOSTS:
        raise BadInput(f"unknown transcript format {fmt!r}", hint=" | ".join(FORMATS))
    return HOSTS[fmt]


def _state_path(store: Store) -> Path:
    return store.cache_dir / STATE_FILE


def _load_state(store: Store) -> dict[str, Any]:
    try:
        data = json.loads(_state_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tail_hash(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _resume_point(path: Path, size: int, saved: Any, tools: bool) -> tuple[int, int]:
    """(byte offset, line number) to start reading at: where the last import stopped, if still true,
    and if it read what this one wants (an import without tools left tool records behind it)."""
    if not isinstance(saved, dict) or tools and saved.get("tools") is not True:
        return 0, 1
    end, line, tail = saved.get("end"), saved.get("line"), saved.get("tail")
    if not isinstance(end, int) or not isinstance(line, int) or not isinstance(tail, str) or not 0 < end <= size:
        return 0, 1
    with open(path, "rb") as handle:
        handle.seek(max(0, end - _TAIL))
        before = handle.read(min(end, _TAIL))
    return (end, line) if _tail_hash(before) == tail else (0, 1)


@dataclass
class _Read:
    path: Path
    parsed: Parsed
    start: int
    next_line: int
    torn: bool
    tail: str
    resumable: bool = True  # False for a file read whole every time (a Gemini `.json` session, rewritten)


def _open_checked(path: Path, settings: Settings, saved: Any, whole: bool, tools: bool) -> tuple[bytes, int, int, bytes, float]:
    """(new bytes, their offset, their first line number, the file's first line when reading from
    later on, the file's modification time): a symbolic link, a missing file, too many bytes are refused."""
    try:
        if path.is_symlink():
            raise BadInput(f"{path}: a symbolic link; a transcript is not read through a link",
                           hint="give the file it points to")
        if not path.exists():
            raise NotFound(f"no such file: {path}", hint="check the path (relative to the current folder)")
        if not path.is_file():
            raise BadInput(f"{path}: not a file")
        info = path.stat()
        size = info.st_size
        start, first_line = (0, 1) if whole else _resume_point(path, size, saved, tools)
        if size - start > settings.max_file_mb * 1024 * 1024:
            raise BadInput(
                f"{path}: {(size - start) / 1048576:.0f} MB to read, more than [import] max_file_mb = {settings.max_file_mb:g}",
                hint="raise [import] max_file_mb in memctl.toml to import it",
            )
        with open(path, "rb") as handle:
            head = handle.readline(MAX_LINE_BYTES + 1) if start else b""  # the first line: the session's own record
            handle.seek(start)
            data = handle.read()
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror or exc}") from None
    # A NUL near the start of a file whose first line is no JSON: binary. A NUL further on, or after a
    # first record (a block a killed writer left), makes a bad record of its line, counted, and the
    # session is read on past it.
    if not start and b"\x00" in data[:8192] and not _is_json(data[:8192].split(b"\n", 1)[0]):
        raise BadInput(f"{path}: a binary file, not a JSONL transcript")
    return data, start, first_line, head, info.st_mtime


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return False
    return True


def _first(numbered: list[tuple[int, Any]], head: bytes) -> tuple[int, Any]:
    """The file's first record (line number, value): from `head` when reading starts later on."""
    if head:
        return next(((n, v) for n, _, v in lines(head + b"\n" * (not head.endswith(b"\n")))), (1, None))
    return next(((n, v) for n, v in numbered if v is not None), (1, None))


def _read(path: Path, host: Host, *, tools: bool, settings: Settings, saved: Any) -> _Read:
    whole = host.whole is not None and path.suffix == ".json"
    data, start, first_line, head, mtime = _open_checked(path, settings, saved, whole, tools)
    numbered: list[tuple[int, Any]] = []
    end, line = 0, first_line - 1
    if whole:
        try:
            numbered = host.whole(json.loads(data.decode("utf-8")))
        except ValueError as exc:  # UnicodeDecodeError included
            raise BadInput(f"{path}: not a JSON session file ({exc}); nothing imported from it", hint=host.hint) from None
        end, line = len(data), len(numbered)
    else:
        for line, end, value in lines(data, 0, first_line):
            numbered.append((line, value))
    at, first = _first(numbered, head)
    if first is not None:
        problem = host.check(first) if not isinstance(first, str) else f"line {at}: {first}" if host.strict else ""
        if problem:
            raise BadInput(f"{path}: {problem}; nothing imported from it", hint=host.hint)
    modified = datetime.fromtimestamp(mtime, tz=timezone.utc).astimezone() if host.timeless else None
    parsed = host.parse(numbered, session=host.session_of(path, first), tools=tools, modified=modified)
    parsed.end = start + end
    if not start and parsed.records and parsed.bad == parsed.records:  # (read on from a resume point: a transcript already)
        raise BadInput(f"{path}: not a JSONL transcript ({parsed.first_bad})", hint=host.hint)
    torn = parsed.end < start + len(data)
    with open(path, "rb") as handle:
        handle.seek(max(0, parsed.end - _TAIL))
        tail = _tail_hash(handle.read(min(parsed.end, _TAIL)))
    return _Read(path, parsed, start, line + 1, torn, tail, resumable=not whole)


# ---------------------------------------------------------------- what the ledger holds


def _known(store: Store) -> tuple[set[str], set[str]]:
    """(record ids already imported, episode ids in use), read from episodes.tsv."""
    path = store.ledgers_dir / f"{episodes.LEDGER}.tsv"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set(), set()
    records = set()
    # refs is the last column: the text between the last TAB of a line and its LF.
    for refs in re.findall(rb"\t([^\t\n]*)\n", data):
        if b"record:" in refs:
            records.update(r[7:].decode("utf-8", "replace") for r in refs.split(b",") if r.startswith(b"record:"))
    ids = {m.decode() for m in re.findall(rb"(?m)^(ep-[^\t\n]+)\t", data)}
    return records, ids


def _safe(value: str) -> str:
    return re.sub(r"[\s,]+", "_", value)[:200] or "-"


def _episode_id(turn: Turn, taken: set[str]) -> str:
    stamp = f"{turn.ts.astimezone(timezone.utc):%Y%m%d%H%M%S}"
    for salt in range(_ID_SALTS):
        digest = hashlib.sha1(f"{turn.record}#{salt}".encode()).hexdigest()[:4]
        candidate = f"ep-{stamp}-{digest}"
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise BadInput(f"record {turn.record}: no free episode id in second {stamp}")


def to_episode(turn: Turn, text: str, agent: str, episode_id: str) -> episodes.Episode:
    return episodes.Episode(
        id=episode_id, ts=turn.ts.astimezone().isoformat(timespec="seconds"), agent=agent, type=turn.type,
        description=text, importance=TYPES[turn.type],
        refs=(f"session:{_safe(turn.session)}", f"record:{turn.record}"),
    )


# ---------------------------------------------------------------- the import


def import_files(store: Store, fmt: str, paths: Sequence[str | os.PathLike], *, tools: bool = False,
                 agent: str | None = None, dry_run: bool = False, skip_bad_files: bool = False,
                 commit_changes: bool = True) -> Result:
    """Import transcripts; one append and one commit for all their new turns, or nothing.

    A file that cannot be read as a transcript is an error (nothing is
    imported), unless `skip_bad_files`: then it is reported and left out.
    """
    host = _host(fmt)
    if not paths:
        raise BadInput("no transcript to import", hint="give transcript files (FILE.jsonl) or a project folder", kind="no-transcript")
    settings = settings_for(store)
    redactor = redact.build(settings.redact_patterns)  # refuses without detect-secrets, before any read
    agent = agent if agent is not None else (os.environ.get("MEMCTL_AGENT") or host.agent)
    state = _load_state(store)
    reads: list[_Read] = []
    problems: list[FileReport] = []
    seen_paths = set()
    for path in map(Path, paths):
        key = _key(path)
        if key in seen_paths:
            continue
        seen_paths.add(key)
        try:
            reads.append(_read(path, host, tools=tools, settings=settings, saved=state.get(key)))
        except BadInput as exc:
            if not skip_bad_files:
                raise
            problems.append(FileReport(str(path), 0, 0, 0, 0, 0, False, 0, problem=exc.one_line()))
    if not dry_run and any(r.parsed.turns for r in reads):
        episodes.ensure_ledger(store, commit_changes=commit_changes)  # takes the lock itself
    with store.lock(commits=commit_changes) if not dry_run else contextlib.nullcontext():
        # What is new is decided under the lock, so two imports of one session cannot both add it.
        known, taken = _known(store)
        fresh: list[tuple[Turn, int]] = []
        reports = []
        for order, read in enumerate(reads):
            new = already = 0
            for turn in read.parsed.turns:
                if turn.record in known:
                    already += 1
                    continue
                known.add(turn.record)
                fresh.append((turn, order))
                new += 1
            p = read.parsed
            reports.append(FileReport(str(read.path), p.records, new, already, p.bad, p.left_out, read.torn,
                                      read.start, first_bad=p.first_bad))
        fresh.sort(key=lambda item: (item[0].ts, item[1], item[0].line))
        _warn_ahead(fresh, reads)
        made = []
        for turn, _ in fresh:
            text = cut(turn.label + redactor.redact(turn.text), settings.max_chars)  # the text as written, then the label
            made.append(to_episode(turn, text, agent, _episode_id(turn, taken)))
        result = Result(reports + problems, made, dict(redactor.counts), dry_run)
        if dry_run:
            return result
        if made:
            done = ledger.append(store, episodes.LEDGER, [episodes.to_record(e) for e in made], unique="id",
                                 commit_changes=commit_changes, lock=False, allow_secrets=True)  # redacted above
            result.commit = done.commit
            # One record a line, appended last under the lock we hold: their file line numbers.
            last = done.path.read_bytes().count(b"\n")
            result.episodes = [replace(e, lineno=last - len(made) + 1 + i) for i, e in enumerate(made)]
        for read in reads:
            if read.resumable:
                state[_key(read.path)] = {"end": read.parsed.end, "line": read.next_line, "tail": read.tail, "tools": tools}
        store.cache_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(_state_path(store), json.dumps(state, sort_keys=True, indent=1) + "\n")
    return result


def _warn_ahead(fresh: list[tuple[Turn, int]], reads: list[_Read]) -> None:
    """Name the new records dated more than AHEAD past now: they are imported as dated (the transcript is
    what the host wrote), but a wrong clock there makes them the newest episodes, and today's, until then."""
    limit = clock.now() + AHEAD
    ahead = [(turn, order) for turn, order in fresh if turn.ts > limit]
    if ahead:
        turn, order = ahead[-1]  # the furthest ahead
        warn(f"{len(ahead)} new record(s) dated more than a day after this machine's clock, up to "
             f"{turn.ts.isoformat(timespec='seconds')} ({reads[order].path}, line {turn.line}): imported as dated",
             hint="check the clock of the machine that wrote the transcript, and this one's")


def _key(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path)


# ---------------------------------------------------------------- the Claude Code hook


def hook_transcript(stdin_text: str) -> Path:
    """The transcript named by Claude Code's hook input (`transcript_path`)."""
    try:
        data = json.loads(stdin_text)
    except ValueError:
        raise BadInput("hook: stdin is not the JSON a Claude Code hook receives", arg="hook") from None
    path = data.get("transcript_path") if isinstance(data, dict) else None
    if not isinstance(path, str) or not path:
        raise BadInput("hook: the hook input has no transcript_path", arg="hook")
    found = Path(path).expanduser()
    cwd = data.get("cwd")  # a relative path is the session's, not the hook process's (which may run elsewhere)
    return found if found.is_absolute() or not isinstance(cwd, str) or not os.path.isabs(cwd) else Path(cwd) / found
