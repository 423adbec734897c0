"""Claude Code: its settings files, the hooks and MCP entry memctl puts there, its memory directory.

`agent install claude-code` is plan, then apply: `plan_install` reads the JSON
files of a scope and returns each changed file's new content (plain data, what
--dry-run shows); `apply` writes them atomically. What memctl added is
recognised by its command line (a `memctl` executable, an optional --root, then
the arguments of one row of HOOKS) and by the server name "memctl" under
mcpServers, so `uninstall` removes exactly that and keeps every other key,
hook and server. docs/AGENTS.md describes the result.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from ..errors import BadInput, Refused

SCOPES = ("project", "local", "user")
SERVER_NAME = "memctl"
AGENT_NAME = "claude-code"  # MEMCTL_AGENT for what the hooks and the MCP server record


class Hook(NamedTuple):
    event: str  # Claude Code's hook event
    matcher: str | None  # None: the event takes no matcher
    args: tuple[str, ...]  # memctl's arguments after the executable (and --root DIR)
    timeout: int  # seconds before Claude Code cancels the command


# The hooks memctl installs, one row each. The commands are stable CLI entry
# points, so the settings files never change when memctl's internals do.
HOOKS = (
    Hook("SessionStart", "startup|resume|clear|compact", ("hook", "session-start"), 30),
    Hook("UserPromptSubmit", None, ("hook", "prompt"), 10),
)
# Opt-in (`agent install claude-code --transcripts`): the session's transcript becomes episodes,
# secrets redacted (docs/TRANSCRIPTS.md). Uninstall and status know it either way.
TRANSCRIPT_HOOK = Hook("SessionEnd", None, ("episode", "import", "claude-code", "--hook"), 60)
ALL_HOOKS = HOOKS + (TRANSCRIPT_HOOK,)


# ---------------------------------------------------------------- where things are

def claude_dir(home: Path | None = None) -> Path:
    """~/.claude, or CLAUDE_CONFIG_DIR when set (Claude Code honours it too)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else (home or Path.home()) / ".claude"


def claude_json(home: Path | None = None) -> Path:
    """The file where Claude Code keeps local- and user-scope MCP servers."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() / ".claude.json" if configured else (home or Path.home()) / ".claude.json"


def project_key(project: Path) -> str:
    """A project's folder name under ~/.claude/projects/, as Claude Code makes it (claude_paths)."""
    from ..claude_paths import project_folder

    return project_folder(str(project))


def project_memory_dir(project: Path, home: Path | None = None) -> Path:
    """Claude Code's auto-memory directory of a project: ~/.claude/projects/<key>/memory, the key of
    the project's git root (a worktree's main checkout), or of the folder itself outside git."""
    from ..claude_paths import auto_memory_dir

    return Path(auto_memory_dir(str(project), None if home is None else str(home)))


class Found(NamedTuple):
    root: Path  # the store's directory
    found_by: str  # what led to it: --root, MEMCTL_ROOT, cwd, CLAUDE_PROJECT_DIR or --store


def locate(root: str | os.PathLike | None = None, *, cwd: str | os.PathLike | None = None,
           store: str | os.PathLike | None = None, env: Mapping[str, str] = os.environ) -> Found:
    """The store a hook or `memctl mcp` works on, the first of (docs/AGENTS.md, "Which store"):
    `root` (--root), else MEMCTL_ROOT: exactly that directory; the store found from `cwd` (the hook
    input's, else the working directory), then from CLAUDE_PROJECT_DIR (Claude Code sets it): that
    folder's Claude Code memory directory when it holds MEMORY.md or memctl.toml, else the nearest
    store at or above it; `store`, the one named at install. NotFound when none is there."""
    from ..errors import NotFound
    from ..store import find_root

    if root or env.get("MEMCTL_ROOT"):
        return Found(find_root(root or env["MEMCTL_ROOT"]), "--root" if root else "MEMCTL_ROOT")
    places = {"cwd": str(cwd or _working_directory()), "CLAUDE_PROJECT_DIR": env.get("CLAUDE_PROJECT_DIR") or ""}
    for found_by, place in places.items():
        found = place and _store_from(place)
        if found:
            return Found(found, found_by)
    if store:
        path = Path(store).expanduser()
        if not path.is_dir():
            raise NotFound(f"the store named at install does not exist: {path}", kind="installed-store-gone")
        return Found(path.resolve(), "--store")
    searched = " or ".join(dict.fromkeys(p for p in places.values() if p)) or "the working directory (removed)"
    raise NotFound(f"no memctl store found from {searched} (at or above, or in the Claude Code memory directory)",
                   hint="name the store at install", kind="no-store-found")


