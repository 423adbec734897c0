"""The Python API: `import memctl`, then these functions (docs/PYTHON.md).

Each is a thin call into the library modules the CLI uses, with the same checks
and the same files written; the commands of memctl/cli/ call these functions
(or, for options only the shell has, the library functions they are made of).
Paths are `str` or `os.PathLike`. Side effects beyond the change asked for are
arguments: `log=True` writes the access log, `commit=False` leaves the change
uncommitted. Errors are `memctl.MemctlError` subclasses whose messages name
arguments, never command-line flags.

Heavy modules (numpy, the embedders, GitPython) load only when a call needs them.
`memctl recall` is `search` here and `memctl context` is `build_context`:
memctl.recall and memctl.context are the modules that do that work.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from . import facts as _facts
from .fact import Fact
from .facts import Change, Similar
from .store import Store

log = logging.getLogger("memctl")


# ---------------------------------------------------------------- arguments

def _checked(fn):
    """Check the simple arguments by the function's annotations before any work: a wrong type is a
    BadInput naming the argument (it was a TypeError or AttributeError from deep inside), and one
    string given for a list of strings (`tags="ops"`) is that one string (it was split into letters)."""
    import functools
    import inspect

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        for name, value in list(bound.arguments.items()):
            bound.arguments[name] = _argument(name, value, signature.parameters[name].annotation)
        return fn(*bound.args, **bound.kwargs)

    return call


_SCALARS = {"str": (str,), "float": (int, float), "int": (int,), "bool": (bool,)}
_WORDS = {"str": "a string", "float": "a number", "int": "an integer", "bool": "True or False"}


def _argument(name: str, value: Any, annotation: str) -> Any:
    from .errors import BadInput

    if annotation == "Store":
        if not isinstance(value, Store):
            raise BadInput(f"{name} must be a store, not {type(value).__name__}", hint="memctl.open_store(path) gives one")
        return value
    optional = annotation.endswith(" | None")
    kind = annotation.removesuffix(" | None")
    if value is None and optional:
        return value
    if kind in _SCALARS:
        if isinstance(value, _SCALARS[kind]) and (kind == "bool" or not isinstance(value, bool)):
            return value
        if kind in ("int", "float") and not isinstance(value, bool) and hasattr(value, "__index__"):
            return value  # numpy's integers, say
        raise BadInput(f"{name} must be {_WORDS[kind]}{' or None' if optional else ''}, not {type(value).__name__}")
    if kind in ("Iterable[str]", "Sequence[str]"):
        items = (value,) if isinstance(value, str) else value
        try:
            items = tuple(items)
        except TypeError:
            items = None
        if items is None or not all(isinstance(item, str) for item in items):
            raise BadInput(f"{name} must be a list of strings (or one string), not {type(value).__name__}")
        return items
    return value


# ---------------------------------------------------------------- stores

def init_store(path: str | os.PathLike, *, git: bool = True) -> Store:
    """Create a store at `path` (or adopt a Claude Code memory directory) and open it; safe to re-run."""
    from . import store as store_mod

    store_mod.init_store(path, git=git)
    return store_mod.open_store(path)


def open_store(path: str | os.PathLike | None = None) -> Store:
    """The store at `path`; without one, MEMCTL_ROOT or the nearest parent of the current directory holding one."""
    from . import store as store_mod

    return store_mod.load_store(path)


# ---------------------------------------------------------------- facts

@_checked
def remember(
    store: Store,
    name: str,
    description: str | None = None,
    *,
    type: str | None = None,  # noqa: A002  (the frontmatter's word)
    body: str | None = None,
    why: str | None = None,
    how: str | None = None,
    importance: float | None = None,
    confidence: float | None = None,
    tags: Iterable[str] | None = None,
    source: str | None = None,
    expires: str | None = None,
    supersedes: Iterable[str] = (),
    pinned: bool | None = None,
    update: bool = False,
    force: bool = False,
    strict: bool = False,
    vector_check: bool = True,
    commit: bool = True,
    allow_secrets: bool = False,
) -> Change:
    """Write one fact and its MEMORY.md line, and commit them.

    The same checks as `memctl remember`: an exact duplicate description is
    refused unless `force`; near matches (keywords, and embeddings as
    `[facts] vector_check` in memctl.toml says, unless `vector_check=False`) are
    returned in `Change.similar` with their scores, and refused when `strict`.
    With `update`, fields left as None keep their value. A secret in the text
    (a key, a token, a password) is redacted with a warning unless `allow_secrets`.
    """
    from .neardup import remember_check

    spec = _facts.FactInput(
        name=name, description=description, type=type, body=body, why=why, how=how,
        importance=importance, confidence=confidence, tags=None if tags is None else tuple(tags),
        source=source, expires=expires, supersedes=tuple(supersedes), pinned=pinned,
    )
    check = remember_check(store) if vector_check else None
    return _facts.remember(store, spec, update=update, force=force, strict=strict, commit_changes=commit,
                           vector_check=check, allow_secrets=allow_secrets)


@_checked
def show(store: Store, name: str, *, log: bool = False) -> Fact:
    """One fact by name or file stem (live first, then archived); `log=True` records a use in the access log."""
    found = _facts.find(store, name)
    if log:
        from . import recall as recall_mod

        recall_mod.log_access(store, "show", [("", [found.name or found.stem])])  # a use: recall's frequency counts it
    return found


@_checked
def passage(store: Store, spec: str, *, log: str | None = None) -> tuple[Any, str, int, int, str]:
    """(source, shown path, start, end, text) of a document's lines `PATH:START-END`, or of the whole
    document for a `PATH` alone (docs/SOURCES.md); `log` ("show", "used:mcp") records a use of a passage,
    as recall keys it (one inside the store only; a whole document is no passage: not recorded)."""
    from . import sources

    found = sources.lines(store, spec)
    if log and sources.is_spec(spec):
        from . import recall as recall_mod

        recall_mod.log_access(store, log, [("", [sources.passage_key(found[1], found[2], found[3])])])
    return found


@_checked
def list_facts(store: Store, *, type: str | None = None, tag: str | None = None,  # noqa: A002
               archived: bool = False) -> list[Fact]:
    """Live facts (and archived ones with `archived=True`), by type then name."""
    return _facts.list_facts(store, fact_type=type, tag=tag, include_archived=archived)


@_checked
def forget(store: Store, name: str, reason: str, *, commit: bool = True, allow_secrets: bool = False) -> Change:
    """Move a fact to memory/archive/ with the reason (never deleted; a secret in it redacted), and commit."""
    return _facts.forget(store, name, reason, commit_changes=commit, allow_secrets=allow_secrets)


@_checked
def used(store: Store, names: Sequence[str], *, query: str = "") -> list[str]:
    """Record in the access log that facts or episodes were used; returns the keys recorded."""
    from . import recall as recall_mod

    return recall_mod.record_use(store, names, query=query)


# ---------------------------------------------------------------- recall

@_checked
def search(store: Store, query: str, *, k: int = 10, source: str = "facts", mode: str | None = None,
           type: str | None = None, tag: str | None = None, since: str | datetime | None = None,  # noqa: A002
           agent: str | None = None, include_all: bool = False, min_score: float | None = None,
           log: bool = False) -> list:
    """The hits (memctl.Hit) for one query, best first; [] when nothing reaches the relevance floor.

    `source` is facts, episodes or all; `mode` keyword, vector or hybrid (default
    from memctl.toml). `log=True` records the display in the access log, as the CLI does.
    """
    from . import recall as recall_mod

    corpus, (hits,) = recall_mod.recall(store, [query], k=k, source=source, mode=mode, fact_type=type, tag=tag,
                                         since=since, agent=agent, include_all=include_all, min_score=min_score,
                                         log=log)
    for note in corpus.notes:
        log_note(note)
    return hits


@_checked
def build_context(store: Store, query: str | None = None, *, budget: int = 4000, k: int = 5, mode: str | None = None,
            min_score: float | None = None, index: bool = True, log: bool = False):
    """The session-start bundle (memctl.Bundle: .text, .tokens, .included) within `budget` estimated tokens."""
    from . import context as context_mod

    return context_mod.build(store, query=query, budget=budget, k=k, mode=mode, min_score=min_score, log=log,
                             include_index=index)


# ---------------------------------------------------------------- episodes

@_checked
def add_episode(store: Store, description: str, type: str, *, agent: str | None = None,  # noqa: A002
                outcome: str = "", importance: float | None = None, tags: Sequence[str] = (),
                refs: Sequence[str] = (), commit: bool = True, allow_secrets: bool = False):
    """Append one episode (memctl.Episode) to ledgers/episodes.tsv; its id and time are generated.
    A secret in its text is redacted with a warning unless `allow_secrets`."""
    from . import episodes

    return episodes.add(store, description, type, agent=agent, outcome=outcome, importance=importance,
                        tags=tags, refs=refs, commit_changes=commit, allow_secrets=allow_secrets)


@_checked
def list_episodes(store: Store, *, agent: str | None = None, type: str | None = None,  # noqa: A002
                  since: str | datetime | None = None, tail: int | None = None) -> list:
    """Episodes in time order, filtered by agent, type and time; the last `tail` of them when given."""
    from . import episodes

    return episodes.list_episodes(store, agent=agent, episode_type=type, since=since, tail=tail)


# ---------------------------------------------------------------- ledgers

@_checked
def create_ledger(store: Store, name: str, columns: Sequence[str], *, unique: str | None = None,
                  commit: bool = True):
    """A new ledgers/<name>.tsv holding its header, declared in memctl.toml."""
    from . import ledger

    return ledger.create(store, name, columns, unique=unique, commit_changes=commit)


@_checked
def append(store: Store, ledger: str, records: Mapping[str, Any] | Sequence[Mapping[str, Any]], *,
           unique: str | None = None, commit: bool = True, allow_secrets: bool = False):
    """Append one record (a mapping) or several, in one write and one commit; memctl.Appended says how many.
    A secret in a value is redacted with a warning unless `allow_secrets`."""
    from . import ledger as ledger_mod

    batch = [records] if isinstance(records, Mapping) else list(records)
    return ledger_mod.append(store, ledger, batch, unique=unique, commit_changes=commit, allow_secrets=allow_secrets,
                             by_user=True)


@_checked
def rows(store: Store, ledger: str, *, where: Mapping[str, str] | None = None, since: str | datetime | None = None,
         tail: int | None = None) -> list:
    """Records (memctl.Row: .lineno, .values) equal to every `where` value, at or after `since`, the last `tail`."""
    from . import ledger as ledger_mod

    _, found = ledger_mod.select_rows(store, ledger, where=list((where or {}).items()), since=since, tail=tail)
    return found


@_checked
def near_dup(store: Store, texts: str | Sequence[str], *, ledger: str | None = None, column: str | None = None,
             facts: bool = False, top: int | None = None, threshold: float | None = None,
             similar: float | None = None, judge_cmd: str | None = None):
    """Whether each text nearly repeats a ledger column (or a live fact, `facts=True`: its `name: description`).

    Returns memctl.NearDupReport: `.duplicate`, `.verdict` ("new", "similar", "near-duplicate"),
    and `.checks` (one per text, each with `.best`, `.verdict`, `.duplicate` and `.hits`, a hit's
    `.judge` the judge's answer). `similar`: the band's lower edge instead of the model's;
    `judge_cmd`: a command that decides same/different (docs/EMBEDDINGS.md, "The judge").
    """
    from . import neardup

    batch = [texts] if isinstance(texts, str) else list(texts)
    found = neardup.source_for(store, ledger=ledger, column=column, facts=facts)
    report = neardup.check(store, batch, found, top=neardup.DEFAULT_TOP if top is None else top, threshold=threshold,
                           similar=similar, judge_cmd=judge_cmd)
    for note in report.notes:
        log_note(note)
    return report


# ---------------------------------------------------------------- state

@_checked
def update_state(store: Store, *, name: str | None = None, numbers: Mapping[str, Any] | None = None,
                 note: str | None = None, commit: bool = True, allow_secrets: bool = False):
    """Rewrite state/STATE.md (or state/<name>/STATE.md) from its summaries and `numbers`, and commit
    (a secret in the note redacted)."""
    from . import state

    return state.update(store, scope=state.check_scope(name), numbers=numbers, note=note, commit_changes=commit,
                        allow_secrets=allow_secrets)


@_checked
def read_state(store: Store, *, name: str | None = None):
    """The STATE.md snapshot (memctl.Snapshot: .updated, .numbers, .body); NotFound before the first update."""
    from . import state

    _, _, snapshot = state.show(store, state.check_scope(name))
    return snapshot


def log_note(note: str) -> None:
    """What the CLI prints as a warning (e.g. no embedding model: keyword only) goes to the `memctl` logger."""
    log.warning(note)


__all__ = [
    "init_store", "open_store", "remember", "show", "list_facts", "forget", "used", "search", "build_context",
    "add_episode", "list_episodes", "create_ledger", "append", "rows", "near_dup", "update_state", "read_state",
    "Store", "Fact", "Change", "Similar",
]
