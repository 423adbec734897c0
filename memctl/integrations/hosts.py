"""Codex CLI, Gemini CLI and Cursor: the MCP server entry and the hooks memctl puts in their config files.

`agent install codex|gemini|cursor` is plan, then apply, as for Claude Code (claude_code.py, whose
JSON reading, rendering and hook groups it shares): `plan_install` reads every file of a scope and
returns each changed file's new text; `apply` writes them atomically. What each host gets
(docs/AGENTS.md has the files and the reasons):

- Codex: `[mcp_servers.memctl]` in config.toml, each read tool `approval_mode = "approve"` (its
  write tools keep Codex's approval policy), in a marked block (codex_toml.py); hooks.json in
  Claude Code's shape (SessionStart, UserPromptSubmit, SessionEnd), JSON output.
- Gemini CLI: `mcpServers.memctl` in settings.json, the read tools allowed by a policy file of
  memctl's own (policies/memctl.toml; not `trust`, which would approve every write too); hooks
  SessionStart, BeforeAgent, SessionEnd (timeouts in milliseconds), JSON output.
- Cursor: `mcpServers.memctl` in mcp.json (approval is Cursor's own setting, not in a file);
  hooks.json (version 1) sessionStart and sessionEnd: its prompt hook cannot add context.

memctl's entries are recognised as for Claude Code: by their command line and the server name.
Uninstall removes exactly them and gives every file back byte for byte, removing the files and
folders install created.
"""

from __future__ import annotations

import copy
import os
import shlex
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import BadInput
from . import claude_code, codex_toml
from .claude_code import SERVER_NAME, Hook

HOSTS = ("codex", "gemini", "cursor")
SCOPES = ("project", "user")
# memctl's MCP tools that only read the store (an access-log row aside): these run without a prompt;
# the others (remember, forget, episode_add, ledger_append) follow the host's own approval.
READ_TOOLS = ("recall", "context", "show", "near_dup", "state_show", "get")


def session_end_args(host: str) -> tuple[str, ...]:
    """The session-end hook's memctl arguments: import the session whose `transcript_path` the hook's
    input names (`memctl episode import HOST --hook`: never fails the session; docs/TRANSCRIPTS.md)."""
    return ("episode", "import", host, "--hook")


def _hooks(host: str, session_start: str, prompt: str | None, end: str, ms: int) -> tuple[tuple[Hook, ...], Hook]:
    start = Hook(session_start, None, ("hook", "session-start", "--host", host), 30 * ms)
    asked = () if prompt is None else (Hook(prompt, None, ("hook", "prompt", "--host", host), 10 * ms),)
    return (start, *asked), Hook(end, None, session_end_args(host), 60 * ms)


class Host(NamedTuple):
    name: str
    folder: str  # the config folder, in the project and in HOME
    binaries: tuple[str, ...]  # on PATH: the host is installed
    hooks: tuple[Hook, ...]  # session start, and the prompt hook where its output reaches the model
    end_hook: Hook  # session end: transcripts (with --transcripts)


HOST = {
    "codex": Host("codex", ".codex", ("codex",), *_hooks("codex", "SessionStart", "UserPromptSubmit", "SessionEnd", 1)),
    "gemini": Host("gemini", ".gemini", ("gemini",), *_hooks("gemini", "SessionStart", "BeforeAgent", "SessionEnd", 1000)),
    "cursor": Host("cursor", ".cursor", ("cursor", "cursor-agent"), *_hooks("cursor", "sessionStart", None, "sessionEnd", 1)),
}


def host(name: str) -> Host:
    if name not in HOST:
        raise BadInput(f"unknown agent {name!r}", hint="claude-code, codex, gemini or cursor")
    return HOST[name]


def home_folder(spec: Host, home: Path | None = None) -> Path:
    """~/.codex (CODEX_HOME when set, as Codex does), ~/.gemini, ~/.cursor."""
    if spec.name == "codex" and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]).expanduser()
    return (home or Path.home()) / spec.folder


class Target(NamedTuple):
    scope: str
    mcp_file: Path
    hooks_file: Path
    policy_file: Path | None = None  # Gemini CLI's policy file of memctl's (its read tools allowed)


