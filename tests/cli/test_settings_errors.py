"""A value of the wrong kind inside a section of memctl.toml: one line from each command that reads it, exit 2,
and doctor names it (helper-72: `[embedding] thresholds = 1` was a traceback in every write, `[recall]
half_life_days = "x"` in recall and context, and doctor said the store was clean)."""

from __future__ import annotations

import pytest

from conftest import memctl

CASES = [
    ('[embedding]\nthresholds = 1', ("remember", "recall"), "embedding.thresholds must be a table ([embedding.thresholds]), not 1"),
    ('[embedding]\nsimilar = "x"', ("remember", "recall"), "embedding.similar must be a table ([embedding.similar]), not 'x'"),
    ('[embedding.thresholds]\n"e5-small-q4" = 5', ("remember", "recall"), "[embedding.thresholds] e5-small-q4 must be a finite number from -1 to 1, not 5"),
    ('[embedding]\nmodel = [1]', ("remember", "recall"), "[embedding] model must be a text, not [1]"),
    ('[recall]\nhalf_life_days = "x"', ("recall",), "[recall] half_life_days must be a finite number from 0.001, not 'x'"),
    ('[recall]\nstale_days = -5', ("context",), "[recall] stale_days must be a finite number from 0, not -5"),
    ('[recall]\nweights = 1', ("recall",), "recall.weights must be a table ([recall.weights]), not 1"),
    ('[recall.weights]\nrelevance = nan', ("recall",), "[recall.weights] relevance must be a finite number, not nan"),
    ('[recall]\nwindows = "no"', ("recall",), "[recall] windows must be true or false, not 'no'"),
    ('[import]\nredact_patterns = ["a{99999999999}"]', ("import",),
     "[import] redact_patterns: 'a{99999999999}' is not a regular expression (the repetition number is too large)"),
    ('[import]\nmax_file_mb = nan', ("import",), "[import] max_file_mb must be a finite number from 0.001 to 1e+06, not nan"),
]
RUN = {"remember": ("remember", "a1", "-d", "a fact"), "recall": ("recall", "deploy"), "context": ("context", "--query", "deploy"),
       "import": ("episode", "import", "claude-code", "transcript.jsonl")}


@pytest.mark.parametrize("text, commands, said", CASES, ids=[c[0].replace("\n", " ") for c in CASES])
def test_a_value_of_the_wrong_kind_is_one_line_from_its_readers_and_doctor_names_it(root, text, commands, said):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + text + "\n")
    env = {"MEMCTL_NO_SERVER": "1"}
    (root / "transcript.jsonl").write_text("{}\n", encoding="utf-8")
    for command in commands:
        result = memctl(root, *RUN[command], env=env)
        assert (result.returncode, result.stdout) == (2, ""), (command, result.stderr)
        assert "Traceback" not in result.stderr and said in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (root / "memory" / "a1.md").exists()
    doctor = memctl(root, "doctor", env=env)
    assert doctor.returncode == 1 and f"memctl.toml: error: {said}" in doctor.stdout + doctor.stderr


@pytest.mark.parametrize("value, refused", [('""', True), ('"  "', True), ('"."', True), ('"<>"', True),
                                            ('"Deploy Bot <ci>"', False), ('"a<b>@c"', False)])
