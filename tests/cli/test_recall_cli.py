"""recall / audit / pin through the CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import access_log, cli, git, memctl
from memctl import recall


def _seed(root):
    cli(root, "remember", "deploy-friday", "--type", "feedback", "--description", "Never deploy the payment service on Fridays")
    cli(root, "remember", "zenn-limit", "--type", "feedback", "--description", "Zenn投稿は1日1件まで")
    cli(root, "remember", "grafana", "--description", "Dashboards live in Grafana; rare word xylophone")


def test_recall_outputs(root):
    _seed(root)
    r = cli(root, "recall", "xylophone", "--mode", "keyword", "--paths")
    assert (r.exit_code, r.stdout) == (0, "memory/grafana.md\n")
    r = cli(root, "recall", "Zenn 投稿", "--mode", "keyword", "--json", "--explain")
    data = json.loads(r.stdout)
    assert data[0]["name"] == "zenn-limit"
    assert set(data[0]["factors"]) == {"relevance", "importance", "confidence", "recency", "frequency"}
    r = cli(root, "recall", "payment", "--mode", "keyword")
    full = f"{recall.keyword_relevance(1.0, False):.3f}"  # the one term is in the fact: full coverage
    assert r.stdout.split("\t")[2:4] == [full, "deploy-friday"]  # rank, score, relevance, name, ...


def test_recall_queries_file_ndjson(root, tmp_path):
    _seed(root)
    qfile = tmp_path / "q.txt"
    qfile.write_text("xylophone\n\nZenn 投稿\n", encoding="utf-8")
    r = cli(root, "recall", "--queries", str(qfile), "--mode", "keyword", "--k", "1")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(l["query"], l["hits"][0]["name"]) for l in lines] == [("xylophone", "grafana"), ("Zenn 投稿", "zenn-limit")]
    access = access_log(root).splitlines()
    assert len(access) == 3


def test_no_log_and_audit(root):
    _seed(root)
    cli(root, "recall", "payment", "--mode", "keyword", "--no-log")
    assert access_log(root) == ""
    cli(root, "recall", "payment", "--mode", "keyword", env={"MEMCTL_AGENT": "bot"})
    r = cli(root, "audit", "--fact", "deploy-friday", "--json")
    rows = json.loads(r.stdout)
    assert [(x["agent"], x["query"]) for x in rows] == [("bot", "payment")]
    r = cli(root, "audit", "--never-shown", "--json")
    assert sorted(x["name"] for x in json.loads(r.stdout)) == ["grafana", "zenn-limit"]


def test_pin_unpin_commit(root):
    _seed(root)
    assert cli(root, "pin", "grafana").stdout == "memory/grafana.md\n"
    assert "pinned: true" in (root / "memory" / "grafana.md").read_text(encoding="utf-8")
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: pin grafana"
    cli(root, "unpin", "grafana")
    assert "pinned" not in (root / "memory" / "grafana.md").read_text(encoding="utf-8")
    assert cli(root, "pin", "missing").exit_code == 3


def test_recall_bad_input(root):
    _seed(root)
    assert cli(root, "recall", "x", "--source", "nope").exit_code == 3  # not found, as `source index nope`
    assert cli(root, "recall", "x", "--mode", "nope").exit_code == 2
    assert cli(root, "recall").exit_code == 2
    assert cli(root, "recall", "x", "--since", "yesterday-ish").exit_code == 2
    assert access_log(root) == ""


def test_nothing_relevant_prints_nothing_and_exits_1_like_grep(root):
    _seed(root)
    r = cli(root, "recall", "zzzz qqq nothing", "--mode", "keyword")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "")
    r = cli(root, "recall", "zzzz qqq nothing", "--mode", "keyword", "--json")
    assert (r.exit_code, r.stdout) == (1, "[]\n")
    r = cli(root, "recall", "zzzz qqq nothing", "--mode", "keyword", "--paths")
    assert (r.exit_code, r.stdout) == (1, "")
    r = cli(root, "episode", "recall", "zzzz", "--mode", "keyword", "--json")
    assert (r.exit_code, r.stdout) == (1, "[]\n")


def test_min_score_overrides_the_floor(root):
    _seed(root)
    weak = cli(root, "recall", "xylophone marimba", "--mode", "keyword", "--json", "--min-score", "0")
    assert weak.exit_code == 0
    (hit,) = json.loads(weak.stdout)
    assert hit["name"] == "grafana" and 0 < hit["relevance"] < 1
    above = f"{hit['relevance'] + 0.001:.4f}"
    assert cli(root, "recall", "xylophone marimba", "--mode", "keyword", "--min-score", above).exit_code == 1
    assert cli(root, "recall", "xylophone marimba", "--mode", "keyword", "--min-score", f"{hit['relevance'] - 0.001:.4f}").exit_code == 0
    for bad in ("1.5", "-0.1", "nan", "high"):
        r = cli(root, "recall", "xylophone", "--min-score", bad)
        assert r.exit_code == 2 and r.stderr.startswith("memctl: error: "), (bad, r.stderr)
        assert "hint:" in r.stderr or bad == "high"


def test_empty_whitespace_and_huge_queries(root):
    _seed(root)
    for query in ("", "   ", "\t"):
        r = cli(root, "recall", query)
        assert r.exit_code == 2 and "empty" in r.stderr, repr(query)
        assert cli(root, "episode", "recall", query).exit_code == 2
        assert cli(root, "context", "--query", query).exit_code == 2
    huge = "xylophone grafana dashboards " * 4000  # 116 KB: answered from its first 10,000 characters
    r = cli(root, "recall", huge, "--mode", "keyword", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["name"] == "grafana"
    r = cli(root, "recall", "xylophone " + "x" * 100_000, "--mode", "keyword", "--json")
    hits = json.loads(r.stdout)  # half of it is one unknown word: the other half still finds its fact
    assert r.exit_code == 0 and hits[0]["name"] == "grafana"
    assert hits[0]["relevance"] < json.loads(cli(root, "recall", "xylophone", "--mode", "keyword", "--json").stdout)[0]["relevance"]


def test_explain_shows_raw_signals_and_calibrated_relevance(root):
    _seed(root)
    r = cli(root, "recall", "payment deploy", "--mode", "keyword", "--json", "--explain")
    (hit,) = json.loads(r.stdout)
    assert set(hit["signals"]) == {"bm25", "keyword", "cosine", "vector", "window"}
    assert hit["signals"]["bm25"] > 0 and hit["signals"]["cosine"] is None
    assert hit["signals"]["keyword"] == 1.0  # every term present: full coverage, and the fitted relevance of it
    assert hit["relevance"] == hit["factors"]["relevance"] == round(recall.keyword_relevance(1.0, False), 4)
    table = cli(root, "recall", "payment deploy", "--mode", "keyword", "--explain").stdout.rstrip("\n").split("\t")
    assert table[:3] == ["1", f"{hit['score']:.3f}", f"{hit['relevance']:.3f}"] and table[-2:] == ["deploy-friday", "memory/deploy-friday.md"]


def test_used_and_show_count_as_use_recall_does_not(root):
    _seed(root)
    def frequency():
        r = cli(root, "recall", "xylophone", "--mode", "keyword", "--json", "--explain", "--no-log")
        return json.loads(r.stdout)[0]["factors"]["frequency"]
    cli(root, "recall", "xylophone", "--mode", "keyword")
    cli(root, "context", "--query", "xylophone", "--mode", "keyword")
    assert frequency() == 0.0
    r = cli(root, "used", "grafana", "--json")
    assert (r.exit_code, json.loads(r.stdout)) == (0, {"used": ["grafana"]})
    once = frequency()
    assert once > 0
    assert cli(root, "show", "grafana").exit_code == 0
    assert frequency() > once
    rows = [line.split("\t") for line in access_log(root).splitlines()[1:]]
    assert [row[2] for row in rows] == ["recall", "context", "used", "show"]
    r = cli(root, "used", "no-such-fact")
    assert r.exit_code == 3 and r.stderr.startswith("memctl: error: ")
    assert len(access_log(root).splitlines()) == 5  # nothing added


def test_episode_recall_is_recall_source_episodes(root):
    _seed(root)
    for text, kind in (("Deploy of the payment service failed on Friday", "error"),
                       ("Decided to move the payment deploy to Monday", "decision"),
                       ("Lunch order placed", "success")):
        cli(root, "episode", "add", text, "--type", kind)
    one = cli(root, "episode", "recall", "payment deploy", "--json", "--mode", "keyword", "--no-log")
    other = cli(root, "recall", "payment deploy", "--source", "episodes", "--json", "--mode", "keyword", "--no-log")
    assert one.exit_code == other.exit_code == 0
    assert json.loads(one.stdout) == json.loads(other.stdout)
    assert len(json.loads(one.stdout)) == 2


def test_read_commands_create_no_file_in_a_claude_code_directory(tmp_path):
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory\n\n- [Deploys](deploys.md) — Never deploy on Fridays\n", encoding="utf-8")
    (d / "deploys.md").write_text("---\nname: deploys\ndescription: Never deploy on Fridays\ntype: feedback\n---\n",
                                  encoding="utf-8")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "claude memory")
    assert cli(d, "recall", "deploy Fridays", "--mode", "keyword").exit_code == 0
    assert cli(d, "context", "--query", "deploy", "--mode", "keyword").exit_code == 0
    assert cli(d, "show", "deploys").exit_code == 0
    assert cli(d, "used", "deploys").exit_code == 0
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (d / "ledgers").exists()
    rows = (d / ".memctl" / "access.tsv").read_text(encoding="utf-8").splitlines()
    assert [r.split("\t")[2] for r in rows[1:]] == ["recall", "context", "show", "used"]
    audit = json.loads(cli(d, "audit", "--fact", "deploys", "--json").stdout)
    assert [a["command"] for a in audit] == ["recall", "context", "show", "used"]


@pytest.mark.parametrize("fast", ["1", ""])
def test_a_recall_that_fails_never_exits_1_which_means_nothing_relevant(root, fast):
    """`recall` exits 1 when nothing is relevant, as grep does; a failure of its own (an embed server
    gone, a full disk, a .memctl that is no folder) exited 1 too, so `if memctl recall ...` read it
    as "nothing relevant". A failure is 2 now, on the fast path and through Typer alike."""
    assert cli(root, "remember", "deploy", "-d", "本番デプロイは火曜日", "-t", "project").exit_code == 0
    shutil.rmtree(root / ".memctl")
    (root / ".memctl").write_text("not a folder\n", encoding="utf-8")
    for args in (("recall", "デプロイ", "--mode", "keyword"), ("episode", "recall", "デプロイ", "--mode", "keyword")):
        done = memctl(root, *args, env={"MEMCTL_NO_FAST": "" if fast else "1"})
        assert done.returncode == 2 and done.stderr.startswith("memctl: error: ") and "Traceback" not in done.stderr, done


@pytest.mark.parametrize("fast", ["1", ""])
def test_recall_output_its_encoding_cannot_write_exits_2_not_1(root, fast):
    """Under PYTHONIOENCODING=ascii, `recall デプロイ` exited 1 ("nothing relevant") after its error line,
    and `--json` said `"exit_code": 1`: the output that cannot be written is a failure (2), as a full
    disk is; `episode recall` too."""
    assert cli(root, "remember", "deploy", "-d", "本番デプロイは火曜日", "-t", "project").exit_code == 0
    assert cli(root, "episode", "add", "デプロイを火曜日に行った", "--type", "decision").exit_code == 0
    line = ("memctl: error: the output cannot be written in its encoding (ascii): ordinal not in range(128)"
            " (hint: use a UTF-8 locale (LANG=C.UTF-8), or unset PYTHONIOENCODING)")
    env = {"PYTHONIOENCODING": "ascii", "MEMCTL_NO_FAST": "" if fast else "1"}
    for args in (("recall", "デプロイ", "--mode", "keyword"), ("episode", "recall", "デプロイ", "--mode", "keyword")):
        done = memctl(root, *args, "--no-log", env=env)
        assert (done.returncode, done.stderr.splitlines()[-1]) == (2, line), (args, done.stderr)
    done = memctl(root, "recall", "デプロイ", "--mode", "keyword", "--json", "--no-log", env=env)
    assert done.returncode == 2 and json.loads(done.stderr.splitlines()[-1])["exit_code"] == 2, done


def test_hybrid_with_n_grams_asked_for_ranks_by_keywords_not_below_them(root):
    """With `[embedding] backend = "char-ngram"`, the default hybrid mode put n-gram cosines into a fit
    made for models of meaning: `ランチはいつ？` found nothing (exit 1) where keyword mode found the lunch
    fact at 0.999. Hybrid with n-grams ranks by keywords; `--mode vector` still uses them."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "char-ngram"\n')
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qam", "n-grams")
    for name, text in (("lunch", "ランチは毎週金曜日の12時から"), ("deploy", "金曜日にはデプロイしない"), ("cat", "The cat eats dry food")):
        assert cli(root, "remember", name, "-d", text).exit_code == 0
    for query, first in (("ランチはいつ？", "lunch"), ("金曜日にデプロイしてもいい？", "deploy")):
        hybrid = json.loads(cli(root, "recall", query, "--json").stdout)
        keyword = json.loads(cli(root, "recall", query, "--json", "--mode", "keyword").stdout)
        assert hybrid and hybrid[0]["name"] == first and hybrid == keyword, (query, hybrid)
    assert cli(root, "recall", "東京の天気", "--json").stdout.strip() == "[]"


