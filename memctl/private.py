"""`<private>…</private>`: text the user keeps out of memory (docs/TRANSCRIPTS.md, "Private text").

Every write runs this before anything else (memctl/secrets.py for facts, ledger rows, STATE.md
notes and the access log; importers/redact.py for transcripts): the text between the tags is
replaced by `[private]`, whatever `--allow-secrets` says. Tags are matched in any case
(`<PRIVATE>`), may hold spaces before `>` (`<private >`), nest (the outermost pair decides), and
span lines. An unclosed `<private>` hides everything to the end of the text; a stray
`</private>` is dropped. Only `re` is imported: every writer loads this.
"""

from __future__ import annotations

import re

MARK = "[private]"
_TAG = re.compile(r"<(/?)private[ \t]*>", re.I)
_HINT = re.compile(r"</?private", re.I)


def has_private(text: str) -> bool:
    """True when `text` holds a `<private>` or `</private>` tag (one regular expression)."""
    return "<" in text and _HINT.search(text) is not None


def hide(text: str, mark: str = MARK) -> tuple[str, int]:
    """`text` with each private span replaced by `mark`, and how many spans were hidden."""
    if not has_private(text):
        return text, 0
    out: list[str] = []
    depth, pos, hidden = 0, 0, 0
    for m in _TAG.finditer(text):
        closing = bool(m.group(1))
        if depth == 0:
            out.append(text[pos:m.start()])
            if not closing:
                out.append(mark)
                hidden += 1
                depth = 1
        else:
            depth += -1 if closing else 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out), hidden


def hide_all(texts: list[str]) -> tuple[list[str], int]:
    """Each text with its private spans hidden, and how many spans were hidden in all."""
    found, total = [], 0
    for text in texts:
        new, n = hide(text)
        found.append(new)
        total += n
    return found, total
