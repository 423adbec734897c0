"""`recall --explain` for people: a block per hit that fits the terminal, instead of one wide table.

    1. deploy-window                                                     score 0.795
       project | memory/deploy-window.md
       Deploys happen on Tuesdays after the freeze
       signals  keyword 1.000   bm25    3.210   vector  0.734   cosine  0.871
                window      -
       factors  relevance  1.000   importance 0.600   confidence 0.700
                recency    1.000   frequency  0.000

Widths are display cells (a kana or kanji takes two, as rich measures them); text is wrapped at
spaces, or between characters where it has none (Japanese), never inside one, nor before `。` or
after `「` (memctl/linebreak.py). Only ASCII is added (no "·" or "…", which East Asian terminals
may draw two cells wide). Only used on a terminal; a pipe gets the TSV lines of
`fast.EXPLAIN_COLUMNS`, as before.
"""

from __future__ import annotations

from typing import Any

SIGNALS = ("keyword", "bm25", "vector", "cosine", "window")
FACTORS = ("relevance", "importance", "confidence", "recency", "frequency")
GAP = "   "  # between two label-value cells of a grid line


def blocks(rows: list[dict[str, Any]], width: int) -> list[str]:
    """The lines for these hits (JSON rows of output.hits_json with explain), a blank line between hits;
    no line wider than `width` cells (at least 24 are assumed)."""
    width = max(width, 24)
    indent = " " * (len(str(len(rows))) + 2)  # "1. ", or "10. " when there are ten or more
    lines: list[str] = []
    for row in rows:
        if lines:
            lines.append("")
        lines += _block(row, width, indent)
    return lines


def _block(row: dict[str, Any], width: int, indent: str) -> list[str]:
    from rich.cells import cell_len  # noqa: PLC0415  (rich only on a terminal)

    from ..tsv import visible  # noqa: PLC0415  (an ESC in a row another clone pushed is shown, not obeyed)

    score = f"score {row['score']:.3f}"
    name = visible(str(row["name"]))
    rank = f"{row['rank']}.".ljust(len(indent))
    if cell_len(name) + 2 + len(score) <= width - len(indent):
        lines = [rank + name + " " * (width - len(indent) - cell_len(name) - len(score)) + score]
    else:  # a long name keeps every character: on lines of its own, the score below it
        lines = [(rank if i == 0 else indent) + part for i, part in enumerate(_wrap(name, width - len(indent)))]
        lines.append(indent + score)
    where = " | ".join(part for part in (row.get("type"), row.get("status") if row.get("status") != "live" else "",
                                         row.get("path")) if part)
    room = width - len(indent)
    for text in (where, row.get("description") or "", f"-> {row['outcome']}" if row.get("outcome") else ""):
        lines += [indent + part for part in _wrap(visible(text), room)]
    lines += _grid("signals", [(k, row["signals"].get(k)) for k in SIGNALS], width, indent)
    lines += _grid("factors", [(k, row["factors"].get(k)) for k in FACTORS], width, indent)
    return lines


def _grid(title: str, pairs: list[tuple[str, float | None]], width: int, indent: str) -> list[str]:
    """`title` then label-value cells, as many a line as fit; values right-aligned, "-" for none."""
    shown = [(label, "-" if value is None else f"{value:.3f}") for label, value in pairs]
    label_w = max(len(label) for label, _ in shown)
    value_w = max(len(value) for _, value in shown)
    cells = [f"{label.ljust(label_w)} {value.rjust(value_w)}" for label, value in shown]
    lead = f"{indent}{title}  "
    head: list[str] = []
    if len(lead) + len(cells[0]) > width:  # a narrow terminal: the title on a line of its own
        head, lead = [indent + title], indent + "  "
    per_line = max(1, (width - len(lead) + len(GAP)) // (len(cells[0]) + len(GAP)))
    return head + [(lead if i == 0 and not head else " " * len(lead)) + GAP.join(cells[i:i + per_line])
                   for i in range(0, len(cells), per_line)]


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells: at spaces where there are some, else between characters,
    never where the Japanese rule forbids (memctl.linebreak: no line starting with `。` or `」`)."""
    from rich.cells import cell_len  # noqa: PLC0415

    from ..linebreak import wrap  # noqa: PLC0415

    return wrap(text, width, cell_len)
