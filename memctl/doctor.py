"""`memctl doctor`: every layer's checks in one place."""

from __future__ import annotations

from . import facts, ledger_ops
from .facts import Problem
from .store import Store


def run(store: Store) -> list[Problem]:
    problems = facts.check(store)
    problems += ledger_ops.check_all(store)
    return problems
