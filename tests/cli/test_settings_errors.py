"""A value of the wrong kind inside a section of memctl.toml: one line from each command that reads it, exit 2,
and doctor names it (helper-72: `[embedding] thresholds = 1` was a traceback in every write, `[recall]
half_life_days = "x"` in recall and context, and doctor said the store was clean)."""

from __future__ import annotations

import pytest

from conftest import memctl

CASES = [
    ('[embedding]\nthresholds = 1', ("remember", "recall"), "embedding.thresholds must be a table ([embedding.thresholds]), not 1"),
    ('[embedding]\nsimilar = "x"', ("remember", "recall"), "embedding.similar must be a table ([embedding.similar]), not 'x'"),
    ('[embedding.thresholds]\n"e5-small-q4" = 5', ("remember", "recall"), "[embedding.thresholds] e5-small-q4 must be a number from -1 to 1, not 5"),
    ('[embedding]\nmodel = [1]', ("remember", "recall"), "[embedding] model must be a text, not [1]"),
    ('[recall]\nhalf_life_days = "x"', ("recall",), "[recall] half_life_days must be a number from 0.001, not 'x'"),
    ('[recall]\nstale_days = -5', ("context",), "[recall] stale_days must be a number from 0, not -5"),
    ('[recall]\nweights = 1', ("recall",), "recall.weights must be a table ([recall.weights]), not 1"),
    ('[recall.weights]\nrelevance = nan', ("recall",), "[recall.weights] relevance must be a number from 0, not nan"),
    ('[recall]\nwindows = "no"', ("recall",), "[recall] windows must be true or false, not 'no'"),
    ('[import]\nredact_patterns = ["a{99999999999}"]', ("import",),
     "[import] redact_patterns: 'a{99999999999}' is not a regular expression (the repetition number is too large)"),
    ('[import]\nmax_file_mb = nan', ("import",), "[import] max_file_mb must be a number from 0.001 to 1e+06, not nan"),
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


@pytest.mark.parametrize("value", ['""', '"  "', '"<>"', '"a<b>@c"', '"a\\nb"'])
def test_a_git_identity_git_would_refuse_is_refused_when_memctl_toml_loads(root, value):
    """helper-72: `[git] author_name = ""` loaded, then every commit of a cron job (no git identity of its own)
    failed with git's "empty ident name", and doctor said the store was clean."""
    text = (root / "memctl.toml").read_text(encoding="utf-8")
    for key in ("author_name", "author_email"):
        lines = [f"{key} = {value}" if line.startswith(f"{key} =") else line for line in text.splitlines()]
        (root / "memctl.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = memctl(root, "remember", "a1", "-d", "a fact")
        assert result.returncode == 2 and f"[git] {key} must be a non-empty text without <, > or control characters" in result.stderr
        assert not (root / "memory" / "a1.md").exists()
    (root / "memctl.toml").write_text(text, encoding="utf-8")


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
    assert appended.returncode == 2 and appended.stderr.startswith(f"memctl: error: memctl.toml: {said}"), appended.stderr
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
