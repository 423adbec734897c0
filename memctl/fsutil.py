"""Atomic writes, appends of whole lines, reads within a size limit, the inter-process lock, and the undo log.

Every file memctl writes goes through here: a temp file in the same directory,
fsync, rename, fsync of the directory. A process killed at any point leaves
either the old file or the new one, never half of each; an append that fails
midway is cut back to the old length.

While the store lock is held (`undo_log`, opened by `Store.lock`), each write
first records how to undo it: the old file (a hard link), the old length of an
appended file, the two names of a move, a removed file. A command that fails before its commit
is undone on the spot; one that was killed is undone (or found committed) by the
next command that takes the lock. So a change is in git whole, or not at all.
See docs/RELIABILITY.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from . import procs
from .errors import BadInput, LockTimeout, MemctlError, Refused, warn


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    # The pid in the name lets a later process tell a dead writer's leftover from a live one's.
    return path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def dead_temp(name: str) -> bool:
    """Whether `name` is a temp file of a writer that is gone (`.<file>.<pid>.<hex>.tmp`)."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    parts = name.rsplit(".", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    return not procs.alive(int(parts[1]))


def sweep_temps(folder: Path) -> list[Path]:
    """Remove dead writers' temp files in `folder` (a killed process cannot clean up after itself)."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if dead_temp(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


def utf8_name(name: str) -> bool:
    """Whether a file name read from the disk is UTF-8 (os.fsdecode keeps other bytes as surrogates,
    which no text written from it can hold: a pushed `bad\xff.md` is named, never read)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# A line break or other control character in a file name: a pushed `x\n<!-- memctl:index:end -->\n...md`
# put lines of its own into MEMORY.md (a second end marker, text Claude Code loads), and a tab made a line
# memctl did not know again, copied at each write. Such a file is named by doctor, never read or listed.
CONTROL_CHARS = "\x00-\x1f\x7f-\x9f\u2028\u2029"  # C0, DEL, C1, Unicode line and paragraph separators
_CONTROL_IN_NAME = re.compile(f"[{CONTROL_CHARS}]")


def control_in_name(name: str) -> bool:
    """Whether a file name holds a control character (C0, DEL, C1) or a Unicode line/paragraph separator."""
    return _CONTROL_IN_NAME.search(name) is not None


def atomic_write(path: Path, data: bytes | str, expected: bytes | None = None) -> bool:
    """Replace `path` with `data` atomically (temp file + fsync + rename); True when it did.

    With `expected`: only while the file still holds exactly those bytes (a
    missing file holds b""); False, nothing written, when a writer that takes
    no lock (Claude Code appending to MEMORY.md) changed it since it was read.
    What such a writer appends to the old file in the instant of the rename is
    appended to the new one, not lost with the old file.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    made = [] if path.parent.is_dir() else [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_name(path)
        _record("W", path, tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except BaseException as exc:
        _remove_empty(made)
        raise _naming(exc, path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        old = None if expected is None else _still(path, expected)
        if old is False:
            os.unlink(tmp)
            _remove_empty(made)
            return False
        try:
            os.replace(tmp, path)
            late = b"" if old is None else _appended(old, expected)
        finally:
            if old is not None:
                os.close(old)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _remove_empty(made)
        raise _naming(exc, path)
    _fsync_dir(path.parent)
    if late:  # theirs to commit, not this command's: it commits the bytes it wrote
        append_bytes(path, late)
    _remember_written(path, data)
    return True


def _appended(fd: int, expected: bytes) -> bytes:
    """What was appended to the old file (open as `fd`) past `expected`: nothing when it no longer starts
    with `expected` (rewritten whole meanwhile, by an editor: that is no append to carry over)."""
    if os.pread(fd, len(expected), 0) != expected:
        return b""
    return os.pread(fd, 1 << 20, len(expected))


def _still(path: Path, expected: bytes) -> int | None | bool:
    """An open descriptor on `path` when it holds exactly `expected` (None when it is missing and
    `expected` is b""), False when it holds anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None if expected == b"" else False
    try:
        if os.fstat(fd).st_size == len(expected) and os.pread(fd, len(expected) + 1, 0) == expected:
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return False


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed write made for its file (innermost first), if still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _naming(exc: BaseException, path: Path) -> BaseException:
    """`exc`, an OSError of a write (os.write names no file) made to name `path`: the user's one line says where."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)
    return exc


def atomic_move(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` (same filesystem), making sure both dirs are synced."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    _record("M", src, dst)
    os.replace(src, dst)
    if _LOG is not None and os.path.abspath(src) in _LOG.written:
        _remember_written(dst, _LOG.written.pop(os.path.abspath(src)))
    _fsync_dir(dst.parent)
    _fsync_dir(src.parent)


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` on an O_APPEND descriptor, then fsync; on any error cut the file back.

    Callers hold the store lock; O_APPEND keeps even an unlocked writer from
    overwriting. When a write fails (disk full, file size limit) the file is
    truncated to its old length, so it never holds part of a record.
    """
    _record("A", path)
    _forget_written(path)  # its bytes are no longer those the last atomic_write wrote: git reads the file
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        before = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
                os.fsync(fd)
            raise _naming(exc, path)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- bounded reads
