"""Document sources: folders of notes, docs or code declared in memctl.toml (docs/SOURCES.md).

    [sources.docs]
    paths = ["docs/**/*.md", "~/notes/*.md"]   # globs, inside or outside the store
    exclude = ["**/drafts/**"]
    description = "The project's documentation"
    kind = "markdown"                          # markdown | text | code
    chunk_size = 300                           # optional (chunking.DEFAULT_SIZE)
    overlap = 60                               # optional (chunking.DEFAULT_OVERLAP)
    prompt = false                             # optional: the per-prompt hook may show its chunks

The files stay where they are: memctl never copies, writes or commits them.
This module owns the `[sources.*]` tables, finding a source's files (a walk
that never follows a symbolic link, with caps on the count and the depth) and
reading one file (a cap on the size, no binary, UTF-8 only). What is derived
from them lives in `.memctl/sources.sqlite` (docindex.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator, NamedTuple

from . import chunking
from .config import text_to_edit, toml_key, toml_table, write_edited
from .errors import BadInput, NotFound, Refused
from .fsutil import MAX_DEPTH, link_on_way, walk_tree
from .index import TOPIC_DIR
from .store import Store

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
RESERVED = ("facts", "episodes", "docs", "all")  # `recall --source` words
MAX_FILES = 20_000  # files per source; past it the rest are skipped, with their count
COUNT_LIMIT = 10 * MAX_FILES  # files past the cap are counted up to here ("more than ...")
MAX_FILE_BYTES = 4 << 20  # a bigger file (a 2 GB log) is skipped unread
BINARY_PROBE = 8192  # a NUL byte in the first bytes marks a binary file
SKIPPED_DIRS = (".git", ".memctl")
FACT_FOLDERS = ("archive", TOPIC_DIR)  # beside the fact files: never a source's
OWN_FACTS = "the store's own facts: recall answers them as facts (an archived one not at all), not as passages"
DEFAULT_GLOBS = {"markdown": ("**/*.md", "**/*.markdown"), "text": ("**/*.txt", "**/*.md", "**/*.rst"),
                 "code": ("**/*.py", "**/*.js", "**/*.ts", "**/*.go", "**/*.rs", "**/*.sh", "**/*.java", "**/*.c", "**/*.h")}


class Source(NamedTuple):
    name: str
    paths: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    description: str = ""
    kind: str = "markdown"
    chunk_size: int = chunking.DEFAULT_SIZE
    overlap: int = chunking.DEFAULT_OVERLAP
    prompt: bool = False


class Found(NamedTuple):
    path: Path  # absolute, as found (no link resolved)
    shown: str  # store-relative inside the store, else absolute


class Skip(NamedTuple):
    shown: str
    reason: str


# ---------------------------------------------------------------- declarations

def check_name(name: str) -> str:
    if not NAME_RE.match(name or "") or name in RESERVED:
        raise BadInput(f"invalid source name {name!r}",
                       hint="a-z or 0-9 first, then a-z 0-9 - _, at most 32; not facts, episodes, docs or all")
    return name


def _parse(name: str, table: object) -> Source:
    where = f"memctl.toml [sources.{name}]"
    if not isinstance(table, dict):
        raise BadInput(f"{where} is not a table")
    check_name(name)
    paths = table.get("paths")
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p.strip() for p in paths):
        raise BadInput(f"{where} needs 'paths', a non-empty list of globs", hint='paths = ["docs/**/*.md"]')
    exclude = table.get("exclude", [])
    if isinstance(exclude, str):
        exclude = [exclude]
    if not isinstance(exclude, list) or not all(isinstance(p, str) for p in exclude):
        raise BadInput(f"{where} exclude must be a list of globs")
    kind = table.get("kind", "markdown")
    if kind not in chunking.KINDS:
        raise BadInput(f"{where} kind = {kind!r}", hint="markdown, text or code")
    description = table.get("description", "")
    if not isinstance(description, str) or "\n" in description:
        raise BadInput(f"{where} description must be one line of text")
    size, overlap = table.get("chunk_size", chunking.DEFAULT_SIZE), table.get("overlap", chunking.DEFAULT_OVERLAP)
    if not isinstance(size, int) or not isinstance(overlap, int) or isinstance(size, bool) or isinstance(overlap, bool):
        raise BadInput(f"{where} chunk_size and overlap must be whole numbers of characters")
    try:
        chunking.check_sizes(size, overlap)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None
    return Source(name, tuple(paths), tuple(exclude), description, kind, size, overlap, bool(table.get("prompt", False)))


def declared(store: Store) -> dict[str, Source]:
    """The sources memctl.toml declares, by name (BadInput for a malformed one)."""
    tables = store.config.raw.get("sources", {}) or {}
    if not isinstance(tables, dict):
        raise BadInput("memctl.toml: sources must be tables, [sources.NAME]")
    return {name: _parse(name, table) for name, table in tables.items()}


def trusted(store: Store, names: list[str]) -> list[str]:
    """Of the sources `names`, those this machine may read: a declaration that came through git (a pull,
    a sync's merge) waits for `memctl trust`, with a warning, as a job does (trust.py)."""
    from . import trust  # noqa: PLC0415

    allowed = trust.acted_on(store, [f"{trust.SOURCE_KEY}{name}" for name in names]) if names else set()
    return [name for name in names if f"{trust.SOURCE_KEY}{name}" in allowed]


def get(store: Store, name: str) -> Source:
    found = declared(store)
    if name not in found:
        raise NotFound(f"no source {name!r}", hint="memctl source list")
    return found[name]


def add(store: Store, source: Source, *, commit_changes: bool = True, allow_secrets: bool = False) -> Source:
    """Declare a source: a `[sources.<name>]` table appended to memctl.toml (the text already there kept), committed.
    A secret in its description is redacted, with a warning, unless `allow_secrets` (memctl.toml is pushed)."""
    import tomllib  # noqa: PLC0415

    from .secrets import scrub  # noqa: PLC0415
    from .store import commit, config_committable  # noqa: PLC0415

    check_name(source.name)
    if not chunking.MIN_SIZE <= source.chunk_size <= chunking.MAX_SIZE:  # named as the caller gave them (not memctl.toml's table)
        raise BadInput(f"chunk_size {source.chunk_size} is not from {chunking.MIN_SIZE} to {chunking.MAX_SIZE} characters",
                       hint=f"give {chunking.MIN_SIZE} to {chunking.MAX_SIZE:,} (default {chunking.DEFAULT_SIZE})", arg="chunk_size")
    if not 0 <= source.overlap < source.chunk_size:
        raise BadInput(f"overlap {source.overlap} must be at least 0 and below the chunk size {source.chunk_size}",
                       hint=f"default {chunking.DEFAULT_OVERLAP}", arg="overlap")
    values = {"paths": list(source.paths), "exclude": list(source.exclude) or None, "description": source.description,
              "kind": source.kind,
              "chunk_size": None if source.chunk_size == chunking.DEFAULT_SIZE else source.chunk_size,
              "overlap": None if source.overlap == chunking.DEFAULT_OVERLAP else source.overlap,
              "prompt": True if source.prompt else None}
    _parse(source.name, {k: v for k, v in values.items() if v is not None})  # the same checks as reading
    for pattern in source.paths:  # a folder that is a link would index nothing, in silence, from then on
        base = _split(absolute(store, pattern))[0]
        link = _linked(store, base)
        if link is not None:
            named = pattern if str(link) == base else f"{pattern}: {shown_path(store, link)}"
            raise BadInput(f"{named} is a symbolic link: memctl follows none, so the source would find no file",
                           hint=f"declare the folder it points to: {os.path.realpath(base)}")
    source = source._replace(description=scrub([source.description], "source add", secrets=not allow_secrets)[0])
    values["description"] = source.description  # (redacted once the declaration is known good: no warning before a refusal)
    with store.lock(commits=commit_changes):
        path = store.config_path
        text, newline = text_to_edit(path)
        if source.name in (tomllib.loads(text).get("sources", {}) or {}):
            raise Refused(f"source {source.name!r} is already declared in memctl.toml", hint=f"memctl source remove {source.name}")
        with_config = config_committable(store, commit_changes, f"the declaration of source {source.name!r}")
        sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        new_text = text + sep + toml_table(f"sources.{toml_key(source.name)}", values)
        try:
            tomllib.loads(new_text)
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"cannot add [sources.{source.name}] to memctl.toml: {exc}", hint="declare it by hand") from None
        write_edited(path, new_text, newline)
        if with_config:
            commit(store, [path], f"source: add {source.name}", enabled=commit_changes)
    return source


