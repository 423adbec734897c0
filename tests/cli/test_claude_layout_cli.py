"""memctl works unchanged on a Claude Code auto-memory directory and on seed-style files."""

from __future__ import annotations

import json

from conftest import cli, git

CLAUDE_INDEX = """# Memory

Notes for this project.

- [User role](user_role.md) — The user is a data scientist
- [Testing feedback](feedback_testing.md) — Integration tests must hit a real database

Trailing prose stays.
"""


def no_repository(monkeypatch) -> None:
    """A Claude Code directory never `memctl init`-ed has no repository: its writes say that they do not commit
    (else they are refused: exit 0 means committed, tests/test_commit_or_refuse.py)."""
    monkeypatch.setenv("MEMCTL_NO_COMMIT", "1")


def _claude_dir(tmp_path):
    d = tmp_path / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text(CLAUDE_INDEX, encoding="utf-8")
    (d / "user_role.md").write_text(
        "---\nname: user_role\ndescription: The user is a data scientist\ntype: user\n---\nFocus on observability.\n", encoding="utf-8")
    (d / "feedback_testing.md").write_text(
        "---\nname: feedback_testing\ndescription: Integration tests must hit a real database\ntype: feedback\n---\n"
        "Don't mock the database.\n**Why:** a mocked test hid a broken migration.\n**How to apply:** use the docker db.\n", encoding="utf-8")
    return d


def test_reads_claude_code_directory_as_is(tmp_path, monkeypatch):
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    rows = json.loads(cli(d, "list", "--json").stdout)
    assert [(r["name"], r["type"]) for r in rows] == [("feedback_testing", "feedback"), ("user_role", "user")]
    assert "Focus on observability." in cli(d, "show", "user_role").stdout
    assert cli(d, "index", "--check").exit_code == 0
    r = cli(d, "doctor")
    assert r.exit_code == 0, r.stdout
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before


def test_remember_into_claude_code_directory_keeps_hand_text(tmp_path, monkeypatch):
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    r = cli(d, "remember", "project_deadline", "--type", "project", "--description", "リリースは12月5日")
    assert r.exit_code == 0, r.stderr
    assert (d / "project_deadline.md").exists()
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert text.startswith("# Memory\n\nNotes for this project.\n\n<!-- memctl:index:begin -->\n")
    assert text.endswith("<!-- memctl:index:end -->\n\nTrailing prose stays.\n")
    assert "- [project_deadline](project_deadline.md) — リリースは12月5日" in text  # Claude Code's line style
    assert "- [User role](user_role.md) — The user is a data scientist" in text  # hand titles and hooks kept
    assert text.count("user_role.md") == 1  # one link, listed once
    assert cli(d, "index", "--check").exit_code == 0
    # the original facts are untouched
    assert (d / "user_role.md").read_text(encoding="utf-8").endswith("type: user\n---\nFocus on observability.\n")


