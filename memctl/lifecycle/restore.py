"""`memctl restore NAME`: bring an archived fact back, byte for byte.

Archiving (forget, supersession, forgetting by policy) only ever adds keys at
the end of `metadata` and moves the file; restoring removes exactly those keys
and moves it back, so for any file in memctl's own layout the restored bytes
are the bytes that were archived. A compressed fact's short version is
replaced by the full one it points to (`full_text`).
"""

from __future__ import annotations

from .. import errors, fact as fact_mod, facts as facts_mod
from ..errors import NotFound, Refused
from ..fsutil import atomic_move, atomic_write, remove_logged
from ..store import Store, commit, refuse_uncommitted

ARCHIVE_KEYS = ("archived", "archived_reason", "archived_policy")
SUPERSEDED_KEYS = ("superseded_by", "valid_to")


def original_stem(archived_stem: str) -> str:
    """`x` for archive/x.md, archive/x.20261204T100000.md and archive/x.20261204T100000-2.md (facts._archive_path)."""
    return facts_mod._ARCHIVE_STAMP.sub("", archived_stem)


def _file_key(store: Store, key: str) -> str:
    """The stem an archived file's path names (`memory/archive/y.md`, `archive/y.md`, `y.md`): the one way
    to pick the version archived first, which has no time in its name, once a later one exists."""
    parts = key.split("/")
    memory = store.rel(store.memory_dir).split("/")
    if parts[:len(memory)] == memory:
        parts = parts[len(memory):]
    if parts[:1] == [store.archive_dir.name]:
        parts = parts[1:]
    if len(parts) != 1:
        facts_mod.find(store, key)  # raises the usual BadInput
    return parts[0][:-len(".md")]


def unarchived(fact: fact_mod.Fact, stem: str, path) -> fact_mod.Fact:
    """The fact as it was before archiving: the keys archiving added are removed."""
    keys = ARCHIVE_KEYS + (SUPERSEDED_KEYS if fact.meta("superseded_by") is not None else ())
    restored = fact.with_meta(**{key: None for key in keys})
    front = dict(restored.front)
    if front.get("metadata") == {} and isinstance(fact.front.get("metadata"), dict) and set(fact.front["metadata"]) <= set(keys):
        del front["metadata"]  # archiving created the mapping (Claude Code layout): drop it again
    return fact_mod.Fact(stem, front, restored.body, False, path)


def restore(store: Store, key: str, *, commit_changes: bool = True) -> facts_mod.Change:
    """Move the newest archived version of `key` back to memory/, without its archive marks; one commit.
    A key ending in `.md` names one archived file (`archive/y.md`), whichever version it is."""
    exact = key.endswith(".md")
    if exact:
        key = _file_key(store, key)
    if not key or "/" in key or "\x00" in key or key in (".", ".."):
        facts_mod.find(store, key)  # raises the usual BadInput
    with store.lock(commits=commit_changes):
        live = facts_mod.live_facts(store)
        target = facts_mod.newest_archived(facts_mod.scan_archive(store), key, exact=exact)
        if target is None:
            if facts_mod._match(live, key) is not None:
                raise Refused(f"fact {key!r} is live, not archived", hint="`memctl show` it")
            raise NotFound(f"no archived fact named {key!r}", hint="listing the facts with archived ones included shows them",
                           kind="no-archived-fact")
        assert target.path is not None
        stem = original_stem(target.stem)
        dest = store.memory_dir / f"{stem}.md"
        restored = unarchived(target, stem, dest)
        full_text = f"{store.archive_dir.name}/{target.path.name}"
        replacing = None
        for other in live:
            if other.stem != stem and not (restored.name and other.name == restored.name):
                continue
            if other.stem == stem and other.meta("compressed") and other.meta("full_text") == full_text:
                replacing = other  # the short version of this very fact
                continue
            raise Refused(
                f"cannot restore {store.rel(target.path)}: live fact {store.rel(other.path)} has the same name",
                hint="forget the live fact first (or remember it under another name, then forget it)",
            )
        facts_mod._refuse_case_twin(store, stem)  # `DEPLOY-MON` live beside a restored `deploy-mon`: one file on macOS
        if replacing is None and dest.exists():
            raise Refused(
                f"cannot restore {store.rel(target.path)}: {store.rel(dest)} exists (and could not be read as a fact)",
                hint="move that file away or fix it first (memctl doctor)",
            )
        refuse_uncommitted(store, [target.path] + ([dest] if replacing else []), commit_changes)
        facts_mod.refuse_hand_edited_index(store, commit_changes, live)
        if store.layout == "claude":  # only Claude Code's keys in its file; the rest is the sidecar's
            from ..claude_memory import write_restored

            written = write_restored(store, restored)
            remove_logged(target.path)
        else:
            atomic_write(target.path, fact_mod.render(restored))
            atomic_move(target.path, dest)
            written = [dest]
        index = facts_mod._write_index(store, [f for f in live if f is not replacing] + [restored])
        if restored.description:  # what `remember` refuses, restore (asked for by name) does and says
            twins = [h.fact for h in facts_mod.similar(restored.description, [f for f in live if f is not replacing]) if h.exact]
            if twins:
                errors.warn(f"{store.rel(dest)}: the same description as the live {store.rel(twins[0].path)}",
                            hint="forget one of the two, or let one supersede the other")
        sha = commit(store, [target.path, *written, *index], f"memory: restore {restored.name or stem}", enabled=commit_changes)
        return facts_mod.Change("restored", restored, archived=(target,), commit=sha)