def remove(store: Store, name: str, *, commit_changes: bool = True) -> None:
    """Remove a `[sources.<name>]` table from memctl.toml (the other lines kept), committed; its chunks
    leave the index at the next `source index` (or now, by the caller)."""
    import tomllib  # noqa: PLC0415

    from .store import commit, config_committable  # noqa: PLC0415

    with store.lock(commits=commit_changes):
        path = store.config_path
        text, newline = text_to_edit(path)
        if name not in (tomllib.loads(text).get("sources", {}) or {}):
            raise NotFound(f"no source {name!r}", hint="memctl source list")
        lines = text.splitlines(keepends=True)
        header = re.compile(r"^\s*\[\s*sources\s*\.\s*(?:" + re.escape(name) + r"|\"" + re.escape(name) + r"\")\s*\]\s*(#.*)?$")
        start = next((i for i, line in enumerate(lines) if header.match(line)), None)
        if start is None:
            raise Refused(f"[sources.{name}] is not a table of its own in memctl.toml", hint="remove it by hand")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        kept = lines[:start] + lines[end:]
        new_text = "".join(kept).rstrip("\n") + "\n" if "".join(kept).strip() else ""
        if name in (tomllib.loads(new_text).get("sources", {}) or {}):
            raise Refused(f"[sources.{name}] is declared in more than one place in memctl.toml", hint="remove it by hand")
        with_config = config_committable(store, commit_changes, f"the removal of source {name!r}")
        write_edited(path, new_text, newline)
        if with_config:
            commit(store, [path], f"source: remove {name}", enabled=commit_changes)


