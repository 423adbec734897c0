"""MEMORY.md as a pure function: titles and hooks kept, outside lines adopted, duplicates found, the 200-line limit."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings, strategies as st

from memctl import index
from memctl.config import Config
from memctl.fact import Fact

RANK = index.rank_key(Config().importance_for)


def fact(stem, description, type_="project", name=None, **meta):
    front = {"name": name or stem, "description": description, "metadata": {"type": type_, **meta}}
    return Fact(stem, front, "body\n")


def claude_fact(stem, name, description, type_):
    """Claude Code's own frontmatter: a human name, `type` at the top level, no timestamps."""
    return Fact(stem, {"name": name, "description": description, "type": type_}, "body\n")


def _fact_lines(text):
    return [line for line in text.splitlines() if line.startswith("- [")]


def test_lines_keep_their_titles_and_hooks_and_new_lines_use_claude_codes_style():
    text = ("# Memory\n\n- [テスト方針](feedback_testing.md) — 統合テストは実DBで\n"
            "- [User role](user_role.md): data scientist\n\nprose\n")
    facts = [claude_fact("feedback_testing", "テスト方針", "統合テストは実DBに当てる（モック禁止）", "feedback"),
             claude_fact("user_role", "User role", "The user is a data scientist", "user"),
             fact("deploy-day", "デプロイは火曜日")]
    out = index.build_layout(text, facts).memory
    assert out == ("# Memory\n\n<!-- memctl:index:begin -->\n## user\n- [User role](user_role.md) — data scientist\n"
                   "## feedback\n- [テスト方針](feedback_testing.md) — 統合テストは実DBで\n"
                   "## project\n- [deploy-day](deploy-day.md) — デプロイは火曜日\n<!-- memctl:index:end -->\n\nprose\n")
    assert index.build_layout(out, facts).memory == out  # a fixpoint: nothing churns
    assert index.drift(out, facts) == []


def test_a_changed_description_refreshes_only_that_hook():
    facts = [fact("a", "old a"), fact("b", "old b")]
    text = index.build_layout("", facts).memory.replace("— old a", "— hand hook for a").replace("— old b", "— hand hook b")
    changed = [fact("a", "new a"), fact("b", "new b")]
    out = index.build_layout(text, changed, refresh={"a.md"}).memory
    assert _fact_lines(out) == ["- [a](a.md) — new a", "- [b](b.md) — hand hook b"]


def test_lines_memctl_wrote_before_titles_get_the_name():
    """memctl used to write `- [file.md](file.md) - desc`: the file name as title is no title."""
    old = "<!-- memctl:index:begin -->\n## project\n- [x-rule.md](x-rule.md) - a rule\n<!-- memctl:index:end -->\n"
    assert _fact_lines(index.build_layout(old, [fact("x-rule", "a rule")]).memory) == ["- [x-rule](x-rule.md) — a rule"]


def test_an_outside_line_for_a_listed_file_is_merged_into_the_block_never_twice():
    facts = [claude_fact("user_role", "User role", "data scientist", "user"), fact("new_fact", "新しい事実")]
    text = index.build_layout("# Memory\n", facts[:1]).memory
    appended = text + "- [User role, revised](user_role.md) — データサイエンティスト\n- [新しい事実](new_fact.md) — 新規\n"
    problems = index.drift(appended, facts)
    assert [(p.kind, p.target, p.lineno) for p in problems] == [("duplicate", "user_role.md", 7)]
    assert "listed twice (also at MEMORY.md:5)" in problems[0].message
    out = index.build_layout(appended, facts).memory
    assert out.count("user_role.md") == 1 and out.count("new_fact.md") == 1
    assert "- [User role, revised](user_role.md) — データサイエンティスト" in out  # the newer line wins
    assert "- [新しい事実](new_fact.md) — 新規" in out
    assert out.endswith("<!-- memctl:index:end -->\n") and index.drift(out, facts) == []
    # such lines are not the user's text: two versions that differ only by them have the same user text
    adopted = {f.file_name for f in facts}
    assert index.user_text(appended, adopted) == index.user_text(text, adopted)
    assert index.user_text(text + "\n" + appended[len(text):], adopted) == index.user_text(text, adopted)  # a blank line too
    assert index.user_text(appended + "my own note\n", adopted) != index.user_text(text, adopted)


