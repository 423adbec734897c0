"""`memctl doctor`: every layer's checks in one place, and `--fix` for what can be settled safely."""

from __future__ import annotations

import os
from pathlib import Path

from . import facts, facts_check, installed, jobs, ledger_ops, state, trust
from .facts import Problem
from .fsutil import INDEX_LIMIT, MAX_DEPTH, dead_temp, link_on_way, tree_files, walk_tree
from .markers import conflict_lines
from .store import Store, foreign_undo, pending, tracked_local_state, untrack_local_state


def run(store: Store) -> list[Problem]:
    from .claude_memory import take_in_now

    take_in_now(store)  # Claude Code's own writes in its directory: committed as its own, not reported
    problems = link_problems(store)  # first: the other checks do not follow such links
    problems += facts_check.check(store)
    problems += ledger_ops.check_all(store)
    problems += marker_problems(store)
    problems += nul_problems(store)
    problems += state.problems(store)  # a stale STATE.md: agents would act on old numbers
    problems += jobs.problems(store)  # jobs whose last success is older than their schedule allows
    problems += installed.problems(store)  # the installed schedule against memctl.toml: jobs gone, missing, moved
    problems += trust_problems(store)  # settings a commit not made here changed: not acted on until approved
    problems += setting_problems(store)  # a section only its own command reads (`recall = 1`), a [[forget.policy]]
    problems += settled(store, lambda: interrupted_problems(store) + unfinished_problems(store))
    problems += lock_problems(store)
    problems += unignored_problems(store)
    return list(dict.fromkeys(problems))  # a linked fact is named by the fact scan as well


def setting_problems(store: Store) -> list[Problem]:
    """Each section of memctl.toml that its own command would refuse (`recall = 1`, `[recall] mode = "x"`),
    and every [forget] rule that does not parse, by name: the commands that read no such section still run."""
    from .config_check import problems  # noqa: PLC0415

    where = store.rel(store.config_path)
    said = [message.removeprefix("memctl.toml").lstrip(": ") for message in problems(store.root, store.config.raw, doctor=True)]
    return [Problem(where, 0, "bad-policy" if message.startswith(("[forget", "[[forget")) else "bad-setting", message)
            for message in said]


SETTLE_WAIT = 5.0  # seconds doctor waits for another command's store lock (past it, that command is live)


def settled(store: Store, check):
    """`check()` while no memctl command is midway, under the store lock (not a write's: nothing is
    settled here): a write's undo log and a sync's merge are there while it runs, and are no sign of a
    killed one then. Past SETTLE_WAIT (or MEMCTL_LOCK_TIMEOUT, if shorter) the other command is live:
    nothing is said of it."""
    from .errors import LockTimeout, MemctlError
    from .fsutil import file_lock, lock_timeout
    from .store import holds_lock

    if not store.cache_dir.is_dir() or holds_lock(store):  # (held here: no other command is midway)
        return check()
    try:
        with file_lock(store.cache_dir / "lock", min(lock_timeout(), SETTLE_WAIT)):
            return check()
    except LockTimeout:
        return []
    except (OSError, MemctlError):  # a read-only .memctl/ (no writer either), a lock file that is a link (named above)
        return check()


def fix(store: Store) -> list[str]:
    """Settle what a killed command left: its change (committed, or undone), stale git locks, temp files."""
    from . import gitstore  # noqa: PLC0415

    done = [f"untracked and removed {rel} (machine-local state that came with a commit)" for rel in untrack_local_state(store)]
    done += [f"settled the interrupted change to {p} (found committed, or undone)" for p in settled(store, lambda: pending(store))]
    with store.lock():  # taking the lock settles an interrupted change (store.finish_interrupted)
        pass
    for top, lock in stale_git_locks(store):
        if gitstore.remove_stale_lock(top, lock, warn=False):  # (said once, in what doctor --fix lists)
            done.append(f"removed the stale git lock {lock} (its git process is gone)")
    for leftover in temp_files(store):
        try:
            leftover.unlink()
            done.append(f"removed {store.rel(leftover)}")
        except OSError:
            pass
    return done


def stale_git_locks(store: Store) -> list[tuple[Path, Path]]:
    """(work tree, lock) of each lock a dead git (or memctl) left in the store's repository: index.lock,
    HEAD.lock, packed-refs.lock, a branch's or a remote-tracking ref's (a killed `git fetch`). memctl's
    writes and syncs remove them on their way; plain git fails on them."""
    from . import gitstore  # noqa: PLC0415

    git_dir = gitstore.git_dir(store.root)
    if git_dir is None or not git_dir.is_dir():
        return []
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock",
             *git_dir.glob("refs/heads/**/*.lock"), *git_dir.glob("refs/remotes/**/*.lock")]
    top = git_dir.parent
    return [(top, lock) for lock in locks if lock.exists() and gitstore.stale_lock(top, lock)]