# ---------------------------------------------------------------- finding files

def shown_path(store: Store, path: Path) -> str:
    """How a document's path is written in hits: store-relative inside the store, else absolute."""
    try:
        return path.relative_to(store.root).as_posix()
    except ValueError:
        return str(path)


def absolute(store: Store, pattern: str) -> str:
    """A glob or path as an absolute one, `..` taken out (lexically: a file has one path in the index,
    and hits print a path `show` takes, however the source was declared)."""
    expanded = os.path.expanduser(pattern)
    return os.path.normpath(expanded if os.path.isabs(expanded) else os.path.join(str(store.root), expanded))


def _translate(pattern: str, *, any_case: bool = False) -> re.Pattern:
    """A glob as a regular expression over `/`-separated paths: `**` any folders, `*` and `?` within one
    (`any_case`: letters of either case, for the default globs: `README.MD` is markdown too)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + re.escape(body[1:]) if body[:1] == "!" else re.escape(body)) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.IGNORECASE if any_case else 0)


def _split(pattern: str) -> tuple[str, str]:
    """(the folder before the first wildcard, the rest of the glob)."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return "/".join(parts[:i]) or "/", "/".join(parts[i:])
    return pattern, ""


def base_dirs(store: Store, source: Source) -> list[str]:
    """The folders a source's globs start from (its files are under them)."""
    out = []
    for pattern in source.paths:
        base, rest = _split(absolute(store, pattern))
        out.append(base if rest or os.path.isdir(base) else os.path.dirname(base))
    return out


def missing(store: Store, source: Source) -> list[str]:
    """The globs of a source whose folder (the part before the first wildcard; a path without one:
    itself) does not exist: a typo finds nothing, and `add` says so at once."""
    return [p for p in source.paths if not os.path.lexists(_split(absolute(store, p))[0])]


