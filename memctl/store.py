"""Finding the store, its paths, its lock, and committing what a command touched."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, NamedTuple

from . import config as config_mod
from . import errors
from .errors import BadInput, GitError, NotFound, Refused
from .fsutil import (UNTRACK_HINT, ForeignLog, atomic_write, clear_undo, file_lock, keep_undone, read_undo, refuse_link,
                     rollback, rollback_to, savepoint, settle, touched, tree_files, undo_log, undoing, written_bytes)
from .values import env_on

CONFIG_FILE = "memctl.toml"
CACHE_DIR = ".memctl"
INDEX_FILE = "MEMORY.md"
EMBED_SOCKET = "embed.sock"  # in .memctl/: the resident embedder's (embed/server.py)
# launchd/*.plist: rendered with this machine's paths, so machine-local (docs/JOBS.md).
GITIGNORE = ".memctl/\nlogs/\nlaunchd/*.plist\n"
# Ledgers stay on git's union merge in a clone never set up; memctl's drivers do the rest (docs/SYNC.md).
GITATTRIBUTES = (
    "ledgers/*.tsv merge=union\nmemory/*.md merge=memctl-fact\nmemory/MEMORY.md merge=memctl-index\n"
    "memory/memory-index/*.md merge=memctl-topic\n"
    "memory/archive/*.md merge=memctl-archive\nstate/STATE.md merge=memctl-state\nstate/*/STATE.md merge=memctl-state\n"
)
# The same for a Claude Code memory directory (facts and MEMORY.md at the top; anchored with "/",
# so that markdown files in its other subfolders, notes, keep git's own merge; the topic files of
# memory-index/ go to their driver as in a memctl store).
GITATTRIBUTES_CLAUDE = (
    f"ledgers/*.tsv merge=union\n/*.md merge=memctl-fact\n/{INDEX_FILE} merge=memctl-index\narchive/*.md merge=memctl-archive\n/memctl-facts.tsv merge=union\n"
    "memory-index/*.md merge=memctl-topic\n"
)
# Lines an earlier memctl wrote there, unanchored: replaced by the anchored ones where found.
CLAUDE_UNANCHORED = {"*.md merge=memctl-fact": "/*.md merge=memctl-fact",
                      f"{INDEX_FILE} merge=memctl-index": f"/{INDEX_FILE} merge=memctl-index"}




class Store(NamedTuple):
    """A store's place on disk and its configuration (a NamedTuple: see config.py on start-up)."""

    root: Path
    memory_dir: Path  # where fact files and MEMORY.md live
    layout: str  # "memctl" (memory/ under the root) or "claude" (facts at the top)
    config: config_mod.Config

    @property
    def index_path(self) -> Path:
        return self.memory_dir / INDEX_FILE

    @property
    def archive_dir(self) -> Path:
        return self.memory_dir / "archive"

    @property
    def ledgers_dir(self) -> Path:
        return self.root / "ledgers"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def cache_dir(self) -> Path:
        return self.root / CACHE_DIR

    @property
    def embed_socket(self) -> Path:
        """Where the store's resident embedder listens: looked at before its module is imported."""
        return self.root / CACHE_DIR / EMBED_SOCKET

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    def rel(self, path: Path) -> str:
        """A path relative to the store root, for messages and JSON."""
        try:
            return str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)

    @property
    def undo_path(self) -> Path:
        return self.cache_dir / "undo" / "log"

    @contextlib.contextmanager
    def lock(self, timeout: float | None = None, *, commits: bool = True) -> Iterator[None]:
        """The store lock, and the undo log of the writes made under it (see fsutil, docs/RELIABILITY.md).

        An earlier command's change that was cut off (killed, power lost) is
        settled first: found committed, or rolled back. Re-entrant in one thread:
        a write made while this thread holds the lock (a command made of other
        writes, as `distill` is of `remember` and ledger appends) joins the
        outer undo log, so the whole is committed or undone as one; when the
        inner write fails, its own changes are undone at once (a savepoint), so
        a caller that goes on after the error keeps only whole writes. Such a
        write may not commit by itself (commit() refuses). `timeout`: seconds to
        wait for another process's lock (default MEMCTL_LOCK_TIMEOUT), then LockTimeout. `commits`:
        False for a write that commits nothing (--no-commit), which then commits no write of Claude Code's either.
        """
        key = _lock_key(self)
        if key in _HELD:
            _HELD[key] += 1
            mark = savepoint()
            try:
                yield
            except BaseException:
                rollback_to(mark)  # this write's own changes, as its own lock would have undone them
                raise
            finally:
                _HELD[key] -= 1
            return
        refuse_link(self.root, self.cache_dir)
        with file_lock(self.cache_dir / "lock", timeout):
            _HELD[key] = 1
            _COMMITS[key] = commits
            try:
                undo_killed_sync_merge(self)  # only a sync merges under this lock, which is ours now: it died
                refuse_unfinished_merge(self.root)  # every write takes this lock: the one place to ask
                finish_interrupted(self)
                if self.layout == "claude" and commits:  # Claude Code's own writes: their own commit, before memctl's
                    from .claude_memory import take_in  # noqa: PLC0415

                    take_in(self)
                from .gitstore import git_folders, index_free  # noqa: PLC0415

                # The files are written only once git's index is free: a user's `git commit -a` waiting on it
                # meanwhile would take the half of the change already written (its commit takes the lock at once).
                first = (lambda: index_free(self.root)) if commits and commit_enabled(self) else None
                with undo_log(self.undo_path, self.root, (self.cache_dir, *git_folders(self.root)), first):
                    yield
            finally:
                del _HELD[key]
                _COMMITS.pop(key, None)