def unfinished_problems(store: Store) -> list[Problem]:
    """A git merge (rebase, cherry-pick, revert) left unfinished: every write is refused until it is
    finished, so it is a problem, with each file git left unmerged named (conflict markers in it)."""
    from . import gitstore  # noqa: PLC0415

    what = gitstore.unfinished_operation(store.root)
    if what is None:
        return []
    if what == "merge" and gitstore.sync_merge_unfinished(store.root):
        return [Problem(".git", 0, "killed-sync-merge", "a `memctl sync` was killed inside its merge: files may hold only "
                        "one side's version (`memctl doctor --fix`, or any memctl write, undoes that merge; then sync again)")]
    found = [Problem(".git", 0, "unfinished-merge", f"a git {what} is unfinished: every memctl write is refused until it "
                     f"is finished (fix the files below, git add, git commit) or aborted (git {what} --abort)")]
    top = gitstore.toplevel(store.root)
    listed = gitstore.run(top, "diff", "--name-only", "-z", "--diff-filter=U") if top is not None else None
    for name in (listed.out.split("\0") if listed is not None and listed.code == 0 else []):
        if name:
            found.append(Problem(os.path.relpath(top / name, store.root), 0, "unmerged",
                                 f"left unmerged by the git {what} (conflict markers in it)"))
    return found


def lock_problems(store: Store) -> list[Problem]:
    return [Problem(os.path.relpath(lock, store.root), 0, "stale-git-lock",
                    "left by a git that died: plain git fails on it (a commit, a fetch) until it is gone (memctl's writes remove it; "
                    "so does `memctl doctor --fix`)", "warning") for _top, lock in stale_git_locks(store)]


def _owned_dirs(store: Store) -> list[Path]:
    dirs = [store.memory_dir, store.archive_dir, store.cache_dir]
    if store.layout == "memctl":
        dirs += [store.ledgers_dir, store.state_dir]
    elif store.ledgers_dir.exists():
        dirs.append(store.ledgers_dir)
    return dirs


def link_problems(store: Store) -> list[Problem]:
    """Every symbolic link in the store (git's folder aside): no memctl reader or writer follows one; and
    each folder too deep for the walk to enter (fsutil.MAX_DEPTH), named once."""
    links: list[Path] = []
    deep: list[str] = []
    for here, subdirs, files in walk_tree(store.root, too_deep=deep.append):  # the walk enters no linked folder
        if here == str(store.root) and ".git" in subdirs:
            subdirs.remove(".git")
        links += [Path(here) / name for name in sorted(subdirs + files) if os.path.islink(os.path.join(here, name))]
    return [facts.link_problem(store, link) for link in sorted(links)] + [
        Problem(store.rel(Path(folder)), 0, "too-deep", f"a folder more than {MAX_DEPTH} levels deep: memctl looks at "
                "nothing inside it (move what it holds up, or remove it)", "warning") for folder in sorted(deep)]


def unignored_problems(store: Store) -> list[Problem]:
    """This machine's own folders (`.memctl/`: the lock, the undo log, caches, indexes of documents
    outside the store; `logs/`) that git does not ignore: a `git add -A` would commit and push them."""
    from . import gitstore  # noqa: PLC0415

    folders = [f for f in (store.cache_dir, store.root / "logs") if f.is_dir() and not f.is_symlink()]
    top = gitstore.toplevel(store.root) if folders and gitstore.git_executable() is not None else None
    if top is None:
        return []
    probes = [os.path.relpath(folder / "x", top) for folder in folders]
    ignored = set(gitstore.run(top, "check-ignore", "--no-index", "--", *probes).out.splitlines())  # (names of memctl's own)
    return [Problem(store.rel(folder), 0, "not-ignored", "machine-local, but git does not ignore it: `git add -A` would "
                    f"commit it (add `{store.rel(folder)}/` to .gitignore)", "warning")
            for folder, probe in zip(folders, probes) if probe not in ignored]


