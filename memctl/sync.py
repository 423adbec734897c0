"""Several machines, one memory: fetch, merge and resolve, push over git remotes (docs/SYNC.md).

The resolvers are the pure functions of merge.py. They run in two ways: as
git merge drivers (registered by `init` and `memctl sync --setup`), so that a
plain `git pull` resolves memctl's files; and here, in-process, on the three
versions git leaves staged when `sync` merges with those drivers switched off
(one Python per file would cost more than the merge). `sync` holds the store
lock from start to end, so no memctl write lands between its fetch and its push.
When there is nothing to do, sync_fast.py answers first (its checks are these).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from . import errors, gitstore, merge
from .errors import BadInput, GitError, MemctlError, NotFound, Refused, warn
from .fsutil import (FACT_LIMIT, INDEX_LIMIT, shell_word, atomic_write, dead_temp, keep_for_undo, link_message, link_on_way, read_bounded, read_text, refuse_link,
                     rollback_to, savepoint, settle, without_bom, written)
from .claude_memory import SIDECAR, linked_topics
from .config import SETTINGS_LIMIT
from .index import TOPIC_DIR
from .store import CLAUDE_UNANCHORED, Store, add_lines
from .sync_fast import (LOG_NAME, Duplicate, Resolution, SyncResult, attribute_lines, branch, choose_remote, fetch,
                        remote_branch)

PUSH_ATTEMPTS = 3
INDEX_CLEAN = "block merged by line"
INDEX_UNCLEAN = "block merged by line; a line changed on both sides"


# ---------------------------------------------------------------- setup: attributes and drivers

_NO_SYNC_HINTS = {"no-git": "install git (or name it in MEMCTL_GIT)", "git-fails": "check that this git runs (MEMCTL_GIT, PATH)"}


def _work_tree(store: Store) -> Path:
    """The work tree sync works in; GitError when git is missing or failing, or there is no repository."""
    try:
        return gitstore.work_tree(store.root)
    except GitError as exc:
        raise GitError(f"{exc.message}; nothing was synced",
                       hint=_NO_SYNC_HINTS.get(exc.kind or "", "git init, or clone the store's remote")) from None


def setup(store: Store) -> list[str]:
    """Write the attributes and register the drivers in this clone; return what changed (idempotent).

    `.gitattributes` (committed) keeps ledgers on git's own `merge=union`, which
    works in a clone that was never set up; `.git/info/attributes` (this clone
    only) sends them to memctl's ledger driver, which is registered beside it.
    """
    _work_tree(store)  # no repository, no git: one line before anything is written
    changed: list[str] = []
    if add_lines(store.root / ".gitattributes", "\n".join(attribute_lines(store)),
                 replacing=CLAUDE_UNANCHORED if store.layout == "claude" else None):
        changed.append(".gitattributes")
    changed += gitstore.register_merge_drivers(store.root, attribute_lines(store))
    return changed


# ---------------------------------------------------------------- the merge driver

def _log(top: Path, kind: str, path: str, how: str) -> None:
    gitdir = gitstore.git_dir(top)
    if gitdir is None:
        return
    with open(gitdir / LOG_NAME, "a", encoding="utf-8") as handle:
        handle.write(f"{kind}\t{path}\t{how}\n")


def run_driver(kind: str, base: Path, ours: Path, theirs: Path, path: str, cwd: Path | None = None) -> str:
    """Resolve one file for git (`%O %A %B %P`): the result goes to `ours`; return what was done."""
    if kind not in merge.KINDS:
        raise BadInput(f"unknown merge driver kind {kind!r}", hint="one of " + ", ".join(merge.KINDS))
    cwd = Path.cwd() if cwd is None else cwd
    b, o, t = (p.read_bytes() if p.exists() else b"" for p in (base, ours, theirs))
    if kind == "ledger":
        atomic_write(ours, merge.merge_ledger(b, o, t))
        how = "union"
    else:
        bs, os_, ts = (x.decode("utf-8", "surrogateescape") for x in (b, o, t))
        if kind in merge.INDEX_MERGES:
            result, clean = merge.INDEX_MERGES[kind](bs, os_, ts)
            how = INDEX_CLEAN if clean else INDEX_UNCLEAN
        elif kind == "state":
            result = merge.merge_state(bs, os_, ts)
            how = "kept ours (newer)" if result == os_ else "took theirs (newer)"
        else:
            done = merge.merge_fact(bs, os_, ts)
            result, how = done.text, {"clean": "merged", "ours": "kept ours (newer)", "theirs": "took theirs (newer)"}[done.how]
            if done.loser is not None and kind == "fact":
                stem = Path(path).name[:-3] if path.endswith(".md") else Path(path).name
                copy = Path(path).parent / merge.CONFLICTS_DIR / merge.conflict_name(stem, done.loser)
                target = cwd / copy
                refuse_link(cwd, target)  # never written through a link a commit brought (git's pull holds no lock)
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, done.loser.encode("utf-8", "surrogateescape"))
                how += f"; the other version kept as {copy.as_posix()}"
        atomic_write(ours, result.encode("utf-8", "surrogateescape"))
    _log(cwd, kind, path, how)
    return how


# ---------------------------------------------------------------- sync

def _kind(store: Store, rel_top: str, top: Path) -> str | None:
    """Which resolver owns a path (relative to the work tree); None for files that are not memctl's."""
    path = (top / rel_top).resolve()
    if path == store.config_path:
        return "config"
    if path == store.index_path:
        return "index"
    if path.suffix == ".md" and path.parent == store.index_path.parent / TOPIC_DIR:
        return "topic"
    if path.suffix == ".md" and path.parent == store.memory_dir:
        return "fact"
    if path.suffix == ".md" and path.parent == store.archive_dir:
        return "archive"
    if path.parent == store.memory_dir / merge.CONFLICTS_DIR:
        return "copy"
    if path.suffix == ".tsv" and path.parent == store.ledgers_dir:
        return "ledger"
    if path.name == "STATE.md" and store.state_dir in path.parents:
        return "state"
    if path.name == SIDECAR and path.parent == store.memory_dir:
        return "sidecar"  # (Claude Code's directory: union-merged by git, never a link)
    return None


def _tracked(top: Path, rel: str) -> str:
    return gitstore.checked(top, "ls-files", "--", rel)


