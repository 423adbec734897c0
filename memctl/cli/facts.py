"""Fact commands: init, remember, show, list, forget, index, doctor, log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import api, facts, output, store as store_mod
from ..errors import BadInput, FAILED
from .root import app
from .common import AllowSecretsOpt, JsonOpt, NoCommitOpt, store_from

SIMILAR_SHOWN = 5  # `remember` warns of the most similar facts; --json lists every one


def _read_stdin(label: str) -> str:
    from ..fsutil import read_input

    data = read_input(sys.stdin.buffer, f"{label} from stdin")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{label} from stdin is not valid UTF-8", hint="send the text as UTF-8") from None


@app.command()
def init(
    ctx: typer.Context,
    directory: Annotated[Optional[str], typer.Argument(help="Where to create the store (default: --root, else the current folder).", metavar="[DIR]", show_default=False)] = None,
    no_git: Annotated[bool, typer.Option("--no-git", help="No repository, no commits: memctl.toml gets [git] commit = false.")] = False,
    json: JsonOpt = False,
) -> None:
    """Create a store: memctl.toml, memory/MEMORY.md, ledgers/, state/, git. Safe to re-run.

    A Claude Code memory directory (MEMORY.md or fact files at its top) is adopted as it is:
    no memory/ folder; its facts go into the first commit. A folder inside another store (a
    parent up to the git top level holds memctl.toml) is refused: exit 2, nothing created.
    """
    given = (ctx.find_root().obj or {}).get("root")  # `memctl --root DIR init` made a store of the current folder
    if directory == "":  # (a Path of "" is the current folder: `init "$UNSET"` made a store there)
        raise BadInput("DIR is empty", hint="give the store's folder, or none for the current one (`memctl init .`)")
    directory = Path(directory if directory is not None else given if given is not None else ".")
    created = store_mod.init_store(directory, git=not no_git)
    root = str(directory.resolve())
    if json:
        output.emit_json({"root": root, "created": created})
    else:
        inside = [c for c in created if c not in (root, str(directory))]  # (the folder itself is named first)
        output.info(f"initialised {root}: " + ", ".join(inside) if created else f"{root} is already a store; nothing changed")


@app.command()
def remember(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Fact name: 1-80 ASCII letters, digits, - or _, not - first; in a Claude Code directory a title of up to 100 characters, Japanese too (docs/CLAUDE_CODE.md); with --update, an existing fact's name, file stem or file name.", metavar="NAME")],
    description: Annotated[Optional[str], typer.Option("--description", "-d", help="One line; what MEMORY.md shows.")] = None,
    type_: Annotated[Optional[str], typer.Option("--type", "-t", help="One of the types memctl.toml declares ([facts] types; by default user | feedback | project | reference | procedure). A new fact without one is a project fact, or takes the type of the fact it --supersedes.")] = None,
    why: Annotated[Optional[str], typer.Option("--why", help="The **Why:** line of the body.")] = None,
    how: Annotated[Optional[str], typer.Option("--how", help="The **How to apply:** line of the body.")] = None,
    body: Annotated[Optional[str], typer.Option("--body", help="Free text of the body; '-' reads stdin.")] = None,
    importance: Annotated[Optional[float], typer.Option("--importance", help="0-1 (default by type).")] = None,
    confidence: Annotated[Optional[float], typer.Option("--confidence", help="0-1: stated 1.0, inferred 0.7, observed 0.5.")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="A tag; repeat for more. With --update, the fact's tags become those given (repeat the ones to keep).")] = None,
    source: Annotated[Optional[str], typer.Option("--source", help="Where it came from: session, URL, episode id.")] = None,
    expires: Annotated[Optional[str], typer.Option("--expires", help="The last day the fact holds (YYYY-MM-DD, local time; from the next day recall leaves it out), or an ISO-8601 time; \"\" with --update clears it.")] = None,
    supersedes: Annotated[Optional[list[str]], typer.Option("--supersedes", help="Archive this fact, replaced by NAME; repeatable.")] = None,
    pin: Annotated[bool, typer.Option("--pin", help="Pin the fact (always in context).")] = False,
    update: Annotated[bool, typer.Option("--update", help="Change an existing fact; fields not given are kept.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write even if a live fact has the same description.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse near matches too, not only exact ones.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
    allow_secrets: AllowSecretsOpt = False,
) -> None:
    """Write one fact file and its MEMORY.md line, and commit them."""
    if body == "-":
        body = _read_stdin("--body")
    store = store_from(ctx, committing=not no_commit)
    change = api.remember(
        store, name, description, type=type_, body=body, why=why, how=how, importance=importance,
        confidence=confidence, tags=tuple(tag) if tag else None, source=source, expires=expires,
        supersedes=tuple(supersedes or ()), pinned=True if pin else None,
        update=update, force=force, strict=strict, commit=not no_commit, allow_secrets=allow_secrets,
    )
    for hit in change.similar[:SIMILAR_SHOWN]:  # the closest first
        how = f"{hit.shared} shared keywords" if hit.method == "keywords" else f"by {hit.method}" + ("" if hit.near else ", similar band")
        output.warn(
            f"similar fact: {store.rel(hit.fact.path)} (score {hit.score:.2f}, {how})",
            hint="--update or --supersedes it if this is the same fact",
        )
    if len(change.similar) > SIMILAR_SHOWN:
        output.warn(f"and {len(change.similar) - SIMILAR_SHOWN} more similar facts", hint="--json lists them all")
    path = store.rel(change.fact.path)
    if json:
        output.emit_json({
            "action": change.action, "name": change.fact.name, "path": path, "commit": change.commit,
            "similar": [h.to_dict(store) for h in change.similar],
            "superseded": [store.rel(f.path) for f in change.archived],
        })
    else:
        output.emit_text(path)
        if change.action == "unchanged":
            output.info(f"{path} unchanged")


@app.command()
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Fact name, file stem, file name or path (memory/deploy.md; archived facts too), or PATH:START-END of a document in a declared source (PATH alone: the whole document).", metavar="NAME")],
    json: JsonOpt = False,
) -> None:
    """Print one fact file, or lines of a document (PATH:START-END, as recall shows them, or PATH: all of it)."""
    store = store_from(ctx)
    if facts.is_passage(store, name, whole=True):
        source, path, start, end, text = api.passage(store, name, log="show")  # a range is a use, as a fact's show is
        from ..sources import MAX_SHOWN_LINES, is_spec  # noqa: PLC0415

        if not is_spec(name) and end == MAX_SHOWN_LINES:  # a whole document is cut where a range is
            output.info(f"{path}: its first {end:,} lines, the most shown at once; {path}:{end + 1}-{2 * end} "
                        "shows the next, if it goes on")
        if json:
            output.emit_json({"path": path, "start": start, "end": end, "source": source.name,
                              "source_description": source.description, "text": text})
        else:
            output.emit_content(text)
        return
    found = api.show(store, name, log=True)  # a use: recall's frequency counts it
    if found.archived:
        replaced = found.meta("superseded_by")
        why = f"superseded by {replaced}" if replaced else f"forgotten: {found.meta('archived_reason') or 'no reason recorded'}"
        output.info(f"{store.rel(found.path)} is archived ({why})")
    elif found.meta("expires") is not None:
        from .. import clock

        if clock.expired(found.meta("expires")):  # as list --all and --json call it: recall and MEMORY.md leave it out
            output.info(f"{store.rel(found.path)} is expired (expires: {found.meta('expires')}): recall and MEMORY.md leave it out")
    if json:
        output.emit_json(output.fact_json(store, found))
    else:
        from ..fsutil import read_text

        output.emit_content(read_text(store.root, found.path))


@app.command("list")
def list_(
    ctx: typer.Context,
    type_: Annotated[Optional[str], typer.Option("--type", "-t", help="Only this type.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Only facts with this tag.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include archived and superseded facts, and a status column.")] = False,
    json: JsonOpt = False,
) -> None:
    """List facts: name, type, description, path (and status with --all)."""
    store = store_from(ctx)
    found = api.list_facts(store, type=type_, tag=tag, archived=all_)
    rows = [output.fact_json(store, f, body=False) for f in found]
    if json:
        output.emit_json(rows)
    else:
        columns = ["name", "type", "description", "path"] + (["status"] if all_ else [])
        output.emit_table(rows, columns, spare=("path",))  # (it holds the name) at 40 columns: `feedbac` / `k`


@app.command()
def forget(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(help="Fact name, file stem, file name or path (memory/deploy.md).", metavar="[NAME]")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why it is forgotten: one line, required with NAME (kept in the archived file).")] = "",
    policies: Annotated[bool, typer.Option("--policies", help="Apply the [[forget.policy]] rules of memctl.toml instead of one NAME.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --policies: print the plan, change nothing.")] = False,
    no_commit: NoCommitOpt = False,
    allow_secrets: AllowSecretsOpt = False,
    json: JsonOpt = False,
) -> None:
    """Move a fact to memory/archive/ with the reason, or forget by policy (--policies)."""
    if policies and name:
        raise BadInput("give either NAME or --policies, not both", hint="memctl forget NAME --reason TEXT, or memctl forget --policies")
    if dry_run and not policies:  # it forgot NAME and committed, as if the flag were not there
        raise BadInput("--dry-run goes with --policies; forgetting one NAME has no dry run",
                       hint="memctl show NAME shows the fact; memctl restore NAME brings a forgotten one back")
    if reason and policies:
        raise BadInput("--reason goes with NAME; a policy gives its own reason", hint="memctl forget NAME --reason TEXT")
    store = store_from(ctx, committing=not (no_commit or dry_run))
    if policies:
        from .lifecycle import forget_by_policies

        forget_by_policies(store, dry_run=dry_run, commit_changes=not no_commit, json=json)
        return
    if not name:
        raise BadInput("give the NAME of the fact to forget", hint="memctl forget NAME --reason TEXT, or --policies")
    change = api.forget(store, name, reason, commit=not no_commit, allow_secrets=allow_secrets)
    path = store.rel(change.fact.path)
    if json:
        output.emit_json({"action": change.action, "name": change.fact.name, "path": path, "commit": change.commit})
    else:
        output.emit_text(path)


@app.command()
def index(
    ctx: typer.Context,
    check: Annotated[bool, typer.Option("--check", help="Only report drift; exit 1 when there is any.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Regenerate MEMORY.md's generated block and its topic files (memory-index/).

    Index lines for live facts found outside the block move into it; other text outside is kept.
    """
    store = store_from(ctx, committing=not (no_commit or check))
    if check:
        drift = facts.index_drift(store)
        if json:
            output.emit_json({"ok": not drift, "drift": [{"kind": d.kind, "target": d.target, "line": d.lineno,
                                                          "message": d.message, "file": d.file} for d in drift]})
        else:
            where = [store.rel(store.memory_dir / d.file) if d.file else store.rel(store.index_path) for d in drift]
            output.emit_lines(f"{rel}:{d.lineno}: {d.message}" if d.lineno else f"{rel}: {d.message}" for rel, d in zip(where, drift))
        if drift:
            raise typer.Exit(FAILED)
        return
    changed, sha = facts.reindex(store, commit_changes=not no_commit)
    if json:
        output.emit_json({"changed": changed, "commit": sha})
    else:
        output.info("MEMORY.md regenerated" if changed else "MEMORY.md is up to date")


