"""Ledger and episode commands. Registers the `ledger` and `episode` groups on the root app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import episodes, ledger, ledger_ops, output
from ..errors import FAILED
from . import fast
from .root import app
from .common import AllowSecretsOpt, JsonOpt, NoCommitOpt, store_from

ledger_app = typer.Typer(
    help="Append-only TSV ledgers: one record a line, greppable, countable with cut | sort | uniq.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
episode_app = typer.Typer(
    help="Episodes: decisions, errors, successes, feedback and conflicts in ledgers/episodes.tsv.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(ledger_app, name="ledger")
app.add_typer(episode_app, name="episode")

NameArg = Annotated[str, typer.Argument(help="Ledger name (ledgers/NAME.tsv): ASCII letters, digits, - or _.")]
ColumnsOpt = Annotated[str, typer.Option("--columns", help="Column names, comma-separated, in file order.")]
UniqueOpt = Annotated[Optional[str], typer.Option("--unique", help="Refuse a record whose value in this column already exists (exact string).", metavar="COL")]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help="Only records at or after this ISO date or timestamp.", metavar="DATE")]


def _columns(text: str) -> list[str]:
    return [c for c in text.split(",")]


@ledger_app.command("create")
def create(ctx: typer.Context, name: NameArg, columns: ColumnsOpt, unique: UniqueOpt = None,
           no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Create ledgers/NAME.tsv with a header line and declare it in memctl.toml."""
    store = store_from(ctx, committing=not no_commit)
    made = ledger.create(store, name, _columns(columns), unique=unique, commit_changes=not no_commit)
    if json:
        output.emit_json({"ledger": made.name, "path": store.rel(made.path), "columns": list(made.columns), "unique": made.unique})
    else:
        output.emit_text(store.rel(made.path))


@ledger_app.command("adopt")
def adopt(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="An existing TSV file inside the store (often headerless).")],
    columns: ColumnsOpt,
    unique: UniqueOpt = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Ledger name (default: the file name without .tsv).")] = None,
    no_commit: NoCommitOpt = False,
    allow_secrets: AllowSecretsOpt = False,
    json: JsonOpt = False,
) -> None:
    """Declare the columns of an existing file in memctl.toml; the file's bytes are not touched."""
    store = store_from(ctx, committing=not no_commit)
    done = ledger_ops.adopt(store, file.absolute(), _columns(columns), unique=unique, name=name,
                            commit_changes=not no_commit, allow_secrets=allow_secrets)
    rel = store.rel(done.ledger.path)
    if done.duplicates:
        output.warn(f"{rel}: {done.duplicates} values of {unique} already repeat", hint=f"memctl ledger dups {done.ledger.name} {unique}")
    if done.header_like is not None:
        header = "\t".join(done.ledger.columns)
        printf = header.replace("\t", "\\t")
        output.warn(f"{rel}:1 is read as a record ({done.header_like!r}), not as a header: a header line holds the declared "
                    f"columns ({header!r})", hint=f"if line 1 is a header, make it the columns': {{ printf '{printf}\\n'; "
                    f"tail -n +2 {rel}; }} > {rel}.new && mv {rel}.new {rel}, set header = true under [ledgers.{done.ledger.name}] "
                    "in memctl.toml, and commit both")
    if done.ledger.path.parent != store.ledgers_dir:
        output.warn(f"{rel} is outside ledgers/, so the merge=union attribute does not cover it", hint="git mv it into ledgers/ and adopt it there")
    if json:
        output.emit_json({"ledger": done.ledger.name, "path": rel, "columns": list(done.ledger.columns),
                          "header": done.ledger.header, "unique": unique, "rows": done.rows,
                          "duplicates": done.duplicates, "commit": done.commit})
    else:
        output.emit_text(rel)


