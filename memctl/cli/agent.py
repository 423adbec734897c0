"""agent install|uninstall|status|snippet, and the hook commands Claude Code runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import BadInput
from .root import app

agent_app = typer.Typer(help="Connect agents to memctl: Claude Code, Codex CLI, Gemini CLI, Cursor (hooks, the MCP server).",
                        no_args_is_help=True)
hook_app = typer.Typer(help="What the agents' hooks run (installed by `agent install`); always exit 0.", no_args_is_help=True)
app.add_typer(agent_app, name="agent")
app.add_typer(hook_app, name="hook")

CLIENTS = ("claude-code", "codex", "gemini", "cursor")
ClientArg = Annotated[Optional[str], typer.Argument(help="The agent: claude-code, codex, gemini or cursor.", metavar="[CLIENT]",
                                                    show_default=False)]
ScopeOpt = Annotated[str, typer.Option("--scope", help="project | user | local (Claude Code only); the files per agent are in docs/AGENTS.md "
                                                       "(Claude Code: .claude/settings.json and .mcp.json, ~/.claude.json for local and user).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every agent found on this machine (its config folder in HOME, or its program on PATH).")]
ProjectOpt = Annotated[Optional[Path], typer.Option("--project", help="The project directory (default: the current one).", metavar="DIR")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the files as they would be written; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (for agents and scripts).")]
HookStoreOpt = Annotated[Optional[str], typer.Option("--store", help="The store to use when none is found from the hook input's cwd or CLAUDE_PROJECT_DIR (written by `agent install --store`).", metavar="DIR")]


def _clients(name: str | None, every: bool) -> dict[str, str]:
    """The agents to act on, each with why: the one named, or with --all those found on this machine."""
    from ..integrations import hosts

    if every == (name is not None):
        raise BadInput("name one agent or give --all", hint="memctl agent install codex, or memctl agent install --all")
    if name is not None:
        if name not in CLIENTS:
            raise BadInput(f"unknown agent {name!r}", hint="claude-code, codex, gemini or cursor")
        return {name: "named"}
    found = hosts.found_on_machine()
    if not found:
        raise BadInput("no agent found on this machine (no ~/.claude, ~/.codex, ~/.gemini or ~/.cursor, and none of "
                       "claude, codex, gemini, cursor on PATH)", hint="name the agent: memctl agent install codex")
    return found


def _root(ctx: typer.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("root")


def _report(changes, *, scope: str, dry_run: bool, json: bool, nothing: str, found: dict[str, str] | None = None) -> None:
    from ..integrations import claude_code

    if json:
        shown = {"scope": scope, "dry_run": dry_run, "changes": [c.to_dict() for c in changes]}
        output.emit_json({**shown, "found": [f"{k}: {v}" for k, v in found.items()]} if found is not None else shown)
        return
    for client, why in (found or {}).items():
        output.info(f"found {client}: {why}")
    if not changes:
        output.info(nothing)
        return
    for change in changes:
        for line in change.what:
            output.info(f"{change.path}: {line}")
        if dry_run:
            content = ("(removed)\n" if change.after is None else change.after if isinstance(change.after, str)
                       else claude_code.render(change.after))
            output.emit_text(f"# {change.path}\n{content}")
        else:
            output.emit_text(str(change.path))
    if dry_run:
        output.info("dry run: nothing written")


@agent_app.command()
def install(
    ctx: typer.Context,
    client: ClientArg = None,
    scope: ScopeOpt = "project",
    project: ProjectOpt = None,
    store: Annotated[Optional[str], typer.Option("--store", help="The store the hooks and the MCP server use when none is found from where Claude Code works (needed where no store can be found).", metavar="DIR")] = None,
    transcripts: Annotated[bool, typer.Option("--transcripts", help="Also a session-end hook that imports the session's transcript as episodes (secrets redacted).")] = False,
    every: AllOpt = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Install the agent's session-start and per-prompt hooks and the MCP server entry, in its own files. Safe to re-run.

    Codex, Gemini CLI and Cursor get the read tools (recall, context, show, near_dup, state_show, get)
    approved where the agent allows it; the write tools keep its own approval (docs/AGENTS.md).
    Refused (exit 1, nothing written) where the hooks would find no store and no --store is given,
    and when the MCP server entry does not start and answer. With --all, every agent found here."""
    from ..integrations import agents

    found = _clients(client, every)
    changes = agents.install(list(found), scope, project or Path.cwd(), root=_root(ctx), store=store, dry_run=dry_run,
                             transcripts=transcripts)
    _report(changes, scope=scope, dry_run=dry_run, json=json, found=found if every else None,
            nothing=f"already installed ({scope} scope); nothing changed")
    if scope == "project":
        for caveat in agents.project_caveats(list(found), project or Path.cwd()):
            output.warn(caveat)
    if not _root(ctx) and (caveat := agents.store_caveat(project or Path.cwd(), store)):
        output.warn(caveat)
    if not dry_run and (caveat := agents.uncommitted_caveat(project or Path.cwd(), _root(ctx), store)):
        output.warn(caveat)


