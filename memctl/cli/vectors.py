"""near-dup, cache and embed-server commands (docs/EMBEDDINGS.md). Registers itself on the root app.

`memctl near-dup TEXT` and `memctl near-dup scan|calibrate ...` share one
group: a first word that is not a subcommand is the TEXT of `near-dup check`
(write `near-dup check scan`, or `near-dup [OPTIONS] -- scan`, to check the word "scan").
near-dup's exit codes: 0 new, 1 near-duplicate, 5 similar, 2 bad input or any other error, 3 not found, 4 lock timeout.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer
import typer.core

from .. import neardup, output
from . import fast
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from

DUPLICATE = fast.DUPLICATE


class _DefaultCheck(typer.core.TyperGroup):
    """A group whose unknown first word is the TEXT of its `check` command."""

    def parse_args(self, ctx, args):  # type: ignore[override]
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["check", *args]
        return super().parse_args(ctx, args)


near_dup_app = typer.Typer(
    cls=_DefaultCheck,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find near-duplicates by meaning: `near-dup TEXT --ledger NAME --column COL` (or --facts).\n\n"
    "`near-dup TEXT ...` is `near-dup check TEXT ...`: its options are in `memctl near-dup check --help`.\n\n"
    "Exit codes: 0 new, 1 near-duplicate, 5 similar (in the band below the threshold: worth a look), 2 bad input or "
    "another error (an empty text, a column the ledger does not have), 3 not found (the ledger), 4 lock timeout.",
)
cache_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The embedding cache under .memctl/: status, rebuild, clear.")
app.add_typer(near_dup_app, name="near-dup")
app.add_typer(cache_app, name="cache")

LedgerOpt = Annotated[Optional[str], typer.Option("--ledger", help="Compare with this ledger's column.", metavar="NAME")]
ColumnOpt = Annotated[Optional[str], typer.Option("--column", help="The ledger column (default: its unique column, else its only one).", metavar="COL")]
FactsOpt = Annotated[bool, typer.Option("--facts", help="Compare with the live facts (NAME: DESCRIPTION, as recall embeds them).")]
CacheLedgerOpt = Annotated[Optional[str], typer.Option("--ledger", help="Only this ledger's cache (with --column).", metavar="NAME")]
CacheColumnOpt = Annotated[Optional[str], typer.Option("--column", help="The ledger column (default: its unique column, else its only one).", metavar="COL")]
CacheFactsOpt = Annotated[bool, typer.Option("--facts", help="Only the live facts' cache.")]
ThresholdOpt = Annotated[Optional[float], typer.Option("--threshold", help="Near-duplicate at or above this score (default: the model's, from memctl.toml).")]


def _exit_2_on_error(func: Callable[..., Any]) -> Callable[..., Any]:
    """near-dup's contract: an error never exits 1 (see fast.near_dup_error)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            code = fast.near_dup_error(exc, bool(kwargs.get("json")))
            if code is None:
                raise
            raise typer.Exit(code) from None

    return wrapper


def _notes(notes: list[str]) -> None:
    for note in notes:
        output.info(note)


@near_dup_app.command("check")
@_exit_2_on_error
def check_cmd(
    ctx: typer.Context,
    text: Annotated[Optional[str], typer.Argument(help="The text to check.", show_default=False)] = None,
    ledger: LedgerOpt = None,
    column: ColumnOpt = None,
    facts: FactsOpt = False,
    top: Annotated[int, typer.Option("--top", help="How many hits to show.")] = neardup.DEFAULT_TOP,
    threshold: ThresholdOpt = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Check each line of stdin; one result per line.")] = False,
    similar: Annotated[Optional[float], typer.Option(
        "--similar", help="Lower edge of the similar band (exit 5), instead of the model's.", show_default=False)] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Each hit's verdict and judge's answer, and the bands.")] = False,
    judge_cmd: Annotated[Optional[str], typer.Option(
        "--judge-cmd", help="A command (any LLM CLI) that decides same/different for the top 3 hits at or above the "
        "band; its answers are cached ([neardup] judge_cmd in memctl.toml).", show_default=False)] = None,
    json: JsonOpt = False,
) -> None:
    """Compare TEXT with a ledger column or the facts: top hits with score, overlap, place.

    The verdict: near-duplicate at or above the threshold (exit 1), similar in the model's band
    below it (exit 5), new below that (exit 0)."""
    code = fast.near_dup_check(store_from(ctx), text, ledger=ledger, column=column, facts=facts, top=top,
                               threshold=threshold, stdin=stdin, json=json, similar=similar, explain=explain,
                               judge_cmd=judge_cmd)
    if code:
        raise typer.Exit(code)


