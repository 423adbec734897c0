"""memctl.ledger: the TSV format, appends under the lock, reading, check, verify."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memctl import config as config_mod
from memctl import ledger, ledger_ops
from memctl.cli import hints
from memctl.errors import BadInput, NotFound, Refused
from memctl.store import open_store

from conftest import git

SEED = (
    "2026-09-14\tzenn\tmcp-stdio-20260914220022-32061\tMCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法\n"
    "2026-09-14\tnote\tai-1-10-20260914220152-18248\tAI経営を1年やって捨てたルール10個 — 増やすより減らす運用改善の記録\n"
).encode("utf-8")
SEED_COLUMNS = ["date", "platform", "slug", "theme"]
TRICKY = ["a/b", "[x]*", "back\\slash", "\"quoted\" 'too'", "tab\there", "new\nline", "cr\rhere", "literal \\t not a tab", ".*", "$(rm -rf /)"]

text_values = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    st.text(alphabet="\t\n\r\\tnr xあ漢"),
)


def fresh(root: Path):
    return open_store(root)


def seed_ledger(root: Path) -> Path:
    path = root / "ledgers" / "article-theme-ledger.tsv"
    path.write_bytes(SEED)
    return path


# ---------------------------------------------------------------- escaping

def test_escape_writes_only_the_four_escapes():
    assert ledger.escape("a\\b\tc\nd\re/[*]\"'") == "a\\\\b\\tc\\nd\\re/[*]\"'"
    assert ledger.unescape("a\\\\b\\tc\\nd\\re") == "a\\b\tc\nd\re"
    assert ledger.unescape("\\\\t") == "\\t"  # an escaped backslash, then a plain t
    assert ledger.unescape("bad \\x stays") == "bad \\x stays"


@given(text_values)
def test_escape_round_trips_and_leaves_no_separator(value):
    escaped = ledger.escape(value)
    assert ledger.unescape(escaped) == value
    assert "\t" not in escaped and "\n" not in escaped and "\r" not in escaped


@given(st.lists(text_values, min_size=1, max_size=5))
def test_format_and_parse_record_are_inverse(values):
    columns = [f"c{i}" for i in range(len(values))]
    line = ledger.format_record(values)
    assert line.count("\t") == len(values) - 1
    assert ledger.parse_record(line, columns) == dict(zip(columns, values))


# ---------------------------------------------------------------- names and declarations

@pytest.mark.parametrize("name", ["a/b", "..", "../x", "", "a b", "x.tsv", "é"])
def test_bad_ledger_names_are_bad_input(store, name):
    with pytest.raises(BadInput):
        ledger.create(store, name, ["a"])
    with pytest.raises(BadInput):
        ledger.append(store, name, [{"a": "1"}])


def test_create_writes_header_and_appends_declaration(root, store):
    before = (root / "memctl.toml").read_bytes()
    made = ledger.create(store, "article-themes", ["date", "theme"], unique="theme")
    assert made.path == root / "ledgers" / "article-themes.tsv"
    assert made.path.read_bytes() == b"date\ttheme\n"
    after = (root / "memctl.toml").read_bytes()
    assert after.startswith(before)
    assert after[len(before):].decode() == textwrap.dedent("""\

        [ledgers.article-themes]
        file = "article-themes.tsv"
        columns = ["date", "theme"]
        unique = "theme"
        """)
    decl = config_mod.load(root / "memctl.toml").ledgers["article-themes"]
    assert decl == config_mod.LedgerDecl("article-themes", "article-themes.tsv", ("date", "theme"), True, "theme")
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: create article-themes"
    with pytest.raises(Refused):
        ledger.create(fresh(root), "article-themes", ["x"])


def test_create_rejects_bad_columns(store):
    for columns, unique in ((["a", "a"], None), (["1a"], None), (["a,b"], None), ([], None), (["a"], "b")):
        with pytest.raises(BadInput):
            ledger.create(store, "x", columns, unique=unique)
    assert not (store.ledgers_dir / "x.tsv").exists()


# ---------------------------------------------------------------- the seed ledger

def test_seed_ledger_is_adopted_without_touching_its_bytes(root, store):
    path = seed_ledger(root)
    done = ledger_ops.adopt(store, path, SEED_COLUMNS, unique="theme")
    assert (done.ledger.name, done.ledger.header, done.rows, done.duplicates) == ("article-theme-ledger", False, 2, 0)
    assert path.read_bytes() == SEED
    assert 'file = "article-theme-ledger.tsv"' in (root / "memctl.toml").read_text()
    assert "header = false" in (root / "memctl.toml").read_text()
    assert git(root, "show", "HEAD:ledgers/article-theme-ledger.tsv").encode() == SEED

    store = fresh(root)
    theme = "MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法"
    with pytest.raises(Refused) as refused:
        ledger.append(store, "article-theme-ledger", [{"date": "2026-09-15", "platform": "zenn", "slug": "s", "theme": theme}])
    assert "ledgers/article-theme-ledger.tsv:1" in refused.value.message
    assert path.read_bytes() == SEED

    ledger.append(store, "article-theme-ledger", [{"date": "2026-09-15", "platform": "zenn", "slug": "s", "theme": "新しいテーマ"}])
    data = path.read_bytes()
    assert data == SEED + "2026-09-15\tzenn\ts\t新しいテーマ\n".encode()
    assert [r.values["platform"] for r in ledger.read_rows(store, "article-theme-ledger")] == ["zenn", "note", "zenn"]
    assert [(v.field, v.count) for v in ledger_ops.stats(store, "article-theme-ledger", "platform")] == [("note", 1), ("zenn", 2)]
    assert ledger_ops.dups(store, "article-theme-ledger", "theme") == []
    assert ledger_ops.verify(store, "article-theme-ledger").ok


def test_adopt_recognises_a_header_and_refuses_wrong_columns(root, store):
    path = root / "ledgers" / "with-header.tsv"
    path.write_bytes(b"a\tb\n1\t2\n")
    assert ledger_ops.adopt(store, path, ["a", "b"]).ledger.header is True
    wrong = seed_ledger(root)
    with pytest.raises(Refused) as refused:
        ledger_ops.adopt(fresh(root), wrong, ["date", "platform", "slug"])
    assert refused.value.message == "ledgers/article-theme-ledger.tsv:1: 4 fields, expected 3 (and 1 more problem)"
    assert "article-theme-ledger" not in (root / "memctl.toml").read_text()


def test_adopt_says_when_line_1_reads_as_a_header_it_takes_for_a_record(root, store):
    """helper-67: a spreadsheet's `日付<TAB>テーマ` above the rows was adopted without a word as a record: `rows`
    printed it, `stats` counted it, and appending the theme `テーマ` was refused as a duplicate."""
    from conftest import memctl

    path = root / "ledgers" / "jp.tsv"
    path.write_bytes("日付\tテーマ\n2026-01-01\t最初\n".encode())
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "jp")
    done = memctl(root, "ledger", "adopt", str(path), "--columns", "date,theme", "--unique", "theme")
    assert done.returncode == 0, done.stderr
    assert "ledgers/jp.tsv:1 is read as a record ('日付\\tテーマ'), not as a header" in done.stderr, done.stderr
    assert "{ printf 'date\\ttheme\\n'; tail -n +2 ledgers/jp.tsv; } > ledgers/jp.tsv.new" in done.stderr
    assert "header = true under [ledgers.jp]" in done.stderr
    assert path.read_bytes() == "日付\tテーマ\n2026-01-01\t最初\n".encode()  # adopt still touches no byte
    assert ledger_ops.adopt(fresh(root), seed_ledger(root), SEED_COLUMNS).header_like is None  # a record: no word


def test_adopt_outside_the_store_is_bad_input(store, tmp_path):
    outside = tmp_path / "elsewhere.tsv"
    outside.write_bytes(b"x\n")
    with pytest.raises(BadInput):
        ledger_ops.adopt(store, outside, ["a"])
    with pytest.raises(NotFound):
        ledger_ops.adopt(store, tmp_path / "missing.tsv", ["a"])


def test_a_file_whose_last_line_has_no_lf_is_refused_with_the_repair_command(root, store):
    # Issue 16: a line without LF may be a cut-off record; sealing it as a row would keep it forever.
    path = root / "ledgers" / "legacy.tsv"
    path.write_bytes(b"1\tone\n2\ttwo")
    with pytest.raises(Refused, match="last line has no LF") as caught:
        ledger_ops.adopt(store, path, ["n", "word"], commit_changes=False)
    assert "truncate -s 6 ledgers/legacy.tsv" in caught.value.one_line()
    path.write_bytes(b"1\tone\n2\ttwo\n")  # the repair: the line was whole
    ledger_ops.adopt(store, path, ["n", "word"], commit_changes=False)
    ledger.append(fresh(root), "legacy", [{"n": "3", "word": "three"}], commit_changes=False)
    assert path.read_bytes() == b"1\tone\n2\ttwo\n3\tthree\n"


# ---------------------------------------------------------------- append

def test_unique_is_an_exact_whole_field_match(root, store):
    ledger.create(store, "t", ["a", "b"], unique="b", commit_changes=False)
    store = fresh(root)
    ledger.append(store, "t", [{"a": v, "b": v} for v in TRICKY], commit_changes=False)
    for value in TRICKY:
        with pytest.raises(Refused):
            ledger.append(store, "t", [{"a": "new", "b": value}], commit_changes=False)
    # Substrings, superstrings, the same text unescaped, the header and other columns are not duplicates.
    for value in ["a/", "/b", "[x]", "tab", "tab\\there", "b", "x" + TRICKY[0]]:
        ledger.append(store, "t", [{"a": "a/b", "b": value}], commit_changes=False)
    assert [r.values["b"] for r in ledger.read_rows(store, "t")][len(TRICKY):] == ["a/", "/b", "[x]", "tab", "tab\\there", "b", "xa/b"]
    with pytest.raises(Refused):
        ledger.append(store, "t", [{"a": "", "b": "b"}], commit_changes=False)


def test_unique_option_overrides_and_empty_values_are_compared_too(root, store):
    ledger.create(store, "t", ["a", "b"], commit_changes=False)
    store = fresh(root)
    ledger.append(store, "t", [{"a": "", "b": "1"}], commit_changes=False)
    ledger.append(store, "t", [{"a": "", "b": "2"}], commit_changes=False)  # no unique column declared
    with pytest.raises(Refused):
        ledger.append(store, "t", [{"a": "", "b": "3"}], unique="a", commit_changes=False)
    with pytest.raises(BadInput):
        ledger.append(store, "t", [{"a": "x", "b": "3"}], unique="nope", commit_changes=False)


def test_a_batch_is_all_or_nothing(root, store):
    ledger.create(store, "t", ["k", "v"], unique="k", commit_changes=False)
    path = root / "ledgers" / "t.tsv"
    store = fresh(root)
    ledger.append(store, "t", [{"k": "1", "v": "x"}], commit_changes=False)
    before = path.read_bytes()
    bad_batches = [
        [{"k": "2", "v": "x"}, {"k": "1", "v": "dup of the file"}],
        [{"k": "3", "v": "x"}, {"k": "3", "v": "dup within the batch"}],
        [{"k": "4", "v": "x"}, {"k": "5"}],
        [{"k": "6", "v": "x"}, {"k": "7", "v": "x", "extra": "?"}],
        [{"k": "8", "v": "x"}, {"k": "9", "v": "x" * (1024 * 1024)}],
        [{"k": "10", "v": "nul\0"}],
        [{"k": "11", "v": "\udcff"}],
    ]
    for batch in bad_batches:
        with pytest.raises((BadInput, Refused)):
            ledger.append(store, "t", batch, commit_changes=False)
    assert path.read_bytes() == before
    done = ledger.append(store, "t", [{"k": "2", "v": "a"}, {"k": "3", "v": "b"}])
    assert done.count == 2
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append t (+2)"
    assert path.read_bytes() == before + b"2\ta\n3\tb\n"


def test_value_size_limit(root, store):
    ledger.create(store, "t", ["v"], commit_changes=False)
    store = fresh(root)
    ledger.append(store, "t", [{"v": "x" * ledger.MAX_FIELD_BYTES}], commit_changes=False)
    with pytest.raises(BadInput) as err:
        ledger.append(store, "t", [{"v": "x" * (ledger.MAX_FIELD_BYTES + 1)}], commit_changes=False)
    assert err.value.message == "column 'v': the value is 65537 bytes; the limit is 65536"


def test_append_commits_only_the_ledger(root, store):
    ledger.create(store, "t", ["v"])
    (root / "memory" / "stray.md").write_text("not ours\n")
    ledger.append(fresh(root), "t", [{"v": "1"}])
    assert git(root, "show", "--name-only", "--format=%s", "HEAD").split() == ["ledger:", "append", "t", "(+1)", "ledgers/t.tsv"]
    assert "?? memory/stray.md" in git(root, "status", "--porcelain")


def test_memctls_own_logs_take_no_append_of_the_users(root, store):
    """`ledger append access` (CLI and MCP's ledger_append) took any row into the access log, which feeds
    recall's frequency and recency: an agent could forge uses. memctl's own ledgers other than episodes
    (appended with episode add's checks) take no append but memctl's."""
    for name in ("access", "episode-tombstones", "distilled", "procedure-outcomes"):
        with pytest.raises(BadInput, match=f"ledger '{name}' is memctl's own"):
            ledger.append(store, name, [{"ts": "t1"}], commit_changes=False, by_user=True)


def test_undeclared_ledger_with_header_is_usable_and_missing_is_not_found(root, store):
    (root / "ledgers" / "visits.tsv").write_bytes(b"ts\tagent\n")
    ledger.append(store, "visits", [{"ts": "t1", "agent": "a"}], commit_changes=False)
    assert [r.values for r in ledger.read_rows(store, "visits")] == [{"ts": "t1", "agent": "a"}]
    with pytest.raises(NotFound):
        ledger.append(store, "nope", [{"a": "1"}])
    seed_ledger(root)
    with pytest.raises(NotFound) as err:
        ledger.open_ledger(store, "article-theme-ledger")
    assert err.value.hint == "adopt it, naming its columns"
    assert hints.worded(err.value)[1] == "memctl ledger adopt ledgers/article-theme-ledger.tsv --columns a,b,c"


# ---------------------------------------------------------------- reading

def test_read_rows_shape_and_select(root, store):
    ledger.create(store, "t", ["date", "who", "text"], commit_changes=False)
    store = fresh(root)
    records = [
        {"date": "2026-09-13", "who": "a", "text": "one\ttab"},
        {"date": "2026-09-14", "who": "b", "text": "two"},
        {"date": "2026-09-15", "who": "a", "text": "three\nlines"},
        {"date": "2026-09-16", "who": "a", "text": "four"},
    ]
    ledger.append(store, "t", records, commit_changes=False)
    rows = list(ledger.read_rows(store, "t"))
    assert [r.lineno for r in rows] == [2, 3, 4, 5]
    assert [r.values for r in rows] == records
    _, picked = ledger.select_rows(store, "t", where=[("who", "a")], since="2026-09-14", tail=1)
    assert [r.values["text"] for r in picked] == ["four"]
    _, picked = ledger.select_rows(store, "t", where=[("who", "a")], since="2026-09-14")
    assert [r.lineno for r in picked] == [4, 5]
    with pytest.raises(BadInput):
        ledger.select_rows(store, "t", where=[("nope", "x")])
    with pytest.raises(BadInput):
        ledger.select_rows(store, "t", since="yesterday")


def test_dups_and_stats_count_the_escaped_field(root, store):
    ledger.create(store, "t", ["k", "v"], commit_changes=False)
    store = fresh(root)
    values = ["b", "a\tb", "b", "a\tb", "a\tb", "c", "Z"]
    ledger.append(store, "t", [{"k": str(i), "v": v} for i, v in enumerate(values)], commit_changes=False)
    assert [(c.field, c.count, c.value) for c in ledger_ops.stats(store, "t", "v")] == [
        ("Z", 1, "Z"), ("a\\tb", 3, "a\tb"), ("b", 2, "b"), ("c", 1, "c"),
    ]
    assert [c.field for c in ledger_ops.dups(store, "t", "v")] == ["a\\tb", "b"]
    with pytest.raises(BadInput):
        ledger_ops.dups(store, "t", "nope")


def test_short_lines_count_as_empty_fields(root, store):
    path = root / "ledgers" / "t.tsv"
    path.write_bytes(b"a\tb\n1\tx\n2\n3\tx\n")
    assert [(c.field, c.count) for c in ledger_ops.stats(store, "t", "b")] == [("", 1), ("x", 2)]


# ---------------------------------------------------------------- check

def test_check_reports_each_problem_with_its_line(root, store):
    ledger.create(store, "t", ["a", "b"], commit_changes=False)
    path = root / "ledgers" / "t.tsv"
    with open(path, "ab") as handle:
        handle.write(b"ok\tfine \\t \\\\ \\n \\r\n"
                     b"one field\n"
                     b"bad\tesc\\ape\n"
                     b"bad\tutf8 \xff\n"
                     b"raw\tcr\r\n"
                     b"a\tb\tc\n"
                     b"trailing\tbackslash\\\n"
                     b"no\tnewline")
    problems = ledger_ops.check(fresh(root), "t")
    assert [(p.path, p.line, p.code, p.severity) for p in problems] == [
        ("ledgers/t.tsv", 3, "field-count", "error"),
        ("ledgers/t.tsv", 4, "bad-escape", "error"),
        ("ledgers/t.tsv", 5, "bad-utf8", "error"),
        ("ledgers/t.tsv", 6, "raw-cr", "error"),
        ("ledgers/t.tsv", 7, "field-count", "error"),
        ("ledgers/t.tsv", 8, "bad-escape", "error"),
        ("ledgers/t.tsv", 9, "no-final-newline", "error"),  # a cut-off record? (docs/FORMAT.md, Ledgers)
    ]
    assert str(problems[1]) == "ledgers/t.tsv:4: invalid escape '\\a' (only \\\\ \\t \\n \\r)"


def test_check_header_and_doctor(root, store):
    ledger.create(store, "t", ["a", "b"], commit_changes=False)
    (root / "ledgers" / "t.tsv").write_bytes(b"a\tc\n")
    seed_ledger(root)
    from memctl import doctor

    found = [(p.path, p.line, p.code) for p in doctor.run(fresh(root)) if p.path.startswith("ledgers/")]
    assert sorted(found) == sorted([("ledgers/t.tsv", 1, "bad-header"), ("ledgers/article-theme-ledger.tsv", 1, "undeclared-ledger"),
                                    # written by hand (--no-commit / seed) and never committed: a clone would miss them
                                    ("ledgers/article-theme-ledger.tsv", 0, "uncommitted"), ("ledgers/t.tsv", 0, "uncommitted")])


# ---------------------------------------------------------------- verify

def test_verify_passes_on_appends_and_names_the_commit_that_edits_a_line(root, store):
    ledger.create(store, "t", ["n", "word"])
    for i, word in enumerate(["one", "two", "three"]):
        ledger.append(fresh(root), "t", [{"n": str(i), "word": word}])
    result = ledger_ops.verify(fresh(root), "t")
    assert (result.ok, result.commits) == (True, 4)

    path = root / "ledgers" / "t.tsv"
    path.write_bytes(path.read_bytes().replace(b"two", b"TWO"))
    result = ledger_ops.verify(fresh(root), "t")
    assert (result.ok, result.commit, result.line) == (False, None, 3)
    assert result.message == "the working file rewrote or removed line 3 of the committed version (HEAD)"

    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "fix a typo")
    bad = git(root, "rev-parse", "HEAD").strip()
    ledger.append(fresh(root), "t", [{"n": "3", "word": "four"}])
    result = ledger_ops.verify(fresh(root), "t")
    assert (result.ok, result.commit, result.subject, result.line) == (False, bad, "fix a typo", 3)
    assert result.message.startswith(f"commit {bad[:10]} (fix a typo) rewrote or removed line 3 as committed in ")


def test_verify_catches_a_removed_last_line(root, store):
    ledger.create(store, "t", ["n"])
    ledger.append(fresh(root), "t", [{"n": "1"}])
    path = root / "ledgers" / "t.tsv"
    path.write_bytes(b"n\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "drop")
    result = ledger_ops.verify(fresh(root), "t")
    assert (result.ok, result.subject, result.line) == (False, "drop", 2)


# ---------------------------------------------------------------- processes and clones

DRIVER = """
import sys
import time
from memctl import ledger, ledger_ops
from memctl.errors import Refused
from memctl.store import open_store

store = open_store(sys.argv[1])
proc, count = sys.argv[2], int(sys.argv[3])
time.sleep(max(0.0, float(sys.argv[4]) - time.time()))  # start together, after the imports
if count == 0:
    # Every process tries the same keys in the same order: only the lock keeps each one unique.
    won = 0
    for key in range(150):
        try:
            ledger.append(store, "load", [{"proc": proc, "seq": f"race-{key}", "text": ""}], commit_changes=False)
            won += 1
        except Refused:
            pass
    print(won)
for i in range(count):
    text = f"p{proc} r{i} tab\\there \\\\ nl\\n" + "x" * (i % 97)
    ledger.append(store, "load", [{"proc": proc, "seq": f"{proc}-{i}", "text": text}], commit_changes=False)
"""


def _run_drivers(root: Path, tmp_path: Path, count: int, procs: int = 8) -> list[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    start_at = time.time() + 2.0
    started = [subprocess.Popen([sys.executable, str(script), str(root), str(p), str(count), str(start_at)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in range(procs)]
    outputs = []
    for proc in started:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    return outputs


def test_eight_processes_times_500_appends(root, store, tmp_path):
    ledger.create(store, "load", ["proc", "seq", "text"], unique="seq", commit_changes=False)
    _run_drivers(root, tmp_path, 500)
    path = root / "ledgers" / "load.tsv"
    data = path.read_bytes()
    wc = subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True).stdout.split()[0]
    assert wc == "4001"
    lines = data.split(b"\n")
    assert lines[-1] == b"" and lines[0] == b"proc\tseq\ttext"
    rows = list(ledger.read_rows(fresh(root), "load"))
    assert len(rows) == 4000
    for row in rows:  # no torn or interleaved line: every record is exactly what its writer wrote
        proc, i = row.values["seq"].split("-")
        assert row.values["proc"] == proc
        assert row.values["text"] == f"p{proc} r{i} tab\there \\ nl\n" + "x" * (int(i) % 97)
    assert sorted(r.values["seq"] for r in rows) == sorted(f"{p}-{i}" for p in range(8) for i in range(500))
    for proc in range(8):  # each writer's records are in its own order
        assert [int(r.values["seq"].split("-")[1]) for r in rows if r.values["proc"] == str(proc)] == list(range(500))
    assert ledger_ops.check(fresh(root), "load") == []


def test_unique_holds_under_a_race(root, store, tmp_path):
    ledger.create(store, "load", ["proc", "seq", "text"], unique="seq", commit_changes=False)
    outputs = _run_drivers(root, tmp_path, 0)
    assert sum(int(won) for won in outputs) == 150
    assert sorted(r.values["seq"] for r in ledger.read_rows(fresh(root), "load")) == sorted(f"race-{k}" for k in range(150))


def test_two_clones_merge_with_git_pull(root, store, tmp_path):
    ledger.create(store, "t", ["who", "what"])
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(root), str(origin)], check=True)
    clones = []
    for name in ("a", "b"):
        clone = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        clones.append(clone)
    a, b = clones
    ledger.append(open_store(a), "t", [{"who": "a", "what": "from clone a"}])
    ledger.append(open_store(b), "t", [{"who": "b", "what": "from clone b"}])
    git(a, "push", "-q", "origin", "HEAD")
    ident = ["-c", "user.name=t", "-c", "user.email=t@x"]
    pulled = subprocess.run(["git", "-C", str(b), *ident, "pull", "-q", "--no-rebase", "--no-edit", "origin"],
                            capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr
    assert "CONFLICT" not in pulled.stdout + pulled.stderr
    assert (b / "ledgers" / "t.tsv").read_bytes() == b"who\twhat\nb\tfrom clone b\na\tfrom clone a\n"
    assert ledger_ops.check(open_store(b), "t") == []
    assert ledger_ops.verify(open_store(b), "t").ok
    assert git(b, "status", "--porcelain") == ""


def test_hash_of_unchanged_config_text_survives_a_declaration(root):
    path = root / "memctl.toml"
    path.write_text("# mine\n[git]\ncommit = false  # keep\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    config_mod.add_ledger_decl(path, config_mod.LedgerDecl("x", "x.tsv", ("a",), False, None))
    text = path.read_bytes()
    assert hashlib.sha256(text[: len(text) - len(b'\n[ledgers.x]\nfile = "x.tsv"\ncolumns = ["a"]\nheader = false\n')]).hexdigest() == digest
    assert config_mod.load(path).ledgers["x"].header is False
    with pytest.raises(Refused):
        config_mod.add_ledger_decl(path, config_mod.LedgerDecl("x", "x.tsv", ("a",), False, None))
    os.chmod(path, 0o644)


def test_unique_empty_value_on_an_empty_headerless_file(root, store):
    path = root / "ledgers" / "bare.tsv"
    path.write_bytes(b"")
    ledger_ops.adopt(store, path, ["a", "b"], unique="b", commit_changes=False)
    ledger.append(fresh(root), "bare", [{"a": "1", "b": ""}], commit_changes=False)
    with pytest.raises(Refused):
        ledger.append(fresh(root), "bare", [{"a": "2", "b": ""}], commit_changes=False)
    assert path.read_bytes() == b"1\t\n"


# ---------------------------------------------------------------- the last rows, read from the end

@pytest.mark.parametrize("header", [True, False])
@settings(max_examples=150, deadline=None)
@given(content=st.lists(st.sampled_from([b"a\tb\n", b"\xe3\x81\x82\tx\\ty\n", b"\n", b"only\n", b"c\r\n", b"\xff\tz\n"]),
                        max_size=12),
       torn=st.sampled_from([b"", b"cut\tof"]), n=st.integers(0, 15))
def test_the_last_rows_read_from_the_end_are_those_a_full_read_ends_with(tmp_path_factory, header, content, torn, n):
    """`ledger rows --tail N` read every line of a year's ledger (3 s) to keep the last N: they are read
    from the end now, with the same line numbers, values, header check and cut-off last line."""
    root = tmp_path_factory.mktemp("tail")
    (root / "memctl.toml").write_text(f'[ledgers.t]\nfile = "t.tsv"\ncolumns = ["a", "b"]\nheader = {str(header).lower()}\n',
                                      encoding="utf-8")
    (root / "ledgers").mkdir()
    found = ledger.open_ledger(open_store(root), "t")
    found.path.write_bytes((b"a\tb\n" if header else b"") + b"".join(content) + torn)
    everything = list(ledger.iter_rows(found))
    assert ledger.last_rows(found, n) == (everything[len(everything) - min(n, len(everything)):] if n else [])
    _, selected = ledger.select_rows(open_store(root), "t", tail=n)
    assert selected == ledger.last_rows(found, n)


def test_the_last_rows_check_the_header_and_the_line_limit(root, monkeypatch):
    (root / "memctl.toml").write_text('[ledgers.t]\nfile = "t.tsv"\ncolumns = ["a", "b"]\nheader = true\n', encoding="utf-8")
    (root / "ledgers").mkdir(exist_ok=True)
    found = ledger.open_ledger(open_store(root), "t")
    found.path.write_bytes(b"x\ty\n1\t2\n")
    with pytest.raises(Refused, match="header line of ledger 't' is missing or changed"):
        ledger.last_rows(found, 1)
    found.path.write_bytes(b"a\tb\n1\t2\n" + b"3\t" + b"4" * 100 + b"\n")
    monkeypatch.setattr(ledger, "ROW_LIMIT", 50)
    with pytest.raises(ledger.TooBig, match=r"ledgers/t.tsv:3 is a line of more than"):
        ledger.last_rows(found, 1)
    assert [r.lineno for r in ledger.last_rows(found, 0)] == []


def test_the_last_rows_of_a_ledger_read_in_several_blocks_and_one_cut_short_meanwhile(root, monkeypatch):
    """Past the first 64 KiB block (and the doubling ones after it) the line numbers and the line that
    straddles a block's start come out as a full read gives them; a file cut short while it is read
    (an append undone: with mmap that was SIGBUS, helper-90) is read again, whole."""
    (root / "memctl.toml").write_text('[ledgers.t]\nfile = "t.tsv"\ncolumns = ["a", "b"]\nheader = true\n', encoding="utf-8")
    (root / "ledgers").mkdir(exist_ok=True)
    found = ledger.open_ledger(open_store(root), "t")
    found.path.write_bytes(b"a\tb\n" + b"".join(f"{i}\t{'記録' * (i % 50)}\n".encode() for i in range(30_000)) + b"cut")
    everything = list(ledger.iter_rows(found))
    for n in (1, 7, 1_000, 12_345, 29_999, 30_000, 10**20):
        assert ledger.last_rows(found, n) == everything[len(everything) - min(n, len(everything)):], n
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, size, at: real(fd, size, at)[: size // 2])
    assert ledger.last_rows(found, 5) == everything[-5:]
