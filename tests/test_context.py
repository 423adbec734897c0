"""The context bundle's rendering: --no-index, no empty headings, pinned facts without their YAML."""

from __future__ import annotations

from conftest import cli
from memctl import context, facts
from memctl.store import open_store


def _seed(root):
    store = open_store(root)
    facts.remember(store, facts.FactInput(
        name="zenn-limit", type="feedback", description="Zenn投稿は1日1件まで", body="同日に2件公開すると失敗する。",
        why="記事と書籍を同日公開してレートリミットに引っかかった", how="公開系ジョブはロックファイルで1日1件に制限する",
        pinned=True, tags=("zenn",)), commit_changes=False)
    for i in range(12):
        fact_type = ("user", "project", "reference")[i % 3]
        facts.remember(store, facts.FactInput(name=f"{fact_type}-{i:02d}", type=fact_type,
                                              description=f"{fact_type} fact number {i} about the deploy schedule"),
                       commit_changes=False)
    return store


def _section(text, title):
    lines = text.split("\n")
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


def test_pinned_facts_show_description_and_why_how_not_yaml(root):
    store = _seed(root)
    bundle = context.build(store, budget=4000, log=False)
    pinned = _section(bundle.text, "## Pinned facts")
    assert pinned == [
        "### memory/zenn-limit.md",
        "Zenn投稿は1日1件まで",
        "同日に2件公開すると失敗する。",
        "**Why:** 記事と書籍を同日公開してレートリミットに引っかかった",
        "**How to apply:** 公開系ジョブはロックファイルで1日1件に制限する",
    ]
    assert "metadata:" not in bundle.text and "importance:" not in bundle.text and "\n---\n" not in bundle.text
    # facts found by --query are rendered the same way
    hit = context.build(store, query="zenn レートリミット", budget=4000, log=False, mode="keyword")
    assert "metadata:" not in hit.text and "Zenn投稿は1日1件まで" in hit.text


def test_no_index_leaves_memory_md_out(root):
    store = _seed(root)
    full = context.build(store, budget=4000, log=False)
    assert "## Memory index (MEMORY.md)" in full.text and "(user-00.md)" in full.text
    bare = context.build(store, budget=4000, log=False, include_index=False)
    assert "## Memory index" not in bare.text and "(user-00.md)" not in bare.text
    assert not any(p.section == "index" for p in bare.included + bare.dropped)
    assert _section(bare.text, "## Pinned facts") == _section(full.text, "## Pinned facts")
    r = cli(root, "context", "--no-index", "--no-log")
    assert r.exit_code == 0 and r.stdout == bare.text


def test_a_tight_budget_prints_no_empty_heading(root):
    store = _seed(root)
    texts = set()
    for budget in range(60, 400, 7):
        bundle = context.build(store, budget=budget, log=False)
        texts.add(bundle.text)
        lines = bundle.text.rstrip("\n").split("\n")
        index_at = lines.index("## Memory index (MEMORY.md)") if "## Memory index (MEMORY.md)" in lines else len(lines)
        for i, line in enumerate(lines):
            if line.startswith("### ") and i > index_at:
                assert i + 1 < len(lines) and lines[i + 1].startswith("- ["), (budget, bundle.text)
            if line.startswith("## "):
                assert i + 1 < len(lines) and lines[i + 1] != "", (budget, bundle.text)  # no empty section
        assert bundle.tokens <= budget
    assert len(texts) > 5  # the budgets really cut the index at different places


def test_a_pinned_fact_longer_than_the_budget_left_is_cut_to_fit_never_dropped(root):
    """`pin` says context always includes the fact; one longer than the budget was dropped whole, while the
    index below it was printed. Now it is cut to fit, with a note naming `memctl show` for the rest."""
    store = _seed(root)
    long_body = "本番ブランチに直接プッシュしない。Never push to main. " * 200
    facts.remember(store, facts.FactInput(name="no-push", type="feedback", description="mainに直接pushしない",
                                          body=long_body, pinned=True), commit_changes=False)
    for budget, max_chars in ((300, None), (4000, 2000), (120, None)):
        bundle = context.build(store, budget=budget, log=False, max_chars=max_chars)
        assert bundle.tokens <= budget and (max_chars is None or len(bundle.text) <= max_chars), (budget, bundle.tokens)
        pinned = "\n".join(_section(bundle.text, "## Pinned facts"))
        assert "### memory/no-push.md\nmainに直接pushしない\n本番ブランチに直接プッシュしない。" in pinned, (budget, pinned)
        assert "… (cut to fit the budget: `memctl show no-push` prints all of it)\n" in pinned + "\n", pinned[-200:]
        assert "no-push" in context.Bundle.to_dict(bundle)["shown"]
    whole = context.build(store, budget=20000, log=False)  # room for it: whole, no note
    assert long_body.strip() in whole.text and "cut to fit" not in whole.text


