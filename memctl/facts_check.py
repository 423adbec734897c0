"""doctor's checks of the fact layer: every fact file, MEMORY.md and its topic files, and what git
says of them (check). Each problem is a facts.Problem with file:line where there is one; reading and
writing facts is facts.py's.
"""

from __future__ import annotations

import os
import shlex
import unicodedata
from pathlib import Path

from . import clock, fact as fact_mod, gitstore, index as index_mod, merge
from .errors import GitError
from .facts import Problem, folded, kept_by_index, listed_facts, not_utf8_at, scan, topic_texts
from .fsutil import INDEX_LIMIT, TooBig, link_on_way, read_bounded, without_bom
from .claude_memory import linked_topics
from .store import Store, commit_enabled, pending


def _control_in(text: str) -> str | None:
    """The first control character in a description but TAB (remember takes it) and LF (a YAML block's
    lines, which MEMORY.md joins), or None."""
    return None if text.isprintable() else next((c for c in text if (c < " " and c not in "\t\n") or "\x7f" <= c <= "\x9f"), None)


def check(store: Store) -> list[Problem]:
    """Every problem in the fact layer, with file:line where there is one."""
    result = scan(store, archived=True)
    problems = list(result.problems)
    now = clock.now()
    live = [f for f in result.facts if not f.archived]
    names: dict[str, list[fact_mod.Fact]] = {}
    known = {f.stem for f in result.facts} | {f.name for f in result.facts}
    for item in result.facts:
        rel = store.rel(item.path) if item.path else item.file_name
        if not item.name:
            problems.append(Problem(rel, 2, "missing-name", "frontmatter has no 'name'"))
        elif store.layout == "claude":  # Claude Code's `name` is a short title, in any script
            from .claude_memory import TITLE_CHARS

            if len(item.name) > TITLE_CHARS:
                problems.append(Problem(rel, 2, "long-title", f"the title ('name') is {len(item.name)} characters; "
                                        f"Claude Code's titles are short (up to {TITLE_CHARS})", "warning"))
        elif not fact_mod.NAME_RE.match(item.name):
            problems.append(Problem(rel, 2, "bad-name", f"name {item.name!r} is not a slug", "warning"))
        if not item.description:
            problems.append(Problem(rel, 2, "missing-description", "frontmatter has no 'description'"))
        elif len(item.description) > fact_mod.MAX_DESCRIPTION:  # written by hand, or pulled: memctl writes none
            problems.append(Problem(rel, _key_line(item, "description"), "long-description",
                                    _long_description(len(item.description)), "warning"))
        if item.description and (control := _control_in(item.description)):  # by hand, or pulled: remember refuses it
            problems.append(Problem(rel, _key_line(item, "description"), "description-control",
                                    f"the description holds a control character ({control!r}); MEMORY.md shows it "
                                    "escaped, but `list`, `recall` and `show` on a pipe print it as it is: remove it", "warning"))
        if not item.archived and item.name:
            names.setdefault(item.name, []).append(item)
        if not item.archived and item.type and item.type not in store.config.fact_types:
            problems.append(Problem(rel, _key_line(item, "type"), "undeclared-type",
                                    f"type {item.type!r} is not declared ([facts] types in memctl.toml: "
                                    f"{' | '.join(store.config.fact_types)}); the fact is read as usual", "warning"))
        if not item.archived:
            problems += [Problem(rel, _key_line(item, key), f"bad-{key}", message, "warning")
                         for key, message in fact_mod.value_problems(item, now)]
        for old in item.supersedes:
            if old not in known:
                problems.append(Problem(rel, 0, "dangling-supersedes", f"supersedes {old!r}, which does not exist"))
    for name, same in names.items():
        if len(same) > 1:
            files = ", ".join(store.rel(f.path) for f in same if f.path)
            for item in same:
                problems.append(Problem(store.rel(item.path), 2, "duplicate-name", f"name {name!r} is used by {files}"))
    problems += _case_twins(store, result.facts)
    if link_on_way(store.root, store.index_path) is not None:
        pass  # a link: doctor names it (link_problems) and reads nothing through it
    elif not store.index_path.exists():
        problems.append(Problem(store.rel(store.index_path), 0, "no-index", "MEMORY.md is missing (run `memctl index`)"))
    else:
        problems += _index_problems(store, live)
    problems += _git_problems(store)
    return problems


def _long_description(chars: int) -> str:
    from .embed import EMBED_CHARS

    read = f"; a model is given its first {EMBED_CHARS:,}" if chars > EMBED_CHARS else ""
    return (f"description is {chars:,} characters, more than the {fact_mod.MAX_DESCRIPTION:,} memctl writes{read} "
            "(put details in the body)")


