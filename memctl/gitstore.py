"""The only module that talks to git.

Commands run the git CLI directly (`_run`): finding the work tree, status,
log and commits. GitPython is kept for reading blobs out of history (its
persistent `cat-file` process makes `ledger verify` and `state history`
cheap on long histories) and imported only there: importing it costs ~85 ms,
more than most writes take. A commit is the user's git identity when one is
configured, else memctl.toml's author (so that a launchd/cron job without
~/.gitconfig still commits), and it stages and records only the paths the
caller touched.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Sequence

from . import early, procs
from .early import git_executable
from .errors import GitError

if TYPE_CHECKING:
    from collections.abc import Callable


# NamedTuples rather than dataclasses: every committing command imports this module (see config.py).
class Author(NamedTuple):
    name: str
    email: str


class LogEntry(NamedTuple):
    commit: str
    date: str
    message: str
    added: int
    removed: int
    path: str


def where_git_was_sought() -> str:
    """Where memctl looked for git and found none (MEMCTL_GIT, else PATH and the usual places)."""
    named = os.environ.get("MEMCTL_GIT")
    return (f"MEMCTL_GIT={named} is not an executable file" if named else
            "not on PATH, nor at " + ", ".join(early.FALLBACK_GITS))


def no_git() -> GitError:
    """git cannot be found: where memctl looked, and what to do."""
    return GitError(f"git not found ({where_git_was_sought()})", hint="install git (or name it in MEMCTL_GIT), or write without "
                    "committing (MEMCTL_NO_COMMIT=1, or [git] commit = false in memctl.toml)", kind="no-git")


def _git_module():
    exe = git_executable()
    if exe is None:
        raise no_git()
    if os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") != exe or "GIT_PYTHON_REFRESH" not in os.environ:
        early.settle_environment()  # set already by the CLI: writing it again here could race a thread's getenv
    import git  # noqa: PLC0415  (lazy: keeps `memctl --help` fast)

    return git


def _repo(path: Path):
    """A GitPython Repo, for reading objects out of history (None outside a repository)."""
    git = _git_module()
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _git(top: Path | str, *args: str, env: dict[str, str] | None = None, input: bytes | None = None,
         timeout: float | None = None):
    import subprocess  # noqa: PLC0415

    exe = git_executable()
    if exe is None:
        raise no_git()
    try:
        if timeout is None:
            return subprocess.run([exe, *args], cwd=top, env={**os.environ, **env} if env else None,
                                  input=input, stdin=subprocess.DEVNULL if input is None else None, capture_output=True)
        with subprocess.Popen([exe, *args], cwd=top, env={**os.environ, **env} if env else None, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                early.stop(proc.pid)  # git, and its ssh (which holds the pipes too, and waits on a dead network)
                proc.stdout.close()
                proc.stderr.close()
                proc.wait()
                raise no_answer(next((a for a in args[1:] if not a.startswith("-") and "=" not in a), ""), timeout, top) from None
            except BaseException:  # Ctrl-C, a SIGTERM: they go with us (Popen's exit would wait for them)
                early.stop(proc.pid)
                raise
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except OSError as exc:  # git vanished, or the directory did
        raise GitError(f"cannot run git: {exc}", hint="check that git runs (MEMCTL_GIT, PATH)", kind="git-fails") from None


def no_answer(what: str, timeout: float, top: Path | str | None = None) -> GitError:
    """The error of a git (`what`: its command, run in `top`) stopped after `timeout` seconds without an answer."""
    remotes = f"{git_c(Path(top))} remote -v" if top is not None else "git remote -v"
    return GitError(f"git {what + ' ' if what else ''}got no answer within {timeout:g} s; nothing more was done",
                    kind="git-timeout", hint=f"check the remote and the network ({remotes}), or raise MEMCTL_GIT_TIMEOUT")


def network_timeout() -> float:
    """MEMCTL_GIT_TIMEOUT: seconds a git fetch or push may take (default 300); past it the git is stopped,
    so a remote that hangs never holds the store lock for good."""
    try:
        value = float(os.environ.get("MEMCTL_GIT_TIMEOUT", "") or 300)
    except ValueError:
        return 300.0
    return value if value > 0 else 300.0


_TOPLEVELS: dict[str, Path] = {}  # found work trees, per directory asked about: one command asks often


def toplevel(path: Path) -> Path | None:
    """The work tree holding `path`, or None (no repository, or no git that runs)."""
    try:
        return work_tree(path)
    except GitError:
        return None


def work_tree(path: Path) -> Path:
    """The work tree holding `path`; GitError saying why there is none: git not found (kind
    "no-git"), git does not run or fails there ("git-fails"), no repository ("not-a-repo")."""
    known = _TOPLEVELS.get(str(path))
    if known is not None and (known / ".git").exists() and git_executable() is not None:
        return known
    if git_executable() is None:
        raise no_git()
    if not Path(path).is_dir():
        raise GitError(f"{path} is not a folder", kind="not-a-repo", store=_quoted(path))
    done = _git(path, "rev-parse", "--show-toplevel")  # GitError when git cannot be started
    top = done.stdout.decode("utf-8", "surrogateescape")
    top = top[:-1] if top.endswith("\n") else top  # only the newline: a name may end in a space
    if done.returncode == 0 and top:
        _TOPLEVELS[str(path)] = Path(top)
        return Path(top)
    if git_dir(Path(path)) is None:  # asked of the folders themselves: git's message may be in any language
        raise GitError(f"{path} is not a git repository (nor inside one)",
                       hint=f"run `memctl init {_quoted(path)}` (git init, and a first commit of what is there), "
                       "or write without committing (MEMCTL_NO_COMMIT=1, or [git] commit = false in memctl.toml)",
                       kind="not-a-repo", store=_quoted(path))
    stderr = done.stderr.decode("utf-8", "replace").strip()
    detail = reason(stderr, f"exit status {done.returncode}") if done.returncode else "it printed no folder (is it git?)"
    raise GitError(f"git does not work in {path}: `{git_executable()} rev-parse` failed: {detail}",
                   hint="check that this git runs (MEMCTL_GIT, PATH), or write without committing (MEMCTL_NO_COMMIT=1)",
                   kind="git-fails")


def init(path: Path) -> None:
    done = _git(path, "init", "-q")
    if done.returncode != 0:
        raise GitError(f"git init failed: {done.stderr.decode(errors='replace').strip()}")


def _env(author: Author) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_COMMITTER_NAME": author.name,
        "GIT_COMMITTER_EMAIL": author.email,
    }


def _as_user_or(author: Author, top: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a git command that records who made a commit (commit-tree, commit) as the user's git
    identity when one is configured, as git resolves it for this repository (GIT_AUTHOR_* and
    GIT_COMMITTER_*, then author.*, committer.*, user.* in the repository's config, ~/.gitconfig,
    the XDG config), else as `author` (memctl.toml's), never as a name git guesses from the host.

    git is told not to guess (user.useConfigOnly), so a missing identity makes the command fail and
    it runs again as `author`: with an identity configured, nothing runs twice (docs/SYNC.md, "Who
    changed what").
    """
    try:
        return _run(top, *args, env=env, settings=("user.useConfigOnly=true",))
    except GitError:
        try:
            return _run(top, *args, env={**(env or {}), **_env(author)})
        except GitError as exc:
            from .config import git_refuses_name  # noqa: PLC0415  (only when the commit failed)

            if not git_refuses_name(author.name):
                raise
            raise GitError(exc.message, hint=f"memctl.toml's [git] author_name {author.name!r} is no name git takes: "
                           'set one (author_name = "memctl", the default), or give git an identity (git config user.name)'
                           ) from None


