"""The embedding cache: the only module that reads or writes .npy files.

One folder per (source, backend, model, kind) under ``.memctl/vectors/``:

    vectors.npy     float32, (rows, dim), L2-normalised, row i <-> manifest row i
    manifest.json   backend, model, fingerprint, kind, dim, and each row's id
                    and content hash (blake2b-64 of the UTF-8 text)
    current.json    optional, small: the caller's key for the rows (recall: the
                    recall index's generation of that kind of document) with the
                    identity and the vectors file's stamp, so that a caller whose
                    rows did not change loads the vectors without reading,
                    hashing or comparing 10,000 texts (`current`)

`sync` makes the cache match a list of (id, text) items: a text whose content
hash is already cached reuses its vector, so after an append exactly the new
rows are embedded and an edit re-embeds exactly the edited row; rows that
disappeared are dropped. A cache for another backend, model, fingerprint or
dimension, and a corrupt or truncated one, is rebuilt with a notice on stderr,
never used. Saving is atomic (temp file, fsync, rename; the manifest records the
inode and size of the vectors file it belongs to, so a crash between the two
renames reads as a mismatch, not as wrong vectors). Reading memory-maps.

The text files stay the source of truth: deleting `.memctl/` loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from . import clock, errors
from .fsutil import atomic_write, file_lock, sweep_temps

try:  # hashlib would load OpenSSL (~6 ms of recall's start-up) for a blake2b it does not need
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .embed import Embedder
    from .store import Store

FORMAT = 1
SUBDIR = "vectors"
CURRENT = "current.json"
HASH_CHARS = 16  # blake2b with an 8-byte digest, hex
BATCH = 256
PROGRESS_OVER = 300  # show progress when embedding more texts than this


def content_hash(text: str) -> str:
    return blake2b(text.encode("utf-8"), digest_size=HASH_CHARS // 2).hexdigest()


@dataclass
class Vectors:
    """A cache brought up to date: row i of `matrix` embeds the text of `ids[i]`."""

    source: str
    ids: list[str]
    hashes: list[str]
    matrix: "np.ndarray"
    dim: int
    embedded: int  # texts embedded by this sync
    rebuilt: str | None  # why the cache was rebuilt, if it was
    folder: Path


@dataclass(frozen=True)
class Entry:
    """One cache folder as `cache status` shows it."""

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


def root_dir(store: "Store") -> Path:
    return store.cache_dir / SUBDIR


def folder_for(store: "Store", source: str, embedder: "Embedder", kind: str) -> Path:
    ident = "\0".join((source, embedder.backend, embedder.model, kind))
    tag = blake2b(ident.encode("utf-8"), digest_size=4).hexdigest()
    name = f"{_slug(embedder.backend)}--{_slug(Path(embedder.model).name or embedder.model)}--{kind}-{tag}"
    return root_dir(store) / _slug(source.replace(":", "-")) / name


# ---------------------------------------------------------------- reading


class _Invalid(Exception):
    """Why the cache on disk cannot be used."""


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / "manifest.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise _Invalid("manifest.json is truncated or corrupt") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _Invalid("manifest.json has an unknown format")
    ids, hashes = data.get("ids"), data.get("hashes")
    if not isinstance(ids, list) or not isinstance(hashes, str) or len(hashes) != HASH_CHARS * len(ids):
        raise _Invalid("manifest.json is truncated (rows and hashes disagree)")
    if data.get("count") != len(ids):
        raise _Invalid("manifest.json is truncated (row count disagrees)")
    return data


def _check_identity(meta: dict[str, Any], embedder: "Embedder", kind: str) -> None:
    theirs = (meta.get("backend"), meta.get("model"), meta.get("fingerprint"), meta.get("kind"))
    ours = (embedder.backend, embedder.model, embedder.fingerprint, kind)
    if theirs != ours:
        raise _Invalid(f"cache was built by {theirs[0]} ({theirs[1]}, {theirs[2]}, {theirs[3]}), not by the embedder in use")


def _open_vectors(folder: Path, meta: dict[str, Any]) -> "np.ndarray":
    import numpy as np

    path = folder / "vectors.npy"
    try:
        st = path.stat()
    except OSError:
        raise _Invalid("vectors.npy is missing") from None
    want = meta.get("npy", {})
    if (st.st_ino, st.st_size, st.st_mtime_ns) != (want.get("inode"), want.get("size"), want.get("mtime_ns")):
        raise _Invalid("vectors.npy does not belong to manifest.json (interrupted save or replaced file)")
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        raise _Invalid("vectors.npy is corrupt") from None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape != (meta["count"], meta.get("dim")):
        raise _Invalid(f"vectors.npy has shape {matrix.shape} {matrix.dtype}, manifest says ({meta['count']}, {meta.get('dim')}) float32")
    if len(matrix):
        # A cheap sample, not a checksum: a checksum of 100k rows costs more than the query.
        # (rows picked without np.unique, whose first call imports numpy.ma: ~5 ms per command)
        rows = sorted({int(i) for i in np.linspace(0, len(matrix) - 1, num=min(len(matrix), 8))})
        sample = np.asarray(matrix[rows])
        with np.errstate(all="ignore"):
            norms = np.linalg.norm(sample.astype(np.float64), axis=1)
        if not np.all(np.isfinite(norms)) or not np.all((np.abs(norms - 1.0) < 1e-2) | (norms == 0)):
            raise _Invalid("vectors.npy is corrupt (rows are not unit vectors)")
    return matrix


def load(store: "Store", source: str, embedder: "Embedder", kind: str = "query") -> Vectors | None:
    """The cache as it is on disk, or None when it is missing or unusable (no rebuild)."""
    folder = folder_for(store, source, embedder, kind)
    try:
        meta = _read_manifest(folder)
        if meta is None:
            return None
        _check_identity(meta, embedder, kind)
        matrix = _open_vectors(folder, meta)
    except _Invalid:
        return None
    return Vectors(source, meta["ids"], _split(meta["hashes"]), matrix, int(meta["dim"]), 0, None, folder)


def current(store: "Store", source: str, embedder: "Embedder", kind: str, key: str | None) -> "np.ndarray | None":
    """The cached matrix (memory-mapped) when `sync` last recorded `key` for it, else None.

    One small JSON read and one stat: no row ids, no content hashes. The key is
    the caller's promise that the rows are unchanged (recall passes the recall
    index's generation, which changes with any change to that kind of document);
    the stamp of vectors.npy, the identity and the shape are checked as `load` does.
    """
    found = _current_record(store, source, embedder, kind, key)
    if found is None:
        return None
    try:
        return _open_vectors(*found)
    except (_Invalid, KeyError, TypeError):
        return None


def is_current(store: "Store", source: str, embedder: "Embedder", kind: str, key: str | None) -> bool:
    """Whether current() would find the matrix, told without numpy: the record and the stamp of
    vectors.npy (not the sampled rows). A caller that only needs to know asks this."""
    found = _current_record(store, source, embedder, kind, key)
    if found is None:
        return False
    folder, data = found
    try:
        st = (folder / "vectors.npy").stat()
    except OSError:
        return False
    want = data.get("npy") or {}
    return (st.st_ino, st.st_size, st.st_mtime_ns) == (want.get("inode"), want.get("size"), want.get("mtime_ns"))


def _current_record(store: "Store", source: str, embedder: "Embedder", kind: str,
                    key: str | None) -> tuple[Path, dict[str, Any]] | None:
    """(the cache's folder, what `sync` recorded as current) when that record is for `key` and this embedder."""
    if not key:
        return None
    folder = folder_for(store, source, embedder, kind)
    try:
        data = json.loads((folder / CURRENT).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    try:
        _check_identity(data, embedder, kind)
    except _Invalid:
        return None
    return folder, data


def missing(store: "Store", source: str, texts: Sequence[str], embedder: "Embedder", kind: str) -> int:
    """How many distinct texts `sync` would embed now for `texts`: those whose content hash the
    cache's manifest does not hold (all of them when there is no usable manifest). Reads the
    manifest only: no numpy, no lock (an estimate a moment old, for deciding who embeds)."""
    folder = folder_for(store, source, embedder, kind)
    try:
        meta = _read_manifest(folder)
        if meta is not None:
            _check_identity(meta, embedder, kind)
    except _Invalid:
        meta = None
    held = set(_split(meta["hashes"])) if meta is not None else set()
    return len({content_hash(t) for t in texts} - held)


def _record_current(folder: Path, meta: dict[str, Any], key: str) -> None:
    data = {name: meta.get(name) for name in ("format", "backend", "model", "fingerprint", "kind", "dim", "count", "npy")}
    data["key"] = key
    atomic_write(folder / CURRENT, json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")


def _split(hashes: str) -> list[str]:
    return [hashes[i : i + HASH_CHARS] for i in range(0, len(hashes), HASH_CHARS)]


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

    `key`, when given, names this state of `items` for `current` (recorded in current.json)."""
    import numpy as np

    folder = folder_for(store, source, embedder, kind)
    ids = [str(i) for i, _ in items]
    texts = [t for _, t in items]
    hashes = [content_hash(t) for t in texts]
    joined = "".join(hashes)
    with file_lock(folder.parent / f".{folder.name}.lock"):
        old, reason = _usable(folder, embedder, kind, rebuild)
        if reason and not quiet and reason != "rebuild requested":
            errors.warn(f"vector cache {store.rel(folder)}: {reason}; rebuilding it")
        if old is not None and old[0]["ids"] == ids and old[0]["hashes"] == joined:
            meta, matrix = old
            if key:
                _record_current(folder, meta, key)
            return Vectors(source, ids, hashes, matrix, int(meta["dim"]), 0, None, folder)
        if old is not None and not old[0]["count"]:
            old = None  # an empty cache has nothing to reuse (and no dimension yet)
        reuse: dict[str, int] = {}
        if old is not None:
            for row, digest in enumerate(_split(old[0]["hashes"])):
                reuse.setdefault(digest, row)
        todo: dict[str, str] = {}
        for digest, text in zip(hashes, texts):
            if digest not in reuse and digest not in todo:
                todo[digest] = text
        fresh = embed_texts(embedder, list(todo.values()), kind, quiet=quiet)
        dim = fresh.shape[1] if len(todo) else (int(old[0]["dim"]) if old is not None else 0)
        if old is not None and len(todo) and dim != int(old[0]["dim"]):
            # Same fingerprint, another dimension: the model changed under the same name.
            if not quiet:
                errors.warn(f"vector cache {store.rel(folder)}: dimension changed; rebuilding it")
            reuse, old = {}, None
            todo = dict(zip(hashes, texts))
            fresh = embed_texts(embedder, list(todo.values()), kind, quiet=quiet)
            dim = fresh.shape[1]
        matrix = np.empty((len(items), dim), dtype=np.float32)
        fresh_row = {digest: i for i, digest in enumerate(todo)}
        from_old = [(r, reuse[d]) for r, d in enumerate(hashes) if d in reuse]
        if from_old:
            dst, src = zip(*from_old)
            matrix[list(dst)] = old[1][list(src)]
        from_new = [(r, fresh_row[d]) for r, d in enumerate(hashes) if d not in reuse]
        if from_new:
            dst, src = zip(*from_new)
            matrix[list(dst)] = fresh[list(src)]
        previous_total = int(old[0].get("embedded_total", 0)) if old is not None else 0
        meta = {
            "format": FORMAT,
            "source": source,
            "backend": embedder.backend,
            "model": embedder.model,
            "fingerprint": embedder.fingerprint,
            "kind": kind,
            "dim": int(dim),
            "count": len(ids),
            "updated": clock.stamp(),
            "embedded_last": len(todo),
            "embedded_total": previous_total + len(todo),
            "rebuilt": reason,
            "ids": ids,
            "hashes": joined,
        }
        _save(folder, matrix, meta)
        if key:
            _record_current(folder, meta, key)
    return Vectors(source, ids, hashes, matrix, int(dim), len(todo), reason, folder)


def _usable(folder: Path, embedder: "Embedder", kind: str, rebuild: bool) -> tuple[tuple[dict, "np.ndarray"] | None, str | None]:
    """The old (manifest, vectors) when they can be reused, else (None, why not)."""
    if rebuild:
        return None, "rebuild requested"
    try:
        meta = _read_manifest(folder)
        if meta is None:
            return None, None
        _check_identity(meta, embedder, kind)
        return (meta, _open_vectors(folder, meta)), None
    except _Invalid as exc:
        return None, str(exc)


def embed_texts(embedder: "Embedder", texts: list[str], kind: str = "query", *, quiet: bool = False) -> "np.ndarray":
    import numpy as np

    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    # Embed in order of length: a batch of similar lengths wastes little on padding
    # (sentence-transformers sorts within one call only, and we call per chunk for
    # the progress bar). The rows go back to the caller's order afterwards.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    parts = []
    with _progress(len(texts), embedder, quiet=quiet) as advance:
        for start in range(0, len(texts), BATCH):
            chunk = [texts[i] for i in order[start : start + BATCH]]
            parts.append(np.asarray(embedder.embed(chunk, kind), dtype=np.float32))
            advance(len(chunk))
    out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    out[order] = np.concatenate(parts)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


@contextlib.contextmanager
def _progress(total: int, embedder: "Embedder", *, quiet: bool) -> Iterator[Callable[[int], None]]:
    if quiet or total <= PROGRESS_OVER:
        yield lambda n: None
        return
    from .embed import label

    errors.inform(f"embedding {total} texts with {label(embedder)}")
    with errors.progress(total, "embedding") as advance:
        yield advance


def _save(folder: Path, matrix: "np.ndarray", meta: dict[str, Any]) -> None:
    import io

    import numpy as np

    sweep_temps(folder)  # what a save killed half-way left behind
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
    atomic_write(folder / "vectors.npy", buffer.getbuffer())
    st = (folder / "vectors.npy").stat()
    # Vectors first, then the manifest naming their inode: an interrupted save
    # leaves a pair that does not match, which reads as "rebuild", never as wrong rows.
    meta["npy"] = {"inode": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    atomic_write(folder / "manifest.json", json.dumps(meta, ensure_ascii=False, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------- status and clearing


def entries(store: "Store") -> list[Entry]:
    base = root_dir(store)
    found: list[Entry] = []
    if not base.is_dir():
        return found
    for manifest in sorted(base.glob("*/*/manifest.json")):
        folder = manifest.parent
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        try:
            meta = _read_manifest(folder) or {}
            problem = None
            try:
                _open_vectors(folder, meta)
            except _Invalid as exc:
                problem = str(exc)
        except _Invalid as exc:
            meta, problem = {}, str(exc)
        found.append(
            Entry(
                source=str(meta.get("source", folder.parent.name)),
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


def clear(store: "Store", source: str | None = None) -> list[str]:
    """Delete cache folders (all, or one source's); return what was removed."""
    base = root_dir(store)
    if not base.is_dir():
        return []
    targets = [base / _slug(source.replace(":", "-"))] if source else sorted(p for p in base.iterdir() if p.is_dir())
    removed = []
    for target in targets:
        if target.is_dir():
            shutil.rmtree(target)
            removed.append(store.rel(target))
    return removed
