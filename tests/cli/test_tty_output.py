"""Output for people: on a terminal every table has a header row and `recall --explain` is a block per
hit that fits 80 columns; piped, the same headerless lines as before, byte for byte.

Every command runs as a real `python -m memctl` process on a real store: with MEMCTL_FORCE_TTY=1 and
COLUMNS=80 for a terminal (rich lays the table out for 80 cells), in a real tmux pane of 80 columns
where it matters (recall --explain with English and Japanese facts), and through a pipe otherwise.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from rich.cells import cell_len

from conftest import REPO, git, memctl
from memctl.cli.explain import blocks
from memctl.output import WRAPPED_ROOM

NOW = "2026-04-10T09:00:00+09:00"
PINNED = {"MEMCTL_NOW": NOW, "MEMCTL_NO_SERVER": "1"}
SESSION = REPO / "tests" / "fixtures" / "claude-code" / "5d0c6a1e-1111-4a7b-9c1d-000000000001.jsonl"
JA = "本番環境へのデプロイは火曜日の午前中だけに行い、凍結期間の後は必ずリリース担当者の確認を受けること"
EN = "Deploys to production happen only on Tuesday mornings, and after a freeze the release owner signs off first"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Facts in both languages (two that merge, two that conflict, a procedure, one to forget by policy),
    episodes, a ledger with a repeated value, a recall in the access log and a filled vector cache."""
    root = tmp_path_factory.mktemp("tty") / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    env.update({**PINNED, "HF_HUB_OFFLINE": "1"})

    def run(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], capture_output=True,
                              text=True, env=env, timeout=300)
        assert done.returncode == 0, (args, done.stderr)

    subprocess.run([sys.executable, "-m", "memctl", "init", str(root)], check=True, capture_output=True, env=env)
    toml = root / "memctl.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + '\n[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n'
                    '\n[[forget.policy]]\nname = "worthless"\ntarget = "facts"\ncondition = "importance < 0.1"\n'
                    'action = "archive"\n', encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "config")
    run("remember", "deploy-ja", "-d", JA, "--type", "feedback")
    run("remember", "deploy-en", "-d", EN, "--type", "project")
    run("remember", "keep", "-d", "Run the full test suite with pytest before every commit", "--confidence", "1.0")
    run("remember", "gone", "-d", "Before every commit, run the full test suite with pytest")
    run("remember", "fri", "-d", "原稿の締切は金曜日")
    run("remember", "mon", "-d", "原稿の締切は月曜日")
    run("remember", "low-thing", "-d", "a thing of no value", "--importance", "0.05")
    run("remember", "publish", "-d", "Publish an article", "--type", "procedure", "--body", "1. write 2. publish")
    run("episode", "add", "決めた: デプロイは火曜日", "--type", "decision", "--outcome", "守られている")
    run("episode", "add", "deploy failed on a timeout", "--type", "error")
    run("ledger", "create", "themes", "--columns", "host,theme")
    for host, theme in (("a", "猫の餌の選び方"), ("a", "犬の散歩"), ("b", "猫の餌の選び方")):
        run("ledger", "append", "themes", f"host={host}", f"theme={theme}")
    run("recall", "deploy Tuesday デプロイ")
    return root


def piped(root, *args: str) -> subprocess.CompletedProcess:
    return memctl(root, *args, env=PINNED)


def on_terminal(root, *args: str) -> subprocess.CompletedProcess:
    """As on a terminal 80 columns wide (rich reads COLUMNS)."""
    return memctl(root, *args, env={**PINNED, "MEMCTL_FORCE_TTY": "1", "COLUMNS": "80"})


def header(stdout: str) -> list[str]:
    """The first table's header cells (a header cut over lines joined back), from rich's box lines."""
    lines = stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    rule = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    cells: list[str] = []
    for line in lines[top + 1:rule]:
        parts = [part.strip() for part in line.strip("┃").split("┃")]
        cells = parts if not cells else [a + b for a, b in zip(cells, parts)]
    return cells