def _refuse_hand_edits(store: Store, top: Path, dirty: list[str]) -> None:
    """Uncommitted changes to memctl's files would be swept into the merge: refuse, as every write does.

    Rows appended without a commit (`--no-commit`, the access log) are not hand
    edits, nor are conflict copies a plain `git pull` left untracked: they are
    committed first (`ledger commit` does the same for rows).
    """
    appended: list[Path] = []
    copies = store.memory_dir / merge.CONFLICTS_DIR
    for rel in dirty:
        path = top / rel
        if dead_temp(path.name) and not _tracked(top, rel):
            path.unlink(missing_ok=True)  # a killed writer's temp file: nobody's content
            continue
        if path.parent == copies and path.suffix == ".md" and rel not in _tracked(top, rel):
            appended.append(path)
            continue
        if path.suffix == ".tsv" and path.parent == store.ledgers_dir and path.exists():
            committed = gitstore.file_at(store.root, path, "HEAD")
            if path.read_bytes().startswith(committed):
                appended.append(path)
                continue
        raise Refused(f"{store.rel(path)} has uncommitted changes; nothing was fetched or merged",
                      hint=f"commit or discard them first ({gitstore.git_c(store.root)} status), then memctl sync")
    if appended:
        from .store import commit  # noqa: PLC0415

        rows = [p for p in appended if p.suffix == ".tsv"]
        what = " and ".join(w for w, there in ((f"rows appended to {', '.join(store.rel(p) for p in rows)}", rows),
                                                ("conflict copies", len(rows) < len(appended))) if there)
        commit(store, appended, f"memctl: commit {what} before sync")


def _blob(top: Path, sha: str | None) -> bytes:
    if sha is None:
        return b""
    return gitstore.blob(top, sha)


def _unmerged(top: Path) -> dict[str, dict[int, str]]:
    found: dict[str, dict[int, str]] = {}
    for entry in gitstore.checked(top, "ls-files", "-u", "-z").split("\0"):
        if not entry:
            continue
        info, _, path = entry.partition("\t")
        _, sha, stage = info.split()
        found.setdefault(path, {})[int(stage)] = sha
    return found


def _write(top: Path, rel: str, data: bytes | None) -> None:
    path = top / rel
    if data is None:
        if path.exists():
            path.unlink()
        gitstore.checked(top, "rm", "-q", "--cached", "--ignore-unmatch", "--", rel)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    gitstore.checked(top, "add", "--", rel)


def _merged_attributes(store: Store, ours: bytes | None, theirs: bytes | None) -> bytes:
    """`.gitattributes` changed on both sides: theirs, then the lines only ours has, then memctl's own
    lines that are missing (a remote that rewrote the file left every later sync stuck on it). The routing
    that matters is in .git/info/attributes, which this clone alone writes (setup)."""
    def lines(data: bytes | None) -> list[str]:
        return data.decode("utf-8", "surrogateescape").splitlines() if data else []

    kept = lines(theirs)
    kept += [line for line in dict.fromkeys(lines(ours) + attribute_lines(store)) if line.strip() and line not in kept]
    return ("\n".join(kept) + "\n").encode("utf-8", "surrogateescape")


def _resolve_unmerged(store: Store, top: Path) -> list[Resolution]:
    """What git left unmerged (tree-level conflicts, or a clone whose drivers are missing)."""
    unmerged = _unmerged(top)
    kinds = {path: _kind(store, path, top) for path in unmerged}
    done: list[Resolution] = []
    for path in [p for p, k in kinds.items() if k == "config" and {1, 2, 3} <= set(unmerged[p])]:
        b, o, t = (_blob(top, unmerged[path][n]).decode("utf-8", "surrogateescape") for n in (1, 2, 3))
        merged = merge.merge_config(b, o, t)
        if merged is not None:
            _write(top, path, merged.encode("utf-8", "surrogateescape"))
            done.append(Resolution(store.rel(top / path), "config", "both sides appended tables: ours, then theirs"))
            del unmerged[path]
    attributes = os.path.realpath(store.root / ".gitattributes")
    for path in [p for p in unmerged if os.path.realpath(top / p) == attributes]:
        _write(top, path, _merged_attributes(store, *(_blob(top, unmerged[path].get(n)) if n in unmerged[path] else None
                                                      for n in (2, 3))))
        done.append(Resolution(store.rel(top / path), "attributes", "theirs, then our other lines, then memctl's"))
        del unmerged[path]
    blocked = sorted(p for p in unmerged if kinds[p] in (None, "config"))
    if blocked:  # _merge aborts the merge
        names = ", ".join(blocked[:3]) + (f" and {len(blocked) - 3} more" if len(blocked) > 3 else "")
        hint = (f"merge it by hand: {gitstore.git_c(store.root)} pull --no-rebase, fix memctl.toml, git commit; then memctl sync"
                if "config" in {kinds[p] for p in blocked} else
                "these are not memctl's files: merge by hand (git pull --no-rebase, fix, git commit), then memctl sync")
        raise Refused(f"both sides changed {names} in ways git cannot merge; nothing was merged or pushed", hint=hint)
    for path, stages in sorted(unmerged.items()):
        kind = kinds[path]
        base, ours, theirs = (_blob(top, stages.get(n)) if n in stages else None for n in (1, 2, 3))
        rel = store.rel(top / path)
        if ours is not None and theirs is not None:
            b = base or b""
            if kind in ("ledger", "sidecar"):  # both append-only TSV: every row of both sides
                _write(top, path, merge.merge_ledger(b, ours, theirs))
                done.append(Resolution(rel, kind, "union"))
                continue
            bs, os_, ts = (x.decode("utf-8", "surrogateescape") for x in (b, ours, theirs))
            if kind in merge.INDEX_MERGES:
                text, clean = merge.INDEX_MERGES[kind](bs, os_, ts)
                _write(top, path, text.encode("utf-8", "surrogateescape"))
                done.append(Resolution(rel, kind, INDEX_CLEAN if clean else INDEX_UNCLEAN))
            elif kind == "state":
                text = merge.merge_state(bs, os_, ts)
                _write(top, path, text.encode("utf-8", "surrogateescape"))
                done.append(Resolution(rel, kind, "kept ours (newer)" if text == os_ else "took theirs (newer)"))
            else:
                result = merge.merge_fact(bs, os_, ts)
                _write(top, path, result.text.encode("utf-8", "surrogateescape"))
                how = {"clean": "merged", "ours": "kept ours (newer)", "theirs": "took theirs (newer)"}[result.how]
                if result.loser is not None and kind == "fact":
                    copy = _keep_copy(store, top, path, result.loser)
                    how += f"; the other version kept as {store.rel(copy)}"
                done.append(Resolution(rel, kind, how))
            continue
        present = ours if ours is not None else theirs
        side = "ours" if ours is not None else "theirs"
        if kind == "fact" and present is not None and present != base:
            # Archived (or deleted) on one side, changed on the other: the archiving stands,
            # the changed version is kept as a conflict so that nothing is lost.
            copy = _keep_copy(store, top, path, present.decode("utf-8", "surrogateescape"))
            _write(top, path, None)
            gone = "archived" if (store.archive_dir / Path(path).name).exists() else "deleted"  # (by hand, or a plain git rm)
            done.append(Resolution(rel, kind, f"{gone} on one side, changed on the other: {side} kept as {store.rel(copy)}"))
        elif present is not None and kind != "fact":
            _write(top, path, present)
            done.append(Resolution(rel, kind, f"kept {side} (the other side removed it)"))
        else:
            _write(top, path, None)
            done.append(Resolution(rel, kind, "removed (unchanged on the side that kept it)"))
    return done