def target(spec: Host, scope: str, project: Path, home: Path | None = None) -> Target:
    if scope not in SCOPES:
        raise BadInput(f"unknown scope {scope!r} for {spec.name}", hint="project or user")
    folder = project.resolve() / spec.folder if scope == "project" else home_folder(spec, home)
    if spec.name == "codex":
        return Target(scope, folder / "config.toml", folder / "hooks.json")
    if spec.name == "gemini":
        return Target(scope, folder / "settings.json", folder / "settings.json", folder / "policies" / "memctl.toml")
    return Target(scope, folder / "mcp.json", folder / "hooks.json")


def found_on_machine(home: Path | None = None) -> dict[str, str]:
    """The hosts installed here, each with what showed it (its config folder, or its program on PATH)."""
    found = {}
    if claude_code.claude_dir(home).is_dir():
        found["claude-code"] = str(claude_code.claude_dir(home))
    elif shutil.which("claude"):
        found["claude-code"] = shutil.which("claude")
    for spec in HOST.values():
        folder = home_folder(spec, home)
        program = next((shutil.which(b) for b in spec.binaries if shutil.which(b)), None)
        if folder.is_dir() or program:
            found[spec.name] = str(folder) if folder.is_dir() else program
    return found


# ---------------------------------------------------------------- reading

def read_text(path: Path) -> str | None:
    """A config file's text; None when it does not exist. A symbolic link, or a file that cannot be
    read as UTF-8, is bad input: memctl writes only files it can replace whole."""
    claude_code.refuse_link(path)
    try:
        with open(path, encoding="utf-8", newline="") as handle:  # CRLF kept: what is written keeps it too
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read ({exc})", hint="fix the file by hand; nothing was written") from None


def _json(path: Path, text: str | None) -> dict[str, Any] | None:
    return None if text is None else claude_code.read_json(path)


# ---------------------------------------------------------------- plans

class Change(NamedTuple):
    path: Path
    before: str | None  # the file's text; None: it does not exist yet
    after: str | None  # its new text; None: removed (it held only what memctl added)
    what: tuple[str, ...]  # one line per change, for people
    content: Any  # what --json shows: the JSON document, or the TOML text

    def to_dict(self) -> dict[str, Any]:
        action = "create" if self.before is None else "remove" if self.after is None else "update"
        return {"path": str(self.path), "action": action, "changes": list(self.what), "content": self.content}


def server_entry(spec: Host, executable: list[str], root: str | None, store: str | None) -> dict[str, Any]:
    entry = claude_code.server_entry(executable, root, store)
    entry["env"] = {"MEMCTL_AGENT": spec.name}
    del entry["type"]  # stdio is what a `command` means to all three
    return entry


class _Files:
    """The scope's files as read once (a file that is both, Gemini's settings.json, is one document)."""

    def __init__(self, tgt: Target):
        self.text = {p: read_text(p) for p in dict.fromkeys([tgt.mcp_file, tgt.hooks_file])}
        self.docs = {p: _json(p, t) for p, t in self.text.items() if p.suffix == ".json"}
        self.new = {p: copy.deepcopy(d or {}) for p, d in self.docs.items()}
        self.what: dict[Path, list[str]] = {p: [] for p in self.text}

    def changes(self, removable: bool) -> list[Change]:
        out = []
        for path, what in self.what.items():
            if not what:
                continue
            if path in self.docs:
                doc = self.new[path]
                gone = removable and (doc == {} or (path.name == "hooks.json" and doc == {"version": 1}))
                after = None if gone else claude_code.render(doc, self.text[path])
                out.append(Change(path, self.text[path], after, tuple(what), None if gone else doc))
            else:
                out.append(Change(path, self.text[path], self.new[path], tuple(what), self.new[path]))
        return out