_LOCK_RE = None  # compiled on first use: "Unable to create '<path>.lock': File exists."
STALE_LOCK_SECONDS = 5.0  # a git lock this old, with no git process on the repository, is a dead git's


def _lock_in(stderr: str) -> Path | None:
    """The lock file a failed git command names ("Unable to create '...lock': File exists")."""
    global _LOCK_RE
    if "File exists" not in stderr and "Unable to create" not in stderr:
        return None
    if _LOCK_RE is None:
        import re  # noqa: PLC0415

        _LOCK_RE = re.compile(r"'([^']+\.lock)'")
    match = _LOCK_RE.search(stderr)
    return Path(match.group(1)) if match else None


_OWNER = "memctl pid "  # what memctl writes into an index.lock it holds


def stale_lock(top: Path, lock: Path) -> bool:
    """A lock left by a git that died: older than a few seconds, and no git running in the repository.

    An index.lock that memctl holds names its pid: it is live exactly while that process is.
    """
    try:
        age = time.time() - lock.stat().st_mtime
        head = lock.read_bytes()[:64] if lock.stat().st_size <= 64 else b""
    except OSError:
        return False
    if head.startswith(_OWNER.encode()):
        pid = head[len(_OWNER):].strip()
        if pid.isdigit():  # memctl's own lock: stale exactly when its process is gone (or the pid is another's now)
            return not procs.alive(int(pid)) or procs.started_after(int(pid), time.time() - age)
    return age >= STALE_LOCK_SECONDS and not procs.git_running_in(top, time.time() - age)


def remove_stale_lock(top: Path, lock: Path, *, warn: bool = True) -> bool:
    """Remove `lock` when it is stale, with a warning (unless the caller reports it); True when it is gone."""
    if not stale_lock(top, lock):
        return False
    try:
        lock.unlink()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if warn:
        from . import errors  # noqa: PLC0415

        errors.warn(f"removed a stale git lock: {lock} (its git process is gone)")
    return True


def _run(top: Path | str, *args: str, env: dict[str, str] | None = None, input: bytes | None = None,
         settings: tuple[str, ...] = ()) -> str:
    """Run a git command in `top` (`settings`: `-c key=value` for this run), waiting while another
    git process holds one of git's locks.

    A lock whose git is gone (`stale_lock`) is removed with a warning and the
    command runs again; a live one is waited for up to MEMCTL_LOCK_TIMEOUT, then
    LockTimeout (exit 4).
    """
    deadline = None
    delay = 0.02
    given = [arg for setting in settings for arg in ("-c", setting)]
    while True:
        # Paths are file names, never patterns: `note[1].md` must not match `note1.md`;
        # and they are printed as they are (not "\346\227\245..."-quoted).
        done = _git(top, "--literal-pathspecs", "-c", "core.quotePath=false", *given, *args, env=env, input=input)
        if done.returncode == 0:
            out = done.stdout.decode("utf-8", "surrogateescape")
            return out[:-1] if out.endswith("\n") else out
        stderr = done.stderr.decode("utf-8", "replace")
        lock = _lock_in(stderr)
        if lock is not None:
            deadline, delay = _waited(Path(top), lock if lock.is_absolute() else Path(top) / lock, args[0], deadline, delay)
            continue
        raise GitError(f"git {args[0]} failed: {reason(stderr, f'exit status {done.returncode}')}") from None


def reason(stderr: str, fallback: str) -> str:
    """The line of git's stderr that says what went wrong: its first `fatal:` or `error:` line, else
    its last line; `fallback` when it printed nothing. Control characters (a
    remote's `remote:` lines are anyone's text) are shown escaped."""
    raw = [line for line in stderr.splitlines() if line.strip()]
    lines = [line.strip() for line in raw]
    if not lines:
        return fallback
    at = next((n for n, line in enumerate(lines) if line.startswith(("fatal:", "error:"))), len(lines) - 1)
    said = lines[at]
    if said.startswith("fatal: Could not read from remote repository"):  # the cause is ssh's line before it
        cause = [line for line in lines[:at] if not line.startswith(("remote:", "hint:", "warning:"))][-2:]
        said += f" ({'; '.join(cause)})" if cause else ""
    if said.endswith(":"):  # "...would be overwritten by merge:" and the files, one per indented line
        names = [line.strip() for line in itertools.takewhile(lambda line: line[:1] in "\t ", raw[at + 1:])]
        if names:
            said += " " + ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in said)


_NAMED = 5  # files a one-line git error names before "and N more"


def _lock_timeout() -> float:
    from .fsutil import lock_timeout  # noqa: PLC0415  (one reading of MEMCTL_LOCK_TIMEOUT)

    return lock_timeout()


def _waited(top: Path, lock: Path, what: str, deadline: float | None, delay: float) -> tuple[float, float]:
    """Between two tries that failed on `lock`: it is removed when stale, else waited for (LockTimeout
    once `deadline` has passed); then a pause of `delay`. The next (deadline, delay): doubling to 0.5 s."""
    _wait_for_lock(top, lock, what, deadline)
    deadline = deadline or time.monotonic() + _lock_timeout()
    time.sleep(delay)
    return deadline, min(delay * 2, 0.5)