def _working_directory() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed while Claude Code was in it: the other places remain
        return ""


def _store_from(place: str) -> Path | None:
    from ..early import nearest_store
    from ..store import claude_code_store

    real = os.path.realpath(os.path.expanduser(place))
    found = claude_code_store(place) or nearest_store(real)
    return None if found is None else Path(found)


def resolve_root(root: str | os.PathLike | None = None) -> Path:
    """The store `memctl mcp` serves (see `locate`)."""
    return locate(root).root


# NamedTuples, not dataclasses: the prompt hook imports this module on every prompt (see config.py).
class Target(NamedTuple):
    scope: str
    settings: Path  # where the hooks go
    mcp_file: Path  # where the MCP server entry goes
    mcp_keys: tuple[str, ...]  # the path of the mcpServers object inside mcp_file


def target(scope: str, project: Path, home: Path | None = None) -> Target:
    if scope not in SCOPES:
        raise BadInput(f"unknown scope {scope!r}", hint="project, local or user")
    project = project.resolve()
    if scope == "project":
        return Target(scope, project / ".claude" / "settings.json", project / ".mcp.json", ("mcpServers",))
    if scope == "local":
        return Target(scope, project / ".claude" / "settings.local.json", claude_json(home),
                      ("projects", str(project), "mcpServers"))
    return Target(scope, claude_dir(home) / "settings.json", claude_json(home), ("mcpServers",))


# ---------------------------------------------------------------- the commands installed

def memctl_executable() -> list[str]:
    """memctl as an absolute path (or this Python with -m memctl).

    Claude Code runs hooks through `sh -c` with the user's PATH, which often
    lacks the virtual environment memctl lives in; an absolute path works from
    any PATH, and `agent status` says when it no longer exists.
    """
    import shutil

    beside = Path(sys.executable).parent / "memctl"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("memctl")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "memctl"]


def hook_command(executable: list[str], root: str | None, hook: Hook, store: str | None = None) -> str:
    """The command line of a hook, quoted for `sh -c` (spaces, quotes, any script in the paths)."""
    return shlex.join([*executable, *(["--root", root] if root else []), *hook.args, *(["--store", store] if store else [])])


def server_entry(executable: list[str], root: str | None, store: str | None = None) -> dict[str, Any]:
    return {
        "type": "stdio", "command": executable[0],
        "args": [*executable[1:], "mcp", *(["--root", root] if root else []), *(["--store", store] if store else [])],
        "env": {"MEMCTL_AGENT": AGENT_NAME},
    }


def memctl_args(command: str) -> list[str] | None:
    """The arguments after `memctl [--root DIR]`, without a trailing `--store DIR`, when `command` runs
    memctl, else None."""
    words = _words(command)
    if words is None:
        return None
    if words and os.path.basename(words[0]) == "memctl":
        rest = words[1:]
    elif len(words) >= 3 and words[1:3] == ["-m", "memctl"] and "python" in os.path.basename(words[0]):
        rest = words[3:]
    else:
        return None
    if rest[:1] == ["--root"] and len(rest) >= 2:
        rest = rest[2:]
    elif rest and rest[0].startswith("--root="):
        rest = rest[1:]
    if len(rest) >= 2 and rest[-2] == "--store":
        rest = rest[:-2]
    elif rest and rest[-1].startswith("--store="):
        rest = rest[:-1]
    return rest