# The columns each table shows at 80 columns: not one every cell of which is empty (an episode's agent, a
# dry run's problem, the success rate of a procedure never run), nor those a command can spare where its ids,
# times, names and paths would not fit whole beside a description of output.WRAPPED_ROOM cells.
TABLES = [
    (["list"], ["name", "type", "description", "path"]),
    (["recall", "デプロイ 火曜日", "--no-log"], ["score", "name", "type", "description", "path"]),
    (["episode", "list"], ["id", "ts", "description"]),
    (["episode", "recall", "デプロイ", "--no-log"], ["name", "description", "path"]),
    (["episode", "import", "claude-code", str(SESSION), "--dry-run"],
     ["path", "imported", "already", "bad", "left_out", "torn"]),
    (["ledger", "list"], ["name", "path", "rows", "columns"]),
    (["ledger", "rows", "themes"], ["host", "theme"]),
    (["ledger", "dups", "themes", "theme"], ["theme"]),
    (["ledger", "stats", "themes", "--by", "host"], ["count", "host"]),
    (["conflicts"], ["a", "b", "score", "differs", "description_a", "description_b"]),
    (["audit"], ["ts", "agent", "command", "query", "shown"]),
    (["cache", "status"], ["embedder", "configured", "via"]),
    (["procedure", "list"], ["name", "rank", "runs", "version", "trigger"]),
    (["forget", "--policies", "--dry-run"], ["action", "kind", "name", "policy", "matched"]),
    (["consolidate"], ["survivor", "absorbed", "score", "overlap"]),
    (["log", "deploy-ja"], ["date", "commit", "message", "changed"]),
]


@pytest.mark.parametrize("args, columns", TABLES, ids=[" ".join(a[:2]) for a, _ in TABLES])
def test_every_table_on_a_terminal_has_a_header_row_and_fits_80_columns(store, args, columns):
    done = on_terminal(store, *args)
    assert done.returncode == 0, done.stderr
    assert header(done.stdout) == columns, done.stdout
    assert max(cell_len(line) for line in done.stdout.splitlines()) <= 80, done.stdout


def test_procedure_record_on_a_terminal_is_a_table_and_piped_the_line_it_was(store):
    done = on_terminal(store, "procedure", "record", "publish", "--success", "--score", "8", "--no-commit")
    assert done.returncode == 0, done.stderr
    assert header(done.stdout) == ["name", "runs", "success_rate", "quality", "rank"]
    line = piped(store, "procedure", "record", "publish", "--failure", "--no-commit")
    assert line.stdout == "publish\truns 2\tsuccess_rate 0.9000\tquality 8.0000\trank 0.8600\n"


def test_piped_output_stays_the_headerless_lines_it_was(store):
    assert piped(store, "ledger", "dups", "themes", "theme").stdout == "猫の餌の選び方\n"
    assert piped(store, "ledger", "stats", "themes", "--by", "host").stdout == "      2 a\n      1 b\n"
    assert piped(store, "ledger", "rows", "themes").stdout == "a\t猫の餌の選び方\na\t犬の散歩\nb\t猫の餌の選び方\n"
    assert piped(store, "cache", "status").stdout.startswith("embedder\te5-small-q4\tconfigured: e5-small-q4\tvia: in-process\nfacts\t")
    rebuilt = piped(store, "cache", "rebuild", "--facts").stdout
    assert rebuilt == "facts\t8 rows\te5-small-q4\n"
    listed = piped(store, "list", "--type", "feedback").stdout
    assert listed == f"deploy-ja\tfeedback\t{JA}\tmemory/deploy-ja.md\n"


def test_a_table_without_rows_prints_nothing_on_a_terminal_either(store):
    for args in (["ledger", "rows", "themes", "--where", "host=nobody"], ["list", "--type", "reference"]):
        done = on_terminal(store, *args)
        assert (done.returncode, done.stdout) == (0, ""), args


def test_a_long_table_on_a_terminal_is_its_header_then_the_piped_lines(store, tmp_path):
    """Past output.TABLE_ROWS rows rich would take seconds: the header line, then what a pipe gets."""
    from memctl.output import TABLE_ROWS

    root = tmp_path / "big"
    subprocess.run(["cp", "-a", str(store), str(root)], check=True)
    assert piped(root, "ledger", "create", "big", "--columns", "n,text").returncode == 0
    records = "".join(f"{i}\t猫{i}\n" for i in range(TABLE_ROWS + 1))
    assert memctl(root, "ledger", "append", "big", "-", input=records, env=PINNED).returncode == 0
    assert piped(root, "ledger", "rows", "big").stdout == records
    assert on_terminal(root, "ledger", "rows", "big").stdout == "n\ttext\n" + records


