"""Forgetting by policy: the fields of each item, the plan (a pure function), applying it.

    gather (I/O) -> items with named values -> plan(items, rules) -> apply (I/O, one commit)

Facts are archived (moved to memory/archive/ with the policy and date
recorded) or compressed (a short version stays live, the full one is
archived). Episodes stay in episodes.tsv, which is append-only: forgetting one
appends a row to ledgers/episode-tombstones.tsv (episodes.TOMBSTONES), which
episodes.list_episodes honours. A removal (archive, tombstone) outranks a
compression, and nothing ever compresses twice, so a plan applied once leaves
nothing for a second run with the same clock. docs/LIFECYCLE.md tells the rules.
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from .. import clock, episodes as episodes_mod, facts as facts_mod, fact as fact_mod, ledger
from ..errors import NotFound
from ..fsutil import atomic_write
from ..recall import _expired, _float, _time, access_stats, frequency
from ..store import Store, commit, config_committable, refuse_uncommitted
from . import policy as policy_mod

DECAY_PER_DAY = 0.01  # effective_confidence = confidence x exp(-0.01 x idle_days); freshness loses 0.01 a day
RETENTION = {"importance": 0.4, "freshness": 0.3, "frequency": 0.3}
SHORT_FACT_LINE = 200  # characters a compressed fact keeps of its first line
SHORT_EPISODE = 100  # characters a compressed episode keeps of its description and outcome
PINNED = "pinned"  # the built-in never-forget class of pinned facts
LIMIT_KEYS = {"fact": "max_facts", "episode": "max_episodes"}


class Item(NamedTuple):  # a tuple, not a dataclass: a plan builds 100,000s of them
    kind: str  # fact | episode
    key: str  # fact file stem, episode id
    name: str  # what a person reads: the fact's name, the episode id
    values: dict[str, Any]  # the named fields a condition reads
    compressed: bool = False


class Step(NamedTuple):
    item: Item
    action: str  # archive | compress | tombstone
    policy: str  # a policy name, or max_facts / max_episodes
    matched: dict[str, Any]  # the numbers that made it match

    @property
    def reason(self) -> str:
        return f"policy {self.policy}: {numbers(self.matched)}"


class Kept(NamedTuple):
    """An item a policy would have touched, left alone by a never-forget class."""

    item: Item
    action: str
    policy: str
    never: str
    matched: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...] = ()
    kept: tuple[Kept, ...] = ()
    notes: tuple[str, ...] = ()

    def count(self, kind: str, action: str) -> int:
        return sum(1 for s in self.steps if s.item.kind == kind and s.action == action)

    def summary(self) -> str:
        """`facts: 3 archived, 1 compressed; episodes: 120 tombstoned`, or `nothing to forget`."""
        parts = []
        for kind, actions in (("fact", ("archive", "compress")), ("episode", ("tombstone", "compress"))):
            counted = [f"{n} {_PAST[a]}" for a in actions if (n := self.count(kind, a))]
            if counted:
                parts.append(f"{kind}s: " + ", ".join(counted))
        return "; ".join(parts) or "nothing to forget"

    def by_policy(self) -> list[str]:
        """One line per (policy, kind, action) with its count, in plan order."""
        counts: dict[tuple[str, str, str], int] = {}
        for step in self.steps:
            key = (step.policy, step.item.kind, step.action)
            counts[key] = counts.get(key, 0) + 1
        return [f"{p}: {n} {k}{'s' if n != 1 else ''} {_PAST[a]}" for (p, k, a), n in counts.items()]


_PAST = {"archive": "archived", "compress": "compressed", "tombstone": "tombstoned"}


def numbers(values: Mapping[str, Any]) -> str:
    """`importance=0.05 idle_days=130.2 tags=a,b`: what a plan line and a reason show."""
    return " ".join(f"{k}={show(v)}" for k, v in values.items())


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{value:.3f}".rstrip("0")  # 3 decimals without trailing zeros (faster than round())
        return text[:-1] if text.endswith(".") else text
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# ---------------------------------------------------------------- fields

def _days(now: datetime, when: datetime | None) -> float:
    return max(0.0, (now - when).total_seconds() / 86400) if when is not None else 0.0


def _stamp(text: str) -> datetime | None:
    """recall._time for the episodes' own ISO stamps, minus two calls: it runs once per episode."""
    try:
        value = datetime.fromisoformat(text)
        return None if clock.placeholder(value) else value if value.tzinfo else value.astimezone()
    except (ValueError, OverflowError):
        return None