def test_seed_style_file_found_by_name_and_stem(root):
    seed = (root / "memory" / "feedback_zenn_rate_limit.md")
    seed.write_text(
        "---\nname: feedback-zenn-rate-limit\ndescription: Zenn投稿は1日1件まで。書籍CTAを全記事に含める\nmetadata:\n  type: feedback\n---\nbody\n",
        encoding="utf-8")
    assert cli(root, "index").exit_code == 0
    assert git(root, "status", "--porcelain") == ""  # the file went with the index that links it
    assert "- [feedback-zenn-rate-limit](feedback_zenn_rate_limit.md) — Zenn投稿は1日1件まで" in (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    for key in ("feedback-zenn-rate-limit", "feedback_zenn_rate_limit"):
        r = cli(root, "show", key, "--json")
        assert r.exit_code == 0 and json.loads(r.stdout)["path"] == "memory/feedback_zenn_rate_limit.md"
    # NAME matches an existing fact by its name: refused, not a second file
    r = cli(root, "remember", "feedback-zenn-rate-limit", "--description", "x")
    assert r.exit_code == 1 and "feedback_zenn_rate_limit.md" in r.stderr
    r = cli(root, "remember", "feedback-zenn-rate-limit", "--update", "--importance", "0.9")
    assert r.exit_code == 0 and r.stdout == "memory/feedback_zenn_rate_limit.md\n"
    r = cli(root, "forget", "feedback-zenn-rate-limit", "--reason", "policy changed")
    assert r.stdout == "memory/archive/feedback_zenn_rate_limit.md\n"
    assert cli(root, "doctor").exit_code == 0


def test_rich_table_aligns_full_width_text(root, monkeypatch):
    from rich.cells import cell_len

    cli(root, "remember", "ja", "--description", "日本語の説明文はここにあります")
    cli(root, "remember", "en", "--description", "An English description")
    r = cli(root, "list", env={"MEMCTL_FORCE_TTY": "1", "COLUMNS": "160"})
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    widths = {cell_len(l) for l in lines}
    assert len(widths) == 1, lines
    assert any("日本語の説明文はここにあります" in l for l in lines)


def test_caches_in_a_claude_code_directory_never_show_in_git_status(tmp_path):
    """memctl's .memctl/ inside someone else's repository ignores itself."""
    d = _claude_dir(tmp_path)
    repo = tmp_path / "projects"
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "claude memory")
    assert cli(d, "list", "--json").exit_code == 0
    assert cli(d, "recall", "database").exit_code == 0
    assert (d / ".memctl" / "facts.json").exists()  # the caches are there ...
    status = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert ".memctl" not in status, status  # ... and invisible to git (the access log is data: it shows)
    assert (d / ".memctl" / ".gitignore").read_text(encoding="utf-8").endswith("\n*\n")


def test_a_file_name_with_spaces_keeps_a_working_index_link(tmp_path, monkeypatch):
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    (d / "my note.md").write_text("---\nname: my note\ndescription: 空白のあるファイル名\ntype: project\n---\nbody\n",
                                  encoding="utf-8")
    with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write("- [My note](my%20note.md) — 空白のあるファイル名\n")
    assert cli(d, "index", "--check").exit_code == 0  # the %20 link is read as the file
    r = cli(d, "remember", "project_x", "--type", "project", "--description", "another fact")
    assert r.exit_code == 0, r.stderr
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert "- [My note](<my note.md>) — 空白のあるファイル名" in text  # CommonMark's form for spaces
    r = cli(d, "index", "--check")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert cli(d, "doctor").exit_code == 0
    assert "空白のあるファイル名" in cli(d, "show", "my note").stdout