def test_explain_on_a_terminal_is_a_block_per_hit_and_piped_the_tsv_it_was(store):
    done = on_terminal(store, "recall", "deploy Tuesday デプロイ", "--explain", "--no-log", "--k", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    hits = done.stdout.split("\n\n")
    assert len(hits) == 2
    for hit in hits:
        rows = hit.splitlines()
        assert rows[0].split()[0] in ("1.", "2.") and rows[0].split()[1] in ("deploy-ja", "deploy-en")
        assert rows[0].split()[-2] == "score" and len(rows[0].split()[-1]) == 5  # 0.xxx, never wrapped
        assert any(row.split()[:1] == ["signals"] for row in rows) and any(row.split()[:1] == ["factors"] for row in rows)
        words = " ".join(hit.split())
        for label in ("keyword", "bm25", "vector", "cosine", "window", "relevance", "importance", "confidence",
                      "recency", "frequency"):
            assert f" {label} " in words
    ja = next(hit for hit in hits if "deploy-ja" in hit.splitlines()[0])
    assert JA in "".join(row.strip() for row in ja.splitlines()[2:5])  # wrapped whole, not one character lost
    tsv = piped(store, "recall", "deploy Tuesday デプロイ", "--explain", "--no-log", "--k", "2")
    assert [len(line.split("\t")) for line in tsv.stdout.splitlines()] == [13, 13]


def _pane(command: list[str], columns: int = 80) -> list[str]:
    """The lines `command` printed in a real tmux pane `columns` wide, wrapped lines joined back (-J)."""
    socket = f"memctl-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX", "MEMCTL_FORCE_TTY")}
    shell = " ".join(shlex.quote(a) for a in command) + "; echo __done__; sleep 60"
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-x", str(columns), "-y", "200", shell], env=env, check=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            shown = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True,
                                   text=True, check=True).stdout
            if "__done__" in shown:
                return shown[: shown.index("__done__")].rstrip("\n").splitlines()
            time.sleep(0.3)
        raise AssertionError(f"the command did not finish in the pane: {shown}")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")
def test_explain_fits_a_real_80_column_terminal_with_english_and_japanese(store):
    env = ["env", f"MEMCTL_NOW={NOW}", "MEMCTL_NO_SERVER=1", "HF_HUB_OFFLINE=1"]
    lines = _pane([*env, sys.executable, "-m", "memctl", "--root", str(store), "recall", "deploy Tuesday デプロイ",
                   "--explain", "--no-log", "--k", "3"])
    assert lines and max(cell_len(line.rstrip()) for line in lines) <= 80, "\n".join(lines)
    text = "\n".join(lines)
    assert "deploy-ja" in text and "deploy-en" in text
    assert JA in "".join(line.strip() for line in lines)  # every kanji and kana there, none cut in half
    assert EN in " ".join(line.strip() for line in lines)
    assert sum(line.lstrip().startswith("factors") for line in lines) == sum(line.lstrip().startswith("signals")
                                                                              for line in lines) >= 2


@pytest.mark.parametrize("width", [24, 40, 80, 132])
def test_blocks_never_pass_the_width_and_keep_every_character(width):
    row = {"rank": 1, "name": "a-rather-long-fact-name-that-goes-on-and-on-and-on", "type": "feedback", "status": "superseded",
           "path": "memory/a-rather-long-fact-name.md", "description": JA + " " + EN, "outcome": "守られている",
           "score": 0.795, "signals": {"bm25": 13.21, "keyword": 1.0, "cosine": 0.871, "vector": None, "window": 0.5},
           "factors": {"relevance": 1.0, "importance": 0.6, "confidence": 0.7, "recency": 1.0, "frequency": 0.0}}
    named_in_japanese = {**row, "rank": 2, "name": "デプロイの決まりごと（火曜日の午前中だけ、凍結期間の後は確認）"}
    lines = blocks([row, named_in_japanese], width)
    assert max(cell_len(line) for line in lines) <= width
    joined = "".join(line.strip() for line in lines)
    assert JA in joined and row["name"] in joined and named_in_japanese["name"] in joined
    assert "13.210" in joined and "守られている" in joined
    assert lines.count("") == 1  # one blank line between the two hits