def _words(command: str) -> list[str] | None:
    """A command line's words without an environment prefix (`MEMCTL_HOOK_TIMEOUT=8 memctl ...`, `env
    A=1 memctl ...`), which is the user's; None when the shell would not split it."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] == ["env"]:
        words = words[1:]
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return words


_PREFIX = re.compile(r"""\s*(?:env\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'"])*\s+)*""")


def _prefix(command: str) -> str:
    """The environment prefix a person put before a memctl command line (`MEMCTL_HOOK_TIMEOUT=8 `,
    `env A=1 `), as written; "" when there is none."""
    return _PREFIX.match(command).group(0) if _words(command) is not None else ""


def _essence(command: str) -> tuple[str, ...]:
    """What of a memctl command line is memctl's to keep right: the program and its `--root`/`--store`."""
    words = _words(command)
    if words is None:
        return (command,)
    program = words[:3] if words[1:3] == ["-m", "memctl"] else words[:1]
    stores = [f"{w}={words[i + 1]}" for i, w in enumerate(words[:-1]) if w in ("--root", "--store")]
    return (*program, *stores, *(w for w in words if w.startswith(("--root=", "--store="))))


def _is_ours(entry: Any, hook: Hook) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("command"), str) and memctl_args(entry["command"]) == list(hook.args)


# ---------------------------------------------------------------- reading the files

def refuse_link(path: Path) -> None:
    """A settings file that is a symbolic link (a dotfiles repository's, say) is not written: replaced
    whole, as every write here is, it would become a plain file and the link would be gone."""
    if path.is_symlink():
        raise BadInput(f"{path}: is a symbolic link; memctl does not write through links",
                       hint="install into the file it points to by hand, or replace the link by a file; nothing was written")


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`; None when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read ({exc})", hint="fix the file by hand; nothing was written") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if _has_comments(text):  # Gemini CLI and Cursor read JSON with comments; Python's writer drops them
            raise BadInput(f"{path}: has comments (// or /* */), which memctl cannot keep when it writes the file",
                           hint="move them out (or remove them), then install again; nothing was written") from None
        raise BadInput(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})",
                       hint="fix the file by hand; nothing was written") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not a JSON object (it holds a {type(data).__name__})",
                       hint="Claude Code's settings files are one JSON object; nothing was written")
    return data


def _has_comments(text: str) -> bool:
    """True when `text` is valid JSON once its `//` and `/* */` comments (outside strings) are taken out."""
    import re

    token = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
    stripped = token.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)
    if stripped == text:
        return False
    try:
        json.loads(stripped)
    except json.JSONDecodeError:
        return False
    return True


def _table(doc: dict[str, Any], key: str, path: Path, kind: type, create: bool) -> Any:
    value = doc.get(key)
    if value is None:
        if not create:
            return None
        value = doc[key] = kind()
    if not isinstance(value, kind):
        raise BadInput(f"{path}: {key!r} is not a JSON {'object' if kind is dict else 'array'}",
                       hint="fix the file by hand; nothing was written")
    return value


# ---------------------------------------------------------------- plans

class FileChange(NamedTuple):
    path: Path
    before: dict[str, Any] | None  # None: the file does not exist yet
    after: dict[str, Any] | None  # None: the file is removed (it held only what memctl added)
    what: tuple[str, ...]  # one line per change, for people

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "action": _action(self), "changes": list(self.what), "content": self.after}


def _action(change: FileChange) -> str:
    return "create" if change.before is None else "remove" if change.after is None else "update"


