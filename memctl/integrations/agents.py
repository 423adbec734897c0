"""`agent install|uninstall|status` for any agent: Claude Code (claude_code.py) or Codex, Gemini CLI, Cursor (hosts.py).

Several agents at once (`--all`) are planned one by one, every file read and checked before any
is written: a bad file of the last agent leaves the first untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def install(clients: list[str], scope: str, project: Path, *, root: str | None = None, store: str | None = None,
            dry_run: bool = False, transcripts: bool = False) -> list:
    """Plan every agent's install (a dry run each, so all checks pass first), then apply them."""
    from ..errors import NotFound
    from . import claude_code, hosts

    if not project.is_dir():  # (the MCP entry's check ran in it, and blamed the memctl program)
        raise NotFound(f"project directory does not exist: {project}", hint="give the project's folder, or run it there")
    planned = []
    for client in clients:
        if client == "claude-code":
            planned.append((claude_code.apply, claude_code.install(scope, project, root=root, store=store, dry_run=True,
                                                                   transcripts=transcripts)))
        else:
            planned.append((hosts.apply, hosts.install(client, scope, project, root=root, store=store, dry_run=True,
                                                       transcripts=transcripts)))
    if not dry_run:
        for apply, changes in planned:
            apply(changes)
    return [change for _, changes in planned for change in changes]


def uninstall(clients: list[str], scope: str, project: Path, *, dry_run: bool = False) -> list:
    from . import claude_code, hosts

    # --all with --scope local: Claude Code's alone has that scope
    scoped = [c for c in clients if len(clients) == 1 or scope in (claude_code.SCOPES if c == "claude-code" else hosts.SCOPES)]
    planned = [(claude_code.apply, claude_code.uninstall(scope, project, dry_run=True)) if client == "claude-code"
               else (hosts.apply, hosts.uninstall(client, scope, project, dry_run=True)) for client in scoped]
    if not dry_run:
        for apply, changes in planned:
            apply(changes)
    return [change for _, changes in planned for change in changes]


def project_caveats(clients: list[str], project: Path) -> list[str]:
    """What keeps each agent from using a project-scope install as it stands (hosts.project_caveats)."""
    from . import hosts

    claude = [CLAUDE_APPROVAL] if "claude-code" in clients else []
    return claude + [caveat for client in clients if client in hosts.HOST for caveat in hosts.project_caveats(client, project)]


def store_caveat(project: Path, store: str | None) -> str | None:
    """What to say when the store named with --store is not the one the hooks and the server will use
    from `project` (a store found there comes first: claude_code.locate); None when it is."""
    from ..errors import MemctlError
    from .claude_code import locate

    if not store:
        return None
    try:
        found = locate(None, cwd=project, store=store, env={})
        named = Path(store).expanduser().resolve()
    except (MemctlError, OSError):
        return None
    if found.found_by == "--store" or found.root.resolve() == named:
        return None
    return (f"--store {store} is where the hooks and the MCP server go when they find no store from where the agent "
            f"works; from {project} they find {found.root} and use it (memctl --root {store} agent install ... "
            "makes them always use the named store)")


def uncommitted_caveat(project: Path, root: str | None, store: str | None) -> str | None:
    """What to say when the store the hooks and the MCP server will use is no git repository while it
    commits (a Claude Code memory directory never `memctl init`-ed): every write there, the MCP
    `remember` tool's too, would be refused. None when it is one, or no store is found."""
    from .. import gitstore
    from ..errors import MemctlError
    from ..store import open_store
    from .claude_code import locate

    try:
        found = locate(root, cwd=project, store=store, env={})
        if gitstore.toplevel(found.root) is not None or not open_store(found.root).config.commit:
            return None
    except (MemctlError, OSError):
        return None
    return (f"the store {found.root} is not a git repository yet: the hooks read it, but every write there (the MCP "
            f"remember tool's too) is refused until `memctl init {found.root}` makes it one")


# Claude Code 2.1 asks once before it starts a server a project's .mcp.json declares
CLAUDE_APPROVAL = ("Claude Code asks you to approve the project's MCP server (.mcp.json) at its next start here; until then "
                   "`claude mcp list` shows memctl as pending approval (the local or user scope needs none)")


def status(client: str, project: Path) -> list[dict[str, Any]]:
    from . import claude_code, hosts

    return claude_code.status(project) if client == "claude-code" else hosts.status(client, project)


def hook_events(client: str) -> list[str]:
    """The hook events memctl may install for `client`, in order (what `agent status` lists)."""
    from . import claude_code, hosts

    hooks = claude_code.ALL_HOOKS if client == "claude-code" else hosts.HOST[client].hooks + (hosts.HOST[client].end_hook,)
    return [hook.event for hook in hooks]
