"""An adopted Claude Code memory directory: what Claude Code writes there itself.

Claude Code keeps writing its memory files (fact files at the top, lines it
appends to MEMORY.md) while memctl works in the same directory. memctl's next
write there, `doctor`, and the SessionStart hook first commit those changes
(files created, edited or deleted) as a commit of their own, authored
`claude-code`, before memctl's own change: so the history says who wrote what,
`doctor` stays clean and `remember --update` works. Only the top-level `*.md`
files of the memory directory are taken in: nothing outside it (a repository
above it, the user's other files) and nothing of memctl's own (its cache, the
sidecar, memctl.toml) ever is. MEMORY.md is taken in when all that changed
is its index lines (`- [Title](file.md) — hook`: appended, removed, edited) and
the headings it groups them under (a heading over index lines, `## Workflow`);
any other edit there is a person's, and memctl's write refuses as before, rather
than commit their draft under another name. docs/CLAUDE_CODE.md describes it.
"""

from __future__ import annotations

import os
from pathlib import Path

AUTHOR = ("claude-code", "claude-code@localhost")
MESSAGE = "claude-code: its own writes in the memory directory, taken in"


def claude_code_writes(store) -> tuple[list[Path], dict[Path, bytes]]:
    """The top-level markdown files of the memory directory that differ from HEAD (new, edited,
    deleted), and MEMORY.md's bytes when it is one of them: the very bytes checked to differ only in
    index lines, which are what is committed (Claude Code may be writing it again meanwhile)."""
    from . import gitstore

    top = gitstore.toplevel(store.root)
    if top is None:
        return [], {}
    memory, index = store.memory_dir.resolve(), store.index_path.resolve()
    found, contents = [], {}
    ours = _uncommitted_of_memctls(store)
    for entry in gitstore.dirty_paths(store.root, [store.memory_dir]):
        path = Path(os.path.normpath(top / entry.strip('"')))
        if path.parent != memory or path.suffix != ".md" or path.name.startswith(".") or path.is_symlink():
            continue  # (a link is no write of Claude Code's, and memctl never follows one: doctor names it)
        if path.name in ours and ours[path.name] == (_digest(path) or GONE):
            continue  # memctl's own write (or removal), left uncommitted (--no-commit), as memctl left it
        if path == index:
            data = _only_index_lines_changed(store, path)
            if data is None:
                continue
            contents[path] = data
        found.append(path)
    return sorted(set(found)), contents


UNCOMMITTED = "uncommitted-writes.json"  # in .memctl/: {file name: sha256 of the bytes memctl left there, or GONE}
GONE = "removed"  # a file memctl moved away without committing


