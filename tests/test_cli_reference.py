"""docs/CLI.md is generated from --help; it must not drift (scripts/gen_cli_docs.py regenerates it)."""

from pathlib import Path

from memctl.cli.reference import render

DOC = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"


def test_cli_reference_is_current():
    assert DOC.read_text(encoding="utf-8") == render(), "docs/CLI.md is stale: run python scripts/gen_cli_docs.py"


def commands_without_help(app) -> list[str]:
    """Every command and group (by path) whose help text, its docstring or help=, is empty."""
    import typer.main

    missing = []

    def walk(cmd, path):
        if not (cmd.help or "").strip():
            missing.append(path)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if not getattr(sub, "hidden", False):
                walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "memctl")
    return missing


def test_every_command_has_help():
    from memctl.cli.root import load_commands

    assert commands_without_help(load_commands()) == []


def test_a_command_without_a_docstring_is_caught():
    import typer

    app = typer.Typer(help="root")
    group = typer.Typer(help="a group")
    app.add_typer(group, name="grp")

    @app.command("documented")
    def documented() -> None:
        """Does something."""

    @group.command("bare")
    def bare() -> None:
        pass

    assert commands_without_help(app) == ["memctl grp bare"]
