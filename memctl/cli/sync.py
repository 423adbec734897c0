"""sync, resolve, merge-driver: one memory over several machines (docs/SYNC.md).

With nothing to do, `memctl sync` is answered by fastsync.py before this module is imported.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import errors, output
from . import fastsync
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from


@app.command()
def sync(
    ctx: typer.Context,
    remote: Annotated[Optional[str], typer.Option("--remote", help="Git remote (default: the branch's upstream, else origin).", metavar="NAME")] = None,
    no_push: Annotated[bool, typer.Option("--no-push", help="Fetch and merge only.")] = False,
    setup: Annotated[bool, typer.Option("--setup", help="Only set this clone up: merge drivers, git's untracked cache (and commit .gitattributes).")] = False,
    json: JsonOpt = False,
) -> None:
    """Fetch, merge and push the store; memctl's files are resolved by meaning, never with markers."""
    from .. import sync as sync_mod

    store = store_from(ctx, committing=True)
    with errors.stops_raise(signal.SIGTERM, signal.SIGHUP):  # (its git and ssh are stopped with it: gitstore._git)
        result = sync_mod.sync(store, remote=remote, push=not no_push, setup_only=setup)
    if json:
        fastsync.summary(result, json=True)
        return
    if setup:
        output.info("set up: " + ", ".join(result.setup) if result.setup else "merge drivers already set up; nothing changed")
        return
    fastsync.summary(result, json=False)


@app.command()
def resolve(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The fact (or its conflict copy, NAME.HASH) that `memctl conflicts` lists.", metavar="NAME")],
    keep: Annotated[str, typer.Option("--keep", help="local (the version in place), remote (the copy), or both (the copy as NAME-2).", metavar="local|remote|both")],
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Settle a fact that a merge changed on both sides."""
    from .. import sync as sync_mod

    store = store_from(ctx, committing=not no_commit)
    done = sync_mod.resolve(store, name, keep, commit_changes=not no_commit)
    if json:
        output.emit_json({"name": done.name, "keep": done.keep, "path": done.path, "removed": done.removed, "commit": done.commit})
    else:
        output.emit_text(done.path)
        kept = {"local": "the version in place", "remote": f"the conflict copy's version, now in {done.path}",
                "both": f"both, the conflict copy's version as {done.path}"}[done.keep]  # (the copy may be this machine's)
        output.info(f"resolved {done.name}: kept {kept}; {done.removed} removed (git history keeps it)")


@app.command("merge-driver", hidden=True)
def merge_driver(
    kind: Annotated[str, typer.Argument(help="index | state | ledger | fact | archive.")],
    base: Annotated[Path, typer.Argument(help="%O: the merge base.")],
    ours: Annotated[Path, typer.Argument(help="%A: ours; the result is written here.")],
    theirs: Annotated[Path, typer.Argument(help="%B: theirs.")],
    path: Annotated[str, typer.Argument(help="%P: the file's path in the work tree.")] = "",
) -> None:
    """Git merge driver: resolve one of memctl's files (registered by init and `sync --setup`)."""
    from .. import sync as sync_mod

    sync_mod.run_driver(kind, base, ours, theirs, path or str(ours))