def _wait_for_lock(top: Path, lock: Path, what: str, deadline: float | None) -> None:
    """Remove a stale lock, or raise LockTimeout once a live one has been waited for long enough."""
    if remove_stale_lock(top, lock):
        return
    if deadline is not None and time.monotonic() >= deadline:
        from .errors import LockTimeout  # noqa: PLC0415

        done = {"fetch": "nothing was fetched or merged", "push": "nothing was pushed"}.get(what, "nothing was committed")
        raise LockTimeout(f"git {what}: {lock} is held by another git process; {done}",
                          hint="wait for it to finish, or raise MEMCTL_LOCK_TIMEOUT")


EMPTY_OID = "0" * 40


def _head(top: Path) -> str | None:
    return _head_and_tree(top)[0]


def _head_and_tree(top: Path) -> tuple[str | None, str | None]:
    """HEAD's commit and tree ids in one git call; (None, None) on an unborn branch."""
    done = _git(top, "rev-parse", "HEAD^{commit}", "HEAD^{tree}")
    ids = done.stdout.decode().split()
    return (ids[0], ids[1]) if done.returncode == 0 and len(ids) == 2 else (None, None)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _sweep(top: Path, git_dir: Path) -> None:
    """Leftovers of killed processes: memctl's private indexes, and `git commit -- paths`' next-index locks."""
    for leftover in git_dir.glob("memctl-index-*"):
        pid = leftover.name[len("memctl-index-"):].split(".")[0]
        if pid.isdigit() and not procs.alive(int(pid)):
            _unlink(leftover)
    for leftover in git_dir.glob("next-index-*.lock"):
        if stale_lock(top, leftover):
            _unlink(leftover)


def merge_temp_files(top: Path) -> set[Path]:
    """The temp files `git merge` writes at the top of the work tree for a merge driver (`.merge_file_XXXXXX`):
    a merge that dies (a full disk) leaves them behind, untracked."""
    return {p for p in top.glob(".merge_file_*") if p.is_file() and not p.is_symlink()}


def remove_merge_temps(root: Path) -> None:
    """After a memctl command killed with its git: the `.merge_file_XXXXXX` files that git writes for a
    merge driver and removes when it exits. They are never anyone's content; the dead git left them."""
    top = toplevel(root)
    if top is not None:
        for leftover in merge_temp_files(top):
            leftover.unlink(missing_ok=True)


