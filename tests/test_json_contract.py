"""The JSON contract (docs/JSON.md, memctl/jsonshape.py): every command that takes --json is run as a
real subprocess on a real store, and what it prints is checked against the documented shapes; with
--json an error is one JSON object on stderr, on the Typer path and on the fast paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, git
from memctl import jsonshape

NOW = "2026-11-30T10:00:00+00:00"
ID = ("-c", "user.name=someone", "-c", "user.email=someone@example.com")


def _env(home: Path) -> dict:
    """The environment of every case: a `crontab` first on PATH that has none (schedule's dry runs read the
    crontab; this machine's own is never read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    fake = home / "fakebin" / "crontab"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text('#!/bin/sh\n[ "$1" = -l ] && echo "no crontab for tester" >&2\nexit 1\n', encoding="utf-8")
    fake.chmod(0o755)
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", HF_HUB_OFFLINE="1", MEMCTL_NOW=NOW, MEMCTL_AGENT="tester",
               PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return env


def _run(env: dict, root: Path | None, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "memctl"] + (["--root", str(root)] if root else []) + list(args)
    return subprocess.run(argv, input=input, capture_output=True, text=True, env=env, timeout=300)


# (case, argv, stdin, exit codes it may end with). Run in this order on one store; a case's name is
# the key of jsonshape.COMMANDS that says what it prints.
def _cases(a: Path, tmp: Path) -> list[tuple[str, list[str], str | None, tuple[int, ...]]]:
    pairs = tmp / "pairs.tsv"
    pairs.write_text("本番デプロイは金曜に行わない\t金曜は本番デプロイしない\t1\nZenn posts\tBackups run at 3\t0\n",
                     encoding="utf-8")
    queries = tmp / "queries.txt"
    queries.write_text("デプロイ\nZenn\n", encoding="utf-8")
    transcript = tmp / "t.jsonl"
    transcript.write_text('{"role": "user", "content": "デプロイの手順を教えて", "ts": "2026-11-29T10:00:00+00:00"}\n'
                          '{"role": "assistant", "content": "金曜は避けます", "ts": "2026-11-29T10:01:00+00:00"}\n',
                          encoding="utf-8")
    old = a / "ledgers" / "old.tsv"
    notes = tmp / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text("# デプロイ手順\n\n本番デプロイは火曜に行う。\n", encoding="utf-8")
    (notes / "image.md").write_bytes(b"\x89PNG\0\0")
    project = tmp / "project"
    project.mkdir()
    lesson = tmp / "lesson.py"  # an LLM command that answers with a valid lesson
    lesson.write_text('import sys\nsys.stdin.read()\nprint(\'{"summary": "Reset the fixture between tests", '
                      '"category": "error_pattern", "confidence": 0.8}\')\n', encoding="utf-8")
    return [
        ("remember", ["remember", "deploy-friday", "-d", "本番デプロイは金曜に行わない", "-t", "feedback", "--tag", "deploy", "--json"], None, (0,)),
        ("remember", ["remember", "zenn-rule", "-d", "Zenn posts at most one a day", "--json"], None, (0,)),
        ("remember", ["remember", "publish", "-d", "Publish an article to Zenn", "-t", "procedure", "--body", "1. write", "--json"], None, (0,)),
        # near duplicates and a conflict, for scan pairs, consolidation merges and judged pairs
        ("remember", ["remember", "deploy-friday-2", "-d", "本番デプロイは金曜日に行わない", "-t", "feedback", "--force", "--json"], None, (0,)),
        ("remember", ["remember", "deploy-thu", "-d", "本番デプロイは木曜に行う", "--force", "--json"], None, (0,)),
        ("show", ["show", "deploy-friday", "--json"], None, (0,)),
        ("list", ["list", "--json"], None, (0,)),
        ("log", ["log", "deploy-friday", "--json"], None, (0,)),
        ("ledger create", ["ledger", "create", "themes", "--columns", "date,theme", "--unique", "theme", "--json"], None, (0,)),
        ("ledger append", ["ledger", "append", "themes", "date=2026-01-01", "theme=MCPサーバーのテスト", "--json"], None, (0,)),
        ("ledger append", ["ledger", "append", "themes", "-", "--json"], '{"date": "2026-01-02", "theme": "Zenn投稿は1日1件まで"}\n', (0,)),
        ("ledger adopt", ["ledger", "adopt", str(old), "--columns", "d,v", "--json"], None, (0,)),
        ("ledger list", ["ledger", "list", "--json"], None, (0,)),
        ("ledger rows", ["ledger", "rows", "themes", "--json"], None, (0,)),
        ("ledger stats", ["ledger", "stats", "themes", "--by", "date", "--json"], None, (0,)),
        ("ledger dups", ["ledger", "dups", "themes", "theme", "--json"], None, (0,)),
        ("ledger check", ["ledger", "check", "--json"], None, (0,)),
        ("ledger verify", ["ledger", "verify", "themes", "--json"], None, (0,)),
        ("ledger commit", ["ledger", "commit", "themes", "--json"], None, (0,)),
        ("episode add", ["episode", "add", "デプロイ手順を変更した", "-t", "decision", "--outcome", "成功した", "--tag", "deploy", "--json"], None, (0,)),
        ("episode import", ["episode", "import", "messages", str(transcript), "--json"], None, (0,)),
        ("episode list", ["episode", "list", "--json"], None, (0,)),
        ("episode recall", ["episode", "recall", "デプロイ", "--json"], None, (0,)),
        ("recall", ["recall", "デプロイ", "--json"], None, (0,)),
        ("recall --explain", ["recall", "デプロイ", "--source", "all", "--json", "--explain", "--no-log"], None, (0,)),
        ("recall --queries", ["recall", "--queries", str(queries), "--json"], None, (0,)),
        ("recall --paths", ["recall", "デプロイ", "--paths", "--json", "--no-log"], None, (0,)),
        ("context", ["context", "--query", "デプロイ", "--json"], None, (0,)),
        # document sources (docs/SOURCES.md): a folder outside the store, with a binary file it skips
        ("source add", ["source", "add", "notes", str(notes / "*.md"), "-d", "Team notes", "--json"], None, (0,)),
        ("source list", ["source", "list", "--json"], None, (0,)),
        ("source index", ["source", "index", "--no-embed", "--json"], None, (0,)),
        ("source status", ["source", "status", "--json"], None, (0,)),
        ("recall", ["recall", "デプロイ手順", "--source", "docs", "--mode", "keyword", "--json", "--no-log"], None, (0,)),
        ("show --json -- PATH:START-END", ["show", f"{notes / 'deploy.md'}:1-3", "--json"], None, (0,)),
        ("source remove", ["source", "remove", "notes", "--json"], None, (0,)),
        ("used", ["used", "deploy-friday", "--json"], None, (0,)),
        ("audit", ["audit", "--json"], None, (0,)),
        ("audit --never-shown", ["audit", "--never-shown", "--json"], None, (0,)),
        ("pin", ["pin", "zenn-rule", "--json"], None, (0,)),
        ("unpin", ["unpin", "zenn-rule", "--json"], None, (0,)),
        ("near-dup check", ["near-dup", "Zenn投稿は1日1件", "--ledger", "themes", "--column", "theme", "--json"], None, (0, 1)),
        ("near-dup check --stdin", ["near-dup", "check", "--stdin", "--ledger", "themes", "--column", "theme", "--json", "--explain"], "Zenn投稿は1日1件\n別の話\n", (0, 1, 5)),
        ("near-dup scan", ["near-dup", "scan", "--facts", "--json"], None, (0, 1)),
        ("near-dup calibrate", ["near-dup", "calibrate", str(pairs), "--json"], None, (0,)),
        ("cache status", ["cache", "status", "--json"], None, (0,)),
        ("cache rebuild", ["cache", "rebuild", "--facts", "--json"], None, (0,)),
        ("cache clear", ["cache", "clear", "--facts", "--json"], None, (0,)),
        ("embed-server", ["embed-server", "--stop", "--json"], None, (0,)),
        ("state update", ["state", "update", "--json"], None, (0,)),
        ("state show", ["state", "show", "--json"], None, (0,)),
        ("state history", ["state", "history", "--json"], None, (0,)),
        ("state check", ["state", "check", "--json"], None, (0,)),
        ("schedule render", ["schedule", "render", "--json"], None, (0,)),
        ("schedule status", ["schedule", "status", "--json"], None, (0,)),
        ("schedule install", ["schedule", "install", "--dry-run", "--scheduler", "cron", "--json"], None, (0,)),
        ("schedule uninstall", ["schedule", "uninstall", "--dry-run", "--scheduler", "cron", "--json"], None, (0,)),
        ("procedure record", ["procedure", "record", "publish", "--success", "--score", "8", "--json"], None, (0,)),
        ("procedure list", ["procedure", "list", "--json"], None, (0,)),
        ("procedure best", ["procedure", "best", "Zenn article", "--json"], None, (0,)),
        ("procedure evolve", ["procedure", "evolve", "publish", "--template", "-", "--json"], "1. write\n2. check\n3. push\n", (0,)),
        ("conflicts", ["conflicts", "--json"], None, (0,)),
        ("consolidate", ["consolidate", "--dry-run", "--json"], None, (0,)),
        ("distill", ["distill", "--dry-run", "--json"], None, (0,)),
        ("distill", ["distill", "--llm-cmd", f"{sys.executable} {lesson}", "--dry-run", "--json"], None, (0,)),
        ("index", ["index", "--json"], None, (0,)),
        ("index --check", ["index", "--check", "--json"], None, (0,)),
        ("doctor", ["doctor", "--json"], None, (0,)),
        ("forget", ["forget", "zenn-rule", "--reason", "obsolete", "--json"], None, (0,)),
        ("restore", ["restore", "zenn-rule", "--json"], None, (0,)),
        ("forget --policies", ["forget", "--policies", "--dry-run", "--json"], None, (0,)),
        ("maintain", ["maintain", "--json"], None, (0,)),
        ("trust --list", ["trust", "--list", "--json"], None, (0,)),
        ("trust", ["trust", "--json"], None, (0,)),
        ("agent status", ["agent", "status", "--project", str(project), "--json"], None, (0,)),
        ("agent install", ["agent", "install", "claude-code", "--project", str(project), "--json"], None, (0,)),
        ("agent status", ["agent", "status", "--project", str(project), "--json"], None, (0,)),  # each entry run
        ("agent uninstall", ["agent", "uninstall", "claude-code", "--project", str(project), "--json"], None, (0,)),
        ("sync", ["sync", "--json"], None, (0,)),
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list[subprocess.CompletedProcess]]:
    """Every case run once, in order, on one store (a) with a remote and a second clone (b) for sync."""
    tmp = tmp_path_factory.mktemp("contract")
    env = _env(tmp_path_factory.mktemp("home"))
    a, b, remote = tmp / "a", tmp / "b", tmp / "remote.git"
    found: dict[str, list[subprocess.CompletedProcess]] = {}

    def keep(case: str, r: subprocess.CompletedProcess) -> None:
        found.setdefault(case, []).append(r)

    keep("init", _run(env, None, "init", str(a), "--json"))
    with open(a / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "char-ngram"\n')
    (a / "ledgers" / "old.tsv").write_text("2026-01-01\tx\n", encoding="utf-8")
    git(a, *ID, "add", "-A")
    git(a, *ID, "commit", "-qm", "test: char-ngram embedder, an old ledger")
    # Old memories: episodes to distil and tombstone, facts to archive and one a never-forget class keeps.
    for day in (1, 2, 3):
        past = dict(env, MEMCTL_NOW=f"2025-01-0{day}T09:00:00+00:00")
        assert _run(past, a, "episode", "add", f"pytest failed: the database fixture was not reset ({day})", "-t", "error",
                    "--outcome", "fixed by resetting it", "--importance", "0.3").returncode == 0
    past = dict(env, MEMCTL_NOW="2024-01-01T09:00:00+00:00")
    for name, kind in (("old-note", "project"), ("old-feedback", "feedback")):
        assert _run(past, a, "remember", name, "-d", f"an old {kind} note, long unused", "-t", kind,
                    "--confidence", "0.1").returncode == 0
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(a, "remote", "add", "origin", str(remote))
    for case, argv, stdin, codes in _cases(a, tmp):
        r = _run(env, a, *argv, input=stdin)
        assert r.returncode in codes, f"{case}: {argv} -> {r.returncode}\n{r.stderr}"
        keep(case, r)
    (Path(env["HOME"]) / ".cursor").mkdir()  # an agent found on this machine, for `agent install --all`
    r = _run(env, a, "agent", "install", "--all", "--scope", "user", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    keep("agent install", r)
    # The embed server: what it prints once ready, then --stop names it.
    server = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(a), "embed-server", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready = server.stdout.readline()
        keep("embed-server", subprocess.CompletedProcess(server.args, 0, ready, ""))
        keep("embed-server", _run(env, a, "embed-server", "--stop", "--json"))
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    # A fact changed on both sides: sync in b keeps a conflict copy, then resolve settles it.
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True, env=env)
    assert _run(env, b, "sync", "--setup").returncode == 0
    assert _run(env, a, "remember", "deploy-friday", "--update", "-d", "deploy on Wednesdays").returncode == 0
    assert _run(env, b, "remember", "deploy-friday", "--update", "-d", "デプロイは木曜").returncode == 0
    assert _run(env, a, "sync").returncode == 0
    keep("sync", _run(env, b, "sync", "--json"))
    keep("conflicts", _run(env, b, "conflicts", "--json"))
    keep("resolve", _run(env, b, "resolve", "deploy-friday", "--keep", "both", "--json"))
    # Findings: a similar fact, a distill run with a command, a broken fact file and an index line to nothing.
    keep("remember", _run(env, b, "remember", "zenn-rule-2", "-d", "Zenn posts: at most one a day, please", "--json"))
    keep("distill", _run(env, b, "distill", "--llm-cmd", "cat", "--dry-run", "--json"))
    (b / "memory" / "broken.md").write_text("---\nname: broken\n  description: indented: wrongly\n---\n", encoding="utf-8")
    (b / "memory" / "zenn-rule.md").unlink()
    for case, argv in (("doctor", ["doctor"]), ("index --check", ["index", "--check"]),
                       ("maintain", ["maintain", "--no-commit"])):
        r = _run(env, b, *argv, "--json")
        assert r.returncode == 1, f"{case}: {r.returncode} {r.stderr}"
        keep(case, r)
    if os.environ.get("MEMCTL_DUMP_JSON"):  # a developer's aid: what each case printed
        Path(os.environ["MEMCTL_DUMP_JSON"]).write_text(json.dumps(
            {k: [[r.returncode, r.stdout, r.stderr] for r in v] for k, v in found.items()}, ensure_ascii=False))
    return found


def _documents(r: subprocess.CompletedProcess, form: str) -> list:
    if form == "ndjson":
        return [json.loads(line) for line in r.stdout.splitlines()]
    return [json.loads(r.stdout)]


@pytest.mark.parametrize("case", sorted(jsonshape.COMMANDS))
def test_each_command_prints_its_documented_shape(runs, case):
    assert case in runs, f"{case} is documented in jsonshape.COMMANDS but no case runs it"
    form, shape = jsonshape.COMMANDS[case]
    for r in runs[case]:
        assert r.returncode in (0, 1), r.stderr
        documents = _documents(r, form)
        assert documents, f"{case}: nothing on stdout"
        for document in documents:
            problems = jsonshape.validate(document, form, shape)
            assert problems == [], f"{case}: {problems}\n{r.stdout[:2000]}"


def test_every_documented_field_is_emitted_somewhere(runs):
    """The other direction: a documented field that no command ever prints is a doc that drifted."""
    seen: set[tuple[str, str]] = set()
    for case, (form, shape) in jsonshape.COMMANDS.items():
        for r in runs.get(case, []):
            for document in _documents(r, form):
                jsonshape.validate(document, form, shape, seen=seen)
    documented = {(shape, field.rstrip("?")) for shape, fields in jsonshape.SHAPES.items() for field, _, _ in fields
                  if shape != "error"}  # errors: test_with_json_an_error_is_one_object_on_stderr
    missing = sorted(documented - seen)
    assert missing == [], "\n".join(map(str, missing))


def _json_commands() -> set[str]:
    import typer.main

    from memctl.cli.root import load_commands

    found = set()

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, path + [name])
        elif any("--json" in getattr(p, "opts", ()) for p in cmd.params):
            found.add(" ".join(path))

    walk(typer.main.get_command(load_commands()), [])
    return found


def test_every_command_with_json_has_a_documented_shape():
    """A new command with --json and no entry in jsonshape.COMMANDS fails here."""
    documented = {case.split(" --")[0] for case in jsonshape.COMMANDS}
    assert sorted(_json_commands() - documented) == []
    assert sorted(documented - _json_commands()) == []


def test_docs_json_md_tables_are_generated_from_the_shapes():
    text = (REPO / "docs" / "JSON.md").read_text(encoding="utf-8")
    begin, end = "<!-- shapes:begin (generated: python scripts/gen_json_docs.py) -->\n", "<!-- shapes:end -->"
    assert begin in text and end in text
    assert text[text.index(begin) + len(begin): text.index(end)] == jsonshape.render_markdown(), \
        "docs/JSON.md is stale: run python scripts/gen_json_docs.py"


# ---------------------------------------------------------------- errors

ERRORS = [
    # (argv, exit code, path): not found, bad input, usage errors Typer raises, on fast and Typer paths
    (["show", "nope", "--json"], 3, "typer"),
    (["show", "--json"], 2, "typer (missing argument)"),
    (["list", "--bogus", "--json"], 2, "typer (unknown option)"),
    (["--bogus", "--json", "list"], 2, "root option"),
    (["ledger", "stats", "themes", "--json"], 2, "typer (missing option)"),
    (["ledger", "append", "nope", "a=1", "--json"], 3, "fast"),
    (["ledger", "append", "themes", "--json"], 2, "fast"),
    (["near-dup", "x", "--ledger", "nope", "--json"], 3, "fast"),
    (["recall", "--json"], 2, "fast"),
    (["sync", "--remote", "nope", "--json"], 3, "fast (sync)"),
    (["recall", "x", "--k", "abc", "--json"], 2, "typer (bad number)"),
    (["context", "--budget", "x", "--json"], 2, "typer (bad number)"),
    (["episode", "add", "", "-t", "decision", "--json"], 2, "typer"),
    (["remember", "Bad Name!", "-d", "x", "--json"], 2, "typer"),
]


@pytest.fixture(scope="module")
def error_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("errors") / "store"
    env = _env(tmp_path_factory.mktemp("home"))
    assert _run(env, None, "init", str(root)).returncode == 0
    assert _run(env, root, "ledger", "create", "themes", "--columns", "date,theme").returncode == 0
    return root, env


@pytest.mark.parametrize("argv,code,where", ERRORS, ids=[" ".join(e[0]) for e in ERRORS])
@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-on", "fast-off"])
def test_with_json_an_error_is_one_object_on_stderr(error_store, argv, code, where, fast):
    root, env = error_store
    r = _run({**env, "MEMCTL_NO_FAST": "0" if fast == "1" else "1"}, root, *argv)
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    data = json.loads(lines[0])
    assert jsonshape.validate(data, "object", "error") == []
    assert data["exit_code"] == code and data["error"] and not data["error"].startswith("memctl:")
    # Without --json: the same error as the one line it always was.
    plain = _run({**env, "MEMCTL_NO_FAST": "0" if fast == "1" else "1"}, root, *[a for a in argv if a != "--json"])
    assert plain.returncode == code
    expected = f"memctl: error: {data['error']}" + (f" (hint: {data['hint']})" if data["hint"] else "")
    assert plain.stderr.splitlines() == [expected]


def test_an_argument_that_is_not_utf8_is_a_json_error_with_json(error_store):
    """Checked before any command runs; with --json its error was the plain line all the same."""
    root, env = error_store
    bad = os.fsdecode(b"\xff")  # what Python hands over for a byte that is not UTF-8
    for fast in ("0", "1"):
        r = _run({**env, "MEMCTL_NO_FAST": fast}, root, "show", bad, "--json")
        assert r.returncode == 2 and r.stdout == ""
        data = json.loads(r.stderr)
        assert jsonshape.validate(data, "object", "error") == [] and "is not valid UTF-8" in data["error"]
    plain = _run(env, root, "show", bad)
    assert plain.returncode == 2 and plain.stderr.startswith("memctl: error: argument 4 (\\xff) is not valid UTF-8")


def test_an_option_value_that_spells_json_after_double_dash_is_not_a_request_for_json(error_store):
    root, env = error_store
    r = _run(env, root, "show", "--", "--json")
    assert r.returncode == 3 and r.stderr.startswith("memctl: error: no fact named '--json'")


def test_one_record_has_the_same_values_wherever_it_appears(runs):
    """The findings of issue 17: line numbers, ranks, lists and an episode's outcome agree across commands."""
    added = json.loads(runs["episode add"][0].stdout)
    listed = {e["id"]: e for e in json.loads(runs["episode list"][0].stdout)}
    assert added["line"] >= 2 and added == listed[added["id"]]
    imported = json.loads(runs["episode import"][0].stdout)["episodes"]
    assert len(imported) == 2 and all(e == listed[e["id"]] for e in imported)
    assert [e["line"] for e in imported] == [added["line"] + 1, added["line"] + 2]
    [hit] = [h for h in json.loads(runs["episode recall"][0].stdout) if h["id"] == added["id"]]
    assert (hit["name"], hit["description"], hit["outcome"]) == (added["id"], "デプロイ手順を変更した", "成功した")
    assert hit["path"] == f"ledgers/episodes.tsv:{added['line']}"
    for r in runs["recall"] + runs["recall --explain"]:
        hits = json.loads(r.stdout)
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
        assert all(h["id"] is None and h["outcome"] is None for h in hits if h["kind"] == "fact")
    batches = [json.loads(line) for line in runs["recall --queries"][0].stdout.splitlines()]
    assert [b["query"] for b in batches] == ["デプロイ", "Zenn"]
    assert all([h["rank"] for h in b["hits"]] == list(range(1, len(b["hits"]) + 1)) for b in batches)
    single = json.loads(runs["recall"][0].stdout)
    assert [h["name"] for h in batches[0]["hits"]] == [h["name"] for h in single]
    rows = json.loads(runs["audit"][0].stdout)
    assert [r["line"] for r in rows] == sorted(r["line"] for r in rows) and rows[0]["line"] >= 2
    assert ["deploy-friday"] in [r["shown"] for r in rows if r["command"] == "used"]
    shown = json.loads(runs["show"][0].stdout)
    [listed_fact] = [f for f in json.loads(runs["list"][0].stdout) if f["name"] == "deploy-friday"]
    assert {**listed_fact, "body": shown["body"]} == shown
    assert (shown["status"], shown["tags"], shown["importance"]) == ("live", ["deploy"], shown["metadata"]["importance"])
