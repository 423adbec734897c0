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
HookStoreOpt = Annotated[Optional[str], typer.Option("--store", help="The store to use when none is found from the hook input's cwd or CLAUDE_PROJECT_DIR (written by `agent install --store`).", metavar="DIR")]


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
    store: Annotated[Optional[str], typer.Option("--store", help="The store the hooks and the MCP server use when none is found from where Claude Code works (needed where no store can be found).", metavar="DIR")] = None,
    transcripts: Annotated[bool, typer.Option("--transcripts", help="Also a SessionEnd hook that imports the session's transcript as episodes (secrets redacted).")] = False,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Install the SessionStart and UserPromptSubmit hooks and the MCP server entry. Safe to re-run.

    Refused (exit 1, nothing written) where the hooks would find no store and no --store is given,
    and when the MCP server entry does not start and answer."""
    from ..integrations import claude_code

    _client(client)
    changes = claude_code.install(scope, project or Path.cwd(), root=_root(ctx), store=store, dry_run=dry_run,
                                  transcripts=transcripts)
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
    """What memctl installed for Claude Code, and whether each entry answers.

    Per scope, each hook and the MCP server entry, in which file; each is run once as Claude Code
    runs it (a hook through `sh -c` with a hook's JSON on stdin, the server asked initialize and
    tools/list) and says which store it reached. Exit 1 when one does not answer."""
    from ..integrations import claude_code

    rows = claude_code.status(project or Path.cwd())
    if json:
        output.emit_json(rows)
    else:
        output.emit_table(_status_table(rows), ["scope", "item", "installed", "answers", "store", "file", "command"])
    failing = [(row["scope"], entry) for row in rows for entry in row["entries"] if not entry["answers"]]
    for scope, entry in failing:
        output.warn(f"{scope} scope: {entry['item']} does not answer: {entry['error']}")
    for row in rows:
        for problem in row["problems"]:
            output.warn(f"{row['scope']} scope: {problem}")
    if failing or any(row["problems"] for row in rows):
        raise typer.Exit(1)


def _status_table(rows) -> list[dict]:
    from ..integrations import claude_code

    table = []
    for row in rows:
        items = [(f"{hook.event} hook", row["settings"]) for hook in claude_code.ALL_HOOKS] + [("MCP server", row["mcp_file"])]
        for item, file in items:
            entries = [e for e in row["entries"] if e["item"] == item]
            table.append({"scope": row["scope"], "item": item, "installed": "yes" if entries else "no",
                          "answers": ", ".join("yes" if e["answers"] else "no" for e in entries),
                          "store": ", ".join(e["store"] or "" for e in entries), "file": file,
                          "command": "; ".join(e["command"] for e in entries)})
    return table


@agent_app.command()
def snippet() -> None:
    """Print a CLAUDE.md section telling the agent when to remember, recall and record an episode."""
    from ..integrations import claude_code

    output.emit_text(claude_code.SNIPPET)


def _hook(ctx: typer.Context, event: str, store: str | None) -> None:
    from ..integrations import hooks

    raise typer.Exit(hooks.run(_root(ctx), event, store=store))


@hook_app.command("session-start")
def session_start(ctx: typer.Context, store: HookStoreOpt = None) -> None:
    """Read the SessionStart hook's JSON on stdin; print the session-start bundle (`memctl context`)."""
    _hook(ctx, "session-start", store)


@hook_app.command()
def prompt(ctx: typer.Context, store: HookStoreOpt = None) -> None:
    """Read the UserPromptSubmit hook's JSON on stdin; print the facts relevant to its prompt, if any."""
    _hook(ctx, "prompt", store)