def plan_install(spec: Host, tgt: Target, executable: list[str], root: str | None, store: str | None,
                 transcripts: bool = False) -> list[Change]:
    """The files an install changes, with their new text; empty when all is installed already."""
    files = _Files(tgt)
    entry = server_entry(spec, executable, root, store)
    if spec.name == "codex":
        text = files.text[tgt.mcp_file]
        new = codex_toml.with_block(text, {"name": SERVER_NAME, **entry}, READ_TOOLS, tgt.mcp_file)
        files.new[tgt.mcp_file] = new
        if new != text:
            files.what[tgt.mcp_file].append(f"+ MCP server {SERVER_NAME!r}: {shlex.join([entry['command'], *entry['args']])}"
                                            f" (read tools approved: {', '.join(READ_TOOLS)})")
    else:
        servers = claude_code._servers(files.new[tgt.mcp_file], tgt.mcp_file, ("mcpServers",), create=True)
        files.what[tgt.mcp_file] += claude_code.put_server(servers, entry, tgt.mcp_file)
    commands = [(h, claude_code.hook_command(executable, root, h, store)) for h in spec.hooks]
    if transcripts:  # as Claude Code's transcript hook: the store from the input's cwd, else --store
        commands.append((spec.end_hook, claude_code.hook_command(executable, root, spec.end_hook, store)))
    return _finish(spec, tgt, files, commands, install=True)


def plan_uninstall(spec: Host, tgt: Target) -> list[Change]:
    """The files an uninstall changes: memctl's hooks, server entry and allowed tools out, nothing else."""
    files = _Files(tgt)
    hooks = spec.hooks + (spec.end_hook,)
    if spec.name == "codex":
        text = files.text[tgt.mcp_file]
        if text is not None:
            files.new[tgt.mcp_file], removed = codex_toml.without_block(text, tgt.mcp_file, SERVER_NAME)
            if removed:
                files.what[tgt.mcp_file].append(f"- MCP server {SERVER_NAME!r}")
    elif files.docs[tgt.mcp_file] is not None:
        files.what[tgt.mcp_file] += claude_code.drop_server(files.new[tgt.mcp_file], tgt.mcp_file, ("mcpServers",))
    return _finish(spec, tgt, files, hooks, install=False)


def _finish(spec: Host, tgt: Target, files: _Files, hooks: Any, install: bool) -> list[Change]:
    """The hooks edited in (`hooks`: (Hook, command) pairs) or out (Hooks), the policy file, the changes."""
    if install or files.docs[tgt.hooks_file] is not None:
        edit = {(True, True): _cursor_with_hooks, (True, False): _cursor_without_hooks,
                (False, True): claude_code._with_hooks, (False, False): claude_code._without_hooks}
        files.what[tgt.hooks_file] += edit[spec.name == "cursor", install](files.new[tgt.hooks_file], tgt.hooks_file, hooks)
    policy = _policy(tgt.policy_file, install) if tgt.policy_file else None
    return files.changes(removable=not install) + ([policy] if policy else [])


# Gemini CLI: the read tools allowed by a policy file of memctl's own (its policy engine; `trust: true`
# on the server would approve the write tools too, and settings' `tools.allowed` is deprecated).

POLICY_MARK = "# memctl: written by `memctl agent install gemini`; `memctl agent uninstall gemini` removes this file"


def gemini_policy() -> str:
    tools = ", ".join(f'"mcp_{SERVER_NAME}_{tool}"' for tool in READ_TOOLS)  # the names Gemini CLI gives them
    return (f"{POLICY_MARK}\n# memctl's read tools run without a prompt; its write tools ask as Gemini CLI does.\n"
            f'[[rule]]\nmcpName = "{SERVER_NAME}"\ntoolName = [{tools}]\ndecision = "allow"\npriority = 100\n')


def _policy(path: Path, install: bool) -> Change | None:
    from ..errors import Refused

    text = read_text(path)
    if text is not None and not text.startswith(POLICY_MARK):
        if not install:
            return None
        raise Refused(f"{path} exists and memctl did not write it; nothing was written",
                      hint="remove or rename it, then install again")
    if install:
        wanted = gemini_policy()
        return None if text == wanted else Change(path, text, wanted, (f"+ policy: allow {', '.join(READ_TOOLS)}",), wanted)
    return None if text is None else Change(path, text, None, ("- policy (file removed)",), None)


