"""Distillation: turn clusters of old episodes into a few lessons, with provenance.

Episodes that are old enough (freshness < 0.5, i.e. older than 50 days) and
not yet distilled are clustered by embedding similarity (complete linkage:
every two episodes of a cluster reach `--similarity`). Each cluster of at
least `--min-cluster` episodes gets a prompt asking for one small JSON answer:

    {"summary": "...", "category": "error_pattern", "confidence": 0.8}

Without a command the clusters and their prompts are the output, for the
calling agent to answer. With `--llm-cmd CMD` memctl runs CMD once per cluster
(argv from shlex, no shell, the prompt on stdin, a timeout), validates the
answer strictly (`parse_answer`), and writes a fact whose `source` names the
episodes. Each distilled episode gets a line in `ledgers/distilled.tsv`
(`ts episode fact`, append-only, `episode` unique), which is how a rerun
knows to leave it alone. An answer that fails validation is reported with the
reason and nothing is written for that cluster. docs/CONSOLIDATION.md has the
protocol.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .. import clock, config, episodes as episodes_mod, errors, facts as facts_mod, ledger, neardup, textnorm
from ..errors import BadInput, NotFound, Refused
from ..runcmd import MAX_ANSWER_BYTES, BadAnswer, parse_command, run_command, shorten as _shorten  # noqa: F401
from ..secrets import part_of
from ..store import commit, config_committable
from .consolidate import complete_link

if TYPE_CHECKING:  # pragma: no cover
    from ..embed import Embedder
    from ..store import Store

LEDGER = "distilled"
COLUMNS = ("ts", "episode", "fact")
CATEGORIES = ("decision_pattern", "error_pattern", "optimization", "preference")
ANSWER_KEYS = ("summary", "category", "confidence")
MAX_SUMMARY = 300
OLD_ENOUGH = 0.5  # freshness below this
DEFAULT_MIN_CLUSTER = 3
DEFAULT_SIMILARITY = 0.7
DEFAULT_TIMEOUT = 120.0
MAX_CLUSTER = 20  # episodes per prompt: a lesson from more than this is a summary, not a pattern
# A distilled lesson is inferred, never as sure as what a person said (FORMAT: inferred 0.7).
MAX_CONFIDENCE = 0.7
_FENCE_RE = re.compile(r"\A```(?:json)?[ \t]*\n(.*)\n```\Z", re.S)


# ---------------------------------------------------------------- clusters and prompts


@dataclass(frozen=True)
class Cluster:
    episodes: tuple[episodes_mod.Episode, ...]

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self.episodes]

    @property
    def fact_name(self) -> str:
        """The same episodes always give the same name, so an interrupted run cannot write a lesson twice."""
        digest = hashlib.blake2b(",".join(sorted(self.ids)).encode("utf-8"), digest_size=4).hexdigest()
        return f"lesson-{digest}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "fact": self.fact_name,
            "episodes": [
                {"id": e.id, "ts": e.ts, "type": e.type, "description": e.description, "outcome": e.outcome}
                for e in self.episodes
            ],
            "prompt": prompt(self),
        }


def prompt(cluster: Cluster) -> str:
    lines = [
        "You are distilling an AI agent's episodic memory into one durable lesson.",
        f"Below are {len(cluster.episodes)} related episodes: what happened, and how it turned out.",
        "Write the single lesson they teach, in the language of the episodes.",
        "Answer with only this JSON object (no prose, no code fence):",
        '{"summary": "<the lesson, one line, at most 300 characters>", '
        '"category": "decision_pattern | error_pattern | optimization | preference", '
        '"confidence": <0 to 1: how sure you are that the episodes support it>}',
        "",
        "Episodes:",
    ]
    for e in cluster.episodes:
        outcome = f" -> {e.outcome}" if e.outcome else ""
        lines.append(f"- [{e.id}] {e.ts} {e.type}: {e.description}{outcome}")
    return "\n".join(lines) + "\n"


def candidates(episodes: Iterable[episodes_mod.Episode], done: set[str], now: datetime) -> list[episodes_mod.Episode]:
    """Episodes old enough to distil and not distilled yet, in ledger order."""
    return [e for e in episodes if e.id not in done and episodes_mod.freshness(e, now) < OLD_ENOUGH]


def clusters(episodes: Sequence[episodes_mod.Episode], pairs: Iterable[tuple[str, str, float]], min_cluster: int) -> list[Cluster]:
    """Complete-linkage groups over the similar pairs, keeping those of `min_cluster` or more."""
    by_id = {e.id: e for e in episodes}
    groups = complete_link([e.id for e in episodes], pairs, MAX_CLUSTER)
    return [Cluster(tuple(by_id[i] for i in g)) for g in groups if len(g) >= min_cluster]


# ---------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer:
    summary: str
    category: str
    confidence: float



def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each there once (json.loads keeps the last of two silently)."""
    data = dict(pairs)
    if len(data) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in (key for key, _ in pairs[:i]))
        raise BadAnswer(f"the answer has the key {twice!r} twice")
    return data