_HELD: dict[tuple[int, str], int] = {}  # (thread, store's .memctl) -> depth of the store locks held
_COMMITS: dict[tuple[int, str], bool] = {}  # (thread, store's .memctl) -> whether the held lock's write commits


def lock_commits(store: Store) -> bool:
    """Whether the write under the store lock this thread holds commits (not --no-commit)."""
    return _COMMITS.get(_lock_key(store), True)


def _lock_key(store: Store) -> tuple[int, str]:
    import _thread

    return _thread.get_ident(), os.path.abspath(store.cache_dir)


def holds_lock(store: Store) -> bool:
    """Whether this thread holds the store lock (a second flock of it here would wait on itself)."""
    return _HELD.get(_lock_key(store), 0) > 0


def nested_lock(store: Store) -> bool:
    """Whether this thread holds the store lock more than once (a write inside another's)."""
    return _HELD.get(_lock_key(store), 0) > 1


def undo_killed_sync_merge(store: Store) -> None:
    """A `memctl sync` killed inside its merge: the merge is aborted and what it wrote put back as
    HEAD has it (its undo log names that), so nothing of either side is lost and the next sync merges
    again. The undo log is not rolled back: it holds the merge's own steps, not the files as HEAD has them."""
    from . import gitstore  # noqa: PLC0415

    if not gitstore.sync_merge_unfinished(store.root):
        return
    try:
        records = read_undo(store.undo_path, store.root)
    except ForeignLog as exc:  # not memctl's to act on: the merge is aborted, no path of it is trusted
        errors.warn(f"discarded {store.rel(store.undo_path)} without acting on it: {exc}")
        records = []
    gitstore.abort_merge(store.root, touched(records))
    gitstore.remove_merge_temps(store.root)
    clear_undo(store.undo_path, records)  # with the temp file of a write the kill cut short (MEMORY.md's, say)
    errors.warn("an earlier `memctl sync` was killed inside its merge; undid that merge (nothing is lost: sync merges again)")


def refuse_unfinished_merge(root: Path) -> None:
    """A write during an unfinished git merge would fail half-way (git refuses partial commits): refuse first."""
    from . import gitstore  # noqa: PLC0415

    what = gitstore.unfinished_operation(root)
    if what is not None:
        abort = "git merge --abort" if what == "merge" else f"git {what} --abort"
        raise Refused(f"a git {what} is unfinished in this store; nothing was written",
                      hint=f"finish it (memctl doctor names files with conflict markers; fix, git add, git commit) or {abort}")