def commit(root: Path, paths: list[Path], message: str, author: Author,
           contents: dict[Path, bytes] | None = None, *, their_change: bool = False) -> str | None:
    """Commit exactly `paths` in one step; return the new commit id, or None if nothing changed.
    `contents`: for some of the paths, the bytes to commit (those the caller read and checked: a
    file another program is writing meanwhile may hold others by the time git reads it).
    `their_change`: the change is `author`'s (Claude Code's own writes), whatever identity the user
    has: `author` is its author, the user (else `author`) its committer.

    Holding git's own index.lock (so no outside `git commit` runs meanwhile),
    the commit is built in a private index (GIT_INDEX_FILE) from HEAD plus
    `paths`, written with commit-tree, HEAD moves by compare-and-swap
    (`update-ref HEAD NEW OLD`), and git's index takes the new entries for
    `paths`, and only those. So nothing else staged goes into memctl's commit,
    nothing of memctl's is ever staged for someone else's commit, and a ref
    moved meanwhile by other means is kept (memctl's commit is built again on it).
    """
    top = work_tree(root)
    rel = sorted({os.path.relpath(Path(p).resolve() if Path(p).exists() else Path(p), top) for p in paths})
    pinned = {os.path.relpath(Path(p).resolve(), top): data for p, data in (contents or {}).items() if Path(p).is_file()}
    git_dir = top / ".git"
    if not git_dir.is_dir():  # a linked work tree or a submodule: ask git
        git_dir = Path(_run(top, "rev-parse", "--absolute-git-dir"))
    _sweep(top, git_dir)
    real, lock = git_dir / "index", git_dir / "index.lock"
    private = git_dir / f"memctl-index-{os.getpid()}"
    staged = git_dir / f"memctl-index-{os.getpid()}.real"
    env = {"GIT_INDEX_FILE": str(private)}
    _take_index_lock(top, lock)
    owned = True
    try:
        for _attempt in range(20):
            head, head_tree = _head_and_tree(top)
            _unlink(private)
            if head is not None:
                _run(top, "read-tree", head, env=env)
            # Only paths that exist or are in HEAD: `git add` refuses a pathspec that matches nothing.
            missing = [p for p in rel if not (top / p).exists()]
            tracked = set(_run(top, "ls-files", "-z", "--", *missing, env=env).split("\0")) if missing else set()
            keep = [p for p in rel if (top / p).exists() or p in tracked]
            if not keep:
                return None
            added = [p for p in keep if p not in pinned]
            if added:
                _run(top, "add", "-A", "--", *added, env=env)
            for p, data in pinned.items():
                oid = _run(top, "hash-object", "-w", "--stdin", "--path", p, input=data)
                mode = "100755" if os.stat(top / p).st_mode & 0o111 else "100644"
                _run(top, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{p}", env=env)
            tree = _run(top, "write-tree", env=env)
            if tree == head_tree:
                return None  # the paths are as HEAD has them: nothing to commit
            by = {"GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email} if their_change else {}
            sha = _as_user_or(author, top, "commit-tree", tree, *(["-p", head] if head else []), "-m", message, env={**env, **by})
            # git's index as it will be: its own entries, with those of `paths` as in the new commit
            # (plumbing: `git reset -- paths` would hash every touched file once more)
            # (a path may be a folder: every entry under it counts)
            listed = _run(top, "ls-files", "-s", "-z", "--", *keep, env=env)
            entries = {line.split("\t", 1)[1]: line for line in listed.split("\0") if "\t" in line}
            if real.exists():
                import shutil  # noqa: PLC0415

                shutil.copyfile(real, staged)
            else:
                _unlink(staged)
            theirs = {"GIT_INDEX_FILE": str(staged)}
            before = set(_run(top, "ls-files", "-z", "--", *keep, env=theirs).split("\0")) - {""}
            info = list(entries.values()) + [f"0 {EMPTY_OID}\t{p}" for p in sorted(before - entries.keys())]  # mode 0: drop
            if info:
                _run(top, "update-index", "-z", "--index-info", env=theirs,
                     input="".join(line + "\0" for line in info).encode("utf-8", "surrogateescape"))
            if _move_head(top, sha, head, message):
                os.replace(staged, lock)
                os.replace(lock, real)  # what git itself does to commit an index.lock
                owned = False
                return sha
            # HEAD moved by other means (update-ref, a fetch into the branch): build again on top of it
        raise GitError("HEAD kept moving while memctl committed", hint="run the command again")
    finally:
        _unlink(private)
        _unlink(staged)
        if owned:
            _unlink(lock)


def _take_index_lock(top: Path, lock: Path) -> None:
    """Create git's index.lock ourselves (git's own protocol: O_EXCL), waiting for a live holder."""

    def taken() -> bool:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{_OWNER}{os.getpid()}\n".encode())  # so another memctl sees it is live
        except BaseException:  # a full disk: the lock is not left behind, to block git and the next memctl
            os.close(fd)
            os.unlink(lock)
            raise
        os.close(fd)
        return True

    _retry_on_lock(top, lock, "commit", taken)


def index_free(root: Path) -> None:
    """Return once no git holds the index.lock of the repository holding `root` (a stale lock removed with
    a warning, a live one waited for, then LockTimeout): the common case, no lock, costs two stats."""
    found = git_dir(root)
    if found is None or not (found / "index.lock").exists():
        return
    top = toplevel(root)
    if top is not None:
        await_index(top, "commit")


def await_index(top: Path, what: str) -> None:
    """Return once git's index.lock is gone: a stale one removed with a warning, a live one waited for
    (then LockTimeout, exit 4). For `git merge`, which cannot say so when the lock stops it: it saves the
    work tree's state first (`git stash create`), which fails on a held index as "stash failed"."""
    found = git_dir(top)
    if found is not None:
        lock = found / "index.lock"
        _retry_on_lock(top, lock, what, lambda: not lock.exists())


def _retry_on_lock(top: Path, lock: Path, what: str, attempt: Callable[[], bool]) -> None:
    """Call `attempt` until it succeeds; between two tries `lock` is removed when stale, or waited for
    up to MEMCTL_LOCK_TIMEOUT while live (_wait_for_lock)."""
    deadline = None
    delay = 0.02
    while not attempt():
        deadline, delay = _waited(top, lock, what, deadline, delay)


def _move_head(top: Path, sha: str, old: str | None, message: str) -> bool:
    """HEAD (its branch) := sha, only if it is still `old`; False when another commit came first."""
    deadline = None
    while True:
        done = _git(top, "update-ref", "-m", f"commit: {message}", "HEAD", sha, old or EMPTY_OID)
        if done.returncode == 0:
            return True
        if _head(top) != old:
            return False  # an outside commit moved HEAD: build again on top of it
        stderr = done.stderr.decode("utf-8", "replace")
        lock = _lock_in(stderr)
        if lock is None:
            raise GitError(f"git update-ref failed: {reason(stderr, 'update-ref failed')}")
        _wait_for_lock(top, lock if lock.is_absolute() else top / lock, "commit", deadline)
        deadline = deadline or time.monotonic() + _lock_timeout()
        time.sleep(0.05)


def log(root: Path, path: Path, *, upto: str | None = None) -> list[LogEntry]:
    """The commits of the file now at this path, newest first (from `upto` back, when given), back to the
    one that created it: an earlier file of the same path, removed since, is another file's past.

    Renames are not followed: git's --follow guesses them by similarity, and facts are written
    from one template, so a fact created beside another one's removal took on that one's past.
    Where a file came from is the caller's to say (facts.path_history)."""
    top = work_tree(root)
    rel = os.path.relpath(path, top)
    sep = "\x1f"
    out = _run(
        top, "log", "--numstat", "--summary", "--no-renames", f"--format=\x1e%H{sep}%aI{sep}%s", *([upto] if upto else []), "--", rel
    )
    entries = []
    for chunk in out.split("\x1e"):
        if not chunk.strip():
            continue
        head, _, rest = chunk.partition("\n")
        sha, date, message = head.split(sep, 2)
        added = removed = 0
        changed_path = rel
        created = False
        for line in rest.strip().split("\n"):  # not splitlines(): a path may hold U+2028
            parts = line.split("\t")
            if len(parts) == 3:
                added += int(parts[0]) if parts[0].isdigit() else 0
                removed += int(parts[1]) if parts[1].isdigit() else 0
                changed_path = parts[2]
            created = created or line.startswith(" create mode ")  # --summary: the pathspec's one path
        entries.append(LogEntry(sha, date, message, added, removed, changed_path))
        if created:
            break
    return entries


def moved_numstat(root: Path, commit: str, old: Path, new: Path) -> tuple[int, int] | None:
    """(added, removed) lines between `old` in `commit`'s first parent and `new` in `commit` (a file
    the commit moved, as forget and restore do); None when either is not there."""
    top = work_tree(root)
    before, after = (os.path.relpath(p, top).replace(os.sep, "/") for p in (old, new))
    try:
        out = _run(top, "diff", "--numstat", f"{commit}^:{before}", f"{commit}:{after}")
    except GitError:
        return None
    parts = out.split("\t")
    if len(parts) < 3:
        return (0, 0) if not out.strip() else None
    return (int(parts[0]) if parts[0].isdigit() else 0, int(parts[1]) if parts[1].isdigit() else 0)


def removed_in(root: Path, commit: str, under: Path) -> list[str]:
    """Paths under `under` (relative to the work tree) that `commit` removed (renames not followed)."""
    top = work_tree(root)
    out = _run(top, "show", "--no-renames", "--diff-filter=D", "--name-only", "--format=", "-z", commit, "--",
               os.path.relpath(under, top))
    return [p.strip("\n") for p in out.split("\0") if p.strip("\n")]


def changed_since(root: Path, under: Path, since) -> set[str]:
    """Paths under `under` (relative to the work tree) committed at or after `since` (a datetime), or
    changed and not committed yet; empty outside a repository."""
    top = toplevel(root)
    if top is None or git_executable() is None:
        return set()
    rel = os.path.relpath(under, top)
    out = _run(top, "log", f"--since={since.isoformat()}", "--name-only", "--format=", "-z", "--", rel)
    return {p.strip("\n") for p in out.split("\0") if p.strip("\n")} | set(dirty_paths(root, [under]))


def last_commit_times(root: Path, paths: list[Path]) -> dict[str, float]:
    """Path (relative to the work tree, `/`-separated) -> POSIX time of the last commit that changed it,
    for `paths` (one walk of their history); empty outside a repository."""
    top = toplevel(root)
    if top is None or git_executable() is None or not paths:
        return {}
    out = _run(top, "log", "--format=%x01%ct", "--name-only", "-z", "--", *(os.path.relpath(p, top) for p in paths))
    times: dict[str, float] = {}
    when = 0.0
    for token in out.split("\0"):
        token = token.strip("\n")
        if token.startswith("\x01"):
            when = float(token[1:])
        elif token:
            times.setdefault(token, when)  # newest first: the first time a path shows is its last change
    return times


def versions(root: Path, path: Path, limit: int | None = None) -> list[tuple[str, str, bytes | None]]:
    """Every committed version of `path`, oldest first: (commit, subject, bytes); b"" where a commit
    deleted it, None for a version over `limit` bytes (not read: a commit may hold anyone's file)."""
    repo = _repo(root)
    if repo is None:
        raise GitError(f"{root} is not a git repository")
    top = Path(repo.working_tree_dir)
    rel = os.path.relpath(path, top)
    sep = "\x1f"
    # One NUL after each commit (-z): a subject may hold U+2028 or U+0085, which str.splitlines() splits on.
    out = _run(top, "log", "-z", "--reverse", f"--format=%H{sep}%s", "--", rel)
    result = []
    for line in filter(None, out.split("\0")):
        sha, _, subject = line.partition(sep)
        try:
            blob = repo.commit(sha).tree / rel
        except KeyError:
            result.append((sha, subject, b""))
            continue
        result.append((sha, subject, None if limit is not None and blob.size > limit else blob.data_stream.read()))
    return result


def dirty_paths(root: Path, under: list[Path]) -> list[str]:
    """Paths under `under` with uncommitted changes (untracked included)."""
    return [path for _, path in dirty_entries(root, under)]


def dirty_entries(root: Path, under: list[Path]) -> list[tuple[str, str]]:
    """(git status's two-letter code, path) of each path under `under` with uncommitted changes;
    `??` is a file git does not track. A read: git may not write its index for it (a full disk, a
    concurrent git), hence --no-optional-locks."""
    top = toplevel(root)
    if top is None:
        return []
    rel = [os.path.relpath(p, top) for p in under]
    out = _run(top, "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all", "--", *rel)
    entries, fields = [], iter(out.split("\0"))
    for entry in fields:
        if len(entry) > 3:
            entries.append((entry[:2], entry[3:]))
            if "R" in entry[:2] or "C" in entry[:2]:  # a rename or copy: its source path is the next field
                entries.append((entry[:2], next(fields, "")))
    return [(code, path) for code, path in entries if path]


class FileVersion(NamedTuple):
    commit: str
    subject: str
    data: bytes  # the file in this commit (b"" when it was deleted)
    parents: tuple[str, ...]
    parent_data: tuple[bytes, ...]  # the file in each parent, same order


def _blob(repo, rev: str, rel: str) -> bytes:
    try:
        return (repo.commit(rev).tree / rel).data_stream.read()
    except (KeyError, ValueError):
        return b""


def _committed(top: Path, path: Path, rev: str) -> bytes | None:
    """The bytes of `path` at `rev`, or None when it is not there (or there is no such commit)."""
    rel = Path(os.path.relpath(path, top)).as_posix()
    done = _git(top, "cat-file", "blob", f"{rev}:{rel}")
    return done.stdout if done.returncode == 0 else None


def file_at(root: Path, path: Path, rev: str = "HEAD") -> bytes:
    """The bytes of `path` at `rev` (b"" when it does not exist there)."""
    top = work_tree(root)
    return _committed(top, path, rev) or b""


def file_history(root: Path, path: Path) -> list[FileVersion]:
    """Every commit that changed `path`, merges included, parents before children.

    With each commit come its real parents and the file as it was in each, so
    a caller can compare a version with exactly what it was made from.
    """
    repo = _repo(root)
    if repo is None:
        raise GitError(f"{root} is not a git repository")
    if not repo.head.is_valid():
        return []
    rel = os.path.relpath(path, repo.working_tree_dir)
    sep = "\x1f"
    out = _run(repo.working_tree_dir, "log", "-z", "--full-history", "--topo-order", "--reverse", f"--format=%H{sep}%P{sep}%s",
               "--", rel)  # -z: see versions()
    cache: dict[str, bytes] = {}

    def data_at(rev: str) -> bytes:
        if rev not in cache:
            cache[rev] = _blob(repo, rev, rel)
        return cache[rev]

    history = []
    for line in filter(None, out.split("\0")):
        sha, parents, subject = line.split(sep, 2)
        parent_ids = tuple(parents.split())
        history.append(FileVersion(sha, subject, data_at(sha), parent_ids, tuple(data_at(p) for p in parent_ids)))
    return history


def committed_bytes(root: Path, path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of `path` at HEAD, or None when it is not committed (or is over `limit` bytes: not read)."""
    top = toplevel(root)
    if top is None:
        return None
    if limit is not None:
        size = size_at(top, "HEAD", Path(os.path.relpath(path, top)).as_posix())
        if size is None or size > limit:
            return None
    return _committed(top, path, "HEAD")


def size_at(top: Path, rev: str, rel: str) -> int | None:
    """The bytes of `rel` (relative to the work tree `top`) at `rev`, unread; None when it has none."""
    done = _git(top, "cat-file", "-s", f"{rev}:{rel}")
    return int(done.stdout) if done.returncode == 0 else None


def committed_text(root: Path, path: Path) -> str | None:
    """The text of `path` at HEAD, or None when it is not committed."""
    data = committed_bytes(root, path)
    return None if data is None else data.decode("utf-8", errors="replace")


def was_deleted(root: Path, path: Path) -> bool:
    """Whether git knew `path` and it is gone: in HEAD (removed since, not committed yet), or removed by a
    commit. False outside git, and for a path git never had."""
    top = toplevel(root)
    if top is None:
        return False
    if _committed(top, path, "HEAD") is not None:
        return True
    done = run(top, "log", "-1", "--format=%H", "--diff-filter=D", "--", os.path.relpath(path, top))
    return done.code == 0 and bool(done.out.strip())


def matches_head(root: Path, paths: list[Path]) -> bool:
    """Whether each path's bytes in the work tree are what HEAD holds (both absent counts)."""
    top = toplevel(root)
    if top is None:
        return False
    for path in paths:
        path = Path(path)
        committed = _committed(top, path, "HEAD")
        try:
            current = path.read_bytes() if not path.is_symlink() else None
        except FileNotFoundError:
            current = None
        except OSError:
            return False
        if committed != current:
            return False
    return True


def refresh_index(root: Path, paths: list[Path]) -> None:
    """git's index := HEAD for `paths` (what a commit killed before its last step leaves undone)."""
    top = toplevel(root)
    if top is None or _head(top) is None:
        return
    rel = [os.path.relpath(p, top) for p in paths]
    tracked = _run(top, "ls-files", "-z", "--", *rel).split("\0")
    in_head = _run(top, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *rel).split("\0")
    keep = sorted({p for p in tracked + in_head if p})
    if keep:
        _run(top, "reset", "-q", "--", *keep)


# ---------------------------------------------------------------- unfinished merges and remotes (docs/SYNC.md)

_UNFINISHED = early.UNFINISHED


def git_dir(root: Path) -> Path | None:
    """The repository's git directory for the work tree holding `root`, found without running git
    (a `.git` folder, or a `.git` file pointing at one: worktrees, submodules)."""
    for folder in (Path(root), *Path(root).parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            try:
                text = dot.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None
            if text.startswith("gitdir:"):
                target = Path(text[len("gitdir:"):].strip())
                return target if target.is_absolute() else (folder / target).resolve()
            return None
    return None


def detached(root: Path) -> bool:
    """Whether HEAD names a commit, not a branch (`git checkout --detach`, a tag, a bisect)."""
    gitdir = git_dir(root)
    try:
        return gitdir is not None and not (gitdir / "HEAD").read_bytes().startswith(b"ref:")
    except OSError:
        return False


def git_c(root: Path) -> str:
    """`git -C <root>`, quoted for a shell: the start of a command a hint gives (a job's reader is not in the store)."""
    import shlex  # noqa: PLC0415

    return f"git -C {shlex.quote(str(root))}"


def common_git_dir(root: Path) -> Path | None:
    """The folder git keeps what every worktree shares in (refs, config, info/attributes): a linked
    worktree's git folder names it in its `commondir` file; else the git folder itself."""
    found = git_dir(root)
    if found is None:
        return None
    try:
        return (found / (found / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, ValueError):
        return found  # no commondir (the usual case), or one that cannot be read


def git_folders(root: Path) -> list[Path]:
    """The git folder of the work tree holding `root` and, for a linked worktree, the shared one: each
    only when it is one (it holds git's HEAD), so a `.git` file naming any folder (`gitdir: ..`) does
    not make that folder git's (the undo log leaves git's folders alone: fsutil.undo_log)."""
    found = (git_dir(root), common_git_dir(root))
    return list(dict.fromkeys(p for p in found if p is not None and (p / "HEAD").is_file()))


def unfinished_operation(root: Path) -> str | None:
    """"merge", "rebase", "cherry-pick" or "revert" when one was started and not finished; else None.

    Cheap (a few stat calls), so every write can ask before it starts.
    """
    found = git_dir(root)
    if found is None:
        return None
    for name, what in _UNFINISHED:
        if (found / name).exists():
            return what
    return None


SYNC_MERGE = "memctl: sync merge "  # how `memctl sync` begins its merge's message: MERGE_MSG says whose merge it is


SYNC_MARK = "memctl-sync-merge"  # in the git dir: the commit `memctl sync` merges, written before its `git merge`


def mark_sync_merge(root: Path, theirs: str) -> None:
    """Say, before `git merge`, which commit sync merges: a git killed after it wrote MERGE_HEAD and
    before MERGE_MSG held the message leaves that merge recognisable as sync's (sync_merge_unfinished)."""
    from .fsutil import atomic_write  # noqa: PLC0415

    found = git_dir(root)
    if found is not None:
        atomic_write(found / SYNC_MARK, theirs + "\n")


def unmark_sync_merge(root: Path) -> None:
    """Take the mark away once sync's merge is over (committed, or aborted); one a merge left unfinished
    stays, for the next sync or doctor to know it."""
    found = git_dir(root)
    if found is not None and not (found / "MERGE_HEAD").exists():
        try:
            (found / SYNC_MARK).unlink(missing_ok=True)
        except OSError:
            pass


def sync_merge_unfinished(root: Path) -> bool:
    """Whether the unfinished merge is one `memctl sync` started (its MERGE_MSG; with none written yet,
    a MERGE_HEAD that is the commit sync marked), not a merge of the user's."""
    found = git_dir(root)
    if found is None or not (found / "MERGE_HEAD").exists():
        return False
    try:
        with open(found / "MERGE_MSG", "rb") as handle:
            message = handle.read(len(SYNC_MERGE))
    except FileNotFoundError:
        message = b""
    except OSError:
        return False
    if message.strip():
        return message == SYNC_MERGE.encode()
    try:  # (a user's `git merge` killed there too has another MERGE_HEAD than the commit sync last merged)
        return (found / SYNC_MARK).read_text(encoding="ascii").strip() == (found / "MERGE_HEAD").read_text(encoding="ascii").split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return False


def abort_merge(root: Path, written: list[Path]) -> None:
    """Abort the unfinished merge, and put each of `written` (what was written during it) back as HEAD has it."""
    top = work_tree(root)
    rels = [os.path.relpath(p, top) for p in written]
    # A failed `merge --abort` may have undone the merge all the same: its last step, ORIG_HEAD and HEAD,
    # fails on a lock a killed git left (HEAD.lock), after the index and MERGE_HEAD were dealt with.
    if run(top, "merge", "--abort").code != 0 and unfinished_operation(root) == "merge":
        # `merge --abort` (reset --merge) refuses, and leaves the merge in place, when a file was changed in
        # the index and again after it, as MEMORY.md is by a sync killed while regenerating it after
        # `git add`: those of `written` in the index are put back as HEAD has them, then it is asked again.
        refresh_index(root, written)
        checked(top, "merge", "--abort")
    in_head = set(checked(top, "ls-tree", "-z", "-r", "--name-only", "HEAD", "--", *rels).split("\0")) if rels else set()
    if in_head - {""}:
        checked(top, "checkout", "HEAD", "--", *sorted(in_head - {""}))
    for rel in rels:
        if rel not in in_head and os.path.lexists(top / rel):
            os.unlink(top / rel)  # a file the merge added (a conflict copy): never committed


class GitResult(NamedTuple):
    code: int
    out: str
    err: str


def run(top: Path, *args: str, author: Author | None = None, timeout: float | None = None) -> GitResult:
    """Run git and return its exit code and output, for callers that act on a failure (sync); with a
    `timeout`, GitError once git has taken that long (network_timeout).

    A failure on a lock is dealt with as `_run` does (a stale lock removed with a warning and git run
    again, a live one waited for, then LockTimeout, exit 4) when the lock lies in this repository's own
    git folder (a ref's, packed-refs', the index's: a killed `git fetch` leaves
    `refs/remotes/origin/master.lock`) or in a repository on this machine that a push went to (a path
    remote: a folder, a mounted share), where another clone's push holds it for a moment and a killed one
    leaves it (`remote.git/HEAD.lock`). A lock that is not on this machine (an ssh remote's) is the
    caller's."""
    deadline, delay = None, 0.02
    while True:
        done = _git(top, "-c", "core.quotePath=false", *args, env=_env(author) if author else None, timeout=timeout)
        out = done.stdout.decode("utf-8", "surrogateescape")
        result = GitResult(done.returncode, out[:-1] if out.endswith("\n") else out,
                           done.stderr.decode("utf-8", "replace").strip())
        held = _held_lock(top, result.err) if result.code else None
        if held is None:
            return result
        repo, lock = held
        deadline, delay = _waited(repo, lock, _subcommand(args), deadline, delay)


def _subcommand(args: Sequence[str]) -> str:
    """git's subcommand among its arguments (`-c key=value` pairs and options before it skipped)."""
    words = iter(args)
    for word in words:
        if word == "-c":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return "git"


def _held_lock(top: Path, stderr: str) -> tuple[Path, Path] | None:
    """The lock a failed git names, with the repository it lies in: this one's git folder, or (named by
    its absolute path) one on this machine's filesystem, a path remote's. None for any other path."""
    own = _own_lock(top, stderr)
    if own is not None:
        return Path(top), own
    lock = _lock_in(stderr)
    if lock is None or not lock.is_absolute() or "File exists" not in stderr:  # (not "Permission denied": no wait ends that)
        return None
    repo = next((p for p in lock.parents if (p / "HEAD").is_file() and (p / "objects").is_dir()), None)
    return None if repo is None else (repo, lock)


def _own_lock(top: Path, stderr: str) -> Path | None:
    """The lock a failed git names when it lies in the git folder of the repository at `top`."""
    lock = _lock_in(stderr)
    found = git_dir(top)
    if lock is None or found is None:
        return None
    lock = lock if lock.is_absolute() else Path(top) / lock
    folders = git_folders(top)  # a linked worktree's refs live in the main repository's folder
    return lock if any(lock.is_relative_to(f) or lock.resolve().is_relative_to(f.resolve()) for f in folders) else None


class Started(NamedTuple):
    """A git command `start()` started: its process id and the read ends of its stdout and stderr."""

    pid: int
    out: int
    err: int


def start(top: Path, *args: str) -> Started:
    """Start a read-only git command and return at once (sync_fast.py runs a few side by side);
    `finish()` collects it. Paths are literal and printed unquoted, as with `checked()`.

    os.posix_spawn, not subprocess: `import subprocess` costs more (~3 ms) than a sync with
    nothing to do can spare (docs/SYNC.md, "Speed"). git runs in `top` by its `-C`.
    """
    found = early.take(str(top), args)  # `memctl sync` started its status before the imports (early.py)
    if found is not None:
        return Started(*found)
    if git_executable() is None:
        raise no_git()
    try:
        return Started(*early.spawn(str(top), args))
    except OSError as exc:  # git vanished
        raise GitError(f"cannot run git: {exc}") from None


def abandon(started: Started) -> None:
    """Stop a command `start()` started whose answer is not wanted, without reading it (its ssh may hold
    the pipes for as long as the network hangs)."""
    early.abandon(started.pid, started.out, started.err)


def finish(started: Started, timeout: float | None = None) -> GitResult:
    """Wait for a command `start()` started and return what it printed (both pipes read as they
    fill, so that a long stderr cannot stall git). With a `timeout`, the git is killed once it has
    taken that long (GitError), as in _git."""
    import select  # noqa: PLC0415

    chunks: dict[int, list[bytes]] = {started.out: [], started.err: []}
    reading = [started.out, started.err]
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while reading:
            ready = select.select(reading, [], [], None if deadline is None else max(0.0, deadline - time.monotonic()))[0]
            if deadline is not None and not ready and time.monotonic() >= deadline:
                early.stop(started.pid)
                raise no_answer("", timeout)
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if data:
                    chunks[fd].append(data)
                else:
                    reading.remove(fd)
    except BaseException:  # Ctrl-C, a SIGTERM: git and its ssh go with us (the wait below would wait for them)
        early.stop(started.pid)
        raise
    finally:
        for fd in (started.out, started.err):
            os.close(fd)
        code = os.waitstatus_to_exitcode(os.waitpid(started.pid, 0)[1])
    text = b"".join(chunks[started.out]).decode("utf-8", "surrogateescape")
    return GitResult(code, text[:-1] if text.endswith("\n") else text,
                     b"".join(chunks[started.err]).decode("utf-8", "replace").strip())


def checked(top: Path, *args: str, author: Author | None = None) -> str:
    """Run git; a failure raises GitError with git's last line. A command that commits names the
    `author` to use when the user has no git identity (`_as_user_or`)."""
    return _as_user_or(author, top, *args) if author else _run(top, *args)


LOOSE_LIMIT = 64 << 20  # bytes of loose objects past which `maintain` packs them


def pack_loose(root: Path, limit: int | None = None) -> int:
    """Pack the repository's loose objects when they take more than `limit` bytes; the bytes they took
    then (0: left alone). memctl commits with plumbing, so the `gc --auto` git runs after its own commits
    never runs, and it counts objects, not bytes: each episode added to a 40 MB ledger left an 8.5 MB
    copy of it loose (ten adds: 85 MB; packed, they are deltas of one another)."""
    top = toplevel(root)
    if top is None:
        return 0
    counted = dict(line.split(": ", 1) for line in checked(top, "count-objects", "-v").splitlines() if ": " in line)
    loose = int(counted.get("size", "0")) * 1024  # (KiB)
    if loose <= (LOOSE_LIMIT if limit is None else limit):
        return 0
    try:
        checked(top, "repack", "-d", "-q")  # the loose objects into one more pack: no object is dropped
        checked(top, "prune-packed", "-q")  # and the loose copies of what is now packed removed
    except GitError as exc:  # (a repository that forbids it: preciousObjects) the objects stay as they were
        from .errors import warn  # noqa: PLC0415

        warn(f"git's loose objects ({loose >> 20} MiB) were not packed: {exc.message}", hint="run `git gc` in the store")
        return 0
    return loose


def blob(top: Path, sha: str) -> bytes:
    """An object's bytes, exactly (no newline trimmed)."""
    done = _git(top, "cat-file", "blob", sha)
    if done.returncode != 0:
        raise GitError(f"git cat-file failed for {sha}")
    return done.stdout


def files_at(top: Path, rel: str, revs: list[str]) -> dict[str, bytes | None]:
    """The bytes of the file `rel` (relative to the work tree) at each of `revs`, in one git process;
    None where a revision has no such file."""
    wanted = list(dict.fromkeys(revs))
    if not wanted:
        return {}
    done = _git(top, "cat-file", "--batch", input="".join(f"{rev}:{rel}\n" for rev in wanted).encode("utf-8", "surrogateescape"))
    out, pos, found = done.stdout, 0, {}
    for rev in wanted:
        end = out.find(b"\n", pos)
        if end == -1:
            break
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found[rev] = out[pos:pos + size]
            pos += size + 1
        else:
            found[rev] = None  # missing, or not a file
            if len(header) == 3:
                pos += int(header[2]) + 1
    return found


# The merge drivers `.gitattributes` names (memctl/merge.py holds the resolvers; docs/SYNC.md).
MERGE_DRIVERS = {
    "index": "memctl MEMORY.md: the index block merged by line",
    "topic": "memctl memory-index/*.md: the topic file merged by line",
    "state": "memctl STATE.md: the newer snapshot wins",
    "ledger": "memctl ledger: union, header once",
    "fact": "memctl fact: the newer version in place, the other kept as a conflict",
    "archive": "memctl archived fact: the newer version",
}


def merge_driver_command(kind: str) -> str:
    import shlex  # noqa: PLC0415
    import sys  # noqa: PLC0415

    # This interpreter by its full path: git runs drivers with the user's PATH (cron's
    # may have no `memctl` on it), and the same memctl then resolves every clone's merges.
    return f"{shlex.quote(sys.executable)} -m memctl merge-driver {kind} %O %A %B %P"


# What .git/info/attributes adds to each of memctl's lines: no conversion of its bytes on checkout, whatever
# a pushed .gitattributes asks (`eol=crlf`, `working-tree-encoding=UTF-16`, `ident`).
PINNED_ATTRIBUTES = " -text -ident -working-tree-encoding"


def info_attribute_lines(root: Path, top: Path, lines: list[str]) -> list[str]:
    """The lines of .git/info/attributes (this clone only; they take precedence over any .gitattributes,
    so a pushed one cannot send memctl's files to git's own `merge=union`, nor convert them): memctl's
    .gitattributes `lines` (relative to the store `root`) made relative to the work tree `top`, ledgers
    on memctl's ledger driver, memctl.toml on git's text merge (a conflict there stops the sync)."""
    prefix = Path(os.path.relpath(Path(root).resolve(), top)).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    out = []
    for line in [*lines, "/memctl.toml merge=text"]:
        pattern, attrs = line.split(" ", 1)
        if pattern == "ledgers/*.tsv":
            attrs = "merge=memctl-ledger"
        out.append(f"{prefix + pattern.lstrip('/') if prefix else pattern} {attrs}{PINNED_ATTRIBUTES}")
    return out


def register_merge_drivers(root: Path, lines: list[str]) -> list[str]:
    """Define memctl's merge drivers in this clone's .git/config, and write info_attribute_lines for
    memctl's .gitattributes `lines` into .git/info/attributes (this clone only: a clone never set up
    keeps git's union merge for ledgers). Turns git's untracked cache on unless a git config (any
    level) sets core.untrackedCache. Returns what changed; nothing when all is in place."""
    top = toplevel(root)
    if top is None:
        return []
    changed: list[str] = []
    current = dict(line.split(" ", 1) for line in _git(top, "config", "--get-regexp", r"^merge\.memctl-")
                   .stdout.decode("utf-8", "replace").splitlines() if " " in line)
    for kind, name in MERGE_DRIVERS.items():
        for key, value in ((f"merge.memctl-{kind}.name", name), (f"merge.memctl-{kind}.driver", merge_driver_command(kind))):
            if current.get(key) != value:
                _run(top, "config", key, value)
                if key.endswith(".driver"):
                    changed.append(key)
    if _git(top, "config", "core.untrackedCache").returncode == 1:  # set nowhere: no one chose otherwise
        # `git status` remembers which folders held no untracked file and lists only those that
        # changed since: the hand-edit check of `memctl sync` over 10,000 facts (docs/SYNC.md, "Speed").
        _run(top, "config", "core.untrackedCache", "true")
        changed.append("core.untrackedCache")
    gitdir = common_git_dir(top)  # git reads info/attributes there, for every worktree
    if gitdir is not None:
        info = gitdir / "info" / "attributes"
        text = info.read_text(encoding="utf-8") if info.exists() else ""
        lacking = [line for line in info_attribute_lines(root, top, lines) if line not in text.splitlines()]
        if lacking:
            from .fsutil import atomic_write  # noqa: PLC0415

            info.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(info, text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(lacking) + "\n")
            changed.append("info/attributes")
    return changed


def _quoted(path) -> str:
    import shlex  # noqa: PLC0415

    return shlex.quote(str(path))