#
# Whoever can push to the remote decides what a clone reads (docs/RELIABILITY.md, "What a clone
# trusts"): a file over its limit (docs/FORMAT.md, "Limits") is refused with one line naming it and
# the limit, never read whole. The limits are far above what a real store holds; checking them is
# one fstat on the descriptor the read opens anyway.

FACT_LIMIT = 1 << 20  # a fact file: live, archived, or a conflict copy
INDEX_LIMIT = 4 << 20  # MEMORY.md, and each topic file in memory-index/
STATE_LIMIT = 4 << 20  # a STATE.md (memctl writes a few KiB; a pushed 185 MB one cost a reader 900 MB)
ROW_LIMIT = 1 << 20  # one ledger line (each of its fields is at most 64 KiB: ledger.MAX_FIELD_BYTES)
INPUT_LIMIT = 64 << 20  # one input a command reads whole: stdin, or a file an option names (`--from-json`, `--queries`...)


def shown(limit: int) -> str:
    """A limit as docs/FORMAT.md writes it: `1 MiB`, `64 KiB`."""
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit >> 10} KiB"


class TooBig(Refused):
    """A file over its limit: memctl does not read it."""


def too_big(name: str, size: int, limit: int, what: str) -> TooBig:
    """`name is <reason>`; details: `name`, and `reason` (for a report that names the file itself)."""
    reason = f"{size} bytes; {what} may be at most {shown(limit)} (docs/FORMAT.md, Limits), so memctl does not read it"
    return TooBig(f"{name} is {reason}", hint="shorten the file, or move it out of the store", kind="too-big", name=name, reason=reason)


