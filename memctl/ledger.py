"""Ledgers: append-only TSV files that grep, cut, sort and uniq keep working on.

The format (docs/FORMAT.md, "Ledgers"): one record per physical line, a TAB between
fields, LF at the end; inside a field `\\`, TAB, LF and CR are written `\\\\`,
`\\t`, `\\n` and `\\r`, and nothing else is escaped. The first line names the
columns, unless the ledger is a headerless legacy file whose columns are
declared in memctl.toml.

This module owns that format: escaping, parsing, finding a ledger, creating
one, appending whole lines with one write under the store lock, and reading
rows back (`read_rows` is what other layers call). The unique check works on
the file's bytes, never a dict per row: it has to stay near `grep -F` speed.
Whole-file analyses (dups, stats, check, verify, adopt) are in ledger_ops.py.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import sys
from collections import deque
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

from . import clock, errors
from . import config as config_mod
from .claude_memory import SIDECAR
from .config import LedgerDecl
from .errors import BadInput, NotFound, Refused
from .fsutil import ROW_LIMIT, TooBig, append_bytes, atomic_write, link_on_way, refuse_link, shown
from .markers import refuse_conflicts
from .store import Store, commit, commit_enabled, config_committable
from .tsv import escape, format_record, unescape  # noqa: F401  (part of this module's interface)

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$")  # not `-` first: `-x.tsv` is an option to grep and rm
COLUMN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
# A ledger line is a record, not a document: long text belongs in a fact file.
MAX_FIELD_BYTES = 64 * 1024
# The column `rows --since` filters on: the first of these a ledger has.
TIME_COLUMNS = ("ts", "date", "time", "timestamp")

# A backslash that does not start a valid escape: at the start of a run of
# backslashes, skip pairs (`\\`), then one more backslash not followed by t/n/r/\.
BAD_ESCAPE_RE = re.compile(rb"(?<!\\)(?:\\\\)*\\(?![\\tnr])")
_BAD_ESCAPE_TEXT_RE = re.compile(BAD_ESCAPE_RE.pattern.decode())


# ---------------------------------------------------------------- the format

def parse_record(line: str, columns: Sequence[str]) -> dict[str, str]:
    """The values of one line (without its LF); missing fields read as ""."""
    fields = line.split("\t")
    if len(fields) < len(columns):
        fields += [""] * (len(columns) - len(fields))
    if "\\" not in line:  # nothing escaped: the common case, twice as fast
        return dict(zip(columns, fields))
    return {c: unescape(f) for c, f in zip(columns, fields)}


def _bad_escape(field: str) -> str | None:
    """The first invalid escape in a field, as written, or None."""
    match = _BAD_ESCAPE_TEXT_RE.search(field)
    if match is None:
        return None
    after = field[match.end() : match.end() + 1]
    return "\\" + after if after else "\\ at the end of the field"


# ---------------------------------------------------------------- ledgers

# NamedTuples rather than dataclasses, to keep `ledger append` start-up small (see config.py).
class Ledger(NamedTuple):
    """A ledger resolved to its file: declared in memctl.toml, or found in ledgers/ with a header."""

    name: str
    path: Path
    columns: tuple[str, ...]
    header: bool = True
    unique: str | None = None
    declared: bool = True

    @property
    def header_line(self) -> str:
        return "\t".join(self.columns)


class Row(NamedTuple):
    lineno: int  # 1-based physical line in the file (the header is line 1)
    values: dict[str, str]  # unescaped, one per declared column


class Appended(NamedTuple):
    ledger: str
    path: Path
    count: int
    commit: str | None


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise BadInput(
            f"invalid ledger name {name!r}",
            hint="1-80 ASCII letters, digits, - or _, not - first (no /, no ..)",
        )
    return name


def check_columns(columns: Iterable[str], unique: str | None = None) -> tuple[str, ...]:
    cols = tuple(c.strip() for c in columns)
    if not cols:
        raise BadInput("a ledger needs at least one column")
    for col in cols:
        if not COLUMN_RE.match(col):
            raise BadInput(f"invalid column name {col!r}", hint="an ASCII letter or _, then ASCII letters, digits, - or _ (values may be in any language)")
    seen = {c for c in cols if cols.count(c) > 1}
    if seen:
        raise BadInput(f"column {sorted(seen)[0]!r} is named twice", hint="name each column once")
    if unique is not None and unique not in cols:
        raise BadInput(f"unique column {unique!r} is not one of the columns ({', '.join(cols)})",
                       hint="name one of the columns as the unique one, or add it to the columns")
    return cols


def resolve(store: Store, decl: LedgerDecl) -> Ledger:
    _check_declared_columns(decl)
    path = Path(os.path.normpath(store.ledgers_dir / decl.file))
    if not path.is_relative_to(store.root):
        raise BadInput(f"memctl.toml: ledger {decl.name!r} points outside the store ({decl.file})",
                       hint="a ledger is a file under ledgers/: fix its `file`")
    problem = not_a_ledger_file(store, path)
    if problem:  # a declaration pulled from a remote may aim at .git/config, a hook, .gitattributes...
        raise BadInput(f"memctl.toml: ledger {decl.name!r} points at {decl.file}, {problem}; nothing was read or written",
                       hint="a ledger is a data file of the store outside its dot folders: fix its `file` "
                            "(git log -p memctl.toml shows who set it)")
    return Ledger(decl.name, path, decl.columns, decl.header, decl.unique, declared=True)


def _check_declared_columns(decl: LedgerDecl) -> None:
    """A hand-written (or pulled) declaration's columns as the format needs them: `columns = ["a\tb"]` wrote
    a header of two fields, `["a", "a"]` each value twice.
    (A name `ledger create` would not make, `日付`, is still the hand's to choose.)"""
    where = f"memctl.toml: [ledgers.{decl.name}]"
    for column in decl.columns:
        if not column.strip() or column != column.strip() or any(c < " " or c == "\x7f" or c in "=" for c in column):
            raise BadInput(f"{where} invalid column name {column!r}", hint="a column name is one word: no TAB, newline, = or space at its ends")
    twice = sorted({c for c in decl.columns if decl.columns.count(c) > 1})
    if twice:
        raise BadInput(f"{where} column {twice[0]!r} is named twice", hint="name each column once")


def _check_unique(decl: LedgerDecl) -> None:
    """An unknown `unique` column: every append refuses (reading is unharmed); doctor names it."""
    if decl.unique is not None and decl.unique not in decl.columns:
        raise BadInput(f"memctl.toml: [ledgers.{decl.name}] unique column {decl.unique!r} is not one of the columns "
                       f"({', '.join(decl.columns)})", hint="name one of the columns, or drop `unique`")


LEDGER_SUFFIXES = (".tsv", ".txt", ".log", ".csv")  # data files (`ledger adopt` of a legacy log); never a script, a plist, a fact


def not_a_ledger_file(store: Store, path: Path) -> str | None:
    """Why `path` (inside the store) may not hold a ledger, or None: only a data file (.tsv, .txt, .log,
    .csv, in any case), in no folder or file whose name starts with a dot (.git/, .memctl/), and not
    memctl's sidecar."""
    rel = path.relative_to(store.root)
    if any(part.startswith(".") for part in rel.parts):
        return "inside a dot folder or file (.git/, .memctl/...), which no ledger is"
    if path.suffix.lower() not in LEDGER_SUFFIXES:
        return f"which is no data file ({', '.join(LEDGER_SUFFIXES)})"
    if path.name.casefold() == SIDECAR.casefold():
        return "memctl's own sidecar of facts"
    return None


def _rel(path: Path) -> str:
    """The ledger's path as the user would type it in the store (for repair commands)."""
    parts = path.parts
    return str(Path(*parts[parts.index("ledgers"):])) if "ledgers" in parts else str(path)


def require_header(ledger: Ledger, first: bytes) -> None:
    """A declared ledger with a header must start with it: otherwise its first record would be read as one."""
    if not ledger.header or not first:
        return
    if first.rstrip(b"\n") != ledger.header_line.encode("utf-8"):
        rel = _rel(ledger.path)
        shown = _short(first.rstrip(b"\n").decode("utf-8", "replace"))  # repr below: a TAB shows as \t
        printf = ledger.header_line.replace("\t", "\\t")
        raise Refused(
            f"{rel}:1: the header line of ledger {ledger.name!r} is missing or changed (line 1 is {shown!r}, the "
            f"header is {ledger.header_line!r}); nothing was read or written",
            hint=f"if the declared columns changed (`git log -p memctl.toml`: a sync or pull can bring that), put them "
                 f"back in memctl.toml; if line 1 is a record, put the header before it: printf '{printf}\\n' | cat - {rel} > "
                 f"{rel}.new && mv {rel}.new {rel}; if it is the header, changed: {{ printf '{printf}\\n'; tail -n +2 {rel}; }} > "
                 f"{rel}.new && mv {rel}.new {rel}",
        )


def refuse_torn_tail(ledger: Ledger, data: bytes | mmap.mmap, done: str = "nothing was appended") -> None:
    """A last line without LF is a cut-off record (or a hand edit): appending would seal it as a row,
    and readers leave it out (iter_rows), so `done` says what became of it."""
    if not data or data[-1:] == b"\n":
        return
    rel = _rel(ledger.path)
    end = data.rfind(b"\n") + 1
    line = data[:end].count(b"\n") + 1
    raise Refused(
        f"{rel}:{line}: the last line has no LF (a cut-off record?); {done}",
        hint=f"if that line is cut off: truncate -s {end} {rel}; if it is a whole record: printf '\\n' >> {rel}",
    )


def check_tail(ledger: Ledger) -> None:
    """Refused when the ledger's last line has no LF: for a reader to report the line it left out."""
    if not ledger.path.is_file() or ledger.path.stat().st_size == 0:
        return
    with open(ledger.path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        refuse_torn_tail(ledger, handle.read(), done="that line was left out")


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.readline(64 * 1024).rstrip(b"\n")


def _from_header(name: str, path: Path) -> Ledger | None:
    """An undeclared ledgers/<name>.tsv whose first line is a valid header."""
    try:
        columns = _first_line(path).decode("utf-8").split("\t")
    except (OSError, UnicodeDecodeError):
        return None
    if not all(COLUMN_RE.match(c) for c in columns) or len(set(columns)) != len(columns):
        return None
    return Ledger(name, path, tuple(columns), header=True, unique=None, declared=False)


def declarations(store: Store) -> dict[str, LedgerDecl]:
    # Re-read memctl.toml: another command (or process) may have declared a
    # ledger since this Store was loaded.
    return config_mod.load(store.config_path).ledgers if store.config_path.exists() else {}


def open_ledger(store: Store, name: str) -> Ledger:
    """The ledger called `name`: declared in memctl.toml, else ledgers/<name>.tsv with a header."""
    check_name(name)
    decl = store.config.ledgers.get(name) or declarations(store).get(name)
    if decl is not None:
        found = resolve(store, decl)
        refuse_link(store.root, found.path)
        return found
    path = store.ledgers_dir / f"{name}.tsv"
    refuse_link(store.root, path)
    if path.is_file():
        found = _from_header(name, path)
        if found is None:
            raise NotFound(
                f"{store.rel(path)} has no header line and is not declared",
                hint="adopt it, naming its columns", kind="adopt-ledger", path=store.rel(path),
            )
        return found
    if name in OWN:
        raise NotFound(f"no ledger named {name!r} yet", hint=f"it is memctl's own, made by {OWN[name]} with its columns",
                       kind="own-ledger-missing", name=name)
    raise NotFound(f"no ledger named {name!r}", hint="create it with its columns", kind="no-ledger", name=name)


# memctl's own ledgers, and what makes each (with its columns): `ledger create episodes --columns a,b,c`
# made every `episode add` fail after it, and an `access` of two columns took five-field rows
OWN = {
    "episodes": "`memctl episode add`",
    "access": "recall and show (the access log)",
    "episode-tombstones": "`memctl forget --policies`",
    "distilled": "`memctl distill`",
    "procedure-outcomes": "`memctl procedure record`",
}


def refuse_own(name: str) -> None:
    """A ledger name memctl keeps for itself is not the user's to create or adopt."""
    if name in OWN:
        raise BadInput(f"ledger {name!r} is memctl's own, made by {OWN[name]} with its columns",
                       hint="pick another name for yours", kind="own-ledger")


def bad_declarations(store: Store) -> list[BadInput]:
    """The ledger declarations of memctl.toml that memctl will not follow (outside the store, into .git/...)."""
    problems = []
    for decl in declarations(store).values():
        try:
            resolve(store, decl)
            _check_unique(decl)
        except BadInput as exc:
            problems.append(exc)
    return problems


def list_ledgers(store: Store, *, quiet: bool = False) -> list[Ledger]:
    """Declared ledgers, then undeclared ledgers/*.tsv that have a header line. A declaration memctl will
    not follow (bad_declarations) is left out with a warning (`quiet`: without), not the end of every ledger."""
    found, refused = {}, set()
    for name, decl in declarations(store).items():
        try:
            found[name] = resolve(store, decl)
        except BadInput as exc:
            refused.add(name)  # nor ledgers/<name>.tsv in its place: not the ledger its commands write
            if not quiet:
                errors.warn(f"{exc.message.replace('; nothing was read or written', '')}: left out", hint=exc.hint)
    paths = {ledger.path for ledger in found.values()}
    if store.ledgers_dir.is_dir():
        for path in sorted(store.ledgers_dir.glob("*.tsv")):
            if path in paths or path.stem in found or path.stem in refused or not NAME_RE.match(path.stem) \
                    or link_on_way(store.root, path):
                continue
            ledger = _from_header(path.stem, path)
            if ledger is not None:
                found[path.stem] = ledger
    return [found[name] for name in sorted(found)]


def create(store: Store, name: str, columns: Iterable[str], *, unique: str | None = None,
           commit_changes: bool = True, own: bool = False, records: Sequence[Mapping[str, Any]] = ()) -> Ledger:
    """A new ledgers/<name>.tsv holding its header, declared in memctl.toml (`own`: one of memctl's
    own ledgers, made by the command that writes it). `records` (validated, not scrubbed: the caller's)
    are its first lines, written and committed with it: a failure leaves neither the ledger nor them."""
    check_name(name)
    if not own:
        refuse_own(name)
    cols = check_columns(columns, unique)
    decl = LedgerDecl(name=name, file=f"{name}.tsv", columns=cols, header=True, unique=unique)
    path = store.ledgers_dir / decl.file
    rows = b"".join(b"\t".join(fields) + b"\n" for fields in encode_records(resolve(store, decl), records)) if records else b""
    with store.lock(commits=commit_changes):
        if name in declarations(store):
            raise Refused(f"ledger {name!r} is already declared in memctl.toml", kind="ledger-declared", name=name,
                          hint="the ledgers and their files are listed by memctl ledger list; pick another name for a new one")
        if path.exists():
            raise Refused(f"{store.rel(path)} already exists", hint="adopt it instead, naming its columns", kind="adopt-ledger",
                          path=store.rel(path))
        with_config = config_committable(store, commit_changes, f"the declaration of ledger {name!r}")
        atomic_write(path, (format_record(cols) + "\n").encode("utf-8") + rows)
        config_mod.add_ledger_decl(store.config_path, decl)
        message = f"ledger: create {name}" + (f" (+{len(records)})" if records else "")
        commit(store, [path, store.config_path] if with_config else [path], message, enabled=commit_changes)
    return resolve(store, decl)


# ---------------------------------------------------------------- input

def parse_assignments(items: Iterable[str]) -> list[tuple[str, str]]:
    """`col=value` words as (column, value) pairs; the value is taken as is (not escaped)."""
    pairs = []
    for item in items:
        column, sep, value = item.partition("=")
        if not sep or not column:
            raise BadInput(f"expected column=value, got {item!r}", hint="give each value with its column: date=2026-12-05 note=...")
        pairs.append((column, value))
    return pairs


def record_from_assignments(items: Iterable[str]) -> dict[str, str]:
    record: dict[str, str] = {}
    for column, value in parse_assignments(items):
        if column in record:
            raise BadInput(f"column {column!r} is given twice", hint="give each column one value")
        record[column] = value
    return record


def _decode_input(data: bytes, source: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(f"{source}:{line}: not valid UTF-8; nothing was appended") from None
    if text.startswith("\ufeff"):  # it would be stored in the first field, where --where and grep never match it
        raise BadInput(f"{source}:1: starts with a byte-order mark (U+FEFF); nothing was appended",
                       hint="save the input as UTF-8 without a BOM (spreadsheet exports often add one)")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        raise BadInput(f"no records on {source}")
    return lines


def parse_tsv(data: bytes, columns: Sequence[str], source: str = "stdin") -> list[dict[str, str]]:
    """Records written as ledger lines: fields in column order, escaped as in the file, no header."""
    records = []
    for lineno, line in enumerate(_decode_input(data, source), 1):
        if "\r" in line:
            raise BadInput(f"{source}:{lineno}: raw CR in a record", hint="write CR as \\r; no CRLF line ends")
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise BadInput(
                f"{source}:{lineno}: {len(fields)} field{'s' if len(fields) > 1 else ''}, expected {len(columns)} ({', '.join(columns)})",
                hint="one record per line, fields separated by TAB in declared column order",
            )
        for field in fields:
            bad = _bad_escape(field)
            if bad:
                raise BadInput(f"{source}:{lineno}: invalid escape {bad!r}", hint="only \\\\ \\t \\n \\r are escapes")
        records.append(dict(zip(columns, map(unescape, fields))))
    return records


def parse_ndjson(data: bytes, source: str = "stdin") -> list[dict[str, str]]:
    """Records as one JSON object a line: {"column": "value", ...}."""
    import json  # noqa: PLC0415

    def not_json(constant: str):
        raise BadInput(f"{source}:{lineno}: {constant} is not JSON", hint="send a number or a string")

    records = []
    for lineno, line in enumerate(_decode_input(data, source), 1):
        if not line.strip():
            continue  # a blank line (a heredoc's or an editor's last one) holds no record
        try:  # a number is stored as it was written (`100.0` stays 100.0, `1e2` stays 1e2): its own text
            obj = json.loads(line, parse_int=str, parse_float=str, parse_constant=not_json)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{source}:{lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise BadInput(f"{source}:{lineno}: expected a JSON object")
        record = {}
        for key, value in obj.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise BadInput(f"{source}:{lineno}: column {key!r} must be a string or a number")
            record[key] = value
        records.append(record)
    return records


def scrub_records(records: Sequence[Mapping[str, Any]], where: str, secrets: bool = True) -> list[Mapping[str, Any]]:
    """`records` with the private spans in their text values hidden and, unless not `secrets`, the
    secrets redacted (secrets.scrub warns)."""
    from .secrets import scrub

    texts = [(i, key, value) for i, record in enumerate(records) for key, value in record.items() if isinstance(value, str)]
    cleaned = scrub([value for _, _, value in texts], where, secrets=secrets)
    if all(new is old for new, (_, _, old) in zip(cleaned, texts)):
        return list(records)
    out = [dict(record) for record in records]
    for (i, key, _), value in zip(texts, cleaned):
        out[i][key] = value
    return out


def encode_records(ledger: Ledger, records: Sequence[Mapping[str, Any]]) -> list[list[bytes]]:
    """Validate every record, then return each one's escaped fields as UTF-8 bytes.

    Raises BadInput on the first problem, before anything is written.
    """
    if not records:
        raise BadInput("no records to append")
    columns = ledger.columns
    hint = f"columns of {ledger.name}: {', '.join(columns)}"
    encoded = []
    for number, record in enumerate(records, 1):
        where = f"record {number}: " if len(records) > 1 else ""
        for key in record:
            if key not in columns:
                raise BadInput(f"{where}unknown column {key!r} in ledger {ledger.name!r}", hint=hint)
        fields = []
        for column in columns:
            if column not in record:
                raise BadInput(f"{where}missing column {column!r} for ledger {ledger.name!r}", hint=hint + " (give col= for an empty value)")
            value = record[column]
            if not isinstance(value, str):
                raise BadInput(f"{where}column {column!r}: the value must be text, not {type(value).__name__}")
            if "\0" in value:
                raise BadInput(f"{where}column {column!r}: the value contains a NUL character", hint="remove it; ledgers hold text",
                               kind="nul")
            try:
                raw = escape(value).encode("utf-8")
            except UnicodeEncodeError:
                raise BadInput(f"{where}column {column!r}: the value is not valid UTF-8", hint="send the values as UTF-8") from None
            if len(raw) > MAX_FIELD_BYTES:
                raise BadInput(
                    f"{where}column {column!r}: the value is {len(raw)} bytes; the limit is {MAX_FIELD_BYTES}",
                    hint="keep long text in a fact file and put its name in the ledger",
                )
            fields.append(raw)
        row = sum(map(len, fields)) + len(fields)  # the TABs and the LF
        if row > ROW_LIMIT:
            raise BadInput(f"{where}the row is {row} bytes; a ledger line may be at most {shown(ROW_LIMIT)} (docs/FORMAT.md, Limits)",
                           hint="keep long text in a fact file and put its name in the ledger", kind="too-big")
        encoded.append(fields)
    return encoded


# ---------------------------------------------------------------- append

def _body_start(data: bytes, header: bool) -> int:
    """Where the records begin: after the header line when there is one."""
    if not header:
        return 0
    end = data.find(b"\n")
    return len(data) if end == -1 else end + 1


def _find_field(data: bytes | mmap.mmap, start: int, needle: bytes, column: int) -> int:
    """Offset of the first line at or after `start` whose field `column` is `needle`, or -1.

    `needle` is an escaped field, so it holds no raw TAB or LF: a hit bounded by
    TAB/LF (or the ends of the data) is a whole field, and the TABs before it on
    its line give its column. This is `grep -F` speed, without parsing rows.
    """
    if not needle:
        return _find_empty_field(data, start, column)
    size, width = len(data), len(needle)
    pos = data.find(needle, start)
    while pos != -1:
        end = pos + width
        if (pos == 0 or data[pos - 1] in (9, 10)) and (end == size or data[end] in (9, 10)):
            line_start = data.rfind(b"\n", 0, pos) + 1
            if data[line_start:pos].count(b"\t") == column:  # (mmap has no .count)
                return line_start
        pos = data.find(needle, pos + 1)
    return -1


def _find_empty_field(data: bytes | mmap.mmap, start: int, column: int) -> int:
    body = data[start:]  # bytes, from an mmap too
    lines = body.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the LF that ends the last record (or an empty body)
    offset = start
    for line in lines:
        fields = line.split(b"\t")
        if column < len(fields) and fields[column] == b"":
            return offset
        offset += len(line) + 1
    return -1


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refuse_duplicates(store: Store, ledger: Ledger, data: bytes | mmap.mmap, records: list[list[bytes]], column: str) -> None:
    index = ledger.columns.index(column)
    start = _body_start(data, ledger.header)
    seen: set[bytes] = set()
    # Many records (an import): one pass collecting the column beats one search of the file per record.
    present = _column_values(data, start, index) if len(records) > _SEARCH_PER_RECORD else None
    for fields in records:
        needle = fields[index]
        shown = _short(needle.decode("utf-8"))
        if needle in seen:
            raise Refused(f"{ledger.name}: {column} \"{shown}\" is given twice in the input; nothing was appended",
                          hint=f"give each {column} once (the rows of one input are appended together or not at all)")
        seen.add(needle)
        if present is not None and needle not in present:
            continue
        hit = _find_field(data, start, needle, index)
        if hit != -1:
            line = data[:hit].count(b"\n") + 1
            raise Refused(
                f"{ledger.name}: {column} \"{shown}\" already exists ({store.rel(ledger.path)}:{line}); nothing was appended",
                hint=f"{column} is unique in this ledger",
            )


_SEARCH_PER_RECORD = 32


def _column_values(data: bytes | mmap.mmap, start: int, column: int) -> set[bytes]:
    values = set()
    for line in data[start:].split(b"\n"):
        fields = line.split(b"\t", column + 1)
        if column < len(fields):
            values.add(fields[column])
    return values


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes without copying them: `find` runs over the page cache, like grep."""
    if not path.exists() or path.stat().st_size == 0:
        yield b""
        return
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data


def append(store: Store, name: str, records: Sequence[Mapping[str, Any]], *, unique: str | None = None,
           commit_changes: bool = True, lock: bool = True, allow_secrets: bool = False, by_user: bool = False) -> Appended:
    """Append records with one write under the store lock, then one commit.

    Every record is validated first; `unique` (or the ledger's declared unique
    column) refuses a record whose value is already in that column, compared
    as an exact string. Either all records are appended or none. `lock=False`
    is for a caller that holds the store lock already (it is not reentrant).
    Secrets in the values are redacted, with a warning, unless `allow_secrets`; `<private>` text is
    always hidden. `by_user`: an append a user or an agent asked for (`ledger append`, MCP, the Python
    API), which memctl's own logs other than episodes do not take (a forged use in the access log).
    """
    if by_user and name in OWN and name != "episodes":  # (episodes: checked as `episode add` checks them, below)
        raise BadInput(f"ledger {name!r} is memctl's own, written by {OWN[name]}; nothing was appended",
                       hint="append to a ledger of yours (create one first)", kind="own-ledger-append")
    ledger = open_ledger(store, name)
    records = scrub_records(records, f"ledger append {name}", secrets=not allow_secrets)  # <private> text: always
    encoded = encode_records(ledger, records)
    if ledger.name == "episodes":  # what every reader of episodes takes for granted (episode add's checks)
        from .episodes import check_records  # noqa: PLC0415

        check_records(store, records)
    column = unique or ledger.unique
    if column is not None and column not in ledger.columns:
        raise BadInput(f"unique column {column!r} is not a column of {ledger.name} ({', '.join(ledger.columns)})")
    payload = b"".join(b"\t".join(fields) + b"\n" for fields in encoded)
    with store.lock(commits=commit_changes) if lock else contextlib.nullcontext():
        with _mapped(ledger.path) as data:
            refuse_torn_tail(ledger, data)
            if data.find(b"<<<<<<<") != -1:  # one scan at grep speed: a conflict always opens with this line
                refuse_conflicts(bytes(data), _rel(ledger.path))
            require_header(ledger, data[:data.find(b"\n") + 1] if data.find(b"\n") != -1 else data[:])
            if column is not None:
                _refuse_duplicates(store, ledger, data, encoded, column)
            if commit_changes and commit_enabled(store):  # an old line edited by hand must not ride along
                _refuse_rewritten(store, ledger, data)
            last = data[-1:]
        if not last and ledger.header:
            payload = (ledger.header_line + "\n").encode("utf-8") + payload
        ledger.path.parent.mkdir(parents=True, exist_ok=True)
        append_bytes(ledger.path, payload)
        message = f"ledger: append {ledger.name} (+{len(encoded)})"
        sha = commit(store, [ledger.path], message, enabled=commit_changes)
    return Appended(ledger.name, ledger.path, len(encoded), sha)


def _refuse_rewritten(store: Store, ledger: Ledger, data) -> None:
    from .errors import GitError

    try:
        refuse_rewritten(store, ledger, data, "nothing was appended")
    except GitError:
        pass  # no git to read HEAD from: the commit says so, and the append is undone (store.commit)


def refuse_rewritten(store: Store, ledger: Ledger, working, outcome: str) -> bytes:
    """The ledger's committed bytes; Refused when `working` (bytes, or a map of the file) is not them plus
    new lines: an edit of an old line must never ride along with a commit named "append"."""
    from . import gitstore  # noqa: PLC0415  (not on the path of --no-commit appends)

    committed = gitstore.file_at(store.root, ledger.path, "HEAD")
    if working[:len(committed)] != committed:
        rel = store.rel(ledger.path)
        raise Refused(f"{rel}: line {first_difference(committed, working)} of the committed version was rewritten "
                      f"or removed; {outcome}", hint=f"look at `git diff -- {rel}`: a ledger is only appended to",
                      kind="ledger-rewritten")
    return committed


def line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix, comparing in blocks (a ledger can be megabytes long)."""
    limit = min(len(a), len(b))
    same = 0
    step = 65536
    while same < limit:
        end = min(same + step, limit)
        if a[same:end] == b[same:end]:
            same = end
        elif step > 1:
            step //= 16
        else:
            break
    return same


def first_difference(old: bytes, new: bytes) -> int:
    """The 1-based line of `old` where `new` stops being an extension of it."""
    return line_of(old, common_prefix(old, new))


# ---------------------------------------------------------------- reading

def iter_rows(ledger: Ledger) -> Iterator[Row]:
    """Stream a ledger's records (the header skipped); invalid UTF-8 reads as U+FFFD.
    A last line without LF is left out: see check_tail."""
    if not ledger.path.exists():
        return
    columns = ledger.columns
    with open(ledger.path, "rb") as handle:
        for lineno, raw in lines(handle, _rel(ledger.path)):
            if lineno == 1 and ledger.header:
                require_header(ledger, raw)
                continue
            if not raw.endswith(b"\n"):
                return  # a last line without LF is a cut-off record, not a row (check_tail names it)
            yield Row(lineno, parse_record(raw[:-1].decode("utf-8", "replace"), columns))


def last_rows(ledger: Ledger, n: int) -> list[Row]:
    """The last `n` records, as list(iter_rows(ledger))[-n:] gives them, read from the end of the file:
    `--tail` on a year's ledger parsed every one of its lines first (3 s for 150,000 rows). Only the
    file's newlines are counted (for the line numbers), at C speed; a line over the limit above the
    last `n` is not looked at (doctor names it). Plain reads, no mmap: a file cut short meanwhile (an
    append undone) would kill a mapped reader with SIGBUS; here it is read again, whole."""
    if not ledger.path.exists():
        return []
    with open(ledger.path, "rb") as handle:
        if ledger.header:
            require_header(ledger, handle.readline(ROW_LIMIT + 1))
        if n <= 0:
            return []
        ends = _last_lines(handle.fileno(), n)
    if ends is None:  # (cut short while read)
        everything = list(iter_rows(ledger))
        return everything[len(everything) - min(n, len(everything)):]
    last, found = ends
    rows = []
    for number, raw in enumerate(found, last - len(found) + 1):
        if number == 1 and ledger.header:
            continue
        if len(raw) + 1 > ROW_LIMIT:
            raise _too_long(f"{_rel(ledger.path)}:{number}")
        rows.append(Row(number, parse_record(raw.decode("utf-8", "replace"), ledger.columns)))
    return rows


def _last_lines(fd: int, n: int) -> tuple[int, list[bytes]] | None:
    """(the number of the last line that ends with LF, the last `n` such lines without their LF), read
    backwards in growing blocks; None when the file got shorter while it was read."""
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    base, block, breaks = size, 1 << 16, 0
    while base > 0 and breaks <= n:
        start = max(0, base - block)
        chunk = os.pread(fd, base - start, start)
        if len(chunk) != base - start:
            return None
        chunks.append(chunk)
        breaks += chunk.count(b"\n")
        base, block = start, min(block * 2, 1 << 23)
    data = b"".join(reversed(chunks))
    data = data[: data.rfind(b"\n") + 1]  # a last line without LF is no row (check_tail names it)
    found = data.split(b"\n")[:-1]
    if base > 0:
        found = found[1:]  # (the end of a line that starts before `base`)
    before = 0
    for at in range(0, base, 1 << 20):  # the lines above what was read
        chunk = os.pread(fd, min(1 << 20, base - at), at)
        if len(chunk) != min(1 << 20, base - at):
            return None
        before += chunk.count(b"\n")
    last = before + data.count(b"\n")
    return last, found[len(found) - min(n, len(found)):]


def lines(handle, name: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line with its LF) of a ledger file open for reading; a line over ROW_LIMIT is
    refused (fsutil.TooBig, naming `name`:line) after reading no more than the limit of it."""
    for lineno, raw in enumerate(iter(partial(handle.readline, ROW_LIMIT + 1), b""), 1):
        if len(raw) > ROW_LIMIT:
            raise _too_long(f"{name}:{lineno}")
        yield lineno, raw


def _too_long(where: str) -> TooBig:
    """The refusal of the ledger line at `where` (FILE:LINE), over ROW_LIMIT."""
    reason = f"a line of more than {shown(ROW_LIMIT)}, the limit for a ledger line (docs/FORMAT.md, Limits), so memctl does not read it"
    return TooBig(f"{where} is {reason}", hint="cut the line short, or move it out of the ledger", kind="too-big",
                  name=where, reason=reason)


def read_rows(store: Store, name: str) -> Iterator[Row]:
    """Every record of ledger `name`, in file order, values unescaped."""
    return iter_rows(open_ledger(store, name))


def time_column(ledger: Ledger) -> str | None:
    return next((c for c in TIME_COLUMNS if c in ledger.columns), None)


def _as_time(value: str) -> datetime | None:
    try:
        return clock.parse_date(value)
    except ValueError:
        return None


def select_rows(store: Store, name: str, *, where: Sequence[tuple[str, str]] = (),
                since: str | datetime | None = None, tail: int | None = None) -> tuple[Ledger, list[Row]]:
    """Records whose columns equal every `where` value, at or after `since`, the last `tail` of them."""
    ledger = open_ledger(store, name)
    for column, _ in where:
        if column not in ledger.columns:
            raise BadInput(f"unknown column {column!r} in ledger {ledger.name!r}", hint=f"columns: {', '.join(ledger.columns)}")
    if tail is not None and tail < 0:
        raise BadInput("tail must be 0 or more", arg="tail")
    when = None
    tcol = None
    if since is not None:
        tcol = time_column(ledger)
        if tcol is None:
            raise BadInput(f"ledger {ledger.name!r} has no time column for since", hint=f"one of: {', '.join(TIME_COLUMNS)}",
                           arg="since")
        try:
            when = since if isinstance(since, datetime) else clock.parse_date(since)
        except ValueError:
            raise BadInput(f"since {since!r} is not an ISO date or timestamp", hint=clock.DATE_HINT, arg="since") from None
    if tail is not None and not where and when is None:
        return ledger, last_rows(ledger, tail)
    kept: deque[Row] | list[Row] = deque(maxlen=min(tail, sys.maxsize)) if tail is not None else []  # (a 20-digit N overflowed)
    unread, first_unread = 0, None  # (a count, not the rows: a ledger of such dates may be long)
    for row in iter_rows(ledger):
        if any(row.values[c] != v for c, v in where):
            continue
        if when is not None:
            stamp = _as_time(row.values[tcol])  # type: ignore[index]
            if stamp is None:
                unread += 1
                first_unread = first_unread or row
                continue
            if stamp < when:
                continue
        kept.append(row)
    if first_unread is not None:  # (`2027/01/06`, `Jan 9 2027`: no time to compare, so not "since"; said, not dropped without a word)
        from .errors import warn  # noqa: PLC0415

        warn(f"{_rel(ledger.path)}: {unread} row{'s' if unread > 1 else ''} left out: {tcol} is no ISO date "
             f"or timestamp (line {first_unread.lineno}: {first_unread.values[tcol]!r})",
             hint=f"write {tcol} as YYYY-MM-DD or YYYY-MM-DDTHH:MM (ISO 8601)")
    return ledger, list(kept)
