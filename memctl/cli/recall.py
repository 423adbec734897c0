"""recall, context, audit, pin and unpin."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import BadInput
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from

NoLogOpt = Annotated[bool, typer.Option("--no-log", help="Do not record this call in ledgers/access.tsv.")]
ModeOpt = Annotated[Optional[str], typer.Option("--mode", help="keyword | vector | hybrid (default from memctl.toml, else hybrid).")]


def _rows(hits, explain: bool, flat: bool = False) -> list[dict]:
    rows = []
    for rank, hit in enumerate(hits, start=1):
        row = hit.to_dict(explain)
        row["rank"] = rank
        if explain and flat:
            row.update({k: f"{v:.3f}" for k, v in row.pop("factors").items()})
        rows.append(row)
    return rows


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[Optional[str], typer.Argument(help="What to look for (Japanese or English).", metavar="[QUERY]")] = None,
    k: Annotated[int, typer.Option("--k", help="How many hits.")] = 10,
    source: Annotated[str, typer.Option("--source", help="facts | episodes | all.")] = "facts",
    mode: ModeOpt = None,
    type_: Annotated[Optional[str], typer.Option("--type", "-t", help="Only this type.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Only items with this tag.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only items updated since DATE.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include superseded, archived and expired facts.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show the five factors of each score.")] = False,
    paths: Annotated[bool, typer.Option("--paths", help="Print only paths.")] = False,
    queries: Annotated[Optional[Path], typer.Option("--queries", help="Answer each line of FILE ('-' = stdin) as NDJSON.", metavar="FILE")] = None,
    no_log: NoLogOpt = False,
    json: JsonOpt = False,
) -> None:
    """Find facts and episodes by words and meaning, ranked by five factors."""
    from .. import recall as recall_mod

    if queries is not None:
        import sys

        text = sys.stdin.read() if str(queries) == "-" else queries.read_text(encoding="utf-8")
        asked = [line.strip() for line in text.splitlines() if line.strip()]
    elif query:
        asked = [query]
    else:
        raise BadInput("give a QUERY or --queries FILE", hint='memctl recall "deploy schedule"')
    store = store_from(ctx)
    corpus, results = recall_mod.recall(
        store, asked, k=k, source=source, mode=mode, fact_type=type_, tag=tag, since=since,
        include_all=all_, log=not no_log,
    )
    for note in corpus.notes:
        output.warn(note)
    if queries is not None:
        output.emit_ndjson({"query": q, "hits": [h.to_dict(explain) for h in hits]} for q, hits in zip(asked, results))
        return
    hits = results[0]
    if paths:
        output.emit_lines(dict.fromkeys(h.item.path.split(":")[0] if h.item.kind == "fact" else h.item.path for h in hits))
    elif json:
        output.emit_json(_rows(hits, explain))
    else:
        columns = ["rank", "score", "name", "type", "description", "path"]
        if explain:
            columns = ["rank", "score", "relevance", "importance", "confidence", "recency", "frequency", "name", "path"]
        output.emit_table(_rows(hits, explain, flat=True), columns)


@app.command()
def context(
    ctx: typer.Context,
    query: Annotated[Optional[str], typer.Option("--query", "-q", help="Add the best facts and episodes for this query.")] = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget (estimated: ~1 per kana/kanji, ~1 per 4 other chars).")] = 4000,
    k: Annotated[int, typer.Option("--k", help="Facts and episodes to add for --query.")] = 5,
    mode: ModeOpt = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Leave out MEMORY.md (for agents that load it themselves, as Claude Code does).")] = False,
    no_log: NoLogOpt = False,
    json: JsonOpt = False,
) -> None:
    """Print the session-start bundle: pinned facts, index, STATE.md, query hits, stale facts."""
    from .. import context as context_mod

    store = store_from(ctx)
    bundle = context_mod.build(store, query=query, budget=budget, k=k, mode=mode, log=not no_log, include_index=not no_index)
    if json:
        output.emit_json(bundle.to_dict())
    else:
        output.emit_text(bundle.text)
    if bundle.dropped:
        output.info(f"{len(bundle.dropped)} lower-ranked parts left out to stay within {budget} tokens")


@app.command()
def audit(
    ctx: typer.Context,
    agent: Annotated[Optional[str], typer.Option("--agent", help="Only this agent.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only since DATE.")] = None,
    fact: Annotated[Optional[str], typer.Option("--fact", help="Only calls that showed this fact.", metavar="NAME")] = None,
    never_shown: Annotated[bool, typer.Option("--never-shown", help="List live facts no call has shown.")] = False,
    json: JsonOpt = False,
) -> None:
    """What was shown, to whom, and when (from ledgers/access.tsv)."""
    from .. import recall as recall_mod

    store = store_from(ctx)
    if never_shown:
        items = recall_mod.never_shown(store)
        rows = [{"name": i.key, "type": i.type, "description": i.description, "path": i.path} for i in items]
        if json:
            output.emit_json(rows)
        else:
            output.emit_table(rows, ["name", "type", "description", "path"])
        return
    rows = recall_mod.audit(store, agent=agent, since=since, fact=fact)
    if json:
        output.emit_json(rows)
    else:
        output.emit_table(rows, ["ts", "agent", "command", "query", "shown"])


def _pin(ctx: typer.Context, name: str, pinned: bool, no_commit: bool, json: bool) -> None:
    from .. import facts

    store = store_from(ctx)
    change = facts.set_pinned(store, name, pinned, commit_changes=not no_commit)
    path = store.rel(change.fact.path)
    if json:
        output.emit_json({"action": change.action, "name": change.fact.name, "path": path, "pinned": pinned})
    else:
        output.emit_text(path)


@app.command()
def pin(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Fact name or stem.", metavar="NAME")],
        no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Pin a fact: `context` always includes it in full."""
    _pin(ctx, name, True, no_commit, json)


@app.command()
def unpin(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Fact name or stem.", metavar="NAME")],
          no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Unpin a fact."""
    _pin(ctx, name, False, no_commit, json)