# Cursor's hooks.json: {"version": 1, "hooks": {"sessionStart": [{"command": ..., "timeout": ...}]}}.

def _cursor_with_hooks(doc: dict[str, Any], path: Path, commands: list[tuple[Hook, str]]) -> list[str]:
    added = []
    if not doc:
        doc["version"] = 1  # the file's format version, which Cursor requires
    for hook, command in commands:
        wanted = {"command": command, "timeout": hook.timeout}
        entries = claude_code._table(claude_code._table(doc, "hooks", path, dict, create=True), hook.event, path, list, create=True)
        if [e for e in entries if claude_code._is_ours(e, hook)] == [wanted]:
            continue
        _cursor_without_hooks(doc, path, (hook,))
        claude_code._table(claude_code._table(doc, "hooks", path, dict, create=True), hook.event, path, list, create=True).append(wanted)
        added.append(f"+ {hook.event} hook: {command}")
    return added


def _cursor_without_hooks(doc: dict[str, Any], path: Path, hooks: tuple[Hook, ...]) -> list[str]:
    table = claude_code._table(doc, "hooks", path, dict, create=False)
    removed = []
    for hook in hooks if table is not None else ():
        entries = claude_code._table(table, hook.event, path, list, create=False)
        ours = [e for e in entries or [] if claude_code._is_ours(e, hook)]
        if ours:
            removed += [f"- {hook.event} hook: {e['command']}" for e in ours]
            entries[:] = [e for e in entries if not claude_code._is_ours(e, hook)]
            if not entries:
                del table[hook.event]
    if removed and not table:
        del doc["hooks"]
    return removed


# ---------------------------------------------------------------- apply, install, uninstall

def apply(changes: list[Change]) -> None:
    """Write (or remove) each planned file atomically; a host folder left empty by a removed file goes too."""
    from ..fsutil import atomic_write

    for change in changes:
        if change.after is None:
            change.path.unlink(missing_ok=True)
            for folder in (change.path.parent, change.path.parent.parent):
                if folder.name in {"policies", *(spec.folder for spec in HOST.values())}:
                    try:
                        folder.rmdir()
                    except OSError:  # not empty: the user's
                        break
        else:
            atomic_write(change.path, change.after)


_ANSWERED: set[tuple[str, ...]] = set()


def install(name: str, scope: str, project: Path, *, root: str | None = None, store: str | None = None,
            dry_run: bool = False, home: Path | None = None, transcripts: bool = False) -> list[Change]:
    """`agent install HOST`: as claude_code.install (the same checks: a store the hooks will find, an MCP
    entry that starts and answers), into the host's own files."""
    from ..store import load_store

    spec = host(name)
    if root and store:
        raise BadInput("give root or store, not both", kind="root-or-store")
    tgt = target(spec, scope, project, home)
    project = project.resolve()
    root = str(load_store(root).root) if root else None
    store = claude_code._named_store(store) if store else None
    executable = claude_code.memctl_executable()
    changes = plan_install(spec, tgt, executable, root, store, transcripts)
    if not (root or store):
        claude_code._refuse_without_a_store(project)
    entry = server_entry(spec, executable, root, store)
    started = (entry["command"], *entry["args"], str(project))  # MEMCTL_AGENT aside, the same for every host
    if any(line.startswith("+ MCP server") for change in changes for line in change.what) and started not in _ANSWERED:
        claude_code._refuse_a_server_that_does_not_answer(entry, project)
        _ANSWERED.add(started)  # `install --all`: one start for all the hosts
    if not dry_run:
        apply(changes)
    return changes


def uninstall(name: str, scope: str, project: Path, *, dry_run: bool = False, home: Path | None = None) -> list[Change]:
    spec = host(name)
    changes = plan_uninstall(spec, target(spec, scope, project, home))
    if not dry_run:
        apply(changes)
    return changes


# ---------------------------------------------------------------- status

# The hook input each host's event resembles, for probe.hook (which speaks Claude Code's events).
_PROBE_EVENT = {"SessionStart": "SessionStart", "sessionStart": "SessionStart", "UserPromptSubmit": "UserPromptSubmit",
                "BeforeAgent": "UserPromptSubmit"}


