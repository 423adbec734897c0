"""Chunks of a document: pieces of about `size` characters that respect the text (docs/SOURCES.md).

Markdown is split at headings, then at paragraphs (blank lines); a fenced code
block is one paragraph, never cut. A paragraph longer than `size` is cut at
sentence ends: Japanese 。！？ (with a closing bracket that follows them), English
. ! ? before a space; a "sentence" still longer than `size` (a table row, a
minified line) is cut by characters. Paragraphs and sentences are packed
greedily into chunks of at most `size` characters; a new chunk of the same
section starts with the previous chunk's last units when they fit in `overlap`
characters. Chunks never span two sections, and each carries the path of
headings above it. Plain text is the same without headings and fences.

Code: Python is split at its top-level statements by `ast` (a def or class is a
unit with its decorators; the statements between them are grouped), JavaScript,
TypeScript, Go and Rust at lines that start a definition in column 0 (a regular
expression), anything else, or Python that does not parse, by windows of
lines. A definition longer than `size` is cut into windows of lines.

Every chunk knows its line range (1-based, inclusive) and the hash of the text
that is indexed: the heading path, a line break, then the chunk's text.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

try:  # hashlib would load OpenSSL for a blake2b it does not need (as in rindex)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

KINDS = ("markdown", "text", "code")
DEFAULT_SIZE = 300  # characters; chosen on JSQuAD by bench/bench_docs.py (docs/SOURCES.md "Measured")
DEFAULT_OVERLAP = 60
MIN_SIZE = 20
MAX_SIZE = 1_000_000  # what `source add` takes (a 20-digit size was written); a hand-written one is the hand's
HEADING_SEP = " > "
RULES = 4  # raised whenever a change of these rules moves chunk boundaries: indexes re-chunk (docindex._config)
# 3: a section holding its heading alone is no chunk (its title is in the heading path of those below);
#    a markdown file's YAML front matter is no text
# 4: a setext heading (a paragraph underlined with === or ---) is a heading; what joins the units
#    of a chunk counts towards its size (chunks passed `chunk_size` by a few characters)

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*\r?$")  # under a paragraph: `=` a level 1 heading, `-` level 2
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:[-*+>|]|\d{1,9}[.)])(?:[ \t]|$)")  # a list item, a quote, a table row
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A sentence ends after 。！？, or after ! ? right after Japanese text (and the closing brackets or
# quotes right after them), or after . ! ? (and closing quotes or brackets) followed by white space:
# an ASCII `!` or `?` inside English words or code (`!src/**`, `a?b`) ends nothing.
# Compiled on first use: its class of kana/kanji costs ~4 ms, which a recall over the chunks (that
# only imports this module through sources.py) would otherwise pay.
@functools.cache
def _sentence_end() -> re.Pattern[str]:
    return re.compile(r"(?:[。！？]|(?<=[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef])[!?])[」』）)\"'”’]*"
                      r"|[.!?][\"'”’)\]]*(?=\s)")


_CLOSE_CJK = "。！？」』）"
_CODE_DEF = re.compile(r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
                       r"(?:function\*?|class|interface|type|enum|const|let|func|fn|impl|struct|trait|mod)\b")
_DEF_LANGUAGES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs")


class Chunk(NamedTuple):
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    heading: tuple[str, ...]  # the headings above it (markdown), the definition (code)
    text: str  # the chunk's own text

    @property
    def indexed(self) -> str:
        """What is searched and embedded: the heading path gives a chunk its topic."""
        return f"{HEADING_SEP.join(self.heading)}\n{self.text}" if self.heading else self.text

    @property
    def hash(self) -> str:
        return content_hash(self.indexed)


class _Unit(NamedTuple):
    text: str
    start: int
    end: int
    para: int  # units of one paragraph are joined without a break


def content_hash(text: str) -> str:
    """blake2b-64 of the UTF-8 text, hex (the embedding cache's content hash)."""
    return blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def check_sizes(size: int, overlap: int) -> None:
    """ValueError unless MIN_SIZE <= size and 0 <= overlap < size."""
    if size < MIN_SIZE:
        raise ValueError(f"chunk size {size} is below {MIN_SIZE} characters")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap {overlap} must be at least 0 and below the chunk size {size}")


def chunk(text: str, kind: str, *, name: str = "", size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP) -> list[Chunk]:
    """The chunks of a document's text; `kind` is markdown, text or code (`name`: the file's name,
    whose suffix tells the language of code)."""
    check_sizes(size, overlap)
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if kind == "code":
        return _code(lines, name, size, overlap)
    return [c for section in _sections(lines, markdown=kind == "markdown") for c in _pack(*section, size, overlap)]


# ---------------------------------------------------------------- markdown and text

def _sections(lines: list[str], *, markdown: bool) -> list[tuple[tuple[str, ...], list[_Unit]]]:
    """(heading path, paragraphs) of each section; a heading line opens its section's first paragraph."""
    sections: list[tuple[tuple[str, ...], list[_Unit]]] = []
    stack: list[tuple[int, str]] = []
    paragraphs: list[_Unit] = []
    current: list[str] = []
    start = 0
    fence: str | None = None

    def close(end: int) -> None:
        nonlocal current
        if current and any(line.strip() for line in current):
            paragraphs.append(_Unit("\n".join(current).strip("\n"), start, end, len(paragraphs)))
        current = []

    def new_section() -> None:
        nonlocal paragraphs
        # A heading with nothing under it but the next heading (`# Runbooks` above `## 障害対応`) is no
        # passage: it would be embedded, ranked and shown as one. Its title heads the sections below.
        if paragraphs and not (markdown and len(paragraphs) == 1 and _is_heading(paragraphs[0].text)):
            sections.append((tuple(title for _, title in stack), paragraphs))
        paragraphs = []

    skip = _front_matter(lines) if markdown else 0
    for number, line in enumerate(lines, 1):
        if number <= skip:
            continue
        if fence is not None:
            current.append(line)
            found = _FENCE.match(line)
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence) and not line.strip()[len(found.group(1)):].strip():
                fence = None
                close(number)
            continue
        if markdown:
            found = _FENCE.match(line)
            if found:
                close(number - 1)
                fence, start, current = found.group(1), number, [line]
                continue
            heading = _HEADING.match(line)
            underline = _SETEXT.match(line) if current and not any(map(_NOT_PARAGRAPH.match, current)) else None
            if heading or underline:
                title_lines, title_start = (current, start) if underline and not heading else ([], number)
                if title_lines:
                    current = []  # the paragraph is the heading's title, not a passage of the section above
                close(number - 1)
                new_section()
                level = len(heading.group(1)) if heading else 1 if underline.group(1)[0] == "=" else 2
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, heading.group(2).strip() if heading else " ".join(t.strip() for t in title_lines)))
                start, current = title_start, [*title_lines, line]
                close(number)
                continue
        if not line.strip():
            close(number - 1)
            continue
        if not current:
            start = number
        current.append(line)
    close(len(lines))  # (an unclosed fence runs to the end, as markdown renders it)
    new_section()
    return sections


