"""`memctl sync` with nothing to do, answered in three git runs and without the merge machinery.

A scheduled sync job finds nothing to do most of the time, so that case is a
budget (docs/SYNC.md, "Speed"). `nothing_to_do()` makes the checks `sync()`
makes, reading only: the store is set up (attributes and drivers, as `setup()`
would leave them), no merge or log of one is pending, memctl's files hold no
uncommitted change and no access rows wait to be committed, HEAD is on a
branch. Then it fetches and compares: when the remote branch is HEAD itself,
there is nothing to merge and nothing to push. In every other case it returns
None and `sync()` does the work, from the start.

This module also holds what both paths share: the result types, the status
reading, the choice of remote and the fetch. It imports nothing heavy (no
YAML, no dataclasses: see config.py on start-up); memctl/sync.py does the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from . import config, early, errors, gitstore
from .access import has_pending
from .errors import BadInput, GitError, NotFound
from .store import GITATTRIBUTES, GITATTRIBUTES_CLAUDE, Store

LOG_NAME = early.MERGE_LOG  # in the git directory: what the merge drivers resolved, for sync's summary


class Resolution(NamedTuple):
    path: str  # relative to the store
    kind: str  # index | state | ledger | fact | archive | config
    how: str  # what was done, in words

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "how": self.how}


class Duplicate(NamedTuple):
    ledger: str
    column: str
    value: str
    count: int  # noqa: the tuple method of that name is shadowed on purpose

    def to_dict(self) -> dict:
        return {"ledger": self.ledger, "column": self.column, "value": self.value, "count": self.count}


class SyncResult(NamedTuple):
    remote: str
    branch: str
    incoming: int = 0  # commits that came in
    outgoing: int = 0  # commits the remote did not have
    pushed: bool = False
    files_in: tuple[str, ...] = ()  # files the merge changed here
    resolved: tuple[Resolution, ...] = ()
    conflicts: tuple[str, ...] = ()  # conflict copies this sync created (memctl conflicts)
    duplicates: tuple[Duplicate, ...] = ()
    merge_commit: str | None = None
    attempts: int = 1
    setup: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "remote": self.remote, "branch": self.branch, "incoming": self.incoming, "outgoing": self.outgoing,
            "pushed": self.pushed, "files_in": list(self.files_in), "resolved": [r.to_dict() for r in self.resolved],
            "conflicts": list(self.conflicts), "duplicates": [d.to_dict() for d in self.duplicates],
            "merge_commit": self.merge_commit, "attempts": self.attempts, "setup": list(self.setup),
        }


def attribute_lines(store: Store) -> list[str]:
    """The .gitattributes lines (relative to the store root) that send memctl's files to its drivers."""
    return (GITATTRIBUTES if store.layout != "claude" else GITATTRIBUTES_CLAUDE).splitlines()


class Branch(NamedTuple):
    head: str  # commit id ("(initial)" on an unborn branch)
    name: str  # "" when HEAD is detached
    upstream: str  # "origin/main", or ""
    dirty: list[str]  # memctl's paths with uncommitted changes, relative to the work tree
    ahead_behind: str = ""  # "+0 -0": HEAD against its upstream's remote-tracking ref, when both exist


def _memctl_paths(store: Store, top: Path) -> list[str]:
    """memctl's paths that exist, relative to the work tree: where a change is a hand edit."""
    return [os.path.relpath(p, top) for p in (store.memory_dir, store.ledgers_dir, store.state_dir, store.config_path,
                                              store.root / ".gitattributes") if p.exists()]


def _status_args(store: Store, top: Path) -> list[str]:
    return ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--", *_memctl_paths(store, top)]


# The fast path's `git status` (the whole work tree; _memctls() keeps memctl's paths): early.py
# starts it before the imports when the command line is a plain `memctl sync`.
FAST_STATUS = early.FAST_STATUS


