"""The CLI's wording of library errors: where the library names an argument or a
situation, the command line names its option.

Library messages speak to Python callers too, so they never name a flag
(tests/test_python_api.py checks). An error's `arg` (the argument at fault) is
shown as its option; its `kind` picks the CLI's own message or hint below.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import MemctlError

# An argument whose option is not "--" + its name with "-" for "_".
FLAGS = {"fact_type": "--type", "include_all": "--all", "numbers": "--from-json"}

# kind -> the message, where the library's names two arguments.
MESSAGES = {
    "facts-or-ledger": "give either --facts or --ledger, not both",
    "column-without-ledger": "--column names a column of the ledger --ledger NAME names: give both",
    "root-or-store": "give --root (always that store) or --store (when none is found), not both",
}

# kind -> the hint, formatted with the error's details.
HINTS = {
    "no-fact": "`memctl list --all` shows every fact",
    "no-archived-fact": "`memctl list --all` shows archived facts",
    "no-live-fact": "`memctl list` shows live facts",
    "description-required": "memctl remember NAME --description TEXT",
    "description-empty": "pass --description TEXT",
    "description-lines": "put details in --body, --why or --how",
    "description-long": "keep it to one line of about 150 (what MEMORY.md shows); put details in --body",
    "fact-exists": "use --update to change it, or pick another name",
    "nothing-to-update": "drop --update to create it",
    "same-description": "use --update on that fact, --supersedes it, or --force",
    "same-description-update": "give this fact a description of its own, forget one of the two, or --force",
    "similar-fact": "check it; --update or --supersedes it, or drop --strict",
    "index-edited": "commit or discard them first",
    "uncommitted": "commit or discard them first (git -C {store} status)",
    "no-git": "install git (or name it in MEMCTL_GIT)",
    "no-git-init": "install git (or name it in MEMCTL_GIT), or use --no-git",
    "git-fails": "check that this git runs (MEMCTL_GIT, PATH)",
    "not-a-repo": "run `memctl init {store}` (git init, and a first commit of what is there)",
    "no-store-dir": "check --root / MEMCTL_ROOT, or run `memctl init DIR`",
    "memory-folder": "pass --root {store} (or MEMCTL_ROOT), the store's own folder",
    "inside-store": "use that store (memctl --root {store} ...), or run `memctl init DIR` with a DIR outside it",
    "no-store": "run `memctl init`, or pass --root DIR",
    "no-store-found": "memctl agent install claude-code --store DIR names the store to use then",
    "installed-store-gone": "put it back, or name its new place: memctl agent install claude-code --store DIR",
    "install-no-store": "run `memctl init {memory}` (this project's Claude Code memory), or pass --store DIR",
    "no-store-named": "check --store, or create the store there first: memctl init DIR",
    "no-ledger": "memctl ledger create {name} --columns a,b,c",
    "own-ledger-append": "append to a ledger of yours: memctl ledger create NAME --columns a,b,c makes one",
    "adopt-ledger": "memctl ledger adopt {path} --columns a,b,c",
    "check-columns": "check --columns; nothing was declared",
    "which-column": "add --column COL (one of {columns})",
    "no-source": "add --ledger NAME --column COL, or --facts",
    "no-state": "memctl state update",
    "which-remote": "pass --remote NAME",
    "one-copy": "name one copy: memctl resolve NAME.HASH --keep ...",
    "no-transcript": "give FILE.jsonl arguments or --project DIR",
    "not-a-command": "memctl --help lists the commands",
    "no-crontab": "install cron (the package cron on Debian and Ubuntu, cronie on Fedora), or run the lines "
                  "`memctl schedule render` prints from another scheduler",
    "no-launchctl": "launchd is macOS's scheduler: elsewhere, --scheduler cron",
    "server-running": "memctl embed-server --stop",
    "not-procedure": "create one with `memctl remember NAME --type procedure`",
    "tracked-local-state": "run `memctl doctor --fix` (it untracks .memctl/ and removes what came in), then the command again",
    "untrusted": "review it with `memctl trust --list`, then approve it with `memctl trust`",
    "not-a-setting": "`memctl trust --list` shows them",
    "expect-empty": "the digest `memctl trust --list` (or `memctl schedule install --dry-run`) ends with",
    "trust-changed": "review it again: `memctl trust --list`",
    "jobs-changed": "review it again: `memctl schedule install --dry-run`",
    "secret-in-file": "take it out of {file} (adopting commits the file as it is, and sync pushes it), or adopt it as it is "
                      "with --allow-secrets",
}

# kind -> what a command with --no-commit adds to its hint (the others have no such way round).
NO_COMMIT_HINTS = {
    "index-edited": ", or use --no-commit",
    "uncommitted": ", or use --no-commit (MEMCTL_NO_COMMIT=1)",
    "no-git": ", or use --no-commit / MEMCTL_NO_COMMIT=1",
    "git-fails": ", or use --no-commit / MEMCTL_NO_COMMIT=1",
    "not-a-repo": ", or use --no-commit / MEMCTL_NO_COMMIT=1",
}


def flag(arg: str) -> str:
    return FLAGS.get(arg, "--" + arg.replace("_", "-"))


def _with_flag(text: str, arg: str | None) -> str:
    if not arg or not re.fullmatch(r"[a-z][a-z_]*", arg):
        return text
    return re.sub(rf"(?<![\w-]){re.escape(arg)}(?![\w-])", flag(arg), text, count=1)


def worded(exc: MemctlError, no_commit: bool = True) -> tuple[str, str | None]:
    """(message, hint) as the command line says them; `no_commit`: whether the command has --no-commit (the
    git hints offer it only then)."""
    message = MESSAGES.get(exc.kind or "") or _with_flag(exc.message, exc.arg)
    try:  # an error raised without the details its CLI hint names keeps the library's hint
        hint: str | None = HINTS[exc.kind or ""].format(**exc.details) + (NO_COMMIT_HINTS.get(exc.kind or "", "") if no_commit else "")
    except (KeyError, IndexError):
        hint = _with_flag(exc.hint, exc.arg) if exc.hint else exc.hint
    if exc.kind == "no-state" and exc.details.get("scope"):
        hint = f"{hint} --name {exc.details['scope']}"
    if exc.kind == "no-store":
        hint = _installed_store_hint() or hint
    return message, hint


def _installed_store_hint() -> str | None:
    """In a project whose agent install names a store elsewhere: that store, not `memctl init` (which would
    make a second, empty store here)."""
    import shlex

    from ..integrations.claude_code import installed_store

    try:
        store = installed_store(Path.cwd())
    except OSError:  # the working directory was removed
        return None
    if store is None:
        return None
    return f"this project's agent install uses the store {store}: pass --root {shlex.quote(store)} (or set MEMCTL_ROOT)"


def one_line(exc: MemctlError, no_commit: bool = True) -> str:
    """`exc.one_line()` in the CLI's words (`no_commit`: as worded())."""
    message, hint = worded(exc, no_commit=no_commit)
    text = message.replace("\n", " ")
    return text + (f" (hint: {hint})" if hint else "")
