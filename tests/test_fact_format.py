"""The fact format: byte-stable parse/render, safe YAML, Japanese round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from memctl import fact as fact_mod
from memctl.errors import BadInput

SEED = """---
name: feedback-zenn-rate-limit
description: Zenn投稿は1日1件まで。書籍CTAを全記事に含める
metadata:
  type: feedback
  importance: 0.8
  confidence: 1.0
  created: 2026-09-14T22:00:22+09:00
  updated: 2026-09-14T22:00:22+09:00
  tags: [zenn, publishing]
---
Zennは1日に複数コンテンツを公開するとデプロイが失敗する。
**Why:** 記事+書籍を同日公開してレートリミットに複数回引っかかった。
**How to apply:** 公開系ジョブはロックファイルで1日1件に制限する。
"""


def test_seed_round_trips_byte_for_byte():
    fact = fact_mod.parse(SEED, "feedback_zenn_rate_limit")
    assert fact.name == "feedback-zenn-rate-limit"
    assert fact.type == "feedback"
    assert fact.meta("created") == "2026-09-14T22:00:22+09:00"  # a string, not a datetime
    assert fact.tags == ["zenn", "publishing"]
    assert fact_mod.render(fact) == SEED


def test_unknown_keys_are_kept_in_order():
    text = "---\nname: a\nzeta: 1\ndescription: d\ncustom:\n  nested: [1, 2]\nmetadata:\n  type: user\n  my_key: keep me\n---\nbody\n"
    fact = fact_mod.parse(text, "a")
    assert fact_mod.render(fact) == text
    changed = fact.with_meta(importance=0.3)
    assert fact_mod.render(changed).index("my_key") < fact_mod.render(changed).index("importance")


def test_claude_code_top_level_type():
    text = "---\nname: user_role\ndescription: The user is a data scientist\ntype: user\n---\nBody.\n"
    fact = fact_mod.parse(text, "user_role")
    assert fact.type == "user"
    updated = fact.with_meta(type="feedback")
    assert "\ntype: feedback\n" in fact_mod.render(updated)  # stays at the top level
    assert "metadata" not in updated.front


def test_unsafe_yaml_tags_are_refused():
    with pytest.raises(fact_mod.FactParseError) as err:
        fact_mod.parse("---\nname: x\ndescription: !!python/object/apply:os.system ['id']\n---\n", "x")
    assert err.value.line == 3


safe_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    description=safe_text.filter(lambda s: s.strip() and "\n" not in s and "\r" not in s),
    tags=st.lists(safe_text, max_size=4),
    body=safe_text,
    importance=st.floats(0, 1),
)
def test_render_parse_render_is_stable(description, tags, body, importance):
    fact = fact_mod.Fact(
        stem="x",
        front={"name": "x", "description": description, "metadata": {"type": "user", "importance": importance, "tags": tags}},
        body=body,
    )
    text = fact_mod.render(fact)
    again = fact_mod.parse(text, "x")
    assert again.description == description
    assert again.tags == tags
    assert again.meta("importance") == importance
    assert again.body == body
    assert fact_mod.render(again) == text


@pytest.mark.parametrize("breaker", ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_a_description_with_anything_that_ends_a_line_is_refused(breaker):
    """U+2028 and U+0085 went into MEMORY.md's line as they were: str.splitlines() and some editors end
    the line there, so the index line was two for them."""
    with pytest.raises(BadInput) as refused:
        fact_mod.validate_description(f"締め切り{breaker}金曜日")
    assert refused.value.message == "description must be one line"
    assert fact_mod.validate_description("締め切り\u3000金曜日") == "締め切り\u3000金曜日"  # a full-width space is text


def test_an_emoji_is_written_as_it_is_and_the_rest_byte_for_byte_as_before():
    """libyaml's emitter wrote a character beyond U+FFFF as `"\\U0001F680リリース手順"`: `grep 🚀` found
    nothing and `show` printed the escape. Such a front is written by PyYAML's own emitter."""
    front = {"name": "release", "description": "🚀リリース手順: 金曜日は避ける", "metadata": {
        "type": "project", "tags": ["🚀", "リリース"], "importance": 0.6, "created": "2026-11-30T09:00:00+09:00"}}
    text = fact_mod.render(fact_mod.Fact(stem="release", front=front, body="本文 🎉\n"))
    assert "🚀リリース手順" in text and "\\U" not in text
    assert fact_mod.parse(text, "release").front == front
    plain = {**front, "description": "リリース手順: 金曜日は避ける", "metadata": {**front["metadata"], "tags": ["x", "リリース"]}}
    wide = fact_mod.render(fact_mod.Fact(stem="release", front=plain, body=""))
    assert wide == text.replace("🚀", "", 1).replace("[🚀,", "[x,").replace("本文 🎉\n", "")