def read_bounded(path: Path, limit: int, what: str, name: str | None = None) -> bytes:
    """The bytes of `path`, refused (TooBig) when it is over `limit`: one fstat before the read, and
    a read that stops one byte past the limit (so a file growing meanwhile is refused too)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= limit:
            data = handle.read(size + 1)  # not read(limit + 1): that would allocate the limit for every small file
            if len(data) > size:  # it grew since the fstat: on to the limit, no further
                data += handle.read(limit + 1 - len(data))
            if len(data) <= limit:
                return data
            size = len(data)
    raise too_big(name or str(path), size, limit, what)


def read_input(source, name: str, limit: int = INPUT_LIMIT) -> bytes:
    """All of `source` (stdin's buffer, an open file) up to `limit`, refused (TooBig, exit 1) past it: a read that
    stops one byte past the limit (`< /dev/zero` grew until MemoryError)."""
    data = source.read(limit + 1)
    if len(data) > limit:
        raise TooBig(f"{name} is over {shown(limit)}: more than a command reads at once (docs/FORMAT.md, Limits)",
                     hint="split the input, or give it in parts", kind="too-big", name=name, reason=f"over {shown(limit)}")
    return data


def read_index(path: Path, name: str, errors: str = "replace") -> str:
    """An index file's text (MEMORY.md, a topic file), refused (TooBig) over INDEX_LIMIT, without_bom()."""
    return without_bom(read_bounded(path, INDEX_LIMIT, "an index file", name).decode("utf-8", errors))


def read_state(path: Path, name: str | None = None) -> bytes:
    """A STATE.md's bytes, refused (TooBig) over STATE_LIMIT (docs/FORMAT.md, Limits)."""
    return read_bounded(path, STATE_LIMIT, "a STATE.md", name)


def without_bom(text: str) -> str:
    """An index file's text without a leading byte-order mark (an editor on Windows saves one): with it,
    the first line was no index line, and its fact was listed twice once memctl wrote the block. Every
    reader of MEMORY.md (the file, HEAD's copy) reads it so; a regenerated file is written without it."""
    return text.removeprefix("\ufeff")


# ---------------------------------------------------------------- the store lock

def lock_timeout() -> float:
    """MEMCTL_LOCK_TIMEOUT in seconds (default 60); a value that is not a number >= 0 is bad input."""
    return seconds_setting("MEMCTL_LOCK_TIMEOUT", 60.0)


def seconds_setting(variable: str, default: float) -> float:
    """A number of seconds (0 or more) from the environment; unset or blank: `default`."""
    raw = os.environ.get(variable, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BadInput(f"{variable}={raw!r} is not a number of seconds", hint=f"e.g. {variable}={default:g} (0 or more)")
    return value


@contextlib.contextmanager
def file_lock(path: Path, timeout: float | None = None, *, shared: bool = False, holder: str | None = None) -> Iterator[None]:
    """An exclusive flock on `path` (`shared`: one that only excludes exclusive holders, on a lock
    file that exists already), waiting up to `timeout` seconds. The holder writes its pid into the
    file, or `holder` (a line saying who it is, for those who wait).

    The kernel releases the lock when the holder dies, so a killed process
    never leaves the store locked.
    """
    if timeout is None:
        timeout = lock_timeout()
    if not shared:
        path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise MemctlError(f"the lock file {path} is not a regular file",
                          hint=f"remove it (rm -r {path}); memctl makes a new one")
    fd = os.open(path, (os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT) | os.O_NOFOLLOW, 0o666)
    deadline = time.monotonic() + timeout
    delay = 0.005
    try:
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    pid = _holder(fd)
                    raise LockTimeout(
                        f"store is locked by another process{f' (pid {pid})' if pid else ''} ({path})",
                        hint="wait for the other memctl command to finish, "
                        "or raise MEMCTL_LOCK_TIMEOUT",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        if not shared:  # who holds it, for the message of a process that waits in vain
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{holder or os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(fd: int) -> str | None:
    """The pid the holder of a lock wrote into it (file_lock), when it is one."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.isdigit() else None


def lock_held(path: Path) -> bool:
    """Whether a live process holds the lock on `path` now (file_lock): asked without waiting or creating it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- links out of the store

def escapes(root: Path, path: Path) -> Path | None:
    """Where `path` really is, when following links takes it out of `root`; None while it stays inside."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    return None if real == base or real.is_relative_to(base) else real


def refuse_escape(root: Path, path: Path) -> None:
    """Refused when a link makes `path` (or a folder on the way to it) lead out of the store."""
    real = escapes(root, path)
    if real is not None:
        shown = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        raise Refused(f"{shown} leads outside the store (to {real}) through a symbolic link; memctl does not follow it",
                      hint="replace the link with the file or folder itself, or remove it")


# ---------------------------------------------------------------- no link inside the store is followed

def link_on_way(root: Path, path: Path) -> Path | None:
    """The first symbolic link on the way from `root` down to `path` (`path` itself included), or None.

    A path that is not under `root` at all is its own answer: memctl reads and writes only inside.
    One lstat per folder on the way (a fact: two), none of them following a link.
    """
    base, full = os.path.abspath(root), os.path.abspath(path)
    if full != base and not full.startswith(base.rstrip(os.sep) + os.sep):
        return Path(full)
    here = base
    for part in full[len(base):].split(os.sep):
        if part:
            here = os.path.join(here, part)
            if os.path.islink(here):
                return Path(here)
    return None


def link_message(root: Path, link: Path) -> str:
    """What a reader says about a link it will not follow: the path in the store, and what the link names."""
    base, full = os.path.abspath(root), os.path.abspath(link)
    if full != base and not full.startswith(base.rstrip(os.sep) + os.sep):
        return f"{full} is outside the store; memctl reads and writes only inside it"
    try:
        target = os.readlink(full)
    except OSError:
        target = "?"
    return f"{os.path.relpath(full, base)} is a symbolic link (to {target}); memctl does not follow links in the store"


def refuse_link(root: Path, path: Path) -> None:
    """Refused (naming the link) when `path`, or a folder on the way to it from `root`, is a symbolic link."""
    link = link_on_way(root, path)
    if link is not None:
        raise Refused(link_message(root, link), hint="replace the link with the file or folder itself, or remove it",
                      kind="link")


# ---------------------------------------------------------------- walking a tree

MAX_DEPTH = 100  # levels of folders below its top a walk enters: no tree of notes is deeper; a deeper one is named


def walk_tree(top: str | Path, onerror: Callable[[OSError], None] | None = None, too_deep: Callable[[str], None] | None = None,
              max_depth: int = MAX_DEPTH) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)` as it walks by default (top-down, in the same order, a linked folder listed but not
    entered, `dirs` pruned in place by the caller), without recursion: Python 3.11's os.walk recurses, and
    a pushed folder 1,500 levels deep raised RecursionError. A folder more than `max_depth` below `top`
    is not entered: it goes to `too_deep`."""
    stack = [(os.fspath(top), 0)]
    while stack:
        folder, depth = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError as exc:
            if onerror is not None:
                onerror(exc)
            continue
        yield folder, dirs, files
        below = []
        for name in dirs:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            if depth >= max_depth:
                if too_deep is not None:
                    too_deep(path)
                continue
            below.append((path, depth + 1))
        stack += reversed(below)  # (a stack: the first folder is walked next, all of it, as os.walk does)


def tree_files(folder: Path, pattern: str = "*") -> list[Path]:
    """`sorted(folder.rglob(pattern))` through `walk_tree`: every name under `folder` that `pattern` matches,
    sorted (a linked folder named, not entered; nothing deeper than MAX_DEPTH)."""
    import fnmatch  # noqa: PLC0415

    return sorted(Path(here, name) for here, dirs, files in walk_tree(folder)
                  for name in dirs + files if fnmatch.fnmatchcase(name, pattern))


def read_bytes(root: Path, path: Path) -> bytes:
    """`path`'s bytes, refused when a link is on the way from `root` (the last step opened with O_NOFOLLOW too)."""
    refuse_link(root, path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since the check
            refuse_link(root, path)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def read_text(root: Path, path: Path, errors: str = "strict") -> str:
    """`path` as UTF-8 text, under the rule of `read_bytes`."""
    return read_bytes(root, path).decode("utf-8", errors)


# ---------------------------------------------------------------- the undo log
#
# The log is machine-local state, and it names files to delete, truncate or put back, so it is
# never trusted as it stands (docs/RELIABILITY.md, "What a clone trusts"): it holds paths relative
# to the store root, and a log read back (a killed command's) is discarded, never acted on, when
# any record names a place outside the store, in .git/ or .memctl/ (but for the access
# rows a move takes away, in .memctl/access/), or a backup or temp file of a
# shape memctl does not write. A command undoes its own writes from its own memory of them,
# never from the file, which git (a merge bringing a tracked `.memctl/undo/log`) may have replaced.

_BACKUP_RE = re.compile(r"^[0-9]+\.[0-9a-f]{12}$")  # `<pid>.<12 hex>`: the old version of a replaced file


class Undo(NamedTuple):
    op: str  # W (replace), A (append), M (move), D (remove)
    path: str  # absolute, inside the store
    arg: str  # W, D: the old file's backup (W: "" = it did not exist); A: old size (-1 = new); M: where it went
    tmp: str  # W: the temp file


class ForeignLog(Exception):
    """An undo log memctl will not act on (it names a place outside the store, or is not memctl's)."""


class _Log(NamedTuple):
    path: Path  # the log file (in .memctl/undo/)
    root: Path  # the store: writes outside it are refused, writes in `skip` are not logged (but `remove_logged`)
    skip: tuple[Path, ...]  # .memctl/ (derived data, rebuilt rather than undone) and git's own folders
    records: list[Undo]  # this command's writes, in order: what it undoes
    sizes: list[int]  # the log file's size after each of them
    inode: list[int]  # the log file this command created ([] until its first write)
    written: dict[str, bytes]  # the bytes this command last wrote to each path it replaced (written_bytes)
    first: list[Callable[[], None]]  # called once, before the first logged write (then emptied)


_LOG: _Log | None = None


def _record(op: str, path: Path, other: Path | None = None) -> None:
    """Before a write under the store lock: refuse links out of the store, log how to undo it."""
    log = _LOG
    if log is None:
        return
    path = Path(path)
    full = os.path.abspath(path)
    skipped = any(Path(full).is_relative_to(skip) for skip in log.skip)
    if skipped and not Path(full).is_relative_to(log.root):  # a linked worktree's git folders lie elsewhere
        return
    refuse_link(log.root, path)
    if op == "M":
        assert other is not None
        refuse_link(log.root, other)
    if skipped:
        return
    while log.first:  # (taken off once it returned: after a refusal, the next write waits again)
        log.first[0]()
        log.first.pop(0)
    if op == "W":
        # The old file survives the rename under a second name: keeping it costs no copy.
        backup = ""
        if path.exists():
            backup = str(log.path.parent / f"{os.getpid()}.{os.urandom(6).hex()}")
            try:
                os.link(path, backup)
            except OSError:
                import shutil  # noqa: PLC0415  (a file system without hard links)

                shutil.copy2(path, backup)
        rec = Undo("W", full, backup, str(other))
    elif op == "A":
        rec = Undo("A", full, str(path.stat().st_size if path.exists() else -1), "")
    else:
        rec = Undo("M", full, os.path.abspath(str(other)), "")
    _append_record(log, rec)


def remove_logged(path: Path) -> None:
    """Remove `path`, which the undo log puts back if the change is undone, even in `.memctl/`
    (machine-local data that is not derived: the access rows being moved, access.py). The file
    goes into the log's folder (a rename: `.memctl/` is one file system) and stays there until
    the change is committed or undone."""
    log = _LOG
    if log is None:
        path.unlink()
        return
    refuse_link(log.root, path)
    _forget_written(path)
    backup = log.path.parent / f"{os.getpid()}.{os.urandom(6).hex()}"
    _append_record(log, Undo("D", os.path.abspath(path), str(backup), ""))
    os.replace(path, backup)
    _fsync_dir(path.parent)
    _fsync_dir(backup.parent)


def _encoded(rec: Undo, root: Path) -> bytes:
    """A record as the log holds it: paths relative to the store, the backup and temp file by name only."""
    arg = os.path.relpath(rec.arg, root) if rec.op == "M" else os.path.basename(rec.arg) if rec.op in "WD" else rec.arg
    return b"".join(os.fsencode(f) + b"\0" for f in (rec.op, os.path.relpath(rec.path, root), arg, os.path.basename(rec.tmp)))


def _append_record(log: _Log, rec: Undo) -> None:
    _append_records(log, [rec])


def _append_records(log: _Log, recs: list[Undo]) -> None:
    """The first record creates the log (a file there already is not this command's: refused), the
    others append to that same file; so a log git checks out meanwhile is never written to, nor acted on.
    Several records go in one write and one fsync."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | (0 if log.inode else os.O_EXCL)
    try:
        fd = os.open(log.path, flags, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ELOOP):
            raise
        fd = -1
    try:
        if fd < 0 or (log.inode and os.fstat(fd).st_ino != log.inode[0]):
            for rec in recs:
                if rec.op == "W" and rec.arg:
                    os.unlink(rec.arg)
            raise _replaced(log)
        log.inode[:] = [os.fstat(fd).st_ino]
        encoded = [_encoded(rec, log.root) for rec in recs]
        start = os.fstat(fd).st_size
        try:
            os.write(fd, b"".join(encoded))
            os.fsync(fd)
        except OSError as exc:
            raise _naming(exc, log.path)
        for data in encoded:
            start += len(data)
            log.sizes.append(start)
    finally:
        if fd >= 0:
            os.close(fd)
    log.records.extend(recs)


def keep_for_undo(paths: list[Path]) -> None:
    """Before another program (git's merge) writes `paths` under the store lock: log, in one write, how to
    put each back as it is now (its file kept as a hard link, or "it did not exist"), so that the command
    failing or killed before its commit undoes what that program wrote. Paths in .git/ or .memctl/,
    and paths behind a link, are left out (git's own; refused by the readers)."""
    log = _LOG
    if log is None:
        return
    recs = []
    for path in paths:
        full = os.path.abspath(path)
        if any(Path(full).is_relative_to(skip) for skip in log.skip) or link_on_way(log.root, Path(full)) is not None:
            continue
        backup = ""
        if os.path.lexists(full):
            if not os.path.isfile(full):
                continue  # a folder where the other side has a file: git refuses that merge before writing
            backup = str(log.path.parent / f"{os.getpid()}.{os.urandom(6).hex()}")
            os.link(full, backup)
        recs.append(Undo("W", full, backup, ""))
    if recs:
        _append_records(log, recs)


# The library's words (the CLI's, naming `doctor --fix`, are in cli/hints.py under the same kind).
UNTRACK_HINT = "let doctor's fix untrack .memctl/ and remove what came in, then run the command again"


def _replaced(log: _Log, done: str = ", and undid this command's change") -> MemctlError:
    return MemctlError(f"{log.path.relative_to(log.root)} was put in place by something else while this command ran "
                       f"(a merge of a commit that tracks .memctl/?); memctl does not act on it{done}",
                       hint=UNTRACK_HINT, kind="tracked-local-state")


LOGGED_LOCAL = (".memctl", "access")  # the one folder of .memctl/ whose removals are logged (remove_logged)


def _inside(root: Path, field: str, what: str, local: bool = False) -> str:
    """A logged path made absolute: refused (ForeignLog) unless it is in the store, outside .git/
    and .memctl/ (`local`: or in .memctl/access/), and no link on the way leads out (a log from an
    older memctl holds absolute paths)."""
    path = Path(field)
    if not field or ".." in path.parts or path == Path("."):
        raise ForeignLog(f"{what} {field!r} is not a path in the store")
    full = path if path.is_absolute() else root / path
    if not full.is_relative_to(root) or full == root:
        raise ForeignLog(f"{what} {field} is outside the store ({root})")
    parts = full.relative_to(root).parts
    if parts[0] in (".git", ".memctl") and not (local and len(parts) == 3 and parts[:2] == LOGGED_LOCAL):
        raise ForeignLog(f"{what} {field} is in {full.relative_to(root).parts[0]}/, where memctl logs no write")
    if escapes(root, full) is not None:
        raise ForeignLog(f"{what} {field} leads outside the store through a symbolic link")
    return str(full)


def _in_folder(folder: Path, field: str, shape: Callable[[str], bool], what: str) -> str:
    """A backup or temp file named in the log: a bare name (or, from an older memctl, a path) in `folder`, of memctl's shape."""
    name = os.path.basename(field) if os.path.dirname(field) in ("", str(folder)) else ""
    if not name or not shape(name):
        raise ForeignLog(f"{what} {field!r} is not one memctl writes")
    return str(folder / name)


def _checked(raw: list[str], root: Path, folder: Path) -> Undo:
    op, path, arg, tmp = raw
    if op not in ("W", "A", "M", "D"):
        raise ForeignLog(f"a record of unknown kind {op!r}")
    if op == "D":
        return Undo(op, _inside(root, path, "the path", local=True), _in_folder(folder, arg, _BACKUP_RE.match, "the backup"), "")
    path = _inside(root, path, "the path")
    if op == "W":
        parent = Path(path).parent
        backup = _in_folder(folder, arg, _BACKUP_RE.match, "the backup") if arg else ""
        temp = _in_folder(parent, tmp, lambda n: n.startswith(f".{Path(path).name}.") and n.endswith(".tmp"),
                          "the temp file") if tmp else ""  # "": written by git (keep_for_undo)
        return Undo(op, path, backup, temp)
    if op == "A":
        if not arg.lstrip("-").isdigit() or int(arg) < -1:
            raise ForeignLog(f"the old size {arg!r} is not a size")
        return Undo(op, path, arg, "")
    return Undo(op, path, _inside(root, arg, "the path moved to"), "")


def undo_folder(log_path: Path, root: Path) -> Path:
    """The folder of the undo log, refused when a link (the folder, or `.memctl/`) takes it elsewhere."""
    folder = log_path.parent
    if Path(os.path.realpath(folder)) != Path(os.path.realpath(root)) / folder.relative_to(root):
        raise Refused(f"{folder.relative_to(root)} is a symbolic link; memctl keeps its undo log only in a folder of its own",
                      hint=f"remove the link (rm {folder}); memctl makes the folder again")
    return folder


def read_undo(log_path: Path, root: Path) -> list[Undo]:
    """The records of a killed command's undo log, with absolute paths; a torn last record (its write
    never finished) is left out. ForeignLog when any record is not memctl's to act on."""
    root = Path(os.path.abspath(root))
    folder = undo_folder(log_path, root)
    try:
        fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ForeignLog("the log is a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    fields = [os.fsdecode(f) for f in raw.split(b"\0")[:-1]]  # each field ends with NUL: the part after the last one is torn
    return [_checked(fields[i:i + 4], root, folder) for i in range(0, len(fields) - len(fields) % 4, 4)]


def touched(records: list[Undo]) -> list[Path]:
    """Every path an undo log's writes changed (both names of a move)."""
    paths: list[Path] = []
    for rec in records:
        paths.append(Path(rec.path))
        if rec.op == "M":
            paths.append(Path(rec.arg))
    return list(dict.fromkeys(paths))


def rollback(log_path: Path, records: list[Undo]) -> list[Path]:
    """Undo the writes of `records` (read_undo's, or this command's), newest first; return the paths put back.
    The log is then cleared."""
    _undo(records)
    clear_undo(log_path, records)
    return touched(records)


def keep_undone(records: list[Undo], root: Path, folder: Path) -> list[Path]:
    """Before a killed command's change is undone: copy into `folder` (made here) whatever the undo
    would drop, so that an edit made to those files since the kill (by hand, by Claude Code) is never
    lost: a replaced or created file as it is now (unless it is already as it will be put back), the
    bytes appended past a ledger's old length (as `<name>.appended`). Moves and removals drop nothing.
    Return the copies; an OSError (a full disk) propagates, and then nothing was undone."""
    kept: list[Path] = []
    for rec in records:
        path = Path(rec.path)
        if rec.op not in "WA" or not path.is_file() or path.is_symlink():
            continue
        target = folder / path.relative_to(root)
        data = path.read_bytes()
        if rec.op == "A" and int(rec.arg) >= 0:
            data, target = data[int(rec.arg):], target.with_name(target.name + ".appended")
        elif rec.op == "W" and rec.arg and os.path.exists(rec.arg) and Path(rec.arg).read_bytes() == data:
            continue  # the rename never happened: the file is the old one
        if not data or target in kept:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as handle:
            handle.write(data)
        kept.append(target)
    return kept


def savepoint() -> tuple[int, int] | None:
    """Where the active undo log stands (its records so far), for rollback_to; None when no write is logged."""
    if _LOG is None:
        return None
    return len(_LOG.records), _LOG.sizes[-1] if _LOG.sizes else 0


def rollback_to(mark: tuple[int, int] | None) -> None:
    """Undo the writes logged since `mark` (newest first) and drop them from the log: a write made
    inside another's lock that failed is undone as its own lock would have undone it, the outer
    write's earlier changes stay logged."""
    if _LOG is None or mark is None:
        return
    count, size = mark
    records = _LOG.records[count:]
    _undo(records)
    _remove_temps(records)  # the backups were consumed putting the old files back
    del _LOG.records[count:], _LOG.sizes[count:]
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(_LOG.path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)


def _undo(records: list[Undo]) -> None:
    for rec in reversed(records):
        path = Path(rec.path)
        if rec.op == "W":
            if rec.tmp:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(rec.tmp)
            if rec.arg:
                if os.path.exists(rec.arg):
                    os.replace(rec.arg, path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        elif rec.op == "A":
            size = int(rec.arg)
            if size < 0:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            elif path.exists() and path.stat().st_size > size:
                os.truncate(path, size)
        elif rec.op in ("M", "D"):
            if os.path.exists(rec.arg) and not path.exists():
                os.replace(rec.arg, path)
        _fsync_dir(path.parent)


def _remove_temps(records: list[Undo]) -> None:
    for rec in records:  # a write killed before its rename: its temp file is all that is left of it
        if rec.op == "W" and rec.tmp:
            with contextlib.suppress(OSError):
                os.unlink(rec.tmp)


def clear_undo(log_path: Path, records: list[Undo] = ()) -> None:
    """Forget the logged writes (they are committed, or kept on purpose): the log, the backups
    (everything in the log's folder: unlink never follows a link) and the temp files of `records`."""
    _remove_temps(list(records))
    folder = log_path.parent
    with contextlib.suppress(FileNotFoundError):
        log_path.unlink()
    if folder.is_dir() and not folder.is_symlink():
        for leftover in os.scandir(folder):
            with contextlib.suppress(OSError):
                os.unlink(leftover.path)


def _remember_written(path: Path, data: bytes) -> None:
    log = _LOG
    full = os.path.abspath(path)
    if log is not None and not any(Path(full).is_relative_to(skip) for skip in log.skip):
        log.written[full] = data


def _forget_written(path: Path) -> None:
    if _LOG is not None:
        _LOG.written.pop(os.path.abspath(path), None)


def written_bytes(paths: list[Path]) -> dict[Path, bytes]:
    """Of `paths`, those this command (under the store lock) last replaced whole (atomic_write; not
    appended to since), with the bytes it wrote: what its commit takes, whatever another program
    (Claude Code, an editor) wrote there meanwhile."""
    if _LOG is None:
        return {}
    found = {}
    for path in paths:
        data = _LOG.written.get(os.path.abspath(path))
        if data is not None and os.path.lexists(path):
            found[Path(path)] = data
    return found


def written() -> list[Path]:
    """The paths the writes logged so far under the store lock changed (none outside it)."""
    return touched(_LOG.records) if _LOG is not None else []


def undoing() -> bool:
    """Whether the writes being made now are logged, so that an error undoes them."""
    return _LOG is not None


def _settle(log: _Log) -> None:
    """This command's change is committed (or undone): forget it. A log file that is not the one it
    wrote (git put a tracked one in its place meanwhile) is left as it is, for the next command to refuse."""
    try:
        replaced = os.lstat(log.path).st_ino not in log.inode
    except FileNotFoundError:
        replaced = False
    if replaced:
        warn(_replaced(log, "").message, hint="run `memctl doctor`")
        _remove_temps(log.records)
        for rec in log.records:
            if rec.op == "W" and rec.arg:
                with contextlib.suppress(OSError):
                    os.unlink(rec.arg)
    else:
        clear_undo(log.path, log.records)
    log.records.clear()
    log.sizes.clear()
    log.inode.clear()
    log.written.clear()


def settle() -> None:
    """The change so far is committed: it is no longer undone if the command fails later."""
    if _LOG is not None:
        _settle(_LOG)


@contextlib.contextmanager
def undo_log(log_path: Path, root: Path, skip: Iterable[Path],
             before_first_write: Callable[[], None] | None = None) -> Iterator[None]:
    """Log every write made inside, and undo them all if the block raises (see the module doc); writes
    in `skip` (derived data, git's own folders) are not logged. `before_first_write` runs before the
    first logged write (an exception from it stops that write, which then never happened)."""
    global _LOG
    root = Path(os.path.abspath(root))
    undo_folder(log_path, root).mkdir(parents=True, exist_ok=True)
    log = _Log(log_path, root, (*(Path(os.path.abspath(p)) for p in skip), root / ".git"), [], [], [], {},
               [before_first_write] if before_first_write else [])
    _LOG = log
    try:
        yield
    except BaseException:
        _LOG = None
        _undo(log.records)
        _settle(log)
        raise
    finally:
        _LOG = None
    _settle(log)


BIDI = "\u202a-\u202e\u2066-\u2069"  # bidi controls: a name holding one reads in another order than it is


def bash_escaped(text: str) -> str:
    r"""`text` as the inside of bash's $'...': each control character (CONTROL_CHARS), quote and backslash as its
    UTF-8 bytes `\xNN`, and a byte that is not UTF-8 (kept by surrogateescape) as `\xNN`."""
    def escaped(m: re.Match[str]) -> str:  # as UTF-8 bytes: bash reads `\x85` as the byte, not U+0085
        return "".join(f"\\x{byte:02x}" for byte in m[0].encode("utf-8"))

    shown = re.sub(f"[{CONTROL_CHARS}{BIDI}'\\\\]", escaped, text)
    return os.fsencode(shown).decode("utf-8", "backslashreplace")


def shell_word(text: str) -> str:
    """`text` as one word a shell reads back, to paste from a hint: shlex's quoting, or bash's $'...' when it
    holds a control character (escaped, so the line shows it rather than obeying it) or bytes that are not
    UTF-8 (a file name another clone pushed)."""
    import shlex  # noqa: PLC0415

    if re.search(f"[{CONTROL_CHARS}{BIDI}]", text) or os.fsencode(text) != text.encode("utf-8", "surrogatepass"):
        return f"$'{bash_escaped(text)}'"
    return shlex.quote(text)
