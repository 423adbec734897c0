"""`memctl source add|list|remove|status|index`: document sources (docs/SOURCES.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..tsv import format_record
from .root import app
from .common import AllowSecretsOpt, JsonOpt, NoCommitOpt, store_from

source_app = typer.Typer(
    help="Document sources: notes, docs and code indexed as chunks that recall answers from (docs/SOURCES.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(source_app, name="source")

NameArg = Annotated[str, typer.Argument(help="Source name: a-z or 0-9 first, then a-z 0-9 - _.", metavar="NAME")]


@source_app.command("add")
def add(
    ctx: typer.Context,
    name: NameArg,
    paths: Annotated[list[str], typer.Argument(help="Globs or folders, inside or outside the store (~ allowed); quote the globs.",
                                               metavar="PATH...")],
    description: Annotated[str, typer.Option("--description", "-d", help="One line shown with every hit.")] = "",
    kind: Annotated[str, typer.Option("--kind", help="markdown | text | code.")] = "markdown",
    exclude: Annotated[Optional[list[str]], typer.Option("--exclude", help="A glob to leave out (repeatable).", metavar="GLOB")] = None,
    chunk_size: Annotated[Optional[int], typer.Option("--chunk-size", help="Characters per chunk (default 300).", metavar="N")] = None,
    overlap: Annotated[Optional[int], typer.Option("--overlap", help="Characters carried into the next chunk (default 60).", metavar="N")] = None,
    prompt: Annotated[bool, typer.Option("--prompt", help="Let the per-prompt hook show this source's chunks.")] = False,
    no_commit: NoCommitOpt = False,
    allow_secrets: AllowSecretsOpt = False,
    json: JsonOpt = False,
) -> None:
    """Declare a source in memctl.toml (its files stay where they are); then run `memctl source index`."""
    from .. import chunking, sources

    store = store_from(ctx, committing=not no_commit)
    made = sources.add(store, sources.Source(
        name, tuple(paths), tuple(exclude or ()), description, kind,
        chunking.DEFAULT_SIZE if chunk_size is None else chunk_size,
        chunking.DEFAULT_OVERLAP if overlap is None else overlap, prompt), commit_changes=not no_commit,
        allow_secrets=allow_secrets)
    for pattern in sources.missing(store, made):
        output.warn(f"{pattern}: no such file or folder (yet): this source finds nothing there until it exists",
                    hint=f"check the path, or memctl source remove {made.name}")
    if json:
        output.emit_json({"name": made.name, "kind": made.kind, "description": made.description, "paths": list(made.paths)})
    else:
        output.emit_text(made.name)
        output.info(f"index it with: memctl source index {made.name}")


@source_app.command("list")
def list_(ctx: typer.Context, json: JsonOpt = False) -> None:
    """The declared sources: name, kind, description, paths."""
    from .. import sources

    rows = [{"name": s.name, "kind": s.kind, "description": s.description, "paths": " ".join(s.paths)}
            for s in sources.declared(store_from(ctx)).values()]
    if json:
        output.emit_json([{**r, "paths": r["paths"].split(" ")} for r in rows])
    else:
        output.emit_table(rows, ["name", "kind", "description", "paths"])


@source_app.command("remove")
def remove(ctx: typer.Context, name: NameArg, no_commit: NoCommitOpt = False, json: JsonOpt = False) -> None:
    """Remove a source from memctl.toml and its chunks from the index (its files are not touched)."""
    from .. import docindex, sources

    store = store_from(ctx, committing=not no_commit)
    sources.remove(store, name, commit_changes=not no_commit)
    docindex.drop(store, name)
    if json:
        output.emit_json({"removed": name})
    else:
        output.emit_text(name)


@source_app.command("index")
def index(
    ctx: typer.Context,
    names: Annotated[Optional[list[str]], typer.Argument(help="Sources to index (default: all).", metavar="[NAME...]")] = None,
    no_embed: Annotated[bool, typer.Option("--no-embed", help="Chunk only; recall ranks passages without vectors by their keywords until a run embeds them.")] = False,
    json: JsonOpt = False,
) -> None:
    """Bring the chunks up to date with the files: only new and changed files are read, only new chunks embedded."""
    from .. import docindex

    reports = docindex.index(store_from(ctx), names or None, embed=not no_embed)
    if not reports:  # (a run that did nothing, in silence, looked like one that worked)
        output.info("no source is declared: nothing to index (memctl source add NAME PATH)")
    if json:
        output.emit_json([r.to_dict() for r in reports])
        return
    output.emit_table([{"source": r.name, "files": r.files, "chunks": r.chunks, "changed": r.changed,
                        "removed": r.removed, "skipped": len(r.skipped)} for r in reports],
                      ["source", "files", "chunks", "changed", "removed", "skipped"])
    if any(r.skipped for r in reports):
        output.info("skipped files: memctl source status")


@source_app.command("status")
def status(ctx: typer.Context, json: JsonOpt = False) -> None:
    """Each source's files and chunks, files changed since the last index run, and one line per skipped file."""
    from .. import docindex

    found = docindex.status(store_from(ctx))
    if json:
        output.emit_json([s.to_dict() for s in found])
        return
    output.emit_table([{"source": s.source.name, "files": s.files, "chunks": s.chunks,
                        "stale": s.stale if s.indexed is not None else "never indexed" if not s.files else "first run not finished", "skipped": len(s.skipped)}
                       for s in found], ["source", "files", "chunks", "stale", "skipped"])
    # one line per skipped file, its fields escaped as a ledger's (a name may hold a TAB or a newline)
    output.emit_content("".join(format_record((s.source.name, "skipped", f"{k.shown}: {k.reason}")) + "\n"
                                for s in found for k in s.skipped))