def _without_hooks(doc: dict[str, Any], path: Path, hooks: tuple[Hook, ...]) -> list[str]:
    """Remove memctl's entries for `hooks` from a settings document (in place); what was removed."""
    table = _table(doc, "hooks", path, dict, create=False)
    if table is None:
        return []
    removed = []
    for hook in hooks:
        groups = _table(table, hook.event, path, list, create=False)
        if groups is None:
            continue
        kept = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list) or not any(_is_ours(e, hook) for e in entries):
                kept.append(group)
                continue
            removed += [f"- {hook.event} hook: {e['command']}" for e in entries if _is_ours(e, hook)]
            rest = [e for e in entries if not _is_ours(e, hook)]
            if rest:
                kept.append({**group, "hooks": rest})
        if kept != groups:
            if kept:
                table[hook.event] = kept
            else:
                del table[hook.event]
    if removed and not table:
        del doc["hooks"]
    return removed


def _group(hook: Hook, command: str) -> dict[str, Any]:
    group: dict[str, Any] = {} if hook.matcher is None else {"matcher": hook.matcher}
    group["hooks"] = [{"type": "command", "command": command, "timeout": hook.timeout}]
    return group


def _with_hooks(doc: dict[str, Any], path: Path, commands: list[tuple[Hook, str]]) -> list[str]:
    added = []
    for hook, command in commands:
        table = _table(doc, "hooks", path, dict, create=True)
        groups = _table(table, hook.event, path, list, create=True)
        wanted = _group(hook, command)
        ours = [g for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                and any(_is_ours(e, hook) for e in g["hooks"])]
        if ours == [wanted]:
            continue  # installed exactly so already
        entries = [e for g in ours for e in g["hooks"] if _is_ours(e, hook)]
        if len(entries) == 1:  # installed, then edited by its user (a timeout, an env prefix, its group): kept so
            if _essence(entries[0]["command"]) != _essence(command):  # another program or store: that part is ours
                entries[0]["command"] = _prefix(entries[0]["command"]) + command  # (your environment prefix stays)
                added.append(f"~ {hook.event} hook: {command}")
            continue
        _without_hooks(doc, path, (hook,))
        table = _table(doc, "hooks", path, dict, create=True)
        _table(table, hook.event, path, list, create=True).append(wanted)
        added.append(f"+ {hook.event} hook: {command}")
    return added


def _servers(doc: dict[str, Any], path: Path, keys: tuple[str, ...], create: bool) -> dict[str, Any] | None:
    node = doc
    for key in keys:
        node = _table(node, key, path, dict, create)
        if node is None:
            return None
    return node


def _server_is_ours(entry: Any) -> bool:
    """Whether an MCP server entry runs `memctl mcp` (any memctl: another path, --root, --store)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return False
    return (memctl_args(shlex.join([entry["command"], *args])) or [None])[0] == "mcp"


def put_server(servers: dict[str, Any], entry: dict[str, Any], path: Path) -> list[str]:
    """memctl's server entry into `servers`; the change, in words (none: it is there already). Refused
    when the name is taken by a server that is not memctl's: it is the user's, never replaced."""
    old = servers.get(SERVER_NAME)
    if old == entry:
        return []
    if old is not None and not _server_is_ours(old):
        raise Refused(f"{path} already has an MCP server named {SERVER_NAME!r} that is not memctl's; nothing was written",
                      hint=f"rename or remove that entry in {path.name}, then install again")
    servers[SERVER_NAME] = entry
    return [f"{'+' if old is None else '~'} MCP server {SERVER_NAME!r}: {shlex.join([entry['command'], *entry['args']])}"]


def drop_server(doc: dict[str, Any], path: Path, keys: tuple[str, ...]) -> list[str]:
    """memctl's server entry out of `doc` (a server of that name that is not memctl's stays); the change, in words."""
    servers = _servers(doc, path, keys, create=False)
    if servers is None or not _server_is_ours(servers.get(SERVER_NAME)):
        return []
    del servers[SERVER_NAME]
    _prune(doc, keys)
    return [f"- MCP server {SERVER_NAME!r}"]


def _prune(doc: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Drop the containers on `keys` that are left empty, innermost first (never `doc` itself): an empty
    one goes when it is at the top or its parent holds nothing else (Claude Code keeps an empty
    `mcpServers` in each project entry of ~/.claude.json: that one stays, as it was before install)."""
    for depth in range(len(keys), 0, -1):
        parent = doc
        for key in keys[: depth - 1]:
            parent = parent[key]
        innermost = depth == len(keys)
        if parent.get(keys[depth - 1]) == {} and (not innermost or depth == 1 or len(parent) == 1):
            del parent[keys[depth - 1]]
        else:
            break


