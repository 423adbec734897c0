"""The session-start bundle: what an agent loads into its context window.

Parts, most important first: pinned facts in full, the MEMORY.md index, the
STATE.md files, with a query the best facts in full and the best episodes, and
a list of old facts to verify before use. Parts are added in that order while
they fit the token budget, so the lowest-ranked parts are the ones dropped.
The output depends only on the store and the query, never on the clock's
seconds, so two runs give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import clock, fact as fact_mod, recall as recall_mod, textnorm
from .errors import BadInput
from .store import Store

SECTIONS = {
    "pinned": "## Pinned facts",
    "index": "## Memory index (MEMORY.md)",
    "state": "## State",
    "facts": "## Relevant facts",
    "episodes": "## Relevant episodes",
    "stale": "## May be stale — verify before use",
}


@dataclass(frozen=True)
class Part:
    section: str
    text: str
    key: str | None = None  # what the access ledger records as shown

    @property
    def tokens(self) -> int:
        return textnorm.estimate_tokens(self.text) + 1  # + the newline that joins it


@dataclass(frozen=True)
class Bundle:
    text: str
    tokens: int
    budget: int
    included: list[Part]
    dropped: list[Part]

    def to_dict(self) -> dict[str, Any]:
        sections: dict[str, int] = {}
        for part in self.included:
            sections[part.section] = sections.get(part.section, 0) + 1
        return {
            "budget": self.budget, "tokens": self.tokens, "sections": sections,
            "dropped": len(self.dropped), "shown": [p.key for p in self.included if p.key],
            "text": self.text,
        }


def _pinned_parts(store: Store, facts: list[fact_mod.Fact]) -> list[Part]:
    pinned = [f for f in facts if f.meta("pinned")]
    pinned.sort(key=lambda f: (-recall_mod._float(f.meta("importance"), 0.5), f.stem))
    return [Part("pinned", f"### {store.rel(f.path)}\n{fact_mod.render(f).rstrip()}", f.name or f.stem) for f in pinned]


def _index_parts(store: Store) -> list[Part]:
    if not store.index_path.exists():
        return []
    text = store.index_path.read_text(encoding="utf-8", errors="replace")
    limit_lines, limit_bytes = store.config.max_index_lines, store.config.max_index_bytes
    lines, used = [], 0
    for line in text.splitlines()[:limit_lines]:
        used += len(line.encode("utf-8")) + 1
        if used > limit_bytes:
            break
        if line.strip() and not line.strip().startswith("<!-- memctl:index"):
            lines.append(line)
    return [Part("index", line) for line in lines]


def _state_parts(store: Store) -> list[Part]:
    if not store.state_dir.is_dir():
        return []
    parts = []
    for path in sorted(store.state_dir.rglob("STATE.md")):
        body = path.read_text(encoding="utf-8", errors="replace").rstrip()
        parts.append(Part("state", f"### {store.rel(path)}\n{body}"))
    return parts


def _stale_parts(store: Store, facts: list[fact_mod.Fact], stale_days: float, shown: set[str]) -> list[Part]:
    now = clock.now()
    old = []
    for f in facts:
        when = recall_mod._time(f.meta("updated")) or recall_mod._time(f.meta("created"))
        if when is None or (now - when).days < stale_days:
            continue
        old.append((when, f))
    old.sort(key=lambda pair: (pair[0], pair[1].stem))
    return [
        Part("stale", f"- {f.name or f.stem} (updated {when.date().isoformat()}): {f.description} [{store.rel(f.path)}]", f.name or f.stem)
        for when, f in old
        if (f.name or f.stem) not in shown
    ]


def build(store: Store, *, query: str | None = None, budget: int = 4000, k: int = 5, mode: str | None = None,
          log: bool = True) -> Bundle:
    if budget < 50:
        raise BadInput(f"--budget {budget} is too small", hint="give at least 50 tokens")
    from . import facts as facts_mod

    live = facts_mod.live_facts(store)
    parts = _pinned_parts(store, live) + _index_parts(store) + _state_parts(store)
    pinned_keys = {p.key for p in parts if p.section == "pinned"}
    query_rows: list[tuple[str, list[str]]] = []
    if query:
        _, (fact_hits,) = recall_mod.recall(store, [query], k=k, source="facts", mode=mode, log=False)
        by_path = {store.rel(f.path): f for f in live}
        for hit in fact_hits:
            if hit.item.key in pinned_keys or hit.item.path not in by_path:
                continue
            text = fact_mod.render(by_path[hit.item.path]).rstrip()
            parts.append(Part("facts", f"### {hit.item.path} (score {hit.score:.2f})\n{text}", hit.item.key))
        if (store.ledgers_dir / "episodes.tsv").exists():
            _, (episode_hits,) = recall_mod.recall(store, [query], k=k, source="episodes", mode=mode, log=False)
            for hit in episode_hits:
                when = hit.item.when.date().isoformat() if hit.item.when else "?"
                parts.append(Part("episodes", f"- [{hit.item.type} {when}] {hit.item.description} ({hit.item.path})", hit.item.key))
    stale_days = float(store.config.raw.get("recall", {}).get("stale_days", 90))
    shown = {p.key for p in parts if p.key}
    parts += _stale_parts(store, live, stale_days, shown)

    title = "# memctl context" + (f" — query: {query}" if query else "")
    used = textnorm.estimate_tokens(title) + 1
    included: list[Part] = []
    dropped: list[Part] = []
    opened: set[str] = set()
    for part in parts:  # already in priority order, best first within each section
        cost = part.tokens
        if part.section not in opened:
            cost += textnorm.estimate_tokens(SECTIONS[part.section]) + 2
        if used + cost <= budget:
            included.append(part)
            used += cost
            opened.add(part.section)
        else:
            dropped.append(part)
    text = _render(title, included)
    tokens = textnorm.estimate_tokens(text)
    if log:
        recall_mod.log_access(store, "context", [(query or "", [p.key for p in included if p.key])])
    return Bundle(text, tokens, budget, included, dropped)


def _render(title: str, parts: list[Part]) -> str:
    lines = [title]
    current = None
    for part in parts:
        if part.section != current:
            lines += ["", SECTIONS[part.section]]
            current = part.section
        lines.append(part.text)
    return "\n".join(lines) + "\n"
