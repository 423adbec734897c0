"""The CLI reference (docs/CLI.md), generated from the commands' own --help."""

from __future__ import annotations

import os


def _commands(command, path):
    yield path, command
    sub = getattr(command, "commands", None)
    if sub:
        for name in sorted(sub):
            if not sub[name].hidden:
                yield from _commands(sub[name], [*path, name])


def render() -> str:
    import typer.main
    from typer.testing import CliRunner

    from .root import load_commands

    app = load_commands()
    root = typer.main.get_command(app)
    runner = CliRunner()
    env = {"COLUMNS": "100", "TERM": "dumb", "MEMCTL_FORCE_TTY": "0"}
    parts = [
        "# memctl CLI reference\n",
        "Generated from `--help` by `python scripts/gen_cli_docs.py`; `tests/test_cli_reference.py` fails when it drifts.\n",
    ]
    for path, _command in _commands(root, []):
        result = runner.invoke(app, [*path, "--help"], env=env, terminal_width=100)
        title = " ".join(["memctl", *path])
        parts.append(f"## `{title}`\n\n```\n{result.stdout.rstrip()}\n```\n")
    from ..output import TABLE_ROWS, WHOLE_CELL, WRAPPED_ROOM

    parts.append(OUTPUT.format(rows=TABLE_ROWS, whole=WHOLE_CELL, room=WRAPPED_ROOM))
    parts.append(exit_table())
    return "\n".join(parts)


OUTPUT = """## Output

stdout carries data, stderr everything else (notes, warnings, progress, errors). Piped, a command that
lists things prints one TAB-separated line per item with no header (fields escaped as in a ledger:
`\\\\ \\t \\n \\r`), for `grep`, `cut` and `sort`; `ledger dups` and `ledger stats` print what
`cut | sort | uniq -d` / `uniq -c` would. On a terminal (or with `MEMCTL_FORCE_TTY=1`) the same items
are a table with a header row, sized to the terminal and measured in display cells (a kana or kanji
is two), a table with no rows prints nothing, and past {rows:,} rows the header line comes above the
piped lines, as it does on a terminal too narrow for the frame of the columns it would show and
four cells each. A column whose every cell is empty (an episode's agent nobody set) is left out
there, header too, and no column is wider than its widest cell or header. One-word cells (ids,
times, names, types, paths, numbers: up to {whole} cells) are never broken across lines while the
others (descriptions) wrap beside them (Japanese by the usual rule: no line starts with `。`, `」` or a
small kana, none ends with `「`); where they would leave the description fewer than {room}
cells, the columns a command can spare go first, least useful first (`recall`: the source's
description, relevance, rank, score, type, then a fact's path or a document's heading; `episode
list`: importance, agent, type, then the time, which the id holds; `list`: path;
`cache status`: embedded_last, dim, kind, size). Where the one-word columns still cannot all stay
whole, the table drops the space inside its outer edges, then the widest folds first (a path
before the name it holds); where even folded columns do not fit, each gets its share of the width,
headers whole where they fit, and the table never runs past the terminal's edge. Piped and with
`--json` every column is there, as before. `recall --explain` and `episode recall --explain` print a block per hit there: the
rank, name and score, the type and path, the description wrapped, then the raw signals and the five
factors as labelled values, as many a line as the width allows (80 columns and narrower included).
`--json` prints JSON everywhere (docs/JSON.md).
"""


def exit_table() -> str:
    """errors.BY_CONDITION as a Markdown table."""
    from .. import errors

    rows = "".join(f"| {text} | {code} |\n" for _key, text, code in errors.BY_CONDITION)
    return ("## Exit codes by condition\n\n"
            "The same condition gives the same exit code in every command (`memctl/errors.py`, `BY_CONDITION`; "
            "`tests/test_validation.py` checks each one through every command that can meet it). "
            "`near-dup` keeps 1 for \"near-duplicate\", and `recall` and `episode recall` for \"nothing relevant\" (as grep), so what is 1 below is 2 there; `hook` exits 0 whatever happens as it runs (a store, a model or git missing; an option it does not take, such as `--json`, is still a usage error: 2). "
            "Ctrl-C exits 130 and a SIGTERM while texts are embedded 143 (128 + the signal, as a shell reports it), "
            "each with one line saying what was kept (docs/EMBEDDINGS.md, \"The cache\"). While a judge or LLM command "
            "runs (`near-dup --judge-cmd`, `distill --llm-cmd`), a SIGTERM (143) or SIGHUP "
            "(129) to memctl kills that command's process group first: it never outlives memctl. So does "
            "`sync` with its git and that git's ssh (a remote that hangs): Ctrl-C, a SIGTERM or a SIGHUP "
            "stops them, and sync exits with one line (`interrupted`, `terminated`).\n\n"
            "| condition | exit code |\n|---|---|\n" + rows)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("COLUMNS", "100")
    print(render(), end="")
