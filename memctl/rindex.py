"""The recall index: a derived SQLite FTS5 table of pre-tokenised facts and episodes.

Lives in `.memctl/recall.sqlite` and is brought up to date before each query:
fact files by stat (inode, size, mtime: a hand edit or another process's write
is seen by the next call), the append-only ledgers (episodes, access) by byte
offset with a check that the bytes already read did not change. Anything
unexpected (a rewritten ledger, a tombstone, a corrupt file) rebuilds that part
or the whole file. Tokens come from textnorm, so FTS5 only splits on spaces;
ranking is FTS5's BM25 (k1 = 1.2, b = 0.75). Deleting the file loses nothing.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import operator
import os
import re
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

try:  # hashlib would load OpenSSL (~6 ms of every recall's start-up) for a blake2b it does not need
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

from . import clock, textnorm
from .fsutil import ROW_LIMIT, control_in_name, file_lock, refuse_link, utf8_name
from .claude_memory import SIDECAR
from .store import Store
from .values import unit_value

VERSION = "14"  # 14: `-ly` stemmed only as an adverb's (apply was app), the body's Why/How-to-apply labels not indexed; 13: a bare `expires` date kept as the wall-clock time its day ends (docs.expires_local), read in the reader's time zone; 12: a Claude Code topic file without frontmatter is a fact (fact.plain_fact), its undated facts dated by git; 11: importance/confidence read by values.unit_value (`true`, `.inf`: the default); 10: a bare `expires` date ends with its day (clock.expiry), `pinned` only when true; 9: access_pending (the access rows reads left in .memctl/, access.py); 8: docs.body (context reads facts from the index), racy stamps, docs_status (ids() in id order, covering); 7: an episode's outcome kept apart from its description (SEP); 6: indexes for context's pinned and stale parts; 5: fts.kind (a query for one kind scores only that kind); docs.agent, docs.ntok; use counts
FILE = "recall.sqlite"
SEP = "\x1f"
_TAIL = 256  # bytes before the offset that must be unchanged for an incremental read

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE files(path TEXT PRIMARY KEY, stamp TEXT, doc INTEGER);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY, kind TEXT, key TEXT, title TEXT, description TEXT, vtext TEXT,
    path TEXT, type TEXT, tags TEXT, importance REAL, confidence REAL, ts REAL,
    pinned INTEGER, status TEXT, expires REAL, agent TEXT, ntok INTEGER, body TEXT, expires_local INTEGER);
CREATE INDEX docs_kind ON docs(kind);
CREATE INDEX docs_pinned ON docs(kind, status, pinned);
CREATE INDEX docs_status ON docs(kind, status);
CREATE INDEX docs_ts ON docs(kind, status, ts);
CREATE TABLE access(key TEXT PRIMARY KEY, count INTEGER, last REAL);
CREATE TABLE access_pending(key TEXT PRIMARY KEY, count INTEGER, last REAL);
CREATE VIRTUAL TABLE fts USING fts5(tokens, kind, tokenize = "unicode61 remove_diacritics 0");
"""

# Words that carry no topic in a question; kept out of the BM25 side only.
QUESTION_WORDS = frozenset(
    "what when where who whom whose which why how did does do was were is are am be been "
    "i me my mine you your yours he him his she her hers it its we us our they them their "
    "can could would should will shall may might must has have had about there here "
    "some any many much than then so if also just very".split()
)


def search_tokens(text: str, *, document: bool = False) -> list[str]:
    """Tokens for BM25: textnorm tokens, minus stop and question words, with light English stemming.

    A document's tokens also hold the last character of each kana/kanji run, so
    that a one-character query (`猫`), matched as a prefix, finds every place
    the character occurs: at the start of a bigram or at the end of a run.
    """
    out = []
    for token in textnorm.tokens(text, run_ends=document):
        if token in textnorm.STOPWORDS or token in QUESTION_WORDS:
            continue
        out.append(_stem(token))
    if not document and out and all(len(t) == 1 and "\u3041" <= t <= "\u309f" for t in out):
        return []  # particles alone (`の`, `は`): matched as a prefix, they held every Japanese text
    return out


def _stem(token: str) -> str:
    if not token.isascii() or len(token) <= 4:
        return token
    for suffix in ("ing", "edly", "ed", "ly", "es", "s"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            if suffix == "s" and token.endswith("ss"):
                return token
            if suffix == "ly" and (len(token) < 6 or token[-3] in "aeiouyp"):
                return token  # an adverb's -ly (quickly, weekly), not apply, supply, reply, family, early
            return token[: -len(suffix)]
    return token


FACT_LABELS = re.compile(r"\*\*(?:Why|How to apply):\*\*")  # the body's format (docs/FORMAT.md), in every fact: no content


def fact_search_text(name: str, description: str, tags: Sequence[str], body: str) -> str:
    """What the keyword index holds of a fact: its name's words, description, tags and body, without
    the body's `**Why:**` / `**How to apply:**` labels (every fact has them: "apply" matched them all)."""
    return " ".join([name.replace("-", " ").replace("_", " "), description, " ".join(tags), FACT_LABELS.sub(" ", body)])


class Doc(NamedTuple):  # not a dataclass: `import dataclasses` costs recall's start-up ~5 ms
    id: int
    kind: str  # "fact" | "episode"
    key: str
    title: str
    description: str
    path: str
    type: str
    tags: tuple[str, ...]
    importance: float
    confidence: float
    ts: float | None
    pinned: bool
    status: str  # live | archived | superseded (expired is decided at query time)
    expires: float | None  # an instant; with expires_local, a wall-clock time (seconds as if in UTC)
    expires_local: bool = False  # a bare date (or a time without an offset): placed in the reader's zone


def _epoch(value) -> float | None:
    """A fact's or an episode's time as seconds since the epoch; None when there is none, or a placeholder
    (clock.placeholder: Go's zero time is year 0 in New York, and showing it failed every recall)."""
    if not value:
        return None
    try:
        when = clock.parse_date(str(value))
        return None if clock.placeholder(when) else when.timestamp()
    except (ValueError, OverflowError):
        return None


def local_time(ts: float | None) -> datetime | None:
    """An index's time in this process's zone; None for none, or a placeholder an index built before held."""
    if ts is None:
        return None
    try:
        when = datetime.fromtimestamp(ts).astimezone()
    except (ValueError, OverflowError, OSError):
        return None
    return None if clock.placeholder(when) else when


def _expiry(value) -> tuple[float | None, bool]:
    """(when, local): a timestamp's instant; a bare date's end (or a time without an offset) as a
    wall-clock time, its seconds counted as if in UTC (`local`), so that each reader places it in its
    own time zone as `list` and `doctor` do (a cron job in UTC and a shell in Tokyo share one index)."""
    if not value:
        return None, False
    try:
        when, local = clock.expiry_wall(str(value))
    except ValueError:
        return None, False
    return (when.replace(tzinfo=timezone.utc) if local else when).timestamp(), local


def wall(now: datetime) -> float:
    """`now` on the wall clock of this process's time zone, as seconds counted as if in UTC."""
    return now.astimezone().replace(tzinfo=timezone.utc).timestamp()


def not_expired(now: datetime) -> tuple[str, tuple[float, float]]:
    """An SQL condition over `docs` (and its arguments): no expiry, or one still ahead at `now`."""
    return ("(expires IS NULL OR (CASE WHEN expires_local = 1 THEN expires > ? ELSE expires > ? END))",
            (wall(now), now.timestamp()))


def expired(now: datetime) -> tuple[str, tuple[float, float]]:
    """An SQL condition over `docs` (and its arguments): an expiry at or before `now`."""
    return ("(expires IS NOT NULL AND (CASE WHEN expires_local = 1 THEN expires <= ? ELSE expires <= ? END))",
            (wall(now), now.timestamp()))


def _unit(value, default: float) -> float:
    number = unit_value(value)  # (memctl/values.py: the one rule)
    return default if number is None else number


# ---------------------------------------------------------------- open / sync


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def storage_error(exc: BaseException) -> bool:
    """SQLite's "database or disk is full" or "disk I/O error": a full disk or a file size limit (or a
    failing disk), never an index of another shape."""
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorname", "").startswith(
        ("SQLITE_FULL", "SQLITE_IOERR"))


