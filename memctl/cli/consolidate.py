"""consolidate, conflicts, distill, and the procedure group (docs/CONSOLIDATION.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..errors import FAILED, BadInput
from .root import app
from .common import AllowSecretsOpt, JsonOpt, NoCommitOpt, read_file_arg, store_from

proc_app = typer.Typer(
    help="Procedures: facts of type procedure, ranked by outcomes recorded in a ledger.",
    no_args_is_help=True,
)
app.add_typer(proc_app, name="procedure")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _notes(notes) -> None:
    for note in notes:
        output.warn(note)


@app.command()
def consolidate(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan, change nothing (the default).")] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Merge: survivors supersede the rest, one commit.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Merge live facts that say the same thing; each cluster's most confident fact survives."""
    from ..lifecycle import consolidate as cons

    if dry_run and apply:
        raise BadInput("give --dry-run or --apply, not both", hint="--dry-run shows the plan; --apply carries it out")
    store = store_from(ctx, committing=apply and not no_commit)
    result = cons.consolidate(store, dry_run=not apply, commit_changes=not no_commit)
    plan = result.plan
    _notes(plan.notes)
    if json:
        data = plan.to_dict()
        data.update({
            "applied": result.applied,
            "commit": result.commit,
            "archived": [store.rel(f.path) for c in result.changes for f in c.archived],
        })
        output.emit_json(data)
    else:
        rows = [
            {"survivor": cons.name_of(m.survivor), "absorbed": cons.name_of(f), "score": f"{j.score:.4f}", "overlap": f"{j.overlap:.4f}"}
            for m in plan.merges for f, j in m.links()
        ]
        output.emit_table(rows, ["survivor", "absorbed", "score", "overlap"])
    absorbed = sum(len(m.absorbed) for m in plan.merges)
    if result.applied:
        output.info(f"merged {_n(absorbed + len(plan.merges), 'fact')} into {len(plan.merges)}"
                    + (f" (commit {result.commit[:10]})" if result.commit else ""))
    elif plan.merges:
        output.info(f"{_n(len(plan.merges), 'merge')} planned ({_n(absorbed, 'fact')} to supersede); run with --apply to write them")
    else:
        output.info(f"nothing to merge among {_n(plan.facts, 'fact')}")
    gone = {f.stem for m in plan.merges for f in m.absorbed} if result.applied else set()
    left = [c for c in plan.conflicts if c.a not in gone and c.b not in gone]  # a fact just superseded is in none
    if left:
        output.info(f"{_n(len(left), 'conflict')} never merged: see `memctl conflicts`")


@app.command()
def conflicts(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", help="Show at most N pairs, strongest groups first (0: all).", metavar="N")] = 20,
    json: JsonOpt = False,
) -> None:
    """List facts a merge changed on two machines, then pairs of live facts on the same topic that differ
    in a detail, grouped by fact, strongest first."""
    from .. import sync
    from ..lifecycle import consolidate as cons

    if limit < 0:
        raise BadInput(f"--limit must be 0 (all) or more, got {limit}", hint="--limit 0 lists them all")
    store = store_from(ctx)
    merged = sync.list_conflicts(store)  # versions a merge kept aside (docs/SYNC.md)
    plan = cons.conflicts(store)
    _notes(plan.notes)
    shown = cons.ranked(plan.conflicts, limit)
    groups = len({g.fact for g, _ in cons.ranked(plan.conflicts)})
    if json:
        output.emit_json({
            "merge": [c.to_dict() for c in merged],
            "total": len(plan.conflicts), "groups": groups, "shown": len(shown),
            "conflicts": [{**c.to_dict(), "fact": g.fact, "strength": cons.strength(c)} for g, c in shown],
        })
    else:
        if merged:
            output.emit_table([{**c.to_dict(), "hunk": " | ".join(c.hunk)} for c in merged], ["name", "copy", "hunk"])
            output.info(f"{_n(len(merged), 'fact')} changed on two machines; resolve one with `memctl resolve NAME --keep local|remote|both`")
        rows = []
        for g, c in shown:
            a, b, text_a, text_b = (c.a, c.b, c.text_a, c.text_b) if c.a == g.fact else (c.b, c.a, c.text_b, c.text_a)
            rows.append({"a": a, "b": b, "score": f"{c.score:.4f}", "differs": "; ".join(c.differs),
                         "description_a": text_a, "description_b": text_b})
        output.emit_table(rows, ["a", "b", "score", "differs", "description_a", "description_b"])
    if plan.conflicts:
        more = f"showing {len(shown)} of {_n(len(plan.conflicts), 'conflict')} (in {_n(groups, 'group')}; --limit 0 shows all)" \
            if len(shown) < len(plan.conflicts) else _n(len(plan.conflicts), "conflict")
        output.info(f"{more}; resolve one with `memctl remember KEEP --update --supersedes OTHER`")


