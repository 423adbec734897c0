"""Normalising and tokenising Japanese and English text.

Latin-script text is split into words; runs of kana/kanji are split into
character bigrams (a run of one character is kept as a unigram), which is the
usual cheap substitute for a morphological analyser.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_CJK = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\u3400-\u4dbf"  # CJK ext A
    "\u4e00-\u9fff"  # CJK unified
    "\uf900-\ufaff"  # compatibility ideographs
    "\u3005\u3006\u30fc"  # 々 〆 ー
)
_SPACE_RE = re.compile(r"\s+")


@functools.cache
def _token_re() -> re.Pattern[str]:
    # Compiled on first use: the Unicode classes cost ~10 ms, which every
    # command would otherwise pay at import time.
    return re.compile(rf"[{_CJK}]+|[^\W{_CJK}_]+(?:['’][^\W_]+)*", re.UNICODE)


@functools.cache
def _cjk_re() -> re.Pattern[str]:
    return re.compile(rf"[{_CJK}]")

STOPWORDS = frozenset(
    "a an and are as at be by for from has have in into is it its of on or "
    "that the this to was were will with not no do does".split()
)


def normalize(text: str) -> str:
    """NFKC (full-width to half-width), case-folded, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub(" ", text).strip()


def has_cjk(text: str) -> bool:
    return bool(_cjk_re().search(text))


def tokens(text: str, *, run_ends: bool = False) -> list[str]:
    """Tokens for keyword matching: words, and bigrams over kana/kanji runs.

    `run_ends` adds each run's last character as a unigram too: with it, every
    character of the text starts a token, so a one-character query can be
    matched as a prefix (the recall index does that for documents).
    """
    out: list[str] = []
    cjk = _cjk_re()
    for match in _token_re().finditer(normalize(text)):
        run = match.group(0)
        if cjk.match(run):
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
                if run_ends:
                    out.append(run[-1])
        else:
            out.append(run)
    return out


def keywords(text: str) -> set[str]:
    """Distinct tokens without English stopwords or single Latin letters."""
    return {
        t for t in tokens(text) if t not in STOPWORDS and (len(t) > 1 or has_cjk(t))
    }


def jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def estimate_tokens(text: str) -> int:
    """An honest upper-leaning token estimate: ~1 per kana/kanji, ~1 per 4 other characters.

    BPE tokenisers spend about one token per Japanese character but pack about four
    characters of English into one; counting len/4 for Japanese would undercount 4x.
    """
    cjk = len(_cjk_re().findall(text))
    other = len(text) - cjk
    return cjk + (other + 3) // 4