def open_store(root: str | os.PathLike) -> Store:
    """A memctl store (facts in memory/), or a Claude Code memory directory (MEMORY.md at the top).

    A Claude Code directory stays one when a memctl.toml appears in it (a ledger
    declared there, a saved threshold): only a memory/ folder makes facts live there.
    """
    root = Path(root).resolve()
    for name in (CACHE_DIR, "memory", CONFIG_FILE):  # every command reads or writes there: never through a link
        refuse_link(root, root / name)
    has_config = (root / CONFIG_FILE).exists()
    if (root / "memory").is_dir() or (has_config and not (root / INDEX_FILE).exists()):
        cfg = config_mod.load(root / CONFIG_FILE)
        return Store(root=root, memory_dir=root / "memory", layout="memctl", config=cfg)
    if root.name == "memory" and (root.parent / CONFIG_FILE).is_file() and root.parent.parent.name != "projects" \
            and not (root / "memctl-facts.tsv").exists():  # a store's facts, not a Claude Code directory of its own
        raise BadInput(f"{root} is the memory/ folder of the store at {root.parent}",
                       hint=f"give the store's own folder: {root.parent}", kind="memory-folder", store=_quoted(root.parent))
    if (root / INDEX_FILE).exists():
        _self_ignoring_cache(root / CACHE_DIR)
        cfg = config_mod.load(root / CONFIG_FILE) if has_config else config_mod.Config()
        return Store(root=root, memory_dir=root, layout="claude", config=cfg)
    raise NotFound(f"{root} is not a memctl store", hint="run `memctl init` there")


def _self_ignoring_cache(cache_dir: Path) -> None:
    """A Claude Code memory directory has no .gitignore of ours: the cache folder ignores itself."""
    marker = cache_dir / ".gitignore"
    if marker.exists():
        return
    try:
        cache_dir.mkdir(exist_ok=True)
        atomic_write(marker, "# memctl's caches: rebuildable, never committed\n*\n")
    except OSError:
        pass  # a read-only directory: memctl reads it all the same


def find_root(explicit: str | os.PathLike | None = None) -> Path:
    """--root > MEMCTL_ROOT > nearest ancestor holding memctl.toml (or a bare MEMORY.md) > the project's
    Claude Code memory directory (claude_code_store)."""
    given = explicit or os.environ.get("MEMCTL_ROOT")
    if given:
        path = Path(given).expanduser()
        if path.is_file():  # (the store's memctl.toml, say)
            raise BadInput(f"{path} is a file, not a store directory", hint="give the folder that holds memctl.toml")
        if not path.is_dir():
            raise NotFound(f"store directory does not exist: {path}", hint="check the path (or MEMCTL_ROOT), or create a store there",
                           kind="no-store-dir")
        return path.resolve()
    found = nearest_root(Path.cwd()) or claude_code_store(Path.cwd())
    if found is None:
        raise NotFound("no memctl store here or in any parent directory, nor in this project's Claude Code memory directory",
                       hint="create one, or give the store's path", kind="no-store")
    return found


def claude_code_store(place: str | os.PathLike) -> Path | None:
    """The Claude Code auto-memory directory of the project at `place` (~/.claude/projects/<project>/memory)
    when it holds MEMORY.md or memctl.toml: the store the hooks and `memctl mcp` find there, and where
    the CLI goes when no store is at or above the working directory."""
    from .claude_paths import auto_memory_dir

    place = os.path.expanduser(os.fspath(place))
    for path in dict.fromkeys([place, os.path.realpath(place)]):
        memory = Path(auto_memory_dir(path))
        if (memory / INDEX_FILE).is_file() or (memory / CONFIG_FILE).is_file():
            return memory.resolve()
    return None


def nearest_root(start: str | os.PathLike) -> Path | None:
    """The nearest folder at or above `start` holding memctl.toml, else the nearest holding a bare MEMORY.md."""
    from .early import nearest_store

    found = nearest_store(os.path.realpath(os.path.expanduser(start)))
    return None if found is None else Path(found)


def load_store(explicit: str | os.PathLike | None = None) -> Store:
    return open_store(find_root(explicit))


def is_claude_code_dir(root: Path) -> bool:
    """A Claude Code auto-memory directory: no memory/ folder, and MEMORY.md or fact files at the top
    (or, while it does not exist yet, a path of the form .claude/projects/<project>/memory)."""
    if (root / "memory").is_dir():
        return False
    if (root / INDEX_FILE).is_file():
        return True
    if (root / CONFIG_FILE).exists():
        return False
    if _claude_auto_memory_path(root):
        return True
    return bool(_top_level_facts(root))


def _top_level_facts(root: Path) -> list:
    """The fact files at the top of `root`: markdown files whose frontmatter has a name, a description and a type."""
    from . import fact as fact_mod  # noqa: PLC0415  (PyYAML: not on the start-up path)

    found = []
    if not root.is_dir():
        return found
    for path in sorted(root.glob("*.md")):
        if path.name == INDEX_FILE or path.name.startswith(".") or path.is_symlink() or not path.is_file():
            continue
        try:
            fact = fact_mod.load(path)
        except (fact_mod.FactParseError, OSError):
            continue
        if fact.name and fact.description and fact.type:  # a skill's or an agent's file has no type
            found.append(fact)
    return found