def _keep_copy(store: Store, top: Path, path: str, text: str) -> Path:
    stem = Path(path).name[:-3]
    copy = store.memory_dir / merge.CONFLICTS_DIR / merge.conflict_name(stem, text)
    _write(top, os.path.relpath(copy, top), text.encode("utf-8", "surrogateescape"))
    return copy


def _regenerate_index(store: Store, top: Path) -> bool:
    """MEMORY.md and its topic files from the merged facts (the same code as every write), staged."""
    from . import facts  # noqa: PLC0415

    touched, changed = facts.update_index(store, facts.live_facts(store, quiet=True))
    if changed:
        gitstore.checked(top, "add", "-A", "--", *(os.path.relpath(p, top) for p in touched))
    return changed


def _facts_gone(store: Store, incoming: list[Path]) -> list[str]:
    """The fact files the merge took away (the other side deleted them by hand, or with Claude Code) whose
    line MEMORY.md still has (a fact archived there took its line with it)."""
    gone = {p.name: p for p in incoming if p.suffix == ".md" and p.parent == store.memory_dir
            and p != store.index_path and not os.path.lexists(p)}
    if not gone:
        return []
    from .index import parse_lines  # noqa: PLC0415

    try:
        text = store.index_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return sorted({store.rel(gone[line.target]) for line in parse_lines(text) if line.target in gone})


def _gone_line(gone: list[str]) -> str:
    return f"{', '.join(gone[:3])}{f' and {len(gone) - 3} more' if len(gone) > 3 else ''} deleted on the other side"


def _read_log(top: Path, store: Store) -> list[Resolution]:
    gitdir = gitstore.git_dir(top)
    log = gitdir / LOG_NAME if gitdir else None
    if log is None or not log.exists():
        return []
    found = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3:
            found.append(Resolution(store.rel(top / parts[1]), parts[0], parts[2]))
    log.unlink()
    return found


def _refuse_incoming(store: Store, top: Path, head: str, theirs: str, label: str) -> None:
    """What no merge may take in from `theirs` since the last commit both sides share: a ledger row lost or
    a damaged one appended (_refuse_rewritten_ledgers), a file of memctl's added as or turned into a
    symbolic link, a file (or link) where this machine's .memctl/ folder is. Refused before anything is
    merged (a fast-forward included)."""
    base = gitstore.run(top, "merge-base", head, theirs).out.strip()
    if not base:
        return  # unrelated histories: the merge refuses them
    # Where this machine keeps its own state: a file or link there would replace its folder (git deletes
    # .memctl/ to write one) or lead its writes elsewhere (cron's `>>logs/NAME.stdout.log` follows a link).
    for folder, what in ((store.cache_dir, "its local state (the store lock, the undo log, caches)"),
                         (store.root / "logs", "its job logs (cron and launchd write there)")):
        local = os.path.relpath(folder, top)
        entry = gitstore.run(top, "ls-tree", "-z", theirs, "--", local).out.split("\0")[0]
        if entry and not entry.startswith("040000 "):
            shape = "a symbolic link" if entry.startswith("120000 ") else "a file"
            raise Refused(f"{label} tracks {store.rel(folder)} as {shape}, where this machine keeps {what}; "
                          "nothing was merged or pushed", kind="local-state-incoming",
                          hint=f"on the remote, remove it: git rm --cached -- {shell_word(local)}, commit and push; then memctl sync")
    logs = os.path.relpath(store.root / "logs", top)
    brought = gitstore.run(top, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", base, theirs, "--",
                           logs).out.split("\0")[0]  # (what it stops tracking there, as the hint asks, is no harm)
    if brought:  # git overwrites ignored files: a pushed log file, or a link cron's `>>` follows out of the store
        raise Refused(f"{label} tracks {store.rel(top / brought)}, in logs/, where this machine's jobs write (cron and "
                      "launchd append there); nothing was merged or pushed", kind="local-state-incoming",
                      hint=f"on the remote, remove it: git rm -r --cached -- {shell_word(logs)}, commit and push; then memctl sync")
    ours = [os.path.relpath(p, top) for p in (store.memory_dir, store.ledgers_dir, store.state_dir, store.config_path)]
    raw = gitstore.run(top, "diff", "--raw", "-z", "--no-renames", base, theirs, "--", *ours).out.split("\0")
    folders = {store.memory_dir, store.archive_dir, store.ledgers_dir, store.state_dir,
               store.index_path.parent / TOPIC_DIR, store.memory_dir / merge.CONFLICTS_DIR}  # a file there replaces one
    for meta, rel in zip(raw[::2], raw[1::2]):
        modes = meta.lstrip(":").split(" ")[:2]
        if len(modes) == 2 and modes[1] != "000000":
            _refuse_reshaped(store, top, rel, modes[1], base, label, folders)
        if len(modes) == 2 and modes[0] == "000000" and modes[1] == "120000" and _kind(store, rel, top):
            raise Refused(f"{label} adds {store.rel(top / rel)} as a symbolic link (memctl never follows one); "
                          "nothing was merged or pushed", kind="link-incoming",
                          hint=f"on the remote, remove it: git rm -- {shell_word(rel)}, commit and push; then memctl sync")
        if len(modes) == 2 and modes[0].startswith("100") and modes[1] == "120000" and _kind(store, rel, top):
            raise Refused(f"{label} turned {store.rel(top / rel)} into a symbolic link (memctl never follows one); "
                          "nothing was merged or pushed", kind="link-incoming",
                          hint=f"on the remote, put the file back: git checkout {base[:12]} -- {shell_word(rel)}, "
                               "commit and push; then memctl sync")
        if len(modes) == 2 and modes[1].startswith("100") and _nul_refused(store, top / rel) \
                and b"\0" in gitstore.file_at(top, top / rel, theirs):
            raise Refused(f"{label} has a NUL byte in {store.rel(top / rel)} (git and grep take the file for binary, "
                          "and memctl would push it back); nothing was merged or pushed", kind="nul-incoming",
                          hint=f"on the remote, take the NUL byte out of {rel} in a new commit, then memctl sync")
    _refuse_rewritten_ledgers(store, top, base, theirs, label)  # (after the links: a link's text is no ledger)
    _refuse_oversized_settings(store, top, base, theirs, label)
    _refuse_unloadable_config(store, top, base, theirs, label)
    _refuse_unwritable_index(store, top, base, theirs, label)


