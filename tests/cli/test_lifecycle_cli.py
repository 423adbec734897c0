"""`memctl forget --policies [--dry-run] [--json]` and `memctl restore` through the CLI, on real git stores."""

from __future__ import annotations

import json

import pytest

from memctl import episodes, ledger
from memctl.config import toml_value
from memctl.store import open_store

from conftest import cli, git, memctl

NOW = "2026-09-14T12:00:00+00:00"
OLD = "2026-01-01T12:00:00+00:00"  # 256 days before NOW
RECENT = "2026-09-01T12:00:00+00:00"


def _commits(root):
    return git(root, "log", "--format=%s").splitlines()


def _commit_config(root, text):
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "test: config")


@pytest.fixture
def small(root, monkeypatch):
    """Three facts and three episodes: one of each to archive, compress, tombstone, keep."""
    def remember(when, *args):
        r = cli(root, "remember", *args, env={"MEMCTL_NOW": when})
        assert r.exit_code == 0, r.stderr

    remember(OLD, "low-thing", "-d", "a low value thing", "--importance", "0.05", "--confidence", "0.9")
    remember(OLD, "fb-thing", "-d", "feedback thing", "-t", "feedback", "--confidence", "0.1")
    remember(RECENT, "fresh-thing", "-d", "fresh fact")
    store = open_store(root)
    episodes.ensure_ledger(store)
    row = {"agent": "a", "tags": "", "refs": ""}
    ledger.append(store, episodes.LEDGER, [
        {**row, "id": "ep-1", "ts": "2026-07-01T12:00:00+00:00", "type": "error", "description": "deploy failed on timeout",
         "outcome": "raised the timeout", "importance": "0.8"},
        {**row, "id": "ep-2", "ts": OLD, "type": "decision", "description": "picked sqlite for the cache",
         "outcome": "", "importance": "0.2"},
        {**row, "id": "ep-3", "ts": RECENT, "type": "success", "description": "sqlite cache is fast", "outcome": "", "importance": "0.2"},
    ])
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    return root


PLAN = [
    "archive\tfact\tlow-thing\tdecayed-facts\teffective_confidence=0.07 idle_days=256",
    "compress\tepisode\tep-1\tresolved-errors\tevent_type=error has_outcome=true age_days=75",
    "tombstone\tepisode\tep-2\tstale-episodes\tfreshness=0 access_count=0 importance=0.2 idle_days=256",
    "keep\tfact\tfb-thing\tdecayed-facts\teffective_confidence=0.008 idle_days=256 (never-forget human-feedback; would archive)",
]
SUMMARY = "facts: 1 archived; episodes: 1 tombstoned, 1 compressed"


def test_dry_run_prints_the_plan_and_changes_nothing(small):
    head = _commits(small)
    r = cli(small, "forget", "--policies", "--dry-run")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == PLAN
    assert r.stderr == f"memctl: dry run, nothing changed: would forget {SUMMARY}; 1 kept by never-forget classes\n"
    assert _commits(small) == head and git(small, "status", "--porcelain") == ""


def test_dry_run_json(small):
    r = cli(small, "forget", "--policies", "--dry-run", "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {
        "dry_run": True, "applied": False, "commit": None, "summary": SUMMARY,
        "steps": [
            {"kind": "fact", "name": "low-thing", "key": "low-thing", "action": "archive", "policy": "decayed-facts",
             "matched": {"effective_confidence": 0.0696, "idle_days": 256.0}},
            {"kind": "episode", "name": "ep-1", "key": "ep-1", "action": "compress", "policy": "resolved-errors",
             "matched": {"event_type": "error", "has_outcome": True, "age_days": 75.0}},
            {"kind": "episode", "name": "ep-2", "key": "ep-2", "action": "tombstone", "policy": "stale-episodes",
             "matched": {"freshness": 0.0, "access_count": 0, "importance": 0.2, "idle_days": 256.0}},
        ],
        "kept": [{"kind": "fact", "name": "fb-thing", "key": "fb-thing", "would": "archive", "policy": "decayed-facts",
                  "never_forget": "human-feedback", "matched": {"effective_confidence": 0.0077, "idle_days": 256.0}}],
        "notes": [],
    }