@agent_app.command()
def uninstall(
    client: ClientArg = None,
    scope: ScopeOpt = "project",
    project: ProjectOpt = None,
    every: Annotated[bool, typer.Option("--all", help="Every agent memctl knows.")] = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Remove exactly the hooks and the MCP server entry that install added; every file as it was before."""
    from ..integrations import agents

    clients = list(CLIENTS) if every and client is None else list(_clients(client, False))
    changes = agents.uninstall(clients, scope, project or Path.cwd(), dry_run=dry_run)
    _report(changes, scope=scope, dry_run=dry_run, json=json, nothing=f"nothing of memctl's installed ({scope} scope)")


@agent_app.command()
def status(client: ClientArg = None, project: ProjectOpt = None, json: JsonOpt = False) -> None:
    """What memctl installed for an agent (Claude Code unless named), and whether each entry answers.

    Per scope, each hook and the MCP server entry, in which file; each is run once as the agent
    runs it (a hook through `sh -c` with a hook's JSON on stdin, the server asked initialize and
    tools/list) and says which store it reached. Exit 1 when one does not answer."""
    from ..integrations import agents

    client = next(iter(_clients(client or "claude-code", False)))
    rows = agents.status(client, project or Path.cwd())
    if json:
        output.emit_json(rows)
    else:
        output.emit_table(_status_table(rows, agents.hook_events(client)), ["scope", "item", "installed", "answers", "store", "file", "command"])
    failing = [(row["scope"], entry) for row in rows for entry in row["entries"] if not entry["answers"]]
    for scope, entry in failing:
        output.warn(f"{scope} scope: {entry['item']} does not answer: {entry['error']}")
    for row in rows:
        for problem in row["problems"]:
            output.warn(f"{row['scope']} scope: {problem}")
    if failing or any(row["problems"] for row in rows):
        raise typer.Exit(1)


def _status_table(rows, events: list[str]) -> list[dict]:
    table = []
    for row in rows:
        items = [(f"{event} hook", row["settings"]) for event in events] + [("MCP server", row["mcp_file"])]
        for item, file in items:
            entries = [e for e in row["entries"] if e["item"] == item]
            listed = row["hooks"].get(item.removesuffix(" hook"), []) if not entries else []  # installed, not run
            table.append({"scope": row["scope"], "item": item, "installed": "yes" if entries or listed else "no",
                          "answers": ", ".join(["yes" if e["answers"] else "no" for e in entries] + ["not run"] * len(listed)),
                          "store": ", ".join(e["store"] or "" for e in entries), "file": file,
                          "command": "; ".join([e["command"] for e in entries] + listed)})
    return table


@agent_app.command()
def snippet(
    store: Annotated[Optional[str], typer.Option("--store", help="The store its CLI commands name (`memctl --root DIR ...`); "
                                                 "default: the one this project's `agent install --store` set up, if any.",
                                                 metavar="DIR")] = None,
) -> None:
    """Print a CLAUDE.md section telling the agent when to remember, recall and record an episode."""
    from ..integrations import claude_code

    output.emit_text(claude_code.snippet(store or claude_code.installed_store(Path.cwd())))


HostOpt = Annotated[Optional[str], typer.Option("--host", help="Whose hook: codex, gemini or cursor print the JSON that agent reads "
                                                                "(hookSpecificOutput.additionalContext; Cursor: additional_context); "
                                                                "Claude Code (default) plain text.", metavar="AGENT")]


def _hook(ctx: typer.Context, event: str, store: str | None, host: str | None) -> None:
    from ..integrations import hooks

    raise typer.Exit(hooks.run(_root(ctx), event, store=store, host=host))


@hook_app.command("session-start")
def session_start(ctx: typer.Context, store: HookStoreOpt = None, host: HostOpt = None) -> None:
    """Read the session-start hook's JSON on stdin; print the session-start bundle (`memctl context`)."""
    _hook(ctx, "session-start", store, host)


@hook_app.command()
def prompt(ctx: typer.Context, store: HookStoreOpt = None, host: HostOpt = None) -> None:
    """Read the per-prompt hook's JSON on stdin (UserPromptSubmit, Gemini's BeforeAgent); print the facts relevant to its prompt, if any."""
    _hook(ctx, "prompt", store, host)
