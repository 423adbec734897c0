"""recall / audit / pin through the CLI."""

from __future__ import annotations

import json

from conftest import cli, git


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
    assert r.stdout.split("\t")[2] == "deploy-friday"


def test_recall_queries_file_ndjson(root, tmp_path):
    _seed(root)
    qfile = tmp_path / "q.txt"
    qfile.write_text("xylophone\n\nZenn 投稿\n", encoding="utf-8")
    r = cli(root, "recall", "--queries", str(qfile), "--mode", "keyword", "--k", "1")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(l["query"], l["hits"][0]["name"]) for l in lines] == [("xylophone", "grafana"), ("Zenn 投稿", "zenn-limit")]
    access = (root / "ledgers" / "access.tsv").read_text(encoding="utf-8").splitlines()
    assert len(access) == 3


def test_no_log_and_audit(root):
    _seed(root)
    cli(root, "recall", "payment", "--mode", "keyword", "--no-log")
    assert not (root / "ledgers" / "access.tsv").exists()
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
    assert cli(root, "recall", "x", "--source", "nope").exit_code == 2
    assert cli(root, "recall", "x", "--mode", "nope").exit_code == 2
    assert cli(root, "recall").exit_code == 2
    assert cli(root, "recall", "x", "--since", "yesterday-ish").exit_code == 2
    assert not (root / "ledgers" / "access.tsv").exists()