def test_a_warning_or_error_naming_pushed_text_shows_its_control_characters_and_stays_one_line(capsys):
    """stderr is a terminal or a job's log: an ESC sequence in a name or message another clone pushed
    (a window title, OSC 52 to the clipboard) is shown as `\\x1b`, a line break is a space, a TAB stays."""
    from memctl import output

    output.warn("skipped memory/x\x1b]0;pwned\x07.md", hint="see\nthis")
    output.error("bad\r\nline\u202e")
    output.info("a\tb\x9b2J")
    assert capsys.readouterr().err.splitlines() == [
        "memctl: warning: skipped memory/x\\x1b]0;pwned\\x07.md (hint: see this)",
        "memctl: error: bad line\\u202e",
        "memctl: info: a\tb\\x9b2J".replace("info: ", ""),
    ]


def test_document_recall_at_80_columns_keeps_its_headers_whole(root, tmp_path):
    """helper-71: with the eighth column (source_description) every header was cut in two at 80 columns
    (`relevanc` / `e`); the source's description, the same for each of its hits, goes first."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "デプロイ手順.md").write_text("# デプロイ\n\n## ロールバック\n\n障害が起きたら make rollback を実行する。\n", encoding="utf-8")
    assert memctl(root, "source", "add", "notes", str(notes), "-d", "チームのメモ").returncode == 0
    assert memctl(root, "source", "index").returncode == 0
    asked = ("recall", "ロールバックの方法", "--source", "docs", "--mode", "keyword", "--no-log")
    narrow = on_terminal(root, *asked)
    lines = narrow.stdout.splitlines()
    assert lines[0].startswith("┏") and lines[2].startswith("┡"), narrow.stdout  # the headers on one line: whole
    shown = header(narrow.stdout)  # what recall can spare left out: the description, path and heading there
    assert shown[-3:] == ["description", "path", "heading"], narrow.stdout
    assert set(shown) <= {"rank", "score", "relevance", "type", "description", "path", "heading"}
    assert max(cell_len(line) for line in narrow.stdout.splitlines()) <= 80
    wide = memctl(root, *asked, env={**PINNED, "MEMCTL_FORCE_TTY": "1", "COLUMNS": "200"})
    assert header(wide.stdout)[-1] == "source_description" and "チームのメモ" in wide.stdout
    assert piped(root, *asked).stdout.rstrip("\n").endswith("\tチームのメモ")  # piped, the columns stay as they were


# ---------------------------------------------------------------- what a table keeps whole (helper-77)

@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """A tester's store: facts named as people name them, one in Japanese, episodes with and without an
    agent, and a document source inside the store (its hits' paths `notes/note046.md:5-7`)."""
    root = tmp_path_factory.mktemp("layout") / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    env.update({**PINNED, "HF_HUB_OFFLINE": "1"})

    def run(*args: str, agent: str = "") -> None:
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], capture_output=True,
                              text=True, env={**env, "MEMCTL_AGENT": agent}, timeout=300)
        assert done.returncode == 0, (args, done.stderr)

    subprocess.run([sys.executable, "-m", "memctl", "init", str(root)], check=True, capture_output=True, env=env)
    run("remember", "deploy-friday", "-d", "No deploys to production on Friday afternoons; the on-call team is thin",
        "--type", "feedback")
    run("remember", "error-budget", "-d", "SLO is 99.9% availability; when the error budget is spent new features stop")
    run("remember", "ja-fact-0330", "-d", JA, "--type", "project")
    run("episode", "add", "Decided to move the production DB to PostgreSQL 17 over the weekend, replicas first",
        "--type", "decision", "--importance", "0.7", agent="claude-code")
    run("episode", "add", "deploy failed on a timeout in the migration step", "--type", "error")
    (root / "notes").mkdir()
    note = "# Note 46\n\nsome intro\n\n## Rollback\n\nrun make rollback when the deploy of build 46 fails, then page\n"
    (root / "notes" / "note046.md").write_text(note, encoding="utf-8")
    run("source", "add", "notes", str(root / "notes"), "-d", "team notes")
    run("source", "index")
    return root


