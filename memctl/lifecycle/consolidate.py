"""Consolidation: merge live facts that say the same thing, list those that disagree on a detail.

Embedding models score "the deadline is Friday" and "the deadline is Monday"
as near-identical: they are insensitive to exactly the parts of a fact that
matter most (numbers, dates, names, negation, the one word that was swapped).
So a pair is only merged when three things hold (docs/CONSOLIDATION.md):

1. its embedding similarity reaches the model's duplicate threshold;
2. its lexical overlap (neardup.overlap) is at least MERGE_OVERLAP;
3. no detail differs (`differences`): the same numbers, weekdays, months and
   names on both sides, both negated or neither, and no substitution, i.e.
   not both sides holding a content word the other lacks.

A pair that is similar in topic (similarity >= threshold - TOPIC_MARGIN,
overlap >= CONFLICT_OVERLAP) but differs in a detail is a conflict: it is
never merged, `memctl conflicts` lists it for someone to resolve with
`remember --update --supersedes`.

Merging is complete-linkage: facts join a cluster only when every pair in it
is mergeable. The most confident fact survives (then the newest, then the
first by name), gains the others' tags and sources, and supersedes them; the
others move to the archive with `superseded_by`. Procedures are left out:
two procedures for the same task are alternatives for `procedure best`.
Planning is a pure function of the facts and the scored pairs; applying it
is one `facts.update_many` call, so the whole consolidation is one commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .. import clock, config, facts as facts_mod, neardup, numerals, textnorm
from ..errors import Refused

if TYPE_CHECKING:  # pragma: no cover
    from ..embed import Embedder
    from ..fact import Fact
    from ..store import Store

MERGE_OVERLAP = 0.5
CONFLICT_OVERLAP = 0.3
TOPIC_MARGIN = 0.2
SKIP_TYPES = ("procedure",)
NEIGHBOURS = 10  # each fact is compared with its 10 most similar facts

# ---------------------------------------------------------------- the text of a fact

_NUMBER_RE = re.compile(r"\d+(?:[.:,/-]\d+)*")
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_KANJI_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KATAKANA_RE = re.compile(r"[\u30a0-\u30ff\u31f0-\u31ff]{2,}")
_JA_WEEKDAY_RE = re.compile(r"([月火水木金土日])曜日?")
_CAPITAL_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][A-Za-z0-9]*")
_CODE_RE = re.compile(r"`[^`]+`|\b[A-Za-z0-9]+(?:[_/@]|\.(?=[A-Za-z0-9]))[A-Za-z0-9_./@-]*")
_LATIN_RE = re.compile(r"[a-z][a-z0-9]*")

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_WORDS = {w: i for i, w in enumerate(WEEKDAYS)} | {w[:3]: i for i, w in enumerate(WEEKDAYS)}
_JA_WEEKDAYS = {c: i for i, c in enumerate("月火水木金土日")}
# "may" and "march" are left out on purpose: far more often a verb than a month.
_MONTH_WORDS = {
    name: i + 1
    for i, name in enumerate(
        ("january", "february", None, "april", None, "june", "july", "august", "september", "october", "november", "december")
    )
    if name
}
# Words that narrow what a text says: "allowed on weekdays" and "allowed on weekdays except holidays"
# are two rules, though every other word is shared (a merge would keep one of them).
_QUALIFIERS = frozenset("only except unless but just solely exclusively excluding until".split())
_JA_QUALIFIERS = ("だけ", "のみ", "以外", "除", "限り", "限定", "まで")
_CONTENT_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[\u30a0-\u30ff\u31f0-\u31ff]{2,}"
                         r"|[^\W\d_\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_NEGATION_WORDS = frozenset("not no never without none nothing cannot can't don't doesn't didn't won't isn't aren't shouldn't mustn't n't".split())
_JA_NEGATION = ("ない", "ません", "禁止", "不可", "無効")


def _number_key(text: str) -> str:
    return re.sub(r"\d+", lambda m: str(int(m.group())), text)


def _stem_equal(a: str, b: str) -> bool:
    """Two Latin words that differ only in an ending (allows/allowed, use/used, deploy/deployment)."""
    if a == b:
        return True
    short = min(len(a), len(b))
    if short < 3:
        return False
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return common >= max(3, short - 1)


@dataclass(frozen=True)
class Profile:
    """What the comparison looks at in one text."""

    words: frozenset[str]  # Latin content words (casefolded, stopwords dropped)
    cjk: frozenset[str]  # single kanji and whole katakana words; hiragana is grammar here
    numbers: frozenset[str]
    weekdays: frozenset[int]
    months: frozenset[int]
    names: frozenset[str]  # capitalised or code-like words, Latin words in Japanese text, katakana words
    negated: bool
    qualifiers: frozenset[str]  # _QUALIFIERS and _JA_QUALIFIERS found
    sequence: tuple[str, ...]  # content words and kanji/katakana runs in text order, each once
    text: str  # normalised (NFKC, casefolded)
    tokens: frozenset[str]  # textnorm.tokens, for the lexical overlap
    # words | names by their first three letters: _stem_equal needs those to match (a speed-up)
    by_prefix: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False, repr=False)


def profile(text: str) -> Profile:
    # 二 = ２ = 2 and 1,000 = 1000 before anything is compared (memctl/numerals.py).
    norm = numerals.normalize(textnorm.normalize(text))
    numbers = frozenset(_number_key(m.group()) for m in _NUMBER_RE.finditer(norm))
    rest = _NUMBER_RE.sub(" ", norm)
    all_words = [w for w in _WORD_RE.findall(rest) if not textnorm.has_cjk(w)]
    # Weekdays and months are compared as such below, not as words.
    words = frozenset(
        w for w in all_words
        if w not in textnorm.STOPWORDS and len(w) > 1 and w not in _WEEKDAY_WORDS and w not in _MONTH_WORDS
    )
    katakana = set(_KATAKANA_RE.findall(rest))
    cjk = frozenset(set(_KANJI_RE.findall(_JA_WEEKDAY_RE.sub(" ", rest))) | katakana)
    weekdays = {_WEEKDAY_WORDS[w] for w in all_words if w in _WEEKDAY_WORDS}
    weekdays |= {_JA_WEEKDAYS[c] for c in _JA_WEEKDAY_RE.findall(rest)}
    months = frozenset(_MONTH_WORDS[w] for w in all_words if w in _MONTH_WORDS)
    raw = re.sub(r"\s+", " ", text.strip())
    names = {m.group().casefold() for m in _CAPITAL_RE.finditer(raw)}
    names |= {m.group().strip("`").casefold() for m in _CODE_RE.finditer(raw)}
    if textnorm.has_cjk(text):
        names |= set(_LATIN_RE.findall(rest))
    names |= katakana
    names = {
        n for n in names
        if n not in textnorm.STOPWORDS and n not in _WEEKDAY_WORDS and n not in _MONTH_WORDS and not _NUMBER_RE.fullmatch(n)
    }
    negated = any(w in _NEGATION_WORDS or w.endswith("n't") for w in all_words) or any(m in rest for m in _JA_NEGATION)
    qualifiers = frozenset({w for w in all_words if w in _QUALIFIERS} | {m for m in _JA_QUALIFIERS if m in rest})
    sequence = tuple(dict.fromkeys(
        w for w in _CONTENT_RE.findall(rest) if textnorm.has_cjk(w) or (len(w) > 1 and w not in textnorm.STOPWORDS)))
    latin: dict[str, list[str]] = {}
    for w in words | names:
        latin.setdefault(w[:3], []).append(w)
    return Profile(words, cjk, numbers, frozenset(weekdays), months, frozenset(names), negated, qualifiers, sequence,
                   norm, frozenset(textnorm.tokens(text)), {k: tuple(v) for k, v in latin.items()})


def _order(pa: Profile, pb: Profile) -> tuple[list[str], list[str]] | None:
    """The two words both texts hold that trade places, the rest in the same order ("Alice reports to
    Bob" / "Bob reports to Alice", `AWSからGCPへ` / `GCPからAWSへ`): the same words, another fact.
    Words moved otherwise (`本番のデプロイは火曜日` / `火曜日に本番のデプロイ`) are a paraphrase."""
    common = set(pa.sequence) & set(pb.sequence)
    left = [w for w in pa.sequence if w in common]
    right = [w for w in pb.sequence if w in common]
    moved = [i for i, (x, y) in enumerate(zip(left, right)) if x != y]
    if len(moved) != 2 or (left[moved[0]], left[moved[1]]) != (right[moved[1]], right[moved[0]]):
        return None
    x, y = left[moved[0]], left[moved[1]]
    # Only a trade in place: `テストはpytestで実行する` / `pytestでテストを実行する` moves its words, and
    # its particles say that each keeps its role.
    if _squashed(_swapped(pa.text, x, y)) != _squashed(pb.text):
        return None
    return [x, y], [y, x]


def _swapped(text: str, x: str, y: str) -> str:
    def whole(word: str) -> str:
        latin = "a-z0-9\u00c0-\u024f"  # a Latin word ends at anything else (`本番はawsから`)
        return re.escape(word) if textnorm.has_cjk(word) else rf"(?<![{latin}]){re.escape(word)}(?![{latin}])"

    return re.sub(f"{whole(x)}|{whole(y)}", lambda m: y if m.group() == x else x, text)


def _squashed(text: str) -> str:
    return re.sub(r"[\W_]+", "", text)


def _only(mine: Iterable[str], theirs: frozenset[str]) -> list[str]:
    # A word the other side has is matched; only the rest need the ending-insensitive look.
    rest = [w for w in mine if w not in theirs]
    if not rest:
        return []
    return sorted(w for w in rest if not any(_stem_equal(w, t) for t in theirs))


def _name_missing(name: str, other: Profile) -> bool:
    if textnorm.has_cjk(name):
        return name not in other.text
    if name in other.words or name in other.names:
        return False
    # _stem_equal needs a common prefix of three letters (or equal words): look only there.
    return not any(_stem_equal(name, w) for w in other.by_prefix.get(name[:3], ()))


def differences(a: str | Profile, b: str | Profile) -> list[str]:
    """The details in which two texts differ, each as one short phrase; [] when none does."""
    pa = a if isinstance(a, Profile) else profile(a)
    pb = b if isinstance(b, Profile) else profile(b)
    found = []
    for label, left, right, show in (
        ("number", pa.numbers, pb.numbers, str),
        ("weekday", pa.weekdays, pb.weekdays, lambda i: WEEKDAYS[i]),
        ("month", pa.months, pb.months, lambda i: str(i)),
    ):
        if left != right:
            found.append(f"{label} {_sides(sorted(map(show, left - right)), sorted(map(show, right - left)))}")
    if pa.negated != pb.negated:
        found.append("negation " + _sides(["not"] if pa.negated else [], ["not"] if pb.negated else []))
    if pa.qualifiers != pb.qualifiers:
        found.append(f"qualifier {_sides(sorted(pa.qualifiers - pb.qualifiers), sorted(pb.qualifiers - pa.qualifiers))}")
    if (order := _order(pa, pb)) is not None:
        found.append(f"order {_sides(*order)}")
    names_a = sorted(n for n in pa.names if _name_missing(n, pb))
    names_b = sorted(n for n in pb.names if _name_missing(n, pa))
    if names_a or names_b:
        found.append(f"name {_sides(names_a, names_b)}")
    only_a = _only(pa.words, pb.words) + sorted(pa.cjk - pb.cjk)
    only_b = _only(pb.words, pa.words) + sorted(pb.cjk - pa.cjk)
    if only_a and only_b and not found:
        # Each side says something the other does not: a swapped value
        # ("cortado" / "flat white"), or a synonym. Both go to `conflicts`:
        # a missed merge costs a line there, a wrong one hides a fact.
        found.append(f"wording {_sides(only_a, only_b)}")
    return found


def _sides(left: Sequence[str], right: Sequence[str]) -> str:
    return f"{' '.join(left) or '-'} / {' '.join(right) or '-'}"


# ---------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Rules:
    """The numbers the rule uses; the duplicate threshold comes from the embedding model."""

    threshold: float
    threshold_origin: str = "given"
    merge_overlap: float = MERGE_OVERLAP
    conflict_overlap: float = CONFLICT_OVERLAP
    topic_margin: float = TOPIC_MARGIN

    @property
    def topic_threshold(self) -> float:
        return round(self.threshold - self.topic_margin, 4)


@dataclass(frozen=True)
class Judged:
    a: str  # fact stems
    b: str
    score: float
    overlap: float
    verdict: str  # merge | conflict | none
    differs: tuple[str, ...] = ()
    text_a: str = ""
    text_b: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "score": self.score, "overlap": self.overlap, "verdict": self.verdict,
                "differs": list(self.differs), "description_a": self.text_a, "description_b": self.text_b}


def judge(a: str, b: str, text_a: str, text_b: str, score: float, rules: Rules,
          profiles: dict[str, Profile] | None = None, overlap: float | None = None) -> Judged:
    """The rule, for one pair of descriptions and their embedding similarity.

    `profiles` caches each text's Profile across the pairs of one plan;
    `overlap` is their lexical overlap when the caller has it already.
    """
    cache = profiles if profiles is not None else {}
    pa = cache.get(text_a) or cache.setdefault(text_a, profile(text_a))
    pb = cache.get(text_b) or cache.setdefault(text_b, profile(text_b))
    if overlap is None:
        overlap = textnorm.jaccard(pa.tokens, pb.tokens)  # = neardup.overlap(text_a, text_b)
    overlap = round(overlap, 4)
    differs: tuple[str, ...] = ()
    verdict = "none"
    if overlap >= min(rules.merge_overlap, rules.conflict_overlap):
        differs = tuple(differences(pa, pb))
        if score >= rules.threshold and overlap >= rules.merge_overlap and not differs:
            verdict = "merge"
        elif score >= rules.topic_threshold and overlap >= rules.conflict_overlap and differs:
            verdict = "conflict"
    return Judged(a, b, round(score, 4), overlap, verdict, differs, text_a, text_b)


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Merge:
    survivor: "Fact"
    absorbed: tuple["Fact", ...]  # by file name
    pairs: tuple[Judged, ...]  # the judged pairs inside the cluster
    tags: tuple[str, ...] | None  # the survivor's tags after the merge; None: unchanged
    source: str | None  # the survivor's source after the merge; None: unchanged
    pin: bool  # an absorbed fact was pinned: the survivor takes the pin

    def spec(self) -> facts_mod.FactInput:
        return facts_mod.FactInput(
            name=name_of(self.survivor),
            tags=self.tags,
            source=self.source,
            pinned=True if self.pin else None,
            supersedes=tuple(name_of(f) for f in self.absorbed),
        )

    def links(self) -> list[tuple["Fact", Judged]]:
        """Each absorbed fact with its pair against the survivor (complete linkage: always there)."""
        by_pair = {frozenset((p.a, p.b)): p for p in self.pairs}
        return [(f, by_pair[frozenset((self.survivor.stem, f.stem))]) for f in self.absorbed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "survivor": name_of(self.survivor),
            "description": self.survivor.description,
            "absorbed": [{"name": name_of(f), "description": f.description} for f in self.absorbed],
            "pairs": [p.to_dict() for p in self.pairs],
            "tags": list(self.tags if self.tags is not None else self.survivor.tags),
            "source": self.source if self.source is not None else self.survivor.meta("source"),
        }


def name_of(fact: "Fact") -> str:
    from ..fact import NAME_RE

    return fact.name if NAME_RE.match(fact.name) else fact.stem


@dataclass
class Plan:
    embedder: str
    rules: Rules
    merges: list[Merge]
    conflicts: list[Judged]
    facts: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "threshold": self.rules.threshold,
            "threshold_origin": self.rules.threshold_origin,
            "topic_threshold": self.rules.topic_threshold,
            "merge_overlap": self.rules.merge_overlap,
            "conflict_overlap": self.rules.conflict_overlap,
            "facts": self.facts,
            "merges": [m.to_dict() for m in self.merges],
            "conflicts": [c.to_dict() for c in self.conflicts],
            "notes": self.notes,
        }


def _when(fact: "Fact") -> datetime | None:
    for key in ("updated", "created"):
        value = fact.meta(key)
        if value:
            try:
                return clock.parse_date(str(value))
            except ValueError:
                continue
    return None


def _confidence(fact: "Fact") -> float:
    from ..values import unit_value

    return unit_value(fact.meta("confidence")) or 0.0


def survivor_order(facts: Sequence["Fact"]) -> list["Fact"]:
    """Most confident first, then newest (updated, else created), then by file name."""

    def key(fact: "Fact") -> tuple:
        when = _when(fact)
        return (-_confidence(fact), -when.timestamp() if when else float("inf"), fact.stem)

    return sorted(facts, key=key)


def _merge_for(members: Sequence["Fact"], judged: dict[frozenset[str], Judged]) -> Merge:
    ordered = survivor_order(members)
    survivor, absorbed = ordered[0], tuple(sorted(ordered[1:], key=lambda f: f.stem))
    tags = list(dict.fromkeys(t for f in ordered for t in f.tags))
    sources = list(dict.fromkeys(str(f.meta("source")).strip() for f in ordered if f.meta("source")))
    source = "; ".join(sources) or None
    old_source = str(survivor.meta("source")).strip() if survivor.meta("source") else None
    pin = any(f.pinned for f in absorbed) and not survivor.pinned
    stems = [f.stem for f in ordered]
    pairs = tuple(judged[frozenset((a, b))] for i, a in enumerate(stems) for b in stems[i + 1:])
    return Merge(
        survivor, absorbed, pairs,
        tuple(tags) if tags != survivor.tags else None,
        source if source != old_source else None,
        pin,
    )


def complete_link(ids: Sequence[str], edges: Iterable[tuple[str, str, float]], max_size: int | None = None) -> list[list[str]]:
    """Groups in which every two members are joined by an edge, built best edge first.

    Two groups join only when all pairs across them are edges, so a chain
    a~b, b~c never pulls in c when a and c are not alike; nor when the joined
    group would outgrow `max_size`. Groups of one are left out; the result is
    ordered by the position of each group's first id.
    """
    position = {i: n for n, i in enumerate(ids)}
    linked = {}
    for a, b, score in edges:
        linked[frozenset((a, b))] = score
    group = {i: [i] for i in ids}
    for key, _score in sorted(linked.items(), key=lambda kv: (-kv[1], sorted(position[x] for x in kv[0]))):
        a, b = sorted(key, key=position.__getitem__)
        ga, gb = group[a], group[b]
        if ga is gb or (max_size is not None and len(ga) + len(gb) > max_size):
            continue
        if all(frozenset((x, y)) in linked for x in ga for y in gb):
            ga.extend(gb)
            for member in gb:
                group[member] = ga
    seen, out = set(), []
    for i in ids:
        g = group[i]
        if len(g) > 1 and id(g) not in seen:
            seen.add(id(g))
            out.append(sorted(g, key=position.__getitem__))
    return out


def build(facts: Sequence["Fact"], scored: Iterable[tuple[str, str, float]], rules: Rules, *, embedder: str = "") -> Plan:
    """The plan, from the live facts and the embedding similarity of their candidate pairs (pure).

    A pair below the topic threshold, or whose lexical overlap is below both
    overlap limits, can be neither a merge nor a conflict: it is dropped before
    its details are read, which is most pairs at scale.
    """
    eligible = [f for f in facts if f.type not in SKIP_TYPES and f.description]
    by_stem = {f.stem: f for f in eligible}
    judged = []
    profiles: dict[str, Profile] = {}
    token_sets: dict[str, frozenset[str]] = {}
    lowest = min(rules.merge_overlap, rules.conflict_overlap)
    floor = min(rules.threshold, rules.topic_threshold)
    for a, b, score in scored:
        if score < floor or a == b:
            continue
        fa, fb = by_stem.get(a), by_stem.get(b)
        if fa is None or fb is None:
            continue
        if fb.stem < fa.stem:
            fa, fb = fb, fa
        ta = token_sets.get(fa.description)
        if ta is None:
            ta = token_sets[fa.description] = frozenset(textnorm.tokens(fa.description))
        tb = token_sets.get(fb.description)
        if tb is None:
            tb = token_sets[fb.description] = frozenset(textnorm.tokens(fb.description))
        shared = len(ta & tb)
        overlap = shared / (len(ta) + len(tb) - shared) if ta and tb else 0.0  # textnorm.jaccard
        if overlap < lowest:
            continue
        found = judge(fa.stem, fb.stem, fa.description, fb.description, score, rules, profiles, overlap)
        judged.append(_kept_apart(found, fa, fb) if found.verdict == "merge" else found)
    edges = [(j.a, j.b, j.score) for j in judged if j.verdict == "merge"]
    groups = complete_link([f.stem for f in eligible], edges)
    by_pair = {frozenset((j.a, j.b)): j for j in judged if j.verdict == "merge"}
    merges = [_merge_for([by_stem[s] for s in g], by_pair) for g in groups]
    conflicts = sorted((j for j in judged if j.verdict == "conflict"), key=lambda j: (-j.score, j.a, j.b))
    return Plan(embedder, rules, merges, conflicts, len(eligible))


def _kept_apart(found: Judged, a: "Fact", b: "Fact") -> Judged:
    """A pair the text would merge, made a conflict when the facts differ in type or expiry: a feedback
    fact folded into a project fact left the never-forget class (a later `forget --policies` archived
    it), and a fact that never expires folded into one that does went with it."""
    differs = []
    if a.type != b.type:
        differs.append(f"type {_sides([a.type or '-'], [b.type or '-'])}")
    ends = [str(f.meta("expires") or "") for f in (a, b)]
    if ends[0] != ends[1]:
        differs.append(f"expires {_sides([ends[0] or 'never'], [ends[1] or 'never'])}")
    return replace(found, verdict="conflict", differs=tuple(differs)) if differs else found


# ---------------------------------------------------------------- conflicts, ranked and grouped


def strength(conflict: Judged) -> float:
    """How sure it is that two facts state the same thing with one detail changed: the mean of
    embedding similarity and lexical overlap (a pair that is word for word the same but for a
    number ranks above one that merely shares a topic)."""
    return round((conflict.score + conflict.overlap) / 2, 4)


@dataclass(frozen=True)
class ConflictGroup:
    fact: str  # the stem the group is about: of its pairs' facts, the one in most conflicts
    pairs: tuple[Judged, ...]  # strongest first; each pair appears in exactly one group

    @property
    def best(self) -> float:
        return strength(self.pairs[0])


def grouped(conflicts: Sequence[Judged]) -> list[ConflictGroup]:
    """Conflicts grouped by fact, strongest group first.

    Each pair goes to whichever of its two facts is in more conflicts (then
    the first by name), so one fact that disagrees with twenty others shows as
    one group of twenty rather than twenty scattered lines.
    """
    degree: dict[str, int] = {}
    for c in conflicts:
        degree[c.a] = degree.get(c.a, 0) + 1
        degree[c.b] = degree.get(c.b, 0) + 1
    groups: dict[str, list[Judged]] = {}
    for c in conflicts:
        owner = min((c.a, c.b), key=lambda s: (-degree[s], s))
        groups.setdefault(owner, []).append(c)
    out = []
    for fact, pairs in groups.items():
        pairs.sort(key=lambda c: (-strength(c), c.a, c.b))
        out.append(ConflictGroup(fact, tuple(pairs)))
    out.sort(key=lambda g: (-g.best, -len(g.pairs), g.fact))
    return out


def ranked(conflicts: Sequence[Judged], limit: int | None = None) -> list[tuple[ConflictGroup, Judged]]:
    """(group, pair) in display order, at most `limit` pairs (None or 0: all)."""
    out = [(g, c) for g in grouped(conflicts) for c in g.pairs]
    return out[:limit] if limit else out


# ---------------------------------------------------------------- with the store


def rules_for(store: "Store", threshold: float, origin: str) -> Rules:
    """The rule's numbers: the model's threshold, and [consolidate] overrides from memctl.toml."""
    from ..errors import BadInput

    table = dict(config.section(store.config.raw, "consolidate"))
    values = {}
    for key, default in (("merge_overlap", MERGE_OVERLAP), ("conflict_overlap", CONFLICT_OVERLAP), ("topic_margin", TOPIC_MARGIN)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise BadInput(f"memctl.toml: [consolidate] {key} must be a number between 0 and 1, got {value!r}")
        values[key] = float(value)
    return Rules(threshold, origin, **values)


def plan(store: "Store", *, embedder: "Embedder | None" = None, neighbours: int | None = None) -> Plan:
    """Compare each live fact with its nearest neighbours by the store's embedder and judge the pairs.

    The vectors come from the cache shared with `near-dup` and recall (only new
    or changed facts are embedded); the pairs from
    `neardup.nearest_pairs`: each fact's `neighbours` most similar facts at
    or above the topic threshold ([consolidate] neighbours, default 10).
    """
    engine = neardup.engine_for(store, embedder)
    rules = rules_for(store, engine.threshold, engine.threshold_origin)
    k = neighbours if neighbours is not None else neighbours_for(store)
    # An expired fact is no survivor (the merge would fold a current fact into one the next policy run
    # archives) and no one to merge: `forget --policies` takes it out.
    now = clock.now()
    # (a fact of no type — a Claude Code topic file without frontmatter — is a person's note: never merged)
    live = [f for f in facts_mod.live_facts(store) if not clock.expired(f.meta("expires"), now) and f.type]
    source = neardup.facts_source(store)
    rows = neardup.fact_rows(store, live)  # the texts near-dup and recall embed: one vector per fact
    vectors = neardup._vectors(store, source, engine, rows)
    ii, jj, ss = neardup.nearest_pairs(vectors.matrix, k, max(-1.0, min(rules.threshold, rules.topic_threshold)))
    stems = [r.id for r in rows]
    scored = ((stems[i], stems[j], s) for i, j, s in zip(ii.tolist(), jj.tolist(), ss.tolist()))
    result = build(live, scored, rules, embedder=engine.label)
    result.notes = list(engine.notes)
    if len(rows) > neardup.EXACT_UP_TO:
        result.notes.append(f"{len(rows)} facts: nearest neighbours searched by cluster (approximate; "
                            f"exact up to {neardup.EXACT_UP_TO})")
    return result


def neighbours_for(store: "Store") -> int:
    from ..errors import BadInput

    value = config.section(store.config.raw, "consolidate").get("neighbours", NEIGHBOURS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise BadInput(f"memctl.toml: [consolidate] neighbours must be a whole number from 1 to 1000, got {value!r}")
    return value


def conflicts(store: "Store", *, embedder: "Embedder | None" = None) -> Plan:
    return plan(store, embedder=embedder)


@dataclass
class Result:
    plan: Plan
    applied: bool
    changes: list[facts_mod.Change]
    commit: str | None = None


def _guard(merges: Sequence[Merge]):
    # The whole fact, not its description alone: a type, expiry or confidence changed since the plan changes the merge.
    expected = {f.stem: (f.front, f.body) for m in merges for f in (m.survivor, *m.absorbed)}

    def check(live: list["Fact"]) -> None:
        now = {f.stem: (f.front, f.body) for f in live}
        changed = sorted(s for s, d in expected.items() if now.get(s) != d)
        if changed:
            raise Refused(
                "facts changed while consolidation was planned: " + ", ".join(changed),
                hint="run `memctl consolidate` again",
            )

    return check


def message(merges: Sequence[Merge]) -> str:
    absorbed = sum(len(m.absorbed) for m in merges)
    lines = [f"memory: consolidate {absorbed + len(merges)} facts into {len(merges)}", ""]
    for m in merges:
        lines.append(f"{name_of(m.survivor)} supersedes " + ", ".join(name_of(f) for f in m.absorbed))
    return "\n".join(lines)


def apply(store: "Store", merges: Sequence[Merge], *, commit_changes: bool = True) -> tuple[list[facts_mod.Change], str | None]:
    if not merges:
        return [], None
    changes = facts_mod.update_many(
        store, [m.spec() for m in merges], message(merges), commit_changes=commit_changes, guard=_guard(merges)
    )
    return changes, changes[0].commit if changes else None


def consolidate(store: "Store", *, dry_run: bool = True, embedder: "Embedder | None" = None, commit_changes: bool = True) -> Result:
    """Plan the merges; unless `dry_run`, apply them in one commit."""
    made = plan(store, embedder=embedder)
    if dry_run or not made.merges:
        return Result(made, False, [])
    changes, sha = apply(store, made.merges, commit_changes=commit_changes)
    return Result(made, True, changes, sha)
