"""recall, context, used, audit, pin and unpin."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from

NoLogOpt = Annotated[bool, typer.Option("--no-log", help="Do not record what was shown in the access log.")]
ModeOpt = Annotated[Optional[str], typer.Option("--mode", help="keyword | vector | hybrid (default from memctl.toml, else hybrid).")]


MinScoreOpt = Annotated[Optional[float], typer.Option(
    "--min-score", help="Relevance floor, 0-1 (default: [recall] min_score in memctl.toml, else 0.35).", metavar="X")]


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[Optional[str], typer.Argument(help="What to look for (Japanese or English).", metavar="[QUERY]")] = None,
    k: Annotated[int, typer.Option("--k", help="How many hits.")] = 10,
    source: Annotated[str, typer.Option("--source", help="facts | episodes | docs (every document source) | a source's name | all.")] = "facts",
    mode: ModeOpt = None,
    type_: Annotated[Optional[str], typer.Option("--type", "-t", help="Only this type.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Only items with this tag.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only items updated since DATE.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include superseded, archived and expired facts.")] = False,
    min_score: MinScoreOpt = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the raw signals, the relevance and the five factors.")] = False,
    paths: Annotated[bool, typer.Option("--paths", help="Print only paths.")] = False,
    queries: Annotated[Optional[Path], typer.Option("--queries", help="Answer each line of FILE ('-' = stdin) as NDJSON.", metavar="FILE")] = None,
    no_log: NoLogOpt = False,
    json: JsonOpt = False,
) -> None:
    """Find facts, episodes and document chunks by words and meaning; exit 1 when nothing reaches the relevance floor (a failure: 2)."""
    from . import fast

    _exit(fast.recall_cmd(
        store_from(ctx), query, queries=None if queries is None else str(queries), k=k, source=source, mode=mode,
        fact_type=type_, tag=tag, since=since, include_all=all_, explain=explain, paths=paths, min_score=min_score,
        no_log=no_log, json=json,
    ))


@app.command()
def context(
    ctx: typer.Context,
    query: Annotated[Optional[str], typer.Option("--query", "-q", help="Add the best facts, episodes and document chunks for this query.")] = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget (estimated: ~1 per kana/kanji, ~1 per 4 other chars).")] = 4000,
    k: Annotated[int, typer.Option("--k", help="Facts and episodes to add for --query.")] = 5,
    mode: ModeOpt = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Leave out MEMORY.md (for agents that load it themselves, as Claude Code does).")] = False,
    min_score: MinScoreOpt = None,
    no_log: NoLogOpt = False,
    json: JsonOpt = False,
) -> None:
    """Print the session-start bundle: pinned facts, index, STATE.md, query hits, stale facts."""
    from . import fast

    _exit(fast.context_cmd(store_from(ctx), query=query, budget=budget, k=k, mode=mode, min_score=min_score,
                           no_index=no_index, no_log=no_log, json=json))


@app.command()
def used(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="Fact names or stems, episode ids, document passages PATH:START-END.", metavar="NAME...")],
    query: Annotated[Optional[str], typer.Option("--query", "-q", help="What the item was used for (recorded).")] = None,
    json: JsonOpt = False,
) -> None:
    """Record that facts, episodes or document passages were used: raises their frequency and recency in recall."""
    from .. import recall as recall_mod

    keys = recall_mod.record_use(store_from(ctx), names, query=query or "")
    if json:
        output.emit_json({"used": keys})
    elif keys:
        output.info(f"recorded use of {', '.join(keys)}")


@app.command()
def audit(
    ctx: typer.Context,
    agent: Annotated[Optional[str], typer.Option("--agent", help="Only this agent.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only since DATE.")] = None,
    fact: Annotated[Optional[str], typer.Option("--fact", help="Only calls that showed this fact.", metavar="NAME")] = None,
    never_shown: Annotated[bool, typer.Option("--never-shown", help="List live facts no call has shown.")] = False,
    json: JsonOpt = False,
) -> None:
    """What was shown or used, by whom, and when (from the access log)."""
    from .. import recall as recall_mod

    store = store_from(ctx)
    if never_shown:
        items = recall_mod.never_shown(store)
        if json:
            from .. import facts

            names = {i.key for i in items}
            output.emit_json([output.fact_json(store, f, body=False) for f in facts.list_facts(store)
                              if (f.name or f.stem) in names])
            return
        rows = [{"name": i.key, "type": i.type, "description": i.description, "path": i.path} for i in items]
        output.emit_table(rows, ["name", "type", "description", "path"])
        return
    rows = [output.audit_row_json(r) for r in recall_mod.audit(store, agent=agent, since=since, fact=fact)]
    if json:
        output.emit_json(rows)
    else:
        output.emit_table(rows, ["ts", "agent", "command", "query", "shown"])


def _pin(ctx: typer.Context, name: str, pinned: bool, no_commit: bool, json: bool) -> None:
    from .. import facts

    store = store_from(ctx, committing=not no_commit)
    change = facts.set_pinned(store, name, pinned, commit_changes=not no_commit)
    path = store.rel(change.fact.path)
    if json:
        output.emit_json({"action": change.action, "name": change.fact.name, "path": path, "commit": change.commit,
                          "pinned": pinned})
    else:
        output.emit_text(path)


@app.command()
def pin(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Fact name, file stem, file name or path (memory/deploy.md).", metavar="NAME")],
        no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Pin a fact: `context` always includes it (in full, or cut to its share of the budget with a note naming
    `memctl show`; when there are more pinned facts than the budget holds a start of each, a line names the rest)."""
    _pin(ctx, name, True, no_commit, json)


@app.command()
def unpin(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Fact name, file stem, file name or path (memory/deploy.md).", metavar="NAME")],
          no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Unpin a fact."""
    _pin(ctx, name, False, no_commit, json)
