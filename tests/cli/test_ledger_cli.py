"""`memctl ledger ...` and `memctl episode ...`: exact stdout, stderr and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import cli, git, memctl
from memctl import recall

SEED = (
    "2026-09-14\tzenn\tmcp-stdio-20260914220022-32061\tMCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法\n"
    "2026-09-14\tnote\tai-1-10-20260914220152-18248\tAI経営を1年やって捨てたルール10個 — 増やすより減らす運用改善の記録\n"
).encode("utf-8")
THEME = "MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法"


def pipeline(command: str, cwd: Path) -> str:
    """A coreutils pipeline as a shell runs it (C collation: byte order, as memctl sorts)."""
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def one_line_error(result, code: int, as_json: bool = False) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    if as_json:  # with --json an error is one JSON object (docs/JSON.md)
        data = json.loads(result.stderr)
        assert data["exit_code"] == code, data
        return data["error"]
    assert result.stderr.startswith("memctl: error: "), result.stderr
    return result.stderr


@pytest.fixture
def seeded(root) -> Path:
    path = root / "ledgers" / "article-theme-ledger.tsv"
    path.write_bytes(SEED)
    result = cli(root, "ledger", "adopt", str(path), "--columns", "date,platform,slug,theme", "--unique", "theme")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "ledgers/article-theme-ledger.tsv\n", "")
    return path


# ---------------------------------------------------------------- the seed ledger

def test_seed_ledger_works_as_it_is(root, seeded):
    assert seeded.read_bytes() == SEED
    refused = cli(root, "ledger", "append", "article-theme-ledger", "date=2026-09-15", "platform=zenn", "slug=again", f"theme={THEME}")
    assert one_line_error(refused, 1) == (
        f'memctl: error: article-theme-ledger: theme "{THEME}" already exists (ledgers/article-theme-ledger.tsv:1); '
        "nothing was appended (hint: theme is unique in this ledger)\n"
    )
    assert seeded.read_bytes() == SEED

    dups = cli(root, "ledger", "dups", "article-theme-ledger", "theme")
    assert (dups.exit_code, dups.stdout) == (0, pipeline("cut -f4 ledgers/article-theme-ledger.tsv | sort | uniq -d", root))
    stats = cli(root, "ledger", "stats", "article-theme-ledger", "--by", "platform")
    assert stats.stdout == pipeline("cut -f2 ledgers/article-theme-ledger.tsv | sort | uniq -c", root) == "      1 note\n      1 zenn\n"

    added = cli(root, "ledger", "append", "article-theme-ledger", "date=2026-09-15", "platform=zenn", "slug=s2", "theme=新テーマ / [draft] *")
    assert (added.exit_code, added.stdout, added.stderr) == (0, "", "memctl: ledgers/article-theme-ledger.tsv: +1\n")
    assert seeded.read_bytes() == SEED + "2026-09-15\tzenn\ts2\t新テーマ / [draft] *\n".encode()
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append article-theme-ledger (+1)"
    stats = cli(root, "ledger", "stats", "article-theme-ledger", "--by", "platform")
    assert stats.stdout == pipeline("cut -f2 ledgers/article-theme-ledger.tsv | sort | uniq -c", root) == "      1 note\n      2 zenn\n"
    assert cli(root, "ledger", "verify", "article-theme-ledger").stdout == "ledgers/article-theme-ledger.tsv: 2 commits, append-only\n"


def test_dups_and_stats_equal_the_pipelines_on_tricky_values(root):
    cli(root, "ledger", "create", "t", "--columns", "n,v")
    values = ["b", "tab\there", "b", "tab\there", "漢字", "漢字", "漢字", "back\\slash", "back\\slash", "Z", "", "", "a b"]
    lines = "".join(f"{i}\t{v.replace(chr(92), chr(92) * 2).replace(chr(9), chr(92) + 't')}\n" for i, v in enumerate(values))
    assert cli(root, "ledger", "append", "t", "-", input=lines.encode()).exit_code == 0
    body = "tail -n +2 ledgers/t.tsv"
    assert cli(root, "ledger", "dups", "t", "v").stdout == pipeline(f"{body} | cut -f2 | sort | uniq -d", root)
    assert cli(root, "ledger", "stats", "t", "--by", "v").stdout == pipeline(f"{body} | cut -f2 | sort | uniq -c", root)
    assert json.loads(cli(root, "ledger", "dups", "t", "v", "--json").stdout) == [
        {"value": "", "count": 2}, {"value": "b", "count": 2}, {"value": "back\\slash", "count": 2},
        {"value": "tab\there", "count": 2}, {"value": "漢字", "count": 3},
    ]


# ---------------------------------------------------------------- round trip

values = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    st.text(alphabet="\t\n\r\\tnr xあ漢"),
    st.sampled_from(["\\t", "\\\\t", "\\", "a\\", "\t", "\n", "\r\n", "\\n\n"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_round_trip_through_append_and_rows_json(root, value):
    path = root / "ledgers" / "rt.tsv"
    if not path.exists():
        assert cli(root, "ledger", "create", "rt", "--columns", "n,v", "--no-commit").exit_code == 0
    count = len(path.read_bytes().split(b"\n")) - 1  # records + header so far
    result = cli(root, "ledger", "append", "rt", f"n={count}", f"v={value}", "--no-commit")
    assert result.exit_code == 0, result.stderr
    ndjson = json.dumps({"n": f"{count}b", "v": value}).encode() + b"\n"
    assert cli(root, "ledger", "append", "rt", "-", "--json", "--no-commit", input=ndjson).exit_code == 0
    rows = json.loads(cli(root, "ledger", "rows", "rt", "--json", "--tail", "2").stdout)
    assert rows == [{"n": str(count), "v": value}, {"n": f"{count}b", "v": value}]
    wc = subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
    assert int(wc) == count + 2


def test_stdin_tsv_is_one_write_and_one_commit(root):
    cli(root, "ledger", "create", "t", "--columns", "a,b")
    result = cli(root, "ledger", "append", "t", "-", "--json", input=b"x\t1\n")
    assert result.exit_code == 2  # --json means NDJSON on stdin
    result = cli(root, "ledger", "append", "t", "-", input=b"x\t1\ny\\ty\t2\nz\t\\\\3\n")
    assert (result.exit_code, result.stderr) == (0, "memctl: ledgers/t.tsv: +3\n")
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append t (+3)"
    rows = json.loads(cli(root, "ledger", "rows", "t", "--json").stdout)
    assert rows == [{"a": "x", "b": "1"}, {"a": "y\ty", "b": "2"}, {"a": "z", "b": "\\3"}]
    assert cli(root, "ledger", "rows", "t").stdout == "x\t1\ny\\ty\t2\nz\t\\\\3\n"
    assert cli(root, "ledger", "rows", "t", "--where", "b=2").stdout == "y\\ty\t2\n"


# ---------------------------------------------------------------- bad input

BAD_INPUT = [
    (["ledger", "append", "a/b", "x=1"], None, 2, "invalid ledger name 'a/b'"),
    (["ledger", "append", "..", "x=1"], None, 2, "invalid ledger name '..'"),
    (["ledger", "create", "../t", "--columns", "a"], None, 2, "invalid ledger name '../t'"),
    (["ledger", "append", "t", "a=1", "b=2", "c=3"], None, 2, "unknown column 'c' in ledger 't'"),
    (["ledger", "append", "t", "a=1"], None, 2, "missing column 'b' for ledger 't'"),
    (["ledger", "append", "t", "a=1", "b"], None, 2, "expected column=value, got 'b'"),
    (["ledger", "append", "t", "a=1", "a=2", "b=3"], None, 2, "column 'a' is given twice"),
    (["ledger", "append", "t", "-"], b"ok\t1\nbad\t\xff\xfe\n", 2, "stdin:2: not valid UTF-8; nothing was appended"),
    (["ledger", "append", "t", "-"], b"ok\t1\ntoo\tmany\tfields\n", 2, "stdin:2: 3 fields, expected 2 (a, b)"),
    # A spreadsheet's UTF-8 export: the mark went into the first field, where --where and grep never match it.
    (["ledger", "append", "t", "-"], "\ufeff2026-12-05\tBOM付き\n".encode(), 2, "stdin:1: starts with a byte-order mark (U+FEFF)"),
    (["ledger", "append", "t", "-", "--json"], '\ufeff{"a": "1", "b": "2"}\n'.encode(), 2, "starts with a byte-order mark"),
    (["ledger", "append", "t", "-"], b"x\t" + b"y" * (1024 * 1024) + b"\n", 2, "column 'b': the value is 1048576 bytes; the limit is 65536"),
    (["ledger", "append", "t", "-", "--json"], b'{"a": "1", "b": "' + b"y" * (1024 * 1024) + b'"}\n', 2, "column 'b': the value is 1048576 bytes"),
    (["ledger", "append", "t", "a=1", "b=" + "y" * (1024 * 1024)], None, 2, "column 'b': the value is 1048576 bytes"),
    (["ledger", "append", "t", "-"], b"", 2, "no records on stdin"),
    (["ledger", "append", "t"], None, 2, "nothing to append"),
    (["ledger", "append", "t", "a=dup", "b=2"], None, 1, 't: a "dup" already exists'),
    (["ledger", "append", "nope", "a=1"], None, 3, "no ledger named 'nope'"),
    (["ledger", "rows", "t", "--where", "c=1"], None, 2, "unknown column 'c' in ledger 't'"),
    (["ledger", "stats", "t", "--by", "c"], None, 2, "unknown column 'c' in ledger 't'"),
]


# Plain ids: pytest 9 puts bytes values into test ids, and a 1 MB id in
# PYTEST_CURRENT_TEST is more than the kernel lets a child process inherit.
@pytest.mark.parametrize("args,stdin,code,message", BAD_INPUT, ids=[f"case{i}" for i in range(len(BAD_INPUT))])
def test_bad_input_is_one_line_an_exit_code_and_nothing_written(root, args, stdin, code, message):
    cli(root, "ledger", "create", "t", "--columns", "a,b", "--unique", "a")
    cli(root, "ledger", "append", "t", "a=dup", "b=1")
    path = root / "ledgers" / "t.tsv"
    before = path.read_bytes()
    head = git(root, "rev-parse", "HEAD")
    result = cli(root, *args, input=stdin)
    assert message in one_line_error(result, code, as_json="--json" in args)
    assert path.read_bytes() == before
    assert git(root, "rev-parse", "HEAD") == head
    assert sorted(p.name for p in (root / "ledgers").iterdir()) == [".gitkeep", "t.tsv"]


def test_bad_input_through_a_real_process(root):
    cli(root, "ledger", "create", "t", "--columns", "a,b")
    before = (root / "ledgers" / "t.tsv").read_bytes()
    for args, stdin, code in ((["ledger", "append", "t", "-"], b"\xff\t1\n", 2), (["ledger", "append", "a/../t", "a=1"], None, 2),
                              (["ledger", "append", "t", "a=1", "z=2"], None, 2), (["ledger", "dups", "missing", "a"], None, 3)):
        proc = memctl(root, *args, input=stdin if stdin is not None else b"")
        assert proc.returncode == code
        assert proc.stdout == b"" and proc.stderr.count(b"\n") == 1 and proc.stderr.startswith(b"memctl: error: ")
    assert (root / "ledgers" / "t.tsv").read_bytes() == before


# ---------------------------------------------------------------- check and verify

def test_check_prints_file_line_and_exits_1(root):
    cli(root, "ledger", "create", "t", "--columns", "a,b")
    clean = cli(root, "ledger", "check", "t")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "", "memctl: ledger t is clean\n")
    with open(root / "ledgers" / "t.tsv", "ab") as handle:
        handle.write(b"one\n\xff\tx\nok\tok\nbad\t\\q\n")
    result = cli(root, "ledger", "check", "t")
    assert result.exit_code == 1
    assert result.stdout == (
        "ledgers/t.tsv:2: error: 1 field, expected 2\n"
        "ledgers/t.tsv:3: error: invalid UTF-8 at byte 1 of the line\n"
        "ledgers/t.tsv:5: error: invalid escape '\\q' (only \\\\ \\t \\n \\r)\n"
    )
    report = json.loads(cli(root, "ledger", "check", "--json").stdout)
    assert report["ok"] is False and [p["line"] for p in report["problems"]] == [2, 3, 5]
    doctor = cli(root, "doctor")
    assert doctor.exit_code == 1 and "ledgers/t.tsv:2: error: 1 field, expected 2" in doctor.stdout


def test_verify_names_the_commit_that_edited_a_line(root):
    cli(root, "ledger", "create", "t", "--columns", "a")
    for value in ("one", "two", "three"):
        cli(root, "ledger", "append", "t", f"a={value}")
    ok = cli(root, "ledger", "verify", "t")
    assert (ok.exit_code, ok.stdout) == (0, "ledgers/t.tsv: 4 commits, append-only\n")
    path = root / "ledgers" / "t.tsv"
    path.write_text(path.read_text().replace("two", "2"))
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "tidy up")
    sha = git(root, "rev-parse", "HEAD").strip()
    bad = cli(root, "ledger", "verify", "t")
    assert bad.exit_code == 1
    assert re.fullmatch(rf"commit {sha[:10]} \(tidy up\) rewrote or removed line 3 as committed in [0-9a-f]{{10}}\n", bad.stdout)
    assert json.loads(cli(root, "ledger", "verify", "t", "--json").stdout)["commit"] == sha


# ---------------------------------------------------------------- other commands

def test_create_list_rows_since_tail(root):
    created = cli(root, "ledger", "create", "t", "--columns", "date,who", "--json")
    assert json.loads(created.stdout) == {"ledger": "t", "path": "ledgers/t.tsv", "columns": ["date", "who"], "unique": None}
    cli(root, "ledger", "append", "t", "-", input=b"2026-09-01\ta\n2026-09-10\tb\n2026-09-20\ta\n2026-09-30\ta\n")
    assert cli(root, "ledger", "rows", "t", "--since", "2026-09-10", "--where", "who=a", "--tail", "1").stdout == "2026-09-30\ta\n"
    assert cli(root, "ledger", "rows", "t", "--since", "2026-09-10", "--where", "who=a").stdout == "2026-09-20\ta\n2026-09-30\ta\n"
    # helper-85: a date --since cannot read (`2026/09/25`, as Japanese is often written) left its row out without a word
    cli(root, "ledger", "append", "t", "-", input="2026/09/25\ta\nSep 26 2026\tb\n".encode())
    r = cli(root, "ledger", "rows", "t", "--since", "2026-09-10", "--where", "who=a")
    assert (r.exit_code, r.stdout) == (0, "2026-09-20\ta\n2026-09-30\ta\n")
    assert r.stderr == ("memctl: warning: ledgers/t.tsv: 1 row left out: date is no ISO date or timestamp (line 6: "
                        "'2026/09/25') (hint: write date as YYYY-MM-DD or YYYY-MM-DDTHH:MM (ISO 8601))\n"), r.stderr
    assert cli(root, "ledger", "list").stdout == "t\tledgers/t.tsv\t6\tdate,who\n"
    assert json.loads(cli(root, "ledger", "list", "--json").stdout) == [
        {"name": "t", "path": "ledgers/t.tsv", "rows": 6, "columns": ["date", "who"], "unique": None, "declared": True}
    ]
    again = cli(root, "ledger", "create", "t", "--columns", "x")
    assert "already declared" in one_line_error(again, 1)


def test_append_without_commit_imports_no_git(root):
    cli(root, "ledger", "create", "t", "--columns", "a")
    code = ("import sys; from memctl.cli import main; sys.argv = ['memctl', '--root', sys.argv[1], 'ledger', 'append', 't', 'a=1', '--unique', 'a', '--no-commit']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint(sorted(m for m in ('git', 'numpy', 'torch') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True)
    assert proc.stdout == "[]\n", proc.stderr
    assert (root / "ledgers" / "t.tsv").read_text() == "a\n1\n"


def test_cli_appends_from_sixteen_real_processes_at_once(root):
    cli(root, "ledger", "create", "t", "--columns", "proc,n", "--unique", "n", "--no-commit")
    argv = [sys.executable, "-m", "memctl", "--root", str(root), "ledger", "append", "t"]
    procs = [subprocess.Popen([*argv, f"proc={p}", f"n={p % 8}", "--no-commit"], stderr=subprocess.PIPE) for p in range(16)]
    codes = sorted(proc.wait(timeout=300) for proc in procs)
    assert codes == [0] * 8 + [1] * 8  # n is unique: of each pair racing for n, one is refused
    lines = (root / "ledgers" / "t.tsv").read_text().splitlines()
    assert len(lines) == 9 and sorted(line.split("\t")[1] for line in lines[1:]) == [str(n) for n in range(8)]
    assert cli(root, "ledger", "check", "t").exit_code == 0


# ---------------------------------------------------------------- episodes

def test_episode_add_list_recall(root, monkeypatch):
    env = {"MEMCTL_NOW": "2026-09-14T22:00:22+09:00", "MEMCTL_AGENT": "writer"}
    assert cli(root, "remember", "feedback-zenn-rate-limit", "-d", "Zennは1日1件まで").exit_code == 0  # what --ref names
    added = cli(root, "episode", "add", "Zennに記事と書籍を同日公開して失敗した", "--type", "error", "--outcome", "deploy failed",
                "--tag", "zenn", "--ref", "feedback-zenn-rate-limit", env=env)
    assert added.exit_code == 0 and re.fullmatch(r"ep-20260914130022-[0-9a-f]{4}\n", added.stdout)
    episode_id = added.stdout.strip()
    cli(root, "episode", "add", "noteの記事を公開した", "--type", "success", "--agent", "other", "--importance", "0.6", env=env)
    listed = json.loads(cli(root, "episode", "list", "--json").stdout)
    assert [(e["agent"], e["type"], e["importance"], e["tags"], e["refs"]) for e in listed] == [
        ("writer", "error", 0.8, ["zenn"], ["feedback-zenn-rate-limit"]), ("other", "success", 0.6, [], []),
    ]
    assert cli(root, "episode", "list", "--type", "error").stdout == (
        f"{episode_id}\t2026-09-14T22:00:22+09:00\twriter\terror\t0.8\tZennに記事と書籍を同日公開して失敗した\n"
    )
    assert [e["description"] for e in json.loads(cli(root, "episode", "list", "--tail", "1", "--json").stdout)] == ["noteの記事を公開した"]
    refused = cli(root, "episode", "list", "--tail", "-1")
    assert refused.exit_code == 2 and "--tail must be 0 or more" in refused.stderr
    recalled = json.loads(cli(root, "episode", "recall", "Zenn 公開", "--mode", "keyword", "--json", "--explain", env=env).stdout)
    assert [r["name"] for r in recalled][0] == episode_id
    relevance = recall.keyword_relevance(1.0, cjk=True)  # both terms present: full coverage
    assert recalled[0]["relevance"] == round(relevance, 4) and recalled[0]["factors"]["recency"] == 1.0
    assert recalled[0]["score"] == round(0.4 * relevance + 0.35 * 0.8 + 0.25 * 1.0, 4)  # the episodes' default weights
    assert len(json.loads(cli(root, "episode", "recall", "公開", "--k", "1", "--json", env=env).stdout)) == 1
    bad = cli(root, "episode", "add", "x", "--type", "error", "--importance", "2")
    assert "importance 2.0 is not between 0 and 1" in one_line_error(bad, 2)
    bad = cli(root, "episode", "add", "x", "--type", "Not A Type")
    assert "unknown episode type 'Not A Type'; the types are decision | error" in one_line_error(bad, 2)


@pytest.mark.parametrize("row, named", [
    ("ep-x\tnot-a-time\t\tdecision\t手で足した\t\t0.7\t\t\n", "ts 'not-a-time' is not a time"),
    ("ep-x\t2026-09-14T22:00:00+09:00\t\tdecision\t手で足した\t\tabc\t\t\n", "importance 'abc' is not a number from 0 to 1"),
    ("ep-x\t2026-09-14T22:00:00+09:00\tdecision\t手で足した\t\t0.7\t\t\n", "8 fields, expected 9"),
])
def test_episode_list_names_a_damaged_row_after_listing_as_ledger_rows_does(root, row, named):
    """`episode list` read a row whose ts was no time or importance no number (it took the type's default)
    with exit 0 and no word, where `ledger rows episodes` exits 1: it lists, then names the row (exit 1)."""
    env = {"MEMCTL_NOW": "2026-09-14T22:00:22+09:00"}
    assert cli(root, "episode", "add", "記録した", "-t", "decision", env=env).exit_code == 0
    assert cli(root, "episode", "list", env=env).exit_code == 0
    with open(root / "ledgers" / "episodes.tsv", "a", encoding="utf-8") as handle:
        handle.write(row)
    r = cli(root, "episode", "list", env=env)
    assert r.exit_code == 1 and "記録した" in r.stdout and "手で足した" in r.stdout, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "ledgers/episodes.tsv" in r.stderr and named in r.stderr, r.stderr


def test_an_importance_of_minus_zero_is_written_zero(root):
    assert cli(root, "episode", "add", "記録した", "-t", "decision", "--importance", "-0").exit_code == 0
    assert (root / "ledgers" / "episodes.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[6] == "0"


def test_create_and_adopt_never_sweep_hand_edits_of_memctl_toml_into_their_commit(root):
    """The declaration is written, the ledger committed, memctl.toml left for its owner to commit."""
    toml = root / "memctl.toml"
    hand = "\n# a hand edit, not committed yet\n"
    toml.write_text(toml.read_text(encoding="utf-8") + hand, encoding="utf-8")
    (root / "ledgers" / "old.tsv").write_text("2026-01-01\tx\n", encoding="utf-8")
    git(root, "add", "ledgers/old.tsv")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a legacy ledger")
    for args, subject, committed in (
        (["ledger", "create", "t", "--columns", "a,b"], "ledger: create t", "ledgers/t.tsv"),
        (["ledger", "adopt", str(root / "ledgers" / "old.tsv"), "--columns", "d,v"], "ledger: adopt old", None),
    ):
        r = cli(root, *args)
        assert r.exit_code == 0, r.stderr
        assert "memctl.toml has uncommitted changes" in r.stderr and "not committed" in r.stderr
        if committed:
            assert git(root, "log", "-1", "--format=%s").strip() == subject
            assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [committed]
    text = toml.read_text(encoding="utf-8")
    assert hand in text and "[ledgers.t]" in text and "[ledgers.old]" in text  # all there, for its owner
    assert git(root, "status", "--porcelain").split() == ["M", "memctl.toml"]
    assert git(root, "show", "HEAD:memctl.toml").count("[ledgers.") == 0
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "my edit and the declarations")
    r = cli(root, "ledger", "create", "u", "--columns", "a")
    assert r.exit_code == 0 and r.stderr.count("uncommitted") == 0
    assert sorted(git(root, "show", "--name-only", "--format=", "HEAD").split()) == ["ledgers/u.tsv", "memctl.toml"]


def test_commit_gathers_no_commit_appends_into_one_commit_and_refuses_an_edit(root):
    assert cli(root, "ledger", "create", "t", "--columns", "a,b").exit_code == 0
    head = git(root, "rev-parse", "HEAD")
    for i in range(3):
        assert cli(root, "ledger", "append", "t", f"a={i}", "b=x", "--no-commit").exit_code == 0
    assert git(root, "rev-parse", "HEAD") == head
    r = cli(root, "ledger", "commit", "t", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["appended"] == 3
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append t (+3)"
    assert git(root, "status", "--porcelain") == ""
    r = cli(root, "ledger", "commit", "t")
    assert r.exit_code == 0 and "nothing to commit" in r.stderr
    # an edited old line never rides along with an append
    path = root / "ledgers" / "t.tsv"
    path.write_text(path.read_text(encoding="utf-8").replace("1\tx", "1\tX"), encoding="utf-8")
    assert cli(root, "ledger", "append", "t", "a=9", "b=y", "--no-commit").exit_code == 0
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "ledger", "commit", "t")
    assert r.exit_code == 1 and "line 3 of the committed version was rewritten or removed" in r.stderr
    assert git(root, "rev-parse", "HEAD") == head
    r = cli(root, "ledger", "commit", "t", env={"MEMCTL_NO_COMMIT": "1"})
    assert r.exit_code == 1 and "commits are turned off" in r.stderr



def test_an_append_that_commits_refuses_an_old_line_edited_by_hand(root):
    """`ledger append` (which commits) once swept a hand edit of an old row into "ledger: append t (+1)";
    it now refuses as `ledger commit` does, and writes nothing. Lines added by hand below still go with it."""
    assert cli(root, "ledger", "create", "t", "--columns", "d,theme").exit_code == 0
    assert cli(root, "ledger", "append", "t", "d=1", "theme=MCPのテスト").exit_code == 0
    path = root / "ledgers" / "t.tsv"
    committed = path.read_bytes()
    path.write_bytes(committed.replace("MCPのテスト".encode(), "MCPのデバッグ".encode()))
    edited, head = path.read_bytes(), git(root, "rev-parse", "HEAD")
    r = cli(root, "ledger", "append", "t", "d=2", "theme=stdioの挙動")
    assert (r.exit_code, r.stderr) == (1, "memctl: error: ledgers/t.tsv: line 2 of the committed version was rewritten or "
                                          "removed; nothing was appended (hint: look at `git diff -- ledgers/t.tsv`: a ledger "
                                          "is only appended to)\n")
    assert (path.read_bytes(), git(root, "rev-parse", "HEAD")) == (edited, head)
    # --no-commit appends still go (nothing is committed; `ledger commit` refuses later, as above)
    assert cli(root, "ledger", "append", "t", "d=3", "theme=x", "--no-commit").exit_code == 0
    # put back: a line appended by hand is an append, and the next append commits it with its own
    path.write_bytes(committed + "4\t手で追記\n".encode())
    r = cli(root, "ledger", "append", "t", "d=5", "theme=y")
    assert r.exit_code == 0, r.stderr
    assert git(root, "status", "--porcelain") == "" and git(root, "show", "HEAD:ledgers/t.tsv").count("\n") == 4


@pytest.mark.parametrize("damage, line, what", [
    (b"2\n", 3, "1 field, expected 2"),
    (b"2\tx\ty\n", 3, "3 fields, expected 2"),
    (b"2\t\xe5\x80\n", 3, "invalid UTF-8"),
    (b"=======\n", 3, "1 field, expected 2"),  # no marker without <<<<<<< above it: a line of one field
    (b"<<<<<<< HEAD\tx\n", 3, "conflict marker"),
])
def test_rows_prints_damaged_lines_as_read_then_names_them_and_exits_1(root, damage, line, what):
    """`ledger rows` once printed a padded, cut or garbled line as a record with exit 0 and no word; `ledger check`
    was the only one to say. Now rows names the first damaged line after printing (exit 1), as it does a cut-off one."""
    assert cli(root, "ledger", "create", "t", "--columns", "a,b").exit_code == 0
    assert cli(root, "ledger", "append", "t", "a=1", "b=テーマ").exit_code == 0
    clean = cli(root, "ledger", "rows", "t")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "1\tテーマ\n", "")
    with open(root / "ledgers" / "t.tsv", "ab") as handle:
        handle.write(damage)
    r = cli(root, "ledger", "rows", "t")
    assert r.exit_code == 1 and r.stdout.startswith("1\tテーマ\n") and r.stdout.count("\n") == 2, r.stdout
    assert r.stderr.startswith(f"memctl: error: ledgers/t.tsv: 1 damaged line, printed fitted to the columns (line {line}: ") and what in r.stderr, r.stderr
    assert "(hint: memctl ledger check t lists them)" in r.stderr

def test_a_conflict_marker_line_is_named_as_one_not_by_its_field_count(root):
    """`<<<<<<< HEAD` in a ledger of two columns was named "1 fields, expected 2" first (rows, check, doctor)."""
    assert cli(root, "ledger", "create", "t", "--columns", "a,b").exit_code == 0
    with open(root / "ledgers" / "t.tsv", "ab") as handle:
        handle.write("<<<<<<< HEAD\n1\tテーマ\n=======\n1\t別\n>>>>>>> theirs\n".encode())
    r = cli(root, "ledger", "rows", "t")
    assert r.exit_code == 1 and "(line 2: an unresolved merge conflict marker" in r.stderr, r.stderr
    check = cli(root, "ledger", "check", "t")
    assert "field" not in check.stdout + check.stderr and check.stdout.count("conflict marker") == 3, check.stdout


def test_commit_of_the_access_log(root):
    """A read keeps `git status` clean (its row waits in .memctl/); `ledger commit access` commits it (issue 23.10)."""
    assert cli(root, "remember", "a", "-t", "user", "-d", "deploys happen on Tuesdays").exit_code == 0
    assert cli(root, "recall", "deploys").exit_code == 0
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    r = cli(root, "ledger", "commit", "access")
    assert r.exit_code == 0 and "+1 committed" in r.stderr, r.stderr
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "show", "HEAD:ledgers/access.tsv").splitlines()[1].split("\t")[2:] == ["recall", "deploys", "a"]


def test_doctor_names_a_tsv_whose_file_name_is_no_ledger_name_and_the_adopt_that_works(root):
    """`ledgers/テーマ.tsv` was "no header line" (it had one), and the adopt hint failed without --name."""
    (root / "ledgers" / "テーマ.tsv").write_text("date\ttheme\n2026-12-01\tMCPのテスト\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a ledger by hand")
    doctor = cli(root, "doctor").stdout
    assert ("ledgers/テーマ.tsv: warning: 'テーマ' is not a ledger name (1-80 ASCII letters, digits, - or _, not - first), "
            "so memctl does not read it (memctl ledger adopt ledgers/テーマ.tsv --name NAME --columns ...)") in doctor, doctor
    assert cli(root, "ledger", "adopt", str(root / "ledgers" / "テーマ.tsv"), "--name", "themes", "--columns", "date,theme").exit_code == 0
    assert cli(root, "ledger", "rows", "themes").stdout == "2026-12-01\tMCPのテスト\n"
    assert "テーマ" not in cli(root, "doctor").stdout


def test_ndjson_numbers_are_stored_as_written_and_nan_is_refused(root):
    """`ledger append - --json` stored NaN and Infinity (not JSON; Python's parser takes them) and wrote
    `1e2` and `100.0` both as 100.0: a number is now stored as its own text, and NaN refused."""
    assert cli(root, "ledger", "create", "metrics", "--columns", "name,value").exit_code == 0
    before = (root / "ledgers" / "metrics.tsv").read_bytes()
    for bad in ('{"name": "a", "value": NaN}', '{"name": "a", "value": -Infinity}'):
        r = cli(root, "ledger", "append", "metrics", "-", "--json", input=bad + "\n")
        assert r.exit_code == 2 and "is not JSON" in r.stderr, r.stderr
        assert (root / "ledgers" / "metrics.tsv").read_bytes() == before
    rows = '{"name": "a", "value": 100.0}\n{"name": "b", "value": 1e2}\n{"name": "c", "value": 7}\n{"name": "d", "value": 123456789012345678901234567890}\n'
    assert cli(root, "ledger", "append", "metrics", "-", "--json", input=rows).exit_code == 0
    lines = (root / "ledgers" / "metrics.tsv").read_text(encoding="utf-8").splitlines()[-4:]
    assert [line.split("\t")[-1] for line in lines] == ["100.0", "1e2", "7", "123456789012345678901234567890"]


def test_doctor_never_advises_committing_a_rewritten_ledger_row(root):
    """doctor said "memctl's file has changes that are not committed (commit them ...)" for a ledger whose
    committed row was rewritten by hand: committing that breaks `ledger verify`. Rows only appended
    still get that advice."""
    import json as json_mod

    assert cli(root, "ledger", "create", "themes", "--columns", "host,theme").exit_code == 0
    for host, theme in (("a", "デプロイ"), ("b", "cache")):
        assert cli(root, "ledger", "append", "themes", f"host={host}", f"theme={theme}").exit_code == 0
    path = root / "ledgers" / "themes.tsv"
    committed = path.read_bytes()

    def told() -> list[dict]:
        done = cli(root, "doctor", "--json")
        return [p for p in json_mod.loads(done.stdout)["problems"] if p["path"] == "ledgers/themes.tsv"]

    path.write_bytes(committed.replace("デプロイ".encode(), "リリース".encode()))
    (found,) = told()
    assert found["severity"] == "error" and found["message"].startswith(
        "an append-only ledger changed at line 2 since its last commit (a row rewritten or removed)")
    assert "commit them" not in found["message"]
    path.write_bytes(committed + "c\t追記\n".encode())
    (found,) = told()
    assert found["message"].startswith("memctl's file has changes that are not committed (commit them")


def test_memctls_own_ledger_names_are_not_the_users_to_create_or_adopt(root):
    """`memctl ledger rows episodes` on a new store hinted `memctl ledger create episodes --columns a,b,c`,
    after which every `episode add` failed (unknown column 'id'); an `access` of two columns took the access
    log's five-field rows into a commit. memctl's own names are refused; the commands that own them still work."""
    done = cli(root, "ledger", "rows", "episodes")
    assert done.exit_code == 3 and "it is memctl's own, made by `memctl episode add` with its columns" in done.stderr
    assert "ledger create" not in done.stderr
    head = git(root, "rev-parse", "HEAD")
    for name in ("episodes", "access", "episode-tombstones", "distilled", "procedure-outcomes"):
        done = cli(root, "ledger", "create", name, "--columns", "a,b,c")
        assert done.exit_code == 2 and f"ledger '{name}' is memctl's own" in done.stderr, done.stderr
    (root / "ledgers" / "old.tsv").write_text("a\tb\n1\t2\n", encoding="utf-8")
    done = cli(root, "ledger", "adopt", str(root / "ledgers" / "old.tsv"), "--name", "episodes", "--columns", "a,b")
    assert done.exit_code == 2 and "ledger 'episodes' is memctl's own" in done.stderr
    assert git(root, "rev-parse", "HEAD") == head and "[ledgers." not in (root / "memctl.toml").read_text(encoding="utf-8")
    assert cli(root, "episode", "add", "デプロイ手順を決めた", "--type", "decision").exit_code == 0
    assert cli(root, "ledger", "rows", "episodes").exit_code == 0


def test_stats_dups_and_list_leave_out_a_last_line_without_lf_as_rows_does(root):
    """`ledger rows` leaves out a last line without LF (a cut-off record) and says so; `stats`, `dups` and
    `list` counted it, with no word: the commands disagreed about the same file."""
    assert cli(root, "ledger", "create", "n", "--columns", "ts,who").exit_code == 0
    for ts in ("1", "2"):
        assert cli(root, "ledger", "append", "n", f"ts={ts}", "who=a").exit_code == 0
    path = root / "ledgers" / "n.tsv"
    path.write_bytes(path.read_bytes() + "3\tq".encode())
    stats = cli(root, "ledger", "stats", "n", "--by", "who")
    assert stats.exit_code == 1 and stats.stdout == "      2 a\n" and "the last line has no LF" in stats.stderr
    dups = cli(root, "ledger", "dups", "n", "who")
    assert dups.exit_code == 1 and dups.stdout == "a\n" and "that line was left out" in dups.stderr
    assert cli(root, "ledger", "list").stdout.split("\t")[2] == "2"
    assert cli(root, "ledger", "rows", "n").exit_code == 1


def test_json_lines_on_stdin_may_hold_blank_lines(root):
    """`ledger append n - --json` with a heredoc's trailing blank line failed with `stdin:2: invalid JSON`."""
    assert cli(root, "ledger", "create", "n", "--columns", "a,b").exit_code == 0
    done = cli(root, "ledger", "append", "n", "-", "--json", input='{"a": "1", "b": "ｘ"}\n\n{"a": 2, "b": "y"}\n\n')
    assert done.exit_code == 0 and json.loads(done.stdout)["appended"] == 2, done.stderr
    assert (root / "ledgers" / "n.tsv").read_text(encoding="utf-8") == "a\tb\n1\tｘ\n2\ty\n"


def test_a_full_disk_met_on_a_write_of_memctls_own_is_not_blamed_on_the_output():
    """`os.write` on a file memctl holds open (git's index.lock, a ledger's fd) raises ENOSPC with no file
    name; every such error was worded "while printing the output ... what the command changed before
    printing is done", while nothing had been appended or committed. Only a write to stdout says so now."""
    from memctl import errors, output

    own = errors.from_os_error(OSError(28, "No space left on device"))
    assert "printing" not in own.message and own.hint.endswith("the change was not made"), (own.message, own.hint)
    printed = OSError(28, "No space left on device")
    try:
        with output._printing:
            raise printed
    except OSError as exc:
        shown = errors.from_os_error(exc)
    assert shown.message == "No space left on device while printing the output (ENOSPC)", shown.message


def test_output_to_a_full_device_says_what_failed_not_that_nothing_changed(root):
    """`memctl remember a > /dev/full` committed the fact, then said "the change was not made" (the hint for a
    full disk while writing a file); `ledger rows > /dev/full` said so of a command that changes nothing."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "remember", "a", "--description", "エー"],
                              stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1 and "while printing the output (ENOSPC)" in done.stderr, done.stderr
    assert "the change was not made" not in done.stderr
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember a"


def test_ledger_append_takes_no_row_into_the_access_log(root):
    assert cli(root, "remember", "a", "-t", "user", "-d", "deploys happen on Tuesdays").exit_code == 0
    assert cli(root, "recall", "deploys").exit_code == 0
    assert cli(root, "ledger", "commit", "access").exit_code == 0
    before = (root / "ledgers" / "access.tsv").read_bytes()
    r = cli(root, "ledger", "append", "access", "ts=garbage", "agent=a", "command=used", "query=q", "shown=a,a,a")
    assert r.exit_code == 2 and "ledger 'access' is memctl's own" in r.stderr, r.stderr
    assert (root / "ledgers" / "access.tsv").read_bytes() == before


def test_a_full_width_since_date_is_read_as_the_date_it_is(root):
    """`--expires ２０２６－０３－２０` was taken, `--since ２０２６－０３－１１` refused (an IME types them so)."""
    env = {"MEMCTL_NOW": "2026-03-12T09:00:00+09:00"}
    assert cli(root, "episode", "add", "決めた", "-t", "decision", env=env).exit_code == 0
    for argv in (["episode", "list", "--since", "２０２６－０３－１１"], ["recall", "決めた", "--source", "episodes",
                                                                      "--since", "２０２６－０３－１１"]):
        r = cli(root, *argv, env=env)
        assert r.exit_code == 0 and "決めた" in r.stdout, (argv, r.stdout, r.stderr)


def test_a_spreadsheet_export_is_named_so_by_adopt_and_doctor_with_how_to_convert_it(root):
    """A tester: a UTF-8 export with a byte-order mark and CRLF line ends: `ledger adopt` said "a raw CR
    (and 1 more problem) (hint: check --columns)", and doctor "no header line" for a file that has one
    (behind the mark). Both name the export now, and the command that converts it (which then adopts)."""
    path = root / "ledgers" / "excel.tsv"
    path.write_bytes("\ufeffdate\ttheme\r\n2026-12-01\tテーマ\r\n".encode())
    convert = f"perl -pi -e 's/^\\xEF\\xBB\\xBF// if $. == 1; s/\\r$//' {path}"
    done = memctl(root, "ledger", "adopt", str(path), "--name", "excel", "--columns", "date,theme")
    assert (done.returncode, done.stderr) == (1, f"memctl: error: {path} is a spreadsheet's export (a byte-order mark and "
                                                 f"CRLF line ends), not a ledger file as it is; nothing was declared "
                                                 f"(hint: convert it first: {convert})\n")
    doctor = memctl(root, "doctor")
    assert (f"ledgers/excel.tsv:1: warning: a spreadsheet's export (a byte-order mark and CRLF line ends), so memctl "
            f"does not read it: convert it ({convert}), then commit it") in doctor.stdout + doctor.stderr
    assert subprocess.run(convert, shell=True).returncode == 0
    assert path.read_bytes() == "date\ttheme\n2026-12-01\tテーマ\n".encode()
    assert memctl(root, "ledger", "adopt", str(path), "--name", "excel", "--columns", "date,theme").returncode == 0


def test_verify_of_a_ledger_committed_before_its_adoption_starts_where_it_became_one(root):
    """helper-80: the export committed as it came, then converted as adopt's hint says and adopted: verify
    said "commit ... (ledger: adopt excel) rewrote or removed line 1", for good. Before the adoption the
    file was no ledger (no valid header, not declared); after it, an edit is still named."""
    path = root / "ledgers" / "excel.tsv"
    path.write_bytes("\ufeffdate\ttheme\r\n2026-12-01\tテーマ\r\n".encode())
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the export, as it came")
    path.write_bytes("date\ttheme\n2026-12-01\tテーマ\n".encode())  # converted, as adopt's hint says
    assert memctl(root, "ledger", "adopt", str(path), "--name", "excel", "--columns", "date,theme").returncode == 0
    assert memctl(root, "ledger", "append", "excel", "date=2026-12-02", "theme=次").returncode == 0
    done = memctl(root, "ledger", "verify", "excel")
    assert done.returncode == 0 and "append-only" in done.stdout + done.stderr, done.stdout + done.stderr
    path.write_bytes(path.read_bytes().replace("次".encode(), "別".encode()))
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "an edit")
    done = memctl(root, "ledger", "verify", "excel")
    assert done.returncode == 1 and "(an edit) rewrote or removed line 3" in done.stdout + done.stderr