def _init_claude_code_dir(root: Path, git: bool, new_repo: bool) -> list[str]:
    """Adopt a Claude Code memory directory as it is: no memory/ folder, no memctl.toml (without git,
    one that turns commits off); MEMORY.md only when it is missing; the facts (and MEMORY.md) go into
    the first commit (`new_repo`: git init made the repository just now). See docs/CLAUDE_CODE.md."""
    from . import gitstore, index as index_mod  # noqa: PLC0415

    created: list[str] = []
    facts = _top_level_facts(root)
    if not (root / INDEX_FILE).exists():
        cfg = config_mod.Config()
        from .clock import expired  # noqa: PLC0415

        listed = [f for f in facts if not expired(f.meta("expires"))]  # as facts.listed_facts
        layout = index_mod.build_layout("# Memory index\n", listed, limit_lines=cfg.max_index_lines,
                                      limit_bytes=cfg.max_index_bytes, rank=index_mod.rank_key(cfg.importance_for))
        atomic_write(root / INDEX_FILE, layout.memory)
        for rel, text in layout.topics.items():
            if text is not None:
                (root / rel).parent.mkdir(exist_ok=True)
                atomic_write(root / rel, text)
        created.append(INDEX_FILE)
    if not git:
        if not (root / CONFIG_FILE).exists():
            atomic_write(root / CONFIG_FILE, NO_COMMIT_CLAUDE_TOML)
            created.append(CONFIG_FILE)
        return created
    store = open_store(root)  # also makes .memctl/ ignore itself
    from .claude_memory import SIDECAR, linked_topics  # noqa: PLC0415

    files = [root / INDEX_FILE, *(f.path for f in facts)]
    files += sorted({root / name for name in linked_topics(store) if name.endswith(".md") and name != INDEX_FILE
                     and (root / name).is_file() and not (root / name).is_symlink()} - set(files))  # its topic files
    if (root / SIDECAR).is_file():  # written by memctl before this directory had git (`init --no-git`)
        files.append(root / SIDECAR)
    for folder in ("archive", index_mod.TOPIC_DIR):
        if (root / folder).is_dir():
            files += [p for p in tree_files(root / folder) if p.is_file()]
    # A new repository adopts all of it; in an existing one, what git does not know yet
    # (a file with uncommitted edits stays the user's to commit).
    if not new_repo:
        dirty = set(gitstore.dirty_paths(root, files))
        top = gitstore.toplevel(root)
        files = [p for p in files if top is not None and str(p.resolve().relative_to(top)) in dirty
                 and gitstore.committed_text(root, p) is None]
    adopted = [p for p in files if p.parent == root and p.suffix == ".md" and p.name != INDEX_FILE]
    # memctl's merge drivers, as for a memctl store: two machines' MEMORY.md merge by meaning (docs/SYNC.md)
    attributes = root / ".gitattributes"
    if new_repo or not gitstore.dirty_paths(root, [attributes]):  # never commit a hand edit of it
        if add_lines(attributes, GITATTRIBUTES_CLAUDE, replacing=CLAUDE_UNANCHORED):
            created.append(".gitattributes")
            files.append(attributes)
    else:
        have = settings_text(attributes, errors="replace").splitlines() if attributes.exists() else []
        lacking = [line for line in GITATTRIBUTES_CLAUDE.splitlines() if line not in have]
        if lacking:
            errors.warn(".gitattributes has uncommitted changes, so memctl's merge-driver lines were not added: "
                        + "; ".join(lacking), hint="commit your change, then run `memctl sync --setup` (docs/SYNC.md)")
    if files and commit(store, files, "memctl: adopt Claude Code memory directory", enabled=git) and adopted:
        created.append(f"{len(adopted)} fact files (adopted)")
    gitstore.register_merge_drivers(root, GITATTRIBUTES_CLAUDE.splitlines())
    return created


def settings_text(path: Path, errors: str = "strict") -> str:
    """A .gitattributes or .gitignore as read_text reads it, refused (TooBig) unread over the settings
    limit (a pushed 150 MB .gitattributes cost sync 600 MB)."""
    from .fsutil import read_bounded  # noqa: PLC0415

    return config_mod.universal_newlines(read_bounded(path, config_mod.SETTINGS_LIMIT, f"a {path.name}").decode("utf-8", errors))


