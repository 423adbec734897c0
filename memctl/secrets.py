"""Secrets out of what memctl writes: facts, ledger rows, the access log (docs/TRANSCRIPTS.md, "Secrets").

Every write runs the importer's detectors (importers/redact.py) on the text it stores: a secret
becomes `[REDACTED:<kind>]` and one warning names the kinds, never the secret. Loading them costs
what `ledger append` spends in all (detect-secrets: ~120-200 ms), so a cheap pre-check comes first:
a text none of `_SUSPECT` matches cannot hold a secret any detector finds (every one needs a
token's prefix or shape, credentials in a URL, or one of a few words), and is stored as it is. Only `re` (and the light contextlib, contextvars) is imported here: `ledger append` starts fast.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Iterator, Sequence

# Each alternative is what some detector's match must contain (importers/redact.py): a token's prefix,
# the shape of the few tokens that have none (Discord, Telegram, Mailchimp, Twilio), credentials in
# a URL, or a word of the keyword and prose patterns. Hashes, uuids, paths and plain URLs match none.
_SUSPECT = re.compile(
    r"(?-i:AKIA|ASIA|ABIA|ACCA|A3T|AKC|AP[0-9A-F]|gh[pousr]_|gl[a-z]+-|GR1348941|[rs]k_(?:live|test)_|SG\.|sq0csp-"
    r"|pypi-|sk-|npm_|hf_|AIza|github_pat_|eyJ|xox|(?:AC|SK)[a-z0-9]{32}|[MNO][\w-]{23,25}\.)"
    r"|\d{8,10}:|-us\d|://[^\s/@]*@|hooks\.slack\.com"
    r"|key|pass|pw|secret|token|auth|bearer|basic|credential|private|mysql|contrase|aws"
    r"|パスワード|パスフレーズ|暗証|合言葉|キー|トークン|シークレット|鍵",
    re.I,
)


# The kinds redacted in this context, counted while `tallied()` is open (the MCP tools report them).
_TALLY: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("memctl_secrets_tally", default=None)


@contextlib.contextmanager
def tallied() -> Iterator[dict[str, int]]:
    """A dict that counts, by kind, the secrets `scrub` redacts in this context until the block ends."""
    counts: dict[str, int] = {}
    token = _TALLY.set(counts)
    try:
        yield counts
    finally:
        _TALLY.reset(token)


# The command a write is part of when that command offers no way to store a secret as given (distill's lessons).
_PART_OF: contextvars.ContextVar[str | None] = contextvars.ContextVar("memctl_secrets_part_of", default=None)


@contextlib.contextmanager
def part_of(command: str) -> Iterator[None]:
    """Within it, `scrub`'s warning names `command` and offers no way around the redaction (`command` has none)."""
    token = _PART_OF.set(command)
    try:
        yield
    finally:
        _PART_OF.reset(token)


def might_hold_secret(text: str) -> bool:
    """False when no detector could find a secret in `text` (one regular expression)."""
    return _SUSPECT.search(text) is not None


def first_secret(lines: Sequence[str], where: str) -> tuple[int, list[str]] | None:
    """(index, kinds) of the first of `lines` holding a secret some detector finds; None when none does."""
    suspect = [i for i, line in enumerate(lines) if might_hold_secret(line)]
    if not suspect:
        return None
    from .importers import redact

    for i in suspect:
        redactor = redact.built_in(where)
        redactor.redact(lines[i])
        kinds = sorted(kind for kind in redactor.counts if kind != "private")
        if kinds:
            return i, kinds
    return None


def scrub(texts: Sequence[str], where: str, *, quiet: bool = False, secrets: bool = True) -> list[str]:
    """`texts` with every private span hidden and every secret redacted; one warning names `where` and
    the kinds of secrets (none when `quiet`). `secrets=False` (`--allow-secrets`) hides the private spans only.

    Raises Refused without detect-secrets, when a text might hold a secret: nothing is written unredacted.
    """
    from .private import hide_all

    texts, _ = hide_all(list(texts))
    if not secrets:
        return texts
    suspect = [might_hold_secret(text) for text in texts]
    if not any(suspect):
        return list(texts)
    from .importers import redact

    redactor = redact.built_in(where or "the access log")
    cleaned = [redactor.redact(text) if hit else text for text, hit in zip(texts, suspect)]
    tally = _TALLY.get()
    if tally is not None:
        for kind, count in redactor.counts.items():
            tally[kind] = tally.get(kind, 0) + count
    if redactor.counts and not quiet:
        from .errors import warn

        found = sum(redactor.counts.values())
        part = _PART_OF.get()
        warn(f"{part or where}: {found} secret{'s' if found != 1 else ''} redacted before writing ({', '.join(sorted(redactor.counts))})",
             hint=None if part else "run it again with --allow-secrets to store the text as given (docs/RELIABILITY.md, Secrets)")
    return cleaned