def fact_values(fact: fact_mod.Fact, *, now: datetime, count: int, last_access: datetime | None,
                default_importance: float, default_confidence: float) -> dict[str, Any]:
    """The fields of one live fact. Dates it lacks count as now (never old), so they never make it go."""
    created, updated = _time(fact.meta("created")), _time(fact.meta("updated"))
    touched = [w for w in (created, updated, last_access) if w is not None]
    idle = _days(now, max(touched)) if touched else 0.0
    confidence = _float(fact.meta("confidence"), default_confidence)
    return {
        "importance": _float(fact.meta("importance"), default_importance),
        "confidence": confidence,
        "effective_confidence": confidence * math.exp(-DECAY_PER_DAY * idle),
        "age_days": _days(now, created or updated),
        "idle_days": idle,
        "access_count": count,
        "freshness": max(0.0, 1.0 - DECAY_PER_DAY * _days(now, updated or created)),
        "type": fact.type,
        "tags": tuple(fact.tags),
        "expired": _expired(fact, now),
        "pinned": fact.pinned,
    }


def episode_values(episode: episodes_mod.Episode, *, now: datetime, count: int,
                   last_access: datetime | None) -> dict[str, Any]:
    when = _stamp(episode.ts)
    age = _days(now, when)
    idle = _days(now, max(when, last_access) if when and last_access else when or last_access)
    return {
        "importance": episode.importance,
        "age_days": age,
        "idle_days": idle,
        "access_count": count,
        # episodes.freshness() from the age already at hand (it would parse ts again, 100,000s of times)
        "freshness": max(0.0, 1.0 - episodes_mod.FRESHNESS_DECAY_PER_DAY * age),
        "type": episode.type,
        "event_type": episode.type,
        "tags": episode.tags,
        "has_outcome": bool(episode.outcome) and not episode.outcome.isspace(),
    }


# ---------------------------------------------------------------- the plan (pure)

def _protector(never: Sequence[policy_mod.NeverClass]) -> Callable[[Item], str | None]:
    """item -> the never-forget class covering it, or None; the classes turned into lookups once."""
    by_type: dict[str, str] = {}
    by_tag: dict[str, str] = {}
    rank = {cls.name: n for n, cls in enumerate(never)}
    for cls in reversed(never):  # the first class in order wins
        by_type.update(dict.fromkeys(cls.types, cls.name))
        by_tag.update(dict.fromkeys(cls.tags, cls.name))

    def check(item: Item) -> str | None:
        values = item.values
        if item.kind == "fact" and values.get("pinned"):
            return PINNED
        found = by_type.get(values["type"])
        for tag in values["tags"]:
            other = by_tag.get(tag)
            if other is not None and (found is None or rank[other] < rank[found]):
                found = other
        return found

    return check


Decider = Callable[[Item], "policy_mod.Policy | None"]


def _decider(policies: Sequence[policy_mod.Policy]) -> Decider:
    """The first matching removal policy, else the first matching compression (unless done already)."""
    tests = [(p, p.action == "compress", p.grace_days, p.condition.test) for p in policies]

    def decide(item: Item) -> policy_mod.Policy | None:
        values = item.values
        idle = values["idle_days"]
        compress = None
        for policy, compressing, grace, test in tests:
            if idle < grace:
                continue
            if compressing:
                if compress is None and not item.compressed and test(values):
                    compress = policy
            elif test(values):
                return policy
        return compress

    return decide


def retention(values: Mapping[str, Any], most: int) -> float:
    """importance x 0.4 + freshness x 0.3 + access frequency x 0.3 (frequency as recall scores it)."""
    return (RETENTION["importance"] * values["importance"] + RETENTION["freshness"] * values["freshness"]
            + RETENTION["frequency"] * frequency(values["access_count"], most))


