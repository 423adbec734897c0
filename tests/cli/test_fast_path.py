"""The hand-parsed fast paths (memctl/cli/fast.py) behave exactly like the Typer commands.

Each command line runs as a real subprocess twice, on two identical copies of
a store: once as is, once with MEMCTL_NO_FAST=1 (the Typer app). Exit code,
stdout, stderr, the ledger's bytes and the git history must be the same.
Commits are made with fixed dates, so equal trees give equal commit ids.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from memctl import ledger
from memctl.store import init_store, open_store

FIXED_DATES = {"GIT_AUTHOR_DATE": "2026-11-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-11-01T00:00:00Z"}


def run(root, args, *, fast: bool, stdin: bytes | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **FIXED_DATES)
    env.pop("MEMCTL_NO_FAST", None)
    if not fast:
        env["MEMCTL_NO_FAST"] = "1"
    argv = [sys.executable, "-m", "memctl", *[a.replace("{root}", str(root)) for a in args]]
    return subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd or root, timeout=120)


def git_log(root) -> str:
    return subprocess.run(["git", "-C", str(root), "log", "--format=%H %s"], capture_output=True, text=True).stdout


@pytest.fixture
def pair(tmp_path):
    """Two identical stores with a `themes` ledger (unique theme) holding one row."""
    first = tmp_path / "a" / "store"
    init_store(first)
    store = open_store(first)
    ledger.create(store, "themes", ["date", "platform", "theme"], unique="theme")
    ledger.append(store, "themes", [{"date": "2026-09-14", "platform": "zenn", "theme": "MCPサーバーのテスト / [x]*"}])
    with open(first / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "char-ngram"\n')
    subprocess.run(["git", "-C", str(first), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "ngram"], check=True, env=dict(os.environ, **FIXED_DATES))
    second = tmp_path / "b" / "store"
    shutil.copytree(first, second, symlinks=True)
    return first, second


def same_both_ways(pair, args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    fast_root, typer_root = pair
    fast = run(fast_root, args, fast=True, stdin=stdin)
    slow = run(typer_root, args, fast=False, stdin=stdin)
    norm = lambda text, root: text.replace(str(root).encode(), b"{root}")  # noqa: E731
    assert (fast.returncode, norm(fast.stdout, fast_root), norm(fast.stderr, fast_root)) == \
           (slow.returncode, norm(slow.stdout, typer_root), norm(slow.stderr, typer_root)), args
    assert (fast_root / "ledgers" / "themes.tsv").read_bytes() == (typer_root / "ledgers" / "themes.tsv").read_bytes()
    assert git_log(fast_root) == git_log(typer_root)
    return fast


APPEND = ["ledger", "append", "themes"]
ROW = ["date=2026-10-01", "platform=note", "theme=新しいテーマ\tタブ付き"]


@pytest.mark.parametrize("args, stdin, code", [
    (APPEND + ROW, None, 0),
    (APPEND + ROW + ["--json"], None, 0),
    (APPEND + ["--no-commit", *ROW, "--unique", "platform"], None, 0),
    (APPEND + ROW + ["--unique=theme", "--no-commit"], None, 0),
    (["--root", "{root}", *APPEND, *ROW], None, 0),
    (["--root={root}", *APPEND, *ROW], None, 0),
    (APPEND + ["date=2026-10-01", "platform=zenn", "theme=MCPサーバーのテスト / [x]*"], None, 1),
    (APPEND + ["date=x", "platform=y", "theme=z", "bogus=1"], None, 2),
    (APPEND + ["date=x", "platform=y"], None, 2),
    (APPEND + ["date=x", "date=y", "platform=y", "theme=z"], None, 2),
    (APPEND + ["novalue"], None, 2),
    (APPEND, None, 2),
    (APPEND + ["-"], b"2026-10-02\tqiita\tfrom stdin\n2026-10-03\tzenn\tsecond \\t line\n", 0),
    (APPEND + ["-", "--json"], '{"date": "2026-10-04", "platform": "note", "theme": "ndjson"}\n'.encode(), 0),
    (APPEND + ["-"], b"\xff\xfe\tbad\tutf8\n", 2),
    (APPEND + ["-", "date=x"], None, 2),
    (["ledger", "append", "../etc", "a=1"], None, 2),
    (["ledger", "append", "nope", "a=1"], None, 3),
    (["--root", "/nonexistent/store", *APPEND, *ROW], None, 3),
    (APPEND + ROW + ["--unique"], None, 2),  # falls back: Typer reports the missing value
    (APPEND + ROW + ["--unique", "--no-commit"], None, 2),
    (APPEND + ROW + ["--bogus"], None, 2),
    (APPEND + ["--help"], None, 0),
    (APPEND + ROW + ["--unique", "nocolumn"], None, 2),
])
def test_ledger_append_same_both_ways(pair, args, stdin, code):
    assert same_both_ways(pair, args, stdin).returncode == code


NEAR = ["near-dup", "--ledger", "themes", "--column", "theme"]


@pytest.mark.parametrize("args, stdin, code", [
    (NEAR + ["MCPサーバーのテスト / [x]"], None, 1),
    (NEAR + ["Rustで書くCLIツール入門", "--json"], None, 0),
    (["near-dup", "check", "MCPサーバーのテスト", "--ledger", "themes", "--top", "1", "--threshold", "0.99"], None, 0),
    (["near-dup", "scan"], None, 2),  # a subcommand, not a text: Typer's
    (["near-dup", "check", "scan", "--ledger", "themes"], None, 0),
    (NEAR + ["--stdin"], "MCPサーバーのテスト / [x]\n全く別の話題\n".encode(), 1),
    (NEAR + ["--stdin", "--json"], "全く別の話題\n".encode(), 0),
    (NEAR + ["a", "b"], None, 2),
    (NEAR + ["x", "--top", "many"], None, 2),
    (["near-dup", "x", "--ledger", "themes", "--column", "nope"], None, 2),
    (["near-dup", "x", "--ledger", "missing"], None, 3),
    (["near-dup", "x"], None, 2),
    (NEAR, None, 2),
])
def test_near_dup_same_both_ways(pair, args, stdin, code):
    assert same_both_ways(pair, args, stdin).returncode == code


@pytest.fixture
def recall_pair(pair):
    """The pair with the same facts and an episode: written in the first store, then copied."""
    first, second = pair
    for name, text in (("deploy-friday", "Never deploy the payment service on Fridays"),
                       ("zenn-limit", "Zenn投稿は1日1件まで")):
        run(first, ["remember", name, "-d", text, "-t", "feedback"], fast=True)
    run(first, ["episode", "add", "Payment deploy failed on Friday", "-t", "error"], fast=True)
    shutil.rmtree(second)
    shutil.copytree(first, second, symlinks=True)
    return pair


@pytest.mark.parametrize("args, code", [
    (["recall", "payment deploy", "--mode", "keyword", "--no-log"], 0),
    (["recall", "payment deploy", "--mode", "keyword", "--no-log", "--json", "--explain"], 0),
    (["recall", "Zenn 投稿", "--mode", "keyword", "--no-log", "--paths", "--k", "1"], 0),
    (["recall", "payment", "--source", "all", "--mode", "keyword", "--no-log", "--min-score", "0.1", "-t", "feedback"], 0),
    (["recall", "zzzz qqq", "--mode", "keyword", "--no-log"], 1),
    (["recall", "zzzz qqq", "--mode", "keyword", "--no-log", "--json"], 1),
    (["recall", "", "--no-log"], 2),
    (["recall", "x", "--min-score", "1.5"], 2),
    (["recall", "x", "--min-score", "-0.5"], 2),  # looks like an option: Typer's path
    (["recall", "x", "--k", "many"], 2),
    (["recall", "x", "--mode", ""], 2),  # refused, not taken for the default
    (["recall", "x", "--mode", "fuzzy"], 2),
    (["context", "-q", "x", "--mode", "", "--no-log"], 2),
    (["recall", "x", "--source", "nope"], 3),
    (["recall"], 2),
    (["recall", "a", "b"], 2),
    (["episode", "recall", "payment deploy", "--mode", "keyword", "--no-log", "--json"], 0),
    (["episode", "recall", "payment", "--agent", "nobody", "--mode", "keyword", "--no-log"], 1),
    (["context", "--query", "payment deploy", "--mode", "keyword", "--no-log", "--budget", "300"], 0),
    (["context", "-q", "payment", "--mode", "keyword", "--no-log", "--json"], 0),
    (["context", "--budget", "10", "--no-log"], 2),
    (["context", "--query", " ", "--no-log"], 2),
])
def test_recall_and_context_same_both_ways(recall_pair, args, code):
    assert same_both_ways(recall_pair, args).returncode == code


def test_recall_and_context_start_without_typer(recall_pair):
    root = recall_pair[0]
    assert "typer" not in loaded(root, "recall", "payment", "--mode", "keyword", "--no-log").split(",")
    assert "typer" not in loaded(root, "context", "-q", "payment", "--mode", "keyword", "--no-log").split(",")
    assert "typer" in loaded(root, "recall", "payment", "--no-log", env={"MEMCTL_NO_FAST": "1"}).split(",")


def test_recall_and_context_on_unchanged_facts_parse_no_yaml(recall_pair):
    """Reading MEMORY.md for the context bundle imported memctl.index, and with it fact.py and PyYAML: 20 ms
    of a 120 ms budget. With the facts unchanged since the last query, neither command parses YAML."""
    root = recall_pair[0]
    assert "yaml" in loaded(root, "remember", "new-one", "-d", "a fact written now", "--no-commit").split(",")  # the probe can fail
    time.sleep(2.1)  # past rindex.RACY_NS: a file changed as the index read it is read again by the next query
    loaded(root, "recall", "payment", "--mode", "keyword", "--no-log")  # the index takes the new fact in
    assert "yaml" not in loaded(root, "recall", "payment", "--mode", "keyword", "--no-log").split(",")
    assert "yaml" not in loaded(root, "context", "-q", "payment", "--mode", "keyword", "--no-log").split(",")


PROBE = """
import sys
sys.argv = ["memctl"] + sys.argv[1:]
try:
    from memctl.cli import main
    main()
