"""memctl.lifecycle.forget and restore: fields, the pure plan, applying it, restoring.

The big test builds a store of 300 facts and 10,000 episodes over 400 days
with an access history (fixed seed), computes here, independently, what the
shipped default rules must do, and checks the plan, the apply, the second run
and recall against it.
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memctl import clock, episodes, facts, fact as fact_mod, ledger, recall, store as store_mod
from memctl.errors import NotFound, Refused
from memctl.lifecycle import forget, policy, restore
from memctl.lifecycle.forget import Item, Kept, Step
from memctl.store import open_store

from conftest import cli, git

NOW = datetime(2026, 9, 14, 12, 0, tzinfo=timezone.utc)
NOW_TEXT = NOW.isoformat(timespec="seconds")


def ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat(timespec="seconds")


@pytest.fixture
def at_now(monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW_TEXT)


def add_config(root: Path, text: str) -> None:
    """Append new tables to memctl.toml (the store has [facts] already: never a second one)."""
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "test: config")


def write_fact(root: Path, name: str, body: str = "Body.\n", **meta) -> Path:
    fact = fact_mod.Fact(name, {"name": name, "description": f"about {name}", "metadata": meta}, body)
    path = root / "memory" / f"{name}.md"
    path.write_text(fact_mod.render(fact), encoding="utf-8")
    return path


def commit_all(root: Path, message: str = "test: data") -> None:
    store = open_store(root)
    facts.reindex(store, commit_changes=False)
    store_mod.commit(store, [root / "memory", root / "ledgers", root / "memctl.toml"], message)


# ---------------------------------------------------------------- fields

def test_fact_values():
    fact = fact_mod.Fact("f", {"name": "f", "description": "d", "metadata": {
        "type": "project", "importance": 0.3, "confidence": 0.5, "created": ago(200), "updated": ago(50),
        "tags": ["a", "b"], "expires": "2026-01-01"}})
    values = forget.fact_values(fact, now=NOW, count=4, last_access=NOW - timedelta(days=10),
                                default_importance=0.6, default_confidence=0.7)
    assert values == {
        "importance": 0.3, "confidence": 0.5, "effective_confidence": pytest.approx(0.5 * math.exp(-0.1)),
        "age_days": 200.0, "idle_days": 10.0, "access_count": 4, "freshness": pytest.approx(0.5), "type": "project",
        "tags": ("a", "b"), "expired": True, "pinned": False,
    }


def test_fact_values_default_and_missing_dates():
    """No importance/confidence: the type's defaults; no dates: 0 days old (never forgotten for age)."""
    fact = fact_mod.Fact("f", {"name": "f", "description": "d", "type": "feedback", "pinned": True})
    values = forget.fact_values(fact, now=NOW, count=0, last_access=None, default_importance=0.8, default_confidence=1.0)
    assert values == {
        "importance": 0.8, "confidence": 1.0, "effective_confidence": 1.0, "age_days": 0.0, "idle_days": 0.0,
        "access_count": 0, "freshness": 1.0, "type": "feedback", "tags": (), "expired": False, "pinned": True,
    }


def test_episode_values():
    episode = episodes.Episode("ep-1", ago(95.5), "a", "error", "broke", "fixed it", 0.4, ("ops",))
    assert forget.episode_values(episode, now=NOW, count=1, last_access=NOW - timedelta(days=100)) == {
        "importance": 0.4, "age_days": 95.5, "idle_days": 95.5, "access_count": 1,
        "freshness": pytest.approx(0.045), "type": "error", "event_type": "error", "tags": ("ops",), "has_outcome": True,
    }
    blank = episodes.Episode("ep-2", ago(10), "a", "success", "ok", "  ", 0.5)
    assert forget.episode_values(blank, now=NOW, count=0, last_access=None)["has_outcome"] is False


# ---------------------------------------------------------------- the pure plan

BASE_FACT = {"importance": 0.5, "confidence": 0.7, "effective_confidence": 0.7, "age_days": 10.0, "idle_days": 10.0,
             "access_count": 0, "freshness": 0.9, "type": "project", "tags": (), "expired": False, "pinned": False}
BASE_EPISODE = {"importance": 0.3, "age_days": 10.0, "idle_days": 10.0, "access_count": 0, "freshness": 0.9,
                "type": "decision", "event_type": "decision", "tags": (), "has_outcome": False}


def fact_item(key: str, compressed: bool = False, **values) -> Item:
    return Item("fact", key, key, {**BASE_FACT, **values}, compressed)


def episode_item(key: str, compressed: bool = False, **values) -> Item:
    if "type" in values:
        values["event_type"] = values["type"]
    return Item("episode", key, key, {**BASE_EPISODE, **values}, compressed)


