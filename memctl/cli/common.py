"""Options shared by every command, and the store they act on."""

from __future__ import annotations

from typing import Annotated

import typer

from ..store import Store, load_store, will_commit

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (for agents and scripts).")]
NoCommitOpt = Annotated[
    bool, typer.Option("--no-commit", help="Write files but do not commit (also MEMCTL_NO_COMMIT=1).")
]
AllowSecretsOpt = Annotated[
    bool, typer.Option("--allow-secrets", help="Store the text as given; by default a secret in it (an API key, a token, "
                       "a password) is redacted with a warning.")
]


def store_from(ctx: typer.Context, *, committing: bool = False) -> Store:
    """The store the command acts on. `committing`: the command writes and commits, so git that
    cannot commit (missing, failing, no repository) refuses it before anything is done (exit 1,
    unless commits are off: exit 0 means committed, docs/RELIABILITY.md)."""
    root = (ctx.find_root().obj or {}).get("root")
    store = load_store(root)
    _note_unfinished_merge(store, writing=committing)
    if committing:
        will_commit(store)
    return store


def _note_unfinished_merge(store: Store, writing: bool = False) -> None:
    """Reading works during an unfinished git merge; say so once (a write is refused by the store lock, in
    its own one line: `writing` says nothing more). Nothing is said while another memctl command holds the
    store lock: a sync merging now is no killed one."""
    from .. import gitstore, output
    from ..fsutil import lock_held

    what = gitstore.unfinished_operation(store.root)
    if what is not None and lock_held(store.cache_dir / "lock"):
        return
    if what == "merge" and gitstore.sync_merge_unfinished(store.root):
        output.warn("a `memctl sync` was killed inside its merge: files may hold only one side's version",
                    hint="memctl sync (or any memctl write, or memctl doctor --fix) undoes that merge, then sync merges again")
    elif what is not None and not writing:
        output.warn(f"a git {what} is unfinished in this store: files may hold conflict markers, and writes are refused",
                    hint=f"memctl doctor names them; finish it (fix, git add, git commit) or git {what} --abort")


def read_file_arg(source: str, option: str) -> tuple[bytes, str]:
    """The bytes of a file an option names (`-`: stdin), and the label to name it by. A file that is
    not there is NotFound (exit 3, as in every command); one that cannot be read is BadInput."""
    import sys
    from pathlib import Path

    from ..errors import BadInput, NotFound

    from ..fsutil import read_input

    if source == "-":
        return read_input(sys.stdin.buffer, "stdin"), "stdin"
    try:
        with open(Path(source), "rb") as handle:
            return read_input(handle, f"{option} {source}"), source
    except FileNotFoundError:
        raise NotFound(f"{option} {source}: no such file", hint="check the path (relative to the current folder)") from None
    except OSError as exc:
        raise BadInput(f"{option} {source}: {exc.strerror or exc}", hint="give a readable file, or - for stdin") from None
