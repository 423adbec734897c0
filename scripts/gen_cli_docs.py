"""Regenerate docs/CLI.md from the commands' --help. Usage: python scripts/gen_cli_docs.py"""

from pathlib import Path

from memctl.cli.reference import render

target = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"
target.write_text(render(), encoding="utf-8")
print(f"wrote {target}")