def trust_problems(store: Store) -> list[Problem]:
    """Every executable setting of memctl.toml that waits for approval on this machine, and why (memctl/trust.py)."""
    return [Problem(store.rel(store.config_path), 0, "untrusted",
                    f"{trust.describe(s)}{' (its contents)' if s.key.endswith(trust.SCRIPT_SUFFIX) else ''} waits for "
                    f"approval on this machine: {s.why}; "
                    + ("the pattern is still applied " if s.value == trust.REMOVED else "memctl does not act on it ")
                    + "until it is approved here (memctl trust)", "warning") for s in trust.waiting(store)]


def marker_problems(store: Store) -> list[Problem]:
    """Merge-conflict markers in MEMORY.md, STATE.md files and memctl.toml (facts and ledgers check their own)."""
    paths = [store.index_path, store.config_path]
    if store.state_dir.is_dir():
        paths += tree_files(store.state_dir, "*.md")
    found = []
    for path in paths:
        if not _readable(store, path):
            continue
        for number in conflict_lines(path.read_bytes()):
            found.append(Problem(store.rel(path), number, "conflict-marker", "an unresolved merge conflict marker"))
    return found


def _text_files(store: Store) -> list[Path]:
    """memctl's own text files besides facts and ledgers (which check their own): MEMORY.md, its topic
    files, memctl.toml, every STATE.md."""
    paths = [store.index_path, store.config_path]
    topics = store.index_path.parent / "memory-index"
    if topics.is_dir():
        paths += sorted(topics.glob("*.md"))
    if store.state_dir.is_dir():
        paths += tree_files(store.state_dir, "*.md")
    return [p for p in paths if _readable(store, p)]


def _readable(store: Store, path: Path) -> bool:
    """A file doctor reads whole: no link on the way to it, and within the index's limit (facts_check.check names a bigger index file)."""
    return link_on_way(store.root, path) is None and path.is_file() and path.stat().st_size <= INDEX_LIMIT


def nul_problems(store: Store) -> list[Problem]:
    """A NUL byte in MEMORY.md, a topic file, memctl.toml or a STATE.md, by line (facts and ledgers
    report their own): git and grep take such a file for binary."""
    found = []
    for path in _text_files(store):
        data = path.read_bytes()
        start = data.find(b"\0")
        while start != -1:
            line = data[:start].count(b"\n") + 1
            found.append(Problem(store.rel(path), line, "nul", "a NUL byte (git and grep take the file for binary)"))
            start = data.find(b"\0", data.find(b"\n", start) + 1) if data.find(b"\n", start) != -1 else -1
    return found


def temp_files(store: Store) -> list[Path]:
    """Temp files of writers that died (`.<name>.<pid>.<hex>.tmp`, their pid gone)."""
    found = []
    for folder in _owned_dirs(store) + [store.root]:
        if link_on_way(store.root, folder) is not None or not folder.is_dir():
            continue
        for here, _subdirs, files in walk_tree(folder):  # (a folder too deep: link_problems names it)
            found += [Path(here) / name for name in files if dead_temp(name)]
            if folder == store.root:
                break  # only the top level: the folders are walked on their own
    return sorted(set(found))


def interrupted_problems(store: Store) -> list[Problem]:
    """A change that a killed command left half-made (undo log present), machine-local state that came
    with a commit (then the undo log is not read at all), and dead writers' temp files."""
    tracked = tracked_local_state(store)
    foreign = None if tracked else foreign_undo(store)
    if tracked:
        found = [Problem(rel, 0, "tracked-local-state", "machine-local state tracked by git (it came with a commit); "
                         "memctl does not read it (`memctl doctor --fix` untracks and removes it)") for rel in tracked]
    elif foreign is not None:
        found = [Problem(store.rel(store.undo_path), 0, "foreign-undo-log",
                         f"not memctl's to act on ({foreign}); the next write discards it without acting on it")]
    else:
        found = [Problem(path, 0, "interrupted", "changed by a memctl command that was interrupted before its commit "
                         "(the next memctl write undoes it, or run `memctl doctor --fix`)") for path in pending(store)]
    found += [Problem(store.rel(p), 0, "temp-file", "a temp file left by a writer that died (`memctl doctor --fix` removes it)", "warning")
              for p in temp_files(store)]
    undone = store.cache_dir / "undone"
    if undone.is_dir() and not undone.is_symlink():
        found += [Problem(store.rel(Path(entry.path)) + "/", 0, "undone-copies", "files as they were when an interrupted "
                          "change was undone (with any edit made to them since); delete the folder once nothing in it "
                          "is wanted", "warning") for entry in sorted(os.scandir(undone), key=lambda e: e.name)]
    return found