def add_lines(path: Path, text: str, *, replacing: dict[str, str] | None = None) -> bool:
    """Add the lines of `text` that `path` lacks, without disturbing the others (a line that is a
    key of `replacing` becomes its value first); whether the file changed."""
    refuse_link(path.parent, path)  # .gitattributes or .gitignore: never read or replaced through a link
    try:
        read = settings_text(path)
    except FileNotFoundError:
        read = ""
    current = read
    if replacing and any(line in replacing for line in read.splitlines()):
        current = "\n".join(replacing.get(line, line) for line in read.splitlines()) + "\n"
    missing = [line for line in text.splitlines() if line not in current.splitlines()]
    if missing:
        current += ("" if current.endswith("\n") or not current else "\n") + "\n".join(missing) + "\n"
    if current != read:
        atomic_write(path, current)
    return current != read


# `init --no-git`: a store that says so, so that its writes are not refused for want of a repository.
NO_COMMIT_TOML = config_mod.DEFAULT_TOML.replace(
    "\ncommit = true                      # commit every change (MEMCTL_NO_COMMIT=1 or --no-commit to skip)",
    "\ncommit = false                     # no repository (`init --no-git`): nothing is committed", 1)
NO_COMMIT_CLAUDE_TOML = "# memctl: this directory is not versioned (`memctl init --no-git`); see docs/FORMAT.md.\n[git]\ncommit = false\n"


def _commits_back_on(root: Path, created: list[str]) -> None:
    """`init` with git where `init --no-git` wrote memctl.toml (untouched since): commits on again."""
    path = root / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return
    if text == NO_COMMIT_CLAUDE_TOML:
        path.unlink()
        created.append(f"{CONFIG_FILE} (removed: commits on)")
    elif text == NO_COMMIT_TOML:
        atomic_write(path, config_mod.DEFAULT_TOML)
        created.append(f"{CONFIG_FILE} (commit = true)")


def init_store(root: str | os.PathLike, *, git: bool = True) -> list[str]:
    """Create the store's files and folders; return what was created (empty when nothing was).

    A Claude Code memory directory is adopted as it is instead (`is_claude_code_dir`). With `git`,
    git must run (GitError before anything is written); without it, memctl.toml turns commits off.
    An init that fails (a full disk) removes what it created; one run again where an earlier one was
    killed commits the store's own files that git does not track yet.
    """
    from . import gitstore  # noqa: PLC0415

    if git and gitstore.git_executable() is None:  # git first: without it nothing is written
        exc = gitstore.no_git()
        raise GitError(f"{exc.message}; nothing was created", hint="install git (or name it in MEMCTL_GIT), "
                       "or create the store without git (commits off)", kind="no-git-init")
    root = Path(root).expanduser()
    if root.exists() and not root.is_dir():
        raise BadInput(f"{root} is a file, not a folder; nothing was created", hint="name a new or existing folder")
    _refuse_inside_store(root)
    created: list[str] = []
    made: list[Path] = []  # what this run created, removed again when it fails
    claude = is_claude_code_dir(root.resolve() if root.exists() else root.absolute())
    try:
        if not root.exists():
            root.mkdir(parents=True)
            created.append(str(root))
            made.append(root.resolve())
        root = root.resolve()
        if git and gitstore.toplevel(root) is None:  # before any file: a git that fails writes none
            made.append(root / ".git")
            gitstore.init(root)
            created.append(".git/")
            _commits_back_on(root, created)
        if claude:
            return created + _init_claude_code_dir(root, git, ".git/" in created)
        _init_files(root, git, created, made)
    except BaseException:
        import shutil  # noqa: PLC0415

        for path in reversed(made):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        raise
    if git and gitstore.toplevel(root) is not None:
        gitstore.register_merge_drivers(root, GITATTRIBUTES.splitlines())  # the drivers .gitattributes names (docs/SYNC.md)
    return created


def _refuse_inside_store(root: Path) -> None:
    """A new store inside a store's folders (its ledgers/, memory/notes/) is refused: it would be a second
    store in the first one's repository. Parents are looked at up to the git top level (a repository of
    its own inside a store is another project), else up to the file system's root. A folder that is a
    store already (init run again) and a Claude Code memory directory (docs/CLAUDE_CODE.md) are not refused."""
    from . import gitstore  # noqa: PLC0415

    here = root.resolve()
    from .claude_memory import SIDECAR  # noqa: PLC0415

    if (here / CONFIG_FILE).exists() or (here / SIDECAR).exists() or _claude_auto_memory_path(here):
        return
    existing = next((p for p in (here, *here.parents) if p.is_dir()), None)
    top = gitstore.toplevel(existing) if existing is not None and gitstore.git_executable() is not None else None
    for parent in here.parents:
        if top is not None and parent != top and top not in parent.parents:
            return  # above the repository holding `root`
        if (parent / CONFIG_FILE).is_file():
            raise BadInput(f"{here} is inside the store at {parent}; nothing was created",
                           hint=f"use that store ({parent}), or create the new one outside it",
                           kind="inside-store", store=_quoted(parent))


