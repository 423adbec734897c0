"""`memctl doctor`: every layer's checks in one place."""

from __future__ import annotations

from . import facts, jobs, ledger_ops, state
from .facts import Problem
from .lifecycle import forget
from .store import Store


def run(store: Store) -> list[Problem]:
    problems = facts.check(store)
    problems += ledger_ops.check_all(store)
    problems += state.problems(store)  # a stale STATE.md: agents would act on old numbers
    problems += jobs.problems(store)  # jobs whose last success is older than their schedule allows
    problems += forget.policy_problems(store)  # a [[forget.policy]] that does not parse, by name
    return problems
