"""`memctl sync`, `resolve`, `conflicts`, the merge drivers under a plain `git pull`, and writes during
an unfinished merge (docs/SYNC.md). Real git: a bare remote in a temp dir and two clones."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli, fact_versions, git, memctl

ID = ("-c", "user.name=someone", "-c", "user.email=someone@example.com")
MARKER = re.compile(r"^(<{7}|>{7}|={7})( |$)", re.M)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".memctl" not in p.parts and "logs" not in p.parts}


@pytest.fixture(autouse=True)
def _clock(pinned_clock):
    """STATE.md is written at fixed times below and doctor judges its age: every command reads one clock."""


@pytest.fixture
def pair(tmp_path):
    """(a, b, remote): a store pushed to a bare remote, and a second clone set up with `sync --setup`."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "a"
    assert cli(None, "init", str(a)).exit_code == 0
    toml = (a / "memctl.toml").read_text(encoding="utf-8")
    (a / "memctl.toml").write_text(toml.replace("[facts]\n", '[facts]\nvector_check = "never"\n'), encoding="utf-8")
    git(a, *ID, "commit", "-qam", "no vector check")
    assert cli(a, "ledger", "create", "themes", "--columns", "host,theme", "--unique", "theme").exit_code == 0
    assert cli(a, "episode", "add", "seed", "--type", "decision").exit_code == 0
    git(a, "remote", "add", "origin", str(remote))
    assert cli(a, "sync").exit_code == 0
    b = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True)
    r = cli(b, "sync", "--setup")
    assert r.exit_code == 0 and "merge.memctl-fact.driver" in r.stderr
    assert cli(b, "sync", "--setup").stderr == "memctl: merge drivers already set up; nothing changed\n"
    assert cli(b, "trust").exit_code == 0  # a fresh clone's user approves its jobs (docs/JOBS.md, "Consent")
    return a, b, remote


def _state(root: Path, when: str, numbers: str) -> None:
    r = cli(root, "state", "update", "--from-json", "-", input=numbers, env={"MEMCTL_NOW": when})
    assert r.exit_code == 0, r.stderr


