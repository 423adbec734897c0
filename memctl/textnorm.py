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
    # Compiled on first use: the Unicode classes cost ~4 ms each, which every
    # command would otherwise pay at import time.
    return re.compile(rf"[{_CJK}]+|[^\W{_CJK}_]+(?:['’][^\W_]+)*", re.UNICODE)


@functools.cache
def _cjk_re() -> re.Pattern[str]:
    """_CJK as a class of characters: the readable definition (_cjk_utf8_re is the one used)."""
    return re.compile(rf"[{_CJK}]")


@functools.cache
def _cjk_utf8_re() -> re.Pattern[bytes]:
    """_CJK's characters as their UTF-8 bytes. It compiles in 0.3 ms where the class of 30,000 code
    points takes ~4 ms, and it scans in C, where looking at each character in Python (or even max())
    costs more than encoding the text: has_cjk and estimate_tokens run on every text of a bundle."""
    return re.compile(rb"\xe3(?:\x80[\x85\x86]|[\x81-\x83\x90-\xbf][\x80-\xbf])"  # 々 〆, kana, ext A to U+3FFF
                      rb"|\xe4[\x80-\xb6\xb8-\xbf][\x80-\xbf]"  # ext A from U+4000, unified from U+4E00
                      rb"|[\xe5-\xe9][\x80-\xbf][\x80-\xbf]"  # unified U+5000-U+9FFF
                      rb"|\xef[\xa4-\xab][\x80-\xbf]")  # compatibility ideographs


# A text with no character at or above U+3005 (the first of _CJK) holds no kana or kanji: its
# tokens are _token_re's second branch alone, and that pattern, without the large Unicode class,
# compiles in a tenth of the time (the prompt hook tokenises one prompt per process: docs/AGENTS.md).
_FIRST_CJK = "\u3005"
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _is_cjk(char: str) -> bool:
    """One character of _CJK (the same ranges, as code points)."""
    code = ord(char)
    return (0x3040 <= code <= 0x30FF or 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF
            or 0xF900 <= code <= 0xFAFF or code == 0x3005 or code == 0x3006)


def _cjk_count(text: str) -> int:
    return len(_cjk_utf8_re().findall(text.encode("utf-8", "surrogatepass"))) if text else 0


STOPWORDS = frozenset(
    "a an and are as at be by for from has have in into is it its of on or "
    "that the this to was were will with not no do does".split()
)


def normalize(text: str) -> str:
    """NFKC (full-width to half-width), case-folded, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub(" ", text).strip()


_HALF_WIDTH_KANA_RE = re.compile("[\uff61-\uff9f]+")


def full_width_kana(text: str) -> str:
    """Half-width katakana (`ｱﾗｰﾄ`, `ﾃﾞﾌﾟﾛｲ`) as full-width (`アラート`, `デプロイ`), the rest as it is: NFKC of
    those runs alone (it joins a voiced mark to its kana). For a text embedded as it is, as a query is."""
    if not text or max(text) < "\uff61":
        return text
    return _HALF_WIDTH_KANA_RE.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)


def has_cjk(text: str) -> bool:
    return bool(text) and _cjk_utf8_re().search(text.encode("utf-8", "surrogatepass")) is not None


def tokens(text: str, *, run_ends: bool = False) -> list[str]:
    """Tokens for keyword matching: words, and bigrams over kana/kanji runs.

    `run_ends` adds each run's last character as a unigram too: with it, every
    character of the text starts a token, so a one-character query can be
    matched as a prefix (the recall index does that for documents).
    """
    out: list[str] = []
    text = normalize(text)
    if not text or max(text) < _FIRST_CJK:
        return _WORD_RE.findall(text)
    for match in _token_re().finditer(text):
        run = match.group(0)
        if _is_cjk(run[0]):
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
    """Distinct tokens without English stopwords, single Latin letters or a lone hiragana (`の`, `を`:
    a particle standing between two other scripts)."""
    return {
        t for t in tokens(text)
        if t not in STOPWORDS and (len(t) > 1 or (has_cjk(t) and not "\u3040" <= t <= "\u309f"))
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
    cjk = _cjk_count(text)
    other = len(text) - cjk
    return cjk + (other + 3) // 4