def _refuse_oversized_settings(store: Store, top: Path, base: str, theirs: str, label: str) -> None:
    """Refused, unread: a memctl.toml or .gitattributes of `theirs` over the settings limit (a 400 MB file is
    2 MB packed). Taken in, every command of the clone read it (1.6 GB each), or refused to, sync included."""
    for path in (store.config_path, store.root / ".gitattributes"):
        rel = Path(os.path.relpath(path, top)).as_posix()
        size = gitstore.size_at(top, theirs, rel)
        if size is not None and size > SETTINGS_LIMIT and gitstore.run(top, "diff", "--quiet", base, theirs, "--", rel).code != 0:
            raise Refused(f"{label}'s {store.rel(path)} is {size:,} bytes, over the limit of "
                          f"{SETTINGS_LIMIT >> 20} MiB for settings; nothing was merged or pushed", kind="config-incoming",
                          hint=f"on the remote, take back the commit that made it so, then memctl sync; git log -p -- {shell_word(rel)} shows it")


def _refuse_unwritable_index(store: Store, top: Path, base: str, theirs: str, label: str) -> None:
    """Refused: a MEMORY.md of `theirs` that no write could regenerate (over the index limit, not UTF-8,
    its block markers damaged) where the base's could, or a topic file (memory-index/) over the limit. Taken in, it stopped every fact write of every
    clone (remember, forget, index, the MCP tools) until a person mended it by hand."""
    topics = Path(os.path.relpath(store.index_path.parent / TOPIC_DIR, top)).as_posix()
    for name in gitstore.run(top, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", base, theirs, "--",
                             topics).out.split("\0"):
        size = gitstore.size_at(top, theirs, name) if name.endswith(".md") else None  # a topic file (read as MEMORY.md is)
        if size is not None and size > INDEX_LIMIT:
            raise Refused(f"{label}'s {store.rel(top / name)} is {size:,} bytes, over the limit of {INDEX_LIMIT >> 20} MiB: "
                          "no write could regenerate the index; nothing was merged or pushed", kind="index-incoming",
                          hint="on the remote, take back the commit that made it so, then memctl sync")
    rel = Path(os.path.relpath(store.index_path, top)).as_posix()
    if gitstore.run(top, "diff", "--quiet", base, theirs, "--", rel).code == 0:
        return
    problem = _index_problem(top, theirs, rel)
    if problem is not None and _index_problem(top, base, rel) is None:
        raise Refused(f"{label}'s {store.rel(store.index_path)} {problem}: no write could regenerate it; nothing was "
                      "merged or pushed", kind="index-incoming",
                      hint=f"on the remote, mend {rel} in a new commit (or take back the commit that made it so), then memctl sync")


def _index_problem(top: Path, rev: str, rel: str) -> str | None:
    """What stops a write from regenerating MEMORY.md as `rev` has it (facts._refuse_damaged_index, read_index's
    limit), read unread past the limit; None when nothing does, or when `rev` has none."""
    from .facts import not_utf8_at  # noqa: PLC0415
    from .index import damaged_block  # noqa: PLC0415

    size = gitstore.size_at(top, rev, rel)
    if size is None:
        return None
    if size > INDEX_LIMIT:
        return f"is {size:,} bytes, over the limit of {INDEX_LIMIT >> 20} MiB"
    text = without_bom(gitstore.file_at(top, top / rel, rev).decode("utf-8", "surrogateescape"))
    if (bad := not_utf8_at(text)) is not None:
        return f"is not valid UTF-8 at line {bad[0]} (byte 0x{bad[1]:02x})"
    if (damaged := damaged_block(text)) is not None:
        return f"has a damaged generated block at line {damaged[0]}: {damaged[1]}"
    return None


def _nul_refused(store: Store, path: Path) -> bool:
    """memctl's text files that a merge writes whole (MEMORY.md and its topic files, STATE.md): a NUL in
    one would be taken in, regenerated around and pushed back. (A ledger row's: _refuse_rewritten_ledgers;
    a fact's: skipped with a warning, as any fact memctl cannot read.)"""
    return (path == store.index_path or path.parent == store.index_path.parent / TOPIC_DIR
            or (path.name == "STATE.md" and path.is_relative_to(store.state_dir)))


def _refuse_unloadable_config(store: Store, top: Path, base: str, theirs: str, label: str,
                              merged: bool = False) -> None:
    """Refused: a memctl.toml (`theirs`', or the merge's: `merged`) that memctl would not load, or with a
    job table it would not load. Taken in, it stopped every command (or every job) of this clone, `sync`
    included, so not even the remote's fix could come in."""
    rel = os.path.relpath(store.config_path, top)
    if merged:
        data = store.config_path.read_bytes() if store.config_path.is_file() else b""
    elif gitstore.run(top, "diff", "--quiet", base, theirs, "--", rel).code == 0:
        return
    else:
        data = gitstore.file_at(top, store.config_path, theirs)
    if not data:
        return
    from .config import check_text  # noqa: PLC0415
    from .jobs import check_declared  # noqa: PLC0415

    source = f"memctl.toml {'as merged with' if merged else 'of'} {label}"
    try:
        raw = check_text(data, source)
        try:  # a job table it would not load: every job of this clone (its maintenance too) refused to run
            check_declared(raw)
        except BadInput as exc:
            raise BadInput(exc.message.replace("memctl.toml:", f"{source}:", 1)) from None
        from .config_check import problems  # noqa: PLC0415

        # A section only its own command reads (recall, the STATE.md job...); a problem the common base already
        # had stops nothing new, so the fix can come in, but any other is refused.
        had = set(problems(store.root, _config_at(store, top, base), source))
        new = [problem for problem in problems(store.root, raw, source) if problem not in had]
        if new:
            raise BadInput(new[0])
    except BadInput as exc:
        raise Refused(f"{exc.message}; nothing was merged or pushed", kind="config-incoming",
                      hint=f"see `git -C {shlex.quote(str(store.root))} diff {base[:12]} {theirs[:12]} -- {rel}`; "
                           "on the remote, fix memctl.toml in a new commit, then sync") from None


