"""Reads keep `git status` clean (issue 23.10): recall, context, show, used, the prompt hook append their access
rows to .memctl/access/ (machine-local); `maintain` and `sync` move them into ledgers/access.tsv and commit them;
audit, forget's use counts and recall's frequency read the committed rows and the pending ones. Concurrent
readers, moves and kills lose no row and count none twice (memctl/access.py). Real processes and real git.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import access_log, git, memctl
from test_faults import _killed, _killing_git

FULL = os.environ.get("MEMCTL_TEST_FULL") == "1"
NOW = {"MEMCTL_NOW": "2026-03-02T10:00:00+09:00"}
POLICY = ('\n[[forget.policy]]\nname = "much-used"\ntarget = "facts"\ncondition = "access_count >= 1"\n'
          'action = "archive"\n')


def run(root: Path, *args: str, env: dict | None = None, input: str | None = None):
    return memctl(root, *args, env={**NOW, **(env or {})}, input=input)


def clean(root: Path) -> None:
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def audit(root: Path) -> list[dict]:
    done = run(root, "audit", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def frequency(root: Path, name: str) -> float:
    done = run(root, "recall", "deploys Tuesday", "--json", "--explain", "--no-log", "--mode", "keyword")
    hits = {h["name"]: h for h in json.loads(done.stdout)}
    return hits[name]["factors"]["frequency"]


def use_counts(root: Path) -> dict[str, int]:
    """forget's `access_count` of every fact the policy matched (a dry run)."""
    done = run(root, "forget", "--policies", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    return {s["name"]: s["matched"]["access_count"] for s in json.loads(done.stdout)["steps"] if s["policy"] == "much-used"}


@pytest.fixture
def facts(root) -> Path:
    for name, text in (("deploy", "deploys happen on Tuesdays"), ("zenn", "Zenn投稿は1日1件まで")):
        assert run(root, "remember", name, "--description", text, "--type", "project").returncode == 0
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(POLICY)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a policy that reads use counts")
    return root


def test_reads_keep_the_tree_clean_and_every_reader_counts_the_pending_rows(facts):
    root = facts
    reads = [("recall", "deploys"), ("context", "--query", "Zenn投稿"), ("show", "deploy"), ("used", "deploy", "--query", "決めた"),
             ("hook", "prompt")]
    for argv in reads:
        done = run(root, *argv, input='{"prompt": "when do deploys happen on Tuesdays?"}' if argv[0] == "hook" else None)
        assert done.returncode == 0, (argv, done.stderr)
        clean(root)  # nothing in git status, not even untracked
    assert not (root / "ledgers" / "access.tsv").exists()
    rows = audit(root)
    assert [r["command"] for r in rows] == ["recall", "context", "show", "used", "hook-prompt"]
    assert [r["line"] for r in rows] == [2, 3, 4, 5, 6]  # the lines they will have in the ledger
    pending_frequency, pending_counts = frequency(root, "deploy"), use_counts(root)
    assert pending_frequency > 0 and pending_counts == {"deploy": 2}  # show and used are uses; displays are not

    done = run(root, "maintain", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["access"]["appended"] == 5
    clean(root)
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append access (+5)"
    committed = git(root, "show", "HEAD:ledgers/access.tsv")
    assert committed == access_log(root) and committed.count("\n") == 6
    assert not any((root / ".memctl" / "access").iterdir())
    # the same rows, lines and numbers before and after the move
    assert audit(root) == rows
    assert frequency(root, "deploy") == pending_frequency and use_counts(root) == pending_counts
    # the next read is pending again, counted with the committed ones
    assert run(root, "used", "deploy").returncode == 0
    clean(root)
    assert [r["line"] for r in audit(root)][-1] == 7 and use_counts(root) == {"deploy": 3}
    assert frequency(root, "deploy") > pending_frequency


def test_a_query_of_any_length_is_logged_cut_to_the_limit(facts):
    """`used -q` with a 100,000-character query exited 0 and `maintain` committed it whole."""
    assert run(facts, "used", "deploy", "-q", "デプロイ" + "a" * 100_000).returncode == 0  # (one argument: at most 128 KiB)
    assert run(facts, "maintain").returncode == 0
    (row,) = [r for r in audit(facts) if r.get("command") == "used"]
    assert len(row["query"]) == 4096 and row["query"].startswith("デプロイaaa")
    assert max(len(line) for line in (facts / "ledgers" / "access.tsv").read_bytes().splitlines()) < 64 * 1024


def test_a_move_cut_short_after_its_rename_is_read_once_and_moved_first(facts):
    """The state a kill between renaming pending.tsv and appending it leaves: moving-<n>.tsv beside a new pending.tsv."""
    root = facts
    for query in ("一つ目", "二つ目"):
        assert run(root, "used", "deploy", "--query", query).returncode == 0
    folder = root / ".memctl" / "access"
    (folder / "pending.tsv").rename(folder / "moving-000001.tsv")
    assert run(root, "used", "zenn", "--query", "三つ目").returncode == 0
    assert [r["query"] for r in audit(root)] == ["一つ目", "二つ目", "三つ目"]
    assert use_counts(root) == {"deploy": 2, "zenn": 1}
    assert run(root, "maintain").returncode == 0
    clean(root)
    assert [line.split("\t")[3] for line in git(root, "show", "HEAD:ledgers/access.tsv").splitlines()[1:]] == ["一つ目", "二つ目", "三つ目"]
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.mark.parametrize("when,at", [("before", "write-tree"), ("before", "update-ref"), ("after", "update-ref"),
                                     ("after", "update-index")])
def test_maintain_killed_around_its_commit_loses_no_row_and_counts_none_twice(facts, tmp_path, when, at):
    root = facts
    queries = [f"q{i}" for i in range(3)]
    for query in queries:
        assert run(root, "used", "deploy", "--query", query).returncode == 0
    clean(root)  # the rows wait in .memctl/access/: the move is the kill's to cut short
    _killed(root, ("maintain",), {**NOW, **_killing_git(tmp_path, when, at)})
    assert [r["query"] for r in audit(root)] == queries  # read before anything settled the kill
    assert use_counts(root) == {"deploy": 3}
    assert run(root, "remember", "later", "--description", "a write settles the kill", "--type", "user").returncode == 0
    assert [r["query"] for r in audit(root)] == queries
    done = run(root, "maintain")
    assert done.returncode == 0, done.stdout + done.stderr
    clean(root)
    committed = git(root, "show", "HEAD:ledgers/access.tsv").splitlines()[1:]
    assert [line.split("\t")[3] for line in committed] == queries
    assert use_counts(root) == {"deploy": 3}


def test_concurrent_reads_moves_and_kills_lose_no_row_and_count_none_twice(facts):
    """Four readers append while maintain moves and commits, and some maintains are killed at random points."""
    root = facts
    rng = random.Random(int(os.environ.get("MEMCTL_KILL_SEED", "23")))
    per_reader = 12 if FULL else 5
    expected = [f"r{r}-{i}" for r in range(4) for i in range(per_reader)]
    failures: list[str] = []

    def reader(r: int) -> None:
        for i in range(per_reader):
            done = run(root, "used", "deploy", "--query", f"r{r}-{i}")
            if done.returncode != 0:
                failures.append(done.stderr)

    assert run(root, "used", "zenn", "--query", "first").returncode == 0
    clean(root)  # reads leave nothing for git: each move below takes rows from .memctl/access/
    expected.append("first")
    threads = [threading.Thread(target=reader, args=(r,)) for r in range(4)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "maintain"], env={**os.environ, **NOW},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        if rng.random() < 0.5:
            time.sleep(rng.uniform(0.05, 0.6))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        assert b"Traceback" not in err, err
    for thread in threads:
        thread.join()
    assert failures == []
    seen = Counter(r["query"] for r in audit(root))
    assert seen == Counter(expected), seen  # each row once, while some may still be pending
    assert use_counts(root) == {"deploy": len(expected) - 1, "zenn": 1}
    done = run(root, "maintain")
    assert done.returncode == 0, done.stdout + done.stderr
    clean(root)
    committed = [line.split("\t")[3] for line in git(root, "show", "HEAD:ledgers/access.tsv").splitlines()[1:]]
    assert Counter(committed) == Counter(expected)
    for r in range(4):  # each reader's rows in the order it wrote them
        assert [q for q in committed if q.startswith(f"r{r}-")] == [f"r{r}-{i}" for i in range(per_reader)]
