"""An adopted Claude Code memory directory: what Claude Code writes there itself.

Claude Code keeps writing its memory files (fact files at the top, lines it
appends to MEMORY.md) while memctl works in the same directory. memctl's next
write there, `doctor`, and the SessionStart hook first commit those changes
(files created, edited or deleted) as a commit of their own, authored
`claude-code`, before memctl's own change: so the history says who wrote what,
`doctor` stays clean and `remember --update` works. Only the top-level `*.md`
files of the memory directory are taken in: nothing outside it (a repository
above it, the user's other files) and nothing of memctl's own (its cache, the
sidecar, memctl.toml) ever is. MEMORY.md is taken in when all that changed
is its index lines (`- [Title](file.md) — hook`: appended, removed, edited);
any other edit there is a person's, and memctl's write refuses as before, rather
than commit their draft under another name. docs/CLAUDE_CODE.md describes it.
"""

from __future__ import annotations

import os
from pathlib import Path

AUTHOR = ("claude-code", "claude-code@localhost")
MESSAGE = "claude-code: its own writes in the memory directory, taken in"


def claude_code_writes(store) -> list[Path]:
    """The top-level markdown files of the memory directory that differ from HEAD (new, edited, deleted)."""
    from . import gitstore

    top = gitstore.toplevel(store.root)
    if top is None:
        return []
    memory = store.memory_dir.resolve()
    found = []
    for entry in gitstore.dirty_paths(store.root, [store.memory_dir]):
        path = Path(os.path.normpath(top / entry.strip('"')))
        if path.parent == memory and path.suffix == ".md" and not path.name.startswith("."):
            if path != store.index_path.resolve() or _only_index_lines_changed(store, path):
                found.append(path)
    return sorted(set(found))


def _only_index_lines_changed(store, path: Path) -> bool:
    """Whether MEMORY.md differs from HEAD only in its index lines (added, removed or edited)."""
    from . import gitstore

    before = gitstore.committed_text(store.root, path)
    try:
        now = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return before is not None and _prose(before) == _prose(now)


def _prose(text: str) -> list[str]:
    """MEMORY.md without its index lines and blank lines."""
    from . import index

    numbers = {line.lineno for line in index.parse_lines(text)}
    return [line for number, line in enumerate(text.split("\n"), start=1) if number not in numbers and line.strip()]


def take_in(store) -> str | None:
    """Commit Claude Code's own writes (see the module docstring); the commit id, or None when there were
    none or memctl commits nothing here. Call it holding the store lock, before the command's change."""
    from . import gitstore
    from .store import will_commit

    if store.layout != "claude" or will_commit(store) is None:
        return None
    paths = claude_code_writes(store)
    if not paths:
        return None
    return gitstore.commit(store.root, paths, MESSAGE, gitstore.Author(*AUTHOR))


def take_in_now(store) -> str | None:
    """take_in under the store lock, for commands that write nothing else (`doctor`, the SessionStart
    hook); an interrupted command's change is left for the next write (or `doctor --fix`) to settle."""
    from .errors import MemctlError
    from .fsutil import file_lock

    if store.layout != "claude":
        return None
    try:
        with file_lock(store.cache_dir / "lock"):
            return take_in(store)
    except (MemctlError, OSError):  # a read-only directory, git refusing: doctor names what stays uncommitted
        return None
