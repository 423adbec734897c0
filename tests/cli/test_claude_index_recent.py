"""The facts Claude Code has just written keep their line in MEMORY.md (issue 24, point 3, "written
lately"): it writes no timestamps, and its `reference` facts rank lowest by default."""

from __future__ import annotations

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