def _digest(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _uncommitted_of_memctls(store) -> dict[str, str]:
    import json

    try:
        found = json.loads((store.cache_dir / UNCOMMITTED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(found, dict) else {}


def note_uncommitted(store, paths: list[Path]) -> None:
    """memctl wrote these files of the directory and commits nothing (--no-commit): noted with their
    bytes, so the next command does not take them in as Claude Code's writes (while they stay as
    memctl left them). Machine-local, in .memctl/; an entry whose file changed since is dropped."""
    import hashlib
    import json

    from .fsutil import atomic_write, written_bytes

    memory = store.memory_dir.resolve()
    noted = {name: digest for name, digest in _uncommitted_of_memctls(store).items()
             if _digest(store.memory_dir / name) == (None if digest == GONE else digest)}
    for path, data in written_bytes(paths).items():  # (not a file of Claude Code's the commit would take along)
        if path.resolve().parent == memory and path.suffix == ".md":
            noted[path.name] = hashlib.sha256(data).hexdigest()
    for path in map(Path, paths):  # a fact memctl moved away (forget, supersede): its removal is memctl's too
        if path.suffix == ".md" and path.parent.resolve() == memory and not os.path.lexists(path):
            noted[path.name] = GONE
    if noted or (store.cache_dir / UNCOMMITTED).exists():
        try:
            atomic_write(store.cache_dir / UNCOMMITTED, json.dumps(noted, ensure_ascii=False, sort_keys=True) + "\n")
        except OSError:
            pass  # a note for the next command's benefit: its loss makes nothing wrong that was right


def _only_index_lines_changed(store, path: Path) -> bytes | None:
    """MEMORY.md's bytes when they differ from HEAD only in index lines (added, removed or edited), else None."""
    from . import gitstore

    before = gitstore.committed_text(store.root, path)
    try:
        data = path.read_bytes()
        now = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    from .fsutil import without_bom  # a byte-order mark is no prose: the index line after it is one

    return data if before is not None and _prose(without_bom(before)) == _prose(without_bom(now)) else None


def _prose(text: str) -> list[str]:
    """MEMORY.md without its index lines, blank lines and what memctl writes around them (the block's
    markers and its `## type` headings: Claude Code rewriting the whole file from a copy it read before
    the block was there leaves them out), and without line endings (Claude Code on Windows rewrites the
    whole file with CRLF, which changes no line's text)."""
    from . import index

    text = text.replace("\r\n", "\n")
    numbers = {line.lineno for line in index.parse_lines(text)} | index.frame_lines(text)
    lines = text.split("\n")
    return [line for number, line in enumerate(lines, start=1)
            if number not in numbers and line.strip() and not _heads_index_lines(lines, number, numbers)]


def _heads_index_lines(lines: list[str], number: int, listed: set[int]) -> bool:
    """Whether line `number` (from 1) is a heading with an index line under it, before any other text:
    the index's structure (`## Workflow` over Claude Code's lines), not a person's note (`## My draft`)."""
    from . import index

    if not index.is_heading(lines[number - 1]):
        return False
    for below in range(number + 1, len(lines) + 1):  # (a heading over headings over index lines heads them too)
        if below in listed:
            return True
        if lines[below - 1].strip() and not index.is_heading(lines[below - 1]):
            return False
    return False


def take_in(store) -> str | None:
    """Commit Claude Code's own writes (see the module docstring); the commit id, or None when there were
    none or memctl commits nothing here. Call it holding the store lock, before the command's change."""
    from . import gitstore
    from .errors import GitError
    from .store import will_commit

    if store.layout != "claude":
        return None
    try:
        if will_commit(store) is None:
            return None
    except GitError:  # no usable git here: nothing can be taken in; a command that commits says so itself
        return None
    paths, contents = claude_code_writes(store)
    if not paths:
        return None
    return gitstore.commit(store.root, paths, MESSAGE, gitstore.Author(*AUTHOR), contents, their_change=True)


def take_in_now(store, wait: float | None = None) -> str | None:
    """take_in under the store lock, for commands that write nothing else (`doctor`, the SessionStart
    hook); an interrupted command's change is left for the next write (or `doctor --fix`) to settle.
    `wait`: give up after that many seconds of another process holding the store lock, or at once
    while a live git holds the repository's index.lock (the hook's bundle matters more than this)."""
    from .errors import MemctlError
    from .fsutil import file_lock

    if store.layout != "claude":
        return None
    try:
        if wait is not None and git_busy(store):
            return None
        with file_lock(store.cache_dir / "lock", wait):
            return take_in(store)
    except (MemctlError, OSError):  # a read-only directory, git refusing: doctor names what stays uncommitted
        return None


def git_busy(store) -> bool:
    """A live git (or memctl) holds the repository's index.lock (a stale one is removed, with a warning)."""
    from . import gitstore

    found = gitstore.git_dir(store.root)  # (no git run: the common case, no lock, costs one stat)
    if found is None or not (found / "index.lock").exists():
        return False
    top = gitstore.toplevel(store.root)
    return top is not None and not gitstore.remove_stale_lock(top, found / "index.lock")


# ---------------------------------------------------------------- Claude Code's dialect, and the sidecar

SIDECAR = "memctl-facts.tsv"  # in the directory, committed; union-merged (docs/FORMAT.md)
SIDECAR_COLUMNS = ("ts", "file", "title", "key", "value")
CLAUDE_KEYS = ("name", "description", "type")  # what Claude Code writes at the top of a fact's frontmatter
# What Claude Code 2.1 keeps under a fact's `metadata:` besides `type` (when it edits a memory file it has
# not stamped yet, it moves every other top-level key there, adds these and makes `name` a slug): never
# memctl's, so they stay in the file whatever memctl writes.
CLAUDE_METADATA = ("node_type", "originSessionId")
TITLE_CHARS = 100  # a title (`name`) longer than this is refused for a new fact, named by doctor


def claude_slug(title: str) -> str:
    """The `name` Claude Code 2.1 leaves for a title when it edits the file: the title itself when it is
    a slug of a-z 0-9 _ -, else lower-cased with each run of other characters one `-`, trimmed (so a
    title in Japanese becomes "")."""
    import re

    if re.fullmatch(r"[a-z0-9_-]+", title):
        return title
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def claude_stem(title: str, fact_type: str) -> str:
    """A file stem in Claude Code's style for a fact titled `title`: the title itself when it is a slug,
    else `<type>_<ascii words>` (`<type>_<8 hex>` for a title in Japanese only)."""
    import hashlib
    import re

    from .fact import NAME_RE

    if NAME_RE.match(title):
        return title
    words = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60]
    return f"{fact_type}_{words or hashlib.sha1(title.encode('utf-8')).hexdigest()[:8]}"


def linked_topics(store) -> frozenset[str]:
    """The file names MEMORY.md links to at the top of the directory: Claude Code's topic files. Only
    such a file is read as a fact when it has no frontmatter (fact.plain_fact); CLAUDE.md, a README or an
    empty file beside them stays what it is."""
    if store.layout != "claude":
        return frozenset()
    return frozenset(line.target for line in _top_links(store))


def _top_links(store) -> list:
    """MEMORY.md's index lines that link a file beside it ([] when it is missing, a link or too big)."""
    from .fsutil import INDEX_LIMIT, read_bounded
    from .index import parse_lines

    try:
        text = read_bounded(store.index_path, INDEX_LIMIT, "an index file").decode("utf-8", "replace")
    except (OSError, ValueError):
        return []
    return [line for line in parse_lines(text) if "/" not in line.target]


def dated_by_git(store, facts: list) -> list:
    """The facts, each one with no `updated` or `created` (Claude Code writes none) dated in memory by
    the last commit that changed its file, or now when it has changes not committed yet: so the index
    ranks it by when it was written (not after every dated fact, then by file name), and `recall
    --since` and recency see it. One `git status`, and one walk of the folder's history when an
    undated file is committed."""
    from dataclasses import replace
    from datetime import datetime

    from . import clock, gitstore

    undated = [f for f in facts if not (f.meta("updated") or f.meta("created")) and f.path is not None
               and isinstance(f.front.get("metadata") or {}, dict)]  # (an odd `metadata:` of the file's own stays)
    top = gitstore.toplevel(store.root) if undated and gitstore.git_executable() is not None else None
    if top is None:
        return facts
    rel = {f.stem: Path(os.path.relpath(f.path, top)).as_posix() for f in undated}  # as git prints them
    dirty = set(gitstore.dirty_paths(store.root, [f.path for f in undated]))
    committed = [f.path for f in undated if rel[f.stem] not in dirty]  # (only their history is walked)
    times = gitstore.last_commit_times(store.root, committed)
    now = clock.now().timestamp()
    dated = {}
    for fact in undated:
        when = times.get(rel[fact.stem], now)  # (a file with uncommitted changes was not walked: now)
        stamp = datetime.fromtimestamp(when).astimezone().isoformat(timespec="seconds")
        dated[fact.stem] = replace(fact, front={**fact.front, "metadata": {**(fact.front.get("metadata") or {}), "updated": stamp}})
    return [dated.get(f.stem, f) if f is not None else None for f in facts]


def _sidecar_rows(store) -> list[dict[str, str]]:
    from .tsv import unescape

    path = store.memory_dir / SIDECAR
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    rows = [dict(zip(SIDECAR_COLUMNS, map(unescape, line.split("\t")))) for line in lines[1:] if line.strip()]
    return sorted((r for r in rows if r.get("key")), key=lambda r: r.get("ts", ""))  # stable: file order within a ts


def overlay(store, facts: list, present: set[str] | None = None) -> list:
    """Facts with what the sidecar keeps for them as their `metadata` (in memory only): found by file,
    else by title (a file Claude Code renamed: gone, and not archived). Latest row per key wins; a
    null value removes."""
    import json
    from dataclasses import replace

    if store.layout != "claude":
        return facts
    rows = _sidecar_rows(store)
    by_file: dict[str, dict] = {}
    titles: dict[str, str] = {}
    file_titles: dict[str, str] = {}  # the latest title a row gives each file
    for row in rows:
        values = by_file.setdefault(row["file"], {})
        try:
            values[row["key"]] = json.loads(row.get("value") or "null")
        except ValueError:
            continue
        if row.get("title"):
            titles[row["title"]] = row["file"]
            file_titles[row["file"]] = row["title"]
    present = present if present is not None else {f.file_name for f in facts}
    result = []
    slugged: dict[str, list[str]] = {}  # Claude Code 2.1's slug of each title -> the titles
    for title in titles:
        slugged.setdefault(claude_slug(title), []).append(title)
    listed: dict[str, str] | None = None  # MEMORY.md's link titles, read once and only when a fact needs one
    for fact in facts:
        title = file_titles.get(fact.file_name)
        if title is None and _slugged(fact):  # a fact Claude Code wrote, then slugged: its index line's title
            listed = _listed_titles(store) if listed is None else listed
            title = listed.get(fact.file_name)
        fact = _titled(fact, title)
        values = by_file.get(fact.file_name)
        if values is None and fact.name not in titles and len(slugged.get(fact.name, ())) == 1 and fact.name:
            fact = _titled(fact, slugged[fact.name][0])  # a renamed file whose `name` Claude Code made a slug
        was = titles.get(fact.name)
        if values is None and was and was not in present and not (store.archive_dir / was).exists():
            values = by_file.get(was)  # (a fact forgotten or superseded keeps its own: a new one of its title starts afresh)
        if not values:
            result.append(fact)
            continue
        own = fact.front.get("metadata") if isinstance(fact.front.get("metadata"), dict) else {}
        merged = {k: v for k, v in values.items() if v is not None and k not in fact.front}
        result.append(replace(fact, front={**fact.front, "metadata": {**merged, **own}}))
    return result


def _slugged(fact) -> bool:
    """Whether the file's `name` is none, or a slug Claude Code 2.1 left of a title it edited (it stamps the
    file `metadata: node_type` / `originSessionId` then): a `name: deploys` written so is a name of its own."""
    name = fact.front.get("name")
    if name is None or name == "":
        return True
    meta = fact.front.get("metadata")
    stamped = isinstance(meta, dict) and any(key in meta for key in CLAUDE_METADATA)
    return stamped and isinstance(name, str) and claude_slug(name) == name


def _listed_titles(store) -> dict[str, str]:
    """{file name: the title of its link} for MEMORY.md's lines that link a file beside it."""
    return {line.target: line.title for line in _top_links(store) if line.title.strip()}


def _titled(fact, title: str | None):
    """`fact` named by its title again (in memory) where Claude Code 2.1 left only a slug of it in the
    file (`name: ""` for a title in Japanese, `deploy-rules` for `Deploy rules`): the title the sidecar
    last recorded for the file, else (no name at all) the file stem."""
    from dataclasses import replace

    name = fact.front.get("name")
    name = "" if name is None else str(name)
    if name and not (title and name != title and claude_slug(title) == name):
        return fact
    return replace(fact, front={"name": title or name or fact.stem, **{k: v for k, v in fact.front.items() if k != "name"}})


def write_fact(store, fact, before=None, file_keys: frozenset[str] = frozenset()) -> list[Path]:
    """Write a fact; in an adopted directory only Claude Code's keys go into its file — `name`,
    `description`, `type`, and what the file itself keeps under `metadata:` (Claude Code 2.1's
    `type`, `node_type`, `originSessionId`: CLAUDE_METADATA; a person's own; `file_keys` for a file not
    written yet) — and every other key becomes rows of the sidecar. The paths written."""
    from . import fact as fact_mod
    from .fsutil import atomic_write

    if store.layout != "claude":
        _warn_comments(store, fact.path)
        atomic_write(fact.path, fact_mod.render(fact))
        return [fact.path]
    on_disk = _on_disk(fact.path)
    meta = dict(fact.front.get("metadata") or {}) if isinstance(fact.front.get("metadata"), dict) else {}
    front = {k: v for k, v in fact.front.items() if k != "metadata"}
    left = on_disk.front.get("name", None) if on_disk is not None else None
    if on_disk is not None and left != fact.name and (not left or left == claude_slug(fact.name)):
        front.pop("name", None)  # the slug (or nothing) Claude Code left stays: the title is the sidecar's (_titled)
        front = {"name": left, **front} if "name" in on_disk.front else front
    in_file = _file_metadata(on_disk) | set(file_keys) | {k for k in CLAUDE_METADATA if k in meta}
    if in_file & set(CLAUDE_METADATA):
        in_file.add("type")  # (Claude Code 2.1 keeps it there)
    if "type" in meta and "type" not in front and "type" not in in_file:
        front["type"] = meta.pop("type")
    own = {k: meta.pop(k) for k in sorted(meta, key=lambda k: k != "node_type") if k in in_file}  # the file's own keys stay in it
    if own:
        front["metadata"] = own
    old = dict((before.front.get("metadata") or {})) if before is not None and isinstance(before.front.get("metadata"), dict) else {}
    changed = ({k: v for k, v in meta.items() if old.get(k) != v}
               | {k: None for k in old if k not in meta and k != "type" and k not in in_file})
    written = []
    if on_disk is None or front != on_disk.front or fact.body != on_disk.body:
        _warn_comments(store, fact.path)
        atomic_write(fact.path, fact_mod.render(fact_mod.Fact(fact.stem, front, fact.body, fact.archived, fact.path)))
        written.append(fact.path)  # (else the file stays byte for byte Claude Code's: its comments, its quotes)
    return written + _append_rows(store, fact, changed)


def _on_disk(path):
    """The fact file as it is now (not overlaid with the sidecar), or None: missing, or unreadable."""
    from . import fact as fact_mod

    try:
        return fact_mod.load(path) if path is not None and path.exists() else None
    except (fact_mod.FactParseError, OSError):
        return None


def _file_metadata(on_disk) -> set[str]:
    """The keys the file itself holds under `metadata:` (Claude Code 2.1's, or a person's)."""
    meta = on_disk.front.get("metadata") if on_disk is not None else None
    return set(meta) if isinstance(meta, dict) else set()


def _append_rows(store, fact, changed: dict) -> list[Path]:
    """Rows of the sidecar for `fact` (a null value removes the key); the sidecar's path, or [] for none."""
    import json

    from . import clock
    from .fsutil import append_bytes
    from .tsv import escape

    if not changed:
        return []
    path = store.memory_dir / SIDECAR
    stamp = clock.stamp()
    lines = ["\t".join(map(escape, [stamp, fact.file_name, fact.name, key, json.dumps(value, ensure_ascii=False, default=str)]))
             for key, value in sorted(changed.items())]
    payload = ("" if path.exists() and path.stat().st_size else "\t".join(SIDECAR_COLUMNS) + "\n") + "".join(l + "\n" for l in lines)
    append_bytes(path, payload.encode("utf-8"))
    return [path]


def forget_rows(store, fact) -> list[Path]:
    """A fact leaves the directory (forget, supersede): what the sidecar keeps for its file is removed
    (null rows), so that a new fact written later under the same file name starts afresh rather than
    pinned and expired as the old one was. The archived copy keeps all of it in its own `metadata:`."""
    if store.layout != "claude":
        return []
    held: dict[str, bool] = {}
    for row in _sidecar_rows(store):  # (in time order: the latest row per key says whether it is held)
        if row.get("file") == fact.file_name:
            held[row["key"]] = (row.get("value") or "null") != "null"
    return _append_rows(store, fact, {key: None for key, present in held.items() if present})


def write_restored(store, fact) -> list[Path]:
    """A fact `restore` brings back into an adopted directory: its file with Claude Code's keys only
    (as before it was archived; the archived copy carries memctl's `metadata:`), and rows in the
    sidecar only for what it does not already keep for that file. The paths written."""
    from dataclasses import replace

    file_keys = _file_keys_of_archived(store, fact)
    bare = replace(fact, front=_claude_front(fact, file_keys))
    return write_fact(store, fact, before=overlay(store, [bare], present={fact.file_name})[0], file_keys=file_keys)


# The keys memctl writes into a fact's `metadata:` (docs/FORMAT.md): in an adopted directory they are the
# sidecar's, never the file's, so an archived copy's other keys came from the file (_file_keys_of_archived).
MEMCTL_METADATA = frozenset(("type", "importance", "confidence", "created", "updated", "source", "tags", "pinned",
                             "expires", "supersedes", "superseded_by", "valid_to", "archived", "archived_reason",
                             "archived_policy", "compressed", "full_text", "trigger", "version"))


def _file_keys_of_archived(store, fact) -> frozenset[str]:
    """The keys of an archived fact's `metadata:` that its file held (Claude Code 2.1's, a person's own
    `owner:`): neither one memctl writes nor one the sidecar ever held for that file. The archived copy
    keeps every key in one block; without this, restore moved a person's key into the sidecar."""
    meta = fact.front.get("metadata") if isinstance(fact.front.get("metadata"), dict) else {}
    kept = {row["key"] for row in _sidecar_rows(store) if row.get("file") == fact.file_name}
    return frozenset(k for k in meta if k not in MEMCTL_METADATA and k not in kept)


def _warn_comments(store, path) -> None:
    """A rewritten frontmatter loses the YAML comments a person wrote in it (YAML keeps no comments):
    said, with where the old text is, rather than done without a word."""
    import re

    from . import errors

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        return
    for line in lines[1:]:
        if line.rstrip("\r") in ("---", "..."):
            return
        unquoted = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "", line)
        if re.search(r"(?:^|\s)#", unquoted):
            errors.warn(f"{store.rel(path)}: the YAML comments in its frontmatter are not kept when memctl rewrites it",
                        hint="git keeps the old text (git log -p -- the file); put lasting notes in the body")
            return


def _claude_front(fact, file_keys: frozenset[str] = frozenset()) -> dict:
    """A fact's frontmatter with Claude Code's keys only: `type` at the top, and CLAUDE_METADATA (and
    `file_keys`, the file's own) under `metadata:` where the fact has them."""
    meta = fact.front.get("metadata") if isinstance(fact.front.get("metadata"), dict) else {}
    front = {k: v for k, v in fact.front.items() if k != "metadata"}
    own = {k: meta[k] for k in meta if k in file_keys and k not in CLAUDE_METADATA}
    if not any(k in meta for k in CLAUDE_METADATA):
        front = {**front, "type": meta["type"]} if "type" in meta and "type" not in front else front
        return {**front, "metadata": own} if own else front
    return {**front, "metadata": {**{k: meta[k] for k in ("node_type", "type", *CLAUDE_METADATA[1:]) if k in meta},  # as 2.1 writes it
                                  **own}}