def parse_answer(text: str) -> Answer:
    """The command's stdout as an Answer, or BadAnswer saying what is wrong with it.

    Strict: the whole output is one JSON object (a single ```json fence around
    it is tolerated), with exactly the keys summary, category and confidence.
    """
    stripped = text.strip()
    if not stripped:
        raise BadAnswer("the answer is empty")
    fenced = _FENCE_RE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        data = json.loads(stripped, object_pairs_hook=_once)
    except json.JSONDecodeError as exc:  # ("Invalid control character at": the position follows)
        raise BadAnswer(f"the answer is not JSON ({exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}): "
                        f"{_shorten(stripped)!r}") from None
    if not isinstance(data, dict):
        raise BadAnswer(f"the answer is a JSON {type(data).__name__}, not an object")
    missing = [k for k in ANSWER_KEYS if k not in data]
    if missing:
        raise BadAnswer("the answer has no " + ", ".join(repr(k) for k in missing))
    extra = sorted(k for k in data if k not in ANSWER_KEYS)
    if extra:
        raise BadAnswer("the answer has unexpected keys: " + ", ".join(repr(k) for k in extra))
    summary, category, confidence = data["summary"], data["category"], data["confidence"]
    if not isinstance(summary, str) or not summary.strip():
        raise BadAnswer("summary must be a non-empty string")
    summary = summary.strip()
    if any(c in summary for c in "\n\r\v\f\x85\u2028\u2029"):
        raise BadAnswer("summary must be one line")
    control = re.search("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]", summary)
    if control:
        raise BadAnswer(f"summary holds a control character (U+{ord(control[0]):04X})")
    if len(summary) > MAX_SUMMARY:
        raise BadAnswer(f"summary is {len(summary)} characters; at most {MAX_SUMMARY}")
    if category not in CATEGORIES:
        raise BadAnswer(f"category {category!r} is not one of {', '.join(CATEGORIES)}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 <= float(confidence) <= 1.0:
        raise BadAnswer(f"confidence must be a number from 0 to 1, got {confidence!r}")
    return Answer(summary, category, float(confidence))


def fact_input(cluster: Cluster, answer: Answer) -> facts_mod.FactInput:
    """The lesson as a fact: `source` names the episodes, the body lists them."""
    importance = round(sum(e.importance for e in cluster.episodes) / len(cluster.episodes), 2)
    lines = [f"Distilled from {len(cluster.episodes)} episodes ({answer.category}, model confidence {answer.confidence:g}):"]
    for e in cluster.episodes:
        outcome = f" -> {e.outcome}" if e.outcome else ""
        lines.append(f"- {e.id} ({e.type}): {e.description}{outcome}")
    return facts_mod.FactInput(
        name=cluster.fact_name,
        description=answer.summary,
        type="user" if answer.category == "preference" else "project",
        body="\n".join(line.replace("\r", " ").replace("\n", " ") for line in lines),
        importance=min(1.0, max(0.0, importance)),
        confidence=min(answer.confidence, MAX_CONFIDENCE),
        tags=("distilled", answer.category),
        source="episodes:" + ",".join(cluster.ids),
    )


# ---------------------------------------------------------------- the command


# ---------------------------------------------------------------- with the store


@dataclass
class Plan:
    clusters: list[Cluster]
    considered: int  # episodes old enough and not distilled
    embedder: str
    similarity: float
    min_cluster: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "considered": self.considered, "embedder": self.embedder, "similarity": self.similarity,
            "min_cluster": self.min_cluster, "notes": self.notes, "clusters": [c.to_dict() for c in self.clusters],
        }