def _memctls(paths: list[str], store: Store, top: Path) -> list[str]:
    """The paths of `git status` that are memctl's, or hold some of memctl's (an untracked folder)."""
    mine = [Path(p).as_posix() for p in _memctl_paths(store, top)]
    if "." in mine:  # the store is the work tree's root, as a Claude Code memory folder is
        return list(paths)
    return [path for path in paths if any(path == m or path.startswith(m + "/") or (path.endswith("/") and m.startswith(path))
                                          for m in mine)]


def _parse_status(out: str) -> Branch:
    head = name = upstream = ab = ""
    dirty: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if entry.startswith("# branch.oid "):
            head = entry[len("# branch.oid "):]
        elif entry.startswith("# branch.head "):
            name = entry[len("# branch.head "):]
        elif entry.startswith("# branch.upstream "):
            upstream = entry[len("# branch.upstream "):]
        elif entry.startswith("# branch.ab "):
            ab = entry[len("# branch.ab "):]
        elif entry[:2] in ("1 ", "2 ", "u ", "? "):
            fields = {"1": 8, "2": 9, "u": 10, "?": 1}[entry[0]]
            dirty.append(entry.split(" ", fields)[fields])
            if entry[0] == "2":
                next(entries, None)  # the rename's original path
    return Branch(head, "" if name == "(detached)" else name, upstream, dirty, ab)


def branch(store: Store, top: Path) -> Branch:
    """HEAD, its branch and upstream, and memctl's uncommitted paths: one `git status` (sync runs often)."""
    return _parse_status(gitstore.checked(top, *_status_args(store, top)))


def choose_remote(remote: str | None, upstream: str, names: list[str], root: Path) -> str:
    """--remote NAME if it exists, else the branch's upstream, else origin, else the only remote."""
    if remote is None and "/" in upstream:
        return upstream.split("/", 1)[0]  # the branch's upstream: git checked its remote exists
    if remote is not None:
        if remote not in names:
            raise NotFound(f"no git remote named {remote!r}" + (f" (remotes: {', '.join(names)})" if names else ""),
                           hint=f"{gitstore.git_c(root)} remote -v lists them; add one with `git remote add NAME URL`")
        return remote
    if "origin" in names:
        return "origin"
    if len(names) == 1:
        return names[0]
    if not names:
        raise NotFound("no git remote is configured for this store",
                       hint=f"add one: {gitstore.git_c(root)} remote add origin URL (docs/SYNC.md)")
    raise BadInput(f"several remotes ({', '.join(names)}) and none is the branch's upstream", hint="name the remote", kind="which-remote")


def remote_branch(name: str, upstream: str, local: str) -> str:
    """The branch on the remote: the upstream's when it is on that remote, else the same name as here."""
    return upstream.split("/", 1)[1] if upstream.startswith(name + "/") else local


def fetch(top: Path, name: str, branch_name: str) -> str | None:
    """Fetch the remote's branch; the commit it is at, or None when the remote has no such branch yet."""
    with errors.waiting(f"{name} (git fetch)"):
        fetched = gitstore.run(top, "fetch", "-q", "--no-tags", name, f"refs/heads/{branch_name}", timeout=gitstore.network_timeout())
    if fetched.code != 0 and "couldn't find remote ref" in fetched.err:
        return None  # an empty remote, or a branch not pushed yet
    if fetched.code != 0:
        raise GitError(f"cannot fetch from {name}: {gitstore.reason(fetched.err, 'git fetch failed')}",
                       hint=f"check the remote's URL and your access: {gitstore.git_c(top)} remote -v")
    return _fetch_head(top)


def _fetch_head(top: Path) -> str:
    """The commit `git fetch` just brought (FETCH_HEAD's first line), read without another git run."""
    gitdir = gitstore.git_dir(top)
    if gitdir is not None and (gitdir / "FETCH_HEAD").exists():
        first = (gitdir / "FETCH_HEAD").read_text(encoding="utf-8", errors="replace").split("\t", 1)[0].strip()
        if len(first) in (40, 64):
            return first
    return gitstore.checked(top, "rev-parse", "FETCH_HEAD")