def rules(*specs, never=None, **limits) -> policy.Rules:
    raw = {"forget": {"defaults": False, "policy": list(specs), **limits}}
    if never is not None:
        raw["forget"]["never"] = never
    return policy.load(raw)


def test_plan_with_the_defaults():
    items = [
        fact_item("expired", expired=True),
        fact_item("decayed", effective_confidence=0.19, idle_days=31.0),
        fact_item("decayed-but-recent", effective_confidence=0.19, idle_days=29.0),
        fact_item("low", importance=0.05, idle_days=121.0, effective_confidence=0.5),
        fact_item("fine", importance=0.05, idle_days=119.0, effective_confidence=0.5),
        fact_item("feedback", type="feedback", expired=True),
        fact_item("pinned", pinned=True, effective_confidence=0.1, idle_days=40.0),
        fact_item("money", tags=("ops", "money"), expired=True),
    ]
    eps = [
        episode_item("stale", freshness=0.05, age_days=95.0, idle_days=95.0),
        episode_item("stale-accessed", freshness=0.05, age_days=95.0, idle_days=95.0, access_count=2),
        episode_item("stale-important", freshness=0.05, age_days=95.0, idle_days=95.0, importance=0.5),
        episode_item("stale-but-seen", freshness=0.05, age_days=95.0, idle_days=80.0),
        episode_item("resolved", type="error", has_outcome=True, age_days=61.0),
        episode_item("unresolved", type="error", age_days=61.0),
        episode_item("resolved-and-stale", type="error", has_outcome=True, freshness=0.0, age_days=120.0, idle_days=120.0),
        episode_item("resolved-compressed", compressed=True, type="error", has_outcome=True, age_days=61.0),
        episode_item("security", tags=("security",), freshness=0.0, age_days=120.0, idle_days=120.0),
    ]
    plan = forget.plan(items, eps, policy.load({}))
    assert [(s.item.key, s.action, s.policy, s.matched) for s in plan.steps] == [
        ("expired", "archive", "expired-facts", {"expired": True}),
        ("decayed", "archive", "decayed-facts", {"effective_confidence": 0.19, "idle_days": 31.0}),
        ("low", "archive", "low-value-facts", {"importance": 0.05, "idle_days": 121.0}),
        ("stale", "tombstone", "stale-episodes", {"freshness": 0.05, "access_count": 0, "importance": 0.3, "idle_days": 95.0}),
        ("resolved", "compress", "resolved-errors", {"event_type": "error", "has_outcome": True, "age_days": 61.0}),
        ("resolved-and-stale", "tombstone", "stale-episodes",
         {"freshness": 0.0, "access_count": 0, "importance": 0.3, "idle_days": 120.0}),
    ]
    assert [(k.item.key, k.action, k.policy, k.never) for k in plan.kept] == [
        ("feedback", "archive", "expired-facts", "human-feedback"),
        ("pinned", "archive", "decayed-facts", "pinned"),
        ("money", "archive", "expired-facts", "money"),
        ("security", "tombstone", "stale-episodes", "security-incident"),
    ]
    assert plan.summary() == "facts: 3 archived; episodes: 2 tombstoned, 1 compressed"
    assert plan.by_policy() == [
        "expired-facts: 1 fact archived", "decayed-facts: 1 fact archived", "low-value-facts: 1 fact archived",
        "stale-episodes: 2 episodes tombstoned", "resolved-errors: 1 episode compressed",
    ]
    assert forget.commit_message(plan) == (
        "lifecycle: forget by policy (facts: 3 archived; episodes: 2 tombstoned, 1 compressed)\n\n"
        + "\n".join(plan.by_policy()) + "\n")


def test_removal_outranks_compression_whatever_the_order():
    both = rules(
        {"name": "squeeze", "target": "facts", "condition": "importance < 0.5", "action": "compress"},
        {"name": "drop", "target": "facts", "condition": "importance < 0.2", "action": "archive"},
    )
    plan = forget.plan([fact_item("a", importance=0.1), fact_item("b", importance=0.3),
                        fact_item("c", True, importance=0.3), fact_item("d", True, importance=0.1)], [], both)
    assert [(s.item.key, s.action, s.policy) for s in plan.steps] == [
        ("a", "archive", "drop"), ("b", "compress", "squeeze"), ("d", "archive", "drop")]


