"""Secrets out of text before anything is written (docs/TRANSCRIPTS.md, "Secrets").

The detectors are the maintained `detect-secrets` library's own patterns
(cloud keys, git host tokens, chat and payment tokens, private key headers,
basic-auth URLs, `password = ...` style assignments), plus memctl's: what
detect-secrets reads line by line and so cannot see whole (private key
blocks, `.env` assignments of key-, token- and password-named variables),
what it misses (`_MEMCTL`: newer key formats, whole JWTs, Authorization
headers, passwords in English and Japanese prose and on command lines), and
the store's own `[import] redact_patterns`. The entropy detectors are left
out: on prose they flag every hash and id.

Text between `<private>` and `</private>` goes first (memctl/private.py): `[private]`, counted
as `private`. Then each text is scanned as a whole and every match is replaced by
`[REDACTED:<kind>]`; the counts per kind go into the import's summary.
memctl/secrets.py runs the same (`built_in`) on every other write (facts,
ledger rows, the access log). Without detect-secrets installed, `Redactor`
refuses to be built: nothing is written unredacted.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from ..errors import BadInput, Refused, install_hint
from ..private import hide

PRIVATE = "private"  # the count of `<private>` spans hidden, beside the secrets' kinds

# Public IPs are not secrets; the entropy plugins are not regex based and are never used. memctl's
# own JWT pattern replaces the library's, which leaves the signature and is quadratic on `eyJeyJ...`.
_LEFT_OUT = frozenset({"Public IP (ipv4)", "JSON Web Token"})
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

# What detect-secrets misses (docs/TRANSCRIPTS.md, "Secrets"): (kind, pattern, group holding the secret).
# Each starts at a literal and repeats one character class at a time, so each runs in linear time.
_VALUE = r"""["'`「『]?([!-~]*?[A-Za-z0-9!#$%&*+\-/=?@^_~])(?=[.,;:'"`)」』]{0,8}(?:[^!-~]|$))"""  # a final ! or ? is the secret's
_SECRETISH = r"(?=[!-~]*?[0-9!#$%&*+\-/=?@^_~])"  # prose: a value with a digit or a symbol, not a word
_MEMCTL = [
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", 0),
    ("openai-token", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}", 0),
    ("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,}", 0),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}", 0),
    ("hugging-face-token", r"\bhf_[A-Za-z0-9]{30,}", 0),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
    ("stripe-access-key", r"\b[rs]k_test_[0-9a-zA-Z]{24,}", 0),
    # The whole token, signature included (detect-secrets' pattern stops before it).
    ("json-web-token", r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*", 0),
    ("authorization", r"(?i)\b(?:proxy-)?authorization[ \t]*[:=][ \t]*[\"']?(?:bearer|basic|token|digest|bot)[ \t]+([A-Za-z0-9._~+/=-]+)", 1),
    ("authorization", r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)", 1),
    ("password", r"(?i)\b(?:password|passwd|passphrase|passcode)[ \t]+(?:is|was)[ \t]+" + _SECRETISH + _VALUE, 1),
    ("password", r"(?:パスワード|パスフレーズ|暗証番号|合言葉|API[ \t]?キー|アクセスキー|シークレット(?:キー)?|(?:アクセス)?トークン)"
                 r"(?:[は＝=][ \t　]*" + _SECRETISH + r"|[：:][ \t　]*)" + _VALUE, 1),
    ("password", r"\bsshpass[ \t]+-p[ \t]*(?=\S{4})" + _VALUE, 1),
    ("password", r"\bmysql\w*[ \t][^\n]{0,200}?(?<=[ \t])-p" + _VALUE, 1),
    ("password", r"(?<![^\s\"'])--password=" + _VALUE, 1),
]

def kind_of(secret_type: str) -> str:
    """detect-secrets' secret type as a slug: `AWS Access Key` -> `aws-access-key`."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.casefold()).strip("-")


@dataclass(frozen=True)
class Detector:
    kind: str
    pattern: re.Pattern
    group: int  # the group holding the secret (0: the whole match)
    by_line: bool = False  # detect-secrets' keyword patterns assume one line (their `\\v` is not `\\n`)
    bounded: bool = False  # memctl.toml's own: each run has a time limit (PATTERN_SECONDS)


@dataclass
class Redactor:
    detectors: Sequence[Detector]
    counts: dict[str, int] = field(default_factory=dict)

    def redact(self, text: str) -> str:
        """`text` with each `<private>` span replaced by `[private]` (counted as `private`), then every
        secret by `[REDACTED:<kind>]`; counts what it replaced."""
        text, hidden = hide(text)
        if hidden:
            self.counts[PRIVATE] = self.counts.get(PRIVATE, 0) + hidden
        spans: list[tuple[int, int, str]] = []
        lines: list[tuple[int, str]] | None = None
        for det in self.detectors:
            if det.bounded:
                spans += [(*span, det.kind) for span in bounded_spans(det.pattern, text)]
                continue
            if not det.by_line:
                for m in det.pattern.finditer(text):
                    start, end = m.span(det.group)
                    if det.kind == "password" and _names_a_store(text[start:end]):
                        continue  # "パスワードは1Passwordにある": where it is kept, not the password
                    spans.append((start, end, det.kind))
                continue
            if lines is None:
                lines = _lines(text) if _KEYWORD_HINT.search(text) else []
            for offset, line in lines:
                spans += [(offset + start, offset + end, det.kind) for start, end in _keyword_values(det, line)]
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


# Where a password is kept, named where the password would be: not a secret.
_STORES = frozenset({"1password", "bitwarden", "keepass", "keepassxc", "lastpass", "dashlane", "keychain", "vault",
                     "vaultwarden", "gopass", "pass", "op"})
_PLAIN_WORD = re.compile(r"[A-Za-z]+")
_TOKEN = re.compile(r"\S+")
_TRAILING = ".,;:!?)」』\"'`"
_CLOSING = ".,;:)」』\"'`"  # never ! or ?: as likely the secret's last character as the sentence's


def _names_a_store(value: str) -> bool:
    return value.strip(_TRAILING + "(「『").casefold() in _STORES


def _secret_in_value(value: str) -> tuple[int, int] | None:
    """Where the secret is in the value a keyword pattern took (to the end of its line), or None.

    In a config line the whole value is the secret. In prose the line goes on: `password=hunter2 was
    wrong, then ...` keeps everything after the first word when that word has a digit or a symbol;
    a value that opens with a plain word and reads as a sentence (a comma, full stop or semicolon
    before a space, or eight words or more: `password: ask Alice, it is in 1Password`) holds no secret;
    fewer plain words (`correct horse battery staple`, a diceware phrase of six) may be a passphrase and
    go whole."""
    words = list(_TOKEN.finditer(value))
    if not words or _names_a_store(words[0].group()):
        return None
    if len(words) == 1:
        return 0, len(value)
    first = words[0]
    if not _PLAIN_WORD.fullmatch(first.group().strip(_TRAILING)):
        end = first.end()  # one closing mark of the sentence stays (`hunter2.`); a run of them may be the secret's own
        if end > first.start() + 1 and value[end - 1] in _CLOSING and value[end - 2] not in _TRAILING:
            end -= 1
        return first.start(), end
    if len(words) >= 8 or re.search(r"[,.;] ", value):
        return None
    return 0, len(value)


def _keyword_values(det: Detector, line: str) -> Iterator[tuple[int, int]]:
    """The secrets a keyword pattern finds in one line. Its value runs to the end of the line, so the
    search goes on after the part taken (`a=x1 / PGPASSWORD=y2`: both), or after the first word of
    a value that is prose (each search starts further on: linear in the words of the line)."""
    pos = 0
    while True:
        m = det.pattern.search(line, pos)
        if m is None:
            return
        start, end = m.span(det.group)
        found = _secret_in_value(line[start:end])
        if found is not None:
            yield start + found[0], start + found[1]
            pos = start + found[1]
        else:
            first = _TOKEN.search(line, start)
            pos = first.end() if first is not None and first.start() < end else end
        pos = max(pos, m.start() + 1)


def _lines(text: str) -> list[tuple[int, str]]:
    found, offset = [], 0
    for line in text.split("\n"):
        found.append((offset, line))
        offset += len(line) + 1
    return found


def _library_detectors(needed_by: str = "episode import") -> list[Detector]:
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError:
        what = "the ledger; nothing was imported" if needed_by == "episode import" else "what is committed; nothing was written"
        raise Refused(f"{needed_by} needs the detect-secrets library to keep secrets out of {what}", hint=install_hint()) from None
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


# ---------------------------------------------------------------- what memctl writes

_BUILT_IN: list[Detector] = []  # for memctl/secrets.py: built on the first text that might hold a secret, then kept


def built_in(needed_by: str) -> Redactor:
    """A redactor with detect-secrets' detectors and memctl's (no memctl.toml patterns), for every write."""
    if not _BUILT_IN:
        _BUILT_IN.extend(_built_in(needed_by))
    return Redactor(_BUILT_IN)


def _built_in(where: str) -> list[Detector]:
    detectors = [Detector("private-key", _PRIVATE_KEY_BLOCK, 0), Detector("env", _ENV_LINE, 1)]
    detectors += [Detector(kind, re.compile(pattern), group) for kind, pattern, group in _MEMCTL]
    return detectors + _library_detectors(where)


def build(patterns: Iterable[str] = ()) -> Redactor:
    """A redactor with detect-secrets' detectors, memctl's, and `patterns` (regular expressions)."""
    detectors = _built_in("episode import")
    detectors += [Detector("pattern", compiled(text), 0, bounded=True) for text in patterns]
    return Redactor(detectors)


def compiled(text: str) -> re.Pattern:
    """One of memctl.toml's redaction patterns, compiled; BadInput when it is none (`a{99999999999}`: an
    OverflowError, not re.error, was a traceback in every import)."""
    try:
        return re.compile(text)
    except (re.error, TypeError, OverflowError, RecursionError, ValueError) as exc:
        raise BadInput(f"memctl.toml: [import] redact_patterns: {text!r} is not a regular expression ({exc})") from None


# ---------------------------------------------------------------- a time limit for memctl.toml's patterns

# Python's `re` backtracks: `(a+)+$` on 30 a's and a b runs for minutes, and `re` has no timeout.
# It does check for signals while it matches, so on the main thread an interval timer stops it;
# elsewhere (no signal reaches another thread) the match runs in a forked child that is killed.
PATTERN_SECONDS = 1.0


class _TimeUp(Exception):
    pass


def bounded_spans(pattern: re.Pattern, text: str, seconds: float = PATTERN_SECONDS) -> list[tuple[int, int]]:
    """Where `pattern` matches `text`, or BadInput when that takes longer than `seconds`."""
    import threading  # noqa: PLC0415

    try:
        if threading.current_thread() is threading.main_thread():
            with _alarm(seconds):
                return [m.span() for m in pattern.finditer(text)]
        return _spans_in_child(pattern, text, seconds)
    except _TimeUp:
        raise BadInput(f"memctl.toml: [import] redact_patterns {pattern.pattern!r} took more than {seconds:g} s on one text "
                       "(catastrophic backtracking); nothing was written",
                       hint="rewrite it without nested repetition (e.g. (a+)+ as a+), or remove it") from None


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """SIGALRM after `seconds` raises _TimeUp; an outer timer (the hooks' limit) is put back as it was."""
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415

    outer_left, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:
        yield  # an outer limit ends first: it decides
        return

    def expire(signum, frame):
        raise _TimeUp

    outer = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - started), 1e-6), outer_interval)


def _spans_in_child(pattern: re.Pattern, text: str, seconds: float) -> list[tuple[int, int]]:
    """The match in a forked child, which is killed when it runs past `seconds`."""
    import select  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: match, send the spans, exit without running any of the parent's cleanup
        code = 1
        try:
            os.close(read_end)
            data = ",".join(f"{a}:{b}" for a, b in (m.span() for m in pattern.finditer(text))).encode()
            while data:
                data = data[os.write(write_end, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks, deadline, status = [], time.monotonic() + seconds, 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise _TimeUp
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        status = os.waitpid(pid, 0)[1]
    if os.waitstatus_to_exitcode(status) != 0:  # never taken for "no secret found"
        raise Refused(f"memctl.toml: [import] redact_patterns {pattern.pattern!r} could not be run; nothing was written")
    raw = b"".join(chunks).decode()
    return [(int(a), int(b)) for a, b in (item.split(":") for item in raw.split(","))] if raw else []