def _excluded(shown: str, patterns: list[re.Pattern], rel: str = "") -> bool:
    """Whether an exclude glob matches the path as hits show it, the path under the source's folder
    (`drafts/*` for a source `~/notes/**/*.md`: hits show that one's paths absolute), or the name."""
    name = shown.rsplit("/", 1)[-1]
    return any(p.match(shown) or (rel and p.match(rel)) or p.match(name) for p in patterns)


def walk(store: Store, source: Source, skipped: list[Skip]) -> Iterator[Found]:
    """The files of a source, each once, in a stable order; what is left out goes to `skipped`
    (a symbolic link, never followed, so no loop; an unreadable folder; files past MAX_FILES,
    counted)."""
    exclude = [_translate(p) for p in source.exclude]
    seen: set[str] = set()
    count = 0
    over = 0
    for pattern in source.paths:
        base, rest = _split(absolute(store, pattern))
        link = _linked(store, base)
        if link is not None:
            skipped.append(Skip(shown_path(store, link), "symbolic link: not followed"))
            continue
        rests = [rest]
        if not rest:
            if os.path.isdir(base):
                rests = list(DEFAULT_GLOBS[source.kind])
            elif os.path.isfile(base):
                base, rests = os.path.dirname(base), [os.path.basename(base)]
            else:
                skipped.append(Skip(shown_path(store, Path(base)), "no such file or folder"))
                continue
        matchers = [_translate(r, any_case=not rest) for r in rests]  # (no glob given: the kind's defaults)
        if os.path.islink(base):  # (the folder of a file declared by its path)
            skipped.append(Skip(shown_path(store, Path(base)), "symbolic link: not followed"))
            continue
        if not os.path.isdir(base):
            continue
        depth = None if any("**" in r for r in rests) else max(r.count("/") for r in rests)
        for found in _walk_one(store, base, matchers, exclude, skipped, depth):
            key = str(found.path)
            if key in seen:
                continue
            seen.add(key)
            if count >= MAX_FILES:
                over += 1
                if over + count >= COUNT_LIMIT:
                    break
                continue
            count += 1
            yield found
    if over:
        more = f"more than {over:,}" if over + count >= COUNT_LIMIT else f"{over:,}"
        skipped.append(Skip(f"({more} files)", f"past the cap of {MAX_FILES:,} files per source: not indexed"))


def _linked(store: Store, path: str) -> Path | None:
    """The symbolic link that `path` (absolute, not resolved) is reached through, or None. Inside the store's
    tree every folder from its root down counts (git delivers links there: a pushed `kb -> ..` took a source
    `kb/docs` to the home folder's `docs`); outside it, only `path` itself (a folder declared as an absolute
    or `~` path is the user's own, and so are the links above it)."""
    parts = Path(path).parts
    root = os.path.realpath(store.root)
    for i in range(1, len(parts) + 1):  # the store's root as the path reaches it, even through a link of the user's above it
        top = os.path.join(*parts[:i])
        if os.path.realpath(top) == root:
            return link_on_way(Path(top), Path(path))
    return Path(path) if os.path.islink(path) else None