# ---------------------------------------------------------------- nothing to do

def _work_tree(root: Path) -> Path | None:
    """early.work_tree, as a Path (None: no `.git` above the store, or git redirected: sync() asks git)."""
    found = early.work_tree(str(root))
    return Path(found) if found else None


# memctl's merge drivers, the remotes, the branches, and whether anyone chose an untracked cache
# (git names keys in lower case here).
CONFIG_KEYS = early.FAST_CONFIG[-1]


def _config(top: Path) -> dict[str, list[str]] | None:
    """memctl's merge-driver keys, the remotes and the branches, from one `git config` (None: unreadable)."""
    done = gitstore.finish(gitstore.start(top, *early.FAST_CONFIG))
    if done.code not in (0, 1):  # 1: no key matched
        return None
    values: dict[str, list[str]] = {}
    for entry in done.out.split("\0"):
        key, _, value = entry.partition("\n")
        values.setdefault(key, []).append(value)
    return values


def _remote_names(values: dict[str, list[str]]) -> list[str]:
    """The remotes `git remote` would list, in its order (a name may hold dots: the key's last one ends it)."""
    return list(dict.fromkeys(key[len("remote."):key.rindex(".")] for key in values
                              if key.startswith("remote.") and key.count(".") >= 2))


def _set_up(store: Store, top: Path, gitdir: Path, values: dict[str, list[str]]) -> bool:
    """Whether `setup()` would change nothing: attributes written, drivers registered for this Python,
    core.untrackedCache set (by setup, or by the user either way: a clone set up before memctl set it
    takes the full path once, whose setup() sets it)."""
    if "core.untrackedcache" not in values:
        return False
    path = store.root / ".gitattributes"
    if path.exists() and path.stat().st_size > config.SETTINGS_LIMIT:
        return False  # (setup refuses it, named, unread: store.add_lines)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if any(line not in lines for line in attribute_lines(store)):
        return False
    for kind, title in gitstore.MERGE_DRIVERS.items():
        for key, wanted in ((f"merge.memctl-{kind}.name", title), (f"merge.memctl-{kind}.driver", gitstore.merge_driver_command(kind))):
            if values.get(key, [None])[-1] != wanted:  # the last value wins, as in gitstore.register_merge_drivers
                return False
    info = gitdir / "info" / "attributes"
    have = info.read_text(encoding="utf-8").splitlines() if info.exists() else []
    return all(line in have for line in gitstore.info_attribute_lines(store.root, top, attribute_lines(store)))


def _legacy_remotes(gitdir: Path) -> bool:
    """Remotes defined in .git/remotes or .git/branches: `git remote` lists them, `git config` does not."""
    return any((gitdir / name).is_dir() and any((gitdir / name).iterdir()) for name in ("remotes", "branches"))


def _local_branch(gitdir: Path) -> str | None:
    """The branch HEAD names, read from the HEAD file (`git status` confirms it later)."""
    try:
        text = (gitdir / "HEAD").read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return None
    return text[len("ref: refs/heads/"):].rstrip("\n") if text.startswith("ref: refs/heads/") else None


def _branch_commit(gitdir: Path, local: str) -> str | None:
    """The commit branch `local` is at, read from its ref file or packed-refs (None: stored some
    other way, as in a linked work tree or a reftable: then the caller does not trust what it saw)."""
    try:
        return (gitdir / "refs" / "heads" / local).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeError):
        pass
    try:
        packed = (gitdir / "packed-refs").read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return None
    for line in packed.splitlines():
        if line.endswith(f" refs/heads/{local}"):
            return line.split(" ", 1)[0]
    return None


def _upstream(values: dict[str, list[str]], local: str) -> str:
    """The upstream `git status` names ("origin/main") when the branch has one fetched the default way."""
    remote, ref = values.get(f"branch.{local}.remote", [""])[-1], values.get(f"branch.{local}.merge", [""])[-1]
    if not remote or remote == "." or not ref.startswith("refs/heads/"):
        return ""
    return f"{remote}/{ref[len('refs/heads/'):]}"


