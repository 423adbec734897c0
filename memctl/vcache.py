"""The embedding cache: the only module that reads or writes .npy files.

One folder per (backend, model, kind) under ``.memctl/vectors/``, shared by
every source embedded with that model and kind, so a text is embedded once
whichever command asks first (near-dup's facts and recall's facts are the same
descriptions, embedded as passages):

    NAME.manifest.json  one source's rows: each row's id and content hash
                        (blake2b-64 of the UTF-8 text), backend, model,
                        fingerprint, kind, dim, and which matrix file is theirs
    NAME.TOKEN.npy      that matrix: float32, (rows, dim), L2-normalised, row i
                        <-> manifest row i; a new TOKEN for every save
    NAME.current.json   optional, small: the caller's key for the rows (recall:
                        the recall index's generation of that kind) with the
                        identity and the matrix file, so that a caller whose rows
                        did not change loads the vectors without reading, hashing
                        or comparing 10,000 texts (`current`)
    batch.FP.TOKEN.npz  texts embedded by a sync that has not finished (stopped
                        by Ctrl-C or SIGTERM, or still running): content hashes
                        and vectors, one file per finished batch

`sync` makes a source's rows match a list of (id, text) items. A text whose
content hash this source, another source of the folder or a batch already holds
reuses that vector: after an append exactly the new rows are embedded, an edit
re-embeds exactly the edited row, and a run stopped half-way is resumed where it
stopped. Texts are embedded by embed.paced (short calls, progress; a Ctrl-C lands
within a second), which hands what is finished over to be saved as a batch every
few seconds and on Ctrl-C or SIGTERM. A cache for another backend, model,
fingerprint or dimension, and a corrupt, truncated or replaced one, is rebuilt
with a notice on stderr, never used. Saving is atomic (temp file, fsync,
rename); the manifest names its matrix file, and a sample of that file's rows,
so an interrupted save leaves the old pair whole and a copied store (`cp -a`,
new inodes) stays valid. Reading memory-maps.

The text files stay the source of truth: deleting `.memctl/` loses nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from . import clock, errors
from .embed import paced
from .fsutil import atomic_write, file_lock, refuse_link, sweep_temps
from .textnorm import full_width_kana

try:  # hashlib would load OpenSSL (~6 ms of recall's start-up) for a blake2b it does not need
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .embed import Embedder
    from .store import Store

FORMAT = 2  # 2: folders shared by sources, matrix files named by the manifest, batches
# What the model reads of a text (embed.model_input), recorded with what `current` trusts without hashing:
# 2, half-width katakana full-width (2026-12-06). A record of another is synced once, which re-hashes.
MODEL_INPUT = 2
SUBDIR = "vectors"
HASH_CHARS = 16  # blake2b with an 8-byte digest, hex
SAMPLE_ROWS = 8  # rows of a matrix read to check it (unit norms, and the manifest's digest of them)


_HALF_WIDTH_KANA_UTF8 = re.compile(rb"\xef(?:\xbd[\xa1-\xbf]|\xbe[\x80-\x9f])")  # U+FF61-U+FF9F encoded


def content_hash(text: str) -> str:
    """The key of a text's vector: of the text as the model reads it (embed.model_input's half-width
    katakana as full-width), so that a vector embedded before that read is not taken for it. (Looked
    for in the bytes: `max(text)` over 60k texts cost four times the hashing.)"""
    data = text.encode("utf-8")
    if _HALF_WIDTH_KANA_UTF8.search(data):
        data = full_width_kana(text).encode("utf-8")
    return blake2b(data, digest_size=HASH_CHARS // 2).hexdigest()


@dataclass
class Vectors:
    """A source's vectors: row i of `matrix` embeds the text of `ids[i]`.

    With a deadline (answer_within) the rows may be only those ready so far: `present` then lists
    their positions among the items given to sync, and `waiting` counts the others."""

    source: str
    ids: list[str]
    hashes: list[str]
    matrix: "np.ndarray"
    dim: int
    embedded: int  # texts embedded by this sync
    rebuilt: str | None  # why the cache was rebuilt, if it was
    folder: Path
    present: list[int] | None = None  # None: every item has its row
    waiting: int = 0  # items without a vector yet (embedded in the background)


@dataclass(frozen=True)
class Entry:
    """One source's cache as `cache status` shows it."""

    source: str
    backend: str
    model: str
    kind: str
    dim: int
    rows: int
    embedded_last: int
    embedded_total: int
    updated: str
    bytes: int
    folder: str
    problem: str | None = None