@dataclass(frozen=True)
class Outcome:
    cluster: Cluster
    status: str  # created | rejected | planned (dry run)
    reason: str = ""
    fact: str | None = None
    answer: Answer | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "fact": self.fact, "episodes": self.cluster.ids, "reason": self.reason or None,
            "answer": None if self.answer is None else {
                "summary": self.answer.summary, "category": self.answer.category, "confidence": self.answer.confidence},
        }


@dataclass
class Result:
    plan: Plan
    outcomes: list[Outcome]
    commit: str | None = None

    @property
    def created(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "created"]

    @property
    def rejected(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "rejected"]


def distilled_ids(store: "Store") -> set[str]:
    try:
        return {row.values["episode"] for row in ledger.read_rows(store, LEDGER)}
    except NotFound:
        return set()


def _check_options(min_cluster: int, similarity: float, timeout: float | None = None) -> None:
    if min_cluster < 2:
        raise BadInput(f"min_cluster must be 2 or more, got {min_cluster}", arg="min_cluster",
                       hint=f"a lesson is drawn from two similar episodes or more (default {DEFAULT_MIN_CLUSTER})")
    if not 0.0 < similarity <= 1.0:
        raise BadInput(f"similarity must be above 0 and at most 1, got {similarity:g}", arg="similarity",
                       hint=f"how alike two episodes must be, as a cosine (default {DEFAULT_SIMILARITY:g})")
    if timeout is not None and not timeout > 0:
        raise BadInput(f"timeout must be above 0 seconds, got {timeout:g}", arg="timeout",
                       hint="the seconds the command may take to answer")


def plan(store: "Store", *, since: str | None = None, min_cluster: int = DEFAULT_MIN_CLUSTER,
         similarity: float = DEFAULT_SIMILARITY, embedder: "Embedder | None" = None) -> Plan:
    """The clusters that would be distilled now."""
    _check_options(min_cluster, similarity)
    pool = candidates(episodes_mod.list_episodes(store, since=since), distilled_ids(store), clock.now())
    if len(pool) < min_cluster:
        return Plan([], len(pool), "", similarity, min_cluster)
    # As queries, like with like (e5's advice for symmetric similarity): --similarity was set so;
    # these texts are no recall document, so there is no vector to share with recall here.
    source = neardup.items_source("distill", [(e.id, e.description) for e in pool], kind="query")
    report = neardup.scan(store, source, threshold=similarity, embedder=embedder)
    pairs = [(p.a.id, p.b.id, p.score) for p in report.pairs]
    return Plan(clusters(pool, pairs, min_cluster), len(pool), report.embedder, similarity, min_cluster, list(report.notes))