def test_apply_is_one_commit_and_a_second_run_does_nothing(small):
    before = len(_commits(small))
    r = cli(small, "forget", "--policies")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == PLAN
    sha = git(small, "rev-parse", "HEAD").strip()
    assert r.stderr == f"memctl: forgot {SUMMARY}; 1 kept by never-forget classes (commit {sha[:10]})\n"
    assert len(_commits(small)) == before + 1
    assert git(small, "log", "-1", "--format=%B") == (
        f"lifecycle: forget by policy ({SUMMARY})\n\n"
        "decayed-facts: 1 fact archived\nresolved-errors: 1 episode compressed\nstale-episodes: 1 episode tombstoned\n\n")
    assert git(small, "status", "--porcelain") == ""
    index = (small / "memory" / "MEMORY.md").read_text()
    assert "low-thing" not in index and "fb-thing" in index and "fresh-thing" in index
    assert (small / "memory" / "archive" / "low-thing.md").exists()

    again = cli(small, "forget", "--policies")
    assert again.exit_code == 0
    assert again.stdout.splitlines() == PLAN[3:]
    assert again.stderr == "memctl: nothing to forget; 1 kept by never-forget classes\n"
    assert len(_commits(small)) == before + 1

    # recall and episode recall no longer show the tombstoned episode; the compressed one is still found
    r = cli(small, "recall", "sqlite", "--source", "episodes", "--mode", "keyword", "--no-log", "--json")
    assert [hit["name"] for hit in json.loads(r.stdout)] == ["ep-3"]
    r = cli(small, "episode", "recall", "sqlite", "--json")
    assert [hit["id"] for hit in json.loads(r.stdout)] == ["ep-3"]
    r = cli(small, "episode", "recall", "timeout", "--json")
    assert [hit["id"] for hit in json.loads(r.stdout)] == ["ep-1"]


def test_no_commit_writes_but_does_not_commit(small):
    before = _commits(small)
    r = cli(small, "forget", "--policies", "--no-commit")
    assert r.exit_code == 0 and r.stderr == f"memctl: forgot {SUMMARY}; 1 kept by never-forget classes\n"
    assert _commits(small) == before
    assert (small / "memory" / "archive" / "low-thing.md").exists()


BAD = [
    ("bad-import", "__import__('os').system('touch /tmp/pwned')",
     "memctl: error: memctl.toml [[forget.policy]] \"bad-import\": condition \"__import__('os').system('touch /tmp/pwned')\": "
     "unknown field '__import__' at column 1 (hint: fields for facts: importance, confidence, effective_confidence, age_days, "
     "idle_days, access_count, freshness, type, tags, expired, pinned; strings are quoted (\"error\"))\n"),
    ("bad-field", "importance < 0.1 AND idle_dayz > 3",
     "memctl: error: memctl.toml [[forget.policy]] \"bad-field\": condition 'importance < 0.1 AND idle_dayz > 3': "
     "unknown field 'idle_dayz' at column 22 (hint: fields for facts: importance, confidence, effective_confidence, age_days, "
     "idle_days, access_count, freshness, type, tags, expired, pinned; strings are quoted (\"error\"))\n"),
    ("bad-parens", "(importance < 0.1 OR (expired)",
     "memctl: error: memctl.toml [[forget.policy]] \"bad-parens\": condition '(importance < 0.1 OR (expired)': "
     "unbalanced parentheses: '(' at column 1 is not closed\n"),
]


@pytest.mark.parametrize("name,condition,message", BAD)
@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_policy_is_one_line_naming_it_and_changes_nothing(small, name, condition, message, dry_run):
    _commit_config(small, f'[[forget.policy]]\nname = "{name}"\ntarget = "facts"\ncondition = {toml_value(condition)}\naction = "archive"\n')
    before = _commits(small)
    files = sorted(p.relative_to(small) for p in small.rglob("*") if ".git" not in p.parts and ".memctl" not in p.parts)
    r = cli(small, "forget", "--policies", *(["--dry-run"] if dry_run else []))
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", message)
    assert _commits(small) == before and git(small, "status", "--porcelain") == ""
    assert sorted(p.relative_to(small) for p in small.rglob("*") if ".git" not in p.parts and ".memctl" not in p.parts) == files


def test_doctor_names_a_bad_policy(small):
    _commit_config(small, '[[forget.policy]]\nname = "typo"\ntarget = "episodes"\ncondition = "freshnes < 0.1"\naction = "tombstone"\n')
    r = cli(small, "doctor")
    assert r.exit_code == 1
    assert ("memctl.toml: error: [[forget.policy]] \"typo\": condition 'freshnes < 0.1': unknown field 'freshnes' "
            "at column 1 (hint: fields for episodes: importance, age_days, idle_days, access_count, freshness, type, event_type, "
            "tags, has_outcome; strings are quoted (\"error\"))") in r.stdout.splitlines()


