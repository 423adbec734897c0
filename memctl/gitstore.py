"""The only module that talks to git.

Commands run the git CLI directly (`_run`): finding the work tree, status,
log and commits. GitPython is kept for reading blobs out of history (its
persistent `cat-file` process makes `ledger verify` and `state history`
cheap on long histories) and imported only there: importing it costs ~85 ms,
more than most writes take. The author comes from memctl.toml so that
launchd/cron jobs do not depend on ~/.gitconfig, and a commit stages and
records only the paths the caller touched.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import NamedTuple

from .errors import GitError

# Where git usually lives when a scheduled job runs with a minimal PATH.
_FALLBACK_GITS = ("/usr/bin/git", "/usr/local/bin/git", "/opt/homebrew/bin/git")
_LOCK_RETRY_SECONDS = 15.0


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


def git_executable() -> str | None:
    given = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE")
    found = given if given and os.access(given, os.X_OK) else shutil.which("git")
    if found:
        return found
    for candidate in _FALLBACK_GITS:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _git_module():
    exe = git_executable()
    if exe is None:
        raise GitError("git not found", hint="install git, or use --no-commit / MEMCTL_NO_COMMIT=1")
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    os.environ["GIT_PYTHON_GIT_EXECUTABLE"] = exe
    import git  # noqa: PLC0415  (lazy: keeps `memctl --help` fast)

    return git


def _repo(path: Path):
    """A GitPython Repo, for reading objects out of history (None outside a repository)."""
    git = _git_module()
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _git(top: Path | str, *args: str, env: dict[str, str] | None = None):
    import subprocess  # noqa: PLC0415

    exe = git_executable()
    if exe is None:
        raise GitError("git not found", hint="install git, or use --no-commit / MEMCTL_NO_COMMIT=1")
    try:
        return subprocess.run([exe, *args], cwd=top, env={**os.environ, **env} if env else None,
                              stdin=subprocess.DEVNULL, capture_output=True)
    except OSError as exc:  # git vanished, or the directory did
        raise GitError(f"cannot run git: {exc}") from None


_TOPLEVELS: dict[str, Path] = {}  # found work trees, per directory asked about: one command asks often


def toplevel(path: Path) -> Path | None:
    """The work tree holding `path`, or None (no repository, or no git)."""
    if git_executable() is None or not Path(path).is_dir():
        return None
    known = _TOPLEVELS.get(str(path))
    if known is not None and (known / ".git").exists():
        return known
    try:
        done = _git(path, "rev-parse", "--show-toplevel")
    except GitError:
        return None
    top = done.stdout.decode("utf-8", "surrogateescape")
    top = top[:-1] if top.endswith("\n") else top  # only the newline: a name may end in a space
    if done.returncode != 0 or not top:
        return None
    _TOPLEVELS[str(path)] = Path(top)
    return Path(top)


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


def _run(top: Path | str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a git command in `top`, retrying while another process holds git's index lock."""
    deadline = time.monotonic() + _LOCK_RETRY_SECONDS
    delay = 0.02
    while True:
        # Paths are file names, never patterns: `note[1].md` must not match `note1.md`;
        # and they are printed as they are (not "\346\227\245..."-quoted).
        done = _git(top, "--literal-pathspecs", "-c", "core.quotePath=false", *args, env=env)
        if done.returncode == 0:
            out = done.stdout.decode("utf-8", "surrogateescape")
            return out[:-1] if out.endswith("\n") else out
        stderr = done.stderr.decode("utf-8", "replace")
        if "index.lock" in stderr and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
            continue
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {done.returncode}"
        raise GitError(f"git {args[0]} failed: {detail}") from None


def commit(root: Path, paths: list[Path], message: str, author: Author) -> str | None:
    """Stage and commit exactly `paths`; return the new commit id, or None if nothing changed."""
    top = toplevel(root)
    if top is None:
        raise GitError(f"{root} is not a git repository")
    rel = sorted({os.path.relpath(Path(p).resolve() if Path(p).exists() else Path(p), top) for p in paths})
    missing = [p for p in rel if not (top / p).exists()]
    tracked = set(_run(top, "ls-files", "-z", "--", *missing).split("\0")) if missing else set()
    keep = [p for p in rel if (top / p).exists() or p in tracked]
    if not keep:
        return None
    _run(top, "add", "-A", "--", *keep)
    staged = _run(top, "diff", "--cached", "--name-only", "-z", "--", *keep)
    if not staged.strip("\0"):
        return None
    _run(top, "commit", "-q", "--no-verify", "-m", message, "--", *keep, env=_env(author))
    return _run(top, "rev-parse", "HEAD")


