"""memctl: durable memory for AI agents, kept in plain files in a git repository.

    import memctl
    store = memctl.init_store("notes")          # or memctl.open_store("notes")
    memctl.remember(store, "deploy-window", "Deploys happen on Tuesdays", type="project")
    hits = memctl.search(store, "when do we deploy")      # `memctl recall`

The names below load on first use (`import memctl` stays cheap: the command
line imports this package too). docs/PYTHON.md shows each of them. `memctl recall`
and `memctl context` are `search` and `build_context` here: memctl.recall and
memctl.context name the modules that do the work.
"""

from __future__ import annotations

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first access)
_WHERE = {
    # stores
    "init_store": "api", "open_store": "api", "Store": "store",
    # facts
    "remember": "api", "show": "api", "list_facts": "api", "forget": "api", "used": "api",
    "Fact": "fact", "Change": "facts", "Similar": "facts",
    # recall and context
    "search": "api", "build_context": "api", "Hit": "recall", "Bundle": "context",
    # episodes and ledgers
    "add_episode": "api", "list_episodes": "api", "Episode": "episodes",
    "create_ledger": "api", "append": "api", "rows": "api", "Ledger": "ledger", "Row": "ledger", "Appended": "ledger",
    # near-duplicates
    "near_dup": "api", "NearDupReport": "neardup",
    # state
    "update_state": "api", "read_state": "api", "Snapshot": "state", "StateUpdate": "state",
    # errors: one hierarchy, with the CLI's exit code on each class
    "MemctlError": "errors", "BadInput": "errors", "NotFound": "errors", "Refused": "errors",
    "LockTimeout": "errors", "GitError": "errors", "OSFailure": "errors",
}
# where the public name differs from the module's own
_RENAMED = {"NearDupReport": "Report", "StateUpdate": "Updated"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'memctl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), _RENAMED.get(name, name))
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {"__version__"})
