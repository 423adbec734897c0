"""Claude Code's dialect in Claude Code's directory (issue 24, point 1).

memctl writes a new fact there with exactly Claude Code's fields (top-level `name` as a title,
`description`, `type`), a file name in Claude Code's style and a body with **Why:** / **How to
apply:**; a pin on a file Claude Code wrote leaves the file byte for byte; what memctl keeps per fact
is in the sidecar, and survives Claude Code renaming the file. Facts are found by stem or title.
"""

from __future__ import annotations

from conftest import PINNED_NOW, cli, git
from memctl import fact
from memctl.claude_memory import SIDECAR
from test_claude_code_cycle import make_claude_dir

ENV = {"MEMCTL_NOW": PINNED_NOW}


def _adopted(tmp_path):
    d = make_claude_dir(tmp_path)
    assert cli(None, "init", str(d)).exit_code == 0
    return d


def test_a_new_fact_is_written_in_claude_codes_dialect(tmp_path):
    d = _adopted(tmp_path)
    done = cli(d, "remember", "デプロイ規則", "--type", "feedback", "-d", "Deploys only on Tuesdays after the suite passes",
               "--why", "a Friday deploy broke billing", "--how", "wait for Tuesday", "--importance", "0.9", env=ENV)
    assert done.exit_code == 0, done.stderr
    written = [p for p in d.glob("feedback_*.md") if p.name != "feedback_testing.md"]
    assert len(written) == 1
    text = written[0].read_text(encoding="utf-8")
    loaded = fact.load(written[0])
    assert list(loaded.front) == ["name", "description", "type"] and "metadata" not in text
    assert loaded.front == {"name": "デプロイ規則", "description": "Deploys only on Tuesdays after the suite passes",
                            "type": "feedback"}
    assert "**Why:** a Friday deploy broke billing" in text and "**How to apply:** wait for Tuesday" in text
    sidecar = (d / SIDECAR).read_text(encoding="utf-8")
    assert f"\t{written[0].name}\tデプロイ規則\timportance\t0.9\n" in sidecar
    assert cli(d, "show", "デプロイ規則").exit_code == 0 and cli(d, "show", written[0].stem).exit_code == 0
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
    checked = cli(d, "doctor", env=ENV)
    assert checked.exit_code == 0, checked.stdout + checked.stderr


def test_a_pin_never_touches_claude_codes_file_and_survives_a_rename(tmp_path):
    d = _adopted(tmp_path)
    before = (d / "feedback_testing.md").read_bytes()
    done = cli(d, "pin", "テスト方針", env=ENV)
    assert done.exit_code == 0, done.stderr
    assert (d / "feedback_testing.md").read_bytes() == before
    assert "\tfeedback_testing.md\tテスト方針\tpinned\ttrue\n" in (d / SIDECAR).read_text(encoding="utf-8")
    bundle = cli(d, "context", env=ENV).stdout
    assert "## Pinned facts" in bundle and "### feedback_testing.md" in bundle

    (d / "feedback_testing.md").rename(d / "feedback_database.md")  # Claude Code renames it
    bundle = cli(d, "context", env=ENV).stdout
    assert "### feedback_database.md" in bundle.split("## Pinned facts")[1]


def test_a_title_too_long_for_claude_code_is_refused(tmp_path):
    d = _adopted(tmp_path)
    head = git(d, "rev-parse", "HEAD")
    done = cli(d, "remember", "長" * 300, "--type", "feedback", "-d", "x", env=ENV)
    assert done.exit_code != 0 and "invalid fact title" in done.stderr and "(hint: " in done.stderr
    assert git(d, "rev-parse", "HEAD") == head and not (d / SIDECAR).exists()


def test_pin_and_a_metadata_update_leave_a_claude_fact_with_comments_and_quotes_byte_for_byte(tmp_path):
    """The file of a fact whose frontmatter memctl would write otherwise (a YAML comment, quoted values)
    was rewritten by `pin` and `remember --update --importance`: the comment dropped, the quotes gone,
    though all that changed went to the sidecar."""
    d = _adopted(tmp_path)
    path = d / "project_quoted.md"
    path.write_text('---\n# written by Claude Code\nname: "Quoted name"\ndescription: \'single quoted: value\'\n'
                    "type: project\n---\nbody\n", encoding="utf-8")
    before = path.read_bytes()
    for argv in (["pin", "Quoted name"], ["remember", "Quoted name", "--update", "--importance", "0.9"],
                 ["unpin", "Quoted name"]):
        done = cli(d, *argv, env=ENV)
        assert done.exit_code == 0, (argv, done.stderr)
        assert path.read_bytes() == before, argv
    sidecar = (d / SIDECAR).read_text(encoding="utf-8")
    assert "\tproject_quoted.md\tQuoted name\timportance\t0.9\n" in sidecar and sidecar.endswith("\tpinned\tnull\n")
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
    done = cli(d, "remember", "Quoted name", "--update", "-d", "a new description", env=ENV)  # a change of its own keys
    assert done.exit_code == 0 and fact.load(path).description == "a new description"


