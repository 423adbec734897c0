"""Regressions from a review: nothing overwritten, nothing swept into a commit, clean errors."""

from __future__ import annotations

import json
import sys

from conftest import access_log, cli, git
from memctl import facts
from memctl.store import open_store


def _commit_all(root, message="by hand"):
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", message)


def test_forgetting_the_same_name_repeatedly_keeps_every_archived_copy(root):
    store = open_store(root)
    for i in range(3):
        facts.remember(store, facts.FactInput(name="a", description=f"version {i}"), commit_changes=False)
        facts.forget(store, "a", "again", commit_changes=False)
    archived = sorted(p.read_text(encoding="utf-8") for p in (root / "memory" / "archive").glob("a*.md"))
    assert len(archived) == 3
    assert sorted("version 0" in t for t in archived).count(True) == 1


def test_hand_edits_outside_the_index_block_are_not_committed(root):
    index = root / "memory" / "MEMORY.md"
    index.write_text(index.read_text(encoding="utf-8") + "my private draft note\n", encoding="utf-8")
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "remember", "b", "--description", "bee")
    assert r.exit_code == 1 and "outside the memctl block" in r.stderr
    assert git(root, "rev-parse", "HEAD") == head and not (root / "memory" / "b.md").exists()
    _commit_all(root)
    assert cli(root, "remember", "b", "--description", "bee").exit_code == 0
    assert "+my private draft note" not in git(root, "show", "HEAD", "--", "memory/MEMORY.md")



