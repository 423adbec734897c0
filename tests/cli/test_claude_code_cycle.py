"""Issue 13: memctl living in a Claude Code memory directory while Claude Code keeps writing to it.

The directory is built the way Claude Code writes it: `~/.claude/projects/<project>/memory/`, an index
MEMORY.md without markers whose lines are `- [Title](file.md) — hook`, fact files with `name`,
`description` and `type` (top level, or under `metadata:`), and Claude Code appending facts and index
lines between memctl's writes. The whole cycle runs with and without git.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Result, cli, git, memctl
from memctl import index as index_mod

CLAUDE_LINES = [
    "- [テスト方針](feedback_testing.md) — 統合テストは実DBに当てる、モック禁止",
    "- [User role](user_role.md) — The user is a data scientist focused on observability",
    "- [締め切り](project_deadline.md) — リリースは12月5日（モバイル版の凍結は12月1日）",
]
CLAUDE_INDEX = "# Project memory\n\n" + "\n".join(CLAUDE_LINES) + "\n\nNotes Claude Code keeps by hand stay as they are.\n"


def claude_fact(d: Path, stem: str, name: str, description: str, fact_type: str, body: str, *, nested=False) -> None:
    kind = f"metadata:\n  type: {fact_type}\n" if nested else f"type: {fact_type}\n"
    (d / f"{stem}.md").write_text(f"---\nname: {name}\ndescription: {description}\n{kind}---\n{body}", encoding="utf-8")


def claude_appends(d: Path, line: str) -> None:
    """What Claude Code does after writing a fact: append its index line at the end of MEMORY.md."""
    with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def make_claude_dir(tmp_path: Path) -> Path:
    d = tmp_path / ".claude" / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text(CLAUDE_INDEX, encoding="utf-8")
    claude_fact(d, "feedback_testing", "テスト方針", "統合テストは実DBに当てる（モックは使わない）", "feedback",
                "モックしたテストが壊れたマイグレーションを隠した。\n**Why:** 本番障害\n**How to apply:** docker のDBを使う\n")
    claude_fact(d, "user_role", "User role", "The user is a data scientist", "user", "Focus on observability.\n", nested=True)
    claude_fact(d, "project_deadline", "締め切り", "リリースは12月5日", "project", "凍結は12月1日。\n")
    return d


def files(d: Path) -> set[str]:
    """Every file under `d` outside .git/ and memctl's own .memctl/ (derived, self-ignoring)."""
    return {p.relative_to(d).as_posix() for p in d.rglob("*")
            if p.is_file() and not {".git", ".memctl"} & set(p.relative_to(d).parts)}


def created_by(d: Path, *args: str, env: dict | None = None) -> tuple[Result, set[str]]:
    """Run a command; return its result and the files it created in the directory (outside .memctl/)."""
    before = files(d)
    result = cli(d, *args, env=env)
    return result, files(d) - before


def listed(d: Path) -> dict[str, list[tuple[str, str, str]]]:
    """fact file -> [(index file, title, hook)] over MEMORY.md and the topic files it links."""
    memory = (d / "MEMORY.md").read_text(encoding="utf-8")
    lines = index_mod.parse_lines(memory)
    for topic in [line.target for line in lines if index_mod.is_topic_link(line.target)]:
        lines += index_mod.parse_lines((d / topic).read_text(encoding="utf-8"), topic)
    found: dict[str, list[tuple[str, str, str]]] = {}
    for line in lines:
        if not index_mod.is_topic_link(line.target):
            found.setdefault(line.target, []).append((line.file or "MEMORY.md", line.title, line.description))
    return found