def test_drift_kinds():
    facts = [fact("a", "A"), fact("b", "B")]
    text = "- [a](a.md) — A\n- [ghost](ghost.md) — gone\n- [a again](a.md) — A\n"
    kinds = [(p.kind, p.target, p.lineno) for p in index.drift(text, facts, limit_lines=2)]
    assert kinds == [("orphan", "ghost.md", 2), ("duplicate", "a.md", 3), ("missing", "b.md", 0), ("too-long", "", 3)]


def _many(n, japanese=False):
    out = []
    for i in range(n):
        desc = f"事実{i}: 公開前にテーマ台帳で重複を確認する（{i}）" if japanese else f"fact {i} about rule {i}"
        out.append(fact(f"f{i:03d}", desc, ("user", "feedback", "project", "reference")[i % 4],
                        importance=round((i * 7 % 10) / 10, 1), updated=f"2026-{1 + i % 12:02d}-01T09:00:00+09:00",
                        **({"pinned": True} if i % 50 == 3 else {})))
    return out


def _listed(layout):
    """target -> where it is listed (MEMORY.md or a topic file), over every file of the index."""
    where: dict[str, list[str]] = {}
    for line in index.parse_lines(layout.memory):
        where.setdefault(line.target, []).append("MEMORY.md")
    for rel, text in layout.topics.items():
        for line in index.parse_lines(text or "", rel):
            where.setdefault(line.target, []).append(rel)
    return where


def _check_limit(layout, facts, limit_lines, limit_bytes, user_lines=0):
    memory = layout.memory
    assert memory.count("\n") <= limit_lines and len(memory.encode()) <= limit_bytes
    where = _listed(layout)
    for f in facts:
        assert len(where[f.file_name]) == 1, f.file_name  # every fact listed exactly once ...
    topics = {rel for rel, text in layout.topics.items() if text is not None}
    assert topics == {t for t in where if index.is_topic_link(t)}  # ... and every topic file linked from MEMORY.md
    kept = [f for f in facts if where[f.file_name] == ["MEMORY.md"]]
    moved = [f for f in facts if where[f.file_name] != ["MEMORY.md"]]
    if kept and moved:  # within each type the ones that matter most stay, and every type keeps lines (issue 24)
        kinds = {f.type for f in facts}
        if len(kept) >= sum(1 for f in facts if f.meta("pinned")) + len(kinds):  # room for each type's best
            assert {f.type for f in kept} == kinds
        for kind in {f.type for f in moved} & {f.type for f in kept}:
            assert max(RANK(f) for f in kept if f.type == kind) < min(RANK(f) for f in moved if f.type == kind)
    return kept, moved


def test_231_facts_keep_the_index_within_200_lines_and_every_fact_reachable():
    facts = _many(231)
    user = "# Memory\n\nOur notes.\n"
    layout = index.build_layout(user, facts, limit_lines=200, limit_bytes=25_000, rank=RANK)
    kept, moved = _check_limit(layout, facts, 200, 25_000)
    assert layout.memory.count("\n") >= 195  # the room is used, not wasted
    assert {f.stem for f in facts if f.meta("pinned")} <= {f.stem for f in kept}
    assert len(moved) > 31 - 4  # at least the overflow, minus nothing: 231 lines cannot fit
    assert "- [" in layout.topics["memory-index/user.md"]
    line = next(l for l in layout.memory.splitlines() if "(memory-index/user.md)" in l)
    assert re.fullmatch(r"- \[\d+ more user facts\]\(memory-index/user\.md\) — .+", line)
    text = layout.topics["memory-index/user.md"]
    assert "- [f" in text and "](../f" in text  # links relative to the topic file
    # the whole index regenerates to itself, and reads without drift
    again = index.build_layout(layout.memory, facts, topics={k: v for k, v in layout.topics.items() if v},
                             limit_lines=200, limit_bytes=25_000, rank=RANK)
    assert again == layout
    assert index.drift(layout.memory, facts, {k: v for k, v in layout.topics.items() if v}, limit_lines=200) == []
    # facts forgotten until all fit: the topic files are removed
    fewer = index.build_layout(layout.memory, facts[:100], topics={k: v for k, v in layout.topics.items() if v},
                             limit_lines=200, limit_bytes=25_000, rank=RANK)
    assert all(v is None for v in fewer.topics.values()) and len(_fact_lines(fewer.memory)) == 100


def test_the_byte_limit_holds_for_japanese_text():
    facts = _many(120, japanese=True)
    layout = index.build_layout("", facts, limit_lines=200, limit_bytes=5_000, rank=RANK)
    kept, moved = _check_limit(layout, facts, 200, 5_000)
    assert kept and moved


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 80), limit=st.integers(8, 60), user_lines=st.integers(0, 5),
       appended=st.lists(st.integers(0, 79), max_size=4))
