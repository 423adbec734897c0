"""textnorm's short cuts (no large Unicode class compiled for text without kana/kanji, and short texts
looked at character by character) give exactly what the regular expressions give."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memctl import textnorm

# Characters near every edge the tokeniser cares about: ASCII words and apostrophes, underscores,
# the first and last code points of each kana/kanji range and their neighbours, full-width forms
# (NFKC), Hangul and emoji (at or above U+3005 but not kana/kanji).
EDGES = "aZ9_'’ -\n\t。、！？ー々〆\u3004\u3007\u303f\u3040\u30ff\u3100\u33ff\u3400\u4dbf\u4dc0\u4dff" \
        "\u4e00\u9fff\ua000\uf8ff\uf900\ufaff\ufb00ＡＢ１한글😀é"
TEXTS = st.text(alphabet=st.sampled_from(EDGES), max_size=40) | st.text(alphabet=st.characters(codec="utf-8"), max_size=60)


def _regex_tokens(text: str) -> list[str]:
    """tokens() as it was written before the short cuts: one regular expression over every text."""
    out = []
    for match in textnorm._token_re().finditer(textnorm.normalize(text)):
        run = match.group(0)
        if textnorm._cjk_re().match(run):
            out.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
        else:
            out.append(run)
    return out


@settings(max_examples=300, deadline=None)
@given(TEXTS)
@example("々々々 〆〆")  # kana/kanji made only of the range's first code points
def test_tokens_are_the_regular_expressions_tokens(text):
    assert textnorm.tokens(text) == _regex_tokens(text)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_kana_and_kanji_are_found_and_counted_as_the_regular_expression_does(text):
    assert textnorm.has_cjk(text) == bool(textnorm._cjk_re().search(text))
    expected = len(textnorm._cjk_re().findall(text))
    assert textnorm.estimate_tokens(text) == expected + (len(text) - expected + 3) // 4


def test_every_character_of_the_plane_is_kana_or_kanji_as_the_class_says():
    """The UTF-8 pattern that has_cjk and estimate_tokens use, against the class, one character at a time."""
    for code in range(0x10000):
        char = chr(code)  # lone surrogates included: file names decoded with surrogateescape hold them
        assert textnorm.has_cjk(char) == bool(textnorm._cjk_re().match(char)), hex(code)
        assert textnorm.estimate_tokens(char) == 1, hex(code)


def test_long_texts_agree():
    text = "デプロイは火曜日のみ deploy on Tuesdays " * 400
    assert textnorm.has_cjk(text)
    assert textnorm.estimate_tokens(text) == (len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
                                              + (len(text) - len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text)) + 3) // 4)
    assert textnorm.tokens("it's 日本's café_au lait") == _regex_tokens("it's 日本's café_au lait")