def clean(d: Path, with_git: bool) -> None:
    if with_git:
        assert git(d, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_the_whole_cycle_in_a_claude_code_directory(tmp_path, with_git):
    d = make_claude_dir(tmp_path)
    original = (d / "MEMORY.md").read_bytes()

    # 1. init adopts the directory: no memory/ folder, the facts visible and in the first commit
    r = memctl(d, "init", str(d), *([] if with_git else ["--no-git"]))
    assert r.returncode == 0, r.stderr
    assert not (d / "memory").exists() and not (d / "ledgers").exists()
    # without git, only a memctl.toml saying that commits are off (so that writes are not refused)
    assert (d / "memctl.toml").exists() == (not with_git)
    assert (d / "MEMORY.md").read_bytes() == original  # adopted as it is
    rows = json.loads(cli(d, "list", "--json").stdout)
    assert sorted(r["name"] for r in rows) == ["User role", "テスト方針", "締め切り"]
    if with_git:
        assert "3 fact files (adopted)" in r.stderr
        committed = git(d, "show", "--name-only", "--format=%s", "HEAD").split("\n")
        assert committed[0] == "memctl: adopt Claude Code memory directory"
        # with the merge-driver attributes, as init writes for a memctl store (docs/SYNC.md)
        assert set(committed[1:]) - {""} == {"MEMORY.md", "feedback_testing.md", "user_role.md", "project_deadline.md",
                                             ".gitattributes"}
        clean(d, with_git)
    assert cli(d, "index", "--check").exit_code == 0
    assert cli(d, "doctor").exit_code == 0
    assert memctl(d, "init", str(d), *([] if with_git else ["--no-git"])).stderr.endswith("nothing changed\n")

    # 2. remember: the hand-written lines keep their titles and hooks; the new line is in the same style
    r = cli(d, "remember", "project_api", "--type", "project", "--description", "APIはv2に統一する",
            "--why", "v1は廃止予定", "--how", "新規コードはv2クライアントのみ")
    assert r.exit_code == 0, r.stderr
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    for line in CLAUDE_LINES:
        assert text.count(line) == 1, line
    assert "- [project_api](project_api.md) — APIはv2に統一する" in text
    assert text.startswith("# Project memory\n\n<!-- memctl:index:begin -->\n")
    assert text.endswith("<!-- memctl:index:end -->\n\nNotes Claude Code keeps by hand stay as they are.\n")
    clean(d, with_git)

    # 3. Claude Code appends between memctl's writes: a new fact, and a new line for a fact memctl lists
    claude_fact(d, "reference_grafana", "Grafana", "Grafanaのダッシュボードはチームフォルダにある", "reference", "URL は wiki に。\n")
    claude_appends(d, "- [Grafana](reference_grafana.md) — ダッシュボードはチームフォルダ")
    claude_appends(d, "- [User role](user_role.md) — データサイエンティスト、可観測性が専門")
    r = cli(d, "index", "--check")
    assert r.exit_code == 1 and "user_role.md is listed twice" in r.stdout
    r = cli(d, "doctor")
    assert r.exit_code == 1 and "user_role.md is listed twice" in r.stdout

    # 4. remember again: not refused; the appended lines are merged into the block, each fact listed once
    r = cli(d, "remember", "feedback_review", "--type", "feedback", "--description", "レビューは24時間以内に返す")
    assert r.exit_code == 0, r.stderr
    where = listed(d)
    assert all(len(places) == 1 for places in where.values()), where
    assert where["user_role.md"] == [("MEMORY.md", "User role", "データサイエンティスト、可観測性が専門")]
    assert where["reference_grafana.md"] == [("MEMORY.md", "Grafana", "ダッシュボードはチームフォルダ")]
    assert "Notes Claude Code keeps by hand" in (d / "MEMORY.md").read_text(encoding="utf-8")
    clean(d, with_git)  # Claude Code's new fact and line went into a commit of its own (issue 24), then memctl's
    if with_git:
        assert "feedback_review.md" in git(d, "show", "--name-only", "--format=", "HEAD").split()
        theirs = git(d, "show", "--name-only", "--format=%an", "HEAD~1").split()
        assert theirs == ["claude-code", "MEMORY.md", "reference_grafana.md"]
    assert cli(d, "index", "--check").exit_code == 0 and cli(d, "doctor").exit_code == 0

    # 5. 230 facts: Claude Code keeps writing until MEMORY.md passes 200 lines
    assert cli(d, "pin", "user_role").exit_code == 0  # pinned: must stay in the first 200 lines
    for i in range(224):
        fact_type = ("feedback", "project", "reference", "user")[i % 4]
        claude_fact(d, f"{fact_type}_n{i:03d}", f"メモ{i:03d}", f"自動で書かれた事実その{i}（{fact_type}）", fact_type, "本文\n")
        claude_appends(d, f"- [メモ{i:03d}]({fact_type}_n{i:03d}.md) — 事実{i}の要約")
    total = len(json.loads(cli(d, "list", "--json").stdout))
    assert total == 230
    assert (d / "MEMORY.md").read_text(encoding="utf-8").count("\n") > 200
    r = cli(d, "doctor")
    assert r.exit_code == 1 and "Claude Code loads only the first 200" in r.stdout
    r = cli(d, "remember", "feedback_deploy", "--type", "feedback", "--importance", "0.95",
            "--description", "金曜日の午後はデプロイしない")
    assert r.exit_code == 0, r.stderr
    memory = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert memory.count("\n") <= 200
    where = listed(d)
    assert len(where) == 231 and all(len(places) == 1 for places in where.values())  # all reachable, once
    assert where["user_role.md"][0][0] == "MEMORY.md" and where["feedback_deploy.md"][0][0] == "MEMORY.md"
    assert where["feedback_n000.md"][0][1:] == ("メモ000", "事実0の要約")  # titles and hooks kept in topic files too
    assert any(place[0][0].startswith("memory-index/") for place in where.values())
    assert cli(d, "index", "--check").exit_code == 0
    r = cli(d, "doctor")
    assert r.exit_code == 0, r.stdout
    clean(d, with_git)

    # 6. read commands: recall and context answer; none of them creates a file in the directory
    for args in (["list", "--json"], ["show", "user_role"], ["list"]):
        r, made = created_by(d, *args)
        assert r.exit_code == 0 and made == set(), (args, made)
    r, made_by_recall = created_by(d, "recall", "デプロイ 金曜日", "--mode", "keyword", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["name"] == "feedback_deploy"
    r, made_by_context = created_by(d, "context", "--no-index", "--budget", "600")
    assert r.exit_code == 0
    assert "## Memory index" not in r.stdout and "## Pinned facts\n### user_role.md\nThe user is a data scientist\nFocus on observability.\n" in r.stdout
    assert "metadata:" not in r.stdout
    # Read commands create no file here: the access log lives under .memctl/
    assert made_by_recall | made_by_context == set()
    r = cli(d, "context", "--budget", "300", "--no-log")
    lines = r.stdout.split("\n")
    assert all(lines[i + 1].startswith("- [") for i, line in enumerate(lines)
               if line.startswith("### ") and i > lines.index("## Memory index (MEMORY.md)")), r.stdout


def test_init_in_a_repository_adopts_only_what_git_has_never_seen(tmp_path):
    d = make_claude_dir(tmp_path)
    repo = tmp_path / ".claude"
    git(repo, "init", "-q")
    git(repo, "add", "projects/-home-me-app/memory/MEMORY.md", "projects/-home-me-app/memory/user_role.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "dotfiles")
    with open(d / "user_role.md", "a", encoding="utf-8") as handle:
        handle.write("a hand edit in progress\n")
    r = cli(None, "init", str(d))
    assert r.exit_code == 0, r.stderr
    assert "2 fact files (adopted)" in r.stderr
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(changed) == ["projects/-home-me-app/memory/.gitattributes",
                               "projects/-home-me-app/memory/feedback_testing.md",
                               "projects/-home-me-app/memory/project_deadline.md"]
    assert git(repo, "status", "--porcelain") == " M projects/-home-me-app/memory/user_role.md\n"
    assert not (d / "memory").exists()


def test_init_of_a_claude_code_path_not_yet_written_and_of_facts_without_an_index(tmp_path):
    fresh = tmp_path / ".claude" / "projects" / "-srv-app" / "memory"
    r = cli(None, "init", str(fresh), "--no-git")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in fresh.iterdir()) == ["MEMORY.md", "memctl.toml"]
    assert "commit = false" in (fresh / "memctl.toml").read_text(encoding="utf-8")
    assert cli(fresh, "remember", "user_lang", "--type", "user", "-d", "日本語で答える").exit_code == 0
    assert (fresh / "user_lang.md").exists() and not (fresh / "memory").exists()

    bare = tmp_path / "notes"  # fact files only, no MEMORY.md: the index is written listing them
    bare.mkdir()
    claude_fact(bare, "user_role", "User role", "The user is a data scientist", "user", "x\n")
    r = cli(None, "init", str(bare))
    assert r.exit_code == 0, r.stderr
    assert "- [User role](user_role.md) — The user is a data scientist" in (bare / "MEMORY.md").read_text(encoding="utf-8")
    assert git(bare, "status", "--porcelain", "--untracked-files=all") == ""
    assert cli(bare, "doctor").exit_code == 0

    plain = tmp_path / "plain"  # anything else still gets memctl's own layout
    assert cli(None, "init", str(plain)).exit_code == 0
    assert (plain / "memory" / "MEMORY.md").exists() and (plain / "memctl.toml").exists()


def test_prose_edits_outside_the_block_still_refuse_but_claude_code_lines_do_not(tmp_path):
    d = make_claude_dir(tmp_path)
    assert cli(None, "init", str(d)).exit_code == 0
    assert cli(d, "remember", "a_fact", "-d", "first").exit_code == 0
    claude_appends(d, "- [Testing, again](feedback_testing.md) — 統合テストは実DB")
    claude_appends(d, "my private draft")
    head = git(d, "rev-parse", "HEAD")
    r = cli(d, "remember", "b_fact", "-d", "second")
    assert r.exit_code == 1 and "outside the memctl block" in r.stderr and git(d, "rev-parse", "HEAD") == head
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    (d / "MEMORY.md").write_text(text.replace("my private draft\n", ""), encoding="utf-8")
    assert cli(d, "remember", "b_fact", "-d", "second").exit_code == 0
    assert listed(d)["feedback_testing.md"] == [("MEMORY.md", "Testing, again", "統合テストは実DB")]
    # a fact Claude Code has just written (git never saw it) can be changed at once: it is adopted
    claude_fact(d, "user_tz", "Time zone", "The user is in JST", "user", "x\n")
    r = cli(d, "pin", "user_tz")
    assert r.exit_code == 0, r.stderr
    # (issue 24: taken in as Claude Code's own commit; the pin itself goes to the sidecar, not the file)
    assert git(d, "show", "--name-only", "--format=%an", "HEAD~1").split() == ["claude-code", "user_tz.md"]
    assert "memctl-facts.tsv" in git(d, "show", "--name-only", "--format=", "HEAD").split()
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
    # an edit of a committed fact (Claude Code's, issue 24) is taken in as its own commit before memctl's
    with open(d / "user_tz.md", "a", encoding="utf-8") as handle:
        handle.write("draft\n")
    r = cli(d, "unpin", "user_tz")
    assert r.exit_code == 0, r.stderr
    assert git(d, "show", "--name-only", "--format=%an", "HEAD~1").split() == ["claude-code", "user_tz.md"]


def test_init_with_git_after_init_no_git_commits_the_sidecar_memctl_wrote_meanwhile(tmp_path):
    """`pin` without git writes memctl-facts.tsv; a later `init` (with git) adopted the facts and left the
    sidecar untracked: doctor failed, and a clone lost every pin."""
    d = make_claude_dir(tmp_path)
    assert cli(None, "init", str(d), "--no-git").exit_code == 0
    assert cli(d, "pin", "user_role").exit_code == 0 and (d / "memctl-facts.tsv").is_file()
    r = cli(None, "init", str(d))
    assert r.exit_code == 0, r.stderr
    assert "3 fact files (adopted)" in r.stderr
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
    assert "memctl-facts.tsv" in git(d, "ls-files").split()
    assert cli(d, "doctor").exit_code == 0


def test_init_adopts_the_topic_files_memory_md_links_in_its_first_commit(tmp_path):
    """helper-52: `debugging.md` (no frontmatter, linked from MEMORY.md) stayed `??` after init, and the
    next doctor committed it authored claude-code, as if Claude Code had just written it."""
    d = tmp_path / ".claude" / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "feedback_r.md").write_text("---\nname: r\ndescription: 金曜\ntype: feedback\n---\n", encoding="utf-8")
    (d / "debugging.md").write_text("# デバッグ\n\nログを見る\n", encoding="utf-8")
    (d / "notes.md").write_text("not linked: not a topic file\n", encoding="utf-8")
    (d / "MEMORY.md").write_text("- [r](feedback_r.md) — x\n- [デバッグ](debugging.md) — コツ\n", encoding="utf-8")
    assert cli(None, "init", str(d)).exit_code == 0
    committed = git(d, "show", "--format=", "--name-only", "HEAD").split()
    assert "debugging.md" in committed and "notes.md" not in committed
    assert git(d, "status", "--porcelain").strip() == "?? notes.md"