def test_index_properties(n, limit, user_lines, appended):
    facts = _many(n)
    user = "".join(f"note {i}\n" for i in range(user_lines))
    first = index.build_layout(user, facts, limit_lines=limit, limit_bytes=25_000, rank=RANK)
    topics = {k: v for k, v in first.topics.items() if v}
    text = first.memory + "".join(f"- [Claude {i}](f{i:03d}.md) — appended\n" for i in appended if i < n)
    layout = index.build_layout(text, facts, topics=topics, limit_lines=limit, limit_bytes=25_000, rank=RANK)
    if user_lines + 1 + 2 + 2 * 4 <= limit:  # room for a blank line, the markers and per type a heading and a "more" line
        _check_limit(layout, facts, limit, 25_000)
    assert index.user_text(layout.memory, set()).startswith(user.rstrip("\n"))
    topics = {k: v for k, v in layout.topics.items() if v}
    assert index.build_layout(layout.memory, facts, topics=topics, limit_lines=limit, limit_bytes=25_000,
                            rank=RANK).memory == layout.memory


def test_index_lines_in_other_markdown_forms_are_adopted_once():
    """`./file.md`, a bold link, a numbered or `+` bullet, a title holding `[ ]`: Claude Code's and a
    person's index lines were read as prose, never adopted (the fact listed twice), and blocked writes."""
    text = ("# Memory\n\n- [A](./a.md) — hook a\n- **[B](b.md)** — hook b\n1. [C](c.md) — hook c\n"
            "+ [D [draft]](d.md) — hook d\n2) see [E](e.md) for details\n")
    facts = [claude_fact(stem, stem.upper(), f"desc {stem}", "project") for stem in "abcde"]
    assert [(line.target, line.title) for line in index.parse_lines(text)] == [
        ("a.md", "A"), ("b.md", "B"), ("c.md", "C"), ("d.md", "D [draft]")]
    out = index.build_layout(text, facts).memory
    assert _fact_lines(out) == ["- [A](a.md) — hook a", "- [B](b.md) — hook b", "- [C](c.md) — hook c",
                                "- [D [draft]](d.md) — hook d", "- [E](e.md) — desc e"]
    assert "2) see [E](e.md) for details" in out  # prose that links a fact stays prose
    assert index.build_layout(out, facts).memory == out and index.drift(out, facts) == []


def test_a_description_of_several_lines_is_one_hook_and_a_hash_in_a_name_stays_in_the_link():
    """A YAML block description (`description: |`) put a raw second line into the block; a file named
    `c#.md` was linked as `c#.md`, which Markdown reads as `c` and a fragment."""
    facts = [claude_fact("notes", "Notes", "first line\n  second line\n", "project"),
             claude_fact("c#", "C sharp", "the C# rules", "project"), claude_fact("100%", "All", "all in", "project")]
    out = index.build_layout("", facts).memory
    assert _fact_lines(out) == ["- [All](100%25.md) — all in", "- [C sharp](c%23.md) — the C# rules",
                                "- [Notes](notes.md) — first line second line"]
    assert [line.target for line in index.parse_lines(out)] == ["100%.md", "c#.md", "notes.md"]
    assert index.build_layout(out, facts).memory == out and index.drift(out, facts) == []


def test_a_bracket_in_a_file_name_is_escaped_in_the_title_and_the_line_is_read_back():
    """`a]b.md` got the line `- [a]b](a]b.md)`, which is no Markdown link: it was not read back, so each
    write kept it below the block as a person's line and wrote it again (one more line every write)."""
    facts = [fact("a]b", "closing", name="a]b"), fact("a[b", "opening", name="a[b"), fact("[x]", "both", name="[x]")]
    out = index.build_layout("", facts).memory
    assert _fact_lines(out) == ["- [\\[x\\]]([x].md) — both", "- [a\\[b](a[b.md) — opening", "- [a\\]b](a]b.md) — closing"]
    assert sorted(line.target for line in index.parse_lines(out)) == ["[x].md", "a[b.md", "a]b.md"]
    again = index.build_layout(out, facts)
    assert again.memory == out and again.moved == () and index.drift(out, facts) == []


