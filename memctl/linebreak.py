"""Text broken into lines for a terminal, as memctl wraps it itself (`recall --explain`'s blocks, table cells).

English breaks at spaces, as rich does; Japanese between any two characters, except where the usual
rule (kinsoku) forbids it: no line starts with closing punctuation, a small kana or the prolonged sound
mark (`。`, `、`, `）`, `」`, `ッ`, `ー`), and no line ends with an opening bracket (`（`, `「`). Such a
character is kept with its neighbour, so the break moves back one character (the character before `。`
goes down with it): a line is never wider than asked, only a cell or two shorter. Widths are display
cells (a kana or kanji takes two). A word or a glued run wider than a line is cut between characters.
"""

from __future__ import annotations

from typing import Callable

# Not at the start of a line: closing brackets and punctuation, small kana, iteration and prolonged sound marks.
NO_START = frozenset(
    "、。，．,.・：；:;？！?!‼⁇⁈⁉）〕］｝〉》」』】〙〗〟｠)]}’”»"
    "ヽヾゝゞ々〻ー―‐゠–〜～…‥"
    "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶㇰㇱㇲㇳㇴㇵㇶㇷㇸㇹㇺㇻㇼㇽㇾㇿ"
    "｡､･ｰｧｨｩｪｫｯｬｭｮ｣"
)
# Not at the end of a line: opening brackets.
NO_END = frozenset("（〔［｛〈《「『【〘〖〝｟([{‘“«｢")


def wrap(text: str, width: int, cell_len: Callable[[str], int]) -> list[str]:
    """`text` in lines of at most `width` cells (each line's trailing spaces dropped); a line break in
    `text` is a line break here too. No lines for no text. `cell_len`: the terminal's width of a text
    (the output layer passes rich's, so a line is as wide as the table that holds it says)."""
    if not text:
        return []
    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines += _wrap_line(paragraph, max(width, 1), cell_len)
    return lines


def _wrap_line(text: str, width: int, cell_len: Callable[[str], int]) -> list[str]:
    lines: list[str] = []
    line = ""
    for unit in _glued(_units(text, cell_len)):
        if unit.isspace():
            if line or not lines:  # spaces between words; at a break they go (as rich drops them)
                line += unit
            continue
        if cell_len(line) + cell_len(unit) <= width:
            line += unit
            continue
        if line.strip():
            lines.append(line.rstrip())
        line = ""
        while cell_len(unit) > width:  # a word (a path, a URL) or a glued run wider than a line: cut it
            cut = _fit(unit, width, cell_len)
            lines.append(unit[:cut])
            unit = unit[cut:]
        line = unit
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


def _units(text: str, cell_len: Callable[[str], int]) -> list[str]:
    """Runs of spaces, runs of narrow characters (English words), and each wide character on its own;
    a character of no width (a combining mark) stays with the one before it."""
    units: list[str] = []
    kinds: list[str] = []
    for char in text:
        cells = cell_len(char)
        kind = "space" if char.isspace() else "wide" if cells > 1 else "narrow"
        if units and ((not cells and kind != "space") or kind == kinds[-1] != "wide"):
            units[-1] += char
        else:
            units.append(char)
            kinds.append(kind)
    return units


def _glued(units: list[str]) -> list[str]:
    """`units` with no break where kinsoku forbids one: a unit that may not start a line joins the one
    before it, an opening bracket the one after it (spaces between them are a break, and stay)."""
    glued: list[str] = []
    join_next = False
    for unit in units:
        if glued and not unit.isspace() and (join_next or unit[0] in NO_START) and not glued[-1].isspace():
            glued[-1] += unit
        else:
            glued.append(unit)
        join_next = not unit.isspace() and unit[-1] in NO_END
    return glued


def _fit(text: str, width: int, cell_len: Callable[[str], int]) -> int:
    """How many characters of `text` fit in `width` cells (at least one)."""
    used = 0
    for at, char in enumerate(text):
        used += cell_len(char)
        if used > width:
            return max(at, 1)
    return len(text)
