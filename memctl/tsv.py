"""The one TSV field escape and record line (docs/FORMAT.md, "Ledgers"): ledgers, TSV output and pair files share them.

Inside a field `\\`, TAB, LF and CR are written `\\\\`, `\\t`, `\\n` and `\\r`;
nothing else is escaped. Only `re` is imported: ledger appends start fast.
"""

from __future__ import annotations

import re

_ESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_UNESCAPE_RE = re.compile(r"\\([\\tnr])")


def escape(value: str) -> str:
    """A value as it is written inside a field."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def format_record(values) -> str:
    """One line (without its LF) for values in column order."""
    return "\t".join(escape(v) for v in values)


def unescape(field: str) -> str:
    """The value a field holds; an invalid escape is kept as written (`ledger check` reports it)."""
    if "\\" not in field:
        return field
    return _UNESCAPE_RE.sub(lambda m: _ESCAPES[m.group(1)], field)


# The characters that reorder how the text after them is shown (embeddings, overrides, isolates): a
# description holding U+202E shows `invoice exe.pdf` for `invoice \u202efdp.exe`. Ordinary right-to-left
# text needs none of them.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text: str, keep: str = "") -> str:
    r"""`text` as a terminal shows and does not obey it: each control character but those in `keep` as
    `\xNN` (an ESC that would clear the screen, from a row another clone pushed; a newline in a file
    name that would split a one-line report), each bidi control as `\uNNNN`."""
    if text.isprintable():  # (the common case; a full-width space, also not "printable", is kept below)
        return text
    return "".join(f"\\x{ord(c):02x}" if (c < " " or "\x7f" <= c <= "\x9f") and c not in keep
                   else f"\\u{ord(c):04x}" if c in BIDI_CONTROLS else c for c in text)