def _slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "x"


def _tag(text: str) -> str:
    return blake2b(text.encode("utf-8"), digest_size=4).hexdigest()


def root_dir(store: "Store") -> Path:
    """`.memctl/vectors/`; Refused when it, or `.memctl/`, is a symbolic link (git writes one over an ignored
    folder: the sweep and `cache clear` would delete where it leads)."""
    base = store.cache_dir / SUBDIR
    refuse_link(store.root, base)
    return base


def folder_for(store: "Store", embedder: "Embedder", kind: str) -> Path:
    """The folder every source embedded with this backend, model and kind shares."""
    tag = _tag("\0".join((embedder.backend, embedder.model, kind)))
    name = f"{_slug(embedder.backend)}--{_slug(Path(embedder.model).name or embedder.model)}--{kind}-{tag}"
    return root_dir(store) / name


def _name(source: str) -> str:
    """A source's file names in a folder: readable, and distinct for distinct sources."""
    return f"{_slug(source.replace(':', '-'))}-{_tag(source)}"


def _lock(folder: Path):
    return file_lock(folder.parent / f".{folder.name}.lock")


def _manifest_path(folder: Path, source: str) -> Path:
    return folder / f"{_name(source)}.manifest.json"


def _current_path(folder: Path, source: str) -> Path:
    return folder / f"{_name(source)}.current.json"


# ---------------------------------------------------------------- reading


class _Invalid(Exception):
    """Why the cache on disk cannot be used."""


