"""agent install|uninstall|status|snippet, and the hook commands Claude Code runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import BadInput
from .root import app

agent_app = typer.Typer(help="Connect agents to memctl: Claude Code hooks, the MCP server, CLAUDE.md.", no_args_is_help=True)
hook_app = typer.Typer(help="What Claude Code's hooks run (installed by `agent install`); always exit 0.", no_args_is_help=True)
app.add_typer(agent_app, name="agent")
app.add_typer(hook_app, name="hook")

CLIENTS = ("claude-code",)
ClientArg = Annotated[str, typer.Argument(help="The agent: claude-code.", metavar="CLIENT")]
ScopeOpt = Annotated[str, typer.Option("--scope", help="project (.claude/settings.json, .mcp.json) | local (.claude/settings.local.json, ~/.claude.json) | user (~/.claude/settings.json, ~/.claude.json).")]
ProjectOpt = Annotated[Optional[Path], typer.Option("--project", help="The project directory (default: the current one).", metavar="DIR")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the files as they would be written; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (for agents and scripts).")]


def _client(name: str) -> None:
    if name not in CLIENTS:
        raise BadInput(f"unknown agent {name!r}", hint="memctl agent install claude-code")


def _root(ctx: typer.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("root")


def _report(changes, *, scope: str, dry_run: bool, json: bool, nothing: str) -> None:
    from ..integrations import claude_code

    if json:
        output.emit_json({"scope": scope, "dry_run": dry_run, "changes": [c.to_dict() for c in changes]})
        return
    if not changes:
        output.info(nothing)
        return
    for change in changes:
        for line in change.what:
            output.info(f"{change.path}: {line}")
        if dry_run:
            content = "(removed)\n" if change.after is None else claude_code.render(change.after)
            output.emit_text(f"# {change.path}\n{content}")
        else:
            output.emit_text(str(change.path))
    if dry_run:
        output.info("dry run: nothing written")


@agent_app.command()
def install(
    ctx: typer.Context,
    client: ClientArg,
    scope: ScopeOpt = "project",
    project: ProjectOpt = None,
    transcripts: Annotated[bool, typer.Option("--transcripts", help="Also a SessionEnd hook that imports the session's transcript as episodes (secrets redacted).")] = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Install the SessionStart and UserPromptSubmit hooks and the MCP server entry. Safe to re-run."""
    from ..integrations import claude_code

    _client(client)
    changes = claude_code.install(scope, project or Path.cwd(), root=_root(ctx), dry_run=dry_run, transcripts=transcripts)
    _report(changes, scope=scope, dry_run=dry_run, json=json, nothing=f"already installed ({scope} scope); nothing changed")


@agent_app.command()
def uninstall(
    client: ClientArg,
    scope: ScopeOpt = "project",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Remove exactly the hooks and the MCP server entry that install added."""
    from ..integrations import claude_code

    _client(client)
    changes = claude_code.uninstall(scope, project or Path.cwd(), dry_run=dry_run)
    _report(changes, scope=scope, dry_run=dry_run, json=json, nothing=f"nothing of memctl's installed ({scope} scope)")


@agent_app.command()
def status(project: ProjectOpt = None, json: JsonOpt = False) -> None:
    """What memctl has installed for Claude Code, in which file, per scope."""
    from ..integrations import claude_code

    rows = claude_code.status(project or Path.cwd())
    if json:
        output.emit_json(rows)
        return
    table = []
    for row in rows:
        for hook in claude_code.ALL_HOOKS:
            commands = row["hooks"].get(hook.event, [])
            table.append({"scope": row["scope"], "item": f"{hook.event} hook", "installed": "yes" if commands else "no",
                          "file": row["settings"], "command": "; ".join(commands)})
        table.append({"scope": row["scope"], "item": "MCP server", "installed": "yes" if row["mcp"] else "no",
                      "file": row["mcp_file"], "command": row["mcp"] or ""})
        for problem in row["problems"]:
            output.warn(f"{row['scope']} scope: {problem}")
    output.emit_table(table, ["scope", "item", "installed", "file", "command"])


@agent_app.command()
def snippet() -> None:
    """Print a CLAUDE.md section telling the agent when to remember, recall and record an episode."""
    from ..integrations import claude_code

    output.emit_text(claude_code.SNIPPET)


def _hook(ctx: typer.Context, event: str) -> None:
    from ..integrations import hooks

    raise typer.Exit(hooks.run(_root(ctx), event))


@hook_app.command("session-start")
def session_start(ctx: typer.Context) -> None:
    """Print the session-start bundle (`memctl context`) for Claude Code's SessionStart hook."""
    _hook(ctx, "session-start")


@hook_app.command()
def prompt(ctx: typer.Context) -> None:
    """Read the UserPromptSubmit hook's JSON on stdin; print the facts relevant to its prompt, if any."""
    _hook(ctx, "prompt")
