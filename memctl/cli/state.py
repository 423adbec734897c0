"""state commands: update, show, history, check. Registers the `state` group on the root app."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output, state
from ..errors import FAILED, BadInput
from ..store import commit_enabled
from .root import app
from .common import AllowSecretsOpt, JsonOpt, NoCommitOpt, read_file_arg, store_from

state_app = typer.Typer(
    help="STATE.md snapshots: how things stand now, regenerated and committed by a scheduled job.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(state_app, name="state")

ScopeOpt = Annotated[
    Optional[str],
    typer.Option("--name", help="Scope: state/SCOPE/STATE.md (default: state/STATE.md).", metavar="SCOPE"),
]


def _read_json(source: str) -> dict:
    data, label = read_file_arg(source, "--from-json")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{label}: not valid UTF-8", hint="send it as UTF-8") from None
    return state.parse_numbers_json(text, label)


@state_app.command("update")
def update(
    ctx: typer.Context,
    name: ScopeOpt = None,
    from_json: Annotated[Optional[str], typer.Option("--from-json", help="A JSON object of numbers from elsewhere (a task tracker, ...); '-' reads stdin.", metavar="FILE|-")] = None,
    note: Annotated[Optional[str], typer.Option("--note", help="A short note shown in its own section.")] = None,
    no_commit: NoCommitOpt = False,
    allow_secrets: AllowSecretsOpt = False,
    json: JsonOpt = False,
) -> None:
    """Regenerate STATE.md from the [state] summaries (and --from-json), write it and commit it."""
    store = store_from(ctx, committing=not no_commit)
    numbers = _read_json(from_json) if from_json is not None else None
    done = state.update(store, scope=name, numbers=numbers, note=note, commit_changes=not no_commit,
                        allow_secrets=allow_secrets)
    rel = store.rel(done.path)
    if json:
        output.emit_json({**output.state_json(rel, done.snapshot), "message": done.message, "commit": done.commit})
    else:
        output.emit_text(rel)
        if done.commit:
            output.info(f"committed: {done.message}")
        elif no_commit or not commit_enabled(store):
            output.info("written, not committed")
        else:  # the same numbers within the same second: the file is what HEAD holds
            output.info(f"unchanged: {rel} is as the last update left it (nothing to commit)")


@state_app.command("show")
def show(ctx: typer.Context, name: ScopeOpt = None, json: JsonOpt = False) -> None:
    """Print STATE.md (or the scope's)."""
    store = store_from(ctx)
    path, text, snapshot = state.show(store, name)
    if json:
        output.emit_json(output.state_json(store.rel(path), snapshot))
    else:
        output.emit_content(text)


@state_app.command("history")
def history(ctx: typer.Context, name: ScopeOpt = None, json: JsonOpt = False) -> None:
    """The key numbers of every committed version of STATE.md, oldest first."""
    store = store_from(ctx)
    versions = state.history(store, name)
    if json:
        output.emit_json([v.to_dict() for v in versions])
    else:
        output.emit_table(
            [{"commit": v.commit[:7], "updated": v.updated or "", "numbers": " ".join(f"{k}:{n}" for k, n in v.numbers.items())} for v in versions],
            ["commit", "updated", "numbers"],
        )


@state_app.command("check")
def check(
    ctx: typer.Context,
    max_age: Annotated[Optional[str], typer.Option("--max-age", help="Older than this is stale: 30m, 24h, 2d (default: [state] max_age, else 24h).", metavar="AGE")] = None,
    json: JsonOpt = False,
) -> None:
    """Print `STALE: <path> (...)` for every STATE.md older than allowed; exit 1 if any, 3 if none exists."""
    limit = state.parse_duration(max_age, "--max-age") if max_age is not None else None
    store = store_from(ctx)
    found = state.check(store, limit)
    stale = [f for f in found if f.stale]
    if json:
        output.emit_json({"ok": not stale, "files": [f.to_dict() for f in found]})
    else:
        output.emit_lines(f.line() for f in stale)
    if stale:
        raise typer.Exit(FAILED)