except SystemExit as exc:
    code = exc.code
print("LOADED:" + ",".join(sorted(m for m in ("typer", "click", "rich", "dataclasses", "git", "yaml") if m in sys.modules)),
      file=sys.stderr)
"""


def loaded(root, *args, env=None) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, "--root", str(root), *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=120)
    return proc.stderr.rsplit("LOADED:", 1)[1].strip()


def test_ledger_append_starts_without_typer_rich_or_dataclasses(pair):
    root = pair[0]
    assert loaded(root, *APPEND, *ROW, "--no-commit") == ""
    # the probe can fail: the Typer path, and a form the fast path leaves alone, load them
    assert "typer" in loaded(root, *APPEND, *ROW, "--no-commit", env={"MEMCTL_NO_FAST": "1"})
    assert "typer" in loaded(root, *APPEND, "--help")


def test_a_committed_append_runs_git_without_importing_gitpython(pair):
    root = pair[0]
    assert loaded(root, *APPEND, *ROW) == ""
    assert git_log(root).splitlines()[0].endswith("ledger: append themes (+1)")
    # ledger verify reads blobs through GitPython: the probe sees that import
    assert "git" in loaded(root, "ledger", "verify", "themes").split(",")


def test_near_dup_starts_without_typer(pair):
    assert "typer" not in loaded(pair[0], *NEAR, "x").split(",")


@pytest.mark.parametrize("args", [APPEND + ["-"], NEAR + ["--stdin"]])
def test_ctrl_c_while_reading_stdin_ends_the_same_both_ways(pair, args):
    """Exit 130 and no traceback, as Typer does, and nothing appended."""
    import signal
    import time

    results = []
    for root, fast in ((pair[0], True), (pair[1], False)):
        env = dict(os.environ)
        env.pop("MEMCTL_NO_FAST", None)
        if not fast:
            env["MEMCTL_NO_FAST"] = "1"
        # A suite started in the background (`cmd &`, nohup) has SIGINT ignored, and children inherit
        # that: give the child the default disposition a terminal's Ctrl-C meets.
        proc = subprocess.Popen([sys.executable, "-m", "memctl", *args], cwd=root, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        wchan = f"/proc/{proc.pid}/wchan"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until it is blocked reading the pipe (Linux)
            try:
                with open(wchan) as handle:
                    if "pipe" in handle.read():
                        break
            except OSError:
                time.sleep(2.0)  # no /proc: give it time to start
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        results.append((proc.returncode, out, b"Traceback" in err))
    assert results[0] == results[1] == (130, b"", False), results
    assert (pair[0] / "ledgers" / "themes.tsv").read_bytes() == (pair[1] / "ledgers" / "themes.tsv").read_bytes()