@app.command()
def distill(
    ctx: typer.Context,
    since: Annotated[Optional[str], typer.Option("--since", help="Only episodes at or after DATE.", metavar="DATE")] = None,
    min_cluster: Annotated[int, typer.Option("--min-cluster", help="Smallest cluster worth a lesson.")] = 3,
    similarity: Annotated[float, typer.Option("--similarity", help="Embedding similarity every two episodes of a cluster reach.")] = 0.7,
    llm_cmd: Annotated[Optional[str], typer.Option("--llm-cmd", help="Command that answers a prompt on stdin with JSON, e.g. 'claude -p'.", metavar="CMD")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Seconds to wait for CMD per cluster ([distill] timeout, default 120).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --llm-cmd: ask and validate, write nothing.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Distil clusters of old episodes into lessons; without --llm-cmd print the clusters and prompts as JSON."""
    from ..lifecycle import distill as dist

    store = store_from(ctx, committing=llm_cmd is not None and not (dry_run or no_commit))
    if llm_cmd is None:
        plan = dist.plan(store, since=since, min_cluster=min_cluster, similarity=similarity)
        _notes(plan.notes)
        output.emit_json(plan.to_dict())
        output.info(f"{_n(len(plan.clusters), 'cluster')} from {_n(plan.considered, 'episode')} old enough and not distilled")
        return
    result = dist.distill(store, llm_cmd, since=since, min_cluster=min_cluster, similarity=similarity,
                          timeout=timeout, dry_run=dry_run, commit_changes=not no_commit)
    _notes(result.plan.notes)
    if json:
        output.emit_json({**result.plan.to_dict(), "outcomes": [o.to_dict() for o in result.outcomes], "commit": result.commit})
    else:
        output.emit_table([{**o.to_dict(), "reason": o.reason} for o in result.outcomes],
                          ["status", "fact", "episodes", "reason"])
    for bad in result.rejected:
        output.warn(f"cluster {','.join(bad.cluster.ids)}: {bad.reason}; nothing written for it")
    planned = [o for o in result.outcomes if o.status == "planned"]
    output.info(f"{_n(len(planned), 'lesson') + ' planned' if dry_run else _n(len(result.created), 'lesson') + ' written'}, "
                f"{_n(len(result.rejected), 'cluster')} rejected, from {_n(result.plan.considered, 'episode')}"
                + (f" (commit {result.commit[:10]})" if result.commit else ""))
    if result.rejected:
        raise typer.Exit(FAILED)


# ---------------------------------------------------------------- procedure


def _stats_row(candidate, rel) -> dict:
    data = candidate.to_dict(rel)
    for key in ("success_rate", "quality", "rank", "match"):
        if data.get(key) is not None:
            data[key] = f"{data[key]:.4f}"
    return data


STAT_COLUMNS = ["name", "rank", "success_rate", "quality", "runs", "version"]


@proc_app.command("list")
def procedure_list(
    ctx: typer.Context,
    json: JsonOpt = False,
) -> None:
    """Every live procedure with its trigger and statistics."""
    from ..lifecycle import procedures

    store = store_from(ctx)
    found = procedures.listing(store)
    if json:
        output.emit_json([c.to_dict(store.rel) for c in found])
    else:
        output.emit_table([_stats_row(c, store.rel) for c in found], STAT_COLUMNS + ["trigger"])


@proc_app.command("record")
def procedure_record(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The procedure (a fact of type procedure).", metavar="NAME")],
    success: Annotated[bool, typer.Option("--success", help="It worked.")] = False,
    failure: Annotated[bool, typer.Option("--failure", help="It did not.")] = False,
    score: Annotated[Optional[float], typer.Option("--score", help="Quality of the result, 0-10.", metavar="X")] = None,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Append one outcome to ledgers/procedure-outcomes.tsv and print the new statistics."""
    from ..lifecycle import procedures

    if success == failure:
        raise BadInput("give exactly one of --success and --failure", hint="--success for a run that worked, --failure for one that did not")
    store = store_from(ctx, committing=not no_commit)
    done = procedures.record(store, name, success, score, commit_changes=not no_commit)
    if json:
        output.emit_json({"name": done.name, "recorded": done.row, **done.stats.to_dict(), "commit": done.commit})
    else:
        s = done.stats
        quality = "-" if s.quality is None else f"{s.quality:.4f}"
        row = {"name": done.name, "runs": s.runs, "success_rate": f"{s.success_rate:.4f}", "quality": quality, "rank": f"{s.rank:.4f}"}
        output.emit_table([row], list(row), plain=(
            f"{done.name}\truns {s.runs}\tsuccess_rate {row['success_rate']}\tquality {quality}\trank {row['rank']}"))


@proc_app.command("best")
def procedure_best(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="What is to be done.", metavar="TASK")],
    all_: Annotated[bool, typer.Option("--all", help="Every matching procedure, best first.")] = False,
    json: JsonOpt = False,
) -> None:
    """The matching procedure with the best success_rate x 0.6 + quality/10 x 0.4."""
    from ..lifecycle import procedures

    store = store_from(ctx)
    found = procedures.best(store, task)
    shown = found if all_ else found[:1]
    if json:
        output.emit_json([c.to_dict(store.rel) for c in shown] if all_ else shown[0].to_dict(store.rel))
    else:
        output.emit_table([_stats_row(c, store.rel) for c in shown], STAT_COLUMNS + ["match", "path"])


@proc_app.command("evolve")
def procedure_evolve(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The procedure to change.", metavar="NAME")],
    template: Annotated[str, typer.Option("--template", help="The new template body ('-' reads stdin).", metavar="FILE")],
    no_commit: NoCommitOpt = False,
    allow_secrets: AllowSecretsOpt = False,
    json: JsonOpt = False,
) -> None:
    """Replace a procedure's template and bump its version; git keeps the older ones."""
    from ..lifecycle import procedures

    data, where = read_file_arg(template, "--template")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--template {where} is not valid UTF-8", hint="save the template as UTF-8") from None
    store = store_from(ctx, committing=not no_commit)
    change = procedures.evolve(store, name, text, commit_changes=not no_commit, allow_secrets=allow_secrets)
    version = procedures.version(change.fact)
    path = store.rel(change.fact.path)
    if json:
        output.emit_json({"action": change.action, "name": procedures.name_of(change.fact), "version": version,
                          "path": path, "commit": change.commit})
    else:
        output.emit_text(path)
        output.info(f"{path} unchanged (version {version})" if change.action == "unchanged" else f"{path} is now version {version}")