def _claude_auto_memory_path(root: Path) -> bool:
    """A path of the form .claude/projects/<project>/memory (Claude Code's auto-memory directory)."""
    return len(root.parts) >= 4 and root.parts[-1] == "memory" and root.parts[-3] == "projects" and root.parts[-4] == ".claude"


def _init_files(root: Path, git: bool, created: list[str], made: list[Path]) -> None:
    """The store's folders and files (noted in `created` and `made`), committed."""
    from . import gitstore  # noqa: PLC0415

    files = {
        CONFIG_FILE: config_mod.DEFAULT_TOML if git else NO_COMMIT_TOML,
        "memory/" + INDEX_FILE: "# Memory index\n\n<!-- memctl:index:begin -->\n<!-- memctl:index:end -->\n",
        ".gitignore": GITIGNORE,
        ".gitattributes": GITATTRIBUTES,
    }
    touched: list[Path] = []
    for folder in ("memory/archive", "ledgers", "state", "launchd"):
        path = root / folder
        if not path.is_dir():
            made.append(next(p for p in (root / folder.split("/")[0], path) if not p.exists()))
            path.mkdir(parents=True)
            created.append(folder + "/")
        if not any(path.iterdir()):
            # git does not track empty folders; a .gitkeep keeps them in a clone.
            made.append(path / ".gitkeep")
            (path / ".gitkeep").touch()
            touched.append(path / ".gitkeep")
    for rel, text in files.items():
        path = root / rel
        if not path.exists():
            made.append(path)
            atomic_write(path, text)
            created.append(rel)
            touched.append(path)
        elif rel in (".gitignore", ".gitattributes") and add_lines(path, text):
            created.append(rel + " (updated)")
            touched.append(path)
    own = [root / rel for rel in files] + [root / f / ".gitkeep" for f in ("memory/archive", "ledgers", "state", "launchd")]
    if ".git/" in created:  # a new repository adopts whatever the store already holds
        touched += [root / p for p in (CONFIG_FILE, "memory", "ledgers", "state", "launchd", ".gitignore", ".gitattributes")]
    elif git and (top := gitstore.toplevel(root)) is not None:  # an earlier init killed before its commit
        present = [p for p in own if p.is_file() and p not in touched]
        tracked = set(gitstore.checked(top, "ls-files", "-z", "--", *present).split("\0")) if present else set()
        left = [p for p in present if os.path.relpath(p, top) not in tracked]
        created += [f"{os.path.relpath(p, root)} (committed)" for p in left]
        touched += left
    if touched:
        commit(open_store(root), touched, "memctl: init store", enabled=git)


def commit_enabled(store: Store, flag: bool | None = None) -> bool:
    if flag is False:
        return False
    if env_on("MEMCTL_NO_COMMIT"):
        return False
    if store.config.commit:
        return True
    from .trust import commits_off  # noqa: PLC0415  (only when memctl.toml turns commits off)

    return not commits_off(store)


def commit(store: Store, paths: list[Path], message: str, *, enabled: bool = True) -> str | None:
    """Commit the touched paths, or warn once and carry on when that is impossible."""
    if not enabled or not commit_enabled(store):
        if store.layout == "claude":  # not to be taken in as Claude Code's by the next command
            from .claude_memory import note_uncommitted  # noqa: PLC0415

            note_uncommitted(store, paths)
        return None
    if nested_lock(store):  # a programming error: the outer write commits, or undoes, the whole
        raise errors.MemctlError("internal error: a commit inside another write's store lock",
                                 hint="report it: the change was not committed and will be undone")
    from . import gitstore  # noqa: PLC0415  (not on the path of --no-commit writes)

    _git_or_refuse(store, "the change was undone" if undoing() else "the change was written but not committed")
    author = gitstore.Author(store.config.author_name, store.config.author_email)
    try:
        sha = gitstore.commit(store.root, paths, message, author, written_bytes(paths))
    except GitError as exc:
        # Never exit 0 with the commit lost: under the store lock the error undoes the change, and says so.
        what = "not committed, so the change was undone" if undoing() else "written but not committed"
        full = any(words in exc.message for words in ("No space left on device", "Out of diskspace", "Disk quota exceeded"))
        raise GitError(f"{what}: {exc.message}", kind="out-of-space" if full else None, hint=exc.hint or (
            "free some space, then run the command again" if full else
            "check `git status` in the store, then run the command again")) from None
    settle()
    if sha and gitstore.detached(store.root):
        _warn_detached(store, sha)
    return sha