def test_a_memctl_toml_appearing_in_a_claude_code_directory_keeps_it_one(tmp_path, monkeypatch):
    """Episodes and ledgers declare themselves in memctl.toml: the facts must stay where they are."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    assert cli(d, "episode", "add", "Chose plain files", "--type", "decision").exit_code == 0
    assert cli(d, "ledger", "create", "themes", "--columns", "date,theme").exit_code == 0
    assert (d / "memctl.toml").exists() and not (d / "memory").exists()
    rows = json.loads(cli(d, "list", "--json").stdout)
    assert [r["name"] for r in rows] == ["feedback_testing", "user_role"]
    assert cli(d, "show", "user_role").exit_code == 0
    r = cli(d, "doctor")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert cli(d, "ledger", "append", "themes", "date=2026-11-29", "theme=x").exit_code == 0  # declared: found


def test_hand_lines_with_spaces_move_into_the_block_and_leave_with_forget(tmp_path, monkeypatch):
    no_repository(monkeypatch)
    for link in ("<my note.md>", "my%20note.md"):
        d = _claude_dir(tmp_path / link.strip("<>").replace("%", "_"))
        (d / "my note.md").write_text("---\nname: my note\ndescription: 空白\ntype: project\n---\nbody\n", encoding="utf-8")
        with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
            handle.write(f"- [My note]({link}) — 空白\n")
        assert cli(d, "index").exit_code == 0
        text = (d / "MEMORY.md").read_text(encoding="utf-8")
        assert text.count("my note.md") == 1 and "(<my note.md>)" in text, text  # once, in the block
        assert link not in text or link == "<my note.md>"
        assert cli(d, "forget", "my note", "--reason", "test").exit_code == 0
        r = cli(d, "index", "--check")
        assert r.exit_code == 0, r.stdout + r.stderr
        assert "my note.md" not in (d / "MEMORY.md").read_text(encoding="utf-8")


def test_a_byte_order_mark_before_the_first_index_line_does_not_list_its_fact_twice(tmp_path, monkeypatch):
    """An editor on Windows saves MEMORY.md with a BOM: its first line was not read as an index line, so doctor
    said the fact was not listed, and the next write listed it a second time in the block."""
    no_repository(monkeypatch)
    d = tmp_path / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_bytes("\ufeff- [Deploy rule](deploy_rule.md) — デプロイは火曜日だけ\n".encode("utf-8"))
    (d / "deploy_rule.md").write_text("---\nname: Deploy rule\ndescription: デプロイは火曜日だけ\ntype: project\n---\n\nx\n",
                                      encoding="utf-8")
    assert cli(d, "doctor").exit_code == 0
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    assert cli(d, "remember", "lunch", "-t", "project", "-d", "Team lunch is on Fridays", env=at).exit_code == 0
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert text.count("(deploy_rule.md)") == 1 and "\ufeff" not in text, text
    assert cli(d, "doctor").exit_code == 0


def test_a_fact_titled_like_a_passage_is_still_shown_and_marked_used_by_its_title(tmp_path, monkeypatch):
    """`show` and `used` read PATH:START-END as a document's lines: a Claude Code title such as `Standup:9`
    named no document and was refused, though a fact has that name."""
    no_repository(monkeypatch)
    d = tmp_path / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "standup.md").write_text("---\nname: Standup:9\ndescription: 朝会は9時から\ntype: project\n---\n\nx\n",
                                  encoding="utf-8")
    (d / "MEMORY.md").write_text("- [Standup:9](standup.md) — 朝会は9時から\n", encoding="utf-8")
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}
    shown = cli(d, "show", "Standup:9", env=at)
    assert shown.exit_code == 0 and "朝会は9時から" in shown.stdout, shown.stderr
    assert json.loads(cli(d, "used", "Standup:9", "--json", env=at).stdout) == {"used": ["Standup:9"]}
    assert cli(d, "show", "notes/x.md:1-2", env=at).exit_code == 1  # a passage still: in no declared source


def test_a_markdown_file_in_a_subfolder_is_no_uncommitted_fact_to_doctor(tmp_path):
    """doctor called an uncommitted `notes/idea.md` in a Claude Code directory "a new file that is not
    committed yet" (an error): it is no fact (facts are the files at the top, for Claude Code too)."""
    d = _claude_dir(tmp_path)
    git(d, "init", "-q")
    git(d, "add", "-A")
    git(d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "claude memory")
    (d / "notes").mkdir()
    (d / "notes" / "idea.md").write_text("---\nname: idea\ndescription: 下書きの案\ntype: project\n---\nbody\n",
                                         encoding="utf-8")
    r = cli(d, "doctor", "--json")
    assert r.exit_code == 0, r.stdout
    found = [p for p in json.loads(r.stdout)["problems"] if p["path"] == "notes/idea.md"]
    assert [(p["severity"], p["code"]) for p in found] == [("warning", "uncommitted")]
    assert found[0]["message"].startswith("not read as a fact (facts are the .md files at the top of the directory")
    assert [row["name"] for row in json.loads(cli(d, "list", "--json").stdout)] == ["feedback_testing", "user_role"]


