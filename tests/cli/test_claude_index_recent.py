"""The facts Claude Code has just written keep their line in MEMORY.md (issue 24, point 3, "written
lately"): it writes no timestamps, and its `reference` facts rank lowest by default."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import PINNED_NOW, cli, git
from memctl import index
from test_claude_code_cycle import claude_fact
from test_index_fair import _facts


def test_the_facts_claude_code_just_wrote_stay_in_at_the_next_remember(tmp_path):
    """300 old facts committed long ago; Claude Code writes five `reference` facts (no timestamps, the
    type ranked lowest by default): the next `remember` keeps all five in MEMORY.md."""
    d = tmp_path / ".claude" / "projects" / "-srv-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    (d / "memctl.toml").write_text('[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")  # no model: fast
    for item in _facts():
        claude_fact(d, item.stem, item.name, item.description, item.type, "old\n")
    git(d, "init", "-q")
    git(d, "add", "-A")
    old = {**os.environ, "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z"}
    subprocess.run(["git", "-C", str(d), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old"],
                   check=True, env=old)
    env = {"MEMCTL_NOW": PINNED_NOW}
    assert cli(d, "index", env=env).exit_code == 0
    new = [f"reference_new_{i}" for i in range(5)]
    for stem in new:
        claude_fact(d, stem, f"新しい参照 {stem[-1]}", f"Claude Code just wrote {stem}", "reference", "x\n")
    done = cli(d, "remember", "project_zzz", "--type", "project", "-d", "one more", env=env)
    assert done.exit_code == 0, done.stderr
    memory = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert memory.count("\n") <= 200 and "## reference" in memory and "more reference facts" in memory
    listed = {line.target for line in index.parse_lines(memory)}
    assert {stem + ".md" for stem in new} | {"project_zzz.md"} <= listed


def test_past_the_limit_claude_codes_undated_facts_rank_by_their_last_commit_not_by_file_name(tmp_path):
    """Claude Code writes no timestamps, so past 200 lines its facts ranked after every dated fact of their
    type and then by file name: `reference_000` kept its line over a reference fact written months later.
    They are dated by the last commit that changed their file now (in memory only)."""
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    (d / "memctl.toml").write_text('[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")
    git(d, "init", "-q")
    old, newer = [], []
    for kind, count in (("feedback", 130), ("project", 70), ("reference", 75), ("user", 25)):
        for i in range(count):
            stem = f"{kind}_{i:03d}"
            claude_fact(d, stem, f"規則 {i} of {kind}", f"{kind} fact {i}, keep the report short", kind, "x\n")
            (newer if i >= count // 2 else old).append(f"{stem}.md")
    for files, when in ((old + ["MEMORY.md", "memctl.toml"], "2025-01-01T00:00:00Z"), (newer, "2025-06-01T00:00:00Z")):
        git(d, "add", "--", *files)
        dated = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        subprocess.run(["git", "-C", str(d), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", when],
                       check=True, env=dated)
    assert cli(d, "index", env={"MEMCTL_NOW": PINNED_NOW}).exit_code == 0
    memory = (d / "MEMORY.md").read_text(encoding="utf-8")
    listed = [line.target for line in index.parse_lines(memory)]
    assert memory.count("\n") <= 200 and len(listed) < len(old) + len(newer)
    for kind in ("feedback", "project", "reference", "user"):  # an old fact of a type listed: every newer one is
        if any(f.startswith(kind) for f in set(listed) & set(old)):
            assert {f for f in newer if f.startswith(kind)} <= set(listed), kind
    assert set(newer) - set(listed) == set() or not set(listed) & set(old)


def test_recall_since_finds_claude_codes_facts_by_when_git_saw_them_change(tmp_path):
    """`recall --since` never returned a fact Claude Code wrote (no `updated`, no `created`): it takes the
    last commit that changed the file now, and a file not committed yet counts as changed now."""
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    (d / "memctl.toml").write_text('[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")
    git(d, "init", "-q")
    for stem, when in (("reference_old", "2025-01-01T00:00:00Z"), ("reference_new", "2025-06-01T00:00:00Z")):
        claude_fact(d, stem, f"Oncall {stem}", f"Oncall rotation {stem} is in PagerDuty", "reference", "x\n")
        git(d, "add", "-A")
        dated = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        subprocess.run(["git", "-C", str(d), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", when],
                       check=True, env=dated)
    env = {"MEMCTL_NOW": "2025-07-01T00:00:00+00:00"}
    found = json.loads(cli(d, "recall", "PagerDuty oncall", "--since", "2025-05-01", "--json", env=env).stdout)
    assert [hit["path"] for hit in found] == ["reference_new.md"]
    claude_fact(d, "reference_draft", "Oncall draft", "Oncall rotation draft is in PagerDuty", "reference", "x\n")
    found = json.loads(cli(d, "recall", "PagerDuty oncall", "--since", "2025-06-15", "--json", env=env).stdout)
    assert [hit["path"] for hit in found] == ["reference_draft.md"]
