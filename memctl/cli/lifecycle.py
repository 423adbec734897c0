"""lifecycle commands (docs/LIFECYCLE.md): forget by policy (`forget --policies`, called from cli/facts.py), restore."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .. import output
from ..store import Store
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from

PLAN_COLUMNS = ["action", "kind", "name", "policy", "matched"]


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, tuple):
        return list(value)
    return value


def _matched(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_value(v) for k, v in values.items()}


def forget_by_policies(store: Store, *, dry_run: bool, commit_changes: bool, json: bool) -> None:
    """Print the plan (every item, its policy, the numbers that matched), then apply it unless dry_run."""
    from ..lifecycle import forget

    outcome = forget.forget_by_policies(store, dry_run=dry_run, commit_changes=commit_changes)
    plan = outcome.plan
    if json:
        output.emit_json({
            "dry_run": dry_run, "applied": outcome.applied, "commit": outcome.commit, "summary": plan.summary(),
            "steps": [{"kind": s.item.kind, "name": s.item.name, "key": s.item.key, "action": s.action,
                       "policy": s.policy, "matched": _matched(s.matched)} for s in plan.steps],
            "kept": [{"kind": k.item.kind, "name": k.item.name, "key": k.item.key, "would": k.action,
                      "policy": k.policy, "never_forget": k.never, "matched": _matched(k.matched)} for k in plan.kept],
            "notes": list(plan.notes),
        })
    else:
        rows = [{"action": s.action, "kind": s.item.kind, "name": s.item.name, "policy": s.policy,
                 "matched": forget.numbers(s.matched)} for s in plan.steps]
        rows += [{"action": "keep", "kind": k.item.kind, "name": k.item.name, "policy": k.policy,
                  "matched": f"{forget.numbers(k.matched)} (never-forget {k.never}; would {k.action})"} for k in plan.kept]
        output.emit_table(rows, PLAN_COLUMNS)
    for note in plan.notes:
        output.info(note)
    kept = f"; {len(plan.kept)} kept by never-forget classes" if plan.kept else ""
    if not plan.steps:
        output.info(f"nothing to forget{kept}")
    elif dry_run:
        output.info(f"dry run, nothing changed: would forget {plan.summary()}{kept}")
    else:
        done = f" (commit {outcome.commit[:10]})" if outcome.commit else ""
        output.info(f"forgot {plan.summary()}{kept}{done}")


@app.command()
def restore(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Archived fact: name, stem or file name (newest version), NAME.YYYYmmddTHHMMSS, or its path (memory/archive/x.md).", metavar="NAME")],
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Bring an archived fact back to memory/ and MEMORY.md, exactly as it was before archiving."""
    from ..lifecycle import restore as restore_mod

    store = store_from(ctx, committing=not no_commit)
    change = restore_mod.restore(store, name, commit_changes=not no_commit)
    path = store.rel(change.fact.path)
    source = store.rel(change.archived[0].path)
    if json:
        output.emit_json({"action": change.action, "name": change.fact.name, "path": path, "from": source, "commit": change.commit})
    else:
        output.emit_text(path)
    replaced = change.archived[0].meta("superseded_by")
    if replaced:
        output.info(f"{path} was superseded by {replaced}, which still lists it under supersedes")