def _is_heading(text: str) -> bool:
    """Whether a paragraph is a heading alone: `# Title`, or a setext one (`Title` over `=====`)."""
    lines = text.split("\n")
    return bool(_HEADING.match(text) or (len(lines) > 1 and _SETEXT.match(lines[-1])
                                         and not any(map(_NOT_PARAGRAPH.match, lines[:-1]))))


def _front_matter(lines: list[str]) -> int:
    """How many first lines a YAML front matter block takes (`---` ... `---` or `...`): metadata, not
    text to find (a chunk `--- title: Runbook tags: [ops] ---` ranked as a passage); 0 without one."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    return next((n for n, line in enumerate(lines[1:200], 2) if line.rstrip() in ("---", "...")), 0)


def _sentences(unit: _Unit, size: int) -> list[_Unit]:
    """A long paragraph as its sentences (line numbers kept), each at most `size` characters."""
    text = unit.text
    if unit.text.lstrip().startswith(("```", "~~~")):
        return [unit]  # a code fence is never cut
    pieces: list[tuple[int, int]] = []
    begin = 0
    for found in _sentence_end().finditer(text):
        pieces.append((begin, found.end()))
        begin = found.end()
    if begin < len(text):
        pieces.append((begin, len(text)))
    out = []
    for a, b in pieces:
        while b - a > size:  # no sentence end within `size`: cut by characters
            out.append((a, a + size))
            a += size
        if text[a:b].strip():
            out.append((a, b))
    units = []
    for a, b in out:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        first = unit.start + text.count("\n", 0, a + lead)
        last = unit.start + text.count("\n", 0, max(a + lead, b - 1 - (len(piece) - len(piece.rstrip()))))
        units.append(_Unit(piece.strip(), first, max(first, last), unit.para))
    return units


def _join(units: list[_Unit]) -> str:
    parts: list[str] = []
    for i, unit in enumerate(units):
        if i:
            prev = units[i - 1]
            if unit.para != prev.para:
                parts.append("\n\n")
            elif unit.start > prev.end:
                parts.append("\n")
            elif not (prev.text[-1] in _CLOSE_CJK or ord(prev.text[-1]) > 0x2E7F):
                parts.append(" ")  # English sentences of one line: the space between them
        parts.append(unit.text)
    return "".join(parts)


SEP = 2  # the most _join puts between two units ("\n\n")


def _pack(heading: tuple[str, ...], paragraphs: list[_Unit], size: int, overlap: int) -> list[Chunk]:
    units = [u for p in paragraphs for u in (_sentences(p, size) if len(p.text) > size else [p])]
    chunks: list[Chunk] = []
    group: list[_Unit] = []
    length = 0
    fresh = 0  # units of `group` not already in the previous chunk
    # lengths count SEP per unit after a group's first: what _join puts between units (a space, a line
    # break or a blank line) is part of the chunk's text, and a chunk never passes `size` with it
    for unit in units:
        if group and fresh and length + SEP + len(unit.text) > size:
            chunks.append(Chunk(group[0].start, max(u.end for u in group), heading, _join(group)))
            carried: list[_Unit] = []
            kept = 0
            for prev in reversed(group):
                cost = len(prev.text) + (SEP if carried else 0)
                if kept + cost > overlap or kept + cost + SEP + len(unit.text) > size:
                    break
                carried.insert(0, prev)
                kept += cost
            group, length, fresh = carried, kept, 0
        length += len(unit.text) + (SEP if group else 0)
        group.append(unit)
        fresh += 1
    if group and fresh:
        chunks.append(Chunk(group[0].start, max(u.end for u in group), heading, _join(group)))
    return chunks


# ---------------------------------------------------------------- code

def _code(lines: list[str], name: str, size: int, overlap: int) -> list[Chunk]:
    if lines and lines[-1] == "":
        lines = lines[:-1]
    spans = None
    lower = name.lower()
    if lower.endswith((".py", ".pyi")):
        spans = _python_spans(lines)
    elif lower.endswith(_DEF_LANGUAGES):
        spans = _definition_spans(lines)
    if spans is None:
        return _windows(lines, 1, len(lines), (), size, overlap)
    chunks: list[Chunk] = []
    for start, end, title in spans:
        heading = (title,) if title else ()
        while start < end and not lines[start - 1].strip():
            start += 1  # a chunk starts at its first written line
        while end > start and not lines[end - 1].strip():
            end -= 1
        block = lines[start - 1 : end]
        if sum(len(line) + 1 for line in block) <= size:
            text = "\n".join(block).strip("\n")
            if text.strip():
                chunks.append(Chunk(start, end, heading, text))
        else:
            chunks += _windows(lines, start, end, heading, size, overlap)
    return chunks


def _python_spans(lines: list[str]) -> list[tuple[int, int, str]] | None:
    """(first line, last line, title) of each top-level definition and of the code between them;
    None when the file does not parse."""
    import ast  # noqa: PLC0415  (only when a Python file is chunked)

    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None
    spans: list[tuple[int, int, str]] = []
    loose: list[int] = []  # first and last line of the statements since the last definition
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        last = node.end_lineno or node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if loose:
                spans.append((loose[0], loose[1], ""))
                loose = []
            word = "class" if isinstance(node, ast.ClassDef) else "def"
            spans.append((first, last, f"{word} {node.name}"))
        else:
            loose = [loose[0] if loose else first, last]
    if loose:
        spans.append((loose[0], loose[1], ""))
    if spans:  # comments and blank lines before a span belong to it
        spans = [(1 if i == 0 else spans[i - 1][1] + 1, end, title) for i, (_, end, title) in enumerate(spans)]
    return spans


def _definition_spans(lines: list[str]) -> list[tuple[int, int, str]]:
    starts = [i for i, line in enumerate(lines, 1) if _CODE_DEF.match(line)]
    if not starts or starts[0] != 1:
        starts.insert(0, 1)
    bounds = [*starts, len(lines) + 1]
    return [(a, b - 1, lines[a - 1].strip()[:80] if _CODE_DEF.match(lines[a - 1]) else "")
            for a, b in zip(bounds, bounds[1:]) if b > a]


def _windows(lines: list[str], first: int, last: int, heading: tuple[str, ...], size: int, overlap: int) -> list[Chunk]:
    """Windows of whole lines of at most `size` characters (a longer line is a window alone),
    each starting with the previous window's last lines that fit in `overlap`."""
    chunks: list[Chunk] = []
    start = first
    while start <= last:
        end, length = start, len(lines[start - 1]) + 1
        while end < last and length + len(lines[end]) + 1 <= size:
            length += len(lines[end]) + 1
            end += 1
        text = "\n".join(lines[start - 1 : end]).strip("\n")
        if text.strip():
            chunks.append(Chunk(start, end, heading, text))
        if end >= last:
            break
        back, kept = end, 0
        while back > start and kept + len(lines[back - 1]) + 1 <= overlap:
            kept += len(lines[back - 1]) + 1
            back -= 1
        start = back + 1 if back < end else end + 1
    return chunks