def log(root: Path, path: Path) -> list[LogEntry]:
    """The history of one file, following renames (an archived fact keeps its past)."""
    top = toplevel(root)
    if top is None:
        raise GitError(f"{root} is not a git repository")
    rel = os.path.relpath(path, top)
    sep = "\x1f"
    out = _run(
        top, "log", "--follow", "--numstat", f"--format=\x1e%H{sep}%aI{sep}%s", "--", rel
    )
    entries = []
    for chunk in out.split("\x1e"):
        if not chunk.strip():
            continue
        head, _, rest = chunk.partition("\n")
        sha, date, message = head.split(sep, 2)
        added = removed = 0
        changed_path = rel
        for line in rest.strip().splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                added += int(parts[0]) if parts[0].isdigit() else 0
                removed += int(parts[1]) if parts[1].isdigit() else 0
                changed_path = parts[2]
        entries.append(LogEntry(sha, date, message, added, removed, changed_path))
    return entries


def versions(root: Path, path: Path) -> list[tuple[str, str, bytes]]:
    """Every committed version of `path`, oldest first: (commit, subject, bytes)."""
    repo = _repo(root)
    if repo is None:
        raise GitError(f"{root} is not a git repository")
    top = Path(repo.working_tree_dir)
    rel = os.path.relpath(path, top)
    sep = "\x1f"
    out = _run(top, "log", "--reverse", f"--format=%H{sep}%s", "--", rel)
    result = []
    for line in out.splitlines():
        sha, _, subject = line.partition(sep)
        try:
            blob = repo.commit(sha).tree / rel
        except KeyError:
            result.append((sha, subject, b""))
            continue
        result.append((sha, subject, blob.data_stream.read()))
    return result


def dirty_paths(root: Path, under: list[Path]) -> list[str]:
    """Paths under `under` with uncommitted changes (untracked included)."""
    top = toplevel(root)
    if top is None:
        return []
    rel = [os.path.relpath(p, top) for p in under]
    out = _run(top, "status", "--porcelain", "-z", "--untracked-files=all", "--", *rel)
    return [entry[3:] for entry in out.split("\0") if len(entry) > 3]


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
    top = toplevel(root)
    if top is None:
        raise GitError(f"{root} is not a git repository")
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
    out = _run(repo.working_tree_dir, "log", "--full-history", "--topo-order", "--reverse", f"--format=%H{sep}%P{sep}%s", "--", rel)
    cache: dict[str, bytes] = {}

    def data_at(rev: str) -> bytes:
        if rev not in cache:
            cache[rev] = _blob(repo, rev, rel)
        return cache[rev]

    history = []
    for line in out.splitlines():
        sha, parents, subject = line.split(sep, 2)
        parent_ids = tuple(parents.split())
        history.append(FileVersion(sha, subject, data_at(sha), parent_ids, tuple(data_at(p) for p in parent_ids)))
    return history


def committed_text(root: Path, path: Path) -> str | None:
    """The text of `path` at HEAD, or None when it is not committed."""
    top = toplevel(root)
    data = _committed(top, path, "HEAD") if top is not None else None
    return None if data is None else data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- unfinished merges and remotes (docs/SYNC.md)

_UNFINISHED = (("MERGE_HEAD", "merge"), ("rebase-merge", "rebase"), ("rebase-apply", "rebase"),
               ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"))


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


class GitResult(NamedTuple):
    code: int
    out: str
    err: str


def run(top: Path, *args: str, author: Author | None = None) -> GitResult:
    """Run git and return its exit code and output, for callers that act on a failure (sync)."""
    done = _git(top, "-c", "core.quotePath=false", *args, env=_env(author) if author else None)
    out = done.stdout.decode("utf-8", "surrogateescape")
    return GitResult(done.returncode, out[:-1] if out.endswith("\n") else out,
                     done.stderr.decode("utf-8", "replace").strip())


def checked(top: Path, *args: str, author: Author | None = None) -> str:
    """Run git; a failure raises GitError with git's last line."""
    return _run(top, *args, env=_env(author) if author else None)


def blob(top: Path, sha: str) -> bytes:
    """An object's bytes, exactly (no newline trimmed)."""
    done = _git(top, "cat-file", "blob", sha)
    if done.returncode != 0:
        raise GitError(f"git cat-file failed for {sha}")
    return done.stdout


# The merge drivers `.gitattributes` names (memctl/merge.py holds the resolvers; docs/SYNC.md).
MERGE_DRIVERS = {
    "index": "memctl MEMORY.md: the index block merged by line",
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


def register_merge_drivers(root: Path) -> list[str]:
    """Define memctl's merge drivers in this clone's .git/config, and send ledgers to theirs in
    .git/info/attributes (this clone only: a clone never set up keeps git's union merge).
    Returns what changed; nothing when all is in place."""
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
    prefix = Path(os.path.relpath(Path(root).resolve(), top)).as_posix()
    line = ("" if prefix == "." else prefix + "/") + "ledgers/*.tsv merge=memctl-ledger"
    gitdir = git_dir(top)
    if gitdir is not None:
        info = gitdir / "info" / "attributes"
        text = info.read_text(encoding="utf-8") if info.exists() else ""
        if line not in text.splitlines():
            from .fsutil import atomic_write  # noqa: PLC0415

            info.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(info, text + ("" if text.endswith("\n") or not text else "\n") + line + "\n")
            changed.append("info/attributes")
    return changed