def test_unpin_and_an_update_change_a_claude_fact_that_has_its_own_metadata(tmp_path):
    """Review: the byte-for-byte shortcut skipped a file whose own `metadata:` wins over the sidecar,
    so `unpin` and `--importance` reported success and changed nothing."""
    import json

    d = _adopted(tmp_path)
    (d / "project_own.md").write_text("---\nname: own\ndescription: has its own metadata\ntype: project\n"
                                      "metadata:\n  importance: 0.2\n  pinned: true\n---\nbody\n", encoding="utf-8")
    assert cli(d, "unpin", "own", env=ENV).exit_code == 0
    assert cli(d, "remember", "own", "--update", "--importance", "0.9", env=ENV).exit_code == 0
    shown = json.loads(cli(d, "show", "own", "--json", env=ENV).stdout)
    assert shown["importance"] == 0.9 and not shown["metadata"].get("pinned")


SESSION_ID = "0b9c2f1e-1234-4abc-9def-0123456789ab"


def _as_claude_code_2_1_edits_it(path, name, fact_type, body):
    """What Claude Code 2.1 leaves when its Edit tool changes a memory file it has not stamped: `name`
    made a slug (a title in Japanese becomes ""), `type` moved under `metadata:` beside its own keys."""
    import json

    path.write_text(f'---\nname: "{name}"\ndescription: {json.dumps(fact.load(path).description, ensure_ascii=False)}\nmetadata:\n  node_type: memory\n'
                    f"  type: {fact_type}\n  originSessionId: {SESSION_ID}\n---\n\n{body}\n", encoding="utf-8")


def test_claude_code_2_1s_rewrite_keeps_the_title_and_memctls_writes_keep_its_keys(tmp_path):
    """Claude Code 2.1.197 rewrites the frontmatter of a memory file it edits: `name: デプロイ規則`
    became `name: ""`, and doctor then failed the store ("frontmatter has no 'name'", exit 1), `show
    デプロイ規則` exited 3; memctl's next pin or update dropped Claude Code's `node_type` and
    `originSessionId`."""
    import json

    d = _adopted(tmp_path)
    for title, fact_type, slug in (("デプロイ規則", "feedback", ""), ("Deploy rules", "project", "deploy-rules")):
        assert cli(d, "remember", title, "--type", fact_type, "-d", f"{title}: Tuesdays only", env=ENV).exit_code == 0
        assert cli(d, "pin", title, env=ENV).exit_code == 0
        path = d / json.loads(cli(d, "show", title, "--json", env=ENV).stdout)["path"]
        _as_claude_code_2_1_edits_it(path, slug, fact_type, "火曜日だけ。")
        checked = cli(d, "doctor", env=ENV)
        assert checked.exit_code == 0, checked.stdout + checked.stderr
        shown = json.loads(cli(d, "show", title, "--json", env=ENV).stdout)
        assert (shown["name"], shown["type"], shown["metadata"].get("pinned")) == (title, fact_type, True), shown
        assert f"{title}\t{fact_type}\t" in cli(d, "list", env=ENV).stdout
        assert f"### {path.name}" in cli(d, "context", env=ENV).stdout.split("## Pinned facts")[1]
        claude_codes = fact.load(path).front
        for args in (("remember", title, "--update", "--importance", "0.9"), ("unpin", title),
                     ("remember", title, "--update", "-d", f"{title}: Tuesdays and Thursdays")):
            done = cli(d, *args, env=ENV)
            assert done.exit_code == 0, done.stderr
        front = fact.load(path).front
        assert front == {**claude_codes, "description": f"{title}: Tuesdays and Thursdays"}, front
        shown = json.loads(cli(d, "show", title, "--json", env=ENV).stdout)
        assert (shown["importance"], shown["metadata"].get("pinned")) == (0.9, None), shown
        assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
        assert cli(d, "doctor", env=ENV).exit_code == 0