def _case_twins(store: Store, found: list[fact_mod.Fact]) -> list[Problem]:
    """Fact files whose paths differ only in case (`Deploy.md`, `deploy.md`) or in Unicode normal form
    (`が` as one code point, or `か` and a combining mark as macOS writes it): a clone on macOS or
    Windows (a file system that ignores case, or normalises names) holds one of them, and git shows the
    other as changed."""
    by_folded: dict[str, list[str]] = {}
    for item in found:
        if item.path is not None:
            rel = store.rel(item.path)
            by_folded.setdefault(folded(rel), []).append(rel)
    return [Problem(rel, 0, "case-twin", f"{_twin_kind(rel, same)} (rename one)", "warning")
            for same in by_folded.values() if len(same) > 1 for rel in same]


def _twin_kind(rel: str, same: list[str]) -> str:
    others = [other for other in same if other != rel]
    if all(unicodedata.normalize("NFC", other) == unicodedata.normalize("NFC", rel) for other in others):
        form = "NFC" if unicodedata.is_normalized("NFC", rel) else "not NFC"
        return (f"is written in Unicode form {form}, and {len(others)} other file(s) hold the same name in another "
                "form: a clone on macOS keeps one of them")
    return f"differs from {', '.join(others)} only in case or Unicode form: a clone on macOS or Windows keeps one of them"


def _key_line(fact: fact_mod.Fact, key: str) -> int:
    """The line of the frontmatter where `key:` is (at any depth), 0 when it cannot be found."""
    try:
        lines = fact.path.read_text(encoding="utf-8").split("\n") if fact.path else []
    except (OSError, UnicodeError):
        return 0
    for number, line in enumerate(lines[1:], start=2):
        if line.rstrip("\r") in ("---", "..."):
            break
        if line.lstrip().startswith(f"{key}:"):
            return number
    return 0
def _index_problems(store: Store, live: list[fact_mod.Fact]) -> list[Problem]:
    """MEMORY.md and its topic files against the live facts (an index file over its limit: that, unread)."""
    rel_index = store.rel(store.index_path)
    try:
        raw = read_bounded(store.index_path, INDEX_LIMIT, "an index file", rel_index)
        topics = topic_texts(store)
    except TooBig as exc:
        return [Problem(str(exc.details["name"]), 0, "too-big", str(exc.details["reason"]))]
    text = without_bom(raw.decode("utf-8", errors="replace"))
    problems = [] if (bad := not_utf8_at(raw.decode("utf-8", errors="surrogateescape"))) is None else [
        Problem(rel_index, bad[0], "index-not-utf8", f"not valid UTF-8 (byte 0x{bad[1]:02x}): no write can regenerate the index "
                "(save the file as UTF-8, then `memctl index`)")]
    listed = listed_facts(live)
    expired = {f.file_name for f in live} - {f.file_name for f in listed}
    kept = kept_by_index(store, text)
    for drift in index_mod.drift(text, listed, topics):
        where = store.rel(store.memory_dir / drift.file) if drift.file else rel_index
        if drift.kind == "orphan" and drift.target in expired:  # expired since the last write: the daily job drops it
            problems.append(Problem(where, drift.lineno, "index-expired", f"{drift.target} has expired and is still "
                                    "listed (the next write, `memctl index` or the daily maintain drops its line)", "warning"))
            continue
        fix = "fix the marker lines by hand" if drift.kind == "damaged-block" else "run `memctl index`"
        if drift.kind == "orphan" and drift.target in kept:
            fix = "no such file: remove the line by hand, or write the file (`memctl index` keeps a line it did not write)"
        problems.append(Problem(where, drift.lineno, f"index-{drift.kind}", f"{drift.message} ({fix})"))
    lines = text.count("\n")
    limit_lines, limit_bytes = store.config.max_index_lines, store.config.max_index_bytes
    # Errors: memctl keeps the index within the limits, so being over them means that
    # Claude Code would not see some facts (run `memctl index`, or shorten the text outside the block).
    if lines > limit_lines:
        problems.append(Problem(rel_index, limit_lines + 1, "index-too-long", f"{lines} lines; Claude Code loads only the first {limit_lines} (run `memctl index`)"))
    if len(raw) > limit_bytes:
        problems.append(Problem(rel_index, 0, "index-too-big", f"{len(raw)} bytes; Claude Code loads only the first {limit_bytes} (run `memctl index`)"))
    return problems


