"""Numbers written differently read the same: 二 = ２ = 2, 二十五 = 25, 1,000 = 1000, 3万 = 30000.

Used where facts are compared on their numbers (lifecycle/consolidate.py), so
that `二頭のシマウマ` and `２頭のシマウマ` do not count as a different number.
Full-width digits are NFKC's work (textnorm.normalize runs first); this module
turns kanji numerals into digits and drops thousands separators.

A kanji numeral is converted only where it reads as a number: a run of two or
more numeral characters (二十, 三百五十, 二〇二六), or one followed by a counter
(二頭, 三人, 五分, 一つ). A single 一 inside a word (統一, 一緒, 万一) stays, and so
does 十分 ("enough" far more often than ten minutes).
"""

from __future__ import annotations

import re

_DIGITS = {c: i for i, c in enumerate("〇一二三四五六七八九")} | {"零": 0, "两": 2, "兩": 2}
_SMALL = {"十": 10, "百": 100, "千": 1000}
_LARGE = {"万": 10_000, "億": 100_000_000, "兆": 1_000_000_000_000}
_CHARS = "".join(_DIGITS) + "".join(_SMALL) + "".join(_LARGE)
# Counters and units that make one numeral character a number.
_COUNTERS = (
    "つ頭人名個本枚匹台回件日時分秒年月週円歳階番度冊杯羽着足軒社点倍割行桁文字種類部局試合箇ヶか所位匹通"
)
_RUN_RE = re.compile(f"[{_CHARS}]+")
_SEPARATOR_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DIGIT_LARGE_RE = re.compile(r"(\d+(?:\.\d+)?)([万億兆])")


def kanji_value(run: str) -> int | None:
    """The value of a kanji numeral (`二十五` 25, `三百万` 3000000, `二〇二六` 2026), or None."""
    if run[0] in _LARGE:
        return None  # a numeral never starts with 万: 万一 is a word ("just in case")
    if all(c in _DIGITS for c in run):
        return int("".join(str(_DIGITS[c]) for c in run))  # read digit by digit: 二〇二六
    total, section, digit = 0, 0, None
    for char in run:
        if char in _DIGITS:
            if digit is not None:
                return None  # two bare digits in a positional numeral: 二三十 is not a number
            digit = _DIGITS[char]
        elif char in _SMALL:
            section += (1 if digit is None else digit) * _SMALL[char]
            digit = None
        elif char in _LARGE:
            part = section + (digit or 0)
            total += (part or 1) * _LARGE[char]
            section, digit = 0, None
        else:
            return None
    return total + section + (digit or 0)


def _convert(match: re.Match) -> str:
    run = match.group()
    if len(run) == 1:
        after = match.string[match.end(): match.end() + 1]
        # One character is a number only before a counter; 十分 (enough) and 万 alone stay words.
        if run in _LARGE or not after or after not in _COUNTERS or (run == "十" and after == "分"):
            return run
    value = kanji_value(run)
    return run if value is None else str(value)


def normalize(text: str) -> str:
    """`text` with kanji numerals as digits and no thousands separators (run after NFKC)."""
    if any(c in _CHARS for c in text):
        text = _RUN_RE.sub(_convert, text)
    if "," in text:
        text = _SEPARATOR_RE.sub("", text)
    if any(c in "万億兆" for c in text):
        text = _DIGIT_LARGE_RE.sub(lambda m: _scaled(m.group(1), m.group(2)), text)
    return text


def _scaled(number: str, unit: str) -> str:
    value = float(number) * _LARGE[unit]
    return str(int(value)) if value == int(value) else str(value)