def test_a_git_identity_git_would_refuse_is_named_by_doctor_and_one_git_takes_still_loads(root, value, refused):
    """helper-72: `[git] author_name = ""` loaded, then every commit of a cron job (no git identity of its own)
    failed with git's "empty ident name" while doctor said the store was clean. helper-73: refusing it at load
    stopped every command, and refused names git takes (it drops `<` and `>`)."""
    text = (root / "memctl.toml").read_text(encoding="utf-8")
    lines = [f"author_name = {value}" if line.startswith("author_name =") else line for line in text.splitlines()]
    (root / "memctl.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert memctl(root, "list").returncode == 0  # it loads: commits made as the user's own git identity still work
    doctor = memctl(root, "doctor")
    said = "memctl.toml: error: [git] author_name"
    assert (doctor.returncode, said in doctor.stdout) == ((1, True) if refused else (0, False)), doctor.stdout


@pytest.mark.parametrize("value", ['""', '"."'])
def test_a_commit_that_fails_on_an_author_name_git_refuses_names_that_setting(root, value):
    """A tester: `author_name = ""`, then `state update` from cron (no git identity) said `git commit-tree
    failed: fatal: empty ident name ... (hint: check git status ...)`. The hint names [git] author_name
    (doctor's check: docs/FORMAT.md says such a name loads and doctor names it)."""
    text = (root / "memctl.toml").read_text(encoding="utf-8")
    lines = [f"author_name = {value}" if line.startswith("author_name =") else line for line in text.splitlines()]
    (root / "memctl.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"GIT_AUTHOR_NAME": "", "GIT_COMMITTER_NAME": "", "GIT_AUTHOR_EMAIL": "", "GIT_COMMITTER_EMAIL": ""}
    done = memctl(root, "state", "update", env=env)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "git commit-tree failed: fatal: " in done.stderr and (f"(hint: memctl.toml's [git] author_name {value.strip(chr(34))!r} is no name git takes: "
                                                   'set one (author_name = "memctl", the default), or give git an identity (git config user.name))') in done.stderr


@pytest.mark.parametrize("declaration, said", [
    ('columns = ["a\\tb"]', "[ledgers.x] invalid column name 'a\\tb'"),
    ('columns = ["a", "a"]', "[ledgers.x] column 'a' is named twice"),
    ('columns = [""]', "[ledgers.x] invalid column name ''"),
    ('columns = ["a"]\nunique = "b"', "[ledgers.x] unique column 'b' is not one of the columns (a)"),
])
def test_a_hand_written_ledger_declaration_gets_the_checks_of_ledger_create(root, declaration, said):
    """helper-72: `columns = ["a\\tb"]` wrote a header of two fields that `ledger check` called clean, `["a", "a"]`
    wrote each value twice, and `unique = "b"` refused every append while doctor said the store was clean."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f"\n[ledgers.x]\n{declaration}\n")
    appended = memctl(root, "ledger", "append", "x", "a=1")
    on_append = "unique column 'b' is not a column of x (a)" if "unique" in declaration else f"memctl.toml: {said}"
    assert appended.returncode == 2 and appended.stderr.startswith(f"memctl: error: {on_append}"), appended.stderr
    assert not (root / "ledgers" / "x.tsv").exists()
    doctor = memctl(root, "doctor")
    assert doctor.returncode == 1 and f"memctl.toml: error: {said}" in doctor.stdout, doctor.stdout


def test_a_hand_written_japanese_column_name_is_still_the_hands_to_choose(root):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[ledgers.themes]\ncolumns = ["日付", "テーマ"]\nunique = "テーマ"\n')
    assert memctl(root, "ledger", "append", "themes", "日付=2026-05-01", "テーマ=デプロイ").returncode == 0
    assert (root / "ledgers" / "themes.tsv").read_text(encoding="utf-8").endswith("2026-05-01\tデプロイ\n")


def test_an_edit_of_a_crlf_memctl_toml_keeps_its_line_ends(root, tmp_path):
    """helper-72: `ledger create`, `source add` and `source remove` on a memctl.toml saved on Windows rewrote
    every line of it (LF), where FORMAT.md says memctl only appends or replaces its own lines."""
    from conftest import git

    toml = root / "memctl.toml"
    toml.write_bytes(toml.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "saved on Windows")
    before = toml.read_bytes()
    assert memctl(root, "ledger", "create", "notes", "--columns", "a,b").returncode == 0
    assert memctl(root, "source", "add", "notes", str(tmp_path), "-d", "notes").returncode == 0
    after = toml.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == after.count(b"\r\n")
    assert git(root, "diff", "--numstat", "HEAD~2", "HEAD", "--", "memctl.toml").split("\t")[1] == "0"  # nothing removed
    assert memctl(root, "source", "remove", "notes").returncode == 0
    assert toml.read_bytes().startswith(before) and b"[sources" not in toml.read_bytes() and b"\n" not in toml.read_bytes().replace(b"\r\n", b"")
    assert memctl(root, "ledger", "append", "notes", "a=1", "b=2").returncode == 0


def test_values_that_worked_before_still_do(root):
    """helper-73: `[recall] windows = 0` (off) and a negative weight were taken before the values were checked."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[recall]\nwindows = 0\n\n[recall.weights]\nfrequency = -0.05\nrelevance = \"0.6\"\n")
    assert memctl(root, "remember", "deploy", "-d", "deploy steps for prod").returncode == 0
    found = memctl(root, "recall", "deploy", "--mode", "keyword")
    assert found.returncode == 0 and "deploy" in found.stdout, found.stderr
    assert memctl(root, "doctor").returncode == 0