# ---------------------------------------------------------------- restore

def test_restore_round_trips_byte_for_byte(root):
    r = cli(root, "remember", "deploy-day", "-d", "デプロイは火曜日", "--tag", "ops", "--why", "fewer incidents",
            "--how", "check the calendar", "--expires", "2030-01-01", env={"MEMCTL_NOW": OLD})
    assert r.exit_code == 0, r.stderr
    original = (root / "memory" / "deploy-day.md").read_bytes()
    r = cli(root, "forget", "deploy-day", "--reason", "moved to Wednesday", env={"MEMCTL_NOW": NOW})
    assert r.exit_code == 0 and not (root / "memory" / "deploy-day.md").exists()
    r = cli(root, "restore", "deploy-day")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "memory/deploy-day.md\n", "")
    assert (root / "memory" / "deploy-day.md").read_bytes() == original
    assert not (root / "memory" / "archive" / "deploy-day.md").exists()
    assert _commits(root)[:2] == ["memory: restore deploy-day", "memory: forget deploy-day"]
    assert "- [deploy-day](deploy-day.md) — デプロイは火曜日" in (root / "memory" / "MEMORY.md").read_text()
    assert git(root, "status", "--porcelain") == ""


def test_restore_json_and_superseded_note(root):
    assert cli(root, "remember", "old-way", "-d", "the old way of doing it").exit_code == 0
    assert cli(root, "remember", "new-way", "-d", "the new approach", "--supersedes", "old-way").exit_code == 0
    r = cli(root, "restore", "old-way", "--json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data == {"action": "restored", "name": "old-way", "path": "memory/old-way.md",
                    "from": "memory/archive/old-way.md", "commit": data["commit"]} and len(data["commit"]) == 40
    assert r.stderr == "memctl: memory/old-way.md was superseded by new-way, which still lists it under supersedes\n"


