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