def _capacity(kind: str, items: Sequence[Item], removed: set[str], limit: int,
              never: Sequence[policy_mod.NeverClass]) -> tuple[list[Step], list[str]]:
    """Over the limit after the policies: the lowest retention scores go first."""
    remaining = [i for i in items if i.key not in removed]
    excess = len(remaining) - limit
    if limit <= 0 or excess <= 0:
        return [], []
    most = max((i.values["access_count"] for i in items), default=0)
    protector = _protector(never)
    scored = [(retention(i.values, most), i) for i in remaining if protector(i) is None]
    scored.sort(key=lambda pair: (pair[0], -pair[1].values["idle_days"], pair[1].key))
    action = "archive" if kind == "fact" else "tombstone"
    key = LIMIT_KEYS[kind]
    steps = [
        Step(item, action, key, {"retention": score, "importance": item.values["importance"],
                                 "freshness": item.values["freshness"], "access_count": item.values["access_count"]})
        for score, item in scored[:excess]
    ]
    notes = []
    if len(steps) < excess:
        notes.append(f"{key} = {limit}: {len(remaining) - len(steps)} {kind}s stay, the rest are never-forget")
    return steps, notes


def plan(facts: Sequence[Item], episodes: Sequence[Item], rules: policy_mod.Rules) -> Plan:
    """What the rules would do to these items: a pure function of its arguments."""
    steps: list[Step] = []
    kept: list[Kept] = []
    notes: list[str] = []
    for kind, items, limit in (("fact", facts, rules.max_facts), ("episode", episodes, rules.max_episodes)):
        decide = _decider([p for p in rules.policies if p.target == kind + "s"])
        protector = _protector(rules.never)
        removed: set[str] = set()
        for item in items:
            chosen = decide(item)
            if chosen is None:
                continue
            matched = {f: item.values[f] for f in chosen.fields}
            never = protector(item)
            if never is not None:
                kept.append(Kept(item, chosen.action, chosen.name, never, matched))
                continue
            steps.append(Step(item, chosen.action, chosen.name, matched))
            if chosen.action != "compress":
                removed.add(item.key)
        extra, why = _capacity(kind, items, removed, limit, rules.never)
        steps += extra
        notes += why
    return Plan(tuple(steps), tuple(kept), tuple(notes))


# ---------------------------------------------------------------- gathering (I/O)

@dataclass
class Snapshot:
    """The store as the planner sees it: items, and the facts and episodes behind them."""

    facts: list[Item] = field(default_factory=list)
    episodes: list[Item] = field(default_factory=list)
    fact_files: dict[str, fact_mod.Fact] = field(default_factory=dict)
    episode_rows: dict[str, episodes_mod.Episode] = field(default_factory=dict)
    live_facts: list[fact_mod.Fact] = field(default_factory=list)


def gather(store: Store, now: datetime) -> Snapshot:
    counts, last = access_stats(store, uses_only=True)  # being shown keeps nothing alive: only use does
    config = store.config
    snap = Snapshot()
    snap.live_facts = facts_mod.live_facts(store)
    for fact in sorted(snap.live_facts, key=lambda f: f.stem):
        key = fact.name or fact.stem
        values = fact_values(fact, now=now, count=counts.get(key, 0), last_access=last.get(key),
                             default_importance=config.importance_for(fact.type),
                             default_confidence=config.confidence_for(fact.type))
        snap.facts.append(Item("fact", fact.stem, key, values, bool(fact.meta("compressed"))))
        snap.fact_files[fact.stem] = fact
    marks = episodes_mod.forgotten(store)
    for episode in episodes_mod.list_episodes(store, include_forgotten=True):
        mark = marks.get(episode.id)
        if mark is not None and mark["action"] == "tombstone":
            continue
        values = episode_values(episode, now=now, count=counts.get(episode.id, 0), last_access=last.get(episode.id))
        snap.episodes.append(Item("episode", episode.id, episode.id, values, mark is not None))
        snap.episode_rows[episode.id] = episode
    return snap


# ---------------------------------------------------------------- applying (I/O)

def short_text(text: str, limit: int) -> str:
    """The first non-blank line, cut to `limit` characters (an ellipsis marks the cut)."""
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def short_body(body: str) -> str:
    """What a compressed fact keeps: its first line and its **How to apply:** line."""
    lines = [short_text(body, SHORT_FACT_LINE)]
    how = next((l.strip() for l in body.splitlines() if l.startswith("**How to apply:**")), None)
    if how and how != lines[0]:
        lines.append(short_text(how, SHORT_FACT_LINE))
    kept = [l for l in lines if l]
    return "\n".join(kept) + "\n" if kept else ""


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    applied: bool
    commit: str | None = None


def commit_message(plan: Plan) -> str:
    return f"lifecycle: forget by policy ({plan.summary()})\n\n" + "\n".join(plan.by_policy()) + "\n"