def _config_at(store: Store, top: Path, rev: str) -> dict:
    """memctl.toml as `rev` has it, parsed as memctl reads it; {} when it is missing or does not load."""
    from .config import check_text  # noqa: PLC0415

    try:
        return check_text(gitstore.file_at(top, store.config_path, rev), "memctl.toml")
    except BadInput:
        return {}


def _refuse_reshaped(store: Store, top: Path, rel: str, mode: str, base: str, label: str, folders: set[Path]) -> None:
    """Refused: an incoming entry `rel` (git mode `mode`) that is a submodule (gitlink), a file where memctl
    keeps a folder (memory/ as a file: every fact gone, a fast-forward said nothing), or a path under one
    of memctl's files (memory/MEMORY.md or state/STATE.md made a folder: every later sync stuck, the
    session-start hook empty)."""
    shown = store.rel(top / rel)

    def undo(path: str) -> str:  # what brings `path` back as it was, when it was there at all
        there = gitstore.run(top, "cat-file", "-e", f"{base}:{path}").code == 0
        return f"; git checkout {base[:12]} -- {shell_word(path)}" if there else ""

    if mode == "160000":
        why, fix = f"adds {shown} as a submodule (a gitlink, no file)", f"git rm --cached -q -- {shell_word(rel)}{undo(rel)}"
    elif (top / rel).resolve() in folders:
        shape = "a symbolic link" if mode == "120000" else "a file"
        why, fix = f"turned {shown}/ into {shape}", f"git rm -q -- {shell_word(rel)}{undo(rel)}"
    else:
        parent = next((str(p) for p in reversed(Path(rel).parents) if str(p) != "." and _kind(store, str(p), top)), None)
        if parent is None:
            return
        why, fix = f"turned {store.rel(top / parent)} into a folder", f"git rm -rq -- {shell_word(parent)}{undo(parent)}"
    raise Refused(f"{label} {why}, where memctl keeps its own; nothing was merged or pushed", kind="reshaped-incoming",
                  hint=f"on the remote, put it back: {fix}, commit and push; then memctl sync")


LEDGER_GROWTH_LIMIT = 64 << 20  # bytes one sync takes in for one ledger (~240,000 episodes; a day adds a few KiB)


def _refuse_rewritten_ledgers(store: Store, top: Path, base: str, theirs: str, label: str) -> None:
    """Refused when `theirs` changed a ledger other than by appending lines to it since `base` (an old row
    removed or rewritten, the file deleted): ledgers are only appended to, and a merge (or a
    fast-forward) would take the loss in and push it on."""
    listed = gitstore.run(top, "diff", "--name-only", "-z", "--no-renames", base, theirs, "--",
                          os.path.relpath(store.ledgers_dir, top)).out
    ledgers = None
    for rel in (r for r in listed.split("\0") if r and _kind(store, r, top) == "ledger"):
        grown = (gitstore.size_at(top, theirs, rel) or 0) - (gitstore.size_at(top, base, rel) or 0)
        if grown > LEDGER_GROWTH_LIMIT:  # (read whole below, and by every reader of the ledger after it)
            raise Refused(f"{label} adds {grown:,} bytes to {store.rel(top / rel)} at once, over the limit of "
                          f"{LEDGER_GROWTH_LIMIT >> 20} MiB a sync takes in; nothing was merged or pushed",
                          kind="ledger-grown-incoming",
                          hint="a ledger grows by rows a day, not by that much at once: if they are wanted, take them in "
                               "with git pull (memctl reads them as any rows); else take them out on the remote")
        before = gitstore.file_at(top, top / rel, base)
        after = gitstore.file_at(top, top / rel, theirs)
        line = merge.lost_line(before, after)
        if line is not None:
            raise Refused(f"{label} rewrote or removed line {line} of {store.rel(top / rel)} (a ledger is only appended to); "
                          "nothing was merged or pushed", kind="ledger-rewritten",
                          hint=f"see `git -C {shlex.quote(str(store.root))} diff {base[:12]} {theirs[:12]} -- {rel}`; "
                               "put the lines back on the remote, then sync")
        if ledgers is None:
            from . import ledger_ops  # noqa: PLC0415
            from .ledger import list_ledgers  # noqa: PLC0415

            ledgers = {ledger.path: ledger for ledger in list_ledgers(store, quiet=True)}
        problem = ledger_ops.appended_damage(ledgers.get(top / rel), before, after, store.rel(top / rel))
        if problem is not None:  # taken in, it would stop every append here and could not be taken out (verify)
            raise Refused(f"{label} appends a damaged line to {problem}; nothing was merged or pushed",
                          kind="ledger-damaged-incoming",
                          hint=f"see `git -C {shlex.quote(str(store.root))} diff {base[:12]} {theirs[:12]} -- {rel}`; "
                               "on the remote, take that line out in a new commit (no clone that syncs took it in), then sync")