def test_capacity_archives_the_lowest_retention_first():
    items = [
        fact_item("a", importance=0.9, freshness=0.9),           # 0.36 + 0.27 = 0.63
        fact_item("b", importance=0.2, freshness=0.1),           # 0.08 + 0.03 = 0.11
        fact_item("c", importance=0.2, freshness=0.1, access_count=3),  # 0.11 + 0.3 = 0.41
        fact_item("d", importance=0.1, freshness=0.0, idle_days=50.0),  # 0.04
        fact_item("e", importance=0.1, freshness=0.0, idle_days=60.0),  # 0.04, idler: first
        fact_item("f", importance=0.0, freshness=0.0, type="feedback"),  # never-forget
        fact_item("g", expired=True),
    ]
    plan = forget.plan(items, [], rules({"name": "x", "target": "facts", "condition": "expired", "action": "archive"},
                                        max_facts=3))
    assert [(s.item.key, s.policy, s.matched) for s in plan.steps] == [
        ("g", "x", {"expired": True}),
        ("e", "max_facts", {"retention": pytest.approx(0.04), "importance": 0.1, "freshness": 0.0, "access_count": 0}),
        ("d", "max_facts", {"retention": pytest.approx(0.04), "importance": 0.1, "freshness": 0.0, "access_count": 0}),
        ("b", "max_facts", {"retention": pytest.approx(0.11), "importance": 0.2, "freshness": 0.1, "access_count": 0}),
    ]
    assert forget.retention(items[2].values, most=3) == pytest.approx(0.41)
    assert plan.notes == ()
    # Applied, the rest fits: a second plan over what remains is empty.
    left = [i for i in items if i.key not in {s.item.key for s in plan.steps}]
    assert forget.plan(left, [], rules(max_facts=3)).steps == ()


def test_capacity_never_touches_never_forget_items_and_says_so():
    eps = [episode_item(f"e{i}", type="feedback") for i in range(3)] + [episode_item("plain")]
    plan = forget.plan([], eps, rules(max_episodes=1))
    assert [(s.item.key, s.action, s.policy) for s in plan.steps] == [("plain", "tombstone", "max_episodes")]
    assert plan.notes == ("max_episodes = 1: 3 episodes stay, the rest are never-forget",)


def test_grace_days_protect_recent_items():
    grace = rules({"name": "g", "target": "episodes", "condition": "importance < 0.5", "action": "tombstone", "grace_days": 30})
    plan = forget.plan([], [episode_item("old", idle_days=30.0), episode_item("new", idle_days=29.9)], grace)
    assert [(s.item.key, s.matched) for s in plan.steps] == [("old", {"importance": 0.3, "idle_days": 30.0})]


def test_never_forget_classes_from_config():
    custom = rules({"name": "all", "target": "facts", "condition": "true", "action": "archive"},
                   never={"human-feedback": {"types": [], "tags": []}, "vip": {"types": ["user"], "tags": ["vip"]}})
    plan = forget.plan([fact_item("fb", type="feedback"), fact_item("u", type="user"), fact_item("t", tags=("vip",))], [], custom)
    assert [s.item.key for s in plan.steps] == ["fb"]
    assert [(k.item.key, k.never) for k in plan.kept] == [("u", "vip"), ("t", "vip")]


# ---------------------------------------------------------------- the generated store

TOPICS = ["deploy", "billing", "backup", "review", "release", "oncall", "schema", "cache"]
PROTECTED = [  # the default never-forget classes, in order
    ("human-feedback", {"feedback"}, {"feedback", "human-feedback"}),
    ("security-incident", set(), {"security", "security-incident"}),
    ("standing-rule", set(), {"rule", "standing-rule"}),
    ("money", set(), {"money", "finance", "billing", "payment"}),
    ("compliance", set(), {"compliance", "legal"}),
]


def protected_class(item_type: str, tags, pinned: bool = False) -> str | None:
    if pinned:
        return "pinned"
    for name, types, tag_set in PROTECTED:
        if item_type in types or set(tags) & tag_set:
            return name
    return None


def days(when: datetime) -> float:
    return max(0.0, (NOW - when).total_seconds() / 86400)