def nothing_to_do(store: Store, *, remote: str | None = None) -> SyncResult | None:
    """The summary `sync()` would give when the remote branch is HEAD itself; None when sync() has work
    to do or something to say (set-up, hand edits, a merge, a remote ahead or behind, any doubt).

    It reads only: `git ls-remote` asks where the remote branch is without fetching, so `git status`
    runs beside it. The remote-tracking ref must be at HEAD too, where sync()'s fetch would leave it.
    A remote that cannot be reached raises sync()'s error. Under the store lock, as sync() is.
    """
    top = _work_tree(store.root) if gitstore.git_executable() is not None else None
    gitdir = gitstore.git_dir(top) if top is not None else None
    if top is None or gitdir is None or (gitdir / LOG_NAME).exists() or _legacy_remotes(gitdir) or has_pending(store):
        return None  # (pending access rows: sync() commits them)
    if gitstore.common_git_dir(top) != gitdir:
        return None  # a linked worktree: its refs and config are in the shared folder; sync() asks git
    local = _local_branch(gitdir)
    if local is None or gitstore.unfinished_operation(top) is not None:
        return None  # detached, or mid-merge: sync() says so
    with store.lock():
        status = gitstore.start(top, *FAST_STATUS)  # the slowest: 10,000 files to stat
        started = [status]

        def collect(proc: gitstore.Started, timeout: float | None = None) -> gitstore.GitResult:
            started.remove(proc)
            return gitstore.finish(proc, timeout)

        asked = None
        try:
            values = _config(top)
            if values is None or not _set_up(store, top, gitdir, values):
                return None
            upstream = _upstream(values, local)
            try:
                name = choose_remote(remote, upstream, _remote_names(values), store.root)
            except (BadInput, NotFound):
                return None
            on_remote = remote_branch(name, upstream, local)
            refspecs = values.get(f"remote.{name}.fetch", [])
            if refspecs not in ([], [f"+refs/heads/*:refs/remotes/{name}/*"]):
                return None  # sync()'s fetch would move refs this does not follow
            tracking = f"refs/remotes/{name}/{on_remote}" if refspecs else None
            asked = gitstore.start(top, "ls-remote", "--heads", name, f"refs/heads/{on_remote}")
            started.append(asked)
            # With the upstream there, `git status` compares the remote-tracking ref with HEAD itself.
            read = gitstore.start(top, "rev-parse", "-q", "--verify", f"{tracking}^{{commit}}") \
                if tracking and upstream != f"{name}/{on_remote}" else None
            if read is not None:
                started.append(read)
            done = collect(status)
            state = _parse_status(done.out) if done.code == 0 else None
            if state is None or _memctls(state.dirty, store, top) or state.name != local or state.upstream != upstream \
                    or len(state.head) not in (40, 64):
                return None
            if _branch_commit(gitdir, local) != state.head:
                return None  # HEAD moved since the status looked (it may have started before the lock)
            with errors.waiting(f"{name} (git ls-remote)"):
                listed = collect(asked, gitstore.network_timeout())
            if listed.code != 0:  # where sync() would fetch, and fail the same way
                raise GitError(f"cannot fetch from {name}: {gitstore.reason(listed.err, 'git ls-remote failed')}",
                               hint=f"check the remote's URL and your access: {gitstore.git_c(store.root)} remote -v")
            theirs = [line.split("\t", 1)[0] for line in listed.out.splitlines()
                      if line.endswith(f"\trefs/heads/{on_remote}")]
            if theirs != [state.head]:
                return None
            if read is not None:
                if collect(read).out != state.head:
                    return None
            elif tracking and state.ahead_behind != "+0 -0":
                return None
        finally:
            for proc in started:  # every git started here has ended before the lock is let go
                if proc is asked:
                    gitstore.abandon(proc)  # the network's answer, not needed: a remote that hangs must not hold the lock
                else:
                    gitstore.finish(proc)
    return SyncResult(name, on_remote)