@ledger_app.command("list")
def list_(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List ledgers: name, file, record count, columns."""
    store = store_from(ctx)
    rows = [
        {"name": item.name, "path": store.rel(item.path), "rows": ledger_ops.count_rows(item),
         "columns": list(item.columns), "unique": item.unique, "declared": item.declared}
        for item in ledger.list_ledgers(store)
    ]
    if json:
        output.emit_json(rows)
    else:
        output.emit_table(rows, ["name", "path", "rows", "columns"])


@ledger_app.command("append")
def append(
    ctx: typer.Context,
    name: NameArg,
    values: Annotated[Optional[list[str]], typer.Argument(
        help="col=value for every column (value taken literally), or - to read records from stdin: "
             "one TSV line per record, fields in declared column order, escaped as in the ledger "
             "(\\\\ \\t \\n \\r), no header; with --json, one JSON object per line (blank lines skipped).",
        metavar="COL=VALUE... | -")] = None,
    unique: UniqueOpt = None,
    no_commit: NoCommitOpt = False,
    json: Annotated[bool, typer.Option("--json", help="Read NDJSON from stdin (with -) and print the result as JSON.")] = False,
    allow_secrets: AllowSecretsOpt = False,
) -> None:
    """Append records with one write and one commit; nothing is written if any record is bad.

    A record for the episodes ledger must hold what readers of episodes take for granted: an id
    ep-..., a ts in ISO 8601 with its offset, an importance from 0 to 1, a description."""
    fast.ledger_append(store_from(ctx), name, values or [], unique=unique, no_commit=no_commit, json=json,
                       allow_secrets=allow_secrets)


@ledger_app.command("rows")
def rows(
    ctx: typer.Context,
    name: NameArg,
    where: Annotated[Optional[list[str]], typer.Option("--where", help="col=value, exact match on the unescaped value; repeat to AND.", metavar="COL=VALUE")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only records whose time column (the first of ts, date, time, timestamp) is at or after this ISO date or timestamp; a row whose time is no ISO date is left out, with a warning.", metavar="DATE")] = None,
    tail: Annotated[Optional[int], typer.Option("--tail", help="Only the last N matching records.", metavar="N")] = None,
    json: Annotated[bool, typer.Option("--json", help="Print a JSON array of objects with unescaped values.")] = False,
) -> None:
    """Print records (TSV, escaped as in the file, when piped; a table on a terminal); exit 1 after them
    when the last line has no LF (named on stderr, not printed), or when lines are damaged (fields
    missing or extra, invalid UTF-8, a conflict marker: printed fitted to the columns, extra fields
    left out and missing ones empty, the first named on stderr: repair the file itself, not this)."""
    store = store_from(ctx)
    found, selected = ledger.select_rows(store, name, where=ledger.parse_assignments(where or []), since=since, tail=tail)
    if json:
        output.emit_json([row.values for row in selected])
    else:
        output.emit_table([row.values for row in selected], found.columns)
    ledger.check_tail(found)  # a cut-off last line: the rows above are printed, then it is named (exit 1)
    ledger_ops.refuse_damaged(store, found)  # so are damaged lines, printed fitted to the columns


@ledger_app.command("dups")
def dups(
    ctx: typer.Context,
    name: NameArg,
    column: Annotated[str, typer.Argument(help="The column to look for repeated values in.")],
    json: JsonOpt = False,
) -> None:
    """Values that occur more than once in COLUMN, as `cut -fN | LC_ALL=C sort | uniq -d` prints them."""
    store = store_from(ctx)
    found = ledger_ops.dups(store, name, column)
    if json:
        output.emit_json([vc.to_dict() for vc in found])
    else:
        output.emit_table([{column: vc.field} for vc in found], [column],  # a terminal gets a header
                          plain="".join(vc.field + "\n" for vc in found))  # one write: dups can be 100,000s of lines
    ledger.check_tail(ledger.open_ledger(store, name))  # a cut-off last line was left out: named, exit 1


@ledger_app.command("stats")
def stats(
    ctx: typer.Context,
    name: NameArg,
    by: Annotated[str, typer.Option("--by", help="The column to count values of.", metavar="COL")],
    json: JsonOpt = False,
) -> None:
    """Count the records per value of a column, as `cut -fN | LC_ALL=C sort | uniq -c` prints them."""
    store = store_from(ctx)
    found = ledger_ops.stats(store, name, by)
    if json:
        output.emit_json([vc.to_dict() for vc in found])
    else:
        # piped, uniq -c's own layout: the count right-aligned in 7 columns, a space, the field
        count = "records" if by == "count" else "count"
        output.emit_table([{count: vc.count, by: vc.field} for vc in found], [count, by],
                          plain="".join(f"{vc.count:7d} {vc.field}\n" for vc in found))
    ledger.check_tail(ledger.open_ledger(store, name))  # a cut-off last line was left out: named, exit 1


@ledger_app.command("check")
def check(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(help="Ledger name (default: every ledger).")] = None,
    json: JsonOpt = False,
) -> None:
    """Check field counts, escapes and UTF-8 line by line; report file:line; exit 1 on errors."""
    store = store_from(ctx)
    problems = ledger_ops.check(store, name) if name else ledger_ops.check_all(store)
    errors = [p for p in problems if p.severity == "error"]
    if json:
        output.emit_json({"ok": not errors, "problems": [p.__dict__ for p in problems]})
    else:
        output.emit_lines(p.report() for p in problems)
        if not problems:
            output.info(f"ledger {name} is clean" if name else "every ledger is clean")
    if errors:
        raise typer.Exit(FAILED)


@ledger_app.command("verify")
def verify(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Prove from git history that the ledger was only appended to; exit 1 naming the first commit that was not."""
    store = store_from(ctx)
    result = ledger_ops.verify(store, name)
    if json:
        output.emit_json(result.__dict__)
    else:
        output.emit_text(result.message)
    if not result.ok:
        raise typer.Exit(FAILED)


@ledger_app.command("commit")
def commit_cmd(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Commit the records appended with --no-commit in one commit, after checking only appends happened."""
    done = ledger_ops.commit_appended(store_from(ctx, committing=True), name)
    if json:
        output.emit_json(done.__dict__)
    elif done.commit:
        output.info(f"{done.path}: +{done.appended} committed ({done.commit[:10]})")
    else:
        output.info(f"{done.path}: nothing to commit")


# ---------------------------------------------------------------- episodes

TypeFilter = Annotated[Optional[str], typer.Option("--type", "-t", help="Only this type.")]
AgentFilter = Annotated[Optional[str], typer.Option("--agent", help="Only this agent's episodes.")]


@episode_app.command("add")
def episode_add(
    ctx: typer.Context,
    description: Annotated[str, typer.Argument(help="What happened: one short line (a line break is kept, as \\n in the ledger).")],
    type_: Annotated[str, typer.Option("--type", "-t", help="decision | error | success | feedback | conflict | prompt | reply | tool, or one declared in memctl.toml ([episodes] types).")],
    agent: Annotated[Optional[str], typer.Option("--agent", help="Who (default: MEMCTL_AGENT).")] = None,
    outcome: Annotated[str, typer.Option("--outcome", help="How it turned out.")] = "",
    importance: Annotated[Optional[float], typer.Option("--importance", help="0-1 (default by type: decision 0.7, error 0.8, success 0.5, feedback 0.9, conflict 0.85).")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="A tag; repeat for more.")] = None,
    ref: Annotated[Optional[list[str]], typer.Option("--ref", help="A fact name or episode id that exists, or scheme:anything (commit:<sha>, https://...); repeat for more.")] = None,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
    allow_secrets: AllowSecretsOpt = False,
) -> None:
    """Record an episode; prints its id."""
    store = store_from(ctx, committing=not no_commit)
    episode = episodes.add(store, description, type_, agent=agent, outcome=outcome, importance=importance,
                           tags=tag or (), refs=ref or (), commit_changes=not no_commit, allow_secrets=allow_secrets)
    if json:
        output.emit_json(episode.to_dict())
    else:
        output.emit_text(episode.id)


@episode_app.command("list")
def episode_list(ctx: typer.Context, agent: AgentFilter = None, type_: TypeFilter = None,
                 since: SinceOpt = None,
                 tail: Annotated[Optional[int], typer.Option("--tail", help="Only the last N matching episodes.", metavar="N")] = None,
                 json: JsonOpt = False) -> None:
    """List episodes, oldest first; exit 1 after them when the ledger has damaged rows (named on stderr)."""
    store = store_from(ctx)
    found = episodes.list_episodes(store, agent=agent, episode_type=type_, since=since, tail=tail)
    if json:
        output.emit_json([e.to_dict() for e in found])
    else:
        output.emit_table([e.to_dict() for e in found], ["id", "ts", "agent", "type", "importance", "description"],
                          spare=("importance", "agent", "type", "ts"))  # narrow: the id holds the time (UTC)
    episodes.refuse_damaged(store)  # after printing, as `ledger rows` does (exit 1)


@episode_app.command("recall")
def episode_recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (Japanese or English).")],
    agent: AgentFilter = None,
    type_: TypeFilter = None,
    since: SinceOpt = None,
    k: Annotated[int, typer.Option("--k", help="How many episodes at most.")] = 10,
    mode: Annotated[Optional[str], typer.Option("--mode", help="keyword | vector | hybrid (default from memctl.toml, else hybrid).")] = None,
    min_score: Annotated[Optional[float], typer.Option("--min-score", help="Relevance floor, 0-1 (default: [recall] min_score, else 0.35).", metavar="X")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the raw signals, the relevance and the five factors.")] = False,
    no_log: Annotated[bool, typer.Option("--no-log", help="Do not record what was shown in the access log.")] = False,
    json: JsonOpt = False,
) -> None:
    """Same as `recall --source episodes` (weights: [recall.episode_weights]); exit 1 when nothing is relevant (a failure: 2)."""
    code = fast.recall_cmd(store_from(ctx), query, source="episodes", agent=agent, fact_type=type_, since=since, k=k,
                           mode=mode, min_score=min_score, explain=explain, no_log=no_log, json=json)
    if code:
        raise typer.Exit(code)


@episode_app.command("import")
def episode_import(
    ctx: typer.Context,
    format_: Annotated[str, typer.Argument(help="claude-code | codex | gemini | cursor | messages (JSONL with role, content, ts).", metavar="FORMAT")],
    files: Annotated[Optional[list[Path]], typer.Argument(help="Transcript files (.jsonl; Gemini's .json too).", metavar="[FILE]...", show_default=False)] = None,
    project: Annotated[Optional[Path], typer.Option("--project", help="Every transcript in DIR, or the ones the host keeps for the working directory DIR (docs/TRANSCRIPTS.md, per host).", metavar="DIR")] = None,
    hook: Annotated[bool, typer.Option("--hook", help="Read a Claude Code hook's JSON on stdin and import its transcript_path; always exits 0.")] = False,
    store: Annotated[Optional[str], typer.Option("--store", help="With --hook: the store to use when none is found from the hook input's cwd or CLAUDE_PROJECT_DIR (written by `agent install --store`).", metavar="DIR")] = None,
    tools: Annotated[bool, typer.Option("--tools", help="Also import tool calls (names) and failed tool results.")] = False,
    agent: Annotated[Optional[str], typer.Option("--agent", help="The agent column (default: MEMCTL_AGENT, else claude-code / agent).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be imported; write nothing.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Import agent transcripts as episodes: new records only, secrets redacted, all or nothing."""
    from .. import transcripts

    if hook:
        _import_hook(ctx, format_, tools, agent, no_commit, json, store)
        return
    if store is not None:
        from ..errors import BadInput

        raise BadInput("--store goes with --hook", hint="--root DIR names the store otherwise")
    if files and project is not None:
        from ..errors import BadInput

        raise BadInput("give transcript files or --project, not both")
    store = store_from(ctx, committing=not (no_commit or dry_run))
    paths = list(files or []) or (transcripts.project_transcripts(format_, project) if project is not None else [])
    result = transcripts.import_files(store, format_, paths, tools=tools, agent=agent, dry_run=dry_run,
                                      skip_bad_files=project is not None, commit_changes=not no_commit)
    _render_import(result, json)


def _import_hook(ctx: typer.Context, format_: str, tools: bool, agent: Optional[str], no_commit: bool, json: bool,
                 store: Optional[str]) -> None:
    """Claude Code's SessionEnd/Stop hook: never fail the session; say why on stderr instead."""
    import os
    import sys

    from .. import transcripts
    from ..fsutil import read_input
    from ..integrations import hooks  # the store every Claude Code hook uses (docs/AGENTS.md)

    os.environ.setdefault("MEMCTL_LOCK_TIMEOUT", "10")  # a hook is waited for: do not hang on a busy store
    found, problem = None, None
    try:
        text = read_input(sys.stdin.buffer, "the hook input on stdin").decode("utf-8", "replace")
        path = transcripts.hook_transcript(text)
        found = hooks.locate((ctx.obj or {}).get("root"), hooks.parse_input(text), store)
        if not hooks.checked():
            result = transcripts.import_files(hooks.open_found(found), format_, [path], tools=tools, agent=agent,
                                              commit_changes=not no_commit)
            _render_import(result, json, quiet=True)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the session
        problem = hooks.reason(exc)
        output.warn(f"episode import --hook: nothing imported: {problem}")
    if hooks.checked():
        hooks.say_checked(found, problem)


def _render_import(result, json: bool, *, quiet: bool = False) -> None:
    if json:
        output.emit_json(result.to_dict())
    elif not quiet:
        output.emit_table([f.to_dict() for f in result.files],
                          ["path", "imported", "already", "bad", "left_out", "torn", "problem"])
    for f in result.files:
        if f.problem:
            output.warn(f"skipped {f.problem}")
        elif f.bad:
            output.warn(f"{f.path}: {f.bad} bad record{'s' if f.bad != 1 else ''} skipped (first: {f.first_bad})")
    already = sum(f.already for f in result.files)
    hidden = result.redacted.get("private", 0)
    found = {k: v for k, v in result.redacted.items() if k != "private"}
    secrets = sum(found.values())
    parts = [f"{already} already imported"] if already else []
    if hidden:
        parts.append(f"{hidden} private span{'s' if hidden != 1 else ''} hidden")
    if secrets:
        parts.append(f"{secrets} secret{'s' if secrets != 1 else ''} redacted ("
                     + ", ".join(f"{k} {v}" for k, v in sorted(found.items())) + ")")
    verb = "would import" if result.dry_run else "imported"
    where = f" (commit {result.commit[:10]})" if result.commit else ""
    count = len(result.episodes)
    output.info(f"{verb} {count} episode{'s' if count != 1 else ''} from {len(result.files)} transcript"
                f"{'s' if len(result.files) != 1 else ''}{where}" + (f"; {'; '.join(parts)}" if parts else ""))