def _merge(store: Store, top: Path, author: gitstore.Author, theirs: str, label: str) -> tuple[str | None, list[Resolution], list[str]]:
    """Merge `theirs` into HEAD and resolve memctl's files; (merge commit or None, resolutions, new copies)."""
    copies_before = _copies(store)
    settle()  # memctl's files are committed (_refuse_hand_edits): the undo log holds this merge's writes alone
    message = f"{gitstore.SYNC_MERGE}{label}"  # in MERGE_MSG: a merge left by a killed sync is undone (store.py)
    # The drivers' work is done here, in this process, by the same functions: each driver is set to
    # `false` for this merge, so git leaves the three versions staged and starts no Python per file.
    inline = [arg for kind in merge.KINDS for arg in ("-c", f"merge.memctl-{kind}.driver=false")]
    # No rename detection: a fact forgotten on one side (memory/x.md moved to archive/) and changed on the
    # other is a delete against a change, resolved by the rule for it, not a "renamed and edited" file
    # whose archive copy would take the edit over the archiving (its `archived:` lines lost).
    inline += ["-c", "merge.renames=false"]  # (git 2.39's ort ignores it, and -X no-renames: hence -s recursive below)
    # A git that dies half-way through (a full disk; a kill) leaves some files as the other side has them and
    # no merge to abort: each file the merge may write is logged first, so that it is put back as it was.
    diff = gitstore.run(top, "diff", "--name-only", "-z", "--no-renames", "HEAD", theirs)
    incoming = [top / rel for rel in diff.out.split("\0") if rel] if diff.code == 0 else []
    mark = savepoint()
    keep_for_undo(incoming)
    temps_before = gitstore.merge_temp_files(top)
    gitstore.await_index(top, "merge")  # a stale index.lock (a killed git's) would fail the merge as "stash failed"
    gitstore.mark_sync_merge(top, theirs)
    done = gitstore.run(top, *inline, "merge", "--no-commit", "--no-edit", "--no-stat", "-s", "recursive", "-X", "no-renames",
                        "-m", message, theirs, author=author)
    merging = gitstore.unfinished_operation(store.root) == "merge"
    if done.code != 0:  # git's drivers' temp files, which a git that died leaves in the work tree: this merge's are removed
        for leftover in gitstore.merge_temp_files(top) - temps_before:
            leftover.unlink(missing_ok=True)
        if not merging:
            rollback_to(mark)
            gitstore.run(top, "reset", "-q", "--", *[os.path.relpath(p, top) for p in incoming])  # git's index as HEAD has it
    if done.code != 0 and not merging:
        if "unrelated histories" in done.err:
            raise Refused(f"{label} has no history in common with this store; nothing was merged or pushed",
                          hint=f"is the remote the right store? ({gitstore.git_c(store.root)} remote -v); to join two stores, merge them by hand")
        raise GitError(f"git merge failed: {gitstore.reason(done.err, done.out.strip())}",
                       hint=f"{gitstore.git_c(store.root)} status")
    resolved = _read_log(top, store)
    gone = _facts_gone(store, incoming)
    if not merging:  # a fast-forward (or nothing to merge): HEAD holds what git wrote
        settle()
        if gone and _regenerate_index(store, top):  # the remote deleted a fact and left its index line
            gitstore.checked(top, "commit", "-q", "--no-verify", "-m", f"memory: index (facts deleted on {label})",
                             author=author)
            settle()
            resolved.append(Resolution(store.rel(store.index_path), "index", f"regenerated: {_gone_line(gone)}"))
        return None, resolved, sorted(_copies(store) - copies_before)
    try:
        resolved += _resolve_unmerged(store, top)
        copies_dir = store.memory_dir / merge.CONFLICTS_DIR
        if copies_dir.is_dir():  # copies written by the fact driver
            gitstore.checked(top, "add", "-A", "--", os.path.relpath(copies_dir, top))
        # Both sides' indexes matched their facts: a block merged cleanly by line matches the merged
        # facts too, unless a fact itself needed resolving, or the facts overflow MEMORY.md's limit
        # (which lines go to the topic files is the ranking's to say); reading 10,000 facts is most of a sync.
        _refuse_unloadable_config(store, top, "HEAD", theirs, label, merged=True)
        if gone or any(r.kind in ("fact", "archive", "topic") or r.how == INDEX_UNCLEAN for r in resolved) or (
                any(r.kind == "index" for r in resolved) and _over_limit(store)):
            if _regenerate_index(store, top):
                resolved.append(Resolution(store.rel(store.index_path), "index", "regenerated from the merged facts"
                                           + (f" ({_gone_line(gone)})" if gone else "")))
        gitstore.checked(top, "commit", "-q", "--no-verify", "-m", message, author=author)
        settle()  # the merge's writes are committed: a failed push later must not put them back behind HEAD
    except BaseException:
        if gitstore.unfinished_operation(store.root) == "merge":
            # Not rolled back: the undo log holds the merge's own steps (memctl.toml as git left it,
            # with markers), not the files as they were; they were as HEAD has them (_refuse_hand_edits).
            gitstore.abort_merge(store.root, written())
            settle()
        raise
    return gitstore.checked(top, "rev-parse", "HEAD"), resolved, sorted(_copies(store) - copies_before)


def _over_limit(store: Store) -> bool:
    """Whether MEMORY.md as merged is over the lines or bytes Claude Code loads (config [facts] max_index_*)."""
    data = store.index_path.read_bytes() if store.index_path.exists() else b""
    return data.count(b"\n") > store.config.max_index_lines or len(data) > store.config.max_index_bytes


def _copies(store: Store) -> set[str]:
    folder = store.memory_dir / merge.CONFLICTS_DIR
    return {store.rel(p) for p in folder.glob("*.md")} if folder.is_dir() else set()


def _duplicates(store: Store, top: Path, before: str, after: str) -> list[Duplicate]:
    """Values of a unique column that repeat among the rows this merge brought in (cannot be prevented
    while two machines are apart; reported here and by `ledger dups`)."""
    from . import ledger, ledger_ops  # noqa: PLC0415

    found = []
    changed = gitstore.checked(top, "diff", "--name-only", "-z", before, after).split("\0")
    for decl in ledger.declarations(store).values():
        if not decl.unique:
            continue
        path = store.ledgers_dir / decl.file
        if os.path.relpath(path, top) not in changed or link_on_way(store.root, path) is not None:
            continue  # unchanged, or a link (never read: doctor names it)
        old = gitstore.file_at(store.root, path, before)
        data = path.read_bytes()
        column = decl.columns.index(decl.unique)
        new_values = set()
        for line in data[len(old):].split(b"\n") if data.startswith(old) else data.split(b"\n"):
            fields = line.split(b"\t")
            if len(fields) > column:
                new_values.add(fields[column].decode("utf-8", "surrogateescape"))
        for value in ledger_ops.dups(store, decl.name, decl.unique):
            if value.field in new_values:
                found.append(Duplicate(decl.name, decl.unique, value.value, value.count))
    return found