def test_both_clones_remember_update_state_and_add_episodes_then_sync_resolves_everything(pair):
    a, b, remote = pair
    assert cli(a, "remember", "fact-a", "-d", "デプロイは金曜に行わない", "-t", "feedback").exit_code == 0
    assert cli(b, "remember", "fact-b", "-d", "Backups run at 03:00 UTC", "-t", "project").exit_code == 0
    _state(a, "2026-11-30T09:00:00+09:00", '{"open": 1}')
    _state(b, "2026-11-30T01:00:00+00:00", '{"open": 2}')  # one hour later than a's
    for root, ts in ((b, "2026-11-30T10:00:00+09:00"), (a, "2026-11-30T10:30:00+09:00")):
        assert cli(root, "episode", "add", f"{root.name} episode", "--type", "success", env={"MEMCTL_NOW": ts}).exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["remote"], out["branch"], out["pushed"], out["conflicts"], out["duplicates"]) == ("origin", "master", True, [], [])
    assert out["incoming"] == 3 and out["outgoing"] == 4 and out["merge_commit"] == git(b, "rev-parse", "HEAD").strip()
    assert {(x["path"], x["kind"]) for x in out["resolved"]} >= {
        ("memory/MEMORY.md", "index"), ("state/STATE.md", "state"), ("ledgers/episodes.tsv", "ledger")}
    r = cli(a, "sync")
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == "memctl: origin/master: 4 commits in (4 files), nothing to push\n"
    assert _files(a) == _files(b)
    assert [p for p, data in _files(a).items() if MARKER.search(data.decode("utf-8", "replace"))] == []
    index = (a / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert "- [fact-a](fact-a.md) — デプロイは金曜に行わない" in index and "- [fact-b](fact-b.md) — Backups run at 03:00 UTC" in index
    assert "open: 2" in (a / "state" / "STATE.md").read_text(encoding="utf-8")  # the newer snapshot
    episodes = (a / "ledgers" / "episodes.tsv").read_text(encoding="utf-8").splitlines()
    assert sum(line.startswith("id\tts\t") for line in episodes) == 1 and len(episodes) == 4
    listed = [e["description"] for e in json.loads(cli(a, "episode", "list", "--json").stdout)]
    assert listed == ["b episode", "a episode", "seed"]  # by ts: the seed was written at PINNED_NOW, after 10:30 JST
    for root in (a, b):
        assert cli(root, "ledger", "verify", "episodes").exit_code == 0
        assert cli(root, "doctor").exit_code == 0
        assert not (root / ".git" / "memctl-sync-merge").exists()  # sync's mark goes with its merge


def test_plain_git_pull_resolves_memctls_files_through_the_drivers(pair):
    a, b, remote = pair
    assert cli(a, "remember", "fact-a", "-d", "from a").exit_code == 0
    assert cli(b, "remember", "fact-b", "-d", "from b").exit_code == 0
    _state(a, "2026-11-30T12:00:00+09:00", '{"n": 1}')
    _state(b, "2026-11-30T11:00:00+09:00", '{"n": 2}')  # older
    assert cli(a, "episode", "add", "a did", "--type", "decision").exit_code == 0
    assert cli(b, "episode", "add", "b did", "--type", "decision").exit_code == 0
    git(a, "push", "-q", "origin", "HEAD:master")
    done = subprocess.run(["git", "-C", str(b), *ID, "pull", "--no-rebase", "--no-edit", "-q", "origin", "master"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not (b / ".git" / "MERGE_HEAD").exists()
    index = (b / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert "- [fact-a](fact-a.md) — from a" in index and "- [fact-b](fact-b.md) — from b" in index
    assert "n: 1" in (b / "state" / "STATE.md").read_text(encoding="utf-8")
    episodes = (b / "ledgers" / "episodes.tsv").read_text(encoding="utf-8")
    assert episodes.count("id\tts\t") == 1 and "a did" in episodes and "b did" in episodes
    assert [p for p, data in _files(b).items() if MARKER.search(data.decode("utf-8", "replace"))] == []
    assert cli(b, "doctor").exit_code == 0
    assert cli(b, "ledger", "verify", "episodes").exit_code == 0


@pytest.mark.parametrize("keep", ["local", "remote", "both"])
def test_a_fact_changed_on_both_sides_is_kept_as_a_conflict_and_resolved(pair, keep):
    a, b, remote = pair
    assert cli(a, "remember", "deploy", "-d", "deploy on Tuesdays", env={"MEMCTL_NOW": "2026-11-30T09:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    assert cli(a, "remember", "deploy", "--update", "-d", "deploy on Wednesdays",
               env={"MEMCTL_NOW": "2026-11-30T10:00:00+00:00"}).exit_code == 0
    assert cli(b, "remember", "deploy", "--update", "-d", "デプロイは木曜",
               env={"MEMCTL_NOW": "2026-11-30T11:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync")
    assert r.exit_code == 0
    copy = [line.split("\t")[1] for line in r.stdout.splitlines() if line.startswith("conflict\t")]
    assert len(copy) == 1 and copy[0].startswith("memory/conflicts/deploy.")
    assert "hint: memctl conflicts; memctl resolve NAME --keep local|remote|both" in r.stderr
    assert "description: デプロイは木曜" in (b / "memory" / "deploy.md").read_text(encoding="utf-8")  # newer in place
    assert "description: deploy on Wednesdays" in (b / copy[0]).read_text(encoding="utf-8")
    assert "<<<<<<<" not in (b / "memory" / "deploy.md").read_text(encoding="utf-8")
    r = cli(b, "conflicts", "--json")
    assert r.exit_code == 0
    found = json.loads(r.stdout)["merge"]
    assert found == [{"kind": "merge", "name": "deploy", "path": "memory/deploy.md", "copy": copy[0],
                      "hunk": ["-description: デプロイは木曜", "+description: deploy on Wednesdays",
                               "-  updated: 2026-11-30T11:00:00+00:00", "+  updated: 2026-11-30T10:00:00+00:00"]}]
    assert cli(b, "resolve", "nope", "--keep", "local").exit_code == 3
    assert cli(b, "resolve", "deploy", "--keep", "mine").exit_code == 2
    r = cli(b, "resolve", "deploy", "--keep", keep)
    assert r.exit_code == 0, r.stderr
    assert not (b / copy[0]).exists() and git(b, "status", "--porcelain").strip() == ""
    assert git(b, "log", "-1", "--format=%s").strip() == f"memory: resolve deploy (keep {keep})"
    live = (b / "memory" / "deploy.md").read_text(encoding="utf-8")
    index = (b / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    if keep == "local":
        assert "デプロイは木曜" in live
    elif keep == "remote":
        assert "deploy on Wednesdays" in live and "- [deploy](deploy.md) — deploy on Wednesdays" in index
    else:
        assert r.stdout == "memory/deploy-2.md\n" and "デプロイは木曜" in live
        assert "name: deploy-2\n" in (b / "memory" / "deploy-2.md").read_text(encoding="utf-8")
        assert "- [deploy-2](deploy-2.md) — deploy on Wednesdays" in index
    assert json.loads(cli(b, "conflicts", "--json").stdout)["merge"] == []
    assert cli(b, "doctor").exit_code == 0


def test_the_same_unique_value_appended_on_two_machines_is_reported_by_sync_and_ledger_dups(pair):
    a, b, remote = pair
    assert cli(a, "ledger", "append", "themes", "host=a", "theme=締め切り").exit_code == 0
    assert cli(b, "ledger", "append", "themes", "host=b", "theme=締め切り").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync", "--json")
    assert json.loads(r.stdout)["duplicates"] == [{"ledger": "themes", "column": "theme", "value": "締め切り", "count": 2}]
    r = cli(b, "sync")
    assert r.exit_code == 0
    assert cli(b, "ledger", "dups", "themes", "theme").stdout == "締め切り\n"


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "piped"])
def test_a_pushed_value_in_syncs_report_is_one_tsv_field_and_on_a_terminal_shown_not_obeyed(pair, tty):
    """A unique value (and a conflict copy's name) is another clone's text: sync printed it raw, a TAB
    splitting its field, an ESC ]0; setting the terminal's title (an OSC 52 would write the clipboard)."""
    a, b, remote = pair
    for clone, host in ((a, "a"), (b, "b")):  # as a hand or a hostile clone writes the file: escaped TAB, raw ESC
        with (clone / "ledgers" / "themes.tsv").open("a", encoding="utf-8") as f:
            f.write(f"{host}\tx\x1b]0;T\x07\\ty\n")
        git(clone, *ID, "commit", "-qam", "a theme")
    assert cli(a, "sync").exit_code == 0
    r = memctl(b, "sync", env={"MEMCTL_FORCE_TTY": "1" if tty else ""})
    assert r.returncode == 0, r.stderr
    shown = "x\\x1b]0;T\\x07\\ty" if tty else "x\x1b]0;T\x07\\ty"  # the file's escape kept: one field
    assert r.stdout == f"resolved\tledgers/themes.tsv\tunion\nduplicate\tthemes\ttheme={shown}\t2\n"


def test_sync_retries_when_the_remote_moved_between_its_fetch_and_its_push(pair):
    a, b, remote = pair
    assert cli(b, "remember", "from-b", "-d", "pushed by the hook, mid-sync").exit_code == 0
    flag = a.parent / "hook-ran"
    hook = a / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\nif [ ! -e {flag} ]; then touch {flag}; git -C {b} push -q origin HEAD:master; fi\nexit 0\n")
    hook.chmod(0o755)
    assert cli(a, "remember", "from-a", "-d", "pushed by sync").exit_code == 0
    r = cli(a, "sync", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["attempts"], out["pushed"], out["incoming"]) == (2, True, 1)
    remote_head = subprocess.run(["git", "-C", str(remote), "rev-parse", "master"], capture_output=True, text=True).stdout
    assert remote_head.strip() == git(a, "rev-parse", "HEAD").strip()
    assert (a / "memory" / "from-b.md").exists()


def test_no_push_merges_and_leaves_the_remote_alone(pair):
    a, b, remote = pair
    before = subprocess.run(["git", "-C", str(remote), "rev-parse", "master"], capture_output=True, text=True).stdout
    assert cli(b, "remember", "local-only", "-d", "stays here").exit_code == 0
    r = cli(b, "sync", "--no-push")
    assert (r.exit_code, r.stderr) == (0, "memctl: origin/master: 0 commits in (0 files), 1 commit not pushed (--no-push)\n")
    assert subprocess.run(["git", "-C", str(remote), "rev-parse", "master"], capture_output=True, text=True).stdout == before


def _unchanged(root: Path):
    head = git(root, "rev-parse", "HEAD")
    files = _files(root)
    return lambda: git(root, "rev-parse", "HEAD") == head and _files(root) == files and not (root / ".git" / "MERGE_HEAD").exists()


def test_bad_remotes_and_unrelated_histories_are_one_line_errors_and_change_nothing(pair, tmp_path):
    a, b, remote = pair
    lone = tmp_path / "lone"
    # Another date: an init in the same second as the pair's would make the very same root commit.
    old_date = {"GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000"}
    assert cli(None, "init", str(lone), env=old_date).exit_code == 0
    assert git(lone, "rev-list", "--max-parents=0", "HEAD") != git(a, "rev-list", "--max-parents=0", "HEAD")
    same = _unchanged(lone)
    r = cli(lone, "sync")
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr == ("memctl: error: no git remote is configured for this store "
                        f"(hint: add one: git -C {shlex.quote(str(lone))} remote add origin URL (docs/SYNC.md))\n")
    r = cli(b, "sync", "--remote", "nope")
    assert r.exit_code == 3 and r.stderr.startswith("memctl: error: no git remote named 'nope' (remotes: origin)")
    git(lone, "remote", "add", "gone", str(tmp_path / "missing.git"))
    r = cli(lone, "sync")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and r.stderr.startswith("memctl: error: cannot fetch from gone:")
    assert "does not appear to be a git repository" in r.stderr  # git's fatal line, not the tail of its advice
    git(lone, "remote", "remove", "gone")
    git(lone, "remote", "add", "origin", str(remote))
    r = cli(lone, "sync")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("memctl: error: origin/master has no history in common with this store; nothing was merged or pushed")
    assert same()


def test_hand_edits_and_a_real_memctl_toml_conflict_are_refused_with_nothing_half_merged(pair):
    a, b, remote = pair
    (b / "memory" / "MEMORY.md").write_text("# hand edit\n", encoding="utf-8")
    r = cli(b, "sync")
    assert (r.exit_code, r.stderr) == (1, "memctl: error: memory/MEMORY.md has uncommitted changes; nothing was fetched "
                                           f"or merged (hint: commit or discard them first (git -C {shlex.quote(str(b))} status), then memctl sync)\n")
    git(b, "checkout", "--", "memory/MEMORY.md")
    for root, value in ((a, "111"), (b, "222")):
        path = root / "memctl.toml"
        path.write_text(path.read_text(encoding="utf-8").replace("max_index_lines = 200", f"max_index_lines = {value}"), encoding="utf-8")
        git(root, *ID, "commit", "-qam", f"limit {value}")
    assert cli(a, "sync").exit_code == 0
    same = _unchanged(b)
    r = cli(b, "sync")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("memctl: error: both sides changed memctl.toml in ways git cannot merge; nothing was merged or pushed")
    assert same() and git(b, "status", "--porcelain").strip() == ""


def test_every_command_during_an_unfinished_merge_says_so_and_writes_nothing(pair):
    a, b, remote = pair
    for root, text in ((a, "from a\n"), (b, "from b\n")):
        (root / "notes.txt").write_text(text)
        git(root, "add", "notes.txt")
        git(root, *ID, "commit", "-qm", "notes")
    git(a, "push", "-q", "origin", "HEAD:master")
    done = subprocess.run(["git", "-C", str(b), *ID, "pull", "--no-rebase", "-q", "origin", "master"], capture_output=True, text=True)
    assert done.returncode != 0 and (b / ".git" / "MERGE_HEAD").exists()
    note = ("memctl: warning: a git merge is unfinished in this store: files may hold conflict markers, and writes are "
            "refused (hint: memctl doctor names them; finish it (fix, git add, git commit) or git merge --abort)\n")
    refused = ("memctl: error: a git merge is unfinished in this store; nothing was written (hint: finish it (memctl doctor "
               "names files with conflict markers; fix, git add, git commit) or git merge --abort)\n")
    r = memctl(b, "remember", "mid-merge", "-d", "should not be written")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", refused)  # one line: a write says it in its error
    assert not (b / "memory" / "mid-merge.md").exists()
    r = memctl(b, "index")
    assert (r.returncode, r.stderr) == (1, refused)
    r = memctl(b, "ledger", "append", "themes", "host=b", "theme=x")  # the fast path takes the same lock
    assert (r.returncode, r.stderr) == (1, refused)
    r = memctl(b, "list")
    assert (r.returncode, r.stderr) == (0, note)
    r = memctl(b, "sync")
    assert (r.returncode, r.stderr) == (1, refused)
    r = memctl(b, "doctor")  # (it said "store is clean", exit 0, while the refusals send the user to it)
    assert r.returncode == 1 and ".git: error: a git merge is unfinished" in r.stdout and "git merge --abort" in r.stdout
    assert "notes.txt: error: left unmerged by the git merge (conflict markers in it)" in r.stdout, r.stdout
    git(b, "merge", "--abort")
    assert memctl(b, "remember", "after", "-d", "written once the merge is gone").returncode == 0
    assert memctl(b, "doctor").returncode == 0


def test_a_sync_job_runs_under_run_job_and_logs(pair):
    a, b, remote = pair
    with open(b / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.sync]\ncommand = "sync"\ninterval = "15m"\ndescription = "share memory with the other machines"\n')
    git(b, *ID, "commit", "-qam", "a sync job")
    r = memctl(b, "run-job", "sync", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    log = (b / "logs" / "sync.log").read_text(encoding="utf-8")
    assert "| memctl: origin/master: 0 commits in (0 files), 1 commit pushed" in log and "end exit=0" in log
    assert subprocess.run(["git", "-C", str(remote), "rev-parse", "master"], capture_output=True, text=True).stdout.strip() == \
        git(b, "rev-parse", "HEAD").strip()


def test_init_writes_the_attributes_and_registers_the_drivers_once(tmp_path):
    root = tmp_path / "s"
    assert cli(None, "init", str(root)).exit_code == 0
    attributes = (root / ".gitattributes").read_text(encoding="utf-8").splitlines()
    assert attributes[:3] == ["ledgers/*.tsv merge=union", "memory/*.md merge=memctl-fact", "memory/MEMORY.md merge=memctl-index"]
    assert "state/STATE.md merge=memctl-state" in attributes and "memory/archive/*.md merge=memctl-archive" in attributes
    assert "memory/memory-index/*.md merge=memctl-topic" in attributes
    drivers = git(root, "config", "--get-regexp", r"^merge\.memctl-.*\.driver$").splitlines()
    assert len(drivers) == 6 and all(" -m memctl merge-driver " in d and d.endswith(" %O %A %B %P") for d in drivers)
    pinned = " -text -ident -working-tree-encoding"  # a pushed .gitattributes neither re-routes nor converts them
    assert (root / ".git" / "info" / "attributes").read_text().splitlines() == [
        f"ledgers/*.tsv merge=memctl-ledger{pinned}", *(f"{line}{pinned}" for line in attributes[1:]),
        f"/memctl.toml merge=text{pinned}"]
    assert git(root, "status", "--porcelain") == ""
    before = _files(root), (root / ".git" / "config").read_bytes()
    r = cli(None, "init", str(root))
    assert r.exit_code == 0 and (_files(root), (root / ".git" / "config").read_bytes()) == before


def test_the_merge_driver_writes_the_result_into_ours_and_keeps_the_loser_beside_the_fact(tmp_path):
    paths = fact_versions(tmp_path)
    (tmp_path / "memory").mkdir()
    done = subprocess.run([sys.executable, "-m", "memctl", "merge-driver", "fact", str(paths["base"]), str(paths["ours"]),
                           str(paths["theirs"]), "memory/n.md"], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "description: ours" in paths["ours"].read_text(encoding="utf-8")
    copies = list((tmp_path / "memory" / "conflicts").glob("n.*.md"))
    assert len(copies) == 1 and "description: theirs" in copies[0].read_text(encoding="utf-8")
    r = cli(None, "merge-driver", "nonsense", str(paths["base"]), str(paths["ours"]), str(paths["theirs"]))
    assert r.exit_code == 2 and r.stderr.startswith("memctl: error: unknown merge driver kind 'nonsense'")


def test_a_conflict_copy_left_by_a_plain_git_pull_is_listed_and_committed_by_the_next_sync(pair):
    a, b, remote = pair
    assert cli(a, "remember", "rule", "-d", "first", env={"MEMCTL_NOW": "2026-11-30T09:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    assert cli(a, "remember", "rule", "--update", "-d", "a says", env={"MEMCTL_NOW": "2026-11-30T10:00:00+00:00"}).exit_code == 0
    assert cli(b, "remember", "rule", "--update", "-d", "b says", env={"MEMCTL_NOW": "2026-11-30T11:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0
    done = subprocess.run(["git", "-C", str(b), *ID, "pull", "--no-rebase", "--no-edit", "-q", "origin", "master"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "description: b says" in (b / "memory" / "rule.md").read_text(encoding="utf-8")
    [copy] = (b / "memory" / "conflicts").glob("rule.*.md")
    assert git(b, "status", "--porcelain", "--untracked-files=all").strip() == f"?? memory/conflicts/{copy.name}"
    assert [c["copy"] for c in json.loads(cli(b, "conflicts", "--json").stdout)["merge"]] == [
        f"memory/conflicts/{copy.name}"]
    r = cli(b, "sync")
    assert r.exit_code == 0, r.stderr
    assert git(b, "status", "--porcelain").strip() == ""
    assert cli(a, "sync").exit_code == 0 and (a / "memory" / "conflicts" / copy.name).exists()


def test_a_claude_code_memory_directory_syncs_between_two_machines(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "a"
    a.mkdir()
    (a / "MEMORY.md").write_text("# Memory\n\n- [Role](role.md) — The user is a data scientist\n", encoding="utf-8")
    (a / "role.md").write_text("---\nname: role\ndescription: The user is a data scientist\ntype: user\n---\nx\n", encoding="utf-8")
    git(a, "init", "-q")
    git(a, "add", "-A")
    git(a, *ID, "commit", "-qm", "a Claude Code memory directory")
    git(a, "remote", "add", "origin", str(remote))
    r = cli(a, "sync")
    assert r.exit_code == 0, r.stderr
    assert (a / ".gitattributes").read_text().splitlines() == [
        "ledgers/*.tsv merge=union", "/*.md merge=memctl-fact", "/MEMORY.md merge=memctl-index", "archive/*.md merge=memctl-archive",
        "/memctl-facts.tsv merge=union", "memory-index/*.md merge=memctl-topic"]
    b = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True)
    assert cli(b, "sync", "--setup").exit_code == 0
    assert cli(a, "remember", "from_a", "-d", "Aで決めたこと", "-t", "project").exit_code == 0
    assert cli(b, "remember", "from_b", "-d", "decided on b", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0 and cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b)
    index = (a / "MEMORY.md").read_text(encoding="utf-8")
    assert "(from_a.md) — Aで決めたこと" in index and "(from_b.md) — decided on b" in index and "<<<<<<<" not in index
    assert cli(a, "index", "--check").exit_code == 0
    # The same fact changed on both machines: the warning names the folder the copy is in (here `conflicts/`;
    # it said `memory/conflicts/`, which a Claude Code directory does not have).
    assert cli(a, "remember", "from_a", "--update", "-d", "Aで決め直したこと").exit_code == 0
    assert cli(b, "remember", "from_a", "--update", "-d", "Bで決め直したこと").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync")
    assert r.exit_code == 0, r.stderr
    assert "a version is kept aside in conflicts/ (hint" in r.stderr and "memory/conflicts" not in r.stderr, r.stderr
    assert [p.name for p in (b / "conflicts").iterdir()][0].startswith("from_a.")


def test_two_machines_declaring_different_ledgers_merge_memctl_toml_but_the_same_table_twice_is_refused(pair):
    a, b, remote = pair
    assert cli(a, "ledger", "create", "reading", "--columns", "date,title").exit_code == 0
    assert cli(b, "ledger", "create", "meals", "--columns", "date,dish", "--unique", "date").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync", "--json")
    assert r.exit_code == 0, r.stderr
    assert {"path": "memctl.toml", "kind": "config", "how": "both sides appended tables: ours, then theirs"} in json.loads(r.stdout)["resolved"]
    assert cli(a, "sync").exit_code == 0
    names = [row["name"] for row in json.loads(cli(a, "ledger", "list", "--json").stdout)]
    assert {"reading", "meals", "themes", "episodes"} <= set(names)
    assert _files(a) == _files(b)
    assert cli(a, "ledger", "create", "same", "--columns", "x").exit_code == 0
    assert cli(b, "ledger", "create", "same", "--columns", "y").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    same = _unchanged(b)
    r = cli(b, "sync")
    assert r.exit_code == 1 and r.stderr.startswith("memctl: error: both sides changed ")
    assert same()


def test_the_episodes_ledger_each_machine_declared_on_its_first_episode_merges_without_a_person(tmp_path):
    """memctl declares `[ledgers.episodes]` in memctl.toml on a machine's first `episode add`: two machines
    that each added their first episode (one of them after declaring a ledger of its own) stopped every
    sync at "both sides changed memctl.toml" — a table memctl wrote itself, the same on both sides,
    left to a person to merge. The same table declared the same on both sides is one declaration; the
    same table declared differently is still refused (the test above)."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli(None, "init", str(a)).exit_code == 0
    git(a, "remote", "add", "origin", str(remote))
    assert cli(a, "sync").exit_code == 0
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True)
    assert cli(b, "sync", "--setup").exit_code == 0
    assert cli(a, "ledger", "create", "notes", "--columns", "ts,msg").exit_code == 0
    assert cli(a, "episode", "add", "デスクトップで決めた", "--type", "decision").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "episode", "add", "ノートPCで決めた", "--type", "decision").exit_code == 0
    done = cli(b, "sync")
    assert done.exit_code == 0, done.stderr
    assert cli(a, "sync").exit_code == 0
    assert (a / "memctl.toml").read_text(encoding="utf-8").count("[ledgers.episodes]") == 1
    assert _files(a) == _files(b)
    listed = json.loads(cli(a, "episode", "list", "--json").stdout)
    assert {"デスクトップで決めた", "ノートPCで決めた"} <= {e["description"] for e in listed}
    assert cli(a, "doctor").exit_code == 0


def test_a_claude_code_directory_adopted_by_init_merges_under_a_plain_git_pull(tmp_path):
    """init writes the Claude Code layout's attributes (committed with the adoption) and registers the
    drivers, as it does for a memctl store: after `sync --setup` on the second clone, two machines'
    MEMORY.md merge by meaning under a plain `git pull`, and the folder stays Claude Code's (no memory/,
    no memctl.toml)."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "home" / ".claude" / "projects" / "-work-app" / "memory"
    a.mkdir(parents=True)
    (a / "MEMORY.md").write_text("# Memory\n\n- [Role](role.md) — The user is a data scientist\n", encoding="utf-8")
    (a / "role.md").write_text("---\nname: role\ndescription: The user is a data scientist\ntype: user\n---\nx\n",
                               encoding="utf-8")
    r = cli(None, "init", str(a))
    assert r.exit_code == 0, r.stderr
    assert (a / ".gitattributes").read_text(encoding="utf-8").splitlines() == [
        "ledgers/*.tsv merge=union", "/*.md merge=memctl-fact", "/MEMORY.md merge=memctl-index", "archive/*.md merge=memctl-archive",
        "/memctl-facts.tsv merge=union", "memory-index/*.md merge=memctl-topic"]
    assert git(a, "ls-files").split() == [".gitattributes", "MEMORY.md", "role.md"]
    assert len(git(a, "config", "--get-regexp", r"^merge\.memctl-.*\.driver$").splitlines()) == 6
    assert git(a, "status", "--porcelain") == "" and not (a / "memory").exists() and not (a / "memctl.toml").exists()
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "HEAD:master")
    b = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True)
    assert cli(b, "sync", "--setup").exit_code == 0
    assert cli(a, "remember", "from_a", "-d", "Aで決めたこと", "-t", "project").exit_code == 0
    assert cli(b, "remember", "from_b", "-d", "decided on b", "-t", "project").exit_code == 0
    git(a, "push", "-q", "origin", "HEAD:master")
    done = subprocess.run(["git", "-C", str(b), *ID, "pull", "--no-rebase", "--no-edit", "-q", "origin", "master"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    index = (b / "MEMORY.md").read_text(encoding="utf-8")
    assert "(from_a.md) — Aで決めたこと" in index and "(from_b.md) — decided on b" in index and "<<<<<<<" not in index
    assert cli(b, "index", "--check").exit_code == 0 and cli(b, "doctor").exit_code == 0
    again = cli(None, "init", str(a))  # idempotent: nothing more to add or commit
    assert again.exit_code == 0 and git(a, "status", "--porcelain") == ""


def test_init_of_a_claude_code_directory_leaves_a_hand_edited_gitattributes_alone_and_says_so(tmp_path):
    d = tmp_path / ".claude" / "projects" / "-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    git(d, "init", "-q")
    (d / ".gitattributes").write_text("*.png binary\n", encoding="utf-8")  # the user's, not committed
    r = cli(None, "init", str(d))
    assert r.exit_code == 0, r.stderr
    assert "memctl: warning: .gitattributes has uncommitted changes" in r.stderr and "MEMORY.md merge=memctl-index" in r.stderr
    assert (d / ".gitattributes").read_text(encoding="utf-8") == "*.png binary\n"
    assert "?? .gitattributes" in git(d, "status", "--porcelain")


def test_a_claude_code_directorys_attributes_reach_only_its_top_and_old_lines_are_anchored(tmp_path):
    """memctl's drivers take the facts and MEMORY.md at the top and the topic files of memory-index/ (as in a
    memctl store: issue 29.6); markdown in another subfolder (notes) keeps git's own merge. Lines an earlier
    memctl wrote unanchored are anchored, and the missing ones added, by `sync --setup`."""
    d = tmp_path / ".claude" / "projects" / "-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    assert cli(None, "init", str(d)).exit_code == 0
    attrs = git(d, "check-attr", "merge", "--", "role.md", "MEMORY.md", "memory-index/topic.md", "notes/readme.md")
    assert attrs.splitlines() == ["role.md: merge: memctl-fact", "MEMORY.md: merge: memctl-index",
                                  "memory-index/topic.md: merge: memctl-topic", "notes/readme.md: merge: unspecified"]
    old = "*.png binary\nledgers/*.tsv merge=union\n*.md merge=memctl-fact\nMEMORY.md merge=memctl-index\narchive/*.md merge=memctl-archive\n"
    (d / ".gitattributes").write_text(old, encoding="utf-8")
    git(d, *ID, "commit", "-qam", "attributes as an earlier memctl wrote them")
    r = cli(d, "sync", "--setup")
    assert r.exit_code == 0, r.stderr
    assert (d / ".gitattributes").read_text(encoding="utf-8") == old.replace("\n*.md", "\n/*.md").replace(
        "\nMEMORY.md", "\n/MEMORY.md") + "/memctl-facts.tsv merge=union\nmemory-index/*.md merge=memctl-topic\n"
    assert git(d, "check-attr", "merge", "--", "notes/readme.md", "memory-index/project.md").splitlines() == [
        "notes/readme.md: merge: unspecified", "memory-index/project.md: merge: memctl-topic"]


def test_reads_are_committed_by_sync_and_reach_the_other_clone(pair):
    """Issue 23.10: a read leaves `git status` clean on either machine; the access rows it left in .memctl/ are
    committed and pushed by the next sync (not taken for nothing to do by the fast path), and merged into the other
    clone's log, where audit and forget's use counts see them."""
    a, b, _remote = pair
    now = {"MEMCTL_NOW": "2026-03-02T10:00:00+09:00"}
    assert memctl(a, "remember", "deploy", "-d", "deploys happen on Tuesdays", env=now).returncode == 0
    assert memctl(a, "sync", env=now).returncode == 0 and memctl(b, "sync", env=now).returncode == 0
    assert memctl(a, "used", "deploy", "--query", "aで使った", env=now).returncode == 0
    assert memctl(b, "used", "deploy", "--query", "bで使った", env=now).returncode == 0
    for clone in (a, b):
        assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""
    done = memctl(a, "sync", env=now)
    assert done.returncode == 0 and "1 commit pushed" in done.stderr, done.stderr
    assert git(a, "log", "-1", "--format=%s").strip() == "memctl: commit rows appended to ledgers/access.tsv before sync"
    done = memctl(b, "sync", env=now)
    assert done.returncode == 0, done.stderr
    assert memctl(a, "sync", env=now).returncode == 0
    for clone in (a, b):
        rows = json.loads(memctl(clone, "audit", "--json", env=now).stdout)
        assert sorted(r["query"] for r in rows) == ["aで使った", "bで使った"], clone
        assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""
        assert not any((clone / ".memctl" / "access").iterdir())


def test_the_first_sync_gives_the_branch_its_upstream_so_a_plain_git_pull_works(tmp_path):
    """The first `memctl sync` pushed without setting an upstream: a later plain `git pull` (as README's
    "Several machines" and SYNC.md's `git pull` sections have it) stopped with "There is no tracking
    information for the current branch". It sets the one it used, as `git push -u` would; an upstream
    the user chose (here another local branch) is left as it is."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "a"
    assert cli(None, "init", str(a)).exit_code == 0
    git(a, "remote", "add", "origin", str(remote))
    assert cli(a, "sync").exit_code == 0
    branch = git(a, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert git(a, "rev-parse", "--abbrev-ref", "@{upstream}").strip() == f"origin/{branch}"
    pulled = subprocess.run(["git", "-C", str(a), *ID, "pull", "-q"], capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr

    c = tmp_path / "c"
    subprocess.run(["git", "clone", "-q", str(remote), str(c)], check=True)
    git(c, "branch", "mine")
    git(c, "branch", "--set-upstream-to=mine")
    assert cli(c, "sync", "--remote", "origin").exit_code == 0
    assert git(c, "config", f"branch.{branch}.remote").strip() == "."


def test_a_linked_worktree_of_a_store_syncs_and_merges(pair, tmp_path):
    """helper-56: in a `git worktree add` checkout, sync failed at once ("…/.git/worktrees/wt/info/attributes
    is outside the store"), and, with that file made by hand, at every merge (the mark sync writes
    before merging): a linked worktree's git folders lie outside the store."""
    a, b, remote = pair
    wt = tmp_path / "wt"
    git(b, "worktree", "add", "-q", "--track", "-b", "side", str(wt), "origin/master")
    assert cli(wt, "remember", "wt-fact", "-d", "書いたのはworktree").exit_code == 0
    first = cli(wt, "sync")
    assert first.exit_code == 0, first.stderr
    assert cli(a, "sync").exit_code == 0 and (a / "memory" / "wt-fact.md").is_file()
    assert cli(a, "remember", "a-fact", "-d", "from a").exit_code == 0 and cli(a, "sync").exit_code == 0
    assert cli(wt, "remember", "wt-fact-2", "-d", "second").exit_code == 0
    merged = cli(wt, "sync")  # the remote moved: a merge
    assert merged.exit_code == 0, merged.stderr
    assert (wt / "memory" / "a-fact.md").is_file() and git(wt, "log", "-1", "--format=%p").count(" ") == 1
    assert cli(a, "sync").exit_code == 0 and (a / "memory" / "wt-fact-2.md").is_file()
    common = b / ".git"
    assert "memctl-fact" in (common / "info" / "attributes").read_text(encoding="utf-8")  # where git reads it
    assert not list(common.rglob("memctl-sync-merge"))
    assert cli(wt, "doctor").exit_code == 0


@pytest.mark.parametrize("local_write", [False, True], ids=["fast-forward", "merge"])
def test_a_fact_the_other_machine_deleted_by_hand_leaves_memory_md_with_its_line(pair, local_write):
    """helper-56: a fact deleted on the remote with `git rm` (its MEMORY.md line left) was merged with no
    word; MEMORY.md linked a missing file and doctor failed until the next write here."""
    a, b, remote = pair
    assert cli(a, "remember", "fact-a", "-d", "消える事実").exit_code == 0 and cli(a, "sync").exit_code == 0
    assert cli(b, "sync").exit_code == 0
    git(b, "rm", "-q", "memory/fact-a.md")
    git(b, *ID, "commit", "-qm", "deleted by hand")
    git(b, "push", "-q", "origin", "HEAD")
    if local_write:
        assert cli(a, "remember", "fact-local", "-d", "ここで書いた").exit_code == 0
    done = cli(a, "sync", "--json")
    assert done.exit_code == 0, done.stderr
    said = [r for r in json.loads(done.stdout)["resolved"] if r["path"] == "memory/MEMORY.md"]
    assert said and "memory/fact-a.md deleted on the other side" in said[0]["how"], done.stdout
    assert "fact-a" not in (a / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert cli(a, "doctor").exit_code == 0 and git(a, "status", "--porcelain") == ""
    assert cli(b, "sync").exit_code == 0 and cli(b, "doctor").exit_code == 0  # the mended index reached the other side


def test_a_read_during_an_unfinished_rebase_names_the_rebases_abort(pair):
    """helper-80: during `git rebase -x false HEAD~1` the warning's hint said `git merge --abort`."""
    a, _, _ = pair
    for text in ("1\n", "2\n"):
        (a / "notes.txt").write_text(text)
        git(a, "add", "notes.txt")
        git(a, *ID, "commit", "-qm", f"notes {text.strip()}")
    subprocess.run(["git", "-C", str(a), *ID, "rebase", "-q", "-x", "false", "HEAD~1"], capture_output=True, text=True)
    r = memctl(a, "list")
    assert r.returncode == 0 and "a git rebase is unfinished" in r.stderr and "or git rebase --abort)" in r.stderr, r.stderr
    assert "merge --abort" not in r.stderr
    git(a, "rebase", "--abort")


def test_resolve_takes_the_facts_own_name_as_other_commands_do(pair):
    """helper-80: a fact whose `name:` is not its file stem (`memory/deploy.md`, `name: デプロイ規則`):
    `remember デプロイ規則 --update` and `show` took the name, `resolve デプロイ規則` said "no merge conflict"."""
    a, b, remote = pair
    (a / "memory" / "deploy.md").write_text("---\nname: デプロイ規則\ndescription: 金曜日はデプロイしない\ntype: project\n---\n",
                                           encoding="utf-8")
    assert cli(a, "index").exit_code == 0  # (it commits the file with MEMORY.md)
    assert git(a, "status", "--porcelain") == ""
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    assert cli(a, "remember", "デプロイ規則", "--update", "-d", "金曜日と土曜日はデプロイしない",
               env={"MEMCTL_NOW": "2026-11-30T10:00:00+00:00"}).exit_code == 0
    assert cli(b, "remember", "デプロイ規則", "--update", "-d", "金曜日は午後だけデプロイしない",
               env={"MEMCTL_NOW": "2026-11-30T11:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    assert json.loads(cli(b, "conflicts", "--json").stdout)["merge"][0]["name"] == "deploy"
    r = cli(b, "resolve", "デプロイ規則", "--keep", "local")
    assert r.exit_code == 0, r.stderr
    assert json.loads(cli(b, "conflicts", "--json").stdout)["merge"] == []
    assert "金曜日は午後だけデプロイしない" in (b / "memory" / "deploy.md").read_text(encoding="utf-8")
