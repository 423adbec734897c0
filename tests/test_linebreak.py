"""Lines memctl breaks itself for a terminal (recall --explain's blocks, table cells): never wider than
asked, every character kept, and no line starting with `。`, `」`, `ッ`, `ー` or ending with `（`, `「`."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from rich.cells import cell_len

from memctl.cli.explain import blocks
from memctl.linebreak import NO_END, NO_START, wrap

JA = ("チームのデプロイは毎週火曜日の十時に始まり、担当は三番目のメンバー（当番表「週次」を参照）。障害時はまず、"
      "ステータスページを更新して、次にチャットで「ロールバック」と書き込み、担当者が確認する。"
      "ソフトウェアのアップデートはキャッシュをクリアしてから行う。")


def broken_rule(lines: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(lines, lines[1:]) if b[:1] in NO_START or a[-1:] in NO_END]


@pytest.mark.parametrize("width", range(8, 91))
def test_japanese_is_never_broken_before_closing_punctuation_or_small_kana_nor_after_an_opening_bracket(width):
    """rich broke `当番表「週次` / `」を参照` at 40 cells, `（当番表「` / `週次」` at 76, `ップデ` / `ートは` at 36."""
    lines = wrap(JA, width, cell_len)
    assert max(cell_len(line) for line in lines) <= width  # the break moves back: no line is wider
    assert "".join(lines) == JA and broken_rule(lines) == [], lines
    # only what the rule keeps together went down: a character with its marks (`照）。`), three at most here
    assert all(cell_len(line) > width - 6 for line in lines[:-1]), lines


def test_english_breaks_at_spaces_as_before_and_a_long_word_is_cut():
    text = "Deploys to production happen only on Tuesday mornings, and after a freeze the release owner signs off"
    assert wrap(text, 30, cell_len) == ["Deploys to production happen", "only on Tuesday mornings, and",
                              "after a freeze the release", "owner signs off"]
    assert wrap("see https://example.com/a/very/long/path.html now", 12, cell_len) == [
        "see", "https://exam", "ple.com/a/ve", "ry/long/path", ".html now"]
    assert wrap("a\nb c", 10, cell_len) == ["a", "b c"] and wrap("", 10, cell_len) == []


def test_explain_blocks_keep_the_rule_at_80_columns():
    row = {"rank": 1, "name": "ja0", "type": "project", "path": "memory/ja0.md", "description": JA, "score": 0.67,
           "signals": {}, "factors": {}}
    lines = blocks([row], 80)
    text = [line.strip() for line in lines[2:] if line.strip()[:1] > "~"]  # the description's lines
    assert "".join(text) == JA and broken_rule(text) == [], lines


@given(st.text(alphabet=st.sampled_from(list("あいうアイウ漢字 abc-、。）」（「ッャーx")), max_size=80), st.integers(2, 40))
def test_any_text_keeps_every_character_within_the_width(text, width):
    lines = wrap(text, width, cell_len)
    assert all(cell_len(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "").replace("\n", "")