def generate(root: Path, seed: int = 8) -> dict:
    """300 facts, 10,000 episodes over 400 days, 2,000 access rows (uses and displays); returns what was generated."""
    rng = random.Random(seed)
    store = open_store(root)
    gen = {"facts": {}, "episodes": {}, "access": {}}
    for i in range(300):
        age = rng.uniform(0, 400)
        since_update = age if rng.random() < 0.5 else rng.uniform(0, age)
        meta = {
            "type": rng.choice(["user", "feedback", "project", "project", "reference"]),
            "importance": rng.choice([0.05, 0.08, 0.3, 0.6, 0.9]),
            "confidence": rng.choice([0.3, 0.5, 0.7, 1.0]),
            "created": ago(age), "updated": ago(since_update),
        }
        tags = rng.sample(["ops", "misc", "draft", "security", "money", "compliance"], k=rng.choice([0, 0, 1, 1, 2]))
        if tags:
            meta["tags"] = tags
        roll = rng.random()
        expired = roll < 0.05
        if expired:
            meta["expires"] = (NOW - timedelta(days=rng.uniform(2, 50))).date().isoformat()
        elif roll < 0.1:
            meta["expires"] = (NOW + timedelta(days=30)).date().isoformat()
        pinned = rng.random() < 0.03
        if pinned:
            meta["pinned"] = True
        name = f"fact-{i:03d}"
        token = f"kw{i:03d}q"
        fact = fact_mod.Fact(name, {"name": name, "description": f"Fact {i} about {token} and the {rng.choice(TOPICS)} routine",
                                    "metadata": meta}, f"Details of {token}.\n**Why:** generated\n**How to apply:** read it\n")
        (root / "memory" / f"{name}.md").write_text(fact_mod.render(fact), encoding="utf-8")
        gen["facts"][name] = {"token": token, "type": meta["type"], "importance": meta["importance"],
                              "confidence": meta["confidence"], "created": NOW - timedelta(days=age),
                              "updated": NOW - timedelta(days=since_update), "tags": tags, "expired": expired, "pinned": pinned}
    rows = []
    for i, age in enumerate(sorted((rng.uniform(0, 400) for _ in range(10_000)), reverse=True)):
        kind = rng.choices(["decision", "error", "success", "feedback", "conflict"], weights=[3, 3, 3, 1, 1])[0]
        outcome = f"resolved by retry {i}" if rng.random() < 0.5 else ""
        tags = [t for t in ("ops", "deploy", "security", "money") if rng.random() < 0.08]
        importance = rng.choice([0.1, 0.2, 0.3, 0.4, 0.6, 0.8])
        ep_id = f"ep-gen-{i:05d}"
        token = f"ev{i:05d}z"
        rows.append({"id": ep_id, "ts": ago(age), "agent": "gen", "type": kind,
                     "description": f"Episode {i} about {token} during {rng.choice(TOPICS)}", "outcome": outcome,
                     "importance": str(importance), "tags": ",".join(tags), "refs": ""})
        gen["episodes"][ep_id] = {"token": token, "type": kind, "ts": NOW - timedelta(days=age), "outcome": outcome,
                                  "tags": tags, "importance": importance}
    episodes.ensure_ledger(store, commit_changes=False)
    ledger.append(store, episodes.LEDGER, rows, commit_changes=False)
    keys = list(gen["facts"]) + list(gen["episodes"])
    hot = rng.sample(keys, 400)  # a few keys get most of the reads
    access = []
    for n in range(2000):
        when = NOW - timedelta(days=rng.uniform(0, 400))
        # 1,500 reads of a few hot keys (counts >= 2), 500 single reads of any key (a count of 1, a recent touch)
        shown = sorted(set(rng.sample(hot, rng.choice([1, 2, 3])))) if n < 1500 else [rng.choice(keys)]
        # a use (show, used, an agent's `used:` tool) counts; being shown by recall or context does not
        command = rng.choice(["show", "used", "used:mcp", "recall", "context"])
        for key in shown if command in ("show", "used", "used:mcp") else ():
            seen = gen["access"].setdefault(key, [0, None])
            seen[0] += 1
            seen[1] = when if seen[1] is None or when > seen[1] else seen[1]
        access.append({"ts": when.isoformat(timespec="seconds"), "agent": "gen", "command": command,
                       "query": "q", "shown": ",".join(shown)})
    recall.ensure_access_ledger(store)
    ledger.append(store, recall.ACCESS_LEDGER, access, commit_changes=False)
    commit_all(root, "test: generated store")
    return gen


def expected_plan(gen: dict) -> tuple[set, set]:
    """The shipped defaults, written out by hand: (steps, kept) as (kind, key, action, policy[, class])."""
    steps, kept = set(), set()
    for name, f in gen["facts"].items():
        count, last = gen["access"].get(name, [0, None])
        idle = days(max(w for w in (f["created"], f["updated"], last) if w is not None))
        effective = f["confidence"] * math.exp(-0.01 * idle)
        chosen = None
        if f["expired"]:
            chosen = "expired-facts"
        elif idle >= 30 and effective < 0.2:
            chosen = "decayed-facts"
        elif idle >= 30 and f["importance"] < 0.1 and idle > 120:
            chosen = "low-value-facts"
        if chosen:
            cls = protected_class(f["type"], f["tags"], f["pinned"])
            if cls:
                kept.add(("fact", name, "archive", chosen, cls))
            else:
                steps.add(("fact", name, "archive", chosen))
    for ep_id, e in gen["episodes"].items():
        count, last = gen["access"].get(ep_id, [0, None])
        age = days(e["ts"])
        idle = days(max(w for w in (e["ts"], last) if w is not None))
        freshness = max(0.0, 1 - 0.01 * age)
        if idle >= 90 and freshness < 0.1 and count < 2 and e["importance"] < 0.5:
            chosen = ("tombstone", "stale-episodes")
        elif e["type"] == "error" and e["outcome"] and age > 60:
            chosen = ("compress", "resolved-errors")
        else:
            continue
        cls = protected_class(e["type"], e["tags"])
        if cls:
            kept.add(("episode", ep_id, *chosen, cls))
        else:
            steps.add(("episode", ep_id, *chosen))
    return steps, kept


