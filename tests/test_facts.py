"""facts.remember at its seams with the embedder (the vector check runs before anything is written)."""

from __future__ import annotations

import pytest


def test_a_remember_stopped_while_embedding_says_the_fact_was_not_written(root):
    """helper-57: Ctrl-C during remember's first embedding said only "353 of 1,500 texts embedded and
    kept": nothing said that the fact itself was not written (it was not: nothing is written before)."""
    from memctl import errors, facts
    from memctl.store import open_store

    store = open_store(root)

    def stopped(name, description, skip):
        raise errors.Interrupted("interrupted: 353 of 1,500 texts embedded and kept in the vector cache", 130)

    with pytest.raises(errors.Interrupted) as caught:
        facts.remember(store, facts.FactInput(name="newfact", description="新しい事実"), vector_check=stopped)
    assert caught.value.message.endswith("kept in the vector cache; newfact was not written") and caught.value.exit_code == 130
    assert not (store.memory_dir / "newfact.md").exists()


def test_similar_facts_come_closest_first_an_embedders_near_match_before_weaker_keyword_ones(root):
    """Review: `remember` shows five similar facts, and the embedder's near-duplicate (a fact worded
    otherwise) came after every keyword match, so "and N more" could hide the one that mattered."""
    from memctl import facts
    from memctl.store import open_store

    store = open_store(root)
    for n in range(6):
        facts.remember(store, facts.FactInput(name=f"restart-{n}", description=f"本番データベースは毎朝再起動する 項目{n}"))
    other = facts.remember(store, facts.FactInput(name="reboot", description="The production DB reboots every morning")).fact

    def embedder_says(name, description, skip):
        return [facts.Similar(other, 0.97, 0, False, method="e5-small-q4", near=True)]

    change = facts.remember(store, facts.FactInput(name="restart", description="本番データベースは毎朝再起動する"),
                            vector_check=embedder_says)
    assert [h.fact.stem for h in change.similar][0] == "reboot" and len(change.similar) == 7
