"""Fact operations: remember, update, supersede, forget, list, index (doctor's checks: facts_check.py).

Every change happens under the store lock: read the facts, decide, write the
fact file(s) atomically, regenerate MEMORY.md, commit exactly those paths.
"""

from __future__ import annotations

import os
import re
import shlex
import time
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from . import clock, errors, fact as fact_mod, gitstore, index as index_mod, textnorm
from .errors import BadInput, NotFound, Refused
from .fsutil import (INDEX_LIMIT, atomic_move, atomic_write, link_message, link_on_way, read_bounded, read_index,
                     bash_escaped, control_in_name, refuse_link, shell_word, utf8_name)
from .fsutil import without_bom, written
from .claude_memory import dated_by_git, linked_topics, write_fact
from .markers import refuse_conflicts
from .parsecache import FactCache
from .tsv import visible
from .store import Store, commit, commit_enabled, lock_commits, refuse_uncommitted, will_commit


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    code: str
    message: str
    severity: str = "error"  # or "warning"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return visible(f"{where}: {self.message}")

    def report(self) -> str:
        """The problem as `doctor` and `check` print it: `path:line: severity: message`, one line."""
        where = f"{self.path}:{self.line}" if self.line else self.path
        return visible(f"{where}: {self.severity}: {self.message}")  # one line, whatever a file is named


@dataclass(frozen=True)
class FactInput:
    """What `remember` was given; None means "not given" (matters for --update)."""

    name: str
    description: str | None = None
    type: str | None = None
    body: str | None = None
    why: str | None = None
    how: str | None = None
    importance: float | None = None
    confidence: float | None = None
    tags: tuple[str, ...] | None = None
    source: str | None = None
    expires: str | None = None
    supersedes: tuple[str, ...] = ()
    pinned: bool | None = None


@dataclass(frozen=True)
class Similar:
    fact: fact_mod.Fact
    score: float
    shared: int
    exact: bool
    method: str = "keywords"  # or the embedder that found it, e.g. "e5-small-q4"
    near: bool = True  # False: an embedder's "similar" band, below its near-duplicate threshold (never refused)

    def to_dict(self, store: "Store") -> dict[str, Any]:
        """As JSON shows it (docs/JSON.md, similar_fact)."""
        return {"path": store.rel(self.fact.path), "score": self.score, "shared": self.shared, "exact": self.exact,
                "method": self.method, "near": self.near}


# (name, description, stems to leave out) -> similar live facts found by embeddings
VectorCheck = Callable[[str, str, set[str]], list[Similar]]


@dataclass(frozen=True)
class Change:
    action: str  # created | updated | unchanged | forgotten
    fact: fact_mod.Fact
    similar: tuple[Similar, ...] = ()
    archived: tuple[fact_mod.Fact, ...] = ()
    commit: str | None = None


@dataclass(frozen=True)
class Scan:
    facts: list[fact_mod.Fact]
    problems: list[Problem] = field(default_factory=list)


# ---------------------------------------------------------------- reading

