"""Procedural memory (memctl/lifecycle/procedures.py): outcomes ledger, EMA statistics, best, evolve."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import git
from memctl import facts, ledger
from memctl.errors import BadInput, NotFound
from memctl.lifecycle import procedures as proc

ALPHA = 0.1


def closed_form(xs: list[float]) -> float | None:
    """s_n = (1-a)^(n-1) x_1 + sum_{k=2..n} a (1-a)^(n-k) x_k: the EMA seeded with its first value."""
    n = len(xs)
    if n == 0:
        return None
    return (1 - ALPHA) ** (n - 1) * xs[0] + sum(ALPHA * (1 - ALPHA) ** (n - k) * xs[k - 1] for k in range(2, n + 1))


def add_procedure(store, name, description, template="1. do it\n", trigger=None, commit=True):
    facts.remember(store, facts.FactInput(name=name, description=description, type="procedure", body=template),
                   commit_changes=commit)
    if trigger:
        facts.edit(store, name, lambda f: f.with_meta(trigger=trigger), verb="set trigger of", commit_changes=commit)


outcome = st.tuples(st.booleans(), st.one_of(st.none(), st.integers(0, 100).map(lambda i: i / 10)))


@given(st.lists(outcome, max_size=60))
def test_stats_are_the_closed_form_ema(outcomes):
    rows = [("success" if ok else "failure", "" if score is None else str(score)) for ok, score in outcomes]
    got = proc.stats(rows)
    want_rate = closed_form([1.0 if ok else 0.0 for ok, _ in outcomes])
    want_quality = closed_form([s for _, s in outcomes if s is not None])
    assert got.runs == len(outcomes) and got.successes == sum(ok for ok, _ in outcomes)
    assert (got.success_rate is None) == (want_rate is None) and (got.quality is None) == (want_quality is None)
    if want_rate is not None:
        assert got.success_rate == pytest.approx(want_rate, abs=1e-12)
    if want_quality is not None:
        assert got.quality == pytest.approx(want_quality, abs=1e-12)
    assert got.rank == pytest.approx(0.6 * (want_rate or 0) + 0.4 * (want_quality or 0) / 10, abs=1e-12)


_names = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(outcome, min_size=1, max_size=12))
def test_recorded_outcomes_give_the_closed_form_ema_of_the_ledger(store, outcomes):
    name = f"proc-{next(_names)}"
    add_procedure(store, name, f"Procedure number {name}", commit=False)
    for ok, score in outcomes:
        proc.record(store, name, ok, score, commit_changes=False)
    # Read the ledger file independently of memctl's reader.
    lines = (store.ledgers_dir / "procedure-outcomes.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "ts\tprocedure\tversion\tresult\tscore"
    mine = [line.split("\t") for line in lines[1:] if line.split("\t")[1] == name]
    rate = closed_form([1.0 if r[3] == "success" else 0.0 for r in mine])
    quality = closed_form([float(r[4]) for r in mine if r[4]])
    stats = proc.all_stats(store)[name]
    assert stats.runs == len(outcomes)
    assert stats.success_rate == pytest.approx(rate, abs=1e-12)
    assert (stats.quality is None and quality is None) or stats.quality == pytest.approx(quality, abs=1e-12)


def test_record_appends_one_line_and_commits(root, store, monkeypatch):
    add_procedure(store, "publish-zenn", "Publish an article to Zenn")
    monkeypatch.setenv("MEMCTL_NOW", "2026-05-01T10:00:00+09:00")
    first = proc.record(store, "publish-zenn", True, 8)
    second = proc.record(store, "publish-zenn", False, 2.5)
    assert first.row == {"ts": "2026-05-01T10:00:00+09:00", "procedure": "publish-zenn", "version": "1", "result": "success", "score": "8"}
    assert (store.ledgers_dir / "procedure-outcomes.tsv").read_text(encoding="utf-8") == (
        "ts\tprocedure\tversion\tresult\tscore\n"
        "2026-05-01T10:00:00+09:00\tpublish-zenn\t1\tsuccess\t8\n"
        "2026-05-01T10:00:00+09:00\tpublish-zenn\t1\tfailure\t2.5\n"
    )
    assert second.stats == proc.Stats(2, 1, 2, 0.9, 0.1 * 2.5 + 0.9 * 8)
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append procedure-outcomes (+1)"
    assert git(root, "status", "--porcelain") == ""


def test_record_refuses_bad_input(store):
    add_procedure(store, "publish-zenn", "Publish an article to Zenn")
    facts.remember(store, facts.FactInput(name="a-fact", description="Not a procedure"))
    with pytest.raises(NotFound, match="no fact named 'nope'"):
        proc.record(store, "nope", True)
    with pytest.raises(BadInput, match="^fact 'a-fact' is a project fact, not a procedure$"):
        proc.record(store, "a-fact", True)
    with pytest.raises(BadInput, match="^score must be between 0 and 10, got 11$"):
        proc.record(store, "publish-zenn", True, 11)
    assert not (store.ledgers_dir / "procedure-outcomes.tsv").exists()


def test_best_picks_by_success_and_quality_among_matching_triggers(store):
    add_procedure(store, "zenn-manual", "Publish an article to Zenn by hand")
    add_procedure(store, "zenn-script", "Publish an article to Zenn with the script")
    add_procedure(store, "zenn-ja", "Zennに記事を公開する手順", trigger="Zennに記事を公開する")
    add_procedure(store, "backup", "Back up the database")
    for ok, score in [(True, 6), (True, 6), (False, 3)]:
        proc.record(store, "zenn-manual", ok, score)
    for ok, score in [(False, 2), (True, 9), (True, 9)]:
        proc.record(store, "zenn-script", ok, score)
    manual, script = proc.all_stats(store)["zenn-manual"], proc.all_stats(store)["zenn-script"]
    assert manual.rank == pytest.approx(0.6 * 0.9 + 0.4 * (0.1 * 3 + 0.9 * 6) / 10)
    assert script.rank == pytest.approx(0.6 * 0.19 + 0.4 * (0.1 * 9 + 0.9 * (0.1 * 9 + 0.9 * 2)) / 10)
    found = proc.best(store, "publish the weekly article to Zenn")
    assert [c.fact.stem for c in found] == ["zenn-manual", "zenn-script"]  # the script failed first: EMA remembers
    # the Japanese trigger matches: recall's finds (the English procedures, no trigger) are not asked for
    assert [c.fact.stem for c in proc.best(store, "Zennで新しい記事を公開したい")] == ["zenn-ja"]
    with pytest.raises(NotFound, match="^no procedure matches 'water the plants'$"):
        proc.best(store, "water the plants")
    with pytest.raises(BadInput):
        proc.best(store, "the a of")
    with pytest.raises(BadInput, match="has no keywords"):  # a lone particle was a keyword: exit 3, not 2
        proc.best(store, "の")


def test_an_untried_procedure_ranks_last():
    table = {"tried": proc.stats([("failure", ""), ("success", "")])}
    made = [
        facts_fact("untried", "Deploy the site"),
        facts_fact("tried", "Deploy the site to production"),
    ]
    ranked = proc.rank(made, table, "deploy the site to production now")
    assert [c.fact.stem for c in ranked] == ["tried", "untried"]
    assert ranked[1].stats == proc.Stats() and ranked[1].stats.rank == 0


def facts_fact(stem, description):
    from memctl.fact import Fact

    return Fact(stem, {"name": stem, "description": description, "metadata": {"type": "procedure"}}, "")


def test_evolve_bumps_the_version_and_git_keeps_the_old_template(root, store):
    add_procedure(store, "publish-zenn", "Publish an article to Zenn", template="1. write\n2. push\n")
    change = proc.evolve(store, "publish-zenn", "1. write\n2. lint\n3. push")
    assert change.action == "updated" and proc.version(change.fact) == 2
    assert change.fact.body == "1. write\n2. lint\n3. push\n"
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: evolve publish-zenn"
    assert git(root, "show", "HEAD~1:memory/publish-zenn.md").endswith("---\n1. write\n2. push\n")
    proc.record(store, "publish-zenn", True, 7)
    assert list(ledger.read_rows(store, proc.LEDGER))[-1].values["version"] == "2"
    same = proc.evolve(store, "publish-zenn", "1. write\n2. lint\n3. push\n")
    assert same.action == "unchanged" and proc.version(same.fact) == 2
    assert proc.version(proc.evolve(store, "publish-zenn", "1. just push\n").fact) == 3
    with pytest.raises(BadInput, match="^the template is empty$"):
        proc.evolve(store, "publish-zenn", "  \n")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_procedure_without_a_trigger_is_found_for_a_task_recall_finds_it_for(root, store, mode):
    """Without `trigger`, half of the description's keywords had to occur in the task: the bundled example
    (`記事公開の手順：テーマ台帳で重複確認→下書き→CTA確認→公開→台帳に追記`, 21 keywords) matched no
    task a person would write. It now also matches when recall finds it (relevance at the floor or above)."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[recall]\nmode = "{mode}"\n')
    from memctl.store import open_store

    store = open_store(root)
    add_procedure(store, "publish-article", "記事公開の手順：テーマ台帳で重複確認→下書き→CTA確認→公開→台帳に追記")
    add_procedure(store, "water-plants", "Water the office plants on Mondays", trigger="water the plants")
    found = proc.best(store, "記事を公開する")
    assert [c.fact.stem for c in found] == ["publish-article"] and 0.35 <= found[0].match <= 1
    with pytest.raises(NotFound):
        proc.best(store, "猫に餌をやる")
    assert [c.fact.stem for c in proc.best(store, "please water the plants")] == ["water-plants"]