def test_every_archived_version_can_be_restored_by_its_file(root):
    """Three versions of `x` forgotten in one second are archive/x.md, x.STAMP.md and x.STAMP-2.md.
    `restore x` brings the newest back as x.md (it kept `.STAMP-2` in the live name); the first one,
    without a time in its name, can be named by its file once a later version exists."""
    for n in (1, 2, 3):
        assert cli(root, "remember", "x", "-d", f"version {n} of the x fact, number {n}", env={"MEMCTL_NOW": NOW}).exit_code == 0
        assert cli(root, "forget", "x", "--reason", f"r{n}", env={"MEMCTL_NOW": NOW}).exit_code == 0
    archived = sorted(p.name for p in (root / "memory" / "archive").glob("x*.md"))
    assert archived == ["x.20260914T120000-2.md", "x.20260914T120000.md", "x.md"], archived
    r = cli(root, "restore", "x", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["path"] == "memory/x.md", r.stdout
    assert "version 3" in (root / "memory" / "x.md").read_text() and "- [x](x.md)" in (root / "memory" / "MEMORY.md").read_text()
    assert cli(root, "forget", "x", "--reason", "again", env={"MEMCTL_NOW": NOW}).exit_code == 0
    for spelled in ("memory/archive/x.md", "archive/x.md"):  # the first version, as `list --all` prints it
        r = cli(root, "restore", spelled)
        assert (r.exit_code, r.stdout) == (0, "memory/x.md\n"), r.stderr
        assert "version 1" in (root / "memory" / "x.md").read_text()
        assert cli(root, "forget", "x", "--reason", "once more", env={"MEMCTL_NOW": NOW}).exit_code == 0
    r = cli(root, "restore", "x.20260914T120000.md")
    assert r.exit_code == 0 and "version 2" in (root / "memory" / "x.md").read_text()
    assert git(root, "status", "--porcelain") == ""
    r = cli(root, "restore", "elsewhere/x.md")
    assert r.exit_code == 2 and "invalid fact name" in r.stderr


def test_restore_refuses_a_name_that_differs_from_a_live_one_in_case_only(root):
    assert cli(root, "remember", "deploy-mon", "-d", "deploys on Mondays").exit_code == 0
    assert cli(root, "forget", "deploy-mon", "--reason", "not any more").exit_code == 0
    assert cli(root, "remember", "DEPLOY-MON", "-d", "something about cats and dogs").exit_code == 0
    before = _commits(root)
    r = cli(root, "restore", "deploy-mon")
    assert r.exit_code == 1 and "differs only in case or Unicode form from memory/DEPLOY-MON.md" in r.stderr, r.stderr
    assert _commits(root) == before and not (root / "memory" / "deploy-mon.md").exists()
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("args,code,message", [
    (["restore", "nope"], 3, "memctl: error: no archived fact named 'nope' (hint: `memctl list --all` shows archived facts)\n"),
    (["restore", "live-one"], 1, "memctl: error: fact 'live-one' is live, not archived (hint: `memctl show` it)\n"),
    (["restore", "../etc"], 2, "memctl: error: invalid fact name '../etc' (hint: give a fact name or file stem, not a path)\n"),
])
def test_restore_errors(root, args, code, message):
    assert cli(root, "remember", "live-one", "-d", "a live fact").exit_code == 0
    before = _commits(root)
    r = cli(root, *args)
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", message)
    assert _commits(root) == before


def test_superseding_one_fact_twice_in_one_write_is_refused(root):
    """`--supersedes b --supersedes b` archived b twice (two copies in archive/, `supersedes: [b, b]`), and a
    restore of b left the other copy listed as superseded beside the live b."""
    assert cli(root, "remember", "b", "--description", "Beta").exit_code == 0
    head = git(root, "rev-parse", "HEAD")
    done = cli(root, "remember", "e", "--description", "Epsilon", "--supersedes", "b", "--supersedes", "b")
    assert done.exit_code == 2 and "supersedes names memory/b.md twice" in done.stderr, done.stderr
    assert git(root, "rev-parse", "HEAD") == head and not (root / "memory" / "e.md").exists()
    assert not list((root / "memory" / "archive").glob("b*.md"))


def test_an_expired_fact_leaves_memory_md_and_the_session_start_bundle(root, monkeypatch):
    """recall left an expired fact out, but MEMORY.md kept listing it, unmarked, and the session-start hook
    showed it every session ("free shipping during the sale", long after the sale). The index lists only
    facts that have not expired; one that expired since the last write is a doctor warning until the
    next write or the daily maintain drops it."""
    monkeypatch.setenv("MEMCTL_NOW", "2026-12-01T12:00:00+09:00")
    assert cli(root, "remember", "sale", "--description", "セール中は送料無料", "--expires", "2026-12-10", "--pin").exit_code == 0
    assert cli(root, "remember", "shipping", "--description", "送料は全国一律500円").exit_code == 0
    index = root / "memory" / "MEMORY.md"
    assert "(sale.md)" in index.read_text(encoding="utf-8")
    monkeypatch.setenv("MEMCTL_NOW", "2026-12-11T12:00:00+09:00")
    found = [p for p in json.loads(cli(root, "doctor", "--json").stdout)["problems"] if p["code"] == "index-expired"]
    assert [(p["severity"], p["message"].split(" has ")[0]) for p in found] == [("warning", "sale.md")]
    assert cli(root, "maintain").exit_code == 0
    assert "(sale.md)" not in index.read_text(encoding="utf-8") and "(shipping.md)" in index.read_text(encoding="utf-8")
    assert cli(root, "doctor").exit_code == 0
    bundle = cli(root, "hook", "session-start", input="{}").stdout
    assert "送料は全国一律500円" in bundle and "セール中は送料無料" not in bundle
    assert cli(root, "remember", "late", "--description", "期限切れの告知", "--expires", "2026-12-01").exit_code == 0
    assert "(late.md)" not in index.read_text(encoding="utf-8")  # written already expired: never listed


def test_restore_beside_a_live_fact_of_the_same_description_says_so(root):
    """A tester: `restore` brought back a fact whose description a live fact now has, silently, where
    `remember` refuses the same description. It restores (asked for by name) and warns."""
    assert memctl(root, "remember", "zenn-rate", "--description", "Zenn投稿は1日1件まで").returncode == 0
    assert memctl(root, "forget", "zenn-rate", "--reason", "言い直す").returncode == 0
    assert memctl(root, "remember", "zenn-limit", "--description", "Zenn投稿は1日1件まで。").returncode == 0
    done = memctl(root, "restore", "zenn-rate")
    assert done.returncode == 0, done.stderr
    assert ("memctl: warning: memory/zenn-rate.md: the same description as the live memory/zenn-limit.md "
            "(hint: forget one of the two, or let one supersede the other)") in done.stderr.splitlines()