def _fact_files(directory: Path, store: Store) -> tuple[list[Path], list[Path], list[Path]]:
    """The fact files in `directory`, the links among its entries (never followed: docs/RELIABILITY.md),
    and the files whose name is not UTF-8 (a pushed `bad\xff.md`: never read, named by doctor).
    A folder that is itself a link, or lies under one, is a link with no files."""
    link = link_on_way(store.root, directory)
    if link is not None:
        return [], [link] if os.path.lexists(directory) else [], []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return [], [], []
    files, links, misnamed = [], [], []
    for entry in entries:
        if not entry.name.endswith(".md") or entry.name == "MEMORY.md" or entry.name.startswith("."):
            continue
        if not utf8_name(entry.name) or control_in_name(entry.name):
            misnamed.append(Path(entry.path))
        elif entry.is_symlink():
            links.append(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            files.append(Path(entry.path))
    return sorted(files), sorted(links), sorted(misnamed)


def misnamed_problem(store: Store, path: Path) -> Problem:
    """A fact file whose name memctl does not read: not UTF-8, or holding a control character."""
    rel = store.rel(path)
    shown = bash_escaped(rel)  # as bash's $'...' reads it back
    why = "is not UTF-8" if not utf8_name(rel) else "holds a control character (a line break, a tab)"
    renamed = shell_word(store.rel(path.parent / "NEW-NAME.md"))  # in its own folder: an archived fact stays archived
    return Problem(shown, 0, "name", f"the file name {why}: memctl does not read it "
                   f"(rename it: {gitstore.git_c(store.root)} mv -- $'{shown}' {renamed})")


def link_problem(store: Store, link: Path) -> Problem:
    """A symbolic link inside the store, as doctor and the readers that skip it report it."""
    rel = store.rel(link)
    return Problem(rel, 0, "link", link_message(store.root, link).removeprefix(f"{rel} is ")
                   + " (put the file itself here, or remove the link)")


def scan(store: Store, *, archived: bool = False) -> Scan:
    """Parse every live fact (and archived ones when asked); unreadable files and links become problems."""
    facts: list[fact_mod.Fact] = []
    problems: list[Problem] = []
    cache = FactCache(store.cache_dir / "facts.json")
    seen: set[str] = set()
    topics = linked_topics(store)  # (a Claude Code directory: the topic files a fact without frontmatter may be)
    dirs = [(store.memory_dir, False), (store.archive_dir, True)]
    for directory, is_archived in dirs if archived else dirs[:1]:
        paths, links, misnamed = _fact_files(directory, store)
        problems += [link_problem(store, link) for link in links] + [misnamed_problem(store, p) for p in misnamed]
        for path in paths:
            seen.add(str(path))
            try:
                facts.append(cache.load(path, archived=is_archived, plain=not is_archived and path.name in topics))
            except fact_mod.NoFrontmatter as exc:
                problems.append(_no_frontmatter(store, path, exc, is_archived))
            except fact_mod.FactParseError as exc:
                problems.append(Problem(store.rel(path), exc.line, "unreadable", exc.message))
            except OSError as exc:
                problems.append(Problem(store.rel(path), 0, "unreadable", exc.strerror or str(exc)))
    if not archived:
        seen |= {k for k in cache.entries if Path(k).parent == store.archive_dir}
    cache.save(seen)
    if store.layout == "claude":  # what memctl keeps per fact there lives in the sidecar
        from .claude_memory import overlay

        facts = overlay(store, facts)
    return Scan(facts, problems)


def _no_frontmatter(store: Store, path: Path, exc: fact_mod.FactParseError, archived: bool) -> Problem:
    """A file without frontmatter in a Claude Code directory (NOTES.md, an empty scratch.md, not linked
    from MEMORY.md) is no fact and no broken one: Claude Code reads it as text, memctl leaves it alone."""
    if store.layout == "claude" and not archived:
        return Problem(store.rel(path), 0, "not-a-fact", "no frontmatter and not linked from MEMORY.md: "
                       "not a fact (memctl does not read it)", "warning")
    return Problem(store.rel(path), exc.line, "unreadable", exc.message)


def _no_fact_file(store: Store, path: Path) -> bool:
    """A Claude Code directory's note without frontmatter (NOTES.md): no fact, no broken one (_no_frontmatter)."""
    if store.layout != "claude":
        return False
    try:
        fact_mod.load(path)
    except fact_mod.NoFrontmatter:
        return True
    except (fact_mod.FactParseError, OSError):
        return False
    return False


def warn_problems(scan_result: Scan) -> None:
    for problem in scan_result.problems:
        if problem.severity == "error":
            errors.warn(f"skipped {problem}", hint="run `memctl doctor`")


def live_facts(store: Store, *, quiet: bool = False) -> list[fact_mod.Fact]:
    result = scan(store)
    if not quiet:
        warn_problems(result)
    return result.facts


def _match(facts: list[fact_mod.Fact], key: str) -> fact_mod.Fact | None:
    """The fact whose file stem is `key`, else the one whose `name` is, else the one whose file name is
    (`feedback_testing.md`, as `remember` and `list` print it); a name several files share is refused
    (the first by file name was taken: `forget` archived one of them, unasked)."""
    for fact in facts:
        if fact.stem == key:
            return fact
    named = [fact for fact in facts if fact.name == key]
    if not named:  # the same title typed in another Unicode form (macOS's NFD ガイドライン): the same fact
        folded = unicodedata.normalize("NFC", key)
        named = [fact for fact in facts
                 if folded in (unicodedata.normalize("NFC", fact.name or ""), unicodedata.normalize("NFC", fact.stem))]
    if len(named) > 1:
        files = ", ".join(f.file_name for f in named)
        raise BadInput(f"name {key!r} is used by {len(named)} facts: {files}",
                       hint=f"give the file's stem instead (e.g. {named[0].stem!r})", kind="ambiguous-name")
    if not named and key.endswith(".md"):  # (a file name typed NFC for a file named NFD, as macOS names them)
        return next((fact for fact in facts if fact.file_name == key), None) or next(
            (fact for fact in facts if unicodedata.normalize("NFC", fact.file_name) == unicodedata.normalize("NFC", key)), None)
    return named[0] if named else None


def tag_key(tag: str) -> str:
    """A tag as it is written and looked up: NFKC (full-width letters and spaces as ASCII), outer spaces
    dropped (an empty result is refused as a tag)."""
    return unicodedata.normalize("NFKC", tag).strip()


def key_from_path(store: Store, key: str) -> str:
    """A fact file's path as `remember` and `list` print it (`memory/deploy.md`, from the store's root),
    or as a shell completes it from here, names that fact: its file name (an archived version's, its
    stem). Any other key is returned as it is (and a path there is refused as a name)."""
    found = _path_in_store(store, key)
    if found is None:
        return key
    folder, name = found
    return name[:-len(".md")] if folder == "archive" else name


def archived_file(store: Store, key: str) -> str | None:
    """The file stem when `key` is the path of a file in memory/archive/ (`memory/archive/deploy.md`):
    that archived version, never the live fact of the same name. None for any other key."""
    found = _path_in_store(store, key)
    return found[1][:-len(".md")] if found and found[0] == "archive" else None


def _path_in_store(store: Store, key: str) -> tuple[str, str] | None:
    """("memory" or "archive", file name) when `key` is a path to a .md file in one of those folders,
    from the store's root or from here; else None."""
    if "/" not in key or not key.endswith(".md") or "\x00" in key:
        return None
    memory, archive = os.path.realpath(store.memory_dir), os.path.realpath(store.archive_dir)
    for base in (store.root, Path.cwd()):
        folder, name = os.path.split(os.path.join(base, key))
        folder = os.path.realpath(folder)  # (/tmp on macOS is /private/tmp; a folder reached through a link)
        if folder == memory:
            return "memory", name
        if folder == archive:
            return "archive", name
    return None


def _live_match(store: Store, facts: list[fact_mod.Fact], key: str, archived: str, hint: str) -> fact_mod.Fact:
    """The live fact `key`; else BadInput / NotFound as `find` says, or Refused(archived) when it is archived
    (a path in memory/archive/ names that archived file: a live fact of its name is not the one meant)."""
    if archived_file(store, key) is not None:
        find(store, key)  # raises NotFound when there is no such file
        raise Refused(archived, hint=hint)
    key = key_from_path(store, key)
    found = _match(facts, key)
    if found is None:
        find(store, key)  # raises BadInput / NotFound with the right message
        raise Refused(archived, hint=hint)
    return found


def is_passage(store: Store, key: str, *, whole: bool = False) -> bool:
    """Whether `key` names a document's lines (PATH:START-END; with `whole`, also a PATH alone: the whole
    document, sources.is_document) rather than a fact: a Claude Code fact's title may look like one
    (`Standup:9`), and a fact by that name wins."""
    from .sources import is_document, is_spec  # noqa: PLC0415

    if not is_spec(key) and not (whole and is_document(store, key)):
        return False
    try:
        find(store, key)
    except (NotFound, BadInput):
        return True
    return False


def find(store: Store, key: str, *, archived: bool = True) -> fact_mod.Fact:
    """A fact by file stem, name, file name or path; live facts first, then the archive (newest first).
    A path in memory/archive/ names that archived file only."""
    stem = archived_file(store, key)
    if stem is not None:
        found = newest_archived(scan_archive(store), check_key(stem, titles=store.layout == "claude"), exact=True) if archived else None
        if found is None:
            raise NotFound(f"no fact file {key!r}", hint="listing the facts with archived ones included shows every fact",
                           kind="no-fact")
        return found
    key = check_key(key_from_path(store, key), titles=store.layout == "claude")
    live = scan(store)
    found = _match(live.facts, key)
    if found is None:
        refuse_unreadable(store, live, key)
    if found is None and archived:
        found = newest_archived(scan_archive(store), key)
    if found is None:
        raise NotFound(f"no fact named {key!r}", hint="listing the facts with archived ones included shows every fact",
                       kind="no-fact")
    return found


def refuse_unreadable(store: Store, scanned: Scan, key: str) -> None:
    """A live fact file called `key` that cannot be read is broken, not missing: say so."""
    for problem in scanned.problems:
        if problem.severity == "error" and Path(problem.path).stem == key and Path(problem.path).parent == Path(store.rel(store.memory_dir)):
            raise Refused(f"fact {key!r} cannot be read: {problem}", hint="fix the file (see `memctl doctor`), then run the command again")


def newest_archived(archived: list[fact_mod.Fact], key: str, *, exact: bool = False) -> fact_mod.Fact | None:
    """`NAME.YYYYmmddTHHMMSS` picks that version (so does any file stem, with `exact`); a name or stem
    picks the newest archived one (what `show` shows and `restore` brings back)."""
    same_stem = [f for f in archived if f.stem == key]
    if exact or same_stem and _ARCHIVE_STAMP.search(key):
        return same_stem[0] if same_stem else None
    same = [f for f in archived if key in (f.stem, f.name, _ARCHIVE_STAMP.sub("", f.stem))]
    if not same:  # the same name typed in another Unicode form (macOS's NFD), as _match takes it
        folded = unicodedata.normalize("NFC", key)
        same = [f for f in archived if folded in (unicodedata.normalize("NFC", f.name or ""), unicodedata.normalize("NFC", f.stem))]
    if not same and key.endswith(".md"):  # a file name, as `forget` and `list` print it
        return newest_archived(archived, key[:-3], exact=exact)
    return max(same, key=lambda f: (_archived_at(f), f.stem)) if same else None


def _archived_at(fact: fact_mod.Fact) -> float:
    """When it was archived (or superseded), as a POSIX time; 0 when unknown."""
    for key in ("archived", "valid_to"):
        value = fact.meta(key)
        if value:
            try:
                return clock.parse_date(str(value)).timestamp()
            except ValueError:
                pass
    return 0.0


def scan_archive(store: Store) -> list[fact_mod.Fact]:
    return [f for f in scan(store, archived=True).facts if f.archived]


def list_facts(
    store: Store, *, fact_type: str | None = None, tag: str | None = None, include_archived: bool = False
) -> list[fact_mod.Fact]:
    result = scan(store, archived=include_archived)
    warn_problems(result)
    facts = result.facts
    if fact_type:
        if fact_type not in store.config.fact_types and not any(f.type == fact_type for f in facts):
            check_type(store, fact_type)  # a typo: the declared types and the closest one, not an empty list
        facts = [f for f in facts if f.type == fact_type]
    if tag:
        tag = tag_key(tag) or tag
        facts = [f for f in facts if tag in f.tags]
    return sorted(facts, key=lambda f: (f.archived, f.type, f.stem))


def _same_text(description: str) -> str:
    """A description as the exact-duplicate check compares it: width, case, spacing and a final . or 。 set aside."""
    return textnorm.normalize(description).rstrip(".。 ")


def similar(description: str, facts: list[fact_mod.Fact]) -> list[Similar]:
    """Facts whose description is the same after normalising, or overlaps by keywords."""
    norm = _same_text(description)
    words = textnorm.keywords(description)
    hits = []
    for other in facts:
        if _same_text(other.description) == norm:
            hits.append(Similar(other, 1.0, len(words), True))
            continue
        theirs = textnorm.keywords(other.description)
        shared = len(words & theirs)
        score = textnorm.jaccard(words, theirs)
        if score >= 0.6 and shared >= 3:
            hits.append(Similar(other, round(score, 3), shared, False))
    return sorted(hits, key=lambda s: -s.score)


# ---------------------------------------------------------------- writing

def _unit(value: float | None, label: str) -> float | None:
    if value is None:
        return None
    if not 0.0 <= value <= 1.0:
        raise BadInput(f"{label} must be between 0 and 1, got {value}", hint=f"{label} 0.8", arg=label)
    return float(value)


def _check_text(value: str | None, label: str) -> None:
    """Arguments that are not valid UTF-8 arrive as surrogates, and NUL makes a file binary: refuse both
    before anything is written."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{label} is not valid UTF-8", hint="check the terminal's or the caller's encoding", arg=label) from None
    if "\x00" in value:  # a fact file holding one is unreadable (fact.py: binary)
        raise BadInput(f"{label} contains a NUL character", hint="remove it; fact files are text", arg=label)


def check_key(key: str, *, titles: bool = False) -> str:
    """The one rule for naming an existing fact (show, pin, forget, log, remember --update,
    --supersedes): its file stem or its `name:`, whatever characters that name has
    (a Claude Code fact may be called "Merge freeze"); never a path. `titles`: a Claude Code
    directory, where a name is a title that may hold a `/` ("CI/CD の手順": its file gets a stem
    of its own), but no part of a path (`..`, a leading `/`). A *new* fact's name in a memctl
    store becomes its file name and must also pass `fact.validate_name`."""
    parts = key.split("/") if titles else [key]
    if not key or "\x00" in key or any(part in ("", ".", "..") for part in parts) or ("/" in key and not titles):
        raise BadInput(f"invalid fact name {key!r}", hint="give a fact name or file stem, not a path")
    return key


def check_type(store: Store, fact_type: str, *, of: str = "") -> str:
    """`fact_type` when memctl.toml declares it (`[facts] types`), else BadInput naming the declared
    types and the closest one; `of` says whose type it is when the caller did not give it."""
    if fact_type not in store.config.fact_types:
        raise errors.undeclared_type("fact", fact_type, store.config.fact_types, "[facts] types", of=of)
    return fact_type


def _check_input(store: Store, spec: FactInput, update: bool = False) -> None:
    for label in ("description", "type", "body", "why", "how", "source", "expires"):
        _check_text(getattr(spec, label), label)
    for tag in spec.tags or ():
        _check_text(tag, "tag")
    for old in spec.supersedes:
        _check_text(old, "supersedes")
    titles = store.layout == "claude"
    if update:
        check_key(spec.name, titles=titles)
    elif store.layout == "claude" and not fact_mod.NAME_RE.match(spec.name):
        _check_title(spec.name)  # Claude Code's `name` is a title; the file gets a stem of its own
    else:
        fact_mod.validate_name(spec.name)
    for old in spec.supersedes:
        check_key(old, titles=titles)
    if spec.description is not None:
        fact_mod.validate_description(spec.description)
    if spec.type is not None:
        check_type(store, spec.type)
    _unit(spec.importance, "importance")
    _unit(spec.confidence, "confidence")
    for tag in spec.tags or ():
        if not tag.strip() or any(c in tag for c in "\n\r\t,"):
            raise BadInput(f"invalid tag {tag!r}", hint="tags are one word or phrase without commas or newlines")
    if spec.expires:  # "" clears an expiry (write() keeps it only for --update)
        try:
            expires = clock.expiry(spec.expires)
        except ValueError:
            raise BadInput(f"invalid expires date {spec.expires!r}", hint=clock.DATE_HINT, arg="expires") from None
        if expires <= clock.now():
            errors.warn(f"expires {spec.expires} is in the past: the fact is expired at once (recall leaves it out; "
                        "the expired-facts policy archives it)", hint="give a later date, or drop --expires")
    for text, label in ((spec.source, "source"),):
        if text is not None and any(c in text for c in "\n\r"):
            raise BadInput(f"{label} must be one line", hint="drop the newline")


def _check_title(title: str) -> None:
    from .claude_memory import TITLE_CHARS

    check_key(title, titles=True)
    if len(title) > TITLE_CHARS or any(c in title for c in "[]\n\r\t"):
        raise BadInput(f"invalid fact title {title[:40]!r}{'...' if len(title) > 40 else ''}",
                       hint=f"a short title: up to {TITLE_CHARS} characters on one line, without [ or ]")


def _new_fact(store: Store, spec: FactInput, now: str) -> fact_mod.Fact:
    fact_type = spec.type or store.config.default_fact_type()
    metadata: dict[str, Any] = {
        "type": fact_type,
        "importance": spec.importance if spec.importance is not None else store.config.importance_for(fact_type),
        "confidence": spec.confidence if spec.confidence is not None else store.config.confidence_for(fact_type),
        "created": now,
        "updated": now,
    }
    optional = {
        "source": spec.source,
        "tags": list(spec.tags) if spec.tags else None,
        "pinned": True if spec.pinned else None,
        "expires": spec.expires,
        "supersedes": list(spec.supersedes) if spec.supersedes else None,
    }
    metadata.update({k: v for k, v in optional.items() if v is not None})
    front = {"name": spec.name, "description": spec.description, "metadata": metadata}
    body = fact_mod.compose_body(spec.body, spec.why, spec.how)
    stem = spec.name
    if store.layout == "claude":
        from .claude_memory import claude_stem

        stem = _free_stem(store, claude_stem(spec.name, fact_type))
    return fact_mod.Fact(stem=stem, front=front, body=body, path=store.memory_dir / f"{stem}.md")


def _free_stem(store: Store, stem: str) -> str:
    """`stem`, or `stem_2`, `stem_3`...: the first that no file of the directory has, case and Unicode form
    folded (two titles can make one file name in Claude Code's style: a new fact never takes another's file)."""
    try:
        taken = {folded(name) for name in os.listdir(store.memory_dir)}
    except OSError:
        taken = set()
    found, number = stem, 2
    while folded(f"{found}.md") in taken:
        found, number = f"{stem}_{number}", number + 1
    return found


def _updated_fact(current: fact_mod.Fact, spec: FactInput) -> fact_mod.Fact:
    changed = current
    if spec.description is not None:
        front = dict(changed.front)
        front["description"] = spec.description
        changed = fact_mod.Fact(current.stem, front, changed.body, current.archived, current.path)
    meta = {
        "type": spec.type,
        "importance": spec.importance,
        "confidence": spec.confidence,
        "source": spec.source,
        "tags": list(spec.tags) if spec.tags is not None else None,
        "expires": spec.expires,
    }
    if spec.pinned is not None:
        meta["pinned"] = True if spec.pinned else None
    if spec.supersedes:
        meta["supersedes"] = sorted(set(current.supersedes) | set(spec.supersedes))
    given = {k: v for k, v in meta.items() if v is not None or k == "pinned"}
    if given.get("expires") == "":  # `--expires ""`: the fact no longer expires
        given["expires"] = None
    if given:
        changed = changed.with_meta(**given)
    if spec.body is not None or spec.why is not None or spec.how is not None:
        body = fact_mod.update_body(changed.body, spec.body, spec.why, spec.how)
        changed = fact_mod.Fact(current.stem, changed.front, body, current.archived, current.path)
    return changed


def _archive_path(store: Store, fact: fact_mod.Fact) -> Path:
    """A name in memory/archive/ that no file has: an archived fact is never overwritten."""
    target = store.archive_dir / fact.file_name
    if not target.exists():
        return target
    stamp = clock.now().strftime("%Y%m%dT%H%M%S")
    target = store.archive_dir / f"{fact.stem}.{stamp}.md"
    counter = 2
    while target.exists():
        target = store.archive_dir / f"{fact.stem}.{stamp}-{counter}.md"
        counter += 1
    return target


def _archive(store: Store, fact: fact_mod.Fact, **meta: Any) -> tuple[fact_mod.Fact, list[Path]]:
    """Record why, then move the file to memory/archive/ (never delete)."""
    assert fact.path is not None
    marked = fact.with_meta(**meta)
    atomic_write(fact.path, fact_mod.render(marked))
    target = _archive_path(store, fact)
    atomic_move(fact.path, target)
    moved = fact_mod.Fact(target.stem, marked.front, marked.body, True, target)
    from .claude_memory import forget_rows  # (in Claude Code's directory: the sidecar forgets the file's settings)

    return moved, [fact.path, target, *forget_rows(store, fact)]


def index_text(store: Store, path: Path | None = None, errors: str = "replace") -> str:
    """MEMORY.md (or a topic file) as text, "" when it does not exist; refused, unread, through a
    symbolic link (kind "link") and over INDEX_LIMIT (fsutil.TooBig) (docs/FORMAT.md, Limits). `errors`: what bytes that are not UTF-8 become."""
    path = path or store.index_path
    refuse_link(store.root, path)  # never read through a link (docs/RELIABILITY.md)
    try:
        return read_index(path, store.rel(path), errors)
    except FileNotFoundError:
        return ""


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as errors="surrogateescape" reads it


def not_utf8_at(text: str) -> tuple[int, int] | None:
    """(line, byte) of the first byte that is not UTF-8 in `text` read with errors="surrogateescape"; None when none."""
    bad = None if text.isascii() else _NOT_UTF8.search(text)
    return None if bad is None else (text.count("\n", 0, bad.start()) + 1, ord(bad.group()) - 0xdc00)


def _refuse_damaged_index(store: Store) -> None:
    """A MEMORY.md whose block markers are damaged is not regenerated (it would gain a second block), nor one
    that is not UTF-8 (what is outside the block is the user's: it would be lost)."""
    if not store.index_path.exists():
        return
    text = index_text(store, errors="surrogateescape")  # (one read: a byte that is not UTF-8 stays one character)
    bad = not_utf8_at(text)
    if bad is not None:
        raise Refused(f"{store.rel(store.index_path)}:{bad[0]}: not valid UTF-8 (byte 0x{bad[1]:02x}); nothing was written",
                      hint="save MEMORY.md as UTF-8 (the lines outside its generated block are yours), then `memctl index`",
                      kind="index-not-utf8")
    damaged = index_mod.damaged_block(text)
    if damaged is not None:
        raise Refused(f"{store.rel(store.index_path)}:{damaged[0]}: the generated block is damaged: {damaged[1]}; nothing was written",
                      hint=f"fix the marker lines by hand ({index_mod.BEGIN} ... {index_mod.END}), then `memctl index`")


def refuse_hand_edited_index(store: Store, enabled: bool, facts: list[fact_mod.Fact]) -> None:
    """MEMORY.md's text outside the generated block is the user's: never commit uncommitted edits of it.

    Changes inside the block are memctl's own (e.g. a process killed before its
    commit) and are simply regenerated, but for a line memctl never writes there
    (a person's note): it is kept below the block, so it is the user's too. Index lines for live facts added outside
    it (Claude Code appends its own) are not edits to refuse: the block adopts them.
    """
    _refuse_damaged_index(store)
    if not store.index_path.exists() or will_commit(store, enabled) is None:
        return
    if not gitstore.dirty_paths(store.root, [store.index_path]):
        return
    committed = gitstore.committed_text(store.root, store.index_path)
    committed = None if committed is None else without_bom(committed)  # read as index_text reads the file
    current = index_text(store)
    adopted = {f.file_name for f in facts} | _archived_names(store) | _written_since(store, current)
    if committed is not None and (mine := index_mod.user_text(current, adopted)) != index_mod.user_text(committed, adopted):
        before = set(committed.split("\n"))
        line = next((n for n, text in enumerate(current.split("\n"), start=1) if text.strip() and text not in before
                     and text in mine.split("\n")), None)  # the first line of the edit (none when lines were only removed)
        raise Refused(
            f"{store.rel(store.index_path)}{f':{line}' if line else ''} has uncommitted edits of yours (outside the "
            "memctl block, or a line inside it that memctl did not write)",
            hint="commit or discard them first, or write without committing", kind="index-edited",
        )


def _written_since(store: Store, text: str) -> set[str]:
    """The targets of index lines outside the block that name a fact file there now: one Claude Code
    wrote after this command read the facts (its line appended next) is no edit of the user's."""
    return {line.target for line in index_mod.parse_lines(text) if not line.generated
            and "/" not in line.target and not line.target.startswith(".") and (store.memory_dir / line.target).is_file()}


def _deleted_targets(store: Store, text: str, archived: set[str], *, say: bool = True) -> set[str]:
    """In a Claude Code directory, the files beside MEMORY.md that an index line links and that git
    saw deleted (Claude Code or a person deleted the fact; it is not among the `archived`): such a
    line, outside the block too, leaves MEMORY.md as an archived fact's does. A line for a file never
    written (a person's note of one to come) stays."""
    if store.layout != "claude":
        return set()
    missing = {line.target for line in index_mod.parse_lines(text)
               if line.target.endswith(".md") and "/" not in line.target and "://" not in line.target
               and line.target not in archived and not os.path.lexists(store.memory_dir / line.target)}
    deleted = {name for name in missing if gitstore.was_deleted(store.root, store.memory_dir / name)}
    for name in sorted(deleted) if say else ():
        errors.warn(f"{store.rel(store.index_path)}: the line for {name} goes: the file was deleted (not archived)")
    return deleted


def kept_by_index(store: Store, text: str) -> set[str]:
    """The targets of index lines outside the block for files beside MEMORY.md that are not there and that
    git never saw deleted (a person's line for a file to come): regeneration keeps such a line, and doctor's
    hint says so. (A line in the block for a file deleted by hand goes with the next regeneration.)"""
    missing = {line.target for line in index_mod.parse_lines(text) if not line.generated and "/" not in line.target
               and "://" not in line.target and not os.path.lexists(store.memory_dir / line.target)}
    if not missing:
        return set()
    archived = _archived_names(store)
    return missing - archived - _deleted_targets(store, text, archived, say=False)


def _archived_names(store: Store) -> set[str]:
    return {p.name for p in store.archive_dir.glob("*.md")} if store.archive_dir.is_dir() else set()


def topic_texts(store: Store) -> dict[str, str]:
    """The topic files in memory-index/ (memctl's own), by their path relative to MEMORY.md's folder."""
    folder = store.memory_dir / index_mod.TOPIC_DIR
    if link_on_way(store.root, folder) is not None or not folder.is_dir():
        return {}  # a link is never read (writing there is refused: fsutil)
    return {f"{index_mod.TOPIC_DIR}/{p.name}": index_text(store, p) for p in sorted(folder.glob("*.md"))
            if not p.is_symlink() and p.is_file()}


def _adopted_files(store: Store, facts: list[fact_mod.Fact]) -> list[Path]:
    """Live fact files git has never committed (Claude Code's new facts, a fact file written by hand): the
    regenerated index links them, so the commit takes them along, and the committed index never links
    an uncommitted file. (Asked whether or not this write commits: with no repository there is nothing to adopt.)"""
    if not commit_enabled(store) or (top := gitstore.toplevel(store.root)) is None:
        return []
    new = {os.path.normpath(top / path) for code, path in gitstore.dirty_entries(store.root, [store.memory_dir])
           if code == "??" or code[0] == "A"}
    if not new:
        return []
    memory = store.memory_dir.resolve()  # once, as git names it: not a realpath per fact
    adopted = [f.path for f in facts if f.path is not None
               and os.path.normpath(os.path.join(memory, os.path.relpath(f.path, store.memory_dir))) in new]
    mine = {os.path.abspath(path) for path in written()}  # this command's own new fact is no one else's
    theirs = [path for path in adopted if os.path.abspath(path) not in mine]
    if theirs and store.layout == "memctl" and lock_commits(store):  # (Claude Code's writes have a commit of their own)
        names = ", ".join(store.rel(path) for path in theirs[:3]) + (f" and {len(theirs) - 3} more" if len(theirs) > 3 else "")
        errors.warn(f"{names}: a fact file git never had, taken into this change: MEMORY.md now links it",
                    hint="to keep a fact file of your own apart, commit it first (git add, git commit)")
    return adopted


RECENT_DAYS = 7  # a fact written or used this lately keeps its line in MEMORY.md (index.fair_order)
RANKED_FROM = 50  # facts: below this, far below any limit of MEMORY.md, no line has to give way


def _recent(store: Store, facts: list[fact_mod.Fact]) -> set[str]:
    """File names of the facts written or used in the last RECENT_DAYS: by their `updated` / `created`,
    by a commit or an uncommitted change to the file (Claude Code writes no timestamps), or by a use
    in the access log. Only asked for when the index would pass its limits."""
    from datetime import datetime, timedelta

    from . import access

    if len(facts) < RANKED_FROM:  # far below any limit: nothing to choose
        return set()
    since = clock.now() - timedelta(days=RECENT_DAYS)
    found = set()
    for fact in facts:
        stamp = fact.meta("updated") or fact.meta("created")
        try:
            when = datetime.fromisoformat(str(stamp)) if stamp else None
            if when is not None and (when if when.tzinfo else when.astimezone()) >= since:
                found.add(fact.file_name)
        except (ValueError, OverflowError):  # (a naive 0001-01-01T00:00:00 is year 0 east of UTC: every write failed)
            pass
    found |= {os.path.basename(p) for p in gitstore.changed_since(store.root, store.memory_dir, since)}
    stems = {fact.stem: fact.file_name for fact in facts}
    for _, row in access.rows(store):
        if access.is_use(row.get("command", "")) and row.get("ts", "") >= since.isoformat(timespec="seconds")[:10]:
            found |= {stems[key] for key in row.get("shown", "").split(",") if key in stems}
    return found


def update_index(store: Store, facts: list[fact_mod.Fact], refresh: set[str] = frozenset()) -> tuple[list[Path], bool]:
    """Regenerate MEMORY.md and its topic files; (the paths to commit, whether any file changed)."""
    _refuse_damaged_index(store)
    path = store.index_path
    topics = topic_texts(store)
    gone = {f.file_name for f in facts} - {f.file_name for f in listed_facts(facts)}  # expired: no line, as archived
    archived, recent = _archived_names(store) | gone, _recent(store, facts)
    facts = [f for f in facts if f.file_name not in gone]
    if len(facts) >= RANKED_FROM:
        facts = dated_by_git(store, facts)
    changed = False
    for attempt in range(INDEX_ATTEMPTS):
        raw = _index_bytes(store)
        current = without_bom(raw.decode("utf-8"))  # strict: a regenerated file would lose what is not UTF-8
        refuse_conflicts(current.encode("utf-8"), store.rel(path))
        layout = index_mod.build_layout(
            current, facts, archived=archived | _deleted_targets(store, current, archived), topics=topics, refresh=refresh,
            limit_lines=store.config.max_index_lines, limit_bytes=store.config.max_index_bytes,
            rank=index_mod.rank_key(store.config.importance_for), recent=recent,
        )
        if layout.memory == current:
            break
        # Claude Code appends to MEMORY.md taking no lock: a line it added since the read is read again
        if atomic_write(path, layout.memory, expected=raw):
            changed = True
            if layout.moved:
                errors.warn(f"{store.rel(path)}: {len(layout.moved)} line(s) written inside the memctl block were "
                            f"kept just below it (the first: {layout.moved[0].strip()[:60]!r})",
                            hint="memctl regenerates the lines between its markers: write your own text outside them")
            break
        time.sleep(min(0.05, 0.001 * 2 ** attempt))  # let a burst of appends end
    else:  # never replaced under a writer that kept appending: its lines matter more than a fresh index
        errors.warn(f"{store.rel(path)} kept changing while memctl rewrote it ({INDEX_ATTEMPTS} reads): left as it is",
                    hint="run `memctl index` when the other writer is done")
        return [], False  # its topic files too: MEMORY.md links the ones it has
    touched = [path]
    for rel, text in sorted(layout.topics.items()):
        target = store.memory_dir / rel
        touched.append(target)
        if text is None:
            target.unlink(missing_ok=True)
            changed = True
        elif topics.get(rel) != text:
            target.parent.mkdir(exist_ok=True)
            atomic_write(target, text)
            changed = True
    folder = store.memory_dir / index_mod.TOPIC_DIR
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return touched + _adopted_files(store, facts), changed


INDEX_ATTEMPTS = 20  # reads of MEMORY.md while another writer keeps changing it (about 0.8 s of waits); then it is left as is


def _index_bytes(store: Store) -> bytes:
    """MEMORY.md's bytes as index_text reads them: b"" when missing, refused through a link or over the limit."""
    refuse_link(store.root, store.index_path)
    try:
        data = read_bounded(store.index_path, INDEX_LIMIT, "an index file", store.rel(store.index_path))
    except FileNotFoundError:
        return b""
    return data


def _write_index(store: Store, facts: list[fact_mod.Fact], refresh: set[str] = frozenset()) -> list[Path]:
    """Regenerate the index for these live facts; the paths to commit (`refresh`: file names whose
    description memctl just changed, so their line's hook follows)."""
    return update_index(store, facts, refresh)[0]


def _refreshed(old: fact_mod.Fact, new: fact_mod.Fact) -> set[str]:
    return {new.file_name} if old.description != new.description else set()


def _inherit(spec: FactInput, old_facts: list[fact_mod.Fact]) -> FactInput:
    """A fact that supersedes others keeps their type (the first one's), tags and pin unless given (a
    pinned fact's successor is what every session must still see; consolidate carries pins the same way)."""
    if not old_facts:
        return spec
    fact_type = spec.type if spec.type is not None else (old_facts[0].type or None)
    tags = spec.tags
    if tags is None:
        tags = tuple(dict.fromkeys(t for old in old_facts for t in old.tags)) or None
    pinned = spec.pinned if spec.pinned is not None else (True if any(old.meta("pinned") is True for old in old_facts) else None)
    return replace(spec, type=fact_type, tags=tags, pinned=pinned)


_TEXT_FIELDS = ("description", "body", "why", "how", "source")


def _scrubbed(spec: FactInput, secrets: bool = True) -> FactInput:
    """`spec` with the private spans in its text fields and tags hidden and, unless not `secrets`,
    the secrets redacted (secrets.scrub warns)."""
    from .secrets import scrub

    given = [f for f in _TEXT_FIELDS if getattr(spec, f) is not None]
    tags = spec.tags or ()
    cleaned = scrub([getattr(spec, f) for f in given] + list(tags), "remember", secrets=secrets)
    changed = dict(zip(given, cleaned[:len(given)]))
    return replace(spec, **changed, tags=tuple(cleaned[len(given):]) if spec.tags is not None else None)


@errors.space_warnings_held  # its embedding check saves the vector cache before the write
def remember(
    store: Store,
    spec: FactInput,
    *,
    update: bool = False,
    force: bool = False,
    strict: bool = False,
    commit_changes: bool = True,
    verb: str | None = None,
    vector_check: VectorCheck | None = None,
    allow_secrets: bool = False,
) -> Change:
    """Write a new fact, or change one with update=True; see docs/FORMAT.md for the rules.

    `vector_check`, when given, adds near matches found by an embedder to the
    keyword ones (reported, refused only with strict). It runs before the lock
    is taken: loading a model must not hold up other writers. Secrets in the
    fact's text are redacted, with a warning, unless `allow_secrets`; `<private>` text is always hidden.
    """
    spec = _scrubbed(spec, secrets=not allow_secrets)  # <private> text is hidden even when secrets are allowed
    if spec.expires:  # `２０２６－１２－２０` as a Japanese IME types it: the date it means, as it is written to the file
        import unicodedata  # noqa: PLC0415

        spec = replace(spec, expires=unicodedata.normalize("NFKC", spec.expires).strip())
    if spec.tags:  # `　全角空白　`, `ＤＥＰＬＯＹ` as an IME types them: the tag they mean, once each
        spec = replace(spec, tags=tuple(dict.fromkeys(tag_key(t) or t for t in spec.tags)))
    if spec.expires == "" and not update:  # a new fact with `--expires ""` has no expiry, as without it
        spec = replace(spec, expires=None)
    if spec.importance == 0 or spec.confidence == 0:  # `--importance -0` is written 0.0, not -0.0
        spec = replace(spec, importance=None if spec.importance is None else spec.importance + 0.0,
                       confidence=None if spec.confidence is None else spec.confidence + 0.0)
    _check_input(store, spec, update)
    vector_hits: list[Similar] = []
    if vector_check is not None and spec.description is not None:
        try:
            vector_hits = vector_check(spec.name, spec.description, {spec.name} | set(spec.supersedes))
        except KeyboardInterrupt as exc:  # stopped while embedding the store (the first time: minutes)
            said, code = errors.interrupted_line(exc)
            raise errors.Interrupted(f"{said}; {spec.name} was not {'changed' if update else 'written'}", code) from None
    if not update and spec.description is None:
        raise BadInput("description is required for a new fact", hint="give the new fact a one-line description",
                       arg="description", kind="description-required")
    with store.lock(commits=commit_changes):
        scanned = scan(store)
        warn_problems(scanned)
        facts = scanned.facts
        existing = _match(facts, spec.name)
        if existing is None:
            refuse_unreadable(store, scanned, spec.name)
        if existing is not None and not update:
            raise Refused(
                f"fact {spec.name!r} already exists: {store.rel(existing.path)}",
                hint="update it (update=True), or pick another name", kind="fact-exists",
            )
        if existing is None and update:
            refuse_archived(store, spec.name, "updated")
            raise NotFound(f"no live fact named {spec.name!r} to update", hint="create it instead (update=False)",
                           kind="nothing-to-update")
        if existing is None:
            _refuse_case_twin(store, spec.name)
            if store.layout == "claude":
                _refuse_title_twin(store, facts, spec.name)
        if existing is None and "/" not in spec.name and _file_exists(store.memory_dir / f"{spec.name}.md"):
            taken = store.memory_dir / f"{spec.name}.md"
            if _no_fact_file(store, taken):
                raise Refused(f"{store.rel(taken)} exists and is no fact (no frontmatter): it is not memctl's to replace",
                              hint="pick another name")
            raise Refused(f"{store.rel(taken)} exists but cannot be read", hint="run `memctl doctor` and fix the file")
        old_facts = []
        for old_key in spec.supersedes:
            old = _match(facts, old_key)
            if old is None:
                raise NotFound(f"supersedes {old_key!r}: no live fact by that name", hint="listing the facts shows live ones",
                               arg="supersedes", kind="no-live-fact")
            if existing is not None and old.stem == existing.stem or old_key == spec.name:
                raise BadInput("a fact cannot supersede itself", hint="name the older fact it replaces", arg="supersedes")
            if any(f.stem == old.stem for f in old_facts):  # archived twice, listed twice: `--supersedes b --supersedes b`
                raise BadInput(f"supersedes names {store.rel(old.path)} twice", hint="name each fact it replaces once",
                               arg="supersedes")
            old_facts.append(old)
        skip = {f.stem for f in old_facts} | ({existing.stem} if existing else set())
        hits: list[Similar] = []
        if spec.description is not None:
            hits = similar(spec.description, [f for f in facts if f.stem not in skip])
            exact = [h for h in hits if h.exact]
            if exact and not force and existing is not None:  # --update: "update that fact" would send the user in circles
                raise Refused(
                    f"the same description is already in {store.rel(exact[0].fact.path)}",
                    hint="give this fact a description of its own, forget one of the two, or force the write",
                    kind="same-description-update",
                )
            if exact and not force:
                raise Refused(
                    f"the same description is already in {store.rel(exact[0].fact.path)}",
                    hint="update that fact, supersede it, or force the write", kind="same-description",
                )
            seen = {h.fact.stem for h in hits}
            hits += [h for h in vector_hits if h.fact.stem not in skip and h.fact.stem not in seen and h.fact.name not in skip]
            hits.sort(key=lambda h: (not h.exact, not h.near, -h.score))  # the closest first: the CLI shows five
            near = [h for h in hits if not h.exact and h.near]
            if near and strict and not force:
                raise Refused(
                    f"a similar fact exists: {store.rel(near[0].fact.path)} (score {near[0].score:.2f}, "
                    + (f"{near[0].shared} shared keywords)" if near[0].method == "keywords" else f"by {near[0].method})"),
                    hint="check it; update or supersede it, or write without strict", kind="similar-fact",
                )
        refuse_uncommitted(store, [f.path for f in [existing, *old_facts] if f is not None], commit_changes)
        refuse_hand_edited_index(store, commit_changes, facts)
        now = clock.stamp()
        if existing is None:
            given = _inherit(spec, old_facts)
            if given.type != spec.type:  # taken from the fact it supersedes: declared too, or refused
                check_type(store, given.type or "", of=f"the type of {old_facts[0].name or old_facts[0].stem}")
            new = _new_fact(store, given, now)
            action = "created"
        else:
            new = _updated_fact(existing, spec)
            if fact_mod.render(new) == fact_mod.render(existing) and not old_facts:
                return Change("unchanged", existing, tuple(hits))
            new = new.with_meta(updated=now)
            action = "updated"
        assert new.path is not None
        if existing is None and os.path.lexists(new.path):  # never a new fact over a file memctl did not read as one
            raise Refused(f"{store.rel(new.path)} already exists and is not a fact memctl read; nothing was written",
                          hint="run `memctl doctor`, or pick another name", kind="file-exists")
        touched = write_fact(store, new, existing)
        archived = []
        for old in old_facts:
            moved, paths = _archive(store, old, superseded_by=spec.name, valid_to=now)
            archived.append(moved)
            touched += paths
        live = [f for f in facts if f.stem not in skip] + [new]
        touched += _write_index(store, live, _refreshed(existing, new) if existing else set())
        verb = verb or ("remember" if action == "created" else "update")
        message = f"memory: {verb} {spec.name}"
        if old_facts:
            message += " (supersedes " + ", ".join(f.name or f.stem for f in old_facts) + ")"
        sha = commit(store, touched, message, enabled=commit_changes)
        return Change(action, new, tuple(hits), tuple(archived), sha)


def update_many(
    store: Store,
    specs: list[FactInput],
    message: str,
    *,
    commit_changes: bool = True,
    guard: Callable[[list[fact_mod.Fact]], None] | None = None,
) -> list[Change]:
    """Several `remember --update` changes (each may supersede facts) under one lock, in one commit.

    `guard` sees the live facts once the lock is held and raises to stop
    before anything is written (a plan made earlier that no longer holds).
    """
    for spec in specs:
        _check_input(store, spec, update=True)
    with store.lock(commits=commit_changes):
        facts = live_facts(store)
        if guard is not None:
            guard(facts)
        _refuse_damaged_index(store)
        pairs: list[tuple[fact_mod.Fact, list[fact_mod.Fact]]] = []
        claimed: set[str] = set()
        for spec in specs:
            current = _match(facts, spec.name)
            if current is None:
                raise NotFound(f"no live fact named {spec.name!r} to update")
            olds = []
            for key in spec.supersedes:
                old = _match(facts, key)
                if old is None:
                    raise NotFound(f"supersedes {key!r}: no live fact by that name", arg="supersedes")
                olds.append(old)
            stems = [current.stem, *(o.stem for o in olds)]
            if len(set(stems)) != len(stems) or claimed & set(stems):
                raise BadInput("a fact cannot be changed or superseded twice in one operation: " + ", ".join(stems))
            claimed |= set(stems)
            pairs.append((current, olds))
        refuse_uncommitted(store, [f.path for current, olds in pairs for f in (current, *olds)], commit_changes)
        refuse_hand_edited_index(store, commit_changes, facts)
        now = clock.stamp()
        touched: list[Path] = []
        changes = []
        for spec, (current, olds) in zip(specs, pairs):
            new = _updated_fact(current, spec).with_meta(updated=now)
            assert new.path is not None
            touched += write_fact(store, new, current)
            archived = []
            for old in olds:
                moved, paths = _archive(store, old, superseded_by=current.name or current.stem, valid_to=now)
                archived.append(moved)
                touched += paths
            changes.append(Change("updated", new, (), tuple(archived)))
        replaced = {f.stem for current, olds in pairs for f in (current, *olds)}
        live = [f for f in facts if f.stem not in replaced] + [c.fact for c in changes]
        if touched:
            refresh = set().union(*(_refreshed(current, c.fact) for (current, _), c in zip(pairs, changes)))
            touched += _write_index(store, live, refresh)
        sha = commit(store, touched, message, enabled=commit_changes) if touched else None
        return [Change(c.action, c.fact, c.similar, c.archived, sha) for c in changes]


def edit(
    store: Store,
    key: str,
    change: Callable[[fact_mod.Fact], fact_mod.Fact],
    *,
    verb: str,
    commit_changes: bool = True,
) -> Change:
    """Apply `change` to one live fact under the lock; "unchanged" when it returns the same fact."""
    with store.lock(commits=commit_changes):
        facts = live_facts(store)
        current = _live_match(store, facts, key, f"fact {key!r} is archived", "`memctl restore` it first")
        _refuse_damaged_index(store)
        new = change(current)
        if fact_mod.render(new) == fact_mod.render(current):
            return Change("unchanged", current)
        refuse_uncommitted(store, [current.path], commit_changes)
        refuse_hand_edited_index(store, commit_changes, facts)
        new = new.with_meta(updated=clock.stamp())
        assert new.path is not None
        atomic_write(new.path, fact_mod.render(new))
        touched = [new.path, *_write_index(store, [f for f in facts if f.stem != current.stem] + [new], _refreshed(current, new))]
        sha = commit(store, touched, f"memory: {verb} {current.name or current.stem}", enabled=commit_changes)
        return Change("updated", new, commit=sha)


def refuse_archived(store: Store, key: str, what: str, found: fact_mod.Fact | None = None) -> None:
    """Refused, naming how it was archived, when `key` is an archived fact (`found`, when the caller
    has it): only a live one is `what` (updating would otherwise say "create it": a second fact of
    the name, the first one's past lost to it)."""
    found = found or newest_archived(scan_archive(store), key)
    if found is None:
        return
    why = f"superseded by {found.meta('superseded_by')}" if found.meta("superseded_by") else "forgotten"
    raise Refused(f"fact {key!r} is archived ({why}): only a live fact is {what}", hint="`memctl restore` it first",
                  kind="archived-fact")


def set_pinned(store: Store, key: str, pinned: bool, *, commit_changes: bool = True) -> Change:
    """Pin (always in the context bundle) or unpin a live fact."""
    found = find(store, key)
    if found.archived:  # "no fact named" it said, while `list --all` lists it
        refuse_archived(store, key, "pinned", found)
    spec = FactInput(name=found.name if fact_mod.NAME_RE.match(found.name) else found.stem, pinned=pinned)
    return remember(store, spec, update=True, commit_changes=commit_changes, verb="pin" if pinned else "unpin")


def forget(store: Store, key: str, reason: str, *, commit_changes: bool = True, allow_secrets: bool = False) -> Change:
    """Move a fact to the archive with `reason` (a secret in it redacted, with a warning, unless `allow_secrets`)."""
    _check_text(reason, "reason")
    if not reason or not reason.strip() or any(c in reason for c in "\n\r"):
        raise BadInput("reason must be one non-empty line", hint="say why this fact is forgotten", arg="reason")
    if not allow_secrets:
        from .secrets import scrub

        reason = scrub([reason], "forget")[0]
    with store.lock(commits=commit_changes):
        facts = live_facts(store)
        target = _live_match(store, facts, key, f"fact {key!r} is already archived", "`memctl show` it to see why")
        refuse_uncommitted(store, [target.path], commit_changes)
        refuse_hand_edited_index(store, commit_changes, facts)
        moved, touched = _archive(store, target, archived=clock.stamp(), archived_reason=reason.strip())
        touched += _write_index(store, [f for f in facts if f.stem != target.stem])
        sha = commit(store, touched, f"memory: forget {target.name or target.stem}", enabled=commit_changes)
    if target.pinned:
        label = target.name if target.name and not target.name.startswith("-") else target.stem  # (not an option)
        errors.warn(f"{label} was pinned: context no longer includes it",
                    hint=f"`memctl restore {shlex.quote(label)}` brings it back, pinned")
    return Change("forgotten", moved, commit=sha)


def reindex(store: Store, *, commit_changes: bool = True, wait: float | None = None) -> tuple[bool, str | None]:
    """Regenerate the index block (and the topic files); (changed, commit id). `wait`: seconds to wait
    for the store lock (default MEMCTL_LOCK_TIMEOUT)."""
    with store.lock(wait, commits=commit_changes):
        facts = live_facts(store)
        refuse_hand_edited_index(store, commit_changes, facts)
        paths, changed = update_index(store, facts)
        if not changed:
            return False, None
        return True, commit(store, paths, "memory: regenerate index", enabled=commit_changes)


def listed_facts(facts: list[fact_mod.Fact]) -> list[fact_mod.Fact]:
    """The facts MEMORY.md lists: the live ones whose `expires` has not passed (recall leaves those out
    too, and an agent reading the index took an expired rule for a current one)."""
    now = clock.now()
    return [f for f in facts if not clock.expired(f.meta("expires"), now)]


def index_drift(store: Store) -> list[index_mod.Drift]:
    live = live_facts(store)
    facts = listed_facts(live)
    expired = {f.file_name for f in live} - {f.file_name for f in facts}
    text = index_text(store, errors="strict")
    found = index_mod.drift(text, facts, topic_texts(store),
                            limit_lines=store.config.max_index_lines, limit_bytes=store.config.max_index_bytes)
    return [replace(d, message=f"{d.target} has expired: its line goes at the next write") if d.kind == "orphan"
            and d.target in expired else d for d in found]


def relist_claude_index(store: Store, wait: float | None = None) -> bool:
    """Put MEMORY.md's index back in order when it lists a live fact twice, not at all, or one that is
    gone: Claude Code writes MEMORY.md whole from what it read, so a line memctl added meanwhile is lost
    (and taken in with its write). True when the index was regenerated and committed; False when it was
    in order, or the lock, git or a hand edit outside the block stood in the way (doctor names it)."""
    from .claude_memory import git_busy
    from .errors import MemctlError

    if store.layout != "claude":
        return False
    try:
        if not [d for d in index_drift(store) if d.kind in ("missing", "duplicate", "orphan", "too-long", "too-big")]:
            return False
        if wait is not None and git_busy(store):
            return False
        return reindex(store, wait=wait)[0]
    except (MemctlError, OSError, UnicodeDecodeError):
        return False


def history(store: Store, key: str) -> list[gitstore.LogEntry]:
    found = find(store, key)
    assert found.path is not None
    return path_history(store, found.path)


_ARCHIVE_STAMP = re.compile(r"\.\d{8}T\d{6}(?:-\d+)?$")  # what _archive_path adds to a name already taken


def folded(name: str) -> str:
    """A file name as a file system that ignores case and normalises Unicode sees it."""
    return unicodedata.normalize("NFC", name).casefold()


def _file_exists(path: Path) -> bool:
    """Path.exists(), but a name too long for a file (a title of 85 kanji in a Claude Code directory)
    names no file rather than failing the command with ENAMETOOLONG."""
    try:
        return path.exists()
    except OSError:
        return False


def _title_key(title: str) -> str:
    """A title as a reader sees it: width (NFKC), case and spacing folded."""
    return " ".join(unicodedata.normalize("NFKC", title).casefold().split())


def _refuse_title_twin(store: Store, facts: list[fact_mod.Fact], title: str) -> None:
    """In a Claude Code directory a fact's name is its title, shown in MEMORY.md: a new one that reads as
    a live fact's (`デプロイの時間帯 ` beside `デプロイの時間帯`, `ﾃﾞﾌﾟﾛｲ…`, `Test Policy` beside `test policy`)
    would be a second line no reader tells apart."""
    key = _title_key(title)
    twin = next((f for f in facts if f.name and _title_key(f.name) == key), None)
    if twin is not None:
        raise Refused(f"a fact titled {twin.name!r} exists ({store.rel(twin.path)}): {title!r} reads the same",
                      hint=f"update {twin.name!r}, or pick another title", kind="title-twin")


def _refuse_case_twin(store: Store, name: str) -> None:
    """A new fact's file may not differ from another file of memory/ in case only: on macOS's and
    Windows' file systems (and so in every clone there) the two are one file."""
    wanted = f"{name}.md"
    try:
        twins = [n for n in os.listdir(store.memory_dir) if folded(n) == folded(wanted) and n != wanted]
    except OSError:
        return
    if twins:
        raise Refused(f"fact name {name!r} differs only in case or Unicode form from {store.rel(store.memory_dir / twins[0])}: on macOS "
                      "and Windows the two are one file", hint=f"update {Path(twins[0]).stem!r}, or pick another name",
                      kind="name-case")


def path_history(store: Store, path: Path) -> list[gitstore.LogEntry]:
    """A fact file's commits, newest first, across forget and restore. An archived fact's past goes on
    under memory/<stem>.md up to the commit that archived it (the oldest of its archive path); a live
    fact that `restore` brought back goes on under the archived file that commit removed. A later fact
    of that name is not its past."""
    entries: list[gitstore.LogEntry] = []
    seen: set[str] = set()
    upto = None
    for _ in range(64):  # forgotten and restored that many times: the rest is in `git log`
        part = gitstore.log(store.root, path, upto=upto)
        entries += [e for e in part if e.commit not in seen]
        seen.update(e.commit for e in part)
        if not part:
            break
        oldest = part[-1].commit
        stem = _ARCHIVE_STAMP.sub("", path.stem)
        moved_to = path
        if path.parent == store.archive_dir:
            path = store.memory_dir / f"{stem}.md"
        else:
            restored = [p for p in gitstore.removed_in(store.root, oldest, store.archive_dir)
                        if _ARCHIVE_STAMP.sub("", Path(p).stem) == stem]
            if len(restored) != 1:
                break  # created here (not by restore)
            path = gitstore.work_tree(store.root) / restored[0]
        counts = gitstore.moved_numstat(store.root, oldest, path, moved_to)
        if counts is not None:  # the move's own change, not the whole file as added
            entries[-1] = entries[-1]._replace(added=counts[0], removed=counts[1])
        upto = oldest
    return entries