def _change(path: Path, before: dict[str, Any] | None, after: dict[str, Any], what: list[str],
            removable: bool) -> FileChange | None:
    if not what:
        return None
    return FileChange(path, before, None if removable and after == {} else after, tuple(what))


def plan_install(tgt: Target, executable: list[str], root: str | None,
                 hooks: tuple[Hook, ...] = HOOKS, store: str | None = None) -> list[FileChange]:
    """The files an install changes, with their new content; empty when all is installed already."""
    changes = []
    for path in (tgt.settings, tgt.mcp_file):
        refuse_link(path)
    before = read_json(tgt.settings)
    after = copy.deepcopy(before or {})
    what = _with_hooks(after, tgt.settings, [(h, hook_command(executable, root, h, store)) for h in hooks])
    mcp_before = read_json(tgt.mcp_file)
    mcp_after = copy.deepcopy(mcp_before or {})
    servers = _servers(mcp_after, tgt.mcp_file, tgt.mcp_keys, create=True)
    mcp_what = put_server(servers, server_entry(executable, root, store), tgt.mcp_file)
    changes.append(_change(tgt.settings, before, after, what, removable=False))
    changes.append(_change(tgt.mcp_file, mcp_before, mcp_after, mcp_what, removable=False))
    return [c for c in changes if c is not None]


def plan_uninstall(tgt: Target, hooks: tuple[Hook, ...] = ALL_HOOKS) -> list[FileChange]:
    """The files an uninstall changes: memctl's hooks and server entry out, nothing else touched."""
    changes = []
    for path in (tgt.settings, tgt.mcp_file):
        refuse_link(path)
    before = read_json(tgt.settings)
    if before is not None:
        after = copy.deepcopy(before)
        changes.append(_change(tgt.settings, before, after, _without_hooks(after, tgt.settings, hooks), removable=True))
    mcp_before = read_json(tgt.mcp_file)
    if mcp_before is not None:
        mcp_after = copy.deepcopy(mcp_before)
        what = drop_server(mcp_after, tgt.mcp_file, tgt.mcp_keys)
        # A file left empty is one install created (Claude Code's own ~/.claude.json never is): removed.
        changes.append(_change(tgt.mcp_file, mcp_before, mcp_after, what, removable=True))
    return [c for c in changes if c is not None]


def render(doc: dict[str, Any], like: str | None = None) -> str:
    """`doc` as JSON in the style of the text it replaces (`like`): its indent (spaces or tabs, or none),
    its final newline, its escapes, so an uninstall gives back the user's bytes. Without one: two
    spaces and a newline."""
    if not like:
        return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    import re

    body = like.strip()
    indent = re.search(r"^[{\[]\r?\n([ \t]+)\S", body)
    ascii_only = "\\u" in like and like.isascii()
    if indent:
        text = json.dumps(doc, ensure_ascii=ascii_only, indent=indent.group(1))
    else:  # one line
        separators = (", ", ": ") if re.search(r"[:,] ", body) or len(doc) == 0 else (",", ":")
        text = json.dumps(doc, ensure_ascii=ascii_only, separators=separators)
    if "\r\n" in like:
        text = text.replace("\n", "\r\n")
    return text + like[len(like.rstrip()):]


def apply(changes: list[FileChange]) -> None:
    """Write (or remove) each planned file atomically, in the style of the file it replaces. A folder
    left empty by a removed file (.claude/, created by install) goes too."""
    from ..fsutil import atomic_write

    for change in changes:
        if change.after is None:
            change.path.unlink(missing_ok=True)
            if change.path.parent.name == ".claude":
                try:
                    change.path.parent.rmdir()
                except OSError:  # not empty: the user's
                    pass
        else:
            try:
                like = change.path.read_bytes().decode("utf-8") if change.before is not None else None
            except (OSError, UnicodeDecodeError):
                like = None
            atomic_write(change.path, render(change.after, like))


