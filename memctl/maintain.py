"""Daily upkeep in one call: what the default `daily-maintenance` job runs (docs/JOBS.md).

Regenerate the MEMORY.md index, commit the access log (the rows reads left
pending, access.py), pack git's loose objects when they have grown large, then run every doctor check. Each step is an existing library call;
this module only strings them together so that a scheduled job needs no script.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import access as access_mod, doctor, facts, gitstore, ledger_ops
from .errors import NotFound
from .facts import Problem
from .store import Store, will_commit


@dataclass(frozen=True)
class Maintenance:
    index_changed: bool
    index_commit: str | None
    access: ledger_ops.Committed | None  # None: no access log, or commits are off
    problems: tuple[Problem, ...]
    packed: int = 0  # bytes of loose git objects packed (gitstore.pack_loose); 0 when left alone


def _commit_access(store: Store) -> ledger_ops.Committed | None:
    if store.layout == "claude" or will_commit(store) is None:
        return None  # a Claude Code directory's log is machine-local; pending rows wait for commits
    if not access_mod.path_for(store).is_file() and not access_mod.has_pending(store):
        return None
    try:
        return ledger_ops.commit_appended(store, access_mod.LEDGER)
    except NotFound:
        return None


def maintain(store: Store, *, commit_changes: bool = True) -> Maintenance:
    """Index, access log, doctor: in that order, so that doctor sees the regenerated index.
    With commits on, git that cannot commit refuses it all first (nothing is written)."""
    will_commit(store, commit_changes)
    changed, sha = facts.reindex(store, commit_changes=commit_changes)
    access = _commit_access(store) if commit_changes else None
    packed = gitstore.pack_loose(store.root) if commit_changes and will_commit(store) is not None else 0
    return Maintenance(changed, sha, access, tuple(doctor.run(store)), packed)