def at_width(root, width: int, *args: str) -> list[str]:
    """The lines of a command's table on a terminal `width` columns wide; each fits it."""
    done = memctl(root, *args, env={**PINNED, "MEMCTL_FORCE_TTY": "1", "COLUMNS": str(width), "TERM": "dumb"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and max(cell_len(line) for line in lines) <= width, done.stdout
    return lines


def column_text(lines: list[str], name: str) -> list[str]:
    """A column's cells, one a row, the lines of a wrapped cell joined with a space (`│` rows, by header)."""
    heads = [part.strip() for part in lines[1].strip("┃").split("┃")]
    at = heads.index(name)
    cells: list[str] = []
    for line in lines[3:-1]:
        part = line.strip("│").split("│")[at].strip()
        if line.strip("│").split("│")[0].strip() or not cells:  # a new row starts where the first column has text
            cells.append(part)
        elif part:
            cells[-1] += " " + part
    return cells


def aligned(lines: list[str]) -> bool:
    """Whether every line's column rules sit at the same cells (a kanji taking two)."""
    def rules(line: str) -> list[int]:
        return [cell_len(line[:at]) for at, char in enumerate(line) if char in "│┃┏┓┳┡┩╇└┘┴"]

    return len({tuple(rules(line)) for line in lines}) == 1


@pytest.mark.parametrize("width", [80, 100])
def test_episode_list_keeps_ids_and_times_whole(layout, width):
    """A tester at 100 columns: `2026-12-07T02:31` / `:08+00:00`, and at 80 the id too (`ep-20261207023` /
    `108-03fb`), while `importance` took 10 cells for `0.7`. The description wraps instead, and at 80 the
    columns episode list can spare are left out."""
    lines = at_width(layout, width, "episode", "list")
    ids = column_text(lines, "id")
    assert len(ids) == 2 and all(len(i) == 22 and " " not in i and i.startswith("ep-") for i in ids), "\n".join(lines)
    assert all(t.startswith("2026-04-10T09:00:00") and " " not in t for t in column_text(lines, "ts")), "\n".join(lines)
    assert column_text(lines, "description")[1] == "deploy failed on a timeout in the migration step"
    if width == 100:
        assert column_text(lines, "agent") == ["claude-code", ""]
        assert column_text(lines, "type") == ["decision", "error"]


def test_a_column_every_cell_of_which_is_empty_is_left_out_on_a_terminal(store):
    """No episode has an agent: the column, header too, took 9 cells of a terminal's 100 for nothing.
    Piped, the field is still there (empty), byte for byte."""
    lines = at_width(store, 100, "episode", "list")
    assert "agent" not in lines[1] and "importance" in lines[1], "\n".join(lines)
    assert all(line.split("\t")[2] == "" for line in piped(store, "episode", "list").stdout.splitlines())


def test_cache_status_keeps_model_names_times_and_headers_whole_at_80(store):
    """A tester at 80 columns: `embedde` / `r`, `e5-smal` / `l-q4`, `passag` / `e`, and an empty `problem`
    column kept 8 cells."""
    lines = at_width(store, 80, "cache", "status")
    table = lines[lines.index(next(line for line in lines[1:] if line.startswith("┏"))):]
    heads = table[1].strip("┃").split("┃")
    assert table[2].startswith("┡") and "problem" not in table[1], "\n".join(table)  # headers whole, on one line
    assert [head.strip() for head in heads][:2] == ["source", "embedder"]
    models = column_text(table, "embedder")
    assert models and all(cell == "e5-small-q4 (e5-small-q4)" for cell in models), "\n".join(table)
    assert all(len(ts) == 25 and " " not in ts for ts in column_text(table, "updated")), "\n".join(table)
    assert all(" " not in source for source in column_text(table, "source"))


def test_list_at_40_columns_keeps_names_and_types_whole(layout):
    """A tester at 40 columns: `feedbac` / `k`, `deploy-` / `friday`. The path (it holds the name) goes."""
    lines = at_width(layout, 40, "list")
    assert column_text(lines, "name") == ["deploy-friday", "error-budget", "ja-fact-0330"], "\n".join(lines)
    assert column_text(lines, "type") == ["feedback", "project", "project"]
    assert "".join(column_text(lines, "description")[2].split()) == JA  # every kanji and kana there
    assert aligned(lines), "\n".join(lines)


def test_recall_at_80_keeps_the_path_whole_and_gives_the_description_room(layout):
    """A tester at 80 columns: `memory/ja-fac` / `t-0330.md`, and ~13 cells for the description. What recall
    can spare (relevance, rank, ...) goes first; the Japanese description wraps, aligned."""
    lines = at_width(layout, 80, "recall", "デプロイ 火曜日 午前中", "--no-log", "--mode", "keyword")
    assert column_text(lines, "path")[0] == "memory/ja-fact-0330.md", "\n".join(lines)
    assert column_text(lines, "name")[0] == "ja-fact-0330"
    heads = lines[1].strip("┃").split("┃")
    assert cell_len(heads[[h.strip() for h in heads].index("description")]) >= 2 + WRAPPED_ROOM, "\n".join(lines)
    assert "".join(column_text(lines, "description")[0].split()) == JA
    assert aligned(lines), "\n".join(lines)


def test_document_recall_at_80_keeps_the_path_a_user_copies_whole(layout):
    """A tester at 80 columns: `notes/note046.md:3-5` broke over two lines."""
    lines = at_width(layout, 80, "recall", "rollback build", "--source", "docs", "--no-log", "--mode", "keyword")
    assert column_text(lines, "path") == ["notes/note046.md:5-7"], "\n".join(lines)
    assert lines[2].startswith("┡")  # the headers whole, on one line


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")
def test_episode_list_in_a_real_80_column_pane_keeps_ids_and_times_whole(layout):
    env = ["env", f"MEMCTL_NOW={NOW}", "MEMCTL_NO_SERVER=1", "HF_HUB_OFFLINE=1"]
    lines = _pane([*env, sys.executable, "-m", "memctl", "--root", str(layout), "episode", "list"])
    assert lines and max(cell_len(line.rstrip()) for line in lines) <= 80, "\n".join(lines)
    assert sum(bool(re.search(r"│ ep-[0-9]{14}-[0-9a-f]{4} │ 2026-04-10T09:00:00\+09:00 │", line))
               for line in lines) == 2, "\n".join(lines)


@pytest.mark.parametrize("width", [40, 80])
def test_a_wrapped_japanese_cell_keeps_the_line_breaking_rule(root, width):
    """rich folded a description between any two characters: `当番表「週次` / `」を参照` at 40 columns,
    `始まり` / `、担当` at 80. memctl breaks the cells itself (memctl.linebreak)."""
    from memctl.linebreak import NO_END, NO_START

    said = ["チームのデプロイは毎週火曜日の十時に始まり、担当は三番目のメンバー（当番表「週次」を参照）。障害時はまず、"
            "ステータスページを更新して、次にチャットで「ロールバック」と書き込み、担当者が確認する。",
            "ソフトウェアのアップデートはキャッシュをクリアしてから行う。デプロイの前に「リリースノート」を書き、"
            "レビューを受けること。ロールバックの手順書（ウィキ）を確認する。",
            "本番環境へのデプロイは火曜日の午前中だけに行い、凍結期間の後は必ずリリース担当者の確認を受けること。"
            "チェックリスト「デプロイ前」を使う。"]
    for i, text in enumerate(said):
        assert memctl(root, "remember", f"ja{i}", "-d", text).returncode == 0
    lines = at_width(root, width, "list")
    at = [part.strip() for part in lines[1].strip("┃").split("┃")].index("description")
    pieces = [line.strip("│").split("│")[at].strip() for line in lines[3:-1]]
    assert [" ".join(column_text(lines, "description")).replace(" ", "")] == ["".join(said)], "\n".join(lines)
    assert [(a, b) for a, b in zip(pieces, pieces[1:]) if b[:1] in NO_START or a[-1:] in NO_END] == [], "\n".join(lines)
    assert aligned(lines), "\n".join(lines)