@app.command()
def doctor(
    ctx: typer.Context,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too.")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="First settle what a killed command left (its change, stale git locks, temp files).")] = False,
    json: JsonOpt = False,
) -> None:
    """Report every problem in the store as file:line; exit 0 when clean."""
    from .. import doctor as doctor_mod

    store = store_from(ctx)
    if fix:
        for line in doctor_mod.fix(store):
            output.info(line)
    problems = doctor_mod.run(store)
    failing = [p for p in problems if p.severity == "error" or strict]
    if json:
        output.emit_json({"ok": not failing, "problems": [p.__dict__ for p in problems]})
    else:
        output.emit_lines(p.report() for p in problems)
        if not problems:
            output.info("store is clean")
    if failing:
        raise typer.Exit(FAILED)


@app.command()
def log(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Fact name, file stem, file name or path (memory/deploy.md).", metavar="NAME")],
    json: JsonOpt = False,
) -> None:
    """The git history of one fact, across forget and restore: date, commit message, lines changed."""
    store = store_from(ctx)
    entries = facts.history(store, name)
    rows = [
        {"date": e.date, "commit": e.commit[:10], "message": e.message, "changed": f"+{e.added} -{e.removed}", "path": e.path}
        for e in entries
    ]
    if json:
        output.emit_json([e._asdict() for e in entries])
    else:
        output.emit_table(rows, ["date", "commit", "message", "changed"])