def test_an_angle_bracket_in_a_file_name_is_escaped_in_the_link_and_the_line_is_read_back():
    """A pushed `a<b.md` was linked as `<a<b.md>`, which no reader takes for a destination (nor memctl):
    kept below the block as a person's line, written again by every write, MEMORY.md grew without end.
    A file named after the end marker did the same, and one with an ideographic space (U+3000)."""
    facts = [fact("a<b", "less", name="z"), fact("<!-- memctl:index:end -->", "marker", name="w"),
             fact("デプロイ\u3000手順", "手順", name="y")]
    out = index.build_layout("", facts).memory
    assert _fact_lines(out) == ["- [w](<%3C!-- memctl:index:end --%3E.md>) — marker", "- [z](a%3Cb.md) — less",
                                "- [y](<デプロイ\u3000手順.md>) — 手順"]
    assert sorted(line.target for line in index.parse_lines(out)) == ["<!-- memctl:index:end -->.md", "a<b.md",
                                                                       "デプロイ\u3000手順.md"]
    again = index.build_layout(out, facts)
    assert again.memory == out and again.moved == () and index.drift(out, facts) == []


# Any name the scan reads as a fact's: a control character or a line separator in it is skipped (fsutil.control_in_name).
_STEMS = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="/"), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(stems=st.lists(_STEMS, min_size=1, max_size=4, unique=True))
def test_any_file_name_is_linked_so_that_its_line_is_read_back(stems):
    """Whatever a file name holds (a pushed one), its line is read back as memctl's: a second build
    changes nothing and moves nothing below the block."""
    facts = [fact(stem, f"about {i}", name=f"n{i}") for i, stem in enumerate(stems)]
    out = index.build_layout("", facts).memory
    assert sorted(line.target for line in index.parse_lines(out) if line.generated) == sorted(f"{s}.md" for s in stems)
    again = index.build_layout(out, facts)
    assert again.memory == out and again.moved == ()


def test_a_persons_line_inside_the_block_is_kept_below_it_not_dropped():
    """A note typed between the markers was dropped at the next regeneration, without a word."""
    facts = [fact("a", "desc a"), fact("b", "desc b")]
    text = index.build_layout("# Memory\n\nmy intro\n", facts).memory
    edited = text.replace("## project\n", "## project\nTODO: ask about the deploy window\n### my notes\n")
    layout = index.build_layout(edited, facts)
    assert layout.moved == ("TODO: ask about the deploy window", "### my notes")
    assert layout.memory == text.replace(index.END + "\n", index.END + "\nTODO: ask about the deploy window\n### my notes\n")
    again = index.build_layout(layout.memory, facts)
    assert again.memory == layout.memory and again.moved == ()


def test_only_what_memctl_writes_in_the_block_is_regenerated_crlf_included():
    """Review: a person's `## Notes`, a link to a web page or to a file outside were dropped as if
    memctl's; in a CRLF file memctl's own `## user` headings were moved below the block."""
    facts = [fact("a", "desc a")]
    text = index.build_layout("# Memory\n", facts).memory
    mine = ["## Notes", "- [Wiki](https://example.com/wiki)", "- [Guide](../docs/guide.md)", "1. [Runbook](runbook.txt)"]
    layout = index.build_layout(text.replace("## project\n", "## project\n" + "\n".join(mine) + "\n"), facts)
    assert layout.moved == tuple(mine)
    crlf = index.build_layout(text.replace("\n", "\r\n"), facts)
    assert crlf.moved == ()


def test_a_first_run_drops_the_persons_headings_whose_every_line_moved_into_the_block():
    """helper-52: a hand-kept MEMORY.md with its own sections got memctl's block under `## フィードバック`
    (two headings in a row, one of them empty) and an empty `## トピック` after it."""
    text = ("# Memory\n\n## フィードバック\n- [r](feedback_r.md) — x\n\n## トピック\n- [デバッグ](debugging.md) — コツ\n\n"
            "## メモ\n自由なメモ\n\n## 混在\n- [s](feedback_s.md) — y\nこの節には文もある\n")
    facts = [claude_fact("feedback_r", "r", "x", "feedback"), claude_fact("feedback_s", "s", "y", "feedback"),
             Fact("debugging", {"name": "debugging", "description": "コツ"}, "# t\n")]
    out = index.regenerate(text, facts)
    assert "## フィードバック" not in out and "## トピック" not in out
    assert out.startswith("# Memory\n\n<!-- memctl:index:begin -->\n")
    assert "## メモ\n自由なメモ\n" in out and "## 混在\nこの節には文もある\n" in out  # what else a section holds keeps it
    assert index.regenerate(out, facts) == out