def test_generated_store_forgets_exactly_what_the_rules_say(root, at_now):
    gen = generate(root)
    steps, kept = expected_plan(gen)
    actions = {(k, a) for k, _, a, _ in steps}
    assert actions == {("fact", "archive"), ("episode", "tombstone"), ("episode", "compress")}
    assert len(steps) > 1000 and sum(1 for s in steps if s[0] == "fact") > 20 and len(kept) > 50

    # 1. the dry run plans exactly those items, and changes nothing
    head = git(root, "rev-parse", "HEAD").strip()
    before = {p.name: p.read_bytes() for p in (root / "memory").glob("*.md")}
    tsv_before = (root / "ledgers" / "episodes.tsv").read_bytes()
    dry = cli(root, "forget", "--policies", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    data = json.loads(dry.stdout)
    assert {(s["kind"], s["key"], s["action"], s["policy"]) for s in data["steps"]} == steps
    assert len(data["steps"]) == len(steps)
    assert {(k["kind"], k["key"], k["would"], k["policy"], k["never_forget"]) for k in data["kept"]} == kept
    assert git(root, "rev-parse", "HEAD").strip() == head and git(root, "status", "--porcelain") == ""

    # 2. applying it: one commit, facts archived, MEMORY.md without them, tombstones appended
    applied = cli(root, "forget", "--policies")
    assert applied.exit_code == 0, applied.stderr
    assert len(applied.stdout.splitlines()) == len(steps) + len(kept)
    assert git(root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"
    n_facts = sum(1 for s in steps if s[0] == "fact")
    n_tomb = sum(1 for s in steps if s[2] == "tombstone")
    n_comp = sum(1 for s in steps if s[2] == "compress")
    summary = f"facts: {n_facts} archived; episodes: {n_tomb} tombstoned, {n_comp} compressed"
    assert git(root, "log", "-1", "--format=%s").strip() == f"lifecycle: forget by policy ({summary})"
    assert git(root, "status", "--porcelain") == ""
    archived = {s[1] for s in steps if s[0] == "fact"}
    # MEMORY.md and the topic files it links (the facts beyond its first 200 lines), links made relative to memory/
    index_files = [root / "memory" / "MEMORY.md", *sorted((root / "memory" / "memory-index").glob("*.md"))]
    index = "\n".join(p.read_text(encoding="utf-8") for p in index_files).replace("(../", "(")
    for name in gen["facts"]:
        live = root / "memory" / f"{name}.md"
        if name in archived:
            assert not live.exists() and f"({name}.md)" not in index
            moved = fact_mod.load(root / "memory" / "archive" / f"{name}.md")
            assert moved.meta("archived") == NOW_TEXT and moved.meta("archived_policy") in {s[3] for s in steps}
        else:  # kept facts, never-forget ones included, are untouched byte for byte; listed unless expired
            expired = clock.expired(fact_mod.load(live).meta("expires"), NOW)
            assert live.read_bytes() == before[f"{name}.md"] and (f"({name}.md)" in index) != expired
    store = open_store(root)
    assert facts.index_drift(store) == []
    assert (root / "ledgers" / "episodes.tsv").read_bytes() == tsv_before  # append-only: not rewritten
    marks = episodes.forgotten(store)
    assert {(i, m["action"]) for i, m in marks.items()} == {(s[1], s[2]) for s in steps if s[0] == "episode"}
    protected_ids = {k[1] for k in kept if k[0] == "episode"}
    assert not protected_ids & set(marks)
    tombstoned = {s[1] for s in steps if s[2] == "tombstone"}
    listed = episodes.list_episodes(store)
    assert len(listed) == 10_000 - len(tombstoned) and not tombstoned & {e.id for e in listed}

    # 3. a second run plans nothing, changes nothing, and says so
    again = cli(root, "forget", "--policies")
    assert again.exit_code == 0
    assert [line.split("\t")[0] for line in again.stdout.splitlines()] == ["keep"] * len(kept)
    assert again.stderr == f"memctl: nothing to forget; {len(kept)} kept by never-forget classes\n"
    assert git(root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"

    # 4. recall no longer shows forgotten items, and answers every control query whose answer was kept
    expired = {n for n, f in gen["facts"].items() if f["expired"]}  # recall hides expired facts itself
    names = list(gen["facts"])
    _, results = recall.recall(store, [gen["facts"][n]["token"] for n in names], k=3, mode="keyword", log=False)
    for name, hits in zip(names, results):
        keys = [h.item.key for h in hits]
        if name in archived or name in expired:
            assert name not in keys
        else:
            assert keys[0] == name
    sample = sorted(random.Random(1).sample(sorted(gen["episodes"]), 300) + sorted(tombstoned)[:100])
    _, results = recall.recall(store, [gen["episodes"][i]["token"] for i in sample], k=3, source="episodes",
                               mode="keyword", log=False)
    for ep_id, hits in zip(sample, results):
        keys = [h.item.key for h in hits]
        assert (ep_id not in keys) if ep_id in tombstoned else (keys[0] == ep_id)
    gone = sorted(tombstoned)[0]
    assert recall.recall(store, [gen["episodes"][gone]["token"]], source="episodes", mode="keyword", log=False)[1] == [[]]
    shown = cli(root, "recall", gen["facts"][sorted(archived)[0]]["token"], "--mode", "keyword", "--no-log")
    assert shown.exit_code == 1 and shown.stdout == ""  # nothing relevant: exit 1, like grep


# ---------------------------------------------------------------- compress, tombstone, idempotence

LONG_BODY = ("First line of a long explanation that goes on. " * 6).strip() + "\nSecond paragraph.\n**Why:** because\n**How to apply:** keep it short\n"


def test_compress_a_fact_keeps_a_short_version_and_archives_the_full_one(root, at_now):
    add_config(root, '[[forget.policy]]\nname = "squeeze-drafts"\ntarget = "facts"\n'
                     'condition = \'tags HAS "draft"\'\naction = "compress"\n')
    path = write_fact(root, "draft-notes", LONG_BODY, type="project", importance=0.5, confidence=0.7,
                      created=ago(5), updated=ago(5), tags=["draft"])
    original = path.read_bytes()
    commit_all(root)
    store = open_store(root)
    outcome = forget.forget_by_policies(store)
    assert [(s.item.key, s.action, s.policy) for s in outcome.plan.steps] == [("draft-notes", "compress", "squeeze-drafts")]
    short = fact_mod.load(path)
    assert short.body == LONG_BODY.splitlines()[0][:199].rstrip() + "…\n**How to apply:** keep it short\n"
    assert short.meta("compressed") == NOW_TEXT and short.meta("full_text") == "archive/draft-notes.md"
    assert short.front["metadata"]["tags"] == ["draft"] and short.meta("updated") == ago(5)
    full = fact_mod.load(root / "memory" / "archive" / "draft-notes.md")
    assert full.body == LONG_BODY and full.meta("archived_policy") == "squeeze-drafts"
    assert full.meta("archived_reason") == 'policy squeeze-drafts: tags=draft'
    assert "(draft-notes.md) — about draft-notes" in (root / "memory" / "MEMORY.md").read_text()
    assert git(root, "log", "-1", "--format=%s").strip() == "lifecycle: forget by policy (facts: 1 compressed)"
    assert forget.forget_by_policies(open_store(root)).plan.steps == ()
    # restore puts the full version back in place of the short one, byte for byte
    change = restore.restore(open_store(root), "draft-notes")
    assert change.action == "restored" and path.read_bytes() == original
    assert not (root / "memory" / "archive" / "draft-notes.md").exists()
    assert git(root, "status", "--porcelain") == ""


def test_episode_compress_and_tombstone_are_appended_and_honoured(root, at_now):
    store = open_store(root)
    episodes.ensure_ledger(store)
    long = "A long error description " + "x" * 200
    ledger.append(store, episodes.LEDGER, [
        {"id": "ep-a", "ts": ago(70), "agent": "", "type": "error", "description": long, "outcome": "fixed\nby restart",
         "importance": "0.4", "tags": "", "refs": ""},
        {"id": "ep-b", "ts": ago(100), "agent": "", "type": "decision", "description": "old choice", "outcome": "",
         "importance": "0.2", "tags": "", "refs": ""},
        {"id": "ep-c", "ts": ago(1), "agent": "", "type": "decision", "description": "new choice", "outcome": "",
         "importance": "0.2", "tags": "", "refs": ""},
    ])
    outcome = forget.forget_by_policies(open_store(root))
    assert outcome.applied and [(s.item.key, s.action) for s in outcome.plan.steps] == [("ep-a", "compress"), ("ep-b", "tombstone")]
    assert (root / "ledgers" / "episode-tombstones.tsv").read_text().splitlines() == [
        "ts\tid\taction\tpolicy\treason\tdescription\toutcome",
        f"{NOW_TEXT}\tep-a\tcompress\tresolved-errors\tevent_type=error has_outcome=true age_days=70\t{long[:99]}…\tfixed",
        f"{NOW_TEXT}\tep-b\ttombstone\tstale-episodes\tfreshness=0 access_count=0 importance=0.2 idle_days=100\t\t",
    ]
    store = open_store(root)
    assert [(e.id, e.description, e.outcome) for e in episodes.list_episodes(store)] == [
        ("ep-a", long[:99] + "…", "fixed"), ("ep-c", "new choice", "")]
    assert [e.id for e in episodes.list_episodes(store, include_forgotten=True)] == ["ep-a", "ep-b", "ep-c"]
    assert "episode-tombstones" in store.config.ledgers  # declared like every ledger, in the same commit
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["ledgers/episode-tombstones.tsv", "memctl.toml"]
    assert git(root, "status", "--porcelain") == ""
    assert forget.forget_by_policies(store).plan.steps == ()
    # the compressed episode can still go stale later: a tombstone outranks the compression
    later = forget.plan([], forget.gather(store, NOW + timedelta(days=400)).episodes, policy.load({}))
    assert [(s.item.key, s.action) for s in later.steps] == [("ep-a", "tombstone"), ("ep-c", "tombstone")]


def test_capacity_limit_applied_then_idempotent(root, at_now):
    add_config(root, "[forget]\ndefaults = false\nmax_facts = 2\n")
    for name, importance in (("keep-a", 0.9), ("keep-b", 0.8), ("drop-c", 0.2), ("drop-d", 0.1)):
        write_fact(root, name, type="project", importance=importance, confidence=0.7, created=ago(10), updated=ago(10))
    commit_all(root)
    outcome = forget.forget_by_policies(open_store(root))
    assert [(s.item.key, s.policy) for s in outcome.plan.steps] == [("drop-d", "max_facts"), ("drop-c", "max_facts")]
    assert sorted(p.name for p in (root / "memory" / "archive").glob("*.md")) == ["drop-c.md", "drop-d.md"]
    assert fact_mod.load(root / "memory" / "archive" / "drop-d.md").meta("archived_reason") == \
        "policy max_facts: retention=0.31 importance=0.1 freshness=0.9 access_count=0"
    assert forget.forget_by_policies(open_store(root)).plan.steps == ()


def test_dry_run_changes_nothing_and_writes_no_ledger(root, at_now):
    store = open_store(root)
    episodes.ensure_ledger(store)
    ledger.append(store, episodes.LEDGER, [{"id": "ep-b", "ts": ago(100), "agent": "", "type": "decision", "description": "old",
                                            "outcome": "", "importance": "0.2", "tags": "", "refs": ""}])
    toml = (root / "memctl.toml").read_bytes()
    outcome = forget.forget_by_policies(open_store(root), dry_run=True)
    assert not outcome.applied and len(outcome.plan.steps) == 1
    assert not (root / "ledgers" / "episode-tombstones.tsv").exists() and (root / "memctl.toml").read_bytes() == toml


def test_hand_edited_fact_is_not_swept_into_the_commit(root, at_now):
    path = write_fact(root, "old", type="project", importance=0.05, confidence=0.1, created=ago(200), updated=ago(200))
    commit_all(root)
    path.write_text(path.read_text() + "hand edit\n")
    with pytest.raises(Refused):
        forget.forget_by_policies(open_store(root))
    assert path.exists() and not (root / "memory" / "archive" / "old.md").exists()


def test_policy_problems_for_doctor(root):
    add_config(root, '[[forget.policy]]\nname = "bad"\ntarget = "facts"\ncondition = "(importance < 0.1"\naction = "archive"\n')
    from memctl import doctor

    problems = doctor.setting_problems(open_store(root))
    assert [(p.path, p.code, p.message) for p in problems] == [(
        "memctl.toml", "bad-policy",
        "[[forget.policy]] \"bad\": condition '(importance < 0.1': unbalanced parentheses: '(' at column 1 is not closed")]


# ---------------------------------------------------------------- restore

def test_restore_round_trips_every_way_of_archiving(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", ago(300))
    store = open_store(root)
    spec = facts.FactInput(name="deploy-rule", description="Deploys go out on Tuesdays", type="reference", tags=("ops", "日本語"),
                           why="fewer incidents", how="check the calendar", source="session 12", expires="2027-01-01",
                           importance=0.3, confidence=0.4)
    facts.remember(store, spec)
    path = root / "memory" / "deploy-rule.md"
    original = path.read_bytes()
    # 1. forget --reason
    facts.forget(store, "deploy-rule", "wrong")
    assert restore.restore(open_store(root), "deploy-rule").action == "restored"
    assert path.read_bytes() == original
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: restore deploy-rule"
    # 2. forgetting by policy (decayed by now)
    monkeypatch.setenv("MEMCTL_NOW", NOW_TEXT)
    steps = forget.forget_by_policies(open_store(root)).plan.steps
    assert [(s.item.key, s.policy) for s in steps] == [("deploy-rule", "decayed-facts")]
    restore.restore(open_store(root), "deploy-rule")
    assert path.read_bytes() == original
    # 3. supersession
    facts.remember(open_store(root), facts.FactInput(name="deploy-rule-2", description="Deploys go out on Wednesdays",
                                                     supersedes=("deploy-rule",)))
    restore.restore(open_store(root), "deploy-rule")
    assert path.read_bytes() == original
    assert git(root, "status", "--porcelain") == ""
    assert "(deploy-rule.md)" in (root / "memory" / "MEMORY.md").read_text()


def archive_twice(root: Path, monkeypatch, name: str) -> None:
    """Two versions of `name` archived a day apart: archive/<name>.md, then archive/<name>.20260913T120000.md."""
    store = open_store(root)
    for n, when in ((1, ago(2)), (2, ago(1))):
        monkeypatch.setenv("MEMCTL_NOW", when)
        facts.remember(store, facts.FactInput(name=name, description=f"version {n} of {name}"))
        facts.forget(store, name, f"version {n}")


def test_restore_picks_the_newest_version(root, monkeypatch):
    archive_twice(root, monkeypatch, "x")
    store = open_store(root)
    assert sorted(p.name for p in (root / "memory" / "archive").glob("x*.md")) == ["x.20260913T120000.md", "x.md"]
    assert facts.find(store, "x").description == "version 2 of x"  # what show shows is what restore brings back
    assert facts.find(store, "x.20260913T120000").description == "version 2 of x"
    change = restore.restore(open_store(root), "x")
    assert (change.fact.description, store.rel(change.fact.path)) == ("version 2 of x", "memory/x.md")
    assert store.rel(change.archived[0].path) == "memory/archive/x.20260913T120000.md"
    with pytest.raises(NotFound) as info:
        restore.restore(open_store(root), "nothing-here")
    assert info.value.message == "no archived fact named 'nothing-here'"
    monkeypatch.setenv("MEMCTL_NOW", NOW_TEXT)
    facts.remember(open_store(root), facts.FactInput(name="z", description="only live"))
    with pytest.raises(Refused) as info:
        restore.restore(open_store(root), "z")
    assert info.value.message == "fact 'z' is live, not archived"


def test_restore_a_specific_version_and_refuse_a_live_name(root, monkeypatch):
    archive_twice(root, monkeypatch, "y")
    newer = next(p.stem for p in (root / "memory" / "archive").glob("y.*.md"))
    restore.restore(open_store(root), newer)
    assert fact_mod.load(root / "memory" / "y.md").description == "version 2 of y"
    with pytest.raises(Refused) as info:
        restore.restore(open_store(root), "y")  # only the first archived version is left, and y is live
    assert info.value.message == "cannot restore memory/archive/y.md: live fact memory/y.md has the same name"
    assert "rename" not in info.value.hint  # there is no rename command


def test_restore_in_a_claude_code_memory_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW_TEXT)
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- [feedback_x.md](feedback_x.md) - no em dash in titles\n")
    text = "---\nname: feedback_x\ndescription: no em dash in titles\ntype: feedback\n---\nBody here.\n"
    (memory / "feedback_x.md").write_text(text)
    store = open_store(memory)
    facts.forget(store, "feedback_x", "test", commit_changes=False)
    assert "archived:" in (memory / "archive" / "feedback_x.md").read_text()
    restore.restore(open_store(memory), "feedback_x", commit_changes=False)
    assert (memory / "feedback_x.md").read_text() == text
    assert "feedback_x.md" in (memory / "MEMORY.md").read_text()


def test_unarchived_removes_only_the_keys_archiving_added():
    fact = fact_mod.Fact("a", {"name": "a", "description": "d", "metadata": {
        "type": "project", "valid_to": "2026-01-01", "archived": NOW_TEXT, "archived_reason": "r"}})
    back = restore.unarchived(fact, "a", None)
    assert back.front == {"name": "a", "description": "d", "metadata": {"type": "project", "valid_to": "2026-01-01"}}