def test_many_long_pinned_facts_share_the_budget_and_the_ones_left_out_are_named(root):
    """Fifteen long pinned facts at 4000 tokens: the first six came in full and nine were left out, named
    only on stderr (the model never sees it). Now each gets a start with its note; and at a budget too
    small for a start each, a line in the bundle names the pinned facts left out."""
    store = _seed(root)
    body = "本番環境の設定についての長い説明。" * 40
    names = [f"pinned-{i}" for i in range(1, 16)]
    for name in names:
        facts.remember(store, facts.FactInput(name=name, type="feedback", description=f"ピン留めされた規則 {name}",
                                              body=body, pinned=True), commit_changes=False, force=True)
    bundle = context.build(store, budget=4000, log=False)
    pinned = "\n".join(_section(bundle.text, "## Pinned facts"))
    assert bundle.tokens <= 4000 and all(f"### memory/{name}.md\n" in pinned for name in names), pinned[:300]
    assert all(f"… (cut to fit the budget: `memctl show {name}` prints all of it)" in pinned for name in names)
    small = context.build(store, budget=300, log=False)
    pinned = "\n".join(_section(small.text, "## Pinned facts"))
    assert small.tokens <= 300 and "more pinned facts left out to stay within the budget: " in pinned, pinned[-300:]
    shown = [name for name in names if f"### memory/{name}.md\n" in pinned]
    named = pinned.rsplit("left out to stay within the budget: ", 1)[1].split(" (`memctl show", 1)[0]
    assert shown and set(shown).isdisjoint(named.replace(" and ", ", ").split(", ")), (shown, named)
    for budget in (60, 120, 200):  # too small for a start of each: one start at most, and the line
        tiny = context.build(store, budget=budget, log=False)
        assert tiny.tokens <= budget and "more pinned facts left out to stay within the budget" in tiny.text, (budget, tiny.text)


def test_the_session_bundle_says_what_the_index_links_are_relative_to_and_they_resolve_so(root):
    """Its second line said every path was relative to the store, while MEMORY.md's links are to files
    beside it (memory/): an agent taking the line at its word opened store/user-00.md, which is not there."""
    store = _seed(root)
    text = context.build(store, budget=4000, log=False, state_root=True).text
    second = text.split("\n")[1]
    assert second == f"Store: {store.root} (every path below is relative to it; the index's links are relative to memory/)"
    links = [line.split("](", 1)[1].split(")", 1)[0] for line in _section(text, "## Memory index (MEMORY.md)") if "](" in line]
    assert len(links) == 13 and all((root / "memory" / link).is_file() for link in links)
    bare = context.build(store, budget=4000, log=False, state_root=True, include_index=False).text
    assert bare.split("\n")[1] == f"Store: {store.root} (every path below is relative to it)"


def test_a_fact_past_its_expiry_leaves_the_bundles_index_before_memory_md_is_rewritten(root, pinned_clock):
    """MEMORY.md lists a fact until memctl's next write regenerates it; `context` and the SessionStart
    hook printed its line the morning after it expired (FORMAT.md: context leaves it out)."""
    store = _seed(root)
    facts.remember(store, facts.FactInput(name="freeze", type="project", description="年末はデプロイ凍結",
                                          expires="2026-12-10"), commit_changes=False)
    assert "(freeze.md)" in (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    before = cli(root, "context", "--no-log", env={"MEMCTL_NOW": "2026-12-09T10:00:00+09:00"})
    after = cli(root, "context", "--no-log", env={"MEMCTL_NOW": "2026-12-12T10:00:00+09:00"})
    assert "- [freeze](freeze.md)" in before.stdout
    assert "(freeze.md)" not in after.stdout and "- [user-00](user-00.md)" in after.stdout
    hook = cli(root, "hook", "session-start", input="{}", env={"MEMCTL_NOW": "2026-12-12T10:00:00+09:00"})
    assert hook.exit_code == 0 and "(freeze.md)" not in hook.stdout and "(user-00.md)" in hook.stdout
