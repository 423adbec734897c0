"""Claude Code's own writes are taken in (issue 24, point 2).

The memory directory sits inside a larger repository (~/.claude under git, as dotfiles often are).
Claude Code creates a fact, edits one, deletes one and appends its index line to MEMORY.md; memctl's
next command there commits exactly those, authored `claude-code`, then makes its own commit; doctor
stays clean, `remember --update` works, and nothing outside the memory directory is committed.
"""

from __future__ import annotations

import json

from conftest import PINNED_NOW, cli, git, memctl
from test_claude_code_cycle import claude_appends, claude_fact, make_claude_dir


def _adopted(tmp_path):
    d = make_claude_dir(tmp_path)
    repo = tmp_path / ".claude"
    git(repo, "init", "-q")
    (repo / "settings.json").write_text("{}\n", encoding="utf-8")
    git(repo, "add", "settings.json")
    git(repo, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qm", "dotfiles")
    assert cli(None, "init", str(d)).exit_code == 0
    return d, repo


def _claude_code_writes(d, repo):
    claude_fact(d, "feedback_deploys", "デプロイ規則", "Deploys only on Tuesdays after the suite passes", "feedback",
                "**Why:** a Friday deploy broke billing.\n**How to apply:** wait for Tuesday.\n")
    claude_appends(d, "- [デプロイ規則](feedback_deploys.md) — Deploys only on Tuesdays after the suite passes")
    with open(d / "project_deadline.md", "a", encoding="utf-8") as handle:
        handle.write("モバイル版は12月3日。\n")
    (d / "user_role.md").unlink()  # ... and its line in MEMORY.md
    index = d / "MEMORY.md"
    index.write_text("".join(line for line in index.read_text(encoding="utf-8").splitlines(keepends=True)
                             if "(user_role.md)" not in line), encoding="utf-8")
    (repo / "settings.json").write_text('{"model": "opus"}\n', encoding="utf-8")  # outside: never memctl's
    (repo / "history.jsonl").write_text("{}\n", encoding="utf-8")


def _commit(repo, rev):
    author = git(repo, "log", "-1", "--format=%an <%ae>", rev).strip()
    changed = git(repo, "show", "--name-status", "--format=", rev).split("\n")
    return author, sorted(line for line in changed if line)


def test_the_next_command_commits_claude_codes_writes_first(tmp_path):
    d, repo = _adopted(tmp_path)
    _claude_code_writes(d, repo)
    done = cli(d, "remember", "project_freeze", "--type", "project", "-d", "No releases in the holidays")
    assert done.exit_code == 0, done.stderr

    memctls, theirs = _commit(repo, "HEAD"), _commit(repo, "HEAD~1")
    base = "projects/-home-me-app/memory/"
    assert theirs == ("claude-code <claude-code@localhost>", [
        f"A\t{base}feedback_deploys.md", f"D\t{base}user_role.md", f"M\t{base}MEMORY.md", f"M\t{base}project_deadline.md"])
    assert memctls[0] != theirs[0] and f"A\t{base}project_freeze.md" in memctls[1]
    assert git(repo, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M settings.json", "?? history.jsonl"]  # outside the memory directory: left alone

    again = cli(d, "doctor")
    assert again.exit_code == 0, again.stdout + again.stderr


def test_doctor_and_update_after_claude_code_edited_a_fact(tmp_path):
    d, repo = _adopted(tmp_path)
    with open(d / "feedback_testing.md", "a", encoding="utf-8") as handle:
        handle.write("追記: E2E も実DB。\n")
    head = git(repo, "rev-parse", "HEAD")
    done = cli(d, "doctor")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert git(repo, "rev-parse", "HEAD~1") == head and _commit(repo, "HEAD")[0].startswith("claude-code ")

    with open(d / "feedback_testing.md", "a", encoding="utf-8") as handle:
        handle.write("追記2\n")
    done = cli(d, "remember", "feedback_testing", "--update", "-d", "統合テストもE2Eも実DBに当てる")
    assert done.exit_code == 0, done.stderr
    assert "追記2" in git(repo, "show", "HEAD~1:projects/-home-me-app/memory/feedback_testing.md")
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_persons_prose_in_memory_md_is_not_taken_in(tmp_path):
    d, repo = _adopted(tmp_path)
    claude_appends(d, "my private draft")
    head = git(repo, "rev-parse", "HEAD")
    done = cli(d, "remember", "b_fact", "-d", "second")
    assert done.exit_code == 1 and "outside the memctl block" in done.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def test_the_session_start_hook_takes_them_in(tmp_path):
    d, repo = _adopted(tmp_path)
    _claude_code_writes(d, repo)
    done = memctl(d, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                  env={"MEMCTL_NOW": PINNED_NOW})
    assert done.returncode == 0 and "nothing added" not in done.stderr, done.stderr
    assert _commit(repo, "HEAD")[0] == "claude-code <claude-code@localhost>"
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""


def test_a_fact_claude_code_renames_while_commands_run_loses_nothing(tmp_path):
    """Claude Code renames a fact file (and its index line) back and forth while memctl's reads and
    writes run in other processes: each command succeeds or fails with one line, no traceback; every
    write that exited 0 is committed; the fact is never lost, and what the sidecar keeps for it (a pin)
    follows it to its new name (found by its title)."""
    import os
    import threading
    import time

    d, repo = _adopted(tmp_path)
    assert cli(d, "pin", "feedback_testing").exit_code == 0
    names = [d / "feedback_testing.md", d / "feedback_tests.md"]
    content = names[0].read_bytes()
    index = d / "MEMORY.md"
    stop = threading.Event()
    renames = []

    def claude_code_renaming():
        i = 0
        while not stop.is_set():
            old, new = names[i % 2], names[(i + 1) % 2]
            os.replace(old, new)
            text = index.read_text(encoding="utf-8")
            index.write_text(text.replace(f"({old.name})", f"({new.name})"), encoding="utf-8")
            renames.append(new.name)
            i += 1
            time.sleep(0.02)

    thread = threading.Thread(target=claude_code_renaming)
    thread.start()
    results = []
    try:
        for i in range(6):
            results.append(("list", memctl(d, "list", "--json", env={"MEMCTL_NOW": PINNED_NOW})))
            results.append((f"project_n{i}", memctl(d, "remember", f"project_n{i}", "--type", "project",
                                                     "-d", f"note {i}", env={"MEMCTL_NOW": PINNED_NOW})))
    finally:
        stop.set()
        thread.join()
    # The next write after Claude Code's last rename takes it in. (Checked after a write that raced with
    # that rename, the index could still name the other file: doctor said so, in one CI run.)
    results.append(("project_last", memctl(d, "remember", "project_last", "--type", "project", "-d", "last note",
                                           env={"MEMCTL_NOW": PINNED_NOW})))
    assert results[-1][1].returncode == 0, results[-1][1].stderr
    assert len(renames) > 10
    for what, done in results:
        assert "Traceback" not in done.stderr, (what, done.stderr)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            assert lines and lines[-1].startswith("memctl: error:") and len(lines) <= 2, (what, done.stderr)
    written = [what for what, done in results if what != "list" and done.returncode == 0]
    assert written, [done.stderr for _, done in results]
    committed = git(repo, "log", "--format=", "--name-only")
    for what in written:
        assert f"{what}.md" in committed
    live = [p for p in names if p.exists()]
    assert len(live) == 1 and live[0].read_bytes() == content  # never lost, never half-renamed
    assert cli(d, "doctor").exit_code == 0  # the last rename is taken in; the index follows it
    listed = json.loads(memctl(d, "list", "--json", env={"MEMCTL_NOW": PINNED_NOW}).stdout)
    mine = [f for f in listed if f["name"] == "テスト方針"]
    assert len(mine) == 1 and mine[0]["metadata"].get("pinned") is True, mine  # the sidecar row followed the rename


def test_the_session_start_hook_prints_its_bundle_while_another_process_holds_the_store_lock_and_git_is_busy(tmp_path):
    """The take-in is housekeeping: a sync or a job holding the store lock (and a live git holding
    index.lock) leaves it for later, and the session still gets its pinned facts."""
    import subprocess
    import sys

    d, repo = _adopted(tmp_path)
    assert cli(d, "pin", "feedback_testing").exit_code == 0
    _claude_code_writes(d, repo)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"lock = open({str(d / '.memctl' / 'lock')!r}, 'a+'); fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        head = git(repo, "rev-parse", "HEAD")
        index_lock = repo / ".git" / "index.lock"
        for busy_git in (False, True):  # the store lock held; then also a live memctl's index.lock, as gitstore writes it
            if busy_git:
                index_lock.write_text(f"memctl pid {holder.pid}\n", encoding="utf-8")
            done = memctl(d, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                          env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_HOOK_TIMEOUT": "5", "MEMCTL_HOOK_RESIDENT": "0"})
            assert done.returncode == 0 and "nothing added" not in done.stderr, done.stderr
            assert "統合テストは実DBに当てる" in done.stdout  # the pinned fact
            assert git(repo, "rev-parse", "HEAD") == head  # nothing taken in
        assert index_lock.exists()  # nor touched
    finally:
        holder.kill()
        holder.wait()
        (repo / ".git" / "index.lock").unlink(missing_ok=True)
    later = memctl(d, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                   env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_HOOK_RESIDENT": "0"})
    assert later.returncode == 0 and _commit(repo, "HEAD")[0] == "claude-code <claude-code@localhost>"


def test_a_memctl_line_lost_to_claude_codes_whole_file_write_of_memory_md_is_put_back_at_session_start(tmp_path):
    """Claude Code reads MEMORY.md, memctl adds a fact meanwhile, Claude Code writes back what it read
    plus its own line: memctl's line is gone. The next SessionStart takes Claude Code's write in and
    lists every live fact again, each once, committed."""
    d, repo = _adopted(tmp_path)
    assert cli(d, "remember", "first_fact", "-t", "project", "-d", "The first memctl fact").exit_code == 0
    read_by_claude = (d / "MEMORY.md").read_text(encoding="utf-8")
    claude_fact(d, "project_lost", "lost update", "A fact Claude Code wrote", "project", "x\n")
    assert cli(d, "remember", "interleaved", "-t", "user", "-d", "A memctl fact written meanwhile").exit_code == 0
    (d / "MEMORY.md").write_text(read_by_claude + "- [lost update](project_lost.md) — A fact Claude Code wrote\n",
                                 encoding="utf-8")
    assert "interleaved.md" not in (d / "MEMORY.md").read_text(encoding="utf-8")
    done = memctl(d, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                  env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_HOOK_RESIDENT": "0"})
    assert done.returncode == 0 and "nothing added" not in done.stderr, done.stderr
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert text.count("(interleaved.md)") == 1 and text.count("(project_lost.md)") == 1 and text.count("(first_fact.md)") == 1
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""
    assert _commit(repo, "HEAD~1")[0] == "claude-code <claude-code@localhost>"  # its write, then memctl's repair
    checked = cli(d, "doctor")
    assert checked.exit_code == 0, checked.stdout + checked.stderr


def test_claude_codes_edit_of_the_first_index_line_after_a_byte_order_mark_is_taken_in(tmp_path):
    """A BOM before MEMORY.md's first line made that line prose: Claude Code's edit of it was not taken in."""
    d, repo = _adopted(tmp_path)
    index = d / "MEMORY.md"
    lines = ["- [締め切り](project_deadline.md) — リリースは12月5日\n",
             "- [テスト方針](feedback_testing.md) — 統合テストは実DBに当てる（モックは使わない）\n",
             "- [User role](user_role.md) — The user is a data scientist\n"]
    index.write_bytes(b"\xef\xbb\xbf" + "".join(lines).encode("utf-8"))
    git(repo, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qam", "an editor saved a BOM")
    edited = "- [締め切り](project_deadline.md) — リリースは12月10日に延びた\n"
    index.write_bytes(b"\xef\xbb\xbf" + "".join([edited, *lines[1:]]).encode("utf-8"))  # Claude Code's edit
    done = cli(d, "remember", "project_freeze", "--type", "project", "-d", "No releases in the holidays")
    assert done.exit_code == 0, done.stderr
    assert _commit(repo, "HEAD~1") == ("claude-code <claude-code@localhost>", ["M\tprojects/-home-me-app/memory/MEMORY.md"])
    assert "リリースは12月10日に延びた" in index.read_text(encoding="utf-8")


def test_a_line_claude_code_appends_while_memctl_rewrites_memory_md_is_kept(tmp_path, monkeypatch):
    """Claude Code appends to MEMORY.md taking no lock. A line it appends after memctl read the index and
    before memctl replaced it was lost with the old file (11 of 111 in a `printf >>` loop racing
    `memctl index`): the replace is now made only while the file is as read, else it is read again."""
    from memctl import facts as facts_mod, index as index_mod

    d, _ = _adopted(tmp_path)
    claude_fact(d, "project_k8s", "クラスタ", "本番は k8s 1.31", "project", "x\n")
    built = index_mod.build_layout
    calls = []

    def build_then_claude_appends(*args, **kwargs):
        layout = built(*args, **kwargs)
        if not calls:  # between memctl's read and its write, once
            claude_appends(d, "- [クラスタ](project_k8s.md) — 本番は k8s 1.31")
        calls.append(1)
        return layout

    monkeypatch.setattr(facts_mod.index_mod, "build_layout", build_then_claude_appends)
    r = cli(d, "remember", "a_fact", "-d", "first")
    assert r.exit_code == 0, r.stderr
    assert len(calls) == 2  # read again, once
    assert "(project_k8s.md)" in (d / "MEMORY.md").read_text(encoding="utf-8")


def test_a_fact_and_line_claude_code_writes_after_memctl_read_the_facts_is_no_hand_edit(tmp_path, monkeypatch):
    """The refusal of hand edits outside the block took Claude Code's line for a person's when Claude Code
    wrote its fact after memctl had read the facts: `memctl index` failed half the time while it wrote."""
    from memctl import facts as facts_mod

    d, _ = _adopted(tmp_path)
    assert cli(d, "remember", "a_fact", "-d", "first").exit_code == 0
    read = facts_mod.live_facts

    def read_then_claude_writes(store, *args, **kwargs):
        found = read(store, *args, **kwargs)
        if not (d / "project_k8s.md").exists():
            claude_fact(d, "project_k8s", "クラスタ", "本番は k8s 1.31", "project", "x\n")
            claude_appends(d, "- [クラスタ](project_k8s.md) — 本番は k8s 1.31")
        return found

    monkeypatch.setattr(facts_mod, "live_facts", read_then_claude_writes)
    r = cli(d, "index")
    assert r.exit_code == 0, r.stderr
    assert "(project_k8s.md)" in (d / "MEMORY.md").read_text(encoding="utf-8")
    monkeypatch.undo()
    assert cli(d, "doctor").exit_code == 0


def test_a_symbolic_link_in_the_directory_is_named_by_doctor_and_blocks_no_write(tmp_path):
    """A `shared.md` linking a file outside made every write fail with git's raw "is outside repository"
    (it was taken in as Claude Code's write); doctor called it a link and also a file to commit."""
    d, repo = _adopted(tmp_path)
    outside = tmp_path / "team-notes.md"
    outside.write_text("---\nname: team\ndescription: shared\n---\nx\n", encoding="utf-8")
    (d / "shared.md").symlink_to(outside)
    r = cli(d, "remember", "a_fact", "-d", "first")
    assert r.exit_code == 0, r.stderr
    assert "shared.md" not in git(repo, "show", "--name-only", "--format=", "HEAD")
    r = cli(d, "doctor")
    assert r.exit_code == 1
    problems = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("shared.md")]
    assert len(problems) == 1 and "symbolic link" in problems[0] and "remove the link" in problems[0], problems


def test_claude_codes_whole_file_rewrite_of_memory_md_with_crlf_is_taken_in(tmp_path):
    """Claude Code on Windows writes MEMORY.md whole with CRLF line endings: every prose line then
    differed by its `\\r`, so doctor (and every write) took the rewrite for a person's edit and said
    to commit it by hand."""
    d, repo = _adopted(tmp_path)
    index = d / "MEMORY.md"
    claude_fact(d, "project_win", "Windows", "The build runs on Windows too", "project", "x\n")
    text = index.read_text(encoding="utf-8") + "- [Windows](project_win.md) — The build runs on Windows too\n"
    index.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    checked = cli(d, "doctor")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert _commit(repo, "HEAD")[0] == "claude-code <claude-code@localhost>"
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""
    done = cli(d, "remember", "project_next", "--type", "project", "-d", "The next thing to remember")
    assert done.exit_code == 0, done.stderr


def test_claude_codes_writes_are_authored_claude_code_when_the_user_has_a_git_identity(tmp_path):
    """The docs say Claude Code's writes are committed authored `claude-code`; with a git identity
    configured they were the user's (only the committer is)."""
    d, repo = _adopted(tmp_path)
    git(repo, "config", "user.name", "利用者")
    git(repo, "config", "user.email", "me@example.com")
    _claude_code_writes(d, repo)
    assert cli(d, "remember", "project_freeze", "--type", "project", "-d", "No releases in the holidays").exit_code == 0
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "HEAD~1").strip() == (
        "claude-code <claude-code@localhost>|利用者 <me@example.com>")
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "HEAD").strip() == "利用者 <me@example.com>|利用者 <me@example.com>"


def test_a_new_fact_with_a_forgotten_facts_title_takes_none_of_its_settings(tmp_path):
    """The sidecar's rows were found by title for a file they do not name (meant for a file Claude Code
    renamed): a fact forgotten while pinned with an expiry lent both to Claude Code's new fact of the
    same title, which recall then hid as expired and no policy could archive (pinned)."""
    d, _ = _adopted(tmp_path)
    assert cli(d, "remember", "リリース手順", "-d", "リリースは毎月第一火曜", "--pin", "--expires", "2026-03-20",
               "--importance", "0.9").exit_code == 0
    assert cli(d, "forget", "リリース手順", "--reason", "古い").exit_code == 0
    claude_fact(d, "project_release_new", "リリース手順", "リリースは隔週金曜に変更", "project", "")
    later = {"MEMCTL_NOW": "2026-04-01T12:00:00+09:00"}
    shown = cli(d, "show", "project_release_new", "--json", env=later)
    assert shown.exit_code == 0, shown.stderr
    fact = json.loads(shown.stdout)
    assert fact["status"] == "live" and not {"pinned", "expires", "importance"} & set(fact.get("metadata") or {}), fact
    found = cli(d, "recall", "リリースは隔週金曜", "--json", env=later)
    assert found.exit_code == 0 and json.loads(found.stdout)[0]["path"] == "project_release_new.md", found.stdout


def test_forget_then_restore_gives_back_a_file_of_claude_codes_keys_only(tmp_path):
    """The archived copy carries memctl's `metadata:` (the archive is memctl's); restore put it back into
    the directory with it, where a file's own `metadata:` then overrode the sidecar from then on."""
    d, repo = _adopted(tmp_path)
    before = (d / "project_deadline.md").read_bytes()
    assert cli(d, "pin", "締め切り").exit_code == 0
    shown = json.loads(cli(d, "show", "締め切り", "--json").stdout)
    assert cli(d, "forget", "締め切り", "--reason", "済んだ").exit_code == 0
    assert b"metadata:" in (d / "archive" / "project_deadline.md").read_bytes()
    assert cli(d, "restore", "締め切り").exit_code == 0
    assert (d / "project_deadline.md").read_bytes() == before
    assert json.loads(cli(d, "show", "締め切り", "--json").stdout) == shown
    assert git(repo, "status", "--porcelain", "--", str(d)) == ""


def test_forget_then_restore_keeps_the_keys_a_person_or_claude_code_kept_under_metadata_in_the_file(tmp_path):
    """A Claude Code 2.1 file (`metadata:` with node_type, type, originSessionId) where a person added an
    `owner:` key, and a plain file with a person's `reviewed_by:`: the archived copy holds every key in one
    block, and restore moved the person's key out of the file into the sidecar. The file comes back as it
    was, byte for byte, and what memctl keeps (the pin) is the sidecar's as before."""
    d, repo = _adopted(tmp_path)
    files = {
        "feedback_deploy.md": "---\nname: deploy-rules\ndescription: Deploys only on Tuesdays\nmetadata:\n  node_type: memory\n"
                              "  type: feedback\n  originSessionId: abc-123\n  owner: alice\n---\nDeploys only on Tuesdays.\n",
        "project_review.md": "---\nname: レビュー方針\ndescription: 設計レビューは二人で行う\ntype: project\nmetadata:\n"
                             "  reviewed_by: 田中\n---\n本文。\n",
    }
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    with open(d / "MEMORY.md", "a", encoding="utf-8") as index:
        index.write("- [deploy-rules](feedback_deploy.md) — Deploys only on Tuesdays\n"
                    "- [レビュー方針](project_review.md) — 設計レビューは二人で行う\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "Claude Code and a person wrote")
    for title, name in (("deploy-rules", "feedback_deploy.md"), ("レビュー方針", "project_review.md")):
        assert cli(d, "pin", title).exit_code == 0
        shown = json.loads(cli(d, "show", title, "--json").stdout)
        assert cli(d, "forget", title, "--reason", "試す").exit_code == 0
        assert cli(d, "restore", title).exit_code == 0
        assert (d / name).read_text(encoding="utf-8") == files[name], title
        again = json.loads(cli(d, "show", title, "--json").stdout)
        assert again["metadata"] == shown["metadata"] and again["metadata"].get("pinned") is True, title
    sidecar = (d / "memctl-facts.tsv").read_text(encoding="utf-8")
    assert "owner" not in sidecar and "reviewed_by" not in sidecar
    assert cli(d, "doctor").exit_code == 0
    assert git(repo, "status", "--porcelain", "--", str(d)) == ""


def test_no_commit_writes_are_not_committed_nor_taken_in_later_as_claude_codes(tmp_path):
    """`remember --no-commit` committed Claude Code's writes (a commit the user did not ask for), and the
    next one committed the first one's fact as Claude Code's own ("taken in"), its sidecar rows left out."""
    d, repo = _adopted(tmp_path)
    claude_fact(d, "project_new", "新しい事実", "Claude Code が書いた", "project", "")
    head = git(repo, "rev-parse", "HEAD")
    assert cli(d, "remember", "メモA", "-d", "一つ目の事実", "--no-commit").exit_code == 0
    assert cli(d, "remember", "メモB", "-d", "二つ目の事実", "--no-commit").exit_code == 0
    assert git(repo, "rev-parse", "HEAD") == head
    assert cli(d, "remember", "メモC", "-d", "三つ目の事実").exit_code == 0
    base = "projects/-home-me-app/memory/"
    memctls, theirs = _commit(repo, "HEAD"), _commit(repo, "HEAD~1")
    assert theirs == ("claude-code <claude-code@localhost>", [f"A\t{base}project_new.md"])
    assert memctls[0] != theirs[0]
    assert {f"A\t{base}project_a.md", f"A\t{base}project_b.md", f"A\t{base}project_c.md",
            f"A\t{base}memctl-facts.tsv"} <= set(memctls[1])


def test_a_title_of_a_hundred_kanji_is_a_fact_not_a_file_name_too_long(tmp_path):
    """Titles of 85 to 100 kanji (allowed: up to 100 characters) failed with ENAMETOOLONG: a check for a
    file named after the title itself, which in a Claude Code directory is no file name."""
    d, _ = _adopted(tmp_path)
    title = "長" * 100
    done = cli(d, "remember", title, "-d", "長いタイトルの事実")
    assert done.exit_code == 0, done.stderr
    assert json.loads(cli(d, "show", title, "--json").stdout)["name"] == title
    assert cli(d, "remember", title, "--update", "-d", "長いタイトルの事実、改").exit_code == 0
    assert cli(d, "doctor").exit_code == 0


def test_a_title_in_another_unicode_form_names_the_same_fact(tmp_path):
    """In a Claude Code directory `ガイドライン` typed in NFD (macOS) made a second fact beside the NFC one,
    the two alike in MEMORY.md; memctl's own store refuses such twins by file name. It is the same fact:
    `remember` refuses it as existing, `show` and `--update` find it."""
    import unicodedata

    d, _ = _adopted(tmp_path)
    nfc, nfd = unicodedata.normalize("NFC", "ガイドライン"), unicodedata.normalize("NFD", "ガイドライン")
    assert nfc != nfd
    assert cli(d, "remember", nfc, "-d", "コードレビューの指針").exit_code == 0
    twin = cli(d, "remember", nfd, "-d", "別の説明")
    assert twin.exit_code == 1 and "already exists" in twin.stderr, twin.stderr
    assert json.loads(cli(d, "show", nfd, "--json").stdout)["description"] == "コードレビューの指針"
    assert cli(d, "remember", nfd, "--update", "-d", "コードレビューの指針（改）").exit_code == 0
    assert json.loads(cli(d, "show", nfc, "--json").stdout)["description"] == "コードレビューの指針（改）"
    assert cli(d, "forget", nfd, "--reason", "古い").exit_code == 0
    assert cli(d, "restore", nfd).exit_code == 0  # (review: restore alone did not take the other form)


def test_a_strict_refusal_says_what_its_score_is(tmp_path):
    """`remember --strict` called every score an "overlap", an embedder's cosine included: it names the
    score as the warning does (shared keywords, or the embedder that found it)."""
    d, _ = _adopted(tmp_path)
    done = cli(d, "remember", "zz", "-d", "統合テストは実DBに当てる（モックは決して使わない）", "--strict")
    assert done.exit_code == 1 and "(score " in done.stderr and "overlap" not in done.stderr, done.stderr
    assert "shared keywords)" in done.stderr or "by " in done.stderr


def test_a_new_fact_under_a_forgotten_facts_file_name_takes_none_of_its_settings(tmp_path):
    """Review: the sidecar's rows are found by file first: a fact forgotten while pinned with an expiry,
    then written again under the same title (so the same file name), came back pinned and expired.
    Forgetting removes the file's settings from the sidecar (the archived copy keeps them); restoring
    the old one brings them back."""
    d, _ = _adopted(tmp_path)
    assert cli(d, "remember", "デプロイ規則", "-d", "火曜のみ", "--pin", "--expires", "2020-01-01").exit_code == 0
    first = json.loads(cli(d, "show", "デプロイ規則", "--json").stdout)
    assert cli(d, "forget", "デプロイ規則", "--reason", "古い").exit_code == 0
    assert cli(d, "remember", "デプロイ規則", "-d", "水曜のみ").exit_code == 0
    again = json.loads(cli(d, "show", "デプロイ規則", "--json").stdout)
    assert first["metadata"]["pinned"] is True and first["metadata"]["expires"] == "2020-01-01"
    assert again["path"] == first["path"] and again["status"] == "live", again
    assert "pinned" not in again["metadata"] and "expires" not in again["metadata"], again
    assert cli(d, "forget", "デプロイ規則", "--reason", "もう一度").exit_code == 0
    oldest = [f for f in json.loads(cli(d, "list", "--all", "--json").stdout) if f["description"] == "火曜のみ"]
    assert cli(d, "restore", oldest[0]["path"]).exit_code == 0
    back = json.loads(cli(d, "show", "デプロイ規則", "--json").stdout)
    assert back["description"] == "火曜のみ" and back["metadata"] == first["metadata"], back


def test_a_no_commit_forget_and_index_leave_claude_codes_writes_and_memctls_removal_alone(tmp_path):
    """Review: `forget --no-commit` moved a fact away, and the next command committed that removal as
    Claude Code's; `index --no-commit` still committed Claude Code's writes."""
    d, repo = _adopted(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    claude_fact(d, "project_new", "新しい事実", "Claude Code が書いた", "project", "")
    assert cli(d, "index", "--no-commit").exit_code == 0
    assert git(repo, "rev-parse", "HEAD") == head
    assert cli(d, "forget", "締め切り", "--reason", "済んだ", "--no-commit").exit_code == 0
    assert git(repo, "rev-parse", "HEAD") == head
    assert cli(d, "remember", "メモC", "-d", "三つ目の事実").exit_code == 0
    base = "projects/-home-me-app/memory/"
    memctls, theirs = _commit(repo, "HEAD"), _commit(repo, "HEAD~1")
    assert theirs == ("claude-code <claude-code@localhost>", [f"A\t{base}project_new.md"]), theirs
    assert f"D\t{base}project_deadline.md" not in theirs[1]


def test_headings_claude_code_groups_its_index_lines_under_are_taken_in(tmp_path):
    """helper-74: Claude Code adding `## Workflow` above its new line (or dropping a heading left empty, or
    rewriting MEMORY.md whole with its own headings) stopped every memctl write, the MCP remember tool's
    too, as "uncommitted edits of yours". A heading is the index's structure, not a person's prose."""
    d, repo = _adopted(tmp_path)
    claude_fact(d, "feedback_lint", "Lint", "Run make lint before committing", "feedback", "x\n")
    claude_appends(d, "\n## Workflow\n- [Lint](feedback_lint.md) — run make lint before committing")
    done = cli(d, "remember", "cache_ttl", "-t", "project", "-d", "Redis TTL is 15 minutes")
    assert done.exit_code == 0, done.stderr
    assert _commit(repo, "HEAD~1")[0] == "claude-code <claude-code@localhost>"
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert text.count("(feedback_lint.md)") == 1 and "(cache_ttl.md)" in text
    assert "## Workflow" not in text  # (its one line moved into the block: it heads nothing now)
    index = d / "MEMORY.md"
    index.write_text("# プロジェクトの記憶\n\n" + index.read_text(encoding="utf-8"), encoding="utf-8")
    again = cli(d, "remember", "port", "-t", "project", "-d", "The dev server listens on 5173")
    assert again.exit_code == 0, again.stderr
    assert (d / "MEMORY.md").read_text(encoding="utf-8").startswith("# プロジェクトの記憶\n")
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""


def test_a_persons_edit_of_memory_md_is_refused_naming_its_line(tmp_path):
    d, repo = _adopted(tmp_path)
    lines = (d / "MEMORY.md").read_text(encoding="utf-8").count("\n")
    claude_appends(d, "my private draft")
    done = cli(d, "remember", "b_fact", "-d", "second")
    assert done.exit_code == 1 and f"MEMORY.md:{lines + 1} has uncommitted edits of yours" in done.stderr, done.stderr


def test_a_fact_claude_code_wrote_then_slugged_keeps_the_title_of_its_index_line(tmp_path):
    """helper-74: Claude Code 2.1 rewriting a fact it wrote itself (`name: ""` for a Japanese title, a slug for
    an English one) made it `feedback_testing` for show, list and the index: the sidecar holds titles of memctl's
    writes only. The title of its line in MEMORY.md names it again."""
    d, _ = _adopted(tmp_path)
    (d / "feedback_testing.md").write_text('---\nname: ""\ndescription: 統合テストは実DBに当てる。E2Eも\nmetadata:\n'
                                           "  type: feedback\n  node_type: memory\n---\nbody\n", encoding="utf-8")
    (d / "user_role.md").write_text("---\nname: user-role\ndescription: The user is a data scientist\nmetadata:\n"
                                    "  type: user\n  node_type: memory\n---\nFocus on observability.\n", encoding="utf-8")
    shown = cli(d, "show", "テスト方針", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["name"] == "テスト方針"
    listed = {row["name"] for row in json.loads(cli(d, "list", "--json").stdout)}
    assert {"テスト方針", "User role"} <= listed
    assert cli(d, "remember", "c_fact", "-d", "third").exit_code == 0
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert "[テスト方針](feedback_testing.md)" in text and "[User role](user_role.md)" in text


def test_notes_without_frontmatter_and_claude_codes_unquoted_descriptions_are_no_broken_facts(tmp_path):
    """helper-74: NOTES.md, an empty scratch.md (not linked) failed doctor and warned on every command; a
    description Claude Code reads as text (`[WIP] ...`, `*never* ...`, `"Use "double" quotes"`) was a broken fact."""
    d, _ = _adopted(tmp_path)
    (d / "NOTES.md").write_text("notes\n", encoding="utf-8")
    (d / "scratch.md").write_text("", encoding="utf-8")
    for stem, description in (("feedback_wip", "[WIP] branches must not be merged"), ("feedback_fp", "*never* force-push"),
                              ("feedback_q", '"Use "double" quotes here"')):
        (d / f"{stem}.md").write_text(f"---\nname: {stem}\ndescription: {description}\ntype: feedback\ntags: [a, b]\n---\n",
                                      encoding="utf-8")
    listed = cli(d, "list", "--json")
    assert listed.exit_code == 0 and listed.stderr == "", listed.stderr
    found = {row["name"]: row for row in json.loads(listed.stdout)}
    assert found["feedback_wip"]["description"] == "[WIP] branches must not be merged"
    assert found["feedback_fp"]["description"] == "*never* force-push" and found["feedback_q"]["tags"] == ["a", "b"]
    assert "NOTES" not in found and "scratch" not in found
    assert cli(d, "index").exit_code == 0
    checked = cli(d, "doctor", "--json")
    assert checked.exit_code == 0, checked.stdout
    assert sorted((p["path"], p["code"], p["severity"]) for p in json.loads(checked.stdout)["problems"]) == [
        ("NOTES.md", "not-a-fact", "warning"), ("scratch.md", "not-a-fact", "warning")]
    assert (d / "NOTES.md").read_text(encoding="utf-8") == "notes\n"
    taken = cli(d, "remember", "NOTES", "-d", "a fact named as the note")  # (helper-79: "cannot be read: fix it")
    assert taken.exit_code == 1 and "NOTES.md exists and is no fact (no frontmatter)" in taken.stderr, taken.stderr
    assert (d / "NOTES.md").read_text(encoding="utf-8") == "notes\n"


def test_the_session_start_hook_brings_an_index_claude_code_grew_past_its_limit_back_under_it(tmp_path):
    """helper-74: Claude Code appending line 201 to a 200-line MEMORY.md was taken in at session start but not
    regenerated: the newest fact stayed past the 200 lines Claude Code loads until the next write."""
    d, repo = _adopted(tmp_path)
    (d / "memctl.toml").write_text("[facts]\nmax_index_lines = 12\n", encoding="utf-8")
    git(d, "add", "memctl.toml")
    git(d, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qm", "limit")
    for n in range(12):
        claude_fact(d, f"project_{n:02d}", f"fact {n}", f"The fact number {n}", "project", "x\n")
        claude_appends(d, f"- [fact {n}](project_{n:02d}.md) — The fact number {n}")
    done = memctl(d, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                  env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_HOOK_RESIDENT": "0"})
    assert done.returncode == 0, done.stderr
    assert (d / "MEMORY.md").read_text(encoding="utf-8").count("\n") <= 12
    assert git(d, "status", "--porcelain", "--untracked-files=all", ".") == ""
    checked = cli(d, "doctor")
    assert checked.exit_code == 0, checked.stdout + checked.stderr


def test_a_persons_heading_that_heads_no_index_line_is_not_taken_in(tmp_path):
    """helper-79: with every heading taken in as Claude Code's, a person's `## My draft: rotate KEY tomorrow`
    was committed under claude-code's name (and sync pushed it). Only a heading over index lines is the
    index's structure; any other is the person's, and the write refuses as before."""
    d, repo = _adopted(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    claude_appends(d, "\n## My draft: rotate the deploy key tomorrow")
    done = cli(d, "remember", "b_fact", "-d", "second")
    assert done.exit_code == 1 and "has uncommitted edits of yours" in done.stderr, done.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_title_above_the_block_stays_when_a_line_under_it_moves_into_the_block(tmp_path):
    """helper-79: a later run dropped `# Project memory` above the block once a line right under it moved
    into the block (the block counted as nothing under the title)."""
    d, repo = _adopted(tmp_path)
    assert cli(d, "index").exit_code == 0
    index = d / "MEMORY.md"
    text = index.read_text(encoding="utf-8")
    assert text.startswith("# Project memory\n\n<!-- memctl:index:begin -->")
    index.write_text(text.replace("\n\nNotes Claude Code keeps by hand stay as they are.\n", "\n"), encoding="utf-8")
    git(d, "add", "MEMORY.md")
    git(d, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qm", "the title and the block alone")
    claude_fact(d, "project_deploys", "Deploys", "Deploys go out on Tuesdays", "project", "x\n")
    index.write_text(index.read_text(encoding="utf-8").replace(
        "# Project memory\n", "# Project memory\n- [Deploys](project_deploys.md) — Deploys go out on Tuesdays\n"), encoding="utf-8")
    assert cli(d, "index").exit_code == 0
    after = index.read_text(encoding="utf-8")
    assert after.startswith("# Project memory\n") and after.count("(project_deploys.md)") == 1