@pytest.mark.parametrize("front, expected", [
    ("name: 注意: ログ\ndescription: Note: never log tokens\ntype: feedback",
     {"name": "注意: ログ", "description": "Note: never log tokens", "type": "feedback"}),
    ("name: x\ndescription: uses {braces} and `make`: a note", {"name": "x", "description": "uses {braces} and `make`: a note"}),
    ('name: x\ndescription: say "hi": \\\\ then', {"name": "x", "description": 'say "hi": \\\\ then'}),
    ("name: x\ndescription: d\nmetadata:\n\ttype: project", {"name": "x", "description": "d", "metadata": {"type": "project"}}),
    # helper-74: a value that starts as YAML structure but is no YAML on its own line is text too
    ("name: WIP\ndescription: [WIP] branches must not be merged\ntags: [a, b]",
     {"name": "WIP", "description": "[WIP] branches must not be merged", "tags": ["a", "b"]}),
    ("name: x\ndescription: *never* force-push", {"name": "x", "description": "*never* force-push"}),
    ('name: x\ndescription: "Use "double" quotes here"\ntype: feedback',
     {"name": "x", "description": '"Use "double" quotes here"', "type": "feedback"}),
])
def test_a_frontmatter_claude_code_reads_is_read_though_it_is_not_yaml(front, expected):
    """helper-52: Claude Code's reader quotes a top-level value YAML would choke on (`description: Note:
    never log tokens`); memctl skipped such a file from list, recall and the hooks (invalid YAML)."""
    assert fact_mod.parse(f"---\n{front}\n---\nbody\n", "x").front == expected


def test_a_lenient_reading_keeps_yaml_structure_on_the_other_lines():
    """helper-55: the fallback quoted `metadata: {type: feedback, pinned: true}` into one string (and a
    list with a comment into one tag); the next write of the file then dropped type and pin for good."""
    front = fact_mod.parse("---\nname: tok2\ndescription: Note: never log tokens\n"
                           "metadata: {type: feedback, importance: 0.9, pinned: true}\ntags: [a, b]  # mine\n---\nbody\n", "x").front
    assert front == {"name": "tok2", "description": "Note: never log tokens", "tags": ["a", "b"],
                     "metadata": {"type": "feedback", "importance": 0.9, "pinned": True}}


def test_a_broken_list_stays_broken_and_a_list_over_lines_stays_a_list():
    """helper-79: the leniency for a title or description that is no YAML alone also made `tags: [deploy, ci`
    one tag `[deploy, ci` (and the next write kept it so), and broke a list over two lines beside a line the
    fallback quotes. Only a one-line `name` or `description` is read as text."""
    with pytest.raises(fact_mod.FactParseError, match="invalid YAML"):
        fact_mod.parse("---\nname: q1\ndescription: 'unclosed quote\ntype: project\ntags: [deploy, ci\n---\nbody\n", "q1")
    front = fact_mod.parse("---\nname: x\ndescription: Note: x\ntags: [a,\n  b]\n---\nbody\n", "x").front
    assert front == {"name": "x", "description": "Note: x", "tags": ["a", "b"]}
    front = fact_mod.parse('---\nname: x\ndescription: Note: x\nother: "quoted\n  continued"\n---\nbody\n', "x").front
    assert front["other"] == "quoted continued"


def test_a_frontmatter_neither_reads_stays_an_error():
    with pytest.raises(fact_mod.FactParseError, match="invalid YAML"):
        fact_mod.parse("---\nname: x\n  description: indented: wrongly\n---\n", "x")