def _git_problems(store: Store) -> list[Problem]:
    try:
        top = gitstore.work_tree(store.root)
    except GitError as exc:  # an error while commits are on: every write is refused (store.will_commit)
        if commit_enabled(store):
            return [Problem(".", 0, exc.kind or "no-git", f"{exc.message}: every write is refused until it is fixed "
                            f"(hint: {exc.hint})")]
        return [Problem(".", 0, exc.kind or "no-git", f"{exc.message}; commits are off, so changes are not versioned", "warning")]
    # memctl's files: a change to them that is not committed would be missing from every clone.
    # (access.tsv is appended without a commit on purpose; `memctl ledger commit access` commits it.)
    owned = [store.memory_dir] + ([store.ledgers_dir, store.state_dir] if store.layout == "memctl" else [])
    own_files = [store.config_path, store.root / ".gitignore", store.root / ".gitattributes"] if store.layout == "memctl" else []
    dirty = gitstore.dirty_entries(store.root, [d for d in owned + own_files if d.exists()])
    problems = []
    interrupted = set(pending(store)) if dirty else set()  # doctor names those once, as an interrupted change
    for code, path in dirty:
        name = os.path.basename(path)
        rel = store.rel(top / path) if top is not None else path
        own_file = top is not None and top / path in own_files  # only when git does not track it (below)
        if (name.startswith(".") and not own_file) or name == "access.tsv" or rel in interrupted \
                or (own_file and code != "??") or (top is not None and (top / path).is_symlink()):
            continue  # (a link is named once, above, as one: never to be committed)
        where, what = shlex.quote(str(store.root)), shlex.quote(rel)
        commit = f"git -C {where} add -- {what} && git -C {where} commit"
        if code != "??" and (line := _rewritten_ledger_line(store, top / path if top is not None else None)):
            message = (f"an append-only ledger changed at line {line} since its last commit (a row rewritten or "
                       f"removed): put the committed rows back as they were (git -C {where} diff -- {what} shows the "
                       "change), then append the change as a new row")
        elif code != "??":
            message = f"memctl's file has changes that are not committed (commit them: {commit}; or discard them)"
        elif own_file:  # an init killed before its commit (`memctl init` commits it)
            message = f"the store's own file is not committed, so no clone gets it (commit it: {commit}; or run `memctl init` again)"
        elif (kept := _kept_by_memctl(store, top / path if top is not None else Path(path))) is None:
            message = f"a fact file that does not parse, not committed: fix it (its error is above) or move it out of {store.rel(store.memory_dir)}/"
        elif kept:
            message = f"a new file that is not committed yet (commit it: {commit}; or remove it)"
        elif name.endswith(LEFTOVERS):  # an editor's backup or a merge's leftover: noise, not a problem of the store
            problems.append(Problem(rel, 0, "uncommitted", "an editor's or a merge's leftover, not committed: remove it "
                                    f"(or ignore it: add `*{'~' if name.endswith('~') else os.path.splitext(name)[1]}` "
                                    "to .gitignore)", "warning"))
            continue
        elif path.endswith(".md") and top is not None and _in_a_folder_of_yours(store, top / path):
            folder = f"{store.rel(store.memory_dir)}/" if store.layout == "memctl" else "the directory"
            to = folder if store.layout == "memctl" else "its top"
            problems.append(Problem(rel, 0, "uncommitted", f"not read as a fact (facts are the .md files at the top of "
                                    f"{folder}, for Claude Code too), not committed: to make it one, move it to {to} with a "
                                    f"frontmatter (docs/FORMAT.md) or `memctl remember` its text; else commit it as a file "
                                    f"of yours: {commit}", "warning"))
            continue
        else:  # dropped in by hand: not memctl's, and committing it would send it to every clone
            message = (f"a file memctl does not write, not committed: move it out of {store.rel(store.memory_dir)}/ "
                       f"if it does not belong there (or commit it: {commit})")
        problems.append(Problem(rel, 0, "uncommitted", message))
    return problems


def _rewritten_ledger_line(store: Store, path: Path | None) -> int | None:
    """For a ledger whose working file does not extend its committed version: the first line that
    differs (committing it would break `ledger verify`); else None."""
    if path is None or path.suffix != ".tsv" or store.ledgers_dir not in path.parents:
        return None
    from .ledger import first_difference  # noqa: PLC0415  (only for a changed ledger)

    committed = gitstore.committed_text(store.root, path)
    try:
        current = path.read_bytes()
    except OSError:
        return None
    before = None if committed is None else committed.encode("utf-8")
    return None if before is None or current.startswith(before) else first_difference(before, current)


LEFTOVERS = ("~", ".orig", ".rej", ".bak", ".swp", ".swo", ".tmp")  # left beside a file by editors, patch and git


def _in_a_folder_of_yours(store: Store, path: Path) -> bool:
    """A file in a folder of memory/ that is not memctl's (archive/, conflicts/, memory-index/)."""
    own = {store.memory_dir, store.archive_dir, store.memory_dir / merge.CONFLICTS_DIR, store.memory_dir / index_mod.TOPIC_DIR}
    return store.memory_dir in path.parents and path.parent not in own


def _kept_by_memctl(store: Store, path: Path) -> bool | None:
    """Whether an untracked file is one memctl writes (a fact, a ledger, STATE.md); None for a fact
    file that does not parse. A Markdown file in a folder of memory/ that is not memctl's (archive/,
    conflicts/, memory-index/) is no fact: facts are the files at the top, for Claude Code too."""
    if path.suffix == ".tsv" or path.name == "MEMORY.md" or (store.state_dir in path.parents and path.suffix == ".md") \
            or path.parent == store.memory_dir / index_mod.TOPIC_DIR:  # a topic file, memctl's own (no fact to load)
        return True
    if path.suffix != ".md" or _in_a_folder_of_yours(store, path):
        return False
    try:
        fact_mod.load(path, plain=path.parent == store.memory_dir and path.name in linked_topics(store))
    except (fact_mod.FactParseError, OSError, UnicodeError):
        return None
    return True