@contextlib.contextmanager
def failing_storage(path: Path, hint: str | None = None) -> Iterator[None]:
    """SQLite's "database or disk is full" or "disk I/O error" (a full disk, a file size limit) as
    one line naming the index, as any other failed write is (errors.from_os_error), not a traceback."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not storage_error(exc):
            raise  # a missing table, say: the caller makes the index anew
        from .errors import OSFailure  # noqa: PLC0415

        raise OSFailure(f"{exc}{_cause(exc, path)}: {path}", kind="out-of-space", hint=hint or (
            "free some space (or raise `ulimit -f`), then run the command again; "
            "the file is a cache, rebuilt from the store's files")) from None


def _cause(exc: sqlite3.OperationalError, path: Path) -> str:
    """What SQLite's "disk I/O error" most likely was (it says so for a full disk where it maps its -shm
    file, and for a write past the file size limit, EFBIG): a note on each that holds, else nothing."""
    notes = []
    if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_IOERR"):
        with contextlib.suppress(OSError):
            st = os.statvfs(path.parent)
            if st.f_bavail * st.f_frsize < 256 << 10:
                notes.append(f"the disk has {st.f_bavail * st.f_frsize // 1024} KiB free")
    try:
        import resource  # noqa: PLC0415
    except ImportError:  # pragma: no cover - not POSIX
        resource = None
    if resource is not None and (limit := resource.getrlimit(resource.RLIMIT_FSIZE)[0]) != resource.RLIM_INFINITY:
        notes.append(f"or file too large: the file size limit, ulimit -f, is {limit // 1024} KiB")
    return f" ({'; '.join(notes)})" if notes else ""


def _remove_index(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)


def _fresh(path: Path, hint: str | None = None) -> sqlite3.Connection:
    _remove_index(path)
    with failing_storage(path, hint):
        conn = _connect(path)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('version', ?)", (VERSION,))
        except BaseException:
            conn.close()
            _remove_index(path)  # no half-made index (one without tables) is left behind
            raise
    return conn


@contextlib.contextmanager
def opened(store: Store, *, episodes: bool = True) -> Iterator[sqlite3.Connection]:
    """The index, synced with the store's files, ready for queries (about facts alone, when not
    `episodes`: their documents are then as the last sync left them)."""
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    path = store.cache_dir / FILE
    with file_lock(store.cache_dir / "recall.lock"):
        try:
            conn = _connect(path)
            row = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
            if row is None or row[0] != VERSION:
                raise sqlite3.DatabaseError("old version")
        except sqlite3.DatabaseError:
            with contextlib.suppress(Exception):
                conn.close()
            conn = _fresh(path)
        try:
            with failing_storage(path):
                _sync(store, conn, episodes)
        except sqlite3.DatabaseError:
            conn.close()
            conn = _fresh(path)
            with failing_storage(path):
                _sync(store, conn, episodes)
    try:
        yield conn
    finally:
        conn.close()


def _sync(store: Store, conn: sqlite3.Connection, episodes: bool = True) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        facts_changed = _sync_facts(store, conn)

        def generations(fact: bool, episode: bool) -> None:
            for kind, moved in (("fact", fact), ("episode", episode)):
                if moved or _meta(conn, f"generation.{kind}") is None:
                    # A new name for this kind's documents whenever any changed: the vector cache
                    # keyed by it (vcache.current) is then known to be current without rehashing.
                    _set_meta(conn, f"generation.{kind}", os.urandom(8).hex())

        def checkpoint() -> None:
            generations(facts_changed, True)
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")

        generations(facts_changed, episodes and _sync_episodes(store, conn, checkpoint))
        _sync_access(store, conn)
        conn.execute("COMMIT")
    except BaseException:
        rolled_back(conn)  # (a full disk: SQLite may have rolled it back already, and ROLLBACK would fail)
        raise


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else None


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    # Written only when it changes: a query that changes nothing leaves the WAL empty,
    # so closing the connection has nothing to checkpoint.
    if _meta(conn, key) != value:
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


def fact_vector_text(name: str, description: str) -> str:
    """What a fact is embedded as, by every command (recall, near-dup, remember's check,
    consolidate): one vector per fact and model. The name is part of it: it names the topic."""
    return f"{name}: {description}"


def _insert(conn: sqlite3.Connection, kind: str, key: str, title: str, description: str, vtext: str, text: str,
            path: str, type_: str, tags: Sequence[str], importance: float, confidence: float, ts: float | None,
            pinned: bool, status: str, expires: tuple[float | None, bool], agent: str = "", body: str = "",
            doc_id: int | None = None) -> int:
    """Insert one document; `doc_id` (a file read again) keeps the id its earlier row had."""
    tokens = search_tokens(text, document=True)
    cur = conn.execute(
        "INSERT INTO docs(id, kind, key, title, description, vtext, path, type, tags, importance, confidence, ts, pinned,"
        " status, expires, agent, ntok, body, expires_local) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (doc_id, kind, key, title, description, vtext, path, type_, SEP.join(tags), importance, confidence, ts,
         int(pinned), status, expires[0], agent, len(tokens), body, int(expires[1])),
    )
    doc = cur.lastrowid
    conn.execute("INSERT INTO fts(rowid, tokens, kind) VALUES (?, ?, ?)", (doc, " ".join(tokens), kind))
    return doc


def _delete_doc(conn: sqlite3.Connection, doc: int) -> None:
    conn.execute("DELETE FROM docs WHERE id=?", (doc,))
    conn.execute("DELETE FROM fts WHERE rowid=?", (doc,))


_STAMP = operator.attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns", "st_mode")
RACY_NS = 2_000_000_000  # a file changed this close to a sync is read again by the next one (see _sync_facts)


def _fact_stats(store: Store) -> list[tuple[str, bool, list[str], list[os.stat_result]]]:
    """(folder, archived, names, stats) for the fact files of memory/ and its archive: one listdir
    and one stat per file, made in C (map), which is the floor of a check that sees in-place edits."""
    out = []
    for folder, archived in ((store.memory_dir, False), (store.archive_dir, True)):
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # a linked archive is not read
        except OSError:  # missing, not a folder, or a link (ELOOP)
            continue
        try:  # stat by name relative to the open folder: the cheapest way to stat 10,000 files
            names = [n for n in os.listdir(fd) if n.endswith(".md") and n != "MEMORY.md" and not n.startswith(".")
                     and (n.isprintable() or utf8_name(n) and not control_in_name(n))]  # (scan() names the others)
            try:
                # lstat: a linked fact is no regular file, so it is never read (docs/RELIABILITY.md)
                stats = list(map(functools.partial(os.stat, dir_fd=fd, follow_symlinks=False), names))
            except FileNotFoundError:  # one was removed since the listing: the slow way, without it
                kept = []
                for name in names:
                    with contextlib.suppress(FileNotFoundError):
                        kept.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                names, stats = [n for n, _ in kept], [st for _, st in kept]
        finally:
            os.close(fd)
        out.append((os.path.join(folder, ""), archived, names, stats))
    return out


def _facts_digest(listing) -> str:
    """One digest of every fact file's name, inode, size, mtime, ctime and mode (ctime: a write that
    puts the mtime back, as `touch -r` or `rsync -t` do, still moves it)."""
    digest = blake2b(digest_size=16)
    for prefix, archived, names, stats in listing:
        digest.update(f"{prefix}\0{archived:d}\0{len(names)}\0".encode("utf-8", "surrogateescape"))
        digest.update("\0".join(names).encode("utf-8", "surrogateescape"))
        # hash() of a tuple of ints is the same in every process (only str and bytes hashes are
        # salted) and runs in C: 64 bits that change when any number does, at half array()'s cost.
        digest.update(hash(tuple(map(_STAMP, stats))).to_bytes(8, "little", signed=True))
    return digest.hexdigest()


def _claude_file_stamp(store: Store, name: str) -> str:
    """The stat of a file of a Claude Code directory (its sidecar, its MEMORY.md), "" when there is none."""
    if store.layout != "claude":
        return ""
    try:
        st = os.stat(store.memory_dir / name)
    except OSError:
        return ""
    return f"+{st.st_size}:{st.st_mtime_ns}"


def _sync_facts(store: Store, conn: sqlite3.Connection) -> bool:
    """Bring the fact documents up to date with the files; True when any changed.

    With the store's resident watch running (watch.py) and no fact file changed
    since the last check, not even that: its stamp is the one recorded.
    Otherwise the fast path is one listdir and one stat per file (no way around it that
    still sees an in-place write: it changes the file's mtime and ctime but not
    its folder's; docs/RECALL.md "Freshness") hashed into one digest; only when
    the digest differs are the stamps compared file by file. A file whose ctime
    is within RACY_NS of the sync may change again within one timestamp tick
    without its stamp changing, so it is recorded as racy and read again by the
    next sync (git's "racy git" rule).
    """
    import stat as stat_mod

    from . import watch

    sidecar = _claude_file_stamp(store, SIDECAR)  # what memctl keeps per fact in a Claude Code directory: in every stamp
    # ... and MEMORY.md there: the topic files it links are read without frontmatter too (a file's stamp
    # says whether it is one, so only a file whose link came or went is read again)
    linked = _claude_file_stamp(store, store.index_path.name)
    # Asked before the stat of any file: a change after the answer moves the next one (watch.py).
    watched = watch.stamp(store)
    watched = watched + sidecar + linked if watched is not None else ""
    if watched and _meta(conn, "facts.watch") == watched:
        return False  # no fact file changed since the check that recorded it
    started = time.time_ns()
    listing = _fact_stats(store)
    digest = _facts_digest(listing) + sidecar + linked
    if watched:  # (a check without the watch leaves its stamp: the files are as they were at it, or newer)
        _set_meta(conn, "facts.watch", watched)
    if _meta(conn, "facts.digest") == digest:
        return False
    on_disk: dict[str, tuple[str, bool]] = {}
    racy = False
    from .claude_memory import linked_topics

    topics = linked_topics(store)
    for prefix, archived, names, stats in listing:
        for name, st in zip(names, stats):
            if stat_mod.S_ISREG(st.st_mode):
                topic = "+topic" if not archived and name in topics else ""
                stamp = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}{sidecar}{topic}"
                if st.st_ctime_ns >= started - RACY_NS:
                    stamp, racy = "racy:" + stamp, True  # never equal to a stamp read later: read again
                on_disk[prefix + name] = (stamp, archived)
    _set_meta(conn, "facts.digest", "" if racy else digest)
    known = dict(conn.execute("SELECT path, stamp FROM files"))
    # A file read again keeps its document's id: the vector caches list documents in id order, so a
    # new id would reorder them (and have them saved again) for a fact that did not move.
    earlier: dict[str, int] = {}
    for path, stamp in known.items():
        if path not in on_disk or on_disk[path][0] != stamp or stamp.startswith("racy:"):
            row = conn.execute("SELECT doc FROM files WHERE path=?", (path,)).fetchone()
            if row and row[0] is not None:
                _delete_doc(conn, row[0])
                earlier[path] = row[0]
            conn.execute("DELETE FROM files WHERE path=?", (path,))
    root = str(store.root) + os.sep
    changed = [(path, stamp, archived) for path, (stamp, archived) in on_disk.items()
               if known.get(path) != stamp or stamp.startswith("racy:")]
    if not changed:
        return bool(set(known) - set(on_disk))
    from . import fact as fact_mod  # PyYAML: imported only when a fact file changed (the prompt hook's budget)

    changed.sort(key=lambda one: one[0] not in earlier)  # the ids kept first: a new one is then above them all
    loaded = []
    for path, stamp, archived in changed:
        try:
            loaded.append(fact_mod.load(Path(path), archived=archived, plain=stamp.endswith("+topic")))
        except (fact_mod.FactParseError, OSError):
            loaded.append(None)  # doctor reports it; recall skips it until it is fixed
    if store.layout == "claude":  # the sidecar's keys, and the titles Claude Code left as slugs
        from .claude_memory import overlay

        present = {os.path.basename(path) for path, (_, archived) in on_disk.items() if not archived}
        live = overlay(store, [f for f in loaded if f is not None and not f.archived], present)
        by_path = {str(f.path): f for f in live}
        loaded = [by_path.get(str(f.path), f) if f is not None else None for f in loaded]
    if store.layout == "claude":  # Claude Code writes no dates: its files are dated by git (`--since`, recency)
        from .claude_memory import dated_by_git

        live = dated_by_git(store, [f for f in loaded if f is not None and not f.archived])
        by_path = {str(f.path): f for f in live}
        loaded = [by_path.get(str(f.path), f) if f is not None else None for f in loaded]
    for (path, stamp, archived), fact in zip(changed, loaded):
        doc = None
        if fact is not None:
            status = "live"
            if archived:
                status = "superseded" if fact.meta("superseded_by") else "archived"
            tags = fact.tags
            name = fact.name or fact.stem
            doc = _insert(
                conn, "fact", name, name, fact.description, fact_vector_text(name, fact.description),
                fact_search_text(name, fact.description, tags, fact.body),
                path[len(root):] if path.startswith(root) else path, fact.type, tags,
                _unit(fact.meta("importance"), store.config.importance_for(fact.type)),
                _unit(fact.meta("confidence"), store.config.confidence_for(fact.type)),
                _epoch(fact.meta("updated")) or _epoch(fact.meta("created")),
                fact.pinned, status, _expiry(fact.meta("expires")), body=fact.body,
                doc_id=earlier.get(path),
            )
        conn.execute("INSERT INTO files VALUES (?, ?, ?)", (path, stamp, doc))
    return True


def _file_state(path: Path) -> tuple[int, str]:
    """(size, digest of the last bytes): enough to see that an append-only file was only appended to."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL))
            return size, blake2b(handle.read(), digest_size=8).hexdigest()
    except FileNotFoundError:
        return 0, ""


def _tail_digest(path: Path, offset: int) -> str:
    with open(path, "rb") as handle:
        handle.seek(max(0, offset - _TAIL))
        return blake2b(handle.read(offset - max(0, offset - _TAIL)), digest_size=8).hexdigest()


def _new_lines(path: Path, conn: sqlite3.Connection, name: str,
               max_lines: int | None = None) -> tuple[int, list[bytes]] | None:
    """Complete lines appended since the last sync (the first `max_lines` of them), with the number of
    lines read before them; None = reread all."""
    offset = int(_meta(conn, f"{name}.offset") or 0)
    digest = _meta(conn, f"{name}.tail") or ""
    lines_before = int(_meta(conn, f"{name}.lines") or 0)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None if offset else (0, [])
    size = st.st_size
    # Appends keep the inode; `sed -i`, editors, `git checkout` write a new file.
    if size < offset or (offset and (_meta(conn, f"{name}.inode") != str(st.st_ino) or _tail_digest(path, offset) != digest)):
        return None
    _set_meta(conn, f"{name}.inode", str(st.st_ino))
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(size - offset)
    end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
    lines = data[:end].split(b"\n")[:-1] if end else []
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        end = sum(map(len, lines)) + len(lines)
    new_offset = offset + end
    _set_meta(conn, f"{name}.offset", str(new_offset))
    _set_meta(conn, f"{name}.tail", _tail_digest(path, new_offset) if new_offset else "")
    _set_meta(conn, f"{name}.lines", str(lines_before + len(lines)))
    return lines_before, lines


def _reset(conn: sqlite3.Connection, name: str) -> None:
    for key in ("offset", "tail", "lines", "inode"):
        conn.execute("DELETE FROM meta WHERE key=?", (f"{name}.{key}",))


# Episodes read between two commits of the index: a rebuild of a year's ledger (150,000 rows, ~13 s) cut
# off by a hook's deadline kept nothing, so every prompt's hook began it again and gave up again.
CHUNK_LINES = 20_000


def _sync_episodes(store: Store, conn: sqlite3.Connection, checkpoint: Callable[[], None] = lambda: None) -> bool:
    """Bring the episode documents up to date with the ledger; True when any changed. `checkpoint`
    commits what is read so far, every CHUNK_LINES lines: a process stopped later resumes there."""
    path = store.ledgers_dir / "episodes.tsv"
    tombstones = store.ledgers_dir / "episode-tombstones.tsv"  # episodes.TOMBSTONES
    refuse_link(store.root, path)  # as every reader of a ledger (ledger.open_ledger)
    refuse_link(store.root, tombstones)
    stamp = "{}:{}".format(*_file_state(tombstones))
    changed = stamp != (_meta(conn, "tombstones") or "0:")
    new = None if changed else _new_lines(path, conn, "episodes", CHUNK_LINES)
    rel = store.rel(path)
    if new is None:  # first time, rewritten, or forgetting happened: reread everything
        conn.execute("DELETE FROM fts WHERE rowid IN (SELECT id FROM docs WHERE kind='episode')")
        conn.execute("DELETE FROM docs WHERE kind='episode'")
        _reset(conn, "episodes")
        _set_meta(conn, "tombstones", stamp)
        new = _new_lines(path, conn, "episodes", CHUNK_LINES)  # from byte 0
        assert new is not None
        rebuild = True
    else:
        rebuild = False
    lines_before, lines = new
    if not lines:
        return rebuild
    import dataclasses

    from . import episodes, ledger  # only when there is something to read

    marks = episodes.forgotten(store) if tombstones.exists() else {}  # (a rebuild resumed: its later rows too)
    book = ledger.open_ledger(store, episodes.LEDGER)
    while True:
        for number, raw in enumerate(lines, start=lines_before + 1):
            if (number == 1 and book.header) or len(raw) >= ROW_LIMIT:  # a line over the limit: skipped, `doctor` names it
                continue
            row = ledger.Row(number, ledger.parse_record(raw.decode("utf-8", "replace"), book.columns))
            ep = episodes.from_row(row)
            mark = marks.get(ep.id)
            if mark is not None:  # the same rule as episodes.list_episodes
                if mark["action"] == "tombstone":
                    continue
                ep = dataclasses.replace(ep, description=mark["description"], outcome=mark["outcome"])
            _insert_episode(conn, ep, rel)
        if len(lines) < CHUNK_LINES:
            return True
        checkpoint()
        new = _new_lines(path, conn, "episodes", CHUNK_LINES)
        if not new or not new[1]:  # (None: rewritten meanwhile; the next sync rereads it)
            return True
        lines_before, lines = new


def _insert_episode(conn: sqlite3.Connection, ep, rel: str) -> None:
    text = ep.description + (" " + ep.outcome if ep.outcome else "")
    shown = ep.description + (SEP + ep.outcome if ep.outcome else "")  # recall._item splits them again
    _insert(conn, "episode", ep.id, ep.id, shown, text, text + " " + " ".join(ep.tags), f"{rel}:{ep.lineno}",
            ep.type, ep.tags, _unit(ep.importance, 0.5), 1.0, _epoch(ep.ts), False, "live", (None, False), ep.agent)


def _sync_access(store: Store, conn: sqlite3.Connection, wait: float | None = None) -> None:
    """Use counts and last use per key (display rows are skipped: access.is_use): the log's in
    `access`, the rows still pending in `access_pending` (access.py), read while no move runs (waited
    for up to `wait` seconds, default MEMCTL_LOCK_TIMEOUT)."""
    from . import access as access_mod

    path = access_mod.path_for(store)
    with access_mod.reading(store, wait):
        new = _new_lines(path, conn, "access")
        if new is None or _meta(conn, "access.path") != str(path):
            conn.execute("DELETE FROM access")
            _reset(conn, "access")
            _set_meta(conn, "access.path", str(path))
            new = _new_lines(path, conn, "access")
            assert new is not None
        _count_uses(conn, "access", new, access_mod.header(path))
        _sync_pending(store, conn)


def sync_uses(store: Store, conn: sqlite3.Connection) -> None:
    """Bring the use counts of another index (the documents', docindex.py) up to date with the store's
    access log, which holds the uses of its passages too. Best effort: a writer holding that index (a
    `source index` run) or the access log (an append, a move) is not waited for, and a failure to write
    the counts (a full disk) fails no query: they stay as the last query left them."""
    from .errors import LockTimeout

    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:  # locked by an index run
        return
    finally:
        conn.execute("PRAGMA busy_timeout = 30000")  # _connect's timeout=30
    try:
        _sync_access(store, conn, wait=0.2)  # an append holds the log for a moment; a move, longer
        conn.execute("COMMIT")
    except (sqlite3.Error, OSError, LockTimeout):
        rolled_back(conn)
    except BaseException:
        rolled_back(conn)
        raise


def rolled_back(conn: sqlite3.Connection) -> None:
    """ROLLBACK when a transaction is still open (SQLite ends one itself on a full disk or an I/O error)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _sync_pending(store: Store, conn: sqlite3.Connection) -> None:
    """`access_pending`: the rows being moved (rare: a move cut short) counted whole whenever they
    change, pending.tsv by byte offset; both again when pending.tsv was moved away."""
    from . import access as access_mod

    files = access_mod.pending_files(store)
    pending = access_mod.pending_path(store)
    moving = [p for p in files if p != pending]
    stamp = ";".join(f"{p.name}:{_file_state(p)}" for p in moving)
    new = _new_lines(pending, conn, "pending") if stamp == (_meta(conn, "access.moving") or "") else None
    if new is None:
        conn.execute("DELETE FROM access_pending")
        _reset(conn, "pending")
        _set_meta(conn, "access.moving", stamp)
        for path in moving:
            with contextlib.suppress(FileNotFoundError):
                data = path.read_bytes()
                _count_uses(conn, "access_pending", (0, data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")),
                            (access_mod.COLUMNS, False))
        new = _new_lines(pending, conn, "pending")
        assert new is not None
    _count_uses(conn, "access_pending", new, (access_mod.COLUMNS, False))


def _count_uses(conn: sqlite3.Connection, table: str, new: tuple[int, list[bytes]], header: tuple[tuple[str, ...], bool]) -> None:
    """Add the use rows among `new` (lines read before them, the lines) to `table`'s counts."""
    from . import access as access_mod

    lines_before, lines = new
    if not lines:
        return
    from . import ledger

    columns, has_header = header
    counts: dict[str, list] = {}
    for number, raw in enumerate(lines, start=lines_before + 1):
        if (number == 1 and has_header) or len(raw) >= ROW_LIMIT:
            continue
        values = ledger.parse_record(raw.decode("utf-8", "replace"), columns)
        if not access_mod.is_use(values.get("command", "")):
            continue
        when = _epoch(values.get("ts"))
        for key in filter(None, values.get("shown", "").split(",")):
            entry = counts.setdefault(key, [0, None])
            entry[0] += 1
            if when is not None and (entry[1] is None or when > entry[1]):
                entry[1] = when
    for key, (count, last) in counts.items():
        conn.execute(
            f"INSERT INTO {table} VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET count = count + excluded.count,"
            " last = max(coalesce(last, 0), coalesce(excluded.last, 0))",
            (key, count, last),
        )


# ---------------------------------------------------------------- queries


def searched_terms(terms: Sequence[str]) -> list[str]:
    """The query terms that find document chunks: all of them but those the language prior weighs down
    (chunk_term_weight: bigrams holding a hiragana — particles, endings, okurigana: `のは`, `は北`, `明け` —,
    a lone hiragana, searched as a prefix: `は` in `URLは`, and the question forms: `何時`, `どこ`), when
    any other term is left. They occur in most Japanese texts (a JSQuAD question's OR over all its terms
    matched 77 % of the articles' chunks, over the rest 17 %, median; `は*` alone 74 %) and BM25 scores
    every match, which at 100,000 chunks is most of a recall's time (docs/SOURCES.md "At 100,000 chunks");
    a candidate's coverage still counts them. Facts and episodes are searched with every term: their
    stores stay far smaller, and the relevance fit's dev sets were collected so."""
    strong = [t for t in terms if chunk_term_weight(t) == term_weight(t)]
    return strong or list(terms)


def _match_expression(tokens: Sequence[str]) -> str | None:
    unique = list(dict.fromkeys(tokens))
    if not unique:
        return None
    # A lone kana/kanji (a one-character query, or a one-character run in it) is a prefix query.
    # Only the tokens column is searched: the kind column holds "fact" and "episode".
    return "tokens : (" + " OR ".join('"' + t.replace('"', '""') + '"' + ("*" if len(t) == 1 and textnorm.has_cjk(t) else "")
                                      for t in unique) + ")"


def _filters(kinds: Sequence[str], statuses: Sequence[str], fact_type: str | None, tag: str | None,
             since: float | None, agent: str | None = None) -> tuple[str, list]:
    where = [f"d.kind IN ({','.join('?' * len(kinds))})", f"d.status IN ({','.join('?' * len(statuses))})"]
    args: list = [*kinds, *statuses]
    if fact_type:
        where.append("d.type = ?")
        args.append(fact_type)
    if tag:
        where.append("instr(? || d.tags || ?, ?) > 0")
        args += [SEP, SEP, SEP + tag + SEP]
    if since is not None:
        where.append("d.ts >= ?")
        args.append(since)
    if agent is not None:
        where.append("d.agent = ?")
        args.append(agent)
    return " AND ".join(where), args


K1, B = 1.2, 0.75  # FTS5's BM25 parameters, used for the coverage too
REFERENCE_LENGTH = 32  # tokens: the coverage's length normalisation is fixed, not the corpus average


def term_weight(term: str) -> float:
    """A query term's weight in the coverage of a fact or an episode, fixed by the term itself, never by
    the store: so that the same fact for the same query has the same coverage whatever else the store
    holds (docs/RECALL.md). Every term weighs 1, a single kana/kanji character (a one-character query
    word, matched as a prefix) 0.5. Particles weigh as much as words here: with them weighed down as in
    chunk_term_weight, questions that share one word with a fact and ask about something else passed
    the floor (docs/RECALL.md, "The language prior for facts: tried, withdrawn")."""
    return 0.5 if len(term) == 1 and textnorm.has_cjk(term) else 1.0


# A document chunk asked in kana/kanji (hybrid mode) is measured otherwise than a fact (docs/SOURCES.md
# "Measured", issue 27): by the weighted share of the query's terms it holds at all (a chunk is hundreds of
# tokens, and the facts' saturation at REFERENCE_LENGTH made one occurrence count 0.23 there), each term
# weighted by a fixed prior of the language, never by the store. Parts of a Japanese question that an answer
# text does not hold (question words and polite endings) weigh 0; a bigram of hiragana alone (particles,
# endings) 0.25, one that crosses from hiragana to another script (a particle and a name: は北) 0.5.
QUESTION_FORMS = frozenset("どこ いつ どの どれ どん んな どう なぜ です すか ます でし しょ ょう うか".split())
QUESTION_CHARS = frozenset("何誰")
HIRAGANA_WEIGHT, MIXED_WEIGHT = 0.25, 0.5


def chunk_term_weight(term: str) -> float:
    """A query term's weight in a chunk's coverage when the query has kana/kanji (see QUESTION_FORMS)."""
    if term in QUESTION_FORMS or any(char in QUESTION_CHARS for char in term):
        return 0.0
    weight = term_weight(term)
    if not textnorm.has_cjk(term):
        return weight
    hiragana = sum(1 for char in term if "\u3041" <= char <= "\u309f")
    if hiragana == len(term):
        return weight * HIRAGANA_WEIGHT
    return weight * MIXED_WEIGHT if hiragana else weight


def chunk_term_weights(terms: Sequence[str]) -> dict[str, float]:
    """Each term's chunk_term_weight; a query made of nothing else than what the prior weighs 0 (`何`, `いつ`,
    `幾何学`: 幾何 and 何学 hold 何) keeps its plain weights (term_weight), or no chunk could ever cover it."""
    weights = {t: chunk_term_weight(t) for t in terms}
    return weights if any(weights.values()) else {t: term_weight(t) for t in terms}


def chunk_coverages(conn: sqlite3.Connection, query: str, docs: Sequence[int]) -> dict[int, float]:
    """The coverage of each chunk of `docs` for a query with kana/kanji: the share of the query's terms, each
    weighted by chunk_term_weight, that the chunk holds at least once (prefix-matched as term_counts does).

    Held at all, not how often: each term is looked for in the chunk's indexed tokens as they are stored
    (one string, space-separated), as " term " (" term" for a one-character kana/kanji term, a prefix),
    without splitting hundreds of tokens a chunk into a list (half the time at 400 candidates)."""
    if not docs:
        return {}
    terms = list(dict.fromkeys(search_tokens(query)))
    weights = chunk_term_weights(terms)
    whole = sum(weights.values())
    if not whole:
        return dict.fromkeys(docs, 0.0)
    needles = [(f" {t}" if len(t) == 1 and textnorm.has_cjk(t) else f" {t} ", weights[t]) for t in terms if weights[t]]

    def held(text: str) -> float:
        padded = f" {text} "
        return sum(weight for needle, weight in needles if needle in padded) / whole

    found = {doc: held(text) for doc, text in _token_texts(conn, docs)}
    return {doc: found.get(doc, 0.0) for doc in docs}


def query_terms(query: str) -> tuple[list[str], dict[str, float]]:
    """The query's distinct search terms and their weights (term_weight)."""
    terms = list(dict.fromkeys(search_tokens(query)))
    return terms, {t: term_weight(t) for t in terms}


def tokens_of(conn: sqlite3.Connection, wanted: Sequence[int]) -> dict[int, list[str]]:
    """The indexed tokens of each document."""
    return {doc: text.split() for doc, text in _token_texts(conn, wanted)}


def _token_texts(conn: sqlite3.Connection, wanted: Sequence[int]) -> Iterator[tuple[int, str]]:
    """(document id, its indexed tokens as stored: one string, space-separated) of `wanted`."""
    wanted = list(wanted)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        yield from conn.execute(f"SELECT rowid, tokens FROM fts WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)


COUNTED_FROM = 64  # tokens: term_counts counts a longer text's tokens once (collections.Counter)


def term_counts(tokens: Sequence[str], terms: Sequence[str]) -> dict[str, int]:
    """How often each query term occurs in `tokens` (absent terms left out); a one-character kana/kanji
    term counts the tokens it starts, as it is matched as a prefix (see _match_expression)."""
    if not isinstance(tokens, list):
        tokens = list(tokens)
    # list.count runs in C: for a fact's few tokens, counting only the query's terms is the cheap way; a
    # document chunk holds hundreds, and a Japanese question twenty terms: one count of every token then.
    counted = collections.Counter(tokens) if len(tokens) > COUNTED_FROM else None
    found = {}
    for t in terms:
        if len(t) == 1 and textnorm.has_cjk(t):
            tf = sum(1 for tok in tokens if tok.startswith(t))
        else:
            tf = tokens.count(t) if counted is None else counted[t]
        if tf:
            found[t] = tf
    return found


def counted_coverage(tf: dict[str, int], length: int, weights: dict[str, float]) -> float:
    """The weighted share of the query's terms (`weights`) that a text of `length` tokens holding them
    `tf` times covers, each saturated as BM25 saturates term frequency for REFERENCE_LENGTH tokens."""
    whole = sum(weights.values())
    if not tf or not whole:
        return 0.0
    norm = K1 * (1 - B + B * length / REFERENCE_LENGTH)
    return sum(weights[t] * min(1.0, n * (K1 + 1) / (n + norm)) for t, n in tf.items()) / whole


def coverage(tokens: Sequence[str], terms: Sequence[str], weights: dict[str, float]) -> float:
    """The weighted share of `terms` that `tokens` hold (counted_coverage)."""
    tokens = tokens if isinstance(tokens, list) else list(tokens)
    return counted_coverage(term_counts(tokens, terms), len(tokens), weights)


def keyword(conn: sqlite3.Connection, query: str, *, kinds: Sequence[str], statuses: Sequence[str], limit: int,
            fact_type: str | None = None, tag: str | None = None, since: float | None = None,
            agent: str | None = None) -> dict[int, float]:
    """The BM25 of the best `limit` documents by BM25 that pass the filters, best first.

    BM25 (higher is better, its idf from the whole index) is unbounded and only orders;
    the absolute keyword signal is the coverage (coverages, chunk_coverages), measured by
    the caller for these candidates and those another signal found.
    """
    expression = _match_expression(searched_terms(search_tokens(query)) if "chunk" in kinds else search_tokens(query))
    if expression is None:
        return {}
    # FTS5 intersects the doclists: only this kind's matches are scored. Not for chunks: the documents'
    # index holds nothing else (docindex.py), and intersecting with its every row cost ~20 % of the search.
    if len(kinds) == 1 and kinds[0] != "chunk":
        expression = f"kind : {kinds[0]} AND {expression}"
    return dict(_best_by_bm25(conn, expression, limit, kinds=kinds, statuses=statuses, fact_type=fact_type, tag=tag,
                              since=since, agent=agent))


POOL = 4  # _best_by_bm25 ranks POOL x limit matches before it filters


def _best_by_bm25(conn: sqlite3.Connection, expression: str, limit: int, **filters: Any) -> list[tuple[int, float]]:
    """(doc id, BM25) of the best `limit` matches of `expression` that pass the filters (passing()),
    best first (equal scores by id). The best POOL x limit matches are ranked in FTS5 alone and filtered
    after: joining every match with its document first costs as much as BM25 itself (a common word or
    kana bigram matches a third of 100,000 chunks: docs/SOURCES.md "Measured"). When the filters leave
    fewer than `limit` of the pool and more matches exist, every match is filtered first, as the answer
    must be the same."""
    pool = conn.execute("SELECT rowid, -bm25(fts, 1.0, 0.0) AS score FROM fts WHERE fts MATCH ?"
                        " ORDER BY score DESC, rowid LIMIT ?",  # BM25 computed once a row
                        [expression, POOL * limit]).fetchall()
    kept = passing(conn, [doc for doc, _ in pool], **filters)
    best = [(doc, score) for doc, score in pool if doc in kept][:limit]
    if len(best) == limit or len(pool) < POOL * limit:
        return best
    where, args = _filters(**filters)
    return conn.execute(
        f"SELECT d.id, -bm25(fts, 1.0, 0.0) AS score FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ? AND {where}"
        " ORDER BY score DESC, d.id LIMIT ?", [expression, *args, limit]).fetchall()


def coverages(conn: sqlite3.Connection, query: str, docs: Sequence[int]) -> dict[int, float]:
    """The keyword coverage of each of `docs` for `query`: the share of the query's terms, each weighted
    by term_weight, that the document holds, a term counting fully when it occurs as often as BM25's
    saturation asks of a document of REFERENCE_LENGTH tokens (docs/RECALL.md). It depends on the
    query and the document alone, never on the rest of the store, nor on whether BM25 ranked the
    document among the keyword candidates."""
    if not docs:
        return {}
    terms, weights = query_terms(query)
    texts = tokens_of(conn, docs)
    return {doc: coverage(texts.get(doc, []), terms, weights) for doc in docs}


def conversation_neighbours(conn: sqlite3.Connection, wanted: Sequence[int], gap_seconds: float,
                            events: Sequence[str] = ()) -> dict[int, tuple[int | None, int | None]]:
    """For episode documents, the previous and next turn of the same conversation (or None).

    Turns of one conversation are consecutive episodes (in ledger order) of
    the same type, not one of `events`, whose timestamps are at most
    `gap_seconds` apart. Episodes are numbered in ledger order, but a fact
    indexed between two appends takes a number between them: the episode
    next to a turn is then looked for past it.
    """
    wanted = sorted(set(wanted))
    around = sorted({d + step for d in wanted for step in (-1, 0, 1)})
    info: dict[int, tuple[str, str, float | None]] = {}
    for start in range(0, len(around), 500):
        chunk = around[start : start + 500]
        for doc, kind, type_, ts in conn.execute(
                f"SELECT id, kind, type, ts FROM docs WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            info[doc] = (kind, type_, ts)

    def joined(a: int | None, b: int | None) -> bool:
        x, y = info.get(a), info.get(b)
        return (x is not None and y is not None and x[0] == y[0] == "episode" and x[1] == y[1] and x[1] not in events
                and x[2] is not None and y[2] is not None and abs(y[2] - x[2]) <= gap_seconds)

    found = {d: (d - 1 if joined(d - 1, d) else None, d + 1 if joined(d, d + 1) else None) for d in wanted}
    nothing = ("",)
    for step in (-1, 1):  # a fact (or a gap) next to a turn: the episode past it
        past = [d for d in wanted if info.get(d, nothing)[0] == "episode" and info.get(d + step, nothing)[0] != "episode"]
        for d, other in (_episodes_past(conn, past, step, info) if past else {}).items():
            if other is not None and (joined(other, d) if step < 0 else joined(d, other)):
                found[d] = (other, found[d][1]) if step < 0 else (found[d][0], other)
    return found


def _episodes_past(conn: sqlite3.Connection, docs: Sequence[int], step: int,
                   info: dict[int, tuple[str, str, float | None]]) -> dict[int, int | None]:
    """doc -> the nearest episode before it (step -1) or after it (+1), in one query; `info` gets theirs."""
    import json

    order, compare = ("DESC", "<") if step < 0 else ("ASC", ">")
    found = dict(conn.execute(
        f"SELECT j.value, (SELECT id FROM docs WHERE kind='episode' AND id{compare}j.value ORDER BY id {order} LIMIT 1)"
        " FROM json_each(?) j", (json.dumps(list(docs)),)))
    wanted = sorted({n for n in found.values() if n is not None} - info.keys())
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for doc, kind, type_, ts in conn.execute(
                f"SELECT id, kind, type, ts FROM docs WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            info[doc] = (kind, type_, ts)
    return found


def passing(conn: sqlite3.Connection, wanted: Sequence[int], *, kinds: Sequence[str], statuses: Sequence[str],
            fact_type: str | None = None, tag: str | None = None, since: float | None = None,
            agent: str | None = None) -> set[int]:
    """The documents among `wanted` that pass the filters."""
    where, args = _filters(kinds, statuses, fact_type, tag, since, agent)
    found: set[int] = set()
    wanted = list(wanted)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found.update(r[0] for r in conn.execute(
            f"SELECT d.id FROM docs d WHERE d.id IN ({','.join('?' * len(chunk))}) AND {where}", [*chunk, *args]))
    return found


def ids(conn: sqlite3.Connection, *, kinds: Sequence[str], statuses: Sequence[str], fact_type: str | None = None,
        tag: str | None = None, since: float | None = None, agent: str | None = None) -> list[int]:
    where, args = _filters(kinds, statuses, fact_type, tag, since, agent)
    return [row[0] for row in conn.execute(f"SELECT d.id FROM docs d WHERE {where} ORDER BY d.id", args)]


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Reads in one transaction: they see one state of the index, whatever other processes commit."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def generation(conn: sqlite3.Connection, kind: str) -> str | None:
    """A name for the current state of `kind`'s documents: it changes whenever any of them changes
    (and when the index is rebuilt), so a cache derived from them can be keyed by it."""
    return _meta(conn, f"generation.{kind}")


def kind_ids(conn: sqlite3.Connection, kind: str) -> list[int]:
    """The ids of every document of `kind`, in vector_texts' order."""
    return [row[0] for row in conn.execute("SELECT id FROM docs WHERE kind=? ORDER BY id", (kind,))]


def vector_texts(conn: sqlite3.Connection, kind: str) -> list[tuple[int, str, str]]:
    """(doc id, cache id, text) of every document of `kind`, for the embedding cache."""
    return [(doc, f"{kind}:{key}", text) for doc, key, text in
            conn.execute("SELECT id, key, vtext FROM docs WHERE kind=? ORDER BY id", (kind,))]


def docs(conn: sqlite3.Connection, wanted: Sequence[int]) -> dict[int, Doc]:
    found: dict[int, Doc] = {}
    wanted = list(wanted)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = conn.execute(
            "SELECT id, kind, key, title, description, path, type, tags, importance, confidence, ts, pinned, status, expires,"
            f" expires_local FROM docs WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        for r in rows:
            found[r[0]] = Doc(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(t for t in r[7].split(SEP) if t),
                              r[8], r[9], r[10], bool(r[11]), r[12], r[13], bool(r[14]))
    return found


def access(conn: sqlite3.Connection, keys: Sequence[str]) -> tuple[dict[str, tuple[int, float | None]], int]:
    """(count, last access) for `keys`, and the highest count of any key: the log's rows and the pending ones."""
    found: dict[str, tuple[int, float | None]] = {}
    keys = list(dict.fromkeys(keys))
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        for table in ("access", "access_pending"):
            for key, count, last in conn.execute(
                f"SELECT key, count, last FROM {table} WHERE key IN ({','.join('?' * len(chunk))})", chunk
            ):
                had, when = found.get(key, (0, None))
                found[key] = (had + count, max((t for t in (when, last) if t is not None), default=None))
    most = max(conn.execute("SELECT max(count) FROM access").fetchone()[0] or 0,
               conn.execute("SELECT max(coalesce(a.count, 0) + p.count) FROM access_pending p"
                            " LEFT JOIN access a ON a.key = p.key").fetchone()[0] or 0)
    return found, most


def episode_keys(conn: sqlite3.Connection, keys: Sequence[str]) -> set[str]:
    """The episode ids among `keys` that the index holds."""
    keys = list(dict.fromkeys(keys))
    found: set[str] = set()
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        found.update(r[0] for r in conn.execute(
            f"SELECT key FROM docs WHERE kind='episode' AND key IN ({','.join('?' * len(chunk))})", chunk))
    return found


def live_facts_where(conn: sqlite3.Connection, condition: str, args: Sequence = (), order: str = "id") -> list[Doc]:
    """Live fact documents matching an SQL condition over `docs` (for the context bundle)."""
    rows = conn.execute(f"SELECT id FROM docs WHERE kind='fact' AND status='live' AND ({condition}) ORDER BY {order}", list(args))
    wanted = [r[0] for r in rows]
    found = docs(conn, wanted)
    return [found[i] for i in wanted]


def fact_bodies(conn: sqlite3.Connection, root: Path, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """(description, body) of the fact documents at `paths` (as docs hold them: relative to the store's
    `root`, or absolute outside it), as last synced. Looked up through `files`, whose key is the
    absolute path: docs.path has no index of its own, and a scan of 10,000 facts costs ~5 ms a call."""
    prefix = os.path.join(str(root), "")
    by_file = {path if os.path.isabs(path) else prefix + path: path for path in paths}
    found: dict[str, tuple[str, str]] = {}
    files = list(by_file)
    for start in range(0, len(files), 500):
        chunk = files[start : start + 500]
        for path, description, body in conn.execute(
                "SELECT f.path, d.description, d.body FROM files f JOIN docs d ON d.id = f.doc"
                f" WHERE f.path IN ({','.join('?' * len(chunk))}) AND d.kind = 'fact'", chunk):
            found[by_file[path]] = (description, body or "")
    return found


# ---------------------------------------------------------------- another index of the same shape

def create_at(path: Path, hint: str | None = None) -> sqlite3.Connection:
    """A new, empty index of this module's schema at `path` (docindex.py keeps document chunks in one);
    `hint`: failing_storage's on a full disk."""
    return _fresh(path, hint)


def connect_at(path: Path) -> sqlite3.Connection | None:
    """The index at `path` when it exists and is of this version, else None."""
    if not path.exists():
        return None
    conn = None
    try:
        conn = _connect(path)
        row = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        if storage_error(exc):
            raise  # a full disk is no other version: the index is kept (failing_storage words it)
        return None
    if row is None or row[0] != VERSION:
        conn.close()
        return None
    return conn


def add_doc(conn: sqlite3.Connection, kind: str, key: str, title: str, description: str, text: str, path: str,
            type_: str, ts: float | None, body: str) -> int:
    """A document of another kind (docindex's chunks): `text` is both searched and embedded."""
    return _insert(conn, kind, key, title, description, text, text, path, type_, (), 0.5, 1.0, ts, False, "live",
                   (None, False), body=body)


def remove_doc(conn: sqlite3.Connection, doc: int) -> None:
    _delete_doc(conn, doc)


def renew(conn: sqlite3.Connection, kind: str) -> None:
    """After `kind`'s documents changed: a new generation (the vector cache's key)."""
    _set_meta(conn, f"generation.{kind}", os.urandom(8).hex())