def _walk_one(store: Store, base: str, matchers: list[re.Pattern], exclude: list[re.Pattern],
              skipped: list[Skip], depth: int | None) -> Iterator[Found]:
    def failed(exc: OSError) -> None:
        skipped.append(Skip(shown_path(store, Path(exc.filename or base)), f"unreadable folder: {exc.strerror}"))

    def too_deep(folder: str) -> None:
        skipped.append(Skip(shown_path(store, Path(folder)), f"more than {MAX_DEPTH} folders deep: not entered"))

    facts_folder = os.path.realpath(store.memory_dir)
    fact_trees = tuple(os.path.join(facts_folder, name) for name in FACT_FOLDERS)
    for folder, dirs, files in walk_tree(base, onerror=failed, too_deep=too_deep):
        rel_folder = os.path.relpath(folder, base)
        prefix = "" if rel_folder == "." else rel_folder.replace(os.sep, "/") + "/"
        real = os.path.realpath(folder)
        if real in fact_trees or real.startswith(tuple(tree + os.sep for tree in fact_trees)):  # a source of memory/archive itself
            skipped.append(Skip(shown_path(store, Path(folder)), OWN_FACTS))
            dirs[:] = []
            continue
        own = real == facts_folder  # the facts, MEMORY.md, the archive: recall's own, never passages
        if own:
            skipped.append(Skip(shown_path(store, Path(folder)), OWN_FACTS))
            files = []
        keep = []
        for d in sorted(dirs) if depth is None or prefix.count("/") < depth else ():
            full = os.path.join(folder, d)
            if d.startswith(".") or d in SKIPPED_DIRS or own and d in FACT_FOLDERS:
                continue
            if _not_utf8(store, full, skipped):
                continue
            if os.path.islink(full):  # never followed: no loop, nothing outside the source's folders
                skipped.append(Skip(shown_path(store, Path(full)), "symbolic link: not followed"))
                continue
            if exclude and _excluded(shown_path(store, Path(full)) + "/", exclude, prefix + d + "/"):
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if name.startswith("."):
                continue
            rel = prefix + name
            if not any(m.match(rel) for m in matchers):
                continue
            if _not_utf8(store, os.path.join(folder, name), skipped):
                continue
            full = Path(folder, name)
            shown = shown_path(store, full)
            if exclude and _excluded(shown, exclude, rel):
                continue
            if os.path.islink(full):
                skipped.append(Skip(shown, "symbolic link: not followed"))
                continue
            yield Found(full, shown)


def _not_utf8(store: Store, full: str, skipped: list[Skip]) -> bool:
    """Whether the name is not UTF-8 (Python holds its bytes as surrogates, which no index, JSON or terminal
    takes: one such file stopped every run): skipped, named with its bytes written `\\xe9`."""
    try:
        full.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(shown_path(store, Path(full))).decode("utf-8", "backslashreplace")
        skipped.append(Skip(shown, "its name is not UTF-8: not indexed (rename it)"))
        return True
    return False


# ---------------------------------------------------------------- reading

class Unreadable(Exception):
    """A document that is skipped, and why (one line of `source status`)."""


def read(path: Path) -> tuple[os.stat_result, bytes, str]:
    """(stat, bytes, text) of a document; Unreadable for anything that is not a regular UTF-8
    text file of at most MAX_FILE_BYTES (or that is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Unreadable("deleted during indexing") from None
    except OSError as exc:
        raise Unreadable("symbolic link: not followed" if exc.errno == 40 else f"unreadable: {exc.strerror}") from None
    try:
        import stat as stat_mod  # noqa: PLC0415

        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise Unreadable(f"{st.st_size:,} bytes: over the cap of {MAX_FILE_BYTES >> 20} MiB per document")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"over the cap of {MAX_FILE_BYTES >> 20} MiB per document (it grew)")
    if b"\0" in data[:BINARY_PROBE]:
        raise Unreadable("binary (a NUL byte in its first 8 KiB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 (byte {exc.start})") from None
    if "\r" in text:  # Windows' CRLF and old Macs' lone CR end lines too (one line was the whole file): for chunks and `show` alike
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return st, data, text


# ---------------------------------------------------------------- show path:start-end

SPEC_RE = re.compile(r"^(?P<path>.+):(?P<start>\d+)(?:-(?P<end>\d+))?$")
MAX_SHOWN_LINES = 5000


def is_spec(text: str) -> bool:
    return SPEC_RE.match(text) is not None


def owner(store: Store, path: Path) -> Source | None:
    """The first declared source whose globs hold `path` (an absolute path, not resolved), or None."""
    for source in declared(store).values():
        shown = shown_path(store, path)
        exclude = [_translate(p) for p in source.exclude]
        if exclude and _excluded(shown, exclude):
            continue
        for pattern in source.paths:
            base, rest = _split(absolute(store, pattern))
            rests = [rest]
            if not rest:
                if os.path.isdir(base) and not os.path.islink(base):
                    rests = list(DEFAULT_GLOBS[source.kind])
                else:
                    if os.path.normpath(base) == str(path):
                        return source
                    continue
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            if rel.startswith("..") or (exclude and _excluded(shown, exclude, rel)):
                continue
            if any(part.startswith(".") for part in rel.split("/")):
                continue  # the walk takes no dot folder or file (.git/, .hidden/): neither does `show`
            if any(_translate(r).match(rel) for r in rests):
                return source
    return None


def passage_key(path: str, start: int, end: int) -> str:
    """A passage's key in the index and in the access log: `path:start-end`, the path as shown_path gives it."""
    return f"{path}:{start}-{end}"