_DETACHED_WARNED: list[bool] = []


def _warn_detached(store: Store, sha: str) -> None:
    """Once a process: a commit on a detached HEAD is on no branch; switching away hides it, and sync refuses."""
    if _DETACHED_WARNED:
        return
    _DETACHED_WARNED.append(True)
    from . import gitstore  # noqa: PLC0415

    errors.warn(f"committed {sha[:12]} on a detached HEAD (no branch): a checkout of a branch leaves it behind, and "
                "sync refuses until HEAD is on a branch",
                hint=f"keep it on a new branch: {gitstore.git_c(store.root)} switch -c NAME (or switch to your branch "
                     f"and cherry-pick {sha[:12]})")


def _git_or_refuse(store: Store, outcome: str = "nothing was changed") -> Path:
    """The work tree commits go to; GitError (git missing, failing, or no repository: exit 1) saying
    `outcome` when there is none. Exit 0 means committed (docs/RELIABILITY.md)."""
    from . import gitstore  # noqa: PLC0415

    try:
        return gitstore.work_tree(store.root)
    except GitError as exc:
        raise GitError(f"{exc.message}; {outcome}", hint=exc.hint, kind=exc.kind, **exc.details) from None


def finish_interrupted(store: Store) -> list[str]:
    """Settle the change of a command that died under the store lock; return what was rolled back.

    Its undo log names every path it wrote. When those paths are as HEAD has
    them, the commit went through (only the log survived it): git's index is
    refreshed and the log dropped. Otherwise the writes are undone, and git's
    index put back as HEAD has those paths. A log that
    git tracks (it came with a commit) is refused unread; one naming a place
    outside the store is discarded with a warning, never acted on.
    """
    folder = store.undo_path.parent
    if not folder.is_dir() or not any(os.scandir(folder)):
        return []  # the common case: one syscall
    refuse_tracked_local_state(store)
    try:
        records = read_undo(store.undo_path, store.root)
    except ForeignLog as exc:
        clear_undo(store.undo_path)
        errors.warn(f"discarded {store.rel(store.undo_path)} without acting on it: {exc}",
                    hint="nothing was undone; run `memctl doctor` to check the store")
        return []
    if not records:
        clear_undo(store.undo_path)  # backups of a write whose record was torn
        return []
    paths = touched(records)
    from . import gitstore  # noqa: PLC0415

    in_git = commit_enabled(store) and gitstore.toplevel(store.root) is not None  # without git: undone
    if in_git:  # a git killed inside a merge driver leaves its temp files, whatever it had written
        gitstore.remove_merge_temps(store.root)
    if in_git and gitstore.matches_head(store.root, paths):
        gitstore.refresh_index(store.root, paths)
        clear_undo(store.undo_path, records)
        return []
    from datetime import timezone  # noqa: PLC0415

    from .clock import now  # noqa: PLC0415

    kept_in = store.cache_dir / "undone" / f"{now().astimezone(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # UTC (FORMAT.md)
    refuse_link(store.root, kept_in.parent)  # (git writes a link over an ignored folder: the copies stay in the store)
    kept = keep_undone(records, store.root, kept_in)  # an edit made since the kill is never lost with the undo
    undone = rollback(store.undo_path, records)
    if in_git:  # a git merge killed before its MERGE_HEAD leaves its stages (conflicts, added files) in the index
        gitstore.refresh_index(store.root, paths)
    names = sorted({store.rel(p) for p in undone})
    copies = (f"; those files as they were (its change, and any edit made since) are kept in {store.rel(kept_in)}/"
              if kept else "")
    errors.warn(f"an earlier memctl command was interrupted before its commit; undid its change to {', '.join(names)}"
                + copies)
    return names


def pending(store: Store) -> list[str]:
    """Paths an interrupted command changed and nobody has settled yet (for doctor; a foreign log: foreign_undo)."""
    try:
        return sorted({store.rel(p) for p in touched(read_undo(store.undo_path, store.root))})
    except (ForeignLog, Refused):
        return []