def _read_manifest(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise _Invalid("the manifest is truncated or corrupt") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _Invalid("the manifest has an unknown format")
    ids, hashes = data.get("ids"), data.get("hashes")
    if not isinstance(ids, list) or not isinstance(hashes, str) or len(hashes) != HASH_CHARS * len(ids):
        raise _Invalid("the manifest is truncated (rows and hashes disagree)")
    if data.get("count") != len(ids) or not isinstance(data.get("npy"), dict):
        raise _Invalid("the manifest is truncated (row count disagrees)")
    return data


def _check_identity(meta: dict[str, Any], embedder: "Embedder", kind: str) -> None:
    theirs = (meta.get("backend"), meta.get("model"), meta.get("fingerprint"), meta.get("kind"))
    ours = (embedder.backend, embedder.model, embedder.fingerprint, kind)
    if theirs != ours:
        raise _Invalid(f"cache was built by {theirs[0]} ({theirs[1]}, {theirs[2]}, {theirs[3]}), not by the embedder in use")


def _sample(count: int) -> list[int]:
    # (rows picked without np.unique, whose first call imports numpy.ma: ~5 ms per command)
    if count <= 0:
        return []
    step = (count - 1) / max(1, SAMPLE_ROWS - 1)
    return sorted({round(i * step) for i in range(min(count, SAMPLE_ROWS))})


def _digest(rows: "np.ndarray") -> str:
    import numpy as np

    return blake2b(np.ascontiguousarray(rows, dtype=np.float32).tobytes(), digest_size=8).hexdigest()


def _open_vectors(folder: Path, meta: dict[str, Any]) -> "np.ndarray":
    """The matrix `meta` names, memory-mapped, once its shape and sampled rows check out.

    A cheap sample, not a checksum: a checksum of 100k rows costs more than the query. The
    sampled rows must be unit vectors and match the digest the manifest recorded, so another
    file put in its place (of the same shape) is refused, whatever its inode or mtime."""
    import numpy as np

    npy = meta.get("npy") or {}
    name = str(npy.get("file", ""))
    if not name or "/" in name:
        raise _Invalid("the manifest names no vectors file")
    path = folder / name
    if not path.is_file():
        raise _Invalid(f"{name} is missing")
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        raise _Invalid(f"{name} is corrupt") from None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape != (meta.get("count"), meta.get("dim")):
        raise _Invalid(f"{name} has shape {matrix.shape} {matrix.dtype}, the manifest says ({meta.get('count')}, {meta.get('dim')}) float32")
    rows = _sample(len(matrix))
    if rows:
        sample = np.asarray(matrix[rows])
        with np.errstate(all="ignore"):
            norms = np.linalg.norm(sample.astype(np.float64), axis=1)
        if not np.all(np.isfinite(norms)) or not np.all((np.abs(norms - 1.0) < 1e-2) | (norms == 0)):
            raise _Invalid(f"{name} is corrupt (rows are not unit vectors)")
        if _digest(sample) != npy.get("sample"):
            raise _Invalid(f"{name} does not belong to the manifest (replaced or damaged)")
    return matrix


def _own(folder: Path, source: str, embedder: "Embedder", kind: str) -> tuple[dict, "np.ndarray"]:
    """This source's (manifest, matrix); _Invalid when missing or unusable."""
    meta = _read_manifest(_manifest_path(folder, source))
    if meta is None:
        raise _Invalid("")
    _check_identity(meta, embedder, kind)
    return meta, _open_vectors(folder, meta)


def load(store: "Store", source: str, embedder: "Embedder", kind: str = "query") -> Vectors | None:
    """The cache as it is on disk, or None when it is missing or unusable (no rebuild)."""
    folder = folder_for(store, embedder, kind)
    try:
        meta, matrix = _own(folder, source, embedder, kind)
    except _Invalid:
        return None
    return Vectors(source, meta["ids"], _split(meta["hashes"]), matrix, int(meta["dim"]), 0, None, folder)


def current(store: "Store", source: str, embedder: "Embedder", kind: str, key: str | None) -> "np.ndarray | None":
    """The cached matrix (memory-mapped) when `sync` last recorded `key` for it, else None.

    One small JSON read and the matrix's sampled rows: no row ids, no content hashes. The key
    is the caller's promise that the rows are unchanged (recall passes the recall index's
    generation, which changes with any change to that kind of document); the identity, the
    shape and the sampled rows are checked as `load` does.
    """
    found = _current_record(store, source, embedder, kind, key)
    if found is None:
        return None
    try:
        return _open_vectors(*found)
    except (_Invalid, KeyError, TypeError):
        return None


def is_current(store: "Store", source: str, embedder: "Embedder", kind: str, key: str | None) -> bool:
    """Whether current() would find the matrix, told without numpy: the record, and its matrix
    file there with the size recorded (not the sampled rows). A caller that only needs to know asks this."""
    found = _current_record(store, source, embedder, kind, key)
    if found is None:
        return False
    folder, data = found
    npy = data.get("npy") or {}
    try:
        return (folder / str(npy.get("file"))).stat().st_size == npy.get("size")
    except OSError:
        return False


def _current_record(store: "Store", source: str, embedder: "Embedder", kind: str,
                    key: str | None) -> tuple[Path, dict[str, Any]] | None:
    """(the cache's folder, what `sync` recorded as current) when that record is for `key` and this embedder."""
    if not key:
        return None
    folder = folder_for(store, embedder, kind)
    try:
        data = json.loads(_current_path(folder, source).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key \
            or data.get("input") != MODEL_INPUT:
        return None
    try:
        _check_identity(data, embedder, kind)
    except _Invalid:
        return None
    return folder, data


def missing(store: "Store", source: str, texts: Sequence[str], embedder: "Embedder", kind: str) -> int:
    """How many distinct texts `sync` would embed now for `texts`: those whose content hash no
    source and no batch of the folder holds. Reads manifests and batches' hashes only: no lock
    (an estimate a moment old, for deciding who embeds)."""
    folder = folder_for(store, embedder, kind)
    wanted = {content_hash(t) for t in texts}
    held = _lookup(folder, embedder, kind, wanted, vectors=False)
    return len(wanted - set(held))


def _record_current(folder: Path, source: str, meta: dict[str, Any], key: str) -> None:
    data = {name: meta.get(name) for name in ("format", "backend", "model", "fingerprint", "kind", "dim", "count", "npy")}
    data["key"], data["input"] = key, MODEL_INPUT
    atomic_write(_current_path(folder, source), json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")


def _split(hashes: str) -> list[str]:
    return [hashes[i : i + HASH_CHARS] for i in range(0, len(hashes), HASH_CHARS)]


# ---------------------------------------------------------------- what the folder already holds


def _batch_prefix(embedder: "Embedder") -> str:
    return f"batch.{_tag(embedder.fingerprint)}."


def _batches(folder: Path, embedder: "Embedder") -> list[Path]:
    try:
        return sorted(p for p in folder.glob(_batch_prefix(embedder) + "*.npz"))
    except OSError:
        return []


def _read_batch(path: Path, *, vectors: bool = True) -> tuple[list[str], "np.ndarray | None"]:
    """(content hashes, vectors or None) of a batch file; ([], None) when it cannot be read (cut short,
    overwritten: a damaged zip is np.load's BadZipFile)."""
    import zipfile

    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            hashes = [f"{int(h):016x}" for h in data["hashes"]]
            matrix = np.asarray(data["vectors"], dtype=np.float32) if vectors else None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return [], None
    if matrix is not None and (matrix.ndim != 2 or len(matrix) != len(hashes)):
        return [], None
    return hashes, matrix


def _lookup(folder: Path, embedder: "Embedder", kind: str, wanted: set[str], *, skip: str | None = None,
            vectors: bool = True) -> dict[str, tuple[Any, int]]:
    """For each content hash of `wanted` that a source (but `skip`) or a batch of the folder holds:
    (its matrix, the row). With vectors=False the matrices are not opened (the values are None)."""
    found: dict[str, tuple[Any, int]] = {}
    if not wanted or not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.manifest.json")):
        if skip is not None and path.name == f"{_name(skip)}.manifest.json":
            continue
        try:
            meta = _read_manifest(path)
            if meta is None:
                continue
            _check_identity(meta, embedder, kind)
            rows = [(row, digest) for row, digest in enumerate(_split(meta["hashes"])) if digest in wanted and digest not in found]
            if not rows:
                continue
            matrix = _open_vectors(folder, meta) if vectors else None
        except _Invalid:
            continue
        for row, digest in rows:
            found.setdefault(digest, (matrix, row))
    for path in _batches(folder, embedder):
        if len(found) == len(wanted):
            break
        hashes, matrix = _read_batch(path, vectors=vectors)
        for row, digest in enumerate(hashes):
            if digest in wanted:
                found.setdefault(digest, (matrix, row))
    return found


def _save_batch(folder: Path, embedder: "Embedder", hashes: list[str], matrix: "np.ndarray") -> None:
    """Finished vectors as a new batch file (atomic): a later sync of any source finds them."""
    import io

    import numpy as np

    if not hashes:
        return
    buffer = io.BytesIO()
    np.savez(buffer, hashes=np.array([int(h, 16) for h in hashes], dtype=np.uint64),
             vectors=np.ascontiguousarray(matrix, dtype=np.float32))
    atomic_write(folder / f"{_batch_prefix(embedder)}{time.time_ns():x}-{os.urandom(3).hex()}.npz", buffer.getbuffer())


def _drop_used_batches(folder: Path, embedder: "Embedder") -> None:
    """Batches whose every vector some source's matrix now holds are not needed any more
    (under the folder's lock); batches of another fingerprint never are."""
    held: set[str] = set()
    for path in folder.glob("*.manifest.json"):
        with contextlib.suppress(_Invalid):
            meta = _read_manifest(path)
            if meta is not None and meta.get("fingerprint") == embedder.fingerprint:
                held.update(_split(meta["hashes"]))
    mine = _batch_prefix(embedder)
    for path in folder.glob("batch.*.npz"):
        if not path.name.startswith(mine) or set(_read_batch(path, vectors=False)[0]) <= held:
            with contextlib.suppress(OSError):
                path.unlink()


# ---------------------------------------------------------------- updating


def sync(
    store: "Store",
    source: str,
    items: Sequence[tuple[str, str]],
    embedder: "Embedder",
    *,
    kind: str = "query",
    rebuild: bool = False,
    quiet: bool = False,
    key: str | None = None,
) -> Vectors:
    """Bring the cache for `source` up to date with `items` (id, text) and return it.

    `key`, when given, names this state of `items` for `current` (recorded in current.json).
    Ctrl-C or SIGTERM while texts are embedded raises errors.Interrupted once what was
    finished is saved. Inside answer_within(), a sync with texts to embed returns by the
    deadline with the rows ready by then (Vectors.waiting) and finishes in a thread."""
    deadline = _DEADLINE.__dict__.get("at")
    if deadline is not None and not rebuild:
        return _sync_by(store, source, items, embedder, kind, key, deadline)
    return _sync(store, source, items, embedder, kind=kind, rebuild=rebuild, quiet=quiet, key=key)


def _sync(store: "Store", source: str, items: Sequence[tuple[str, str]], embedder: "Embedder", *, kind: str,
          rebuild: bool = False, quiet: bool = False, key: str | None = None) -> Vectors:
    folder = folder_for(store, embedder, kind)
    ids = [str(i) for i, _ in items]
    texts = [t for _, t in items]
    hashes = [content_hash(t) for t in texts]
    with _lock(folder):
        own, reason = _usable(folder, source, embedder, kind, rebuild)
        if reason and not quiet and reason != "rebuild requested":
            errors.warn(f"vector cache {store.rel(_manifest_path(folder, source))}: {reason}; rebuilding it")
        if own is not None and own[0]["ids"] == ids and own[0]["hashes"] == "".join(hashes):
            meta, matrix = own
            if key:
                _record_current(folder, source, meta, key)
            return Vectors(source, ids, hashes, matrix, int(meta["dim"]), 0, None, folder)
        if own is None:
            _sweep_old_layout(root_dir(store))
        known = _known(folder, source, embedder, kind, hashes, own, rebuild)
    todo = {digest: text for digest, text in zip(hashes, texts) if digest not in known}
    fresh = _embed(folder, embedder, list(todo.items()), kind, quiet)
    dim = _dim_of(fresh, known, own)
    stale = {d: t for d, t in zip(hashes, texts) if d in known and d not in fresh and _width(known[d][0]) != dim}
    if stale:  # the same fingerprint, another dimension: the model changed under the same name
        if not quiet:
            errors.warn(f"vector cache {store.rel(folder)}: dimension changed; rebuilding it")
        reason = reason or "dimension changed"
        for digest in stale:
            del known[digest]
        fresh.update(_embed(folder, embedder, list(stale.items()), kind, quiet))
    previous_total = int(own[0].get("embedded_total", 0)) if own is not None else 0
    meta = {
        "format": FORMAT, "source": source, "backend": embedder.backend, "model": embedder.model,
        "fingerprint": embedder.fingerprint, "kind": kind, "dim": int(dim), "count": len(ids),
        "updated": clock.stamp(), "embedded_last": len(fresh), "embedded_total": previous_total + len(fresh),
        "rebuilt": reason, "ids": ids, "hashes": "".join(hashes),
    }
    try:
        with _lock(folder), errors.stops_noted():  # a Ctrl-C now waits for the save (a few ms)
            matrix = _assemble(hashes, known, fresh, dim)
            try:
                _save(folder, source, matrix, meta)
                if key:
                    _record_current(folder, source, meta, key)
                _drop_used_batches(folder, embedder)
            except OSError as exc:  # a full disk: the vectors are in hand, the cache is only a cache
                if _SAVING_IS_THE_JOB.get():
                    raise  # (`cache rebuild`: a cache not written is the command failing)
                _not_saved(store, folder, exc)
    except KeyboardInterrupt as exc:  # while waiting for the lock: what was embedded goes to a batch
        if fresh:
            import numpy as np

            with errors.stops_noted(replay=False):
                _save_batch(folder, embedder, list(fresh), np.stack(list(fresh.values())))
        code = exc.exit_code if isinstance(exc, errors.Interrupted) else errors.INTERRUPTED
        raise errors.Interrupted(paced.stopped_line(code, len(fresh), len(fresh)), code) from None
    return Vectors(source, ids, hashes, matrix, int(dim), len(fresh), reason, folder)


def _embed(folder: Path, embedder: "Embedder", todo: list[tuple[str, str]], kind: str, quiet: bool) -> dict[str, "np.ndarray"]:
    """content hash -> vector for each (hash, text) of `todo`; finished ones saved as batches on the way
    (while they can be: on a full disk the embedding goes on unsaved)."""
    def save(hashes: list[str], matrix: "np.ndarray") -> None:
        try:
            _save_batch(folder, embedder, hashes, matrix)
        except OSError:
            if _SAVING_IS_THE_JOB.get():
                raise
            # (else the final save says so, once)

    return paced.embed(embedder, todo, kind, quiet=quiet, save=save)


_SAVING_IS_THE_JOB = contextvars.ContextVar("memctl_vcache_saving_is_the_job", default=False)


@contextlib.contextmanager
def saving_is_the_job() -> Iterator[None]:
    """Inside it, a cache that cannot be written fails the command (`cache rebuild`), as a write does;
    elsewhere the answer stands with a warning (near-dup, recall: the vectors are in hand)."""
    token = _SAVING_IS_THE_JOB.set(True)
    try:
        yield
    finally:
        _SAVING_IS_THE_JOB.reset(token)


def _not_saved(store: "Store", folder: Path, exc: OSError) -> None:
    """A warning that the cache could not be written (a full disk, a read-only folder): the answer
    stands, computed from the vectors in hand; the next run embeds what was not kept."""
    failure = errors.from_os_error(exc)
    errors.warn(f"the vector cache was not saved: {failure.message}; answered without it",
                hint="free some space: the next run embeds again what was not kept",
                for_want_of_space=errors.out_of_space(exc))  # (remember failing for it too: its error alone)


def _sweep_old_layout(base: Path) -> None:
    """Folders of the first layout (.memctl/vectors/SOURCE/MODEL/manifest.json) are not read any more."""
    with contextlib.suppress(OSError):
        for folder in base.iterdir():
            if folder.is_dir() and "--" not in folder.name and any(folder.glob("*/manifest.json")):
                shutil.rmtree(folder, ignore_errors=True)


def _usable(folder: Path, source: str, embedder: "Embedder", kind: str, rebuild: bool) -> tuple[tuple[dict, "np.ndarray"] | None, str | None]:
    """This source's old (manifest, vectors) when they can be reused, else (None, why not)."""
    if rebuild:
        return None, "rebuild requested"
    try:
        return _own(folder, source, embedder, kind), None
    except _Invalid as exc:
        return None, str(exc) or None


def _known(folder: Path, source: str, embedder: "Embedder", kind: str, hashes: list[str],
           own: tuple[dict, Any] | None, rebuild: bool) -> dict[str, tuple[Any, int]]:
    """content hash -> (matrix, row) for the texts already embedded: this source's old rows
    first, then the folder's other sources and batches (none of them on a rebuild)."""
    known: dict[str, tuple[Any, int]] = {}
    if own is not None and own[0]["count"]:
        for row, digest in enumerate(_split(own[0]["hashes"])):
            known.setdefault(digest, (own[1], row))
    if rebuild:
        return known
    rest = set(hashes) - set(known)
    known.update(_lookup(folder, embedder, kind, rest, skip=source))
    return known


def _width(matrix: Any) -> int:
    return int(matrix.shape[1]) if matrix is not None and getattr(matrix, "ndim", 0) == 2 else 0


def _dim_of(fresh: dict[str, "np.ndarray"], known: dict[str, tuple[Any, int]], own) -> int:
    if fresh:
        return len(next(iter(fresh.values())))
    if own is not None and own[0]["count"]:
        return int(own[0]["dim"])
    return _width(next(iter(known.values()))[0]) if known else 0


def _assemble(hashes: list[str], known: dict[str, tuple[Any, int]], fresh: dict[str, "np.ndarray"], dim: int,
              rows: list[int] | None = None) -> "np.ndarray":
    """The matrix for `hashes` (only the positions `rows`, when given), from fresh and known vectors."""
    import numpy as np

    rows = list(range(len(hashes))) if rows is None else rows
    matrix = np.empty((len(rows), dim), dtype=np.float32)
    by_source: dict[int, tuple[Any, list[int], list[int]]] = {}
    for out, position in enumerate(rows):
        digest = hashes[position]
        if digest in fresh:
            matrix[out] = fresh[digest]
            continue
        source, row = known[digest]
        group = by_source.setdefault(id(source), (source, [], []))
        group[1].append(out)
        group[2].append(row)
    for source, dst, src in by_source.values():
        matrix[dst] = np.asarray(source[src], dtype=np.float32)  # one gather per matrix, not one per row
    return matrix


def _save(folder: Path, source: str, matrix: "np.ndarray", meta: dict[str, Any]) -> None:
    """The matrix under a new name, then the manifest naming it, then the old matrix goes.
    Killed before the manifest's rename, the old pair is whole; the new file is swept later."""
    import io

    import numpy as np

    sweep_temps(folder)  # what a save killed half-way left behind
    name = _name(source)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    buffer = io.BytesIO()
    np.save(buffer, matrix, allow_pickle=False)
    file = f"{name}.{os.urandom(6).hex()}.npy"
    atomic_write(folder / file, buffer.getbuffer())
    meta["npy"] = {"file": file, "size": buffer.getbuffer().nbytes, "sample": _digest(matrix[_sample(len(matrix))])}
    atomic_write(_manifest_path(folder, source), json.dumps(meta, ensure_ascii=False, separators=(",", ":")) + "\n")
    for old in folder.glob(f"{name}.*.npy"):
        if old.name != file:
            with contextlib.suppress(OSError):
                old.unlink()


# ---------------------------------------------------------------- answering by a deadline (servers)


_DEADLINE = threading.local()  # .at: the monotonic time by which this thread's syncs must return; .late: a Late
_JOBS: dict[tuple[str, str], tuple[threading.Thread, dict[str, Any]]] = {}  # (folder, source) -> (thread, result)
_JOBS_LOCK = threading.Lock()


@dataclass
class Late:
    """What the syncs inside one answer_within() left to the background."""

    waiting: int = 0  # texts without a vector when the deadline came
    ready: int = 0  # texts of those syncs that had one


@contextlib.contextmanager
def answer_within(seconds: float) -> Iterator[Late]:
    """Syncs in this thread return within `seconds` (from now, in all): one that has more to embed
    hands the embedding to a background thread and returns the rows ready by then (Vectors.waiting
    counts the others; the Late yielded adds them up). For a server whose every call must answer
    quickly (the MCP server)."""
    before = (getattr(_DEADLINE, "at", None), getattr(_DEADLINE, "late", None))
    late = Late()
    _DEADLINE.at, _DEADLINE.late = time.monotonic() + seconds, late
    try:
        yield late
    finally:
        _DEADLINE.at, _DEADLINE.late = before


def _sync_by(store: "Store", source: str, items: Sequence[tuple[str, str]], embedder: "Embedder", kind: str,
             key: str | None, deadline: float) -> Vectors:
    folder = folder_for(store, embedder, kind)
    job_key = (str(folder), source)
    with _JOBS_LOCK:
        job = _JOBS.get(job_key)
        started = job is None or not job[0].is_alive()
        if started:
            box: dict[str, Any] = {}

            def work() -> None:
                try:
                    box["vectors"] = _sync(store, source, items, embedder, kind=kind, key=key)
                except BaseException as exc:  # noqa: BLE001 - reported by the call that waits for it, or logged
                    box["error"] = exc

            job = (threading.Thread(target=work, name=f"memctl-embed-{_name(source)}", daemon=True), box)
            _JOBS[job_key] = job
            job[0].start()
    thread, box = job
    # A thread started by this call may finish in time (a few new texts); one that an earlier
    # call started is embedding a large backlog: answer from what is ready at once.
    thread.join(max(0.0, deadline - time.monotonic()) if started else 0.0)
    if not thread.is_alive():
        with _JOBS_LOCK:
            if _JOBS.get(job_key) is job:
                del _JOBS[job_key]
        if "error" in box:
            error = box["error"]
            if isinstance(error, errors.Interrupted):
                raise errors.MemctlError("the embedding was stopped", hint="ask again") from None
            raise error
        if box["vectors"].ids == [str(i) for i, _ in items]:
            return box["vectors"]
    found = ready(store, source, items, embedder, kind)
    late = getattr(_DEADLINE, "late", None)
    if late is not None and found.waiting:
        late.waiting += found.waiting
        late.ready += len(found.ids)
    return found


def within_deadline() -> bool:
    """Whether this thread is inside answer_within() (a server: what is missing is embedded in the background)."""
    return _DEADLINE.__dict__.get("at") is not None


def ready(store: "Store", source: str, items: Sequence[tuple[str, str]], embedder: "Embedder", kind: str) -> Vectors:
    """The rows of `items` whose vectors the folder already holds (a source's matrix or a batch), nothing
    embedded (Vectors.waiting counts the others).

    Without the folder's lock (the thread embedding the rest may hold it, fsyncing): every file
    is replaced by a rename, and one removed meanwhile only leaves its rows out of this answer."""
    import numpy as np

    folder = folder_for(store, embedder, kind)
    ids = [str(i) for i, _ in items]
    hashes = [content_hash(t) for _, t in items]
    own, _ = _usable(folder, source, embedder, kind, False)
    known = _known(folder, source, embedder, kind, hashes, own, False)
    dim = _dim_of({}, known, own)
    present = [i for i, digest in enumerate(hashes) if digest in known and _width(known[digest][0]) == dim]
    matrix = _assemble(hashes, known, {}, dim, present) if present else np.zeros((0, dim), dtype=np.float32)
    waiting = len(ids) - len(present)
    return Vectors(source, [ids[i] for i in present], [hashes[i] for i in present], matrix, dim, 0, None, folder,
                   present=present if waiting else None, waiting=waiting)


def stop_background(timeout: float = 2.0) -> None:
    """Ask the embedding threads to save what they finished and stop; wait up to `timeout` seconds."""
    paced.stop()
    with _JOBS_LOCK:
        threads = [thread for thread, _ in _JOBS.values()]
    until = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()))


# ---------------------------------------------------------------- status and clearing


def entries(store: "Store") -> list[Entry]:
    base = root_dir(store)
    found: list[Entry] = []
    if not base.is_dir():
        return found
    for manifest in sorted(base.glob("*/*.manifest.json")):
        folder = manifest.parent
        try:
            meta = _read_manifest(manifest) or {}
            problem = None
            try:
                _open_vectors(folder, meta)
            except _Invalid as exc:
                problem = str(exc)
        except _Invalid as exc:
            meta, problem = {}, str(exc)
        stem = manifest.name[: -len(".manifest.json")]
        size = sum(p.stat().st_size for p in folder.glob(f"{stem}.*") if p.is_file())
        found.append(
            Entry(
                source=str(meta.get("source", stem)),
                backend=str(meta.get("backend", "?")),
                model=str(meta.get("model", "?")),
                kind=str(meta.get("kind", "?")),
                dim=int(meta.get("dim", 0) or 0),
                rows=int(meta.get("count", 0) or 0),
                embedded_last=int(meta.get("embedded_last", 0) or 0),
                embedded_total=int(meta.get("embedded_total", 0) or 0),
                updated=str(meta.get("updated", "")),
                bytes=size,
                folder=store.rel(folder),
                problem=problem,
            )
        )
    return found


def pending(store: "Store") -> int:
    """Texts embedded by runs that did not finish (in batches, not yet in a source's matrix)."""
    import zipfile

    import numpy as np

    total = 0
    base = root_dir(store)
    if base.is_dir():
        for path in base.glob("*/batch.*.npz"):
            with contextlib.suppress(OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile), np.load(path, allow_pickle=False) as data:
                total += len(data["hashes"])
    return total


def clear(store: "Store", source: str | None = None, *, batches: bool = True) -> list[str]:
    """Delete the cache (every folder), or one source's rows in every folder; return what was removed.
    With batches=False the vectors a stopped run kept stay (`cache rebuild` resumes from them)."""
    base = root_dir(store)
    if not base.is_dir():
        return []
    removed = []
    if source is None and batches:
        for target in sorted(p for p in base.iterdir() if p.is_dir()):
            shutil.rmtree(target)
            removed.append(store.rel(target))
        return removed
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        names = [_name(source)] if source is not None else sorted(
            {p.name[: -len(".manifest.json")] for p in folder.glob("*.manifest.json")})
        for name in names:
            files = [p for p in folder.glob(f"{name}.*") if p.is_file()]
            with _lock(folder):
                for path in files:
                    with contextlib.suppress(OSError):
                        path.unlink()
            if files:
                removed.append(store.rel(folder / name))
    return removed
