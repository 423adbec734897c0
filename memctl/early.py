"""Finding git, and starting the `git status` (and `git config`) of `memctl sync` before Python imports the rest.

A sync with nothing to do (sync_fast.py) is bounded by two things that can run at
once on two cores: Python importing memctl's modules (~15 ms) and `git status`
stat-ing every file of the work tree (~11 ms at 10,000 facts). So `memctl sync`
starts that status first, with the `git config` and `git ls-remote` it will ask
for (`start_sync_status`, called by the CLI's entry point with only `os` and
`sys` loaded; the remote guessed from .git/config as sync chooses it), and
gitstore.start() hands a running process to sync_fast when it asks for the same
command in the same folder (`take`).
Whatever is not taken is collected and dropped (`discard`).

They run before the store lock is taken: sync_fast reads HEAD again under the
lock and trusts the status only when HEAD is where the status saw it (the config
is read-only and only says whether the clone is set up).
Nothing here imports more than `os`; it is on the start-up path of `memctl sync`.
"""

from __future__ import annotations

import os

from .values import env_on

# Where git usually lives when a scheduled job runs with a minimal PATH.
FALLBACK_GITS = ("/usr/bin/git", "/usr/local/bin/git", "/opt/homebrew/bin/git")
# The fast path's `git status`: the whole work tree, untracked folders shown as folders, so that git's
# untracked cache (core.untrackedCache, set by setup) answers for every folder that did not change;
# git uses it neither under a pathspec nor with --untracked-files=all (sync_fast._memctls keeps memctl's paths).
FAST_STATUS = ("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal")
# ... and its `git config`: memctl's merge drivers, the remotes, the branches, and whether anyone
# chose an untracked cache (git names keys in lower case here).
FAST_CONFIG = ("config", "-z", "--get-regexp", r"^(merge\.memctl-|remote\.|branch\.|core\.untrackedcache$)")
GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES")
# What git leaves in its directory while an operation is unfinished (gitstore.unfinished_operation) ...
UNFINISHED = (("MERGE_HEAD", "merge"), ("rebase-merge", "rebase"), ("rebase-apply", "rebase"),
              ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"))
MERGE_LOG = "memctl-merge.log"  # ... and memctl's merge drivers, until sync reads it (sync_fast.LOG_NAME)

_STARTED: dict[tuple[str, tuple[str, ...]], tuple[int, int, int]] = {}  # (folder, args) -> (pid, out, err)


def git_executable() -> str | None:
    """The git memctl runs: MEMCTL_GIT when set (that one only: None when it does not run), else
    GIT_PYTHON_GIT_EXECUTABLE, else git on PATH, else FALLBACK_GITS (a scheduled job's PATH is minimal)."""
    named = os.environ.get("MEMCTL_GIT")
    if named:
        return named if os.access(named, os.X_OK) and not os.path.isdir(named) else None
    given = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE")
    found = given if given and os.access(given, os.X_OK) else _on_path("git")
    if found:
        return found
    for candidate in FALLBACK_GITS:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


# What memctl wants in its own environment, set by `settle_environment` before any thread starts.
ENV_DEFAULTS = (
    ("GIT_PYTHON_REFRESH", "quiet"),  # GitPython: memctl reports a missing git itself (gitstore.no_git)
    ("OMP_WAIT_POLICY", "PASSIVE"),  # e5: spinning OpenMP threads turn a 30 ms query into seconds on busy cores
    ("TOKENIZERS_PARALLELISM", "false"),  # sentence-transformers: no fork warnings, no extra threads
    ("OPENBLAS_MAIN_FREE", "1"),  # else numpy's import adds it (putenv) and removes it again, beside threads
    ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
    ("TRANSFORMERS_VERBOSITY", "error"),
)


def settle_environment() -> None:
    """Set ENV_DEFAULTS (where unset) and GIT_PYTHON_GIT_EXECUTABLE, once, before the process starts a thread.

    Adding a variable may move glibc's `environ` array while another thread's getenv reads it: the
    MCP server, whose relay threads start at once (mcp_fast), died in getenv that way under
    libfaketime, which reads its variables at every clock call, and C libraries or `localtime` read
    the environment in any process. Code that runs later, in threads or beside them, finds these set
    and only reads them (a `setdefault` of a set variable writes nothing). The optional
    sentence-transformers model is the exception left: importing torch and scikit-learn writes
    variables of their own (tests/cli/test_env_threads.py guards the default e5 path)."""
    for name, value in ENV_DEFAULTS:
        os.environ.setdefault(name, value)
    exe = git_executable()
    if exe is not None and os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") != exe:
        os.environ["GIT_PYTHON_GIT_EXECUTABLE"] = exe


def _on_path(name: str) -> str | None:
    """`shutil.which(name)` on POSIX, without importing shutil."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path):
            return path
    return None


def git_argv(exe: str, top: str, args: tuple[str, ...] | list[str]) -> list[str]:
    """How memctl runs a read-only git command in `top` (gitstore.start): literal paths, printed unquoted."""
    return [exe, "-C", top, "--literal-pathspecs", "-c", "core.quotePath=false", *args]


def spawn(top: str, args: tuple[str, ...] | list[str]) -> tuple[int, int, int]:
    """Start git in `top` with stdout and stderr on pipes; (pid, stdout's read end, stderr's). OSError if it cannot."""
    exe = git_executable()
    if exe is None:
        raise FileNotFoundError("git")
    out_r, out_w = os.pipe()  # both ends close on exec; the child's copies (dup2) stay open
    err_r, err_w = os.pipe()
    try:
        pid = os.posix_spawn(exe, git_argv(exe, top, args), os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)])
    except OSError:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return pid, out_r, err_r


def start_sync_status(argv: list[str]) -> None:
    """For `memctl [--root DIR] sync [--remote NAME] [--no-push] [--json]`: start the fast path's
    `git status` in the work tree holding the store, now. Any doubt (another command, another
    form, no store found the simple way, git redirected or missing): nothing is started."""
    if env_on("MEMCTL_NO_FAST"):
        return
    split = root_option(argv)
    if split is None or split[1][:1] != ["sync"] or any(a in ("--setup", "--help", "-h") for a in split[1][1:]):
        return
    root = _store_root(split[0] or os.environ.get("MEMCTL_ROOT"))
    top = work_tree(root) if root else None
    if top is None:
        return
    started = [FAST_STATUS, FAST_CONFIG]
    asked = _ls_remote(top, split[1][1:])
    if asked is not None:
        started.append(asked)
    for args in started:
        try:
            _STARTED[(top, args)] = spawn(top, args)
        except OSError:
            return


def _ls_remote(top: str, rest: list[str]) -> tuple[str, ...] | None:
    """The `git ls-remote` sync_fast will ask for, guessed as it chooses (--remote, else the branch's
    upstream in .git/config, else origin); None when HEAD is not on a branch or .git is not a folder.
    A wrong guess costs one unused ls-remote: sync_fast starts its own when the arguments differ."""
    gitdir = os.path.join(top, ".git")
    try:
        with open(os.path.join(gitdir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except (OSError, UnicodeError):
        return None
    if not head.startswith("ref: refs/heads/") or any(
            os.path.exists(os.path.join(gitdir, name)) for name in (MERGE_LOG, *(n for n, _ in UNFINISHED))):
        return None  # sync_fast asks the remote nothing then
    local = head[len("ref: refs/heads/"):]
    given = None
    for k, arg in enumerate(rest):
        if arg == "--remote" and k + 1 < len(rest):
            given = rest[k + 1]
        elif arg.startswith("--remote="):
            given = arg[len("--remote="):]
    upstream, merge = _branch_config(gitdir, local)
    name = given or upstream or "origin"
    on_remote = merge[len("refs/heads/"):] if upstream == name and merge.startswith("refs/heads/") else local
    return ("ls-remote", "--heads", name, f"refs/heads/{on_remote}")


def _branch_config(gitdir: str, local: str) -> tuple[str, str]:
    """(remote, merge) of `[branch "local"]` in .git/config, read plainly ("" when absent or unclear)."""
    try:
        with open(os.path.join(gitdir, "config"), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeError):
        return "", ""
    section, found = "", {"remote": "", "merge": ""}
    for line in lines:
        text = line.strip()
        if text.startswith("["):
            section = text
        elif section == f'[branch "{local}"]' and "=" in text:
            key, _, value = text.partition("=")
            if key.strip().lower() in found:
                found[key.strip().lower()] = value.strip()
    return found["remote"], found["merge"]


def root_option(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(--root's value or None, the rest) when the root group's only options are --root (--version,
    --help and the like: None, for Typer)."""
    root, i = None, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--root" and i + 1 < len(argv):
            root, i = argv[i + 1], i + 2
        elif argv[i].startswith("--root="):
            root, i = argv[i][len("--root="):], i + 1
        else:
            return None
    return root, argv[i:]


def take(top: str, args: tuple[str, ...]) -> tuple[int, int, int] | None:
    """The process started early for exactly this command in this folder, now the caller's to finish."""
    return _STARTED.pop((top, tuple(args)), None)


def stop(pid: int) -> None:
    """Kill a git memctl started, and what it started (its ssh): a git killed alone leaves its ssh
    running for as long as the network hangs, which a cron job every 15 minutes piles up. git stays in
    memctl's process group, so a signal to the group (`timeout`, launchd ending a job) still reaches it."""
    import signal  # noqa: PLC0415

    # Frozen first, git before its children, until no new one shows: a git whose child died before it did
    # started its real ssh at once (`ssh -G` probes first), and that one outlived us.
    frozen: list[int] = []
    while found := [one for one in [pid, *reversed(_descendants(pid))] if one not in frozen]:
        for one in found:
            _signal(one, signal.SIGSTOP)
        frozen += found
    for one in frozen:
        _signal(one, signal.SIGKILL)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:  # already gone
        pass


def _descendants(pid: int) -> list[int]:
    """The processes below `pid`, deepest first: from /proc on Linux, else from `pgrep -P` (macOS)."""
    found: list[int] = []
    for child in _children(pid):
        found += [*_descendants(child), child]
    return found


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = None
    if tasks is not None:
        children: list[int] = []
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                    children += [int(n) for n in handle.read().split()]
            except (OSError, ValueError):
                pass
        return children
    import subprocess  # noqa: PLC0415  (macOS: no /proc)

    try:
        done = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(n) for n in done.stdout.split() if n.isdigit()]


