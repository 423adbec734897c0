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
    parts.append(exit_table())
    return "\n".join(parts)


def exit_table() -> str:
    """errors.BY_CONDITION as a Markdown table."""
    from .. import errors

    rows = "".join(f"| {text} | {code} |\n" for _key, text, code in errors.BY_CONDITION)
    return ("## Exit codes by condition\n\n"
            "The same condition gives the same exit code in every command (`memctl/errors.py`, `BY_CONDITION`; "
            "`tests/test_validation.py` checks each one through every command that can meet it). "
            "`near-dup` keeps 1 for \"near-duplicate\", so what is 1 below is 2 there; `hook` always exits 0. "
            "Ctrl-C exits 130 and a SIGTERM while texts are embedded 143 (128 + the signal, as a shell reports it), "
            "each with one line saying what was kept (docs/EMBEDDINGS.md, \"The cache\").\n\n"
            "| condition | exit code |\n|---|---|\n" + rows)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("COLUMNS", "100")
    print(render(), end="")