def install(scope: str, project: Path, *, root: str | None = None, store: str | None = None, dry_run: bool = False,
            home: Path | None = None, transcripts: bool = False) -> list[FileChange]:
    """`agent install claude-code`: plan, and apply unless dry_run; every file is read before any is written.

    `root` goes into every command (always that store); `store` is the one they fall back to when
    none is found from where Claude Code works (`locate`). Without either, a store must be found
    from `project` the way the hooks will look for it. A new or changed MCP server entry must start
    and answer. Otherwise nothing is written. `transcripts` adds the SessionEnd hook that imports
    the session's transcript as episodes; without it an installed transcript hook is left as it is
    (uninstall removes it)."""
    from ..errors import BadInput
    from ..store import load_store

    if root and store:
        raise BadInput("give root or store, not both", kind="root-or-store")
    tgt = target(scope, project, home)
    project = project.resolve()
    root = str(load_store(root).root) if root else None  # a store that exists, as an absolute path
    store = _named_store(store) if store else None
    executable = memctl_executable()
    changes = plan_install(tgt, executable, root, HOOKS + ((TRANSCRIPT_HOOK,) if transcripts else ()), store)
    if not (root or store):
        _refuse_without_a_store(project)
    if any(change.path == tgt.mcp_file for change in changes):
        _refuse_a_server_that_does_not_answer(server_entry(executable, root, store), project)
    if not dry_run:
        apply(changes)
    return changes


def _named_store(path: str) -> str:
    """The store named at install, as an absolute path; NotFound unless it is one."""
    from ..errors import NotFound
    from ..store import open_store

    given = Path(path).expanduser()
    if not given.is_dir():
        raise NotFound(f"store directory does not exist: {given}", kind="no-store-named")
    return str(open_store(given).root)


def _refuse_without_a_store(project: Path) -> None:
    """Refused when the hooks, run by Claude Code in `project` (as cwd and CLAUDE_PROJECT_DIR), would find no store."""
    from ..errors import NotFound, Refused

    try:
        locate(cwd=project, env={"CLAUDE_PROJECT_DIR": str(project)})  # MEMCTL_ROOT here is not Claude Code's
    except NotFound as exc:
        import shlex

        raise Refused(f"{exc.message}; the hooks would add nothing, so nothing was written",
                      hint="name the store", kind="install-no-store",
                      memory=shlex.quote(str(project_memory_dir(project)))) from None


def _refuse_a_server_that_does_not_answer(entry: dict[str, Any], project: Path) -> None:
    """Refused when the MCP server entry, started as Claude Code starts it, does not answer."""
    import re

    from . import probe

    checked = probe.server(entry, project)
    if not checked.answers:
        message, hint = re.fullmatch(r"(?:memctl: error: )?(.*?)(?: \(hint: (.*)\))?", checked.error or "").groups()
        raise Refused(f"the MCP server entry does not start: {message}; nothing was written", hint=hint)


def uninstall(scope: str, project: Path, *, dry_run: bool = False, home: Path | None = None) -> list[FileChange]:
    changes = plan_uninstall(target(scope, project, home))
    if not dry_run:
        apply(changes)
    return changes


# ---------------------------------------------------------------- status