def abandon(pid: int, out: int, err: int) -> None:
    """Stop a git memctl started and collect it without reading what it printed."""
    stop(pid)
    os.close(out)
    os.close(err)
    os.waitpid(pid, 0)


def discard() -> None:
    """Collect what was started early and not taken: its output is read, so it cannot stall; an
    `ls-remote` (the network) is stopped, not waited for: a remote that hangs would hold the command."""
    while _STARTED:
        (_, args), (pid, out, err) = _STARTED.popitem()
        if args[0] == "ls-remote":
            abandon(pid, out, err)
            continue
        for fd in (out, err):
            try:
                while os.read(fd, 1 << 16):
                    pass
            except OSError:
                pass
            os.close(fd)
        os.waitpid(pid, 0)


def _store_root(given: str | None) -> str | None:
    """store.find_root's answer, the simple way: the given folder, else the nearest with memctl.toml,
    else with MEMORY.md (None when there is none: the command says why)."""
    if given:
        path = os.path.realpath(os.path.expanduser(given))
        return path if os.path.isdir(path) else None
    return nearest_store(os.path.realpath(os.getcwd()))


def nearest_store(start: str) -> str | None:
    """The nearest folder at or above `start` (a real path) holding memctl.toml, else the nearest
    holding MEMORY.md (store.find_root's search)."""
    for name in ("memctl.toml", "MEMORY.md"):
        folder = start
        while True:
            if os.path.exists(os.path.join(folder, name)):
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def work_tree(root: str) -> str | None:
    """The folder holding `.git` at or above `root`, as git finds it when no GIT_* variable
    redirects it (None then, and when there is none: the caller asks git)."""
    if any(os.environ.get(name) for name in GIT_REDIRECTS):
        return None
    folder = root
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