def _tombstone_rows(plan: Plan, snap: Snapshot, stamp: str) -> list[dict[str, str]]:
    rows = []
    for step in plan.steps:
        if step.item.kind != "episode":
            continue
        episode = snap.episode_rows[step.item.key]
        short = step.action == "compress"
        rows.append({
            "ts": stamp, "id": episode.id, "action": step.action, "policy": step.policy,
            "reason": numbers(step.matched),
            "description": short_text(episode.description, SHORT_EPISODE) if short else "",
            "outcome": short_text(episode.outcome, SHORT_EPISODE) if short else "",
        })
    return rows


def _ensure_tombstones(store: Store, commit_changes: bool) -> bool:
    """Create (and declare) the tombstone ledger, uncommitted; True when memctl.toml goes into the commit."""
    try:
        ledger.open_ledger(store, episodes_mod.TOMBSTONES)
        return False
    except NotFound:
        with_config = config_committable(store, commit_changes, f"the declaration of ledger {episodes_mod.TOMBSTONES!r}")
        ledger.create(store, episodes_mod.TOMBSTONES, episodes_mod.TOMBSTONE_COLUMNS, commit_changes=False, own=True)
        return with_config


def _apply(store: Store, plan: Plan, snap: Snapshot, *, commit_changes: bool, declared: bool) -> str | None:
    """Archive and compress facts, append tombstones, rewrite MEMORY.md; one commit. Caller holds the lock."""
    stamp = clock.stamp()
    fact_steps = [s for s in plan.steps if s.item.kind == "fact"]
    refuse_uncommitted(store, [snap.fact_files[s.item.key].path for s in fact_steps], commit_changes)
    touched = []
    gone: set[str] = set()
    replaced: dict[str, fact_mod.Fact] = {}
    for step in fact_steps:
        fact = snap.fact_files[step.item.key]
        moved, paths = facts_mod._archive(store, fact, archived=stamp, archived_reason=step.reason, archived_policy=step.policy)
        touched += paths
        if step.action == "compress":
            assert fact.path is not None and moved.path is not None
            short = fact_mod.Fact(fact.stem, fact.front, short_body(fact.body), False, fact.path)
            short = short.with_meta(compressed=stamp, full_text=f"{store.archive_dir.name}/{moved.path.name}")
            atomic_write(fact.path, fact_mod.render(short))
            replaced[fact.stem] = short
        else:
            gone.add(fact.stem)
    if fact_steps:
        live = [replaced.get(f.stem, f) for f in snap.live_facts if f.stem not in gone]
        touched += facts_mod._write_index(store, live)
    rows = _tombstone_rows(plan, snap, stamp)
    if rows:
        appended = ledger.append(store, episodes_mod.TOMBSTONES, rows, commit_changes=False, lock=False)
        touched += [appended.path, store.config_path] if declared else [appended.path]
    return commit(store, touched, commit_message(plan), enabled=commit_changes)


@contextlib.contextmanager
def _bulk() -> Iterator[None]:
    """No cyclic GC while 100,000s of acyclic dicts and tuples are built: it would rescan them all, for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def forget_by_policies(store: Store, *, dry_run: bool = False, commit_changes: bool = True,
                       rules: policy_mod.Rules | None = None) -> Outcome:
    """Plan by the [forget] rules of memctl.toml; unless dry_run, apply the plan in one commit."""
    rules = rules or policy_mod.load(store.config.raw)
    now = clock.now()
    with _bulk():
        snap = gather(store, now)
        first = plan(snap.facts, snap.episodes, rules)
    if dry_run or not first.steps:
        return Outcome(first, applied=False)
    with store.lock(commits=commit_changes):
        with _bulk():
            snap = gather(store, now)  # again under the lock: another writer may have come between
            final = plan(snap.facts, snap.episodes, rules)
        if not final.steps:
            return Outcome(final, applied=False)
        if any(s.item.kind == "fact" for s in final.steps):  # it rewrites MEMORY.md: a person's edits stay theirs
            facts_mod.refuse_hand_edited_index(store, commit_changes, snap.live_facts)
        # Declared under this lock, in its undo log: memctl.toml changes with the tombstones, committed or undone as one.
        declared = any(s.item.kind == "episode" for s in final.steps) and _ensure_tombstones(store, commit_changes)
        sha = _apply(store, final, snap, commit_changes=commit_changes, declared=declared)
    return Outcome(final, applied=True, commit=sha)