def sync(store: Store, *, remote: str | None = None, push: bool = True, setup_only: bool = False) -> SyncResult:
    """Fetch, merge and resolve, push; retried when the remote moved meanwhile (PUSH_ATTEMPTS)."""
    top = _work_tree(store)
    with store.lock():  # refuses during an unfinished merge (store.py)
        changed = setup(store)
        author = gitstore.Author(store.config.author_name, store.config.author_email)
        if ".gitattributes" in changed:
            from .store import commit  # noqa: PLC0415

            commit(store, [store.root / ".gitattributes"], "memctl: route memctl's files to its merge drivers")
        if setup_only:
            return SyncResult("", "", setup=tuple(changed))
        from . import access  # noqa: PLC0415

        access.move_pending(store)  # the rows reads left pending: committed below, with other appended rows
        state = branch(store, top)
        _refuse_hand_edits(store, top, state.dirty)
        if state.dirty:
            state = branch(store, top)
        names = [] if remote is None and "/" in state.upstream else [n for n in gitstore.run(top, "remote").out.splitlines() if n]
        name = choose_remote(remote, state.upstream, names, store.root)
        if not state.name:
            raise Refused("HEAD is detached: sync needs a branch", hint=f"{gitstore.git_c(store.root)} switch BRANCH")
        on_remote = remote_branch(name, state.upstream, state.name)
        _read_log(top, store)  # what an earlier `git pull` resolved is history now
        start = head = state.head
        resolved: list[Resolution] = []
        copies: list[str] = []
        merges: list[str] = []
        incoming = outgoing = 0
        pushed = False
        attempt = 0
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            theirs = fetch(top, name, on_remote)
            if theirs is not None and theirs != head and gitstore.run(top, "merge-base", "--is-ancestor", theirs, head).code != 0:
                _refuse_incoming(store, top, head, theirs, f"{name}/{on_remote}")
                incoming += int(gitstore.checked(top, "rev-list", "--count", f"{head}..{theirs}"))
                try:
                    commit_id, done, new = _merge(store, top, author, theirs, f"{name}/{on_remote}")
                finally:
                    gitstore.unmark_sync_merge(top)
                resolved += done
                copies += new
                if commit_id:
                    merges.append(commit_id)
                _untrack_incoming_local_state(store)
                head = gitstore.checked(top, "rev-parse", "HEAD")
            ahead = 0 if head == theirs else int(gitstore.checked(top, "rev-list", "--count", head if theirs is None else f"{theirs}..{head}"))
            if not push or ahead == 0:
                break
            with errors.waiting(f"{name} (git push)"):
                sent = gitstore.run(top, "push", "-q", name, f"HEAD:refs/heads/{on_remote}", timeout=gitstore.network_timeout())
            if sent.code == 0:
                outgoing, pushed = ahead, True
                break
            if not any(s in sent.err for s in ("non-fast-forward", "fetch first", "rejected")) or attempt == PUSH_ATTEMPTS:
                raise GitError(f"cannot push to {name}: {gitstore.reason(sent.err, 'git push failed')}",
                               hint="the merge is committed here; run `memctl sync` again" + (
                                   "" if "rejected" in sent.err else f", after checking access: {gitstore.git_c(store.root)} remote -v"))
        end = head
        if "/" not in state.upstream and (pushed or theirs is not None):
            _track(top, state.name, name, on_remote)
        if not pushed and theirs is not None and theirs != end:
            outgoing = int(gitstore.checked(top, "rev-list", "--count", f"{theirs}..{end}"))
        files_in = [f for f in gitstore.checked(top, "diff", "--name-only", "-z", start, end).split("\0") if f] if end != start else []
        duplicates = _duplicates(store, top, start, end) if any(
            _kind(store, f, top) == "ledger" for f in files_in) else []
    if files_in and (any(_kind(store, f, top) == "config" for f in files_in) or _brings_script(store, top, files_in)):
        _warn_waiting(store)
    for rel in _agent_settings(files_in):
        warn(f"the merged commits change {store.rel(top / rel)}, which names commands your agents run (hooks, MCP "
             "servers); memctl's approval does not cover it", hint=f"review it before the agent starts here: "
             f"{gitstore.git_c(store.root)} diff {start[:12]} HEAD -- {shell_word(rel)}")
    return SyncResult(name, on_remote, incoming, outgoing, pushed,
                      tuple(store.rel(top / f) for f in files_in), tuple(resolved), tuple(copies), tuple(duplicates),
                      merges[-1] if merges else None, attempt, tuple(changed))


def _untrack_incoming_local_state(store: Store) -> None:
    """Paths in `.memctl/` that a merge brought (git writes over ignored files: a link at .memctl/vectors
    would lead the cache out of the store, pending access rows would be committed as this machine's) are
    taken out of git and of the work tree at once, unread, in a commit of their own that the push carries
    (as `doctor --fix` does): nothing reads them in between, and the remote is clean again."""
    from .store import untrack_local_state  # noqa: PLC0415

    done = untrack_local_state(store)
    if done:
        warn(f"the merged commits tracked {done[0]}" + (f" and {len(done) - 1} more" if len(done) > 1 else "")
             + " in .memctl/ (machine-local state): untracked and removed unread, in a commit this sync pushes")


def _track(top: Path, local: str, name: str, on_remote: str) -> None:
    """A branch with no upstream gets the one sync used (as `git push -u` would), so a later plain
    `git pull` or `git status` knows it; a failure to write git's config changes nothing else."""
    if gitstore.run(top, "config", "--get", f"branch.{local}.remote").code == 0:
        return  # an upstream of the user's choosing (another branch here: ".")
    if gitstore.run(top, "config", f"branch.{local}.remote", name).code == 0:
        gitstore.run(top, "config", f"branch.{local}.merge", f"refs/heads/{on_remote}")


def _brings_script(store: Store, top: Path, files_in: list[str]) -> bool:
    """Whether the merged commits changed a job's script in the store (its contents wait: memctl/trust.py)."""
    from . import trust  # noqa: PLC0415
    from .store import open_store  # noqa: PLC0415

    others = [top / f for f in files_in if _kind(store, f, top) is None and not (top / f).is_relative_to(store.cache_dir)]
    if not others:
        return False  # (memctl's own files, and .memctl/: never a script that runs)
    found = trust.scripts(store, open_store(store.root).config.raw).values()
    scripts = {str(script.path) for script in found} | {os.path.realpath(script.link.parent) for script in found if script.link}
    return any(os.path.realpath(path) in scripts or os.path.realpath(path.parent) in scripts for path in others)


# What agents run from a project's own files (`agent install` writes them; docs/AGENTS.md): a clone
# that takes in another's change to one runs that clone's commands at its agent's next start.
AGENT_SETTINGS = (".claude/settings.json", ".claude/settings.local.json", ".mcp.json", ".codex/config.toml",
                  ".codex/hooks.json", ".gemini/settings.json", ".cursor/mcp.json", ".cursor/hooks.json")