def test_a_name_two_files_share_is_refused_not_resolved_to_the_first(tmp_path, monkeypatch):
    """Two Claude Code facts titled `テスト方針`: `forget テスト方針` archived the first by file name, unasked
    (show and pin took it too). Now the name is refused with both files named; the stem still works."""
    no_repository(monkeypatch)
    d = tmp_path / "memory"
    d.mkdir()
    for stem, desc, kind in (("feedback_testing", "統合テストは実DBに当てる", "feedback"), ("project_testing", "E2Eテストは夜間のみ", "project")):
        (d / f"{stem}.md").write_text(f"---\nname: テスト方針\ndescription: {desc}\ntype: {kind}\n---\nbody\n", encoding="utf-8")
    (d / "MEMORY.md").write_text("- [テスト方針](feedback_testing.md) — x\n- [テスト方針](project_testing.md) — y\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    for args in (["forget", "テスト方針", "--reason", "古い"], ["show", "テスト方針"], ["pin", "テスト方針"]):
        done = cli(d, *args)
        assert done.exit_code == 2, (args, done.stderr)
        assert "name 'テスト方針' is used by 2 facts: feedback_testing.md, project_testing.md" in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before
    assert cli(d, "forget", "project_testing", "--reason", "古い").exit_code == 0
    assert "統合テストは実DBに当てる" in cli(d, "show", "テスト方針").stdout  # one fact has the name now


def test_a_title_whose_file_name_another_fact_has_gets_a_file_of_its_own(tmp_path, monkeypatch):
    """Claude Code style file names come from the title's ASCII words: `testing テスト` made
    feedback_testing.md, Claude Code's own fact, and overwrote it (exit 0); two long titles that differ
    after the 60th character made one file. Each new fact now takes a name no file has (`_2`, `_3`...)."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    before = (d / "feedback_testing.md").read_bytes()
    r = cli(d, "remember", "testing テスト", "-t", "feedback", "-d", "ユニットテストは pytest -x で走らせる")
    assert r.exit_code == 0, r.stderr
    assert (d / "feedback_testing.md").read_bytes() == before
    assert "name: testing テスト" in (d / "feedback_testing_2.md").read_text(encoding="utf-8")
    long = "Deployment checklist for the production cluster in region us-east-1, part "
    for part in ("one", "two"):
        assert cli(d, "remember", long + part, "-t", "project", "-d", f"Part {part}: a step of its own").exit_code == 0
    names = [row["name"] for row in json.loads(cli(d, "list", "--json").stdout)]
    assert {long + "one", long + "two", "testing テスト", "feedback_testing"} <= set(names), names
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert text.count("(feedback_testing.md)") == 1 and "(feedback_testing_2.md)" in text


def test_the_file_name_remember_and_list_print_names_the_fact(tmp_path, monkeypatch):
    """`remember` printed feedback_xxxxxxxx.md and `list` showed it, and `show feedback_xxxxxxxx.md` said
    "no fact named" with a hint that pointed back at the same file name."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    r = cli(d, "remember", "デプロイ規則", "-t", "feedback", "-d", "金曜日にはデプロイしない")
    assert r.exit_code == 0 and r.stdout.startswith("feedback_") and r.stdout.endswith(".md\n"), r.stdout
    file_name = r.stdout.strip()
    assert "name: デプロイ規則" in cli(d, "show", file_name).stdout
    assert cli(d, "show", "user_role.md").stdout.startswith("---\nname: user_role\n")
    assert cli(d, "forget", file_name, "--reason", "古い").exit_code == 0
    assert "name: デプロイ規則" in cli(d, "show", file_name).stdout  # the archived one, by the same file name
    assert cli(d, "restore", file_name).exit_code == 0 and (d / file_name).exists()


def test_a_topic_file_without_frontmatter_is_claude_codes_note_read_as_a_fact(tmp_path, monkeypatch):
    """Claude Code's docs show plain topic files (`debugging.md`) linked from MEMORY.md. Every command
    warned "no YAML frontmatter", doctor exited 1 forever on the index line that links it (which `memctl
    index` did not mend), and recall could not find its text. It is read as a fact now, named by its
    stem and described by its heading; its bytes are never changed by reading or by another write."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    note = "# Staging notes\n\nThe staging server needs the VPN first; ssh as deploy.\n"
    (d / "debugging.md").write_text(note, encoding="utf-8")
    with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write("- [Staging notes](debugging.md) — staging, VPN\n")
    doctor = cli(d, "doctor")
    assert doctor.exit_code == 0 and "debugging.md" not in doctor.stdout + doctor.stderr, doctor.stdout + doctor.stderr
    found = cli(d, "recall", "staging server VPN", "--json")
    assert found.exit_code == 0 and json.loads(found.stdout)[0]["path"] == "debugging.md", found.stderr
    assert found.stderr == ""
    assert cli(d, "remember", "project_deadline", "-t", "project", "-d", "リリースは12月5日").exit_code == 0
    assert "- [Staging notes](debugging.md) — staging, VPN" in (d / "MEMORY.md").read_text(encoding="utf-8")
    assert (d / "debugging.md").read_text(encoding="utf-8") == note
    assert cli(d, "doctor").exit_code == 0


def test_only_a_topic_file_memory_md_links_is_read_without_frontmatter(tmp_path, monkeypatch):
    """Review: every top-level .md became a fact — CLAUDE.md, an empty file — and `memctl index` listed
    them in MEMORY.md, which Claude Code loads each session. Only the topic files MEMORY.md links are read
    so; a note Claude Code writes first and links after is found once linked; consolidate merges none."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    (d / "CLAUDE.md").write_text("# Project rules\n\nUse pnpm.\n", encoding="utf-8")
    (d / "empty.md").write_text("\n", encoding="utf-8")
    (d / "staging.md").write_text("# Staging notes\n\nThe staging server needs the VPN first.\n", encoding="utf-8")
    assert cli(d, "recall", "staging server VPN").exit_code == 1  # not linked yet: no fact
    with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write("- [Staging notes](staging.md) — staging, VPN\n")
    found = cli(d, "recall", "staging server VPN", "--json")
    assert found.exit_code == 0 and json.loads(found.stdout)[0]["path"] == "staging.md", found.stderr
    names = [row["name"] for row in json.loads(cli(d, "list", "--json").stdout)]
    assert "staging" in names and "CLAUDE" not in names and "empty" not in names, names
    assert cli(d, "index").exit_code == 0
    memory = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert "(CLAUDE.md)" not in memory and "(empty.md)" not in memory
    (d / "staging2.md").write_text("# Staging notes\n\nThe staging server needs the VPN first.\n", encoding="utf-8")
    with open(d / "MEMORY.md", "a", encoding="utf-8") as handle:
        handle.write("- [Staging notes 2](staging2.md) — staging, VPN\n")
    assert cli(d, "consolidate", "--apply").exit_code in (0, 1)
    assert (d / "staging.md").exists() and (d / "staging2.md").exists()
    assert (d / "staging.md").read_text(encoding="utf-8").startswith("# Staging notes")


def test_a_file_without_frontmatter_in_memctls_own_store_is_still_named_as_broken(root):
    (root / "memory" / "plain.md").write_text("# Notes\n\ntext\n", encoding="utf-8")
    r = cli(root, "doctor")
    assert r.exit_code == 1 and "memory/plain.md:1: error: no YAML frontmatter" in r.stdout, r.stdout


def test_a_title_that_reads_as_a_live_facts_is_refused_in_a_claude_code_directory(tmp_path, monkeypatch):
    """A tester: `デプロイの時間帯 ` (a trailing space), `ﾃﾞﾌﾟﾛｲの時間帯` and `Test Policy` beside `test policy` were
    each a new fact, and MEMORY.md showed two lines no reader tells apart."""
    no_repository(monkeypatch)
    d = _claude_dir(tmp_path)
    for title in ("デプロイの時間帯", "test policy"):
        assert cli(d, "remember", title, "--type", "project", "--description", f"{title}の説明").exit_code == 0
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    for title, twin in (("デプロイの時間帯 ", "デプロイの時間帯"), ("ﾃﾞﾌﾟﾛｲの時間帯", "デプロイの時間帯"),
                        ("Test  Policy", "test policy"), ("user role", None)):
        r = cli(d, "remember", title, "--type", "project", "--description", f"別の説明 {title}")
        if twin is None:  # user_role is a file stem, not a title: another title
            assert r.exit_code == 0, r.stderr
            continue
        assert r.exit_code == 1, (title, r.stderr)
        assert r.stderr.startswith(f"memctl: error: a fact titled {twin!r} exists ("), r.stderr
        assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name in before} == before
