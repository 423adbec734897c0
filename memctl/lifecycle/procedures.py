"""Procedural memory: procedures are facts of type `procedure`, judged by their outcomes.

A procedure's trigger is its `trigger` metadata when it has one, else its
description; its body is the template. Every use is recorded as one line of
`ledgers/procedure-outcomes.tsv` (`ts procedure version result score`). The
statistics are computed from that ledger on every read, never stored:

    success_rate = EMA of result (success 1, failure 0) over the procedure's lines
    quality      = EMA of score (0-10) over its lines that have a score

where EMA(x_1..x_n) = s_n with s_1 = x_1 and s_k = α·x_k + (1 − α)·s_(k−1),
α = 0.1, in ledger order; in closed form
s_n = (1 − α)^(n−1)·x_1 + Σ_(k=2..n) α·(1 − α)^(n−k)·x_k.

`best TASK` ranks the procedures whose trigger matches the task by
success_rate × 0.6 + quality / 10 × 0.4 (a statistic with no data counts 0).
A trigger matches when at least half of its keywords occur in the task. A procedure without a
`trigger` also matches when recall finds it for the task (its relevance at or above the floor,
docs/RECALL.md): a description such as `記事公開の手順：テーマ台帳で重複確認→下書き→…` has far
more keywords than any task names, so half of them never occur in one. Recall is asked only when
no trigger matches strongly — whole, or by two keywords or more (the stronger evidence: good runs
of a procedure recall found must not put it before that one; a trigger matched by one word of two
must not hide the procedure recall finds).
`evolve` replaces the template and bumps `version`; git keeps the old ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .. import clock, fact as fact_mod, facts as facts_mod, ledger, textnorm
from ..errors import BadInput, NotFound, Refused

if TYPE_CHECKING:  # pragma: no cover
    from ..fact import Fact
    from ..store import Store

TYPE = "procedure"
LEDGER = "procedure-outcomes"
COLUMNS = ("ts", "procedure", "version", "result", "score")
RESULTS = ("success", "failure")
ALPHA = 0.1
W_SUCCESS, W_QUALITY = 0.6, 0.4
MAX_SCORE = 10.0
MATCH_SHARE = 0.5


def ema(values: Sequence[float], alpha: float = ALPHA) -> float | None:
    """Exponential moving average seeded with the first value; None for no values."""
    if not values:
        return None
    smoothed = float(values[0])
    for value in values[1:]:
        smoothed = alpha * float(value) + (1 - alpha) * smoothed
    return smoothed


@dataclass(frozen=True)
class Stats:
    runs: int = 0
    successes: int = 0
    scored: int = 0
    success_rate: float | None = None
    quality: float | None = None  # 0-10

    @property
    def rank(self) -> float:
        return W_SUCCESS * (self.success_rate or 0.0) + W_QUALITY * (self.quality or 0.0) / MAX_SCORE

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"runs": self.runs, "successes": self.successes, "scored": self.scored,
                "success_rate": r(self.success_rate), "quality": r(self.quality), "rank": round(self.rank, 4)}


def _score(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= MAX_SCORE else None


def stats(rows: Iterable[tuple[str, str]]) -> Stats:
    """Statistics from (result, score) pairs in ledger order; unknown results and bad scores are skipped."""
    results: list[float] = []
    scores: list[float] = []
    for result, score in rows:
        if result not in RESULTS:
            continue
        results.append(1.0 if result == "success" else 0.0)
        value = _score(score) if score.strip() else None
        if value is not None:
            scores.append(value)
    return Stats(len(results), int(sum(results)), len(scores), ema(results), ema(scores))


def _rows(store: "Store") -> list[ledger.Row]:
    try:
        return list(ledger.read_rows(store, LEDGER))
    except NotFound:
        return []


def all_stats(store: "Store") -> dict[str, Stats]:
    grouped: dict[str, list[tuple[str, str]]] = {}
    for row in _rows(store):
        grouped.setdefault(row.values["procedure"], []).append((row.values["result"], row.values["score"]))
    return {name: stats(rows) for name, rows in grouped.items()}


# ---------------------------------------------------------------- procedures


def name_of(fact: "Fact") -> str:
    return fact.name if fact_mod.NAME_RE.match(fact.name) else fact.stem


def trigger(fact: "Fact") -> str:
    value = fact.meta("trigger")
    return str(value) if value else fact.description


def version(fact: "Fact") -> int:
    value = fact.meta("version", 1)
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def procedure(store: "Store", name: str) -> "Fact":
    found = facts_mod.find(store, name, archived=False)
    if found.type != TYPE:
        raise BadInput(f"fact {name!r} is a {found.type or 'untyped'} fact, not a procedure",
                       hint="remember one with type procedure", kind="not-procedure")
    return found


def procedures(store: "Store") -> list["Fact"]:
    return [f for f in facts_mod.live_facts(store) if f.type == TYPE]


@dataclass(frozen=True)
class Candidate:
    fact: "Fact"
    stats: Stats
    match: float  # share of the trigger's keywords found in the task

    def to_dict(self, rel=str) -> dict[str, Any]:
        return {"name": name_of(self.fact), "description": self.fact.description, "trigger": trigger(self.fact),
                "version": version(self.fact), "match": round(self.match, 4), **self.stats.to_dict(),
                "path": rel(self.fact.path) if self.fact.path else self.fact.file_name}


def match(trigger_text: str, task: str) -> float:
    wanted = textnorm.keywords(trigger_text)
    if not wanted:
        return 0.0
    return len(wanted & textnorm.keywords(task)) / len(wanted)


def rank(facts: Sequence["Fact"], table: dict[str, Stats], task: str,
         recalled: dict[str, float] | None = None) -> list[Candidate]:
    """Matching procedures, best first: rank score, then match, then name (pure). Without `recalled`, the
    procedures whose trigger matches; with it (file name -> recall's relevance for the task), the
    procedures without a `trigger` that recall found."""
    if not textnorm.keywords(task):
        raise BadInput(f"task {task!r} has no keywords to match", hint="describe the task in content words")
    found = []
    for fact in facts:
        share = match(trigger(fact), task)
        if recalled is None and share >= MATCH_SHARE:
            found.append(Candidate(fact, table.get(name_of(fact), Stats()), share))
        elif recalled is not None and not fact.meta("trigger") and fact.file_name in recalled:
            found.append(Candidate(fact, table.get(name_of(fact), Stats()), max(share, recalled[fact.file_name])))
    return sorted(found, key=lambda c: (-c.stats.rank, -c.match, name_of(c.fact)))


def _recalled(store: "Store", task: str, facts: Sequence["Fact"]) -> dict[str, float]:
    """Recall's relevance for the task of the procedures without a trigger it finds."""
    untriggered = [fact for fact in facts if not fact.meta("trigger")]
    if not untriggered:
        return {}
    from ..recall import recall

    _, [hits] = recall(store, [task], k=max(1, len(facts)), fact_type=TYPE, log=False)
    return {hit.item.path.rsplit("/", 1)[-1]: hit.relevance for hit in hits}


def _strong(fact: "Fact", task: str) -> bool:
    """A trigger the task names whole, or two of whose keywords it names: one word of two
    (`deploy production` for "publish the blog article in production") is weak evidence."""
    wanted = textnorm.keywords(trigger(fact))
    named = len(wanted & textnorm.keywords(task))
    return named == len(wanted) or named >= 2


def best(store: "Store", task: str) -> list[Candidate]:
    """The procedures whose trigger matches the task; when none matches strongly (_strong), those
    recall finds for it too (a trigger matched by one word must not hide the procedure a task
    describes)."""
    facts = procedures(store)
    table = all_stats(store)
    found = rank(facts, table, task)
    if not any(_strong(c.fact, task) for c in found):
        matched = {c.fact.stem for c in found}
        found = sorted(found + [c for c in rank(facts, table, task, _recalled(store, task, facts)) if c.fact.stem not in matched],
                       key=lambda c: (-c.stats.rank, -c.match, name_of(c.fact)))
    if not found:
        raise NotFound(f"no procedure matches {task!r}", hint="`memctl procedure list` shows the procedures and their triggers")
    return found


def listing(store: "Store") -> list[Candidate]:
    table = all_stats(store)
    return [Candidate(f, table.get(name_of(f), Stats()), 1.0) for f in sorted(procedures(store), key=name_of)]


# ---------------------------------------------------------------- writing


def _ensure_ledger(store: "Store", commit_changes: bool) -> None:
    try:
        ledger.open_ledger(store, LEDGER)
    except NotFound:
        try:
            ledger.create(store, LEDGER, COLUMNS, commit_changes=commit_changes, own=True)
        except Refused:
            pass  # created by another process meanwhile


@dataclass(frozen=True)
class Recorded:
    name: str
    row: dict[str, str]
    stats: Stats
    commit: str | None


def _format_score(score: float | None) -> str:
    if score is None:
        return ""
    return str(int(score)) if float(score).is_integer() else repr(float(score))


def record(store: "Store", name: str, success: bool, score: float | None = None, *, commit_changes: bool = True) -> Recorded:
    """Append one outcome; return the procedure's statistics including it."""
    if score is not None and not 0.0 <= score <= MAX_SCORE:
        raise BadInput(f"score must be between 0 and {MAX_SCORE:g}, got {score:g}", arg="score",
                       hint=f"how well the run went: 0 (worst) to {MAX_SCORE:g} (best)")
    fact = procedure(store, name)
    key = name_of(fact)
    row = {"ts": clock.stamp(), "procedure": key, "version": str(version(fact)),
           "result": "success" if success else "failure", "score": _format_score(score)}
    _ensure_ledger(store, commit_changes)
    done = ledger.append(store, LEDGER, [row], commit_changes=commit_changes)
    return Recorded(key, row, all_stats(store).get(key, Stats()), done.commit)


def evolve(store: "Store", name: str, template: str, *, commit_changes: bool = True,
           allow_secrets: bool = False) -> facts_mod.Change:
    """Replace the template (the body) and bump `version`; unchanged when the template is the same.
    A secret in it is redacted, with a warning, unless `allow_secrets`; `<private>` text is always hidden."""
    from ..secrets import scrub  # noqa: PLC0415

    if not template.strip():
        raise BadInput("the template is empty")
    if "\x00" in template:
        raise BadInput("the template contains NUL bytes")
    procedure(store, name)  # a clear error for a missing or non-procedure fact (before a warning of secrets)
    template = scrub([template], "procedure evolve", secrets=not allow_secrets)[0]
    body = template if template.endswith("\n") else template + "\n"

    def change(current: "Fact") -> "Fact":
        if current.body == body:
            return current
        bumped = current.with_meta(version=version(current) + 1)
        return fact_mod.Fact(bumped.stem, bumped.front, body, bumped.archived, bumped.path)

    return facts_mod.edit(store, name, change, verb="evolve", commit_changes=commit_changes)