def test_a_persons_uncommitted_line_inside_the_block_is_refused_as_an_edit_before_and_after_a_no_commit_write(root):
    """Review: a person's line inside the block is kept just below it, but a committing write took the
    uncommitted line into memctl's commit; after a `--no-commit` write had moved it, the next write
    refused it as an edit outside the block. Now it is the person's edit wherever it stands."""
    assert cli(root, "remember", "a", "--description", "aye").exit_code == 0
    index = root / "memory" / "MEMORY.md"
    text = index.read_text(encoding="utf-8")
    note = "デプロイ窓は火曜だけ — my note"
    assert "- [a](a.md) — aye\n" in text
    index.write_text(text.replace("- [a](a.md) — aye\n", f"- [a](a.md) — aye\n{note}\n"), encoding="utf-8")
    before, head = index.read_bytes(), git(root, "rev-parse", "HEAD")
    r = cli(root, "remember", "b", "--description", "bee")
    assert r.exit_code == 1 and "uncommitted edits of yours" in r.stderr, r.stderr
    assert index.read_bytes() == before and git(root, "rev-parse", "HEAD") == head and not (root / "memory" / "b.md").exists()
    assert cli(root, "remember", "b", "--description", "bee", "--no-commit").exit_code == 0
    moved = index.read_text(encoding="utf-8")
    assert moved.count(note) == 1 and moved.index(note) > moved.index("<!-- memctl:index:end -->")
    r = cli(root, "remember", "c", "--description", "sea")
    assert r.exit_code == 1 and "uncommitted edits of yours" in r.stderr, r.stderr
    git(root, "add", "memory/MEMORY.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "my note", "--", "memory/MEMORY.md")
    assert cli(root, "remember", "c", "--description", "sea").exit_code == 0, cli(root, "remember", "c", "--description", "sea").stderr
    assert index.read_text(encoding="utf-8").count(note) == 1
    assert "+" + note not in git(root, "show", "HEAD", "--", "memory/MEMORY.md")  # memctl's commit adds none of it


def test_index_and_maintain_refuse_hand_edits_outside_the_block_and_never_commit_an_index_linking_an_uncommitted_file(root):
    """`index` and `maintain` (the daily job) once committed a hand-written line outside the block, and every write
    committed an index linking a fact file git had never seen. Now they refuse the first as `remember` does, and
    the second goes into the commit with the index that links it."""
    index = root / "memory" / "MEMORY.md"
    index.write_text(index.read_text(encoding="utf-8") + "自由記述のメモ\n", encoding="utf-8")
    head = git(root, "rev-parse", "HEAD")
    for command in (["index"], ["maintain"]):
        r = cli(root, *command)
        lines = index.read_text(encoding="utf-8").count("\n")
        assert r.exit_code == 1 and f"memory/MEMORY.md:{lines} has uncommitted edits of yours (outside the memctl block" in r.stderr, command
        assert git(root, "rev-parse", "HEAD") == head, command
    _commit_all(root, "my note")
    hand = root / "memory" / "hand-made.md"
    hand.write_text("---\nname: hand-made\ndescription: 手で書いた事実\nmetadata:\n  type: project\n---\nbody\n",
                    encoding="utf-8")
    assert cli(root, "remember", "b", "--description", "bee").exit_code == 0
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert "hand-made.md" in git(root, "show", "HEAD:memory/MEMORY.md")
    assert sorted(git(root, "show", "--name-only", "--format=", "HEAD").split()) == [
        "memory/MEMORY.md", "memory/b.md", "memory/hand-made.md"]
    again = root / "memory" / "again.md"
    again.write_text("---\nname: again\ndescription: もう一つ\n---\n", encoding="utf-8")
    assert cli(root, "maintain").exit_code == 0
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert "again.md" in git(root, "show", "HEAD:memory/MEMORY.md")

def test_every_command_that_rewrites_memory_md_refuses_a_persons_uncommitted_edit(root, pinned_clock):
    """`restore`, `forget --policies`, `consolidate --apply` and `pin` committed a person's uncommitted
    note in MEMORY.md under their own message (an exploratory tester's finding); remember, forget,
    index and maintain refused it. Now every one refuses it and changes nothing."""
    index = root / "memory" / "MEMORY.md"
    for args in (["remember", "gone", "-d", "a fact to restore"], ["forget", "gone", "--reason", "for the test"],
                 ["remember", "old-rule", "-d", "キャンペーン中は送料無料", "--expires", "2020-01-01"],
                 ["remember", "push-a", "-d", "Never push directly to the main branch"],
                 ["remember", "push-b", "-d", "Never push directly to the main branch!", "--force"],
                 ["remember", "plain", "-d", "a fact to pin"]):
        done = cli(root, *args)
        assert done.exit_code == 0, (args, done.stderr)
    assert json.loads(cli(root, "forget", "--policies", "--dry-run", "--json").stdout)["steps"]  # each has work to do
    assert json.loads(cli(root, "consolidate", "--json").stdout)["merges"]
    note = "田中のメモ（未コミットの下書き）"
    index.write_text(index.read_text(encoding="utf-8") + f"\n{note}\n", encoding="utf-8")
    before, head = index.read_bytes(), git(root, "rev-parse", "HEAD")
    for args in (["restore", "gone"], ["forget", "--policies"], ["consolidate", "--apply"], ["pin", "plain"]):
        done = cli(root, *args)
        assert done.exit_code == 1 and "has uncommitted edits of yours" in done.stderr, (args, done.stderr)
        assert git(root, "rev-parse", "HEAD") == head and index.read_bytes() == before, args
        assert git(root, "status", "--porcelain").split() == ["M", "memory/MEMORY.md"], args


def test_file_names_are_not_git_patterns(root):
    (root / "memory" / "n[1].md").write_text("---\nname: n\ndescription: bracketed\n---\n", encoding="utf-8")
    assert cli(root, "index").exit_code == 0
    assert git(root, "status", "--porcelain") == ""  # committed with the index that links it
    (root / "memory" / "n1.md").write_text("secret draft, not a fact\n", encoding="utf-8")
    assert cli(root, "forget", "n", "--reason", "old").exit_code == 0
    changed = git(root, "show", "--name-only", "--format=", "HEAD").split()
    assert "memory/n1.md" not in changed and "memory/archive/n[1].md" in changed


def test_arguments_that_are_not_utf8_are_bad_input(root):
    for args in (["remember", "z", "--description", "bad\udcffbyte"], ["remember", "z", "--description", "x", "--tag", "\udcff"]):
        r = cli(root, *args)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "UTF-8" in r.stderr
    assert not (root / "memory" / "z.md").exists()
    r = cli(root, "recall", "\udcff", "--mode", "keyword")
    assert r.exit_code == 2 and "UTF-8" in r.stderr
    r = cli(root, "near-dup", "\udcff", "--facts")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1


def test_recall_sees_a_rewritten_ledger_line(root):
    for i in range(30):
        cli(root, "episode", "add", "the zebra migration failed" if i == 20 else f"routine event {i}", "--type", "success", "--no-commit")
    assert json.loads(cli(root, "recall", "zebra", "--source", "episodes", "--mode", "keyword", "--json", "--no-log").stdout)
    path = root / "ledgers" / "episodes.tsv"
    new = path.with_name("episodes.tsv.new")  # a new file renamed over the old one, as `sed -i` does
    new.write_text(path.read_text(encoding="utf-8").replace("zebra", "horse"), encoding="utf-8")
    new.replace(path)
    assert json.loads(cli(root, "recall", "zebra", "--source", "episodes", "--mode", "keyword", "--json", "--no-log").stdout) == []
    hits = json.loads(cli(root, "recall", "horse", "--source", "episodes", "--mode", "keyword", "--json", "--no-log").stdout)
    assert [h["description"] for h in hits] == ["the horse migration failed"]


def test_recall_does_not_touch_memctl_toml(root):
    before = (root / "memctl.toml").read_bytes()
    cli(root, "remember", "a", "--description", "friday deploys")
    assert cli(root, "recall", "friday", "--mode", "keyword").exit_code == 0
    assert (root / "memctl.toml").read_bytes() == before
    assert access_log(root).startswith("ts\tagent\tcommand\tquery\tshown\n")


def test_claude_code_forget_drops_the_hand_written_line(tmp_path):
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory\n- [デプロイ規則.md](デプロイ規則.md) — 金曜はデプロイしない\n", encoding="utf-8")
    (d / "デプロイ規則.md").write_text("---\nname: deploy-rule\ndescription: 金曜はデプロイしない\ntype: feedback\n---\n", encoding="utf-8")
    refused = cli(d, "forget", "デプロイ規則", "--reason", "変更")  # no repository here: exit 0 would mean committed
    assert refused.exit_code == 1 and "is not a git repository" in refused.stderr and (d / "デプロイ規則.md").exists()
    assert f"(hint: run `memctl init {d}` (git init, and a first commit of what is there)" in refused.stderr
    assert cli(d, "forget", "デプロイ規則", "--reason", "変更", "--no-commit").exit_code == 0
    assert "デプロイ規則.md" not in (d / "MEMORY.md").read_text(encoding="utf-8")
    assert cli(d, "index", "--check").exit_code == 0


def test_restore_never_overwrites_an_unreadable_live_file(root):
    cli(root, "remember", "a", "--description", "old a")
    cli(root, "forget", "a", "--reason", "x")
    hand = "---\nname: a\n  description: indented: wrongly\n---\nhand-written body\n"
    (root / "memory" / "a.md").write_text(hand, encoding="utf-8")
    r = cli(root, "restore", "a")
    assert r.exit_code == 1 and "exists" in r.stderr
    assert (root / "memory" / "a.md").read_text(encoding="utf-8") == hand


def test_the_hint_for_a_claude_code_directory_without_git_is_a_command_that_works(tmp_path):
    """The hint names `memctl init` with the directory, quoted for a shell (a space, Japanese); run as said, the
    write the user wanted then works and is committed."""
    import shlex
    import subprocess

    d = tmp_path / "メモリ dir"
    d.mkdir()
    (d / "MEMORY.md").write_text("- [デプロイ規則](project_deploy.md) — 金曜はデプロイしない\n", encoding="utf-8")
    (d / "project_deploy.md").write_text("---\nname: デプロイ規則\ndescription: 金曜はデプロイしない\ntype: project\n---\n",
                                         encoding="utf-8")
    refused = cli(d, "remember", "cats", "-d", "Cats nap many hours")
    assert refused.exit_code == 1 and not (d / "cats.md").exists()
    hint = refused.stderr.split("(hint: run `", 1)[1].split("`", 1)[0]
    assert shlex.split(hint) == ["memctl", "init", str(d)]
    done = subprocess.run([sys.executable, "-m", "memctl", *shlex.split(hint)[1:]], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert cli(d, "remember", "cats", "-d", "Cats nap many hours").exit_code == 0
    assert "memory: remember cats" in git(d, "log", "--format=%s")


def test_a_mistyped_type_is_named_not_answered_with_nothing(root):
    """`list --type` and `recall --type` with a type memctl.toml does not declare and no fact has: exit 2, the
    declared types and the closest one; a type only a hand-written fact has still filters (Claude Code may
    write one memctl does not declare)."""
    assert cli(root, "remember", "deploy-rule", "-d", "Deploys only on Tuesdays", "--type", "project").exit_code == 0
    (root / "memory" / "odd.md").write_text("---\ndescription: 手書きのデプロイ手順\nmetadata:\n  type: runbook\n---\n",
                                           encoding="utf-8")
    for command in (["list", "--type", "projet"], ["recall", "deploy", "--type", "projet"],
                    ["recall", "deploy", "--type", "projet", "--source", "all"]):
        refused = cli(root, *command)
        assert refused.exit_code == 2 and "unknown fact type 'projet'" in refused.stderr, command
        assert "did you mean 'project'?" in refused.stderr and refused.stdout == ""
    assert cli(root, "list", "--type", "runbook").stdout.split("\t")[0] == "odd"
    assert "odd" in cli(root, "recall", "デプロイ", "--type", "runbook", "--mode", "keyword").stdout
    assert "deploy-rule" in cli(root, "recall", "deploy", "--type", "project", "--mode", "keyword").stdout
    assert cli(root, "recall", "deploy", "--type", "decision", "--source", "all", "--mode", "keyword").exit_code == 1


def test_the_words_memctl_writes_say_what_is_so(tmp_path, pinned_clock):
    """A new user's reading of the docs (session 26): `init --no-git` wrote `commit = false   # commit every
    change`; `ledger verify` said "1 commits"; STATE.md's "changed today" listed file stems where JOBS.md
    shows fact names (a fact named `deploy-rule` in `feedback_deploy.md`)."""
    bare = tmp_path / "bare"
    assert cli(None, "init", "--no-git", str(bare)).exit_code == 0
    line = next(l for l in (bare / "memctl.toml").read_text(encoding="utf-8").splitlines() if l.startswith("commit ="))
    assert line.startswith("commit = false") and "commit every change" not in line and "nothing is committed" in line

    root = tmp_path / "s"
    assert cli(None, "init", str(root)).exit_code == 0
    assert cli(root, "ledger", "create", "one", "--columns", "a,b").exit_code == 0
    assert cli(root, "ledger", "verify", "one").stdout == "ledgers/one.tsv: 1 commit, append-only\n"
    (root / "memory" / "feedback_deploy.md").write_text(
        f"---\nname: deploy-rule\ndescription: デプロイは火曜\ntype: feedback\nmetadata:\n  created: '{pinned_clock}'\n"
        f"  updated: '{pinned_clock}'\n---\n", encoding="utf-8")
    _commit_all(root)
    assert cli(root, "state", "update").exit_code == 0
    assert "- changed today: 1 (deploy-rule)" in (root / "state" / "STATE.md").read_text(encoding="utf-8")
