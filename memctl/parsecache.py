"""A derived cache of parsed fact files, so listing 1,000 facts skips YAML.

Kept in `.memctl/facts.json`, keyed by path with the file's inode, size and
mtime (atomic writes give every new version a new inode). A miss just parses
the file; a corrupt cache is ignored and rewritten. Deleting it loses nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from . import fact as fact_mod
from .fsutil import atomic_write

VERSION = 1


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


class FactCache:
    """Read once, look up per file, write back only when something changed."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[str, list] = {}
        self.dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == VERSION and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
        except (OSError, ValueError, AttributeError):
            self.entries = {}

    def load(self, path: Path, *, archived: bool, plain: bool = False) -> fact_mod.Fact:
        st = os.stat(path)
        key = str(path)
        stamp = [st.st_ino, st.st_size, st.st_mtime_ns, plain]  # (read as a topic file without frontmatter, or not)
        hit = self.entries.get(key)
        if hit is not None and hit[0] == stamp:
            return fact_mod.Fact(path.stem, hit[1], hit[2], archived, path)
        parsed = fact_mod.load(path, archived=archived, plain=plain)
        if _jsonable(parsed.front):
            self.entries[key] = [stamp, parsed.front, parsed.body]
            self.dirty = True
        return parsed

    def save(self, seen: set[str]) -> None:
        stale = set(self.entries) - seen
        for key in stale:
            del self.entries[key]
        if not (self.dirty or stale):
            return
        try:
            atomic_write(self.path, json.dumps({"version": VERSION, "entries": self.entries}, ensure_ascii=False))
        except OSError:
            pass  # a read-only store still works, just slower
