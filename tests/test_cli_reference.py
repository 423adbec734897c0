"""docs/CLI.md is generated from --help; it must not drift (STYLE.md habit 10)."""

from pathlib import Path

from memctl.cli.reference import render

DOC = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"


def test_cli_reference_is_current():
    assert DOC.read_text(encoding="utf-8") == render(), "docs/CLI.md is stale: run python scripts/gen_cli_docs.py"


def test_every_command_has_help():
    text = render()
    for block in text.split("## `")[1:]:
        title, _, body = block.partition("`")
        usage_and_help = body.split("Options:")[0]
        assert len([l for l in usage_and_help.splitlines() if l.strip()]) >= 3, f"{title} lacks a help text"
