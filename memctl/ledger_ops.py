"""Whole-ledger operations: counting values, checking the bytes, verifying the history.

`dups` and `stats` are `cut -fN | sort | uniq -d` / `uniq -c`; `check` reads a
ledger line by line for field counts, escapes and UTF-8; `verify` proves from
git that the file was only ever appended to. `adopt` lives here because
declaring an existing file is a check and a dups count, then a declaration.
The format itself, appending and reading rows are in ledger.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Iterable, NamedTuple

from . import config as config_mod
from .config import SETTINGS_LIMIT, LedgerDecl
from .errors import BadInput, GitError, NotFound, Refused
from .fsutil import ROW_LIMIT, link_message, link_on_way, shown as shown_limit
from .markers import conflict_lines
from .ledger import (
    BAD_ESCAPE_RE,
    NAME_RE,
    Ledger,
    bad_declarations,
    common_prefix,
    first_difference,
    refuse_own,
    line_of,
    refuse_rewritten,
    check_columns,
    check_name,
    declarations,
    format_record,
    list_ledgers,
    not_a_ledger_file,
    open_ledger,
    unescape,
)
from .store import Store, commit, config_committable, will_commit

# `check` on a file that is wrong everywhere should not print a million lines.
MAX_PROBLEMS = 100


class ValueCount(NamedTuple):
    # A NamedTuple, not a dataclass: `stats` builds one per distinct value,
    # which can be a million, and a frozen dataclass costs 5x more to build.
    field: str  # as written in the file (escaped): what `cut -f` prints
    count: int

    @property
    def value(self) -> str:
        return unescape(self.field)

    def to_dict(self) -> dict:
        return {"value": self.value, "count": self.count}


@dataclass(frozen=True)
class Adopted:
    ledger: Ledger
    rows: int
    duplicates: int  # values of the unique column that already repeat
    commit: str | None
    header_like: str | None = None  # line 1, read as a record, when it reads as a header (no digit; line 2 has some)


@dataclass(frozen=True)
class Verification:
    ledger: str
    path: str
    commits: int  # commits that touched the file and were checked
    ok: bool
    commit: str | None = None  # the first commit that rewrote history; None with ok, or the working file
    subject: str | None = None
    line: int | None = None  # first line of the earlier version that was changed or lost
    message: str = ""


def _refuse_secret(data: bytes, rel: str) -> None:
    """Adopting commits the file as it is, and sync pushes it: one that holds a secret is refused."""
    from . import secrets

    found = secrets.first_secret(data.decode("utf-8", errors="replace").split("\n"), "ledger adopt")
    if found is not None:
        line, kinds = found
        raise Refused(f"{rel}:{line + 1} holds what looks like a secret ({', '.join(kinds)}); nothing was declared",
                      hint="take it out of the file (adopting commits the file as it is, and sync pushes it), or adopt it "
                      "as it is with allow_secrets", kind="secret-in-file", file=rel, line=line + 1)


def adopt(store: Store, file: str | os.PathLike, columns: Iterable[str], *, unique: str | None = None,
          name: str | None = None, commit_changes: bool = True, allow_secrets: bool = False) -> Adopted:
    """Declare the columns of an existing (usually headerless) file; its bytes are not touched.

    A relative `file` is taken from the store root. The file must lie inside the
    store; its name (without .tsv) is the ledger's name unless `name` is given.
    A file holding what looks like a secret is refused (it would be committed and pushed as it is)
    unless `allow_secrets`.
    """
    path = Path(file)
    path = Path(os.path.normpath(path if path.is_absolute() else store.root / path))
    if not path.is_file():
        raise NotFound(f"no such file: {file}", hint="check the path (relative to the current folder)")
    if not path.is_relative_to(store.root):
        raise BadInput(f"{file} is outside the store ({store.root})", hint="copy it into ledgers/ first")
    link = link_on_way(store.root, path)
    if link is not None:
        raise BadInput(link_message(store.root, link), hint="copy the file into ledgers/ instead", kind="link")
    problem = not_a_ledger_file(store, path)
    if problem:
        raise BadInput(f"{file} is {problem.removeprefix('which is ')}", hint="a ledger is a data file of the store "
                       "outside its dot folders (.tsv, .txt, .log, .csv): copy the records into ledgers/NAME.tsv")
    name = check_name(name or path.stem)
    refuse_own(name)
    cols = check_columns(columns, unique)
    data = path.read_bytes()
    if (export := spreadsheet_export(data)) is not None:
        raise Refused(f"{file} is {export}, not a ledger file as it is; nothing was declared",
                      hint=f"convert it first: {CONVERT.format(file=shlex.quote(str(file)))}", kind="spreadsheet-export")
    header = data.split(b"\n", 1)[0] == format_record(cols).encode("utf-8")
    ledger = Ledger(name, path, cols, header, unique, declared=True)
    errors = [p for p in _scan(data, store.rel(path), ledger) if p.severity == "error"]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise Refused(f"{first}{more}", hint="check the columns; nothing was declared", kind="check-columns")
    if not allow_secrets:
        _refuse_secret(data, store.rel(path))
    duplicates = sum(1 for c in _column_counts(data, ledger, unique).values() if c > 1) if unique else 0
    decl = LedgerDecl(name=name, file=os.path.relpath(path, store.ledgers_dir), columns=cols,
                      header=header, unique=unique)
    with store.lock(commits=commit_changes):
        if name in declarations(store):
            raise Refused(f"ledger {name!r} is already declared in memctl.toml", kind="ledger-declared", name=name,
                          hint="the ledgers and their files are listed by memctl ledger list; pick another name for a new one")
        with_config = config_committable(store, commit_changes, f"the declaration of ledger {name!r}")
        config_mod.add_ledger_decl(store.config_path, decl)
        paths = [store.config_path, path] if with_config else [path]
        sha = commit(store, paths, f"ledger: adopt {name}", enabled=commit_changes)
    rows = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1) - (1 if header else 0)
    return Adopted(ledger, rows, duplicates, sha, None if header else _header_like(data))


def _header_like(data: bytes) -> str | None:
    """Line 1 when it reads as a header though it is not the declared columns (a spreadsheet's `日付<TAB>テーマ`):
    no digit in it, where line 2 has one. Read as a record, it would be a row of data (and a unique value)."""
    lines = data.split(b"\n", 2)
    if len(lines) < 2 or not lines[1].strip():
        return None
    digits = re.compile(rb"[0-9]")
    return lines[0].decode("utf-8", "replace") if not digits.search(lines[0]) and digits.search(lines[1]) else None


def _lines(data: bytes, header: bool) -> list[bytes]:
    """The record lines; a last line without LF is left out, as every reader leaves it out (a record
    cut off mid-write is no record: rows, list, stats and dups agree)."""
    lines = data.split(b"\n")
    lines.pop()  # after the LF that ends the last record: b""; else a torn last line
    if header and lines:
        del lines[0]
    return lines


def _column_counts(data: bytes, ledger: Ledger, column: str) -> Counter[bytes]:
    """How often each field of `column` occurs: `cut -fN | sort | uniq -c` without the sort."""
    index = ledger.columns.index(column)
    lines = _lines(data, ledger.header)
    try:
        # map() over C methods keeps the per-line work out of the interpreter loop.
        if index == 0:
            return Counter(map(itemgetter(0), map(bytes.partition, lines, repeat(b"\t"))))
        return Counter(map(itemgetter(index), map(bytes.split, lines, repeat(b"\t"), repeat(index + 1))))
    except IndexError:
        # Some line is short of fields (`check` reports it): its field reads as "".
        counts: Counter[bytes] = Counter()
        for line in lines:
            fields = line.split(b"\t", index + 1)
            counts[fields[index] if index < len(fields) else b""] += 1
        return counts


def _counts(store: Store, name: str, column: str, minimum: int) -> list[ValueCount]:
    ledger = open_ledger(store, name)
    if column not in ledger.columns:
        raise BadInput(f"unknown column {column!r} in ledger {ledger.name!r}", hint=f"columns: {', '.join(ledger.columns)}")
    data = ledger.path.read_bytes() if ledger.path.exists() else b""
    counts = _column_counts(data, ledger, column)
    # Byte order, which is `sort` in the C and C.UTF-8 locales. Filter before
    # sorting, sort bare keys (not pairs), decode them all in one call.
    keys = sorted(counts if minimum <= 1 else (k for k, n in counts.items() if n >= minimum))
    if not keys:
        return []
    texts = b"\n".join(keys).decode("utf-8", "replace").split("\n")  # a field never holds a raw LF
    # tuple.__new__ builds each ValueCount in C (what NamedTuple._make does), not in a Python frame.
    return list(map(tuple.__new__, repeat(ValueCount), zip(texts, map(counts.__getitem__, keys))))


def stats(store: Store, name: str, column: str) -> list[ValueCount]:
    """Each value of `column` with its count, in byte order (`cut -fN | LC_ALL=C sort | uniq -c`)."""
    return _counts(store, name, column, 1)


def dups(store: Store, name: str, column: str) -> list[ValueCount]:
    """Values of `column` that occur more than once (`cut -fN | LC_ALL=C sort | uniq -d`)."""
    return _counts(store, name, column, 2)


def count_rows(ledger: Ledger) -> int:
    if not ledger.path.exists():
        return 0
    data = ledger.path.read_bytes()
    return len(_lines(data, ledger.header))


# ---------------------------------------------------------------- check


def _problem(path: str, line: int, code: str, message: str, severity: str = "error"):
    # facts.Problem is what doctor collects; imported here, not at the top,
    # because facts pulls in YAML and the fact layer, which `append` never needs.
    from .facts import Problem  # noqa: PLC0415

    return Problem(path, line, code, message, severity)


def _scan(data: bytes, rel: str, ledger: Ledger) -> list:
    """Every problem in a ledger's bytes, by line: fields, escapes, UTF-8, CR, NUL, the header."""
    problems = []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    elif data:
        end = data.rfind(b"\n") + 1
        problems.append(_problem(rel, len(lines), "no-final-newline",
                                 f"the last line has no LF: a cut-off record? appends refuse until it is repaired "
                                 f"(truncate -s {end} {rel}, or printf '\\n' >> {rel} if the line is whole)"))
    expected = len(ledger.columns)
    first = 0
    if ledger.header:
        first = 1
        header = lines[0] if lines else b""
        if header != ledger.header_line.encode("utf-8"):
            shown = header.decode("utf-8", "replace").replace("\t", ",")
            problems.append(_problem(rel, 1, "bad-header", f"header is {shown!r}, declared columns are {','.join(ledger.columns)!r}"))
    counts = list(map(bytes.count, lines, repeat(b"\t")))
    markers = set(conflict_lines(data))
    if set(counts[first:]) - {expected - 1}:
        for number in range(first, len(lines)):
            if counts[number] != expected - 1 and number + 1 not in markers:  # a marker is named as one, below
                fields = counts[number] + 1
                problems.append(_problem(rel, number + 1, "field-count",
                                         f"{fields} field{'s' if fields > 1 else ''}, expected {expected}"))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        for number, line in enumerate(lines, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(_problem(rel, number, "bad-utf8", f"invalid UTF-8 at byte {exc.start + 1} of the line"))
    if b"\\" in data:
        for match in BAD_ESCAPE_RE.finditer(data):
            number = data.count(b"\n", 0, match.start()) + 1
            nxt = data[match.end() : match.end() + 1]
            what = "a backslash at the end of a field" if nxt in (b"", b"\n", b"\t") else f"invalid escape '\\{nxt.decode('utf-8', 'replace')}'"
            problems.append(_problem(rel, number, "bad-escape", what + " (only \\\\ \\t \\n \\r)"))
    # A NUL in the access log is an old query's (it is refused now: docs/FORMAT.md, Limits); nothing reads it as a record.
    nul = ("a NUL byte (from a query an older memctl logged; harmless)", "warning") if ledger.name == "access" else ("a NUL byte", "error")
    for byte, code, (what, severity) in ((b"\r", "raw-cr", ("a raw CR (write it as \\r; CRLF line ends?)", "error")), (b"\0", "nul", nul)):
        if byte in data:
            for number, line in enumerate(lines, 1):
                if byte in line:
                    problems.append(_problem(rel, number, code, what, severity))
    if lines and max(map(len, lines)) >= ROW_LIMIT:
        problems += [_problem(rel, number, "too-big", f"a line of more than {shown_limit(ROW_LIMIT)}, the limit for a ledger line "
                              "(docs/FORMAT.md, Limits): readers refuse the ledger") for number, line in enumerate(lines, 1) if len(line) >= ROW_LIMIT]
    for number in sorted(markers):
        problems.append(_problem(rel, number, "conflict-marker", "an unresolved merge conflict marker (appends refuse until it is resolved)"))
    problems.sort(key=lambda p: p.line)
    if len(problems) > MAX_PROBLEMS:
        extra = len(problems) - MAX_PROBLEMS
        problems = problems[:MAX_PROBLEMS] + [_problem(rel, 0, "more-problems", f"... and {extra} more problems")]
    return problems


def check_ledger(store: Store, ledger: Ledger) -> list:
    rel = store.rel(ledger.path)
    if link_on_way(store.root, ledger.path) is not None:
        return []  # doctor names every link in the store (doctor.link_problems)
    if not ledger.path.exists():
        return [_problem(rel, 0, "missing-file", f"ledger {ledger.name!r} is declared but its file does not exist", "warning")]
    return _scan(ledger.path.read_bytes(), rel, ledger)


def appended_damage(ledger: Ledger | None, before: bytes, after: bytes, rel: str) -> str | None:
    """`rel:LINE: what` for the first damaged line `after` appends to `before` (fields, escapes, UTF-8, CR,
    NUL, the size limit, a conflict marker: what `ledger check` names), or None. `ledger`: the ledger's
    declaration here (None: the columns are read from its header line, when it has one)."""
    if not after.startswith(before) or len(after) == len(before):
        return None
    start = before.count(b"\n") + (0 if before.endswith(b"\n") or not before else 1)
    if ledger is None or not before:  # a new file: its own header says its columns (two declarations are the merge's)
        header = after.split(b"\n", 1)[0].decode("utf-8", "replace").split("\t")
        ledger = Ledger(rel, Path(rel), tuple(header), True, None)
    appended = after[len(before):]
    scanned = _scan(appended, rel, ledger._replace(header=False) if start else ledger)
    errors = [p for p in scanned if p.severity == "error"]
    if not errors:
        return None
    first = errors[0]
    what = "the last line has no LF (a cut-off record)" if first.code == "no-final-newline" else first.message
    return f"{rel}:{first.line + start}: {what}"


def refuse_damaged(store: Store, ledger: Ledger) -> None:
    """For a reader that has printed the rows: Refused when lines were damaged (fields missing or extra, invalid
    UTF-8, a conflict marker...), which it printed as best it could read them (`ledger check` lists each)."""
    damaged = [p for p in check_ledger(store, ledger) if p.severity == "error" and p.line]
    if damaged:
        lines = len({p.line for p in damaged})
        raise Refused(f"{store.rel(ledger.path)}: {lines} damaged line{'s' if lines > 1 else ''}, printed fitted to the columns "
                      f"(line {damaged[0].line}: {damaged[0].message})", hint=f"memctl ledger check {ledger.name} lists them")


def check(store: Store, name: str) -> list:
    """Problems of one ledger as facts.Problem (path, line, code, message, severity)."""
    return check_ledger(store, open_ledger(store, name))


CONVERT = "perl -pi -e 's/^\\xEF\\xBB\\xBF// if $. == 1; s/\\r$//' {file}"  # the mark, and each CRLF's CR (macOS too)


def spreadsheet_export(data: bytes) -> str | None:
    """What makes `data` a spreadsheet's export rather than a ledger (a UTF-8 byte-order mark, CRLF line
    ends), said as a reason; None when it has neither."""
    marks = [what for what, found in (("a byte-order mark", data.startswith(b"\xef\xbb\xbf")),
                                      ("CRLF line ends", b"\r\n" in data)) if found]
    return f"a spreadsheet's export ({' and '.join(marks)})" if marks else None


def check_all(store: Store) -> list:
    """`check` on every ledger, and a warning for each .tsv in ledgers/ memctl cannot read."""
    problems = [_problem("memctl.toml", 0, "bad-declaration", exc.message.replace("memctl.toml: ", "", 1) + (f" ({exc.hint})" if exc.hint else ""))
                for exc in bad_declarations(store)]
    ledgers = list_ledgers(store, quiet=True)
    known = {ledger.path for ledger in ledgers}
    for ledger in ledgers:
        problems.extend(check_ledger(store, ledger))
    if store.ledgers_dir.is_dir():
        for path in sorted(store.ledgers_dir.glob("*.tsv")):
            if path not in known and link_on_way(store.root, path) is None:
                rel = store.rel(path)
                if not NAME_RE.match(path.stem):  # テーマ.tsv: whatever its first line, no ledger is named so
                    problems.append(_problem(rel, 0, "undeclared-ledger", f"{path.stem!r} is not a ledger name (1-80 ASCII "
                                             "letters, digits, - or _, not - first), so memctl does not read it (memctl "
                                             f"ledger adopt {rel} --name NAME --columns ...)", "warning"))
                    continue
                with contextlib.suppress(OSError):
                    with open(path, "rb") as handle:
                        export = spreadsheet_export(handle.read(1 << 16))
                if export is not None:  # its header hides behind the mark, or ends in a CR
                    problems.append(_problem(rel, 1, "undeclared-ledger", f"{export}, so memctl does not read it: convert "
                                             f"it ({CONVERT.format(file=shlex.quote(str(path)))}), then commit it", "warning"))
                    continue
                problems.append(_problem(rel, 1, "undeclared-ledger", "no header line and not declared in memctl.toml "
                                         f"(memctl ledger adopt {rel} --columns ...)", "warning"))
    return problems


# ---------------------------------------------------------------- verify

def _lost_line(parent: bytes, merged: bytes) -> int | None:
    """For the other parent of a merge: the first of its lines the merge lost, or None.

    `merge=union` puts the other side's new lines after ours, so that parent's
    version is not a prefix; its lines past the shared prefix must all still be
    in the merged version, in order.
    """
    shared = parent.rfind(b"\n", 0, common_prefix(parent, merged)) + 1
    theirs = parent[shared:].split(b"\n")
    ours = iter(merged[shared:].split(b"\n"))
    for number, line in enumerate(theirs):
        if line not in ours:  # consumes `ours` up to the match: an in-order subsequence test
            return line_of(parent, shared) + number
    return None


def _was_ledger(store: Store, ledger, commit: str, data: bytes) -> bool:
    """Whether the file was a ledger at `commit` (its bytes there: `data`): a valid header line, or a
    declaration in memctl.toml then. A file adopted later (a BOM, CRLF, no header) was no ledger before."""
    import tomllib  # noqa: PLC0415

    from . import gitstore  # noqa: PLC0415
    from .ledger import COLUMN_RE  # noqa: PLC0415

    try:
        columns = data.split(b"\n", 1)[0].decode("utf-8").split("\t")
    except UnicodeDecodeError:
        columns = []
    if columns and all(COLUMN_RE.match(c) for c in columns) and len(set(columns)) == len(columns):
        return True
    try:
        top = gitstore.work_tree(store.root)
        size = gitstore.size_at(top, commit, Path(os.path.relpath(store.config_path, top)).as_posix())
        if size is not None and size > SETTINGS_LIMIT:  # (a pushed 400 MB one, reverted since)
            return True  # not read: judged as a ledger, the strict reading
        declared = tomllib.loads(gitstore.file_at(store.root, store.config_path, commit).decode("utf-8")).get("ledgers", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, GitError):
        return True  # (unreadable then: judged as a ledger, the strict reading)
    return isinstance(declared, dict) and isinstance(declared.get(ledger.name), dict)


def verify(store: Store, name: str) -> Verification:
    """Prove the ledger was only appended to, commit by commit, up to the working file.

    Each commit's version must extend its parent's version byte for byte; a
    merge must keep every line of each of its parents, in order (union merge).
    The working file must extend the last committed version.
    """
    from . import gitstore  # noqa: PLC0415  (git only when verifying)

    ledger = open_ledger(store, name)
    rel = store.rel(ledger.path)
    history = gitstore.file_history(store.root, ledger.path)
    for version in history:
        for position, parent in enumerate(version.parents):
            before = version.parent_data[position]
            if not _was_ledger(store, ledger, parent, before):
                continue  # not a ledger yet (no header, not declared): made one here, as `ledger adopt` does
            # A merge may put its parents' new lines in either order (the first parent may be the
            # side that was behind: docs/SYNC.md); it must keep every line of each parent, in order.
            if position == 0 and len(version.parents) == 1:
                if version.data.startswith(before):
                    continue
                line = first_difference(before, version.data)
            else:
                lost = _lost_line(before, version.data)
                if lost is None:
                    continue
                line = lost
            return Verification(
                ledger.name, rel, len(history), False, version.commit, version.subject, line,
                f"commit {version.commit[:10]} ({version.subject}) rewrote or removed line {line} "
                f"as committed in {parent[:10]}",
            )
    if history:
        last = gitstore.file_at(store.root, ledger.path, "HEAD")
        working = ledger.path.read_bytes() if ledger.path.exists() else b""
        if not working.startswith(last):
            line = first_difference(last, working)
            return Verification(
                ledger.name, rel, len(history), False, None, None, line,
                f"the working file rewrote or removed line {line} of the committed version (HEAD)",
            )
    return Verification(ledger.name, rel, len(history), True, message=f"{rel}: {len(history)} commit{'s' if len(history) != 1 else ''}, append-only")


# ---------------------------------------------------------------- commit what was appended

@dataclass(frozen=True)
class Committed:
    ledger: str
    path: str
    appended: int  # records between the committed version and the working file
    commit: str | None  # None: nothing to commit


def commit_appended(store: Store, name: str) -> Committed:
    """One commit for the records appended since the last one (`--no-commit` appends; for the access
    log, the rows that reads left pending too: access.move_pending).

    Refused when the working file is not the committed version plus new lines:
    an edit of an old line must never ride along with "append".
    """
    from . import access  # noqa: PLC0415

    if will_commit(store) is None:  # GitError when git cannot commit
        raise Refused(f"cannot commit ledger {name!r}: commits are turned off", hint="[git] commit in memctl.toml, or MEMCTL_NO_COMMIT")
    with store.lock():
        if name == access.LEDGER:
            access.move_pending(store)  # undone with the rest if the commit does not happen
        ledger = open_ledger(store, name)
        rel = store.rel(ledger.path)
        working = ledger.path.read_bytes() if ledger.path.exists() else b""
        committed = refuse_rewritten(store, ledger, working, "nothing was committed")
        added = working.count(b"\n", len(committed))
        if not committed and ledger.header and added:
            added -= 1  # the header line of a new file is not a record
        sha = commit(store, [ledger.path], f"ledger: append {ledger.name} (+{added})") if working != committed else None
    return Committed(ledger.name, rel, added if sha else 0, sha)