def timeout_for(store: "Store", given: float | None) -> float:
    if given is not None:
        return given
    value = config.section(store.config.raw, "distill").get("timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise BadInput(f"memctl.toml: [distill] timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def _ensure_ledger(store: "Store", commit_changes: bool) -> list[Path]:
    """The distilled ledger; when this creates it, the paths to commit with the lessons."""
    try:
        ledger.open_ledger(store, LEDGER)
        return []
    except NotFound:
        pass
    with_config = config_committable(store, commit_changes, f"the declaration of ledger {LEDGER!r}")
    try:
        made = ledger.create(store, LEDGER, COLUMNS, unique="episode", commit_changes=False, own=True)
    except Refused:
        return []  # created by another process meanwhile
    return [made.path, store.config_path] if with_config else [made.path]


def _write(store: "Store", cluster: Cluster, answer: Answer) -> tuple[list[Path], str]:
    """The lesson, then its episodes' lines in the distilled ledger; nothing committed yet."""
    taken = sorted(distilled_ids(store) & set(cluster.ids))
    if taken:  # another run distilled them meanwhile: refuse before writing the lesson
        raise Refused(f"episode {taken[0]} is already distilled")
    with part_of("distill"):  # (a lesson's secret is redacted: distill has no way to store it as given)
        change = facts_mod.remember(store, fact_input(cluster, answer), commit_changes=False)
    stamp = clock.stamp()
    rows = [{"ts": stamp, "episode": i, "fact": cluster.fact_name} for i in cluster.ids]
    appended = ledger.append(store, LEDGER, rows, commit_changes=False)
    assert change.fact.path is not None
    return [change.fact.path, store.index_path, appended.path], change.fact.name


def distill(store: "Store", llm_cmd: str, *, since: str | None = None, min_cluster: int = DEFAULT_MIN_CLUSTER,
            similarity: float = DEFAULT_SIMILARITY, timeout: float | None = None, dry_run: bool = False,
            embedder: "Embedder | None" = None, commit_changes: bool = True) -> Result:
    """Ask the command for each cluster's lesson; write the valid ones (one commit), report the others.

    The command is asked first, without the store lock (it may take minutes); the lessons are then
    written and committed under one store lock, so that the whole is committed or undone as one
    (a kill or a failed commit leaves no lesson without its ledger rows, nothing uncommitted).
    """
    argv = parse_command(llm_cmd)
    seconds = timeout_for(store, timeout)
    _check_options(min_cluster, similarity, seconds)
    made = plan(store, since=since, min_cluster=min_cluster, similarity=similarity, embedder=embedder)
    outcomes: list[Outcome | None] = []
    answers: list[tuple[int, Cluster, Answer]] = []
    planned: dict[str, str] = {}  # (dry run) normalised description -> where it would be written
    given_up = ""  # a command that timed out (or cannot run) is not asked again: each cluster would wait as long
    with errors.stops_noted() as stop_if_asked:  # a stop between two asks is raised before the next (judge.py)
        for cluster in made.clusters:
            stop_if_asked()
            if given_up:
                outcomes.append(Outcome(cluster, "rejected", f"not asked: for an earlier cluster, {given_up}"))
                continue
            try:
                answer = parse_answer(run_command(argv, prompt(cluster), seconds, cwd=store.root))
            except BadAnswer as exc:
                outcomes.append(Outcome(cluster, "rejected", exc.reason))
                given_up = "" if exc.again else exc.reason
                continue
            if dry_run:  # the refusal the write would meet: a description already in memory, or planned above
                description = fact_input(cluster, answer).description or ""
                twin = _same_description(store, description, planned)
                if twin is not None:
                    outcomes.append(Outcome(cluster, "rejected", f"the same description is already in {twin}", answer=answer))
                    continue
                planned[textnorm.normalize(description)] = store.rel(store.memory_dir / f"{cluster.fact_name}.md")
                outcomes.append(Outcome(cluster, "planned", fact=cluster.fact_name, answer=answer))
                continue
            answers.append((len(outcomes), cluster, answer))
            outcomes.append(None)  # written below
    sha = None
    if answers:
        with store.lock(commits=commit_changes):
            touched: list[Path] = []
            for at, cluster, answer in answers:
                try:
                    with store.lock():  # one cluster's writes: undone together if any of them fails
                        ledger_paths = _ensure_ledger(store, commit_changes)
                        paths, name = _write(store, cluster, answer)
                    touched += ledger_paths
                except (Refused, BadInput) as exc:
                    outcomes[at] = Outcome(cluster, "rejected", exc.message, answer=answer)
                    continue
                touched += paths
                outcomes[at] = Outcome(cluster, "created", fact=name, answer=answer)
            created = [o for o in outcomes if o is not None and o.status == "created"]
            sha = commit(store, touched, _message(created), enabled=commit_changes) if touched else None
    return Result(made, [o for o in outcomes if o is not None], sha)


def _same_description(store: "Store", description: str, planned: dict[str, str]) -> str | None:
    """Where a lesson of this description is already (a live fact's file) or would be (planned earlier
    in this dry run): what `remember` refuses as "the same description is already in ..."."""
    norm = textnorm.normalize(description)
    if norm in planned:
        return planned[norm]
    same = next((h for h in facts_mod.similar(description, facts_mod.live_facts(store)) if h.exact), None)
    return store.rel(same.fact.path) if same is not None and same.fact.path is not None else None


def _message(created: Sequence[Outcome]) -> str:
    if not created:
        return f"ledger: create {LEDGER}"
    count = sum(len(o.cluster.episodes) for o in created)
    lines = [f"memory: distill {len(created)} lesson{'s' if len(created) != 1 else ''} from {count} episodes", ""]
    lines += [f"{o.fact} <- {', '.join(o.cluster.ids)}" for o in created]
    return "\n".join(lines)