def status(project: Path, home: Path | None = None) -> list[dict[str, Any]]:
    """Per scope: which of memctl's hooks and which MCP entry are installed, and where; and each one,
    run once as Claude Code runs it (integrations/probe.py), whether it reaches a store and answers."""
    from . import probe

    project = project.resolve()
    rows = []
    for scope in SCOPES:
        tgt = target(scope, project, home)
        row: dict[str, Any] = {"scope": scope, "settings": str(tgt.settings), "mcp_file": str(tgt.mcp_file),
                               "hooks": {}, "mcp": None, "entries": [], "problems": []}
        server = None
        try:
            doc = read_json(tgt.settings) or {}
            table = doc.get("hooks") if isinstance(doc.get("hooks"), dict) else {}
            for hook in ALL_HOOKS:
                groups = table.get(hook.event) if isinstance(table.get(hook.event), list) else []
                found = [e["command"] for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                         for e in g["hooks"] if _is_ours(e, hook)]
                if found:
                    row["hooks"][hook.event] = found
                row["entries"] += [{"item": f"{hook.event} hook", "command": command,
                                    **probe.hook(command, hook.event, project, hook.timeout)._asdict()} for command in found]
        except BadInput as exc:
            row["problems"].append(exc.message)
        try:
            servers = _servers(read_json(tgt.mcp_file) or {}, tgt.mcp_file, tgt.mcp_keys, create=False)
            server = (servers or {}).get(SERVER_NAME)
        except BadInput as exc:
            row["problems"].append(exc.message)
        if isinstance(server, dict):
            row["mcp"] = shlex.join([str(server.get("command", "")), *map(str, server.get("args") or [])])
            row["entries"].append({"item": "MCP server", "command": row["mcp"], **probe.server(server, project)._asdict()})
        for command in [*(c for cs in row["hooks"].values() for c in cs), *([row["mcp"]] if row["mcp"] else [])]:
            program = shlex.split(command)[0]
            if os.path.isabs(program) and not os.access(program, os.X_OK):
                row["problems"].append(f"{program} does not exist (re-run `memctl agent install claude-code`)")
        row["problems"] = list(dict.fromkeys(row["problems"]))
        rows.append(row)
    return rows


def installed_store(project: Path, home: Path | None = None) -> str | None:
    """The store this project's Claude Code install serves (`--store DIR` or `--root DIR` of memctl's MCP
    entry in the project's .mcp.json), or None: for a CLI run in the project, which finds no store there
    (the hint names it) and for `agent snippet` (its commands name it). Only the project scope: the
    local and user scopes live in ~/.claude.json, often megabytes, which a hook's error must not parse."""
    for scope in ("project",):
        try:
            tgt = target(scope, project, home)
            server = (_servers(read_json(tgt.mcp_file) or {}, tgt.mcp_file, tgt.mcp_keys, create=False) or {}).get(SERVER_NAME)
        except (BadInput, OSError):
            continue
        args = [str(a) for a in (server or {}).get("args") or []] if isinstance(server, dict) else []
        for flag in ("--store", "--root"):
            if flag in args[:-1]:
                return args[args.index(flag) + 1]
    return None


# ---------------------------------------------------------------- CLAUDE.md

SNIPPET = """\
## Memory (memctl)
Durable memory lives in a memctl store{where} (plain files in git). The hooks show relevant facts
at session start and before each prompt; use the `memctl` MCP tools (or the CLI) for the rest.
- Before work that past decisions may affect: `recall` (MCP) / `{memctl} recall "QUERY" --json`.
- When the user states a preference or rule, or you learn something that stays true:
  `remember` / `{memctl} remember NAME --type feedback|user|project|reference --description "..."
  --why "..." --how "..."`. A near-duplicate warning means: update or supersede that fact instead.
- After a decision, a mistake or a success worth keeping: `episode_add` /
  `{memctl} episode add "WHAT" --type decision|error|success|feedback --outcome "..."`.
- A fact that is no longer true: `forget` / `{memctl} forget NAME --reason "..."` (it is archived).
- Never edit MEMORY.md's generated block by hand; memctl rewrites it.
"""


def snippet(store: str | None = None) -> str:
    """The CLAUDE.md section; with `store` (a store outside the project), its CLI commands name it."""
    if not store:
        return SNIPPET.format(where="", memctl="memctl")
    return SNIPPET.format(where=f" at {store}", memctl=shlex.join(["memctl", "--root", store]))