def test_an_empty_since_and_a_one_column_ledger_are_no_surprise(root):
    """`recall --since ''` (a script's empty variable) was taken as no filter without a word: it is an
    invalid date (exit 2). near-dup on a ledger of one column with no unique one asked "which column
    of memo?": its only column is the one."""
    assert cli(root, "remember", "deploy", "-d", "本番デプロイは火曜日", "-t", "project").exit_code == 0
    bad = cli(root, "recall", "デプロイ", "--since", "")
    assert bad.exit_code == 2 and "invalid --since ''" in bad.stderr
    assert cli(root, "ledger", "create", "memo", "--columns", "text").exit_code == 0
    assert cli(root, "ledger", "append", "memo", "text=MCPサーバーのテストとデバッグ").exit_code == 0
    done = cli(root, "near-dup", "MCPサーバーのテストとデバッグ", "--ledger", "memo")
    assert done.exit_code == 1 and "ledgers/memo.tsv:2" in done.stdout, done.stderr


def test_a_short_prompt_about_an_app_does_not_bring_every_fact(root):
    """Every fact remember writes has `**How to apply:**` in its body, and the stemmer made "apply" "app":
    a prompt "rename the app" brought every fact (keyword relevance 1.0). The labels are not indexed,
    and -ly is stemmed only as an adverb's (quickly -> quick; not apply, supply, reply, family)."""
    from memctl import rindex

    for name, text in (("db-pool", "The database pool holds 20 connections"), ("lint-rule", "Lint runs before every commit")):
        done = cli(root, "remember", name, "-d", text, "--why", "it broke once", "--how", "check it first")
        assert done.exit_code == 0, done.stderr
    assert cli(root, "recall", "rename the app", "--mode", "keyword").exit_code == 1
    assert cli(root, "recall", "apply", "--mode", "keyword").exit_code == 1
    assert cli(root, "remember", "patch", "-d", "Apply the security patch on Mondays").exit_code == 0
    assert json.loads(cli(root, "recall", "apply patches", "--mode", "keyword", "--json").stdout)[0]["name"] == "patch"
    assert [rindex._stem(w) for w in ("quickly", "weekly", "apply", "supply", "reply", "family", "early")] == [
        "quick", "week", "apply", "supply", "reply", "family", "early"]


def test_private_text_in_a_query_neither_finds_nor_dilutes_as_in_the_prompt_hook(root):
    """helper-57: `recall "<private>パスワードはhunter2</private> payment"` searched the private words too:
    the fact's relevance fell under the floor (nothing, exit 1), where the prompt hook hides them first."""
    _seed(root)
    plain = json.loads(cli(root, "recall", "payment Fridays", "--mode", "keyword", "--json").stdout)
    hidden = cli(root, "recall", "<private>パスワードは hunter2 xylophone</private> payment Fridays", "--mode", "keyword", "--json")
    assert hidden.exit_code == 0, hidden.stderr
    assert [(h["name"], h["relevance"]) for h in json.loads(hidden.stdout)] == [(h["name"], h["relevance"]) for h in plain]
    assert "hunter2" not in access_log(root)
    only = cli(root, "recall", "<private>hunter2</private>", "--mode", "keyword")
    assert only.exit_code == 2 and "the query is all <private> text" in only.stderr