def test_a_fact_claude_code_2_1_wrote_keeps_its_metadata_through_forget_and_restore(tmp_path):
    d = _adopted(tmp_path)
    path = d / "feedback_no_force_push.md"
    path.write_text(f"---\nname: no-force-push\ndescription: main への force push はしない\nmetadata:\n  node_type: memory\n"
                    f"  type: feedback\n  originSessionId: {SESSION_ID}\n---\n\nmain への force push は禁止。\n", encoding="utf-8")
    claude_codes, forgot = fact.load(path).front, None
    for args in (("pin", "no-force-push"), ("forget", "no-force-push", "--reason", "test"), ("restore", "no-force-push")):
        done = cli(d, *args, env=ENV)
        forgot = done if args[0] == "forget" else forgot
        assert done.exit_code == 0, done.stderr
        assert "deleted" not in done.stderr, done.stderr  # (forget said its own archived file "was deleted")
    assert "no-force-push was pinned: context no longer includes it (hint: `memctl restore no-force-push`" in forgot.stderr
    assert fact.load(path).front == claude_codes
    assert cli(d, "doctor", env=ENV).exit_code == 0


def test_a_line_claude_code_appended_for_a_file_since_deleted_goes_with_memctl_index(tmp_path):
    """helper-52: doctor said "index line points at project_tmp.md, which is not a live fact (run `memctl
    index`)", and `memctl index` answered "up to date" and left it: the line is Claude Code's, below
    memctl's block, and only lines for live or archived facts were taken from there."""
    d = _adopted(tmp_path)
    (d / "project_tmp.md").write_text("---\nname: tmp\ndescription: 一時\ntype: project\n---\n", encoding="utf-8")
    with (d / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write("- [tmp](project_tmp.md) — 一時\n- [来週](project_next_week.md) — まだ書いていない\n")
    future = cli(d, "doctor", env=ENV)  # Claude Code's writes, taken in
    assert "project_next_week.md, which is not a live fact (no such file: remove the line by hand" in future.stdout
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""
    (d / "project_tmp.md").unlink()
    git(d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "Claude Code deleted it")
    assert "project_tmp.md, which is not a live fact" in cli(d, "doctor", env=ENV).stdout
    indexed = cli(d, "index", env=ENV)
    assert indexed.exit_code == 0 and "the line for project_tmp.md goes: the file was deleted" in indexed.stderr
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert "project_tmp.md" not in text and "feedback_testing.md" in text
    assert "(project_next_week.md)" in text  # (review) a file never written: a person's line for one to come stays
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""


def test_claude_code_rewriting_memory_md_from_a_copy_older_than_the_block_is_taken_in(tmp_path):
    """helper-52: Claude Code writes MEMORY.md whole from the copy it read; a copy from before memctl's
    block leaves out its markers and headings, and doctor called that "memctl's file has changes that
    are not committed (commit them ... or discard them)": the one advice loses a fact's line, the other
    Claude Code's new one."""
    d = _adopted(tmp_path)
    old = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert cli(d, "remember", "レビュー方針", "--type", "feedback", "-d", "PRではテストを見る", env=ENV).exit_code == 0
    assert "memctl:index:begin" in (d / "MEMORY.md").read_text(encoding="utf-8")
    (d / "user_editor.md").write_text("---\nname: editor\ndescription: Neovim\ntype: user\n---\n", encoding="utf-8")
    (d / "MEMORY.md").write_text(old.replace("<!-- memctl:index:begin -->\n", "").replace("<!-- memctl:index:end -->\n", "")
                                 + "- [editor](user_editor.md) — Neovim\n", encoding="utf-8")
    checked = cli(d, "doctor", env=ENV)
    assert "not committed" not in checked.stdout and "is not listed in MEMORY.md (run `memctl index`)" in checked.stdout
    assert git(d, "status", "--porcelain", "--untracked-files=all") == ""  # taken in, as Claude Code's
    assert cli(d, "index", env=ENV).exit_code == 0 and cli(d, "doctor", env=ENV).exit_code == 0
    text = (d / "MEMORY.md").read_text(encoding="utf-8")
    assert "(user_editor.md)" in text and "[レビュー方針](" in text


def test_a_fact_claude_code_2_1_slugged_then_renamed_keeps_its_title_and_pin(tmp_path):
    """helper-55: the sidecar follows a file Claude Code renames by the fact's title, but a 2.1 file's
    `name` is only the slug of it: the renamed fact lost its title, its pin and its importance."""
    import json

    d = _adopted(tmp_path)
    assert cli(d, "remember", "Deploy rules", "--type", "project", "-d", "deploy on tuesdays", env=ENV).exit_code == 0
    assert cli(d, "pin", "Deploy rules", env=ENV).exit_code == 0
    assert cli(d, "remember", "Deploy rules", "--update", "--importance", "0.8", env=ENV).exit_code == 0
    path = d / json.loads(cli(d, "show", "Deploy rules", "--json", env=ENV).stdout)["path"]
    _as_claude_code_2_1_edits_it(path, "deploy-rules", "project", "Tuesdays only.")
    path.rename(d / "project_deployment.md")  # Claude Code renames it, and its index line
    (d / "MEMORY.md").write_text((d / "MEMORY.md").read_text(encoding="utf-8").replace(f"({path.name})", "(project_deployment.md)"),
                                 encoding="utf-8")
    shown = json.loads(cli(d, "show", "Deploy rules", "--json", env=ENV).stdout)
    assert (shown["name"], shown["importance"], shown["metadata"].get("pinned")) == ("Deploy rules", 0.8, True), shown
    assert "### project_deployment.md" in cli(d, "context", env=ENV).stdout.split("## Pinned facts")[1]


def test_a_title_with_a_slash_names_its_fact_in_every_command_but_no_path_does(tmp_path):
    """helper-57: Claude Code titles a fact "CI/CD の手順"; `list` printed it, `forget` took it, and show,
    pin, log, restore and remember --update refused it ("invalid fact name ... not a path", exit 2)."""
    d = _adopted(tmp_path)
    (d / "reference_cicd.md").write_text("---\nname: CI/CD の手順\ndescription: CIはGitHub Actions\ntype: reference\n---\nx\n",
                                         encoding="utf-8")
    with (d / "MEMORY.md").open("a", encoding="utf-8") as handle:  # as Claude Code writes it
        handle.write("- [CI/CD の手順](reference_cicd.md) — CIはGitHub Actions\n")
    assert cli(d, "doctor", env=ENV).exit_code == 0  # taken in
    for args in (("show", "CI/CD の手順"), ("pin", "CI/CD の手順"), ("log", "CI/CD の手順"),
                 ("remember", "CI/CD の手順", "--update", "-d", "CIはGitHub Actions、CDはArgo CD"),
                 ("forget", "CI/CD の手順", "--reason", "移行した"), ("restore", "CI/CD の手順"),
                 ("remember", "API/v2 の設計", "-d", "v2はRESTのまま", "--type", "project"), ("show", "API/v2 の設計"),
                 ("forget", "CI/CD の手順", "--reason", "また移行"),  # (review) a title that reads as the archived file's path:
                 ("remember", "archive/reference_cicd", "-d", "アーカイブの手順", "--type", "reference")):
        done = cli(d, *args, env=ENV)
        assert done.exit_code == 0, (args, done.stderr)
    assert "CDはArgo CD" in cli(d, "show", "reference_cicd", env=ENV).stdout
    assert not any(p.is_dir() for p in d.iterdir() if p.name not in (".git", ".memctl", "archive"))  # no folder made
    for bad in ("../etc", "/etc/passwd", "CI//CD", "a/./b"):
        done = cli(d, "show", bad, env=ENV)
        assert done.exit_code == 2 and "not a path" in done.stderr, (bad, done.stderr)
    assert cli(d, "doctor", env=ENV).exit_code == 0


def test_the_pinned_warning_of_forget_gives_a_restore_that_runs_for_a_title_starting_with_a_dash(tmp_path):
    """Review: a Claude Code fact titled `--all`, pinned and forgotten: the hint said `memctl restore --all`,
    which the CLI reads as an option. The stem is given instead."""
    d = _adopted(tmp_path)
    (d / "project_dash.md").write_text("---\nname: --all\ndescription: ダッシュの題\ntype: project\n---\nbody\n", encoding="utf-8")
    with (d / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write("- [--all](project_dash.md) — ダッシュの題\n")
    assert cli(d, "pin", "project_dash", env=ENV).exit_code == 0
    done = cli(d, "forget", "project_dash", "--reason", "r", env=ENV)
    assert done.exit_code == 0 and "(hint: `memctl restore project_dash` brings it back, pinned)" in done.stderr, done.stderr
    assert cli(d, "restore", "project_dash", env=ENV).exit_code == 0