def foreign_undo(store: Store) -> str | None:
    """Why the undo log left in the store is not memctl's to act on (for doctor); None when it is, or there is none."""
    try:
        read_undo(store.undo_path, store.root)
    except ForeignLog as exc:
        return str(exc)
    except Refused as exc:  # the undo folder is a link
        return exc.message
    return None


def tracked_local_state(store: Store) -> list[str]:
    """The paths in `.memctl/` that git tracks (machine-local state that came with a commit), relative to the store."""
    from . import gitstore  # noqa: PLC0415

    top = gitstore.toplevel(store.root) if gitstore.git_executable() is not None else None
    if top is None:
        return []
    listed = gitstore.run(top, "ls-files", "-z", "--", os.path.relpath(store.cache_dir, top))
    return sorted(store.rel(top / p) for p in listed.out.split("\0") if p)


def untrack_local_state(store: Store) -> list[str]:
    """Take the `.memctl/` paths that came with a commit out of git and out of the work tree (they came
    from git, not from this machine: memctl rebuilds its caches), in one commit of their removal only;
    return them (relative to the store). A link among them is removed, never followed."""
    import shutil  # noqa: PLC0415

    from . import gitstore  # noqa: PLC0415

    tracked = tracked_local_state(store)
    if not tracked:
        return []
    for rel in tracked:
        path = store.root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    top = gitstore.toplevel(store.root)
    assert top is not None  # tracked_local_state found a repository
    author = gitstore.Author(store.config.author_name, store.config.author_email)
    gitstore.checked(top, "commit", "-q", "--no-verify", "-m", "memctl: untrack machine-local state (.memctl/)", "--",
                     *(os.path.relpath(store.root / rel, top) for rel in tracked), author=author)
    return tracked


def refuse_tracked_local_state(store: Store) -> None:
    """Machine-local state comes from this machine, never from git: a tracked `.memctl/` path is refused unread."""
    tracked = tracked_local_state(store)
    if tracked:
        more = f" (and {len(tracked) - 1} more)" if len(tracked) > 1 else ""
        raise errors.MemctlError(f"{tracked[0]}{more} is tracked by git: machine-local state came in with a commit; "
                                 "memctl does not read it, and nothing was written", hint=UNTRACK_HINT, kind="tracked-local-state")


def will_commit(store: Store, enabled: bool = True) -> Path | None:
    """The git work tree a change will be committed to, or None when commits are off (nothing to guard).

    When they are on and git cannot commit (not found, failing, no repository), GitError before
    anything is written: a write never exits 0 uncommitted.
    """
    if not enabled or not commit_enabled(store):
        return None
    return _git_or_refuse(store)


def config_committable(store: Store, enabled: bool = True, what: str = "the change") -> bool:
    """Whether memctl.toml may go into memctl's next commit: not when it holds uncommitted hand edits.

    Call before writing to it. When it may not, the caller writes its change
    but leaves memctl.toml out of the commit, and the user is told: their
    edits are never swept into memctl's commit, and nothing is blocked.
    """
    top = will_commit(store, enabled)
    if top is None:
        return True
    from . import gitstore  # noqa: PLC0415

    if not gitstore.dirty_paths(store.root, [store.config_path]):
        return True
    errors.warn(f"{CONFIG_FILE} has uncommitted changes: {what} is written to it but not committed",
                hint=f"review and commit {CONFIG_FILE} yourself (git -C {_quoted(store.root)} diff {CONFIG_FILE})")
    return False


def _quoted(path: Path) -> str:
    import shlex  # noqa: PLC0415

    return shlex.quote(str(path))


def refuse_uncommitted(store: Store, paths: list[Path], enabled: bool = True) -> None:
    """Hand edits not yet committed would be swept into memctl's commit: refuse instead."""
    top = will_commit(store, enabled)
    if top is None:
        return
    from . import gitstore  # noqa: PLC0415

    dirty = {(top / p).resolve() for p in gitstore.dirty_paths(store.root, paths)}
    for path in paths:
        if path.resolve() in dirty:
            if store.layout == "claude" and gitstore.committed_text(store.root, path) is None:
                continue  # a fact Claude Code wrote and git never saw: adopted by this commit (docs/CLAUDE_CODE.md)
            raise Refused(
                f"{store.rel(path)} has uncommitted changes",
                hint=f"commit or discard them first (git -C {_quoted(store.root)} status), or write without committing (MEMCTL_NO_COMMIT=1)",
                kind="uncommitted", store=_quoted(store.root),
            )