def status(name: str, project: Path, home: Path | None = None) -> list[dict[str, Any]]:
    """Per scope, as claude_code.status: memctl's hooks and server entry in the host's files, each
    session-start and prompt hook and the server run once (the session-end hook is listed, not run)."""
    from . import probe

    spec = host(name)
    project = project.resolve()
    rows = []
    for scope in SCOPES:
        tgt = target(spec, scope, project, home)
        row: dict[str, Any] = {"scope": scope, "settings": str(tgt.hooks_file), "mcp_file": str(tgt.mcp_file),
                               "hooks": {}, "mcp": None, "entries": [], "problems": []}
        try:
            row["hooks"] = _installed_hooks(spec, tgt)
            server = _installed_server(spec, tgt)
        except BadInput as exc:
            row["problems"].append(exc.message)
            server = None
        for hook in spec.hooks:
            for command in row["hooks"].get(hook.event, []):
                checked = probe.hook(command, _PROBE_EVENT[hook.event], project, hook.timeout / (1000 if name == "gemini" else 1))
                row["entries"].append({"item": f"{hook.event} hook", "command": command, **checked._asdict()})
        if server is not None:
            row["mcp"] = shlex.join([str(server.get("command", "")), *map(str, server.get("args") or [])])
            row["entries"].append({"item": "MCP server", "command": row["mcp"], **probe.server(server, project)._asdict()})
        if name == "codex" and scope == "project" and (row["hooks"] or server is not None):
            row["problems"] += project_caveats(name, project, home)  # answers, but Codex does not start it
        rows.append(row)
    return rows


def project_caveats(name: str, project: Path, home: Path | None = None) -> list[str]:
    """What keeps the agent from using a project-scope install as it stands (found with Codex 0.171 and
    Gemini CLI 0.61); none for the user scope, or for Claude Code and Cursor."""
    if name == "codex" and not _codex_trusts(project, home):
        config = home_folder(HOST["codex"], home) / "config.toml"
        return [f"Codex reads {project.resolve() / '.codex'} only in a project it trusts, and {config} does not trust "
                f"{project.resolve()}: trust it when Codex asks on its first start there, or install with --scope user"]
    if name == "gemini":
        return ["Gemini CLI (0.61) does not load a project's policy files, so it asks before each of memctl's read tools "
                "here; for them to run without asking, install with --scope user"]
    return []


def _codex_trusts(project: Path, home: Path | None) -> bool:
    """Whether ~/.codex/config.toml has `[projects."<dir>"] trust_level = "trusted"` for the project or a folder holding it."""
    import tomllib  # noqa: PLC0415

    text = read_text(home_folder(HOST["codex"], home) / "config.toml")
    try:
        projects = tomllib.loads(text or "").get("projects")
    except tomllib.TOMLDecodeError:
        return False
    if not isinstance(projects, dict):
        return False
    folder = project.resolve()
    return any(isinstance(projects.get(str(p)), dict) and projects[str(p)].get("trust_level") == "trusted"
               for p in (folder, *folder.parents))


def _installed_hooks(spec: Host, tgt: Target) -> dict[str, list[str]]:
    doc = _json(tgt.hooks_file, read_text(tgt.hooks_file)) or {}
    table = doc.get("hooks") if isinstance(doc.get("hooks"), dict) else {}
    found = {}
    for hook in spec.hooks + (spec.end_hook,):
        groups = table.get(hook.event) if isinstance(table.get(hook.event), list) else []
        entries = groups if spec.name == "cursor" else [
            e for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list) for e in g["hooks"]]
        commands = [e["command"] for e in entries if claude_code._is_ours(e, hook)]
        if commands:
            found[hook.event] = commands
    return found


def _installed_server(spec: Host, tgt: Target) -> dict[str, Any] | None:
    text = read_text(tgt.mcp_file)
    if text is None:
        return None
    if spec.name == "codex":
        return codex_toml.server(text, tgt.mcp_file, SERVER_NAME)
    servers = (claude_code.read_json(tgt.mcp_file) or {}).get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None