@near_dup_app.command("scan")
@_exit_2_on_error
def scan_cmd(
    ctx: typer.Context,
    ledger: LedgerOpt = None,
    column: ColumnOpt = None,
    facts: FactsOpt = False,
    threshold: ThresholdOpt = None,
    json: JsonOpt = False,
) -> None:
    """Every pair of rows already there at or above the threshold (like `uniq -d`); exit 1 if any."""
    store = store_from(ctx)
    source = neardup.source_for(store, ledger=ledger, column=column, facts=facts)
    report = neardup.scan(store, source, threshold=threshold)
    _notes(report.notes)
    if json:
        output.emit_json(report.to_dict())
    else:
        output.emit_table(
            [{"score": f"{p.score:.3f}", "overlap": f"{p.overlap:.2f}", "a": p.a.where, "b": p.b.where, "text_a": p.a.text, "text_b": p.b.text} for p in report.pairs],
            ["score", "overlap", "a", "b", "text_a", "text_b"],
        )
        output.info(f"{len(report.pairs)} pair{'' if len(report.pairs) == 1 else 's'} at or above {report.threshold:g} among {report.rows} rows ({report.embedder}, threshold {report.threshold_origin})")
    if report.pairs:
        raise typer.Exit(DUPLICATE)


@near_dup_app.command("calibrate")
@_exit_2_on_error
def calibrate_cmd(
    ctx: typer.Context,
    pairs: Annotated[Path, typer.Argument(help="TSV: text_a<TAB>text_b<TAB>label (1 duplicate, 0 not).", metavar="PAIRS.tsv")],
    save: Annotated[bool, typer.Option("--save", help="Store the recommended threshold in memctl.toml for this model, and commit it.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Precision, recall and F1 across thresholds; recommends the best F1 with precision >= 0.9 (when none
    reaches it, the best F1, which --save refuses: exit 2)."""
    store = store_from(ctx, committing=save and not no_commit)
    result = neardup.calibrate(store, neardup.read_pairs(pairs))
    _notes(result.notes)
    saved = neardup.save_threshold(store, result, commit_changes=not no_commit) if save else None
    if json:
        output.emit_json({**result.to_dict(), "saved": saved})
    else:
        best = result.recommended
        shown = result.grid(0.05)
        output.emit_table(
            [{"threshold": f"{p.threshold:g}", "precision": f"{p.precision:.3f}", "recall": f"{p.recall:.3f}", "f1": f"{p.f1:.3f}", "mark": "recommended" if p == best else ""} for p in shown],
            ["threshold", "precision", "recall", "f1", "mark"],
        )
        if best:
            output.info(f"recommended threshold for {result.embedder}: {best.threshold:g} (precision {best.precision:.3f}, recall {best.recall:.3f}, F1 {best.f1:.3f}; {result.pairs} pairs)")
        if saved:
            output.info(f"saved in memctl.toml: [embedding.thresholds] {saved}")


@cache_app.command("status")
def cache_status(ctx: typer.Context, json: JsonOpt = False) -> None:
    """Which embedder and model are in use, and each cache: rows, dimension, last update."""
    store = store_from(ctx)
    status = neardup.cache_status(store)
    if json:
        output.emit_json(status)
        return
    using = status["embedder"]
    row = {"embedder": using.get("label", using["backend"]), "configured": using.get("configured", using["backend"]),
           "via": using.get("via", "in-process")}
    output.emit_table([row], list(row), plain=f"embedder\t{row['embedder']}\tconfigured: {row['configured']}\tvia: {row['via']}")
    _notes(using.get("notes", []))
    output.emit_table(
        [{**c, "embedder": f"{c['backend']} ({c['model']})", "size": f"{c['bytes'] / 1e6:.1f} MB", "problem": c["problem"] or ""} for c in status["caches"]],
        ["source", "embedder", "kind", "rows", "dim", "embedded_last", "updated", "size", "problem"],
        spare=("embedded_last", "dim", "kind", "size"),  # a narrow terminal: the model and the time whole
    )
    if status["pending"]:
        output.info(f"{status['pending']:,} texts embedded by a run that stopped (or is still running) wait in the "
                    "cache: the next command that needs them uses them")


@cache_app.command("rebuild")
def cache_rebuild(ctx: typer.Context, ledger: CacheLedgerOpt = None, column: CacheColumnOpt = None, facts: CacheFactsOpt = False, json: JsonOpt = False) -> None:
    """Re-embed one source from scratch, or build every cache from nothing, each text once."""
    from .. import recall

    store = store_from(ctx)
    source = neardup.source_for(store, ledger=ledger, column=column, facts=facts) if (ledger or facts or column) else None
    done = neardup.rebuild(store, source, more=recall.build_vectors)
    if json:
        output.emit_json(done)
    else:
        output.emit_table(done, ["source", "rows", "embedder"],
                          plain="".join(f"{d['source']}\t{d['rows']} rows\t{d['embedder']}\n" for d in done))
        if not done:
            output.info("no caches to rebuild")


@cache_app.command("clear")
def cache_clear(ctx: typer.Context, ledger: CacheLedgerOpt = None, column: CacheColumnOpt = None, facts: CacheFactsOpt = False, json: JsonOpt = False) -> None:
    """Delete the cache (all of it, or one source's). Nothing is lost: it is rebuilt on demand."""
    store = store_from(ctx)
    source = neardup.source_for(store, ledger=ledger, column=column, facts=facts) if (ledger or facts or column) else None
    removed = neardup.clear_cache(store, source)
    if json:
        output.emit_json({"removed": removed})
    else:
        output.emit_lines(removed)
        if not removed:
            output.info("nothing to clear")


@app.command("embed-server")
def embed_server(
    ctx: typer.Context,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the running server.")] = False,
    idle: Annotated[Optional[int], typer.Option("--idle", min=1, metavar="SECONDS",
                                                help="Exit after this many seconds without a request (a command asking the fact watch counts).")] = None,
    warm: Annotated[bool, typer.Option("--warm", help="Embed recall's facts before answering.")] = False,
    json: JsonOpt = False,
) -> None:
    """Keep the embedding model loaded behind a Unix socket in .memctl/ (foreground; Ctrl-C stops).

    While it runs, near-dup, remember's check and recall's vector part use it. The SessionStart
    hook starts one detached, with --warm --idle 1800 (docs/AGENTS.md).
    """
    store = store_from(ctx)
    if stop:
        info = neardup.stop_server(store)
        if json:
            output.emit_json({"stopped": info is not None, "server": info})
        else:
            output.info(f"stopped the embed server (pid {info.get('pid')})" if info else "no embed server is running")
        return

    def ready(info: dict[str, Any]) -> None:
        if json:
            output.emit_json({"ready": True, **info})
        else:
            output.info(f"embed server ready on {info['socket']} with {info['label']} (pid {info['pid']})")

    from .. import resident

    neardup.run_server(store, ready=ready, more=lambda embedder: resident.recall_handlers(store.root, embedder),
                       warm=(lambda embedder: resident.warm(store.root, embedder)) if warm else None, idle=idle)
    if not json:  # (Ctrl-C, SIGTERM, `--stop` or its idle time: as `ui stopped` says)
        output.info("embed server stopped")
