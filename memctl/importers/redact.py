"""Secrets out of transcript text before anything is written (docs/TRANSCRIPTS.md, "Secrets").

The detectors are the maintained `detect-secrets` library's own patterns
(cloud keys, git host tokens, chat and payment tokens, JWTs, private key
headers, basic-auth URLs, `password = ...` style assignments), plus three of
memctl's that detect-secrets reads line by line and so cannot see whole:
private key blocks, `.env` assignments of key-, token- and password-named
variables, and the store's own `[import] redact_patterns`. The entropy
detectors are left out: on prose they flag every hash and id.

Each text is scanned as a whole and every match is replaced by
`[REDACTED:<kind>]`; the counts per kind go into the import's summary.
Without detect-secrets installed, `Redactor` refuses to be built: an import
never runs unredacted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import BadInput, Refused, install_hint

# Public IPs are not secrets; the entropy plugins are not regex based and are never used.
_LEFT_OUT = frozenset({"Public IP (ipv4)"})
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S
)
_ENV_LINE = re.compile(
    r"(?m)^[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*"
    r"(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PWD|CREDENTIALS?|PASS)[A-Za-z0-9_]*[ \t]*=[ \t]*"
    r"""("[^"\n]*"|'[^'\n]*'|[^\s"']\S*)""",
    re.I,
)

# Every keyword pattern needs one of these words (detect-secrets' DENYLIST), so a text
# without them is not split into lines for those patterns.
_KEYWORD_HINT = re.compile(r"key|pass|pwd|secret|contrase", re.I)


def kind_of(secret_type: str) -> str:
    """detect-secrets' secret type as a slug: `AWS Access Key` -> `aws-access-key`."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.casefold()).strip("-")


@dataclass(frozen=True)
class Detector:
    kind: str
    pattern: re.Pattern
    group: int  # the group holding the secret (0: the whole match)
    by_line: bool = False  # detect-secrets' keyword patterns assume one line (their `\\v` is not `\\n`)


@dataclass
class Redactor:
    detectors: Sequence[Detector]
    counts: dict[str, int] = field(default_factory=dict)

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED:<kind>]`; counts what it replaced."""
        spans: list[tuple[int, int, str]] = []
        lines: list[tuple[int, str]] | None = None
        for det in self.detectors:
            if not det.by_line:
                spans += [(*m.span(det.group), det.kind) for m in det.pattern.finditer(text)]
                continue
            if lines is None:
                lines = _lines(text) if _KEYWORD_HINT.search(text) else []
            for offset, line in lines:
                for m in det.pattern.finditer(line):
                    start, end = m.span(det.group)
                    spans.append((offset + start, offset + end, det.kind))
        if not spans:
            return text
        spans.sort(key=lambda s: (s[0], -s[1]))
        out, pos = [], 0
        for start, end, kind in spans:
            if end <= pos or end == start:
                continue  # inside a span already replaced
            start = max(start, pos)
            out.append(text[pos:start])
            out.append(f"[REDACTED:{kind}]")
            self.counts[kind] = self.counts.get(kind, 0) + 1
            pos = end
        out.append(text[pos:])
        return "".join(out)


def _lines(text: str) -> list[tuple[int, str]]:
    found, offset = [], 0
    for line in text.split("\n"):
        found.append((offset, line))
        offset += len(line) + 1
    return found


def _library_detectors() -> list[Detector]:
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError:
        raise Refused(
            "episode import needs the detect-secrets library to keep secrets out of the ledger; nothing was imported",
            hint=install_hint(),
        ) from None
    found = []
    for secret_type, cls in sorted(get_mapping_from_secret_type_to_class().items()):
        if secret_type in _LEFT_OUT or not issubclass(cls, RegexBasedDetector):
            continue
        for pattern in cls.denylist:
            # The whole match: detect-secrets reports a group where one exists, which for
            # some patterns is only the token's prefix (`ghp` of a GitHub token).
            found.append(Detector(kind_of(secret_type), pattern, 0))
    tables = (keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, keyword.CONFIG_DENYLIST_REGEX_TO_GROUP)
    for table in tables:
        for pattern, group in table.items():
            found.append(Detector(kind_of(keyword.KeywordDetector.secret_type), pattern, group, by_line=True))
    return found


def build(patterns: Iterable[str] = ()) -> Redactor:
    """A redactor with detect-secrets' detectors, memctl's, and `patterns` (regular expressions)."""
    detectors = [Detector("private-key", _PRIVATE_KEY_BLOCK, 0), Detector("env", _ENV_LINE, 1)]
    detectors += _library_detectors()
    for text in patterns:
        try:
            compiled = re.compile(text)
        except (re.error, TypeError) as exc:
            raise BadInput(f"memctl.toml: [import] redact_patterns: {text!r} is not a regular expression ({exc})") from None
        detectors.append(Detector("pattern", compiled, 0))
    return Redactor(detectors)