def _agent_settings(files_in: list[str]) -> list[str]:
    """The agents' settings files (at any depth of the repository) among the files a merge changed."""
    return [f for f in files_in if any(f == name or f.endswith("/" + name) for name in AGENT_SETTINGS)]


def _warn_waiting(store: Store) -> None:
    """Name what the merged memctl.toml asks this machine to run that the local user has not approved."""
    from . import trust  # noqa: PLC0415
    from .store import open_store  # noqa: PLC0415

    for setting in trust.waiting(open_store(store.root)):
        errors.warn(f"{trust.named(setting)} waits for approval on this machine ({setting.why}); "
                    "memctl does not act on it until then", hint="review it, then approve it with `memctl trust`")


# ---------------------------------------------------------------- conflicts kept by a merge

@dataclass(frozen=True)
class Conflict:
    name: str  # the fact's stem
    path: str  # the fact in place (may be missing: archived on one side)
    copy: str  # the other version, memory/conflicts/<stem>.<8 hex>.md
    hunk: tuple[str, ...] = field(default=())  # the lines that differ: "-" in place, "+" in the copy

    def to_dict(self) -> dict:
        return {"kind": "merge", "name": self.name, "path": self.path, "copy": self.copy, "hunk": list(self.hunk)}


def _hunk(local: str, other: str, limit: int = 6) -> tuple[str, ...]:
    lines = [line for line in difflib.unified_diff(local.splitlines(), other.splitlines(), lineterm="", n=0)
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return tuple(lines[:limit] + ([f"… {len(lines) - limit} more"] if len(lines) > limit else []))


def _fact_text(store: Store, path: Path) -> str:
    """A fact file or a conflict copy as text, refused unread over the fact limit (docs/FORMAT.md, Limits)."""
    return read_bounded(path, FACT_LIMIT, "a fact file", store.rel(path)).decode("utf-8", errors="replace")


def conflict_texts(store: Store, conflict: Conflict) -> tuple[str, str]:
    """The two versions of a conflict as text: the fact in place ("" when it is gone) and the copy."""
    live, copy = store.root / conflict.path, store.root / conflict.copy
    return (_fact_text(store, live) if live.exists() else ""), _fact_text(store, copy)


def list_conflicts(store: Store) -> list[Conflict]:
    """The fact versions a merge kept aside, each with the lines it differs in."""
    folder = store.memory_dir / merge.CONFLICTS_DIR
    if link_on_way(store.root, folder) is not None:
        errors.warn(f"conflict copies not read: {link_message(store.root, folder)}", hint="run `memctl doctor`")
        return []
    found = []
    for copy in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        stem = copy.name.split(".", 1)[0]
        live = store.memory_dir / f"{stem}.md"
        link = link_on_way(store.root, copy) or link_on_way(store.root, live)
        if link is not None:  # never shown, nor kept by `resolve` (its text would be committed)
            errors.warn(f"conflict {copy.name} left out: {link_message(store.root, link)}", hint="run `memctl doctor`")
            continue
        local = _fact_text(store, live) if live.exists() else ""
        other = _fact_text(store, copy)
        found.append(Conflict(stem, store.rel(live), store.rel(copy), _hunk(local, other)))
    return found


@dataclass(frozen=True)
class Resolved:
    name: str
    keep: str
    path: str  # the fact in place afterwards
    removed: str  # the conflict copy
    commit: str | None


def resolve(store: Store, key: str, keep: str, *, commit_changes: bool = True) -> Resolved:
    """Settle one conflict: keep the version in place (local), the copy (remote), or both (the copy
    becomes a new fact NAME-2, NAME-3, ...). The copy leaves the folder; git history keeps it."""
    from . import fact as fact_mod, facts  # noqa: PLC0415
    from .store import commit, refuse_uncommitted  # noqa: PLC0415

    if keep not in ("local", "remote", "both"):
        raise BadInput(f"keep {keep!r}: expected local, remote or both", arg="keep",
                       hint="local keeps the version in place, remote the conflict copy, both the two as two facts")
    with store.lock(commits=commit_changes):
        conflicts = list_conflicts(store)
        found = [c for c in conflicts if key in (c.name, Path(c.copy).name, Path(c.copy).stem)]
        if not found and conflicts:  # the fact's own name (`name: デプロイ規則` in memory/deploy.md), as other commands take it
            with contextlib.suppress(MemctlError):
                stem = facts.find(store, key, archived=False).stem
                found = [c for c in conflicts if c.name == stem]
        if not found:
            raise NotFound(f"no merge conflict for {key!r}", hint="memctl conflicts lists them")
        if len(found) > 1:
            raise BadInput(f"{key!r} has {len(found)} conflict copies: " + ", ".join(Path(c.copy).name for c in found),
                           hint="name one copy: NAME.HASH", kind="one-copy")
        conflict = found[0]
        copy, live = store.root / conflict.copy, store.root / conflict.path
        # The copy itself may be untracked (left by the merge driver of a plain `git pull`).
        refuse_uncommitted(store, [live, store.index_path], commit_changes)
        touched = [copy]
        text = read_text(store.root, copy)  # list_conflicts left links out; never one made meanwhile
        if keep == "remote":
            atomic_write(live, text)
            touched.append(live)
        elif keep == "both":
            taken = {p.stem for p in store.memory_dir.glob("*.md")} | {p.stem for p in store.archive_dir.glob("*.md")}
            n = 2
            while f"{conflict.name}-{n}" in taken:
                n += 1
            new = f"{conflict.name}-{n}"
            parsed = fact_mod.parse(text, conflict.name, plain=f"{conflict.name}.md" in linked_topics(store))
            live = store.memory_dir / f"{new}.md"
            front = {**parsed.front, "name": new} if "name" in parsed.front else parsed.front
            atomic_write(live, fact_mod.render(fact_mod.Fact(new, front, parsed.body)))
            touched.append(live)
        copy.unlink()
        if keep != "local":
            # The kept text may carry another description: its index line follows it.
            touched += facts.update_index(store, facts.live_facts(store, quiet=True), refresh={live.name})[0]
        sha = commit(store, touched, f"memory: resolve {conflict.name} (keep {keep})", enabled=commit_changes)
    return Resolved(conflict.name, keep, store.rel(live), conflict.copy, sha)
