"""Regenerate the shape tables in docs/JSON.md from memctl/jsonshape.py. Usage: python scripts/gen_json_docs.py"""

from pathlib import Path

from memctl.jsonshape import render_markdown

BEGIN = "<!-- shapes:begin (generated: python scripts/gen_json_docs.py) -->\n"
END = "<!-- shapes:end -->"

target = Path(__file__).resolve().parent.parent / "docs" / "JSON.md"
text = target.read_text(encoding="utf-8")
head, rest = text.split(BEGIN, 1)
tail = rest[rest.index(END):]
target.write_text(head + BEGIN + render_markdown() + tail, encoding="utf-8")
print(f"wrote {target}")