def test_a_procedure_recall_found_does_not_outrank_one_whose_trigger_the_task_names(root, store):
    """A procedure without a trigger that recall found for the task was ranked on its runs against the
    exact trigger matches: one with good runs came first for another task (a reviewer's case)."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[recall]\nmode = "keyword"\n')
    from memctl.store import open_store

    store = open_store(root)
    add_procedure(store, "deploy-blue-green", "Deploy the dashboard script with a blue-green switch of the load balancer")
    add_procedure(store, "publish-article", "Publish an article on the blog", trigger="publish article")
    for _ in range(3):
        proc.record(store, "deploy-blue-green", True, 9)
    task = "publish the article about our new dashboard script"
    assert [c.fact.stem for c in proc.best(store, task)] == ["publish-article"]
    assert [c.fact.stem for c in proc.best(store, "switch the dashboard script")] == ["deploy-blue-green"]


def test_a_trigger_matched_in_half_does_not_hide_what_recall_finds(root):
    """Review: once any trigger matched in half ("deploy production": one of two words), recall was not
    asked, and the procedure the task describes was not listed at all."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[recall]\nmode = "keyword"\n')
    from memctl.store import open_store

    store = open_store(root)
    add_procedure(store, "publish-blog", "Publish an article on the company blog: check the topic ledger for duplicates, "
                  "write a draft, get a review, publish")
    add_procedure(store, "deploy-prod", "Deploy to production", trigger="deploy production")
    found = [c.fact.stem for c in proc.best(store, "publish the blog article in production")]
    assert found == ["publish-blog", "deploy-prod"]
