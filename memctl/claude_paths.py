"""Claude Code's name for a project's folder under ~/.claude/projects/, as Claude Code 2.1 makes it.

Its transcripts are kept under the working directory's name; its auto memory (`<name>/memory/`)
under the name of the project's git root (a worktree's: the main checkout's), so that every
folder and worktree of one repository shares one memory. The name: each UTF-16 code unit of the
absolute path that is not an ASCII letter or digit becomes `-` (an emoji, two units, `--`); a name
longer than 200 characters is cut to 200 and gets `-` and a base-36 hash of the whole path.
"""

from __future__ import annotations

import os

NAME_LIMIT = 200


def project_folder(path: str) -> str:
    """The folder name Claude Code gives the absolute `path`."""
    units = path.encode("utf-16-le", "surrogatepass")
    codes = [int.from_bytes(units[i:i + 2], "little") for i in range(0, len(units), 2)]
    name = "".join(chr(c) if c < 128 and chr(c).isalnum() else "-" for c in codes)
    if len(name) <= NAME_LIMIT:
        return name
    return f"{name[:NAME_LIMIT]}-{_base36(abs(_string_hash(codes)))}"


def _string_hash(codes: list[int]) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit integer."""
    value = 0
    for code in codes:
        value = (value * 31 + code) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


def auto_memory_dir(project: str, home: str | None = None) -> str:
    """Claude Code's auto-memory directory of the project at `project`: `projects/<its folder
    name>/memory` in CLAUDE_CONFIG_DIR, else in ~/.claude (`home`/.claude when given)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    base = os.path.expanduser(configured) if configured else os.path.join(home or os.path.expanduser("~"), ".claude")
    return os.path.join(base, "projects", project_folder(memory_root(project)), "memory")


def memory_root(path: str) -> str:
    """The folder whose name Claude Code gives a project's auto memory: the git root at or above
    `path` (for a linked worktree, the main checkout's), else `path` itself. Found without git: the
    first `.git` folder or file on the way up (a prompt hook cannot spend a git run on it)."""
    folder = path
    while True:
        dot = os.path.join(folder, ".git")
        if os.path.isdir(dot):
            return folder
        if os.path.isfile(dot):
            return _worktree_main(folder, dot)
        parent = os.path.dirname(folder)
        if parent == folder:
            return path
        folder = parent


def _worktree_main(folder: str, dot: str) -> str:
    """A `.git` file's checkout: a linked worktree's main checkout (its gitdir `<main>/.git/worktrees/<name>`),
    else the folder itself (a submodule is a repository of its own)."""
    try:
        with open(dot, encoding="utf-8", errors="replace") as handle:
            line = handle.readline().strip()
    except OSError:
        return folder
    if not line.startswith("gitdir:"):
        return folder
    gitdir = os.path.normpath(os.path.join(folder, line[len("gitdir:"):].strip()))
    parent, name = os.path.split(os.path.dirname(gitdir))
    if name == "worktrees" and os.path.basename(parent) == ".git":
        return os.path.dirname(parent)
    return folder