def is_document(store: Store, raw: str) -> bool:
    """Whether `raw`, a path as recall prints it (or relative to the working directory), names a file a
    declared source holds, whether or not it exists: `show PATH` prints that document whole."""
    return _located(store, _unescaped(store, raw))[0] is not None


def _unescaped(store: Store, raw: str) -> str:
    """`raw` with `\\t`, `\\n`, `\\\\` taken back, as recall's table and --paths print a name holding a TAB,
    a newline or a backslash (unless a file has that very name)."""
    if "\\" in raw and not os.path.lexists(absolute(store, raw)):
        from .tsv import unescape  # noqa: PLC0415

        return unescape(raw)
    return raw


def _located(store: Store, raw: str) -> tuple[Source | None, Path]:
    """The source holding `raw` (None for none) and its absolute path: the store's relative path first,
    else the working directory's (as a shell takes it)."""
    path = Path(absolute(store, raw))
    source = owner(store, path)
    if source is None and not os.path.isabs(os.path.expanduser(raw)):
        here = Path(os.path.normpath(os.path.join(os.getcwd(), raw)))
        source = owner(store, here)
        path = here if source is not None else path
    return source, path


def lines(store: Store, spec: str) -> tuple[Source, str, int, int, str]:
    """(source, shown path, start, end, text) of `path:start-end`, or of the whole file for a `path` alone
    (both at most MAX_SHOWN_LINES lines): only a file a declared source holds, reached without a symbolic
    link or `..`; BadInput / NotFound / Refused otherwise."""
    found = SPEC_RE.match(spec)
    raw, start = (found.group("path"), int(found.group("start"))) if found else (spec, 1)
    raw = _unescaped(store, raw)
    end = int(found.group("end") or start) if found else None
    if start < 1 or (end is not None and end < start):
        raise BadInput(f"line range {start}-{end} is empty", hint="START and END count from 1, START <= END")
    if ".." in Path(raw).parts:
        raise Refused(f"{raw}: a path with '..' is not shown", hint="give the path as recall prints it")
    source, path = _located(store, raw)
    if source is None:
        raise Refused(f"{raw} is in no declared source",
                      hint="give the path as recall prints it (relative to the store, else absolute); memctl source list")
    from . import trust  # noqa: PLC0415

    trust.refuse_waiting(store, f"{trust.SOURCE_KEY}{source.name}", "nothing was shown")
    # No symbolic link on the way: from the store's root inside its tree, else from the source's folder
    # (the walk never follows one either).
    base = next((b for b in base_dirs(store, source) if not os.path.relpath(path, b).startswith("..")), None)
    probe = path
    link = _linked(store, str(path))
    while link is None and base is not None and len(str(probe)) >= len(base):
        if os.path.islink(probe):
            link = probe
        if str(probe) == base or probe.parent == probe:
            break
        probe = probe.parent
    if link is not None:
        raise Refused(f"{raw}: {shown_path(store, link)} is a symbolic link: not followed")
    if not os.path.exists(path):
        raise NotFound(f"{raw}: no such file", hint="memctl source index")
    try:
        _, _, text = read(path)
    except Unreadable as exc:
        raise Refused(f"{raw}: {exc}") from None
    all_lines = text.split("\n") if text else []  # (an empty file is no lines, not one empty line)
    if text.endswith("\n"):
        all_lines.pop()
    if end is None:  # the whole file
        end = len(all_lines)
    elif start > len(all_lines):
        raise BadInput(f"{raw} has {len(all_lines)} lines, not {start}", hint="memctl source index (the file changed?)")
    end = min(end, len(all_lines), start + MAX_SHOWN_LINES - 1)
    return source, shown_path(store, path), start, end, "".join(line + "\n" for line in all_lines[start - 1 : end])
