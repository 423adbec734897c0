"""The session-start bundle: what an agent loads into its context window.

Parts, most important first: pinned facts (description and body, not their
YAML; not once past their `expires`), the STATE.md files, with a query the best facts and the best episodes,
the MEMORY.md index (left out for agents that load MEMORY.md themselves, as
Claude Code does), and a list of old facts to verify before use. Parts are added in that order while
they fit the token budget, so the lowest-ranked parts are the ones dropped; a pinned fact longer than
what is left is cut to fit instead, with a note naming `memctl show` for the rest. Pinned facts that do
not fit together share the budget (the shortest whole, the others cut to equal shares), and those left
out still (too many for a start each) are named in a line of the bundle.
The output depends only on the store and the query, never on the clock's
seconds, so two runs give the same bytes.
"""

from __future__ import annotations

import os
from typing import Any, Callable, NamedTuple

from . import clock, recall as recall_mod, textnorm
from . import errors
from .errors import BadInput, warn
from .fsutil import TooBig, link_message, link_on_way, read_index, read_state, tree_files
from .store import Store

SECTIONS = {
    "pinned": "## Pinned facts",
    "index": "## Memory index (MEMORY.md)",
    "state": "## State",
    "facts": "## Relevant facts",
    "episodes": "## Relevant episodes",
    "docs": "## Relevant documents",
    "stale": "## May be stale — verify before use",
}
ORDER = list(SECTIONS)
STALE_LIMIT = 100  # the order sections are printed in (not their priority)


class Part(NamedTuple):  # not dataclasses: `import dataclasses` costs context's start-up ~5 ms
    section: str
    text: str
    key: str | None = None  # what the access ledger records as shown
    heading: str | None = None  # a sub-heading printed before the first part under it (never on its own)

    @property
    def tokens(self) -> int:
        return textnorm.estimate_tokens(self.text) + 1  # + the newline that joins it


class Bundle(NamedTuple):
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


def _fact_texts(store: Store, conn, paths: list[str]) -> dict[str, str]:
    """Facts as an agent reads them: the description, then the body (the **Why:** / **How to apply:**
    lines by convention), from the index just synced (no file read, no YAML parse)."""
    from . import rindex

    return {path: "\n".join(part for part in (description.strip(), body.strip()) if part)
            for path, (description, body) in rindex.fact_bodies(conn, store.root, paths).items()}


def _pinned_parts(store: Store, conn) -> list[Part]:
    from . import rindex

    # A pinned fact past its `expires` is no longer how things are: recall leaves it out, so does this.
    ahead, args = rindex.not_expired(clock.now())
    pinned = rindex.live_facts_where(conn, f"pinned = 1 AND {ahead}", args, order="importance DESC, key")
    texts = _fact_texts(store, conn, [doc.path for doc in pinned])
    return [Part("pinned", f"### {doc.path}\n{texts[doc.path]}", doc.key) for doc in pinned if doc.path in texts]


def _unlinked(store: Store, paths) -> list:
    """`paths` without those reached through a symbolic link, each of those named in a warning (never read)."""
    kept = []
    for path in paths:
        link = link_on_way(store.root, path)
        if link is None:
            kept.append(path)
        else:
            errors.warn(f"left out of the context: {link_message(store.root, link)}", hint="run `memctl doctor`")
    return kept


def _expired_lines(store: Store, conn, text: str) -> set[int]:
    """MEMORY.md's lines (numbers) linking a fact past its `expires`: the file lists it until memctl's
    next write (or the nightly job) regenerates it, but the bundle is how things are now."""
    from . import rindex

    expired = rindex.live_facts_where(conn, *rindex.expired(clock.now()))
    if not expired:
        return set()
    from . import index  # (its fact parsing imports PyYAML: only when a line is to be left out)

    folder = store.index_path.parent
    paths = {os.path.normpath(store.root / doc.path) for doc in expired}
    return {line.lineno for line in index.parse_lines(text) if os.path.normpath(folder / line.target) in paths}


def _index_parts(store: Store, conn) -> list[Part]:
    if not _unlinked(store, [store.index_path]):
        return []
    try:
        text = read_index(store.index_path, store.rel(store.index_path))
    except FileNotFoundError:
        return []
    except TooBig as exc:
        warn(f"left out of the context: {exc.message}", hint=exc.hint)
        return []
    limit_lines, limit_bytes = store.config.max_index_lines, store.config.max_index_bytes
    parts, used, heading = [], 0, None
    expired = _expired_lines(store, conn, text)
    for number, line in enumerate((line.rstrip("\r") for line in text.split("\n")[:limit_lines]), start=1):  # as parse_lines counts
        used += len(line.encode("utf-8")) + 1
        if used > limit_bytes:
            break
        stripped = line.strip()
        if stripped.startswith("- [") and number not in expired:
            parts.append(Part("index", line, heading=heading))
        elif stripped.startswith("## "):
            heading = "#" + stripped  # one level below the bundle's own sections
    return parts


def _state_parts(store: Store) -> list[Part]:
    if not _unlinked(store, [store.state_dir]) or not store.state_dir.is_dir():
        return []
    parts = []
    for path in _unlinked(store, tree_files(store.state_dir, "STATE.md")):  # (a linked folder is not entered)
        try:
            body = read_state(path, store.rel(path)).decode("utf-8", errors="replace").rstrip()
        except TooBig as exc:
            errors.warn(f"left out {store.rel(path)}: {exc.details['reason']}", hint="memctl state update replaces it")
            continue
        parts.append(Part("state", f"### {store.rel(path)}\n{body}"))
    return parts


def _stale_parts(conn, stale_days: float, shown: set[str]) -> list[Part]:
    from . import rindex

    cutoff = clock.now().timestamp() - stale_days * 86400
    parts = []
    # The oldest STALE_LIMIT only: a longer list would not fit any sensible budget.
    for doc in rindex.live_facts_where(conn, "ts IS NOT NULL AND ts < ?", [cutoff], order=f"ts, key LIMIT {STALE_LIMIT}"):
        if doc.key in shown:
            continue
        when = rindex.local_time(doc.ts)
        if when is None:  # (a placeholder time, in an index built before placeholders were left out)
            continue
        day = when.date().isoformat()
        parts.append(Part("stale", f"- {doc.key} (updated {day}): {doc.description} [{doc.path}]", doc.key))
    return parts


def build(store: Store, *, query: str | None = None, budget: int = 4000, k: int = 5, mode: str | None = None,
          min_score: float | None = None, log: bool = True, include_index: bool = True,
          max_chars: int | None = None, state_root: bool = False, documents: str = "all",
          shown_as: Callable[[str], str] | None = None) -> Bundle:
    """The bundle within `budget` estimated tokens.

    Priority (what is dropped last comes first): pinned facts, STATE.md files,
    the facts and episodes that answer --query, the MEMORY.md index, then the
    list of old facts. With a large store the index alone can fill a small
    budget; an agent that asked a question gets its answers first.
    `include_index=False` leaves MEMORY.md out, for agents that load it
    themselves (Claude Code does, at session start). `max_chars` caps the
    text in characters as well (Claude Code shows the model only a preview of
    longer hook output); `state_root` says under the title the store's
    absolute root, the folder every path in the bundle is relative to.
    `documents`: which declared sources answer --query too (docs/SOURCES.md): all, prompt (those
    with `prompt = true`, for the per-prompt hook) or none. `shown_as`: what each text becomes where
    the bundle is printed (the hooks escape what another clone pushed), applied before the budget and
    `max_chars` are counted, so that what is printed is what fits.
    """
    if budget < 50:
        raise BadInput(f"budget {budget} is too small", hint="give at least 50 tokens", arg="budget")
    if query is not None:
        query = recall_mod.check_query(query)
    from . import rindex

    with rindex.opened(store, episodes=bool(query)) as conn:  # (no query: facts alone, a year's episodes unread)
        parts = _pinned_parts(store, conn) + _state_parts(store)
        pinned_keys = {p.key for p in parts if p.section == "pinned"}
        if query:
            _, (fact_hits,) = recall_mod.answered(store, conn, [query], k=k, source="facts", mode=mode,
                                                   min_score=min_score)
            texts = _fact_texts(store, conn, [hit.item.path for hit in fact_hits if hit.item.key not in pinned_keys])
            for hit in fact_hits:
                text = texts.get(hit.item.path)
                if text is not None:
                    parts.append(Part("facts", f"### {hit.item.path} (score {hit.score:.2f})\n{text}", hit.item.key))
            _, (episode_hits,) = recall_mod.answered(store, conn, [query], k=k, source="episodes", mode=mode,
                                                      min_score=min_score)
            for hit in episode_hits:
                when = hit.item.when.date().isoformat() if hit.item.when else "?"
                parts.append(Part("episodes", f"- [{hit.item.type} {when}] {hit.item.summary} ({hit.item.path})", hit.item.key))
            parts += _doc_parts(store, query, k, mode, min_score, documents)
        if include_index:
            parts += _index_parts(store, conn)
        stale_days = recall_mod.stale_days_for(store)
        parts += _stale_parts(conn, stale_days, {p.key for p in parts if p.key})

    title = "# memctl context" + (f" — query: {query}" if query else "")
    if state_root:
        folder = store.rel(store.index_path.parent)  # MEMORY.md's links are relative to its own folder
        links = f"; the index's links are relative to {folder}/" if include_index and folder not in ("", ".") else ""
        title += f"\nStore: {store.root} (every path below is relative to it{links})"
    if shown_as is not None:
        title = shown_as(title)
        parts = [p._replace(text=shown_as(p.text), heading=None if p.heading is None else shown_as(p.heading)) for p in parts]
    used = textnorm.estimate_tokens(title) + 1
    chars = len(title) + 1  # the text's exact length: each line and its newline (see _render)
    char_limit = max_chars if max_chars is not None else float("inf")
    room_tokens = budget - used - textnorm.estimate_tokens(SECTIONS["pinned"]) - 2
    room_chars = char_limit - chars - len(SECTIONS["pinned"]) - 2
    parts, reserve = _pinned_shared(parts, room_tokens, room_chars)
    included: list[Part] = []
    dropped: list[Part] = []
    opened: set[str] = set()
    opened_headings: set[tuple[str, str]] = set()
    noted = False
    for part in [*parts, None]:  # in priority order, best first within each section; None: the end
        if not noted and (part is None or part.section != "pinned"):  # the pinned ones are done
            noted = True
            left_out = [p.key for p in dropped if p.section == "pinned" and p.key]
            head_tokens, head_chars = ((0, 0) if "pinned" in opened else
                                       (textnorm.estimate_tokens(SECTIONS["pinned"]) + 2, len(SECTIONS["pinned"]) + 2))
            note = _pinned_note(left_out, budget - used - head_tokens, char_limit - chars - head_chars) if left_out else None
            if note is not None:  # the model must know that pinned facts are missing, and how to read them
                included.append(note)
                used, chars = used + note.tokens + head_tokens, chars + len(note.text) + 1 + head_chars
                opened.add("pinned")
        if part is None:
            break
        # room kept for that note while pinned facts are taken
        limit, char_cap = (budget - reserve.tokens, char_limit - len(reserve.text) - 1) if not noted else (budget, char_limit)
        cost, length = part.tokens, len(part.text) + 1
        if part.section not in opened:
            cost += textnorm.estimate_tokens(SECTIONS[part.section]) + 2
            length += len(SECTIONS[part.section]) + 2
        if part.heading is not None and (part.section, part.heading) not in opened_headings:
            cost += textnorm.estimate_tokens(part.heading) + 1  # a heading is paid for by its first line
            length += len(part.heading) + 1
        if part.section == "pinned" and not (used + cost <= limit and chars + length <= char_cap):
            # a pinned fact is never dropped for its length: cut to what is left, saying where the rest is
            extra_tokens, extra_chars = cost - part.tokens, length - len(part.text) - 1
            cut = _cut_to_fit(part, limit - used - extra_tokens, char_cap - chars - extra_chars)
            if cut is not None:
                part, cost, length = cut, cut.tokens + extra_tokens, len(cut.text) + 1 + extra_chars
        if used + cost <= limit and chars + length <= char_cap:
            included.append(part)
            used += cost
            chars += length
            opened.add(part.section)
            if part.heading is not None:
                opened_headings.add((part.section, part.heading))
        else:
            dropped.append(part)
    included.sort(key=lambda p: ORDER.index(p.section))  # stable: ranks within a section stay
    text = _render(title, included)
    tokens = textnorm.estimate_tokens(text)
    if log:
        recall_mod.log_access(store, "context", [(query or "", [p.key for p in included if p.key])])
    return Bundle(text, tokens, budget, included, dropped)


NO_NOTE = Part("pinned", "")  # no room kept for a note: every pinned fact fits whole


def _pinned_shared(parts: list[Part], tokens: float, chars: float) -> tuple[list[Part], Part]:
    """`parts` with the pinned ones cut to fair shares of `tokens` and `chars` when together they do not
    fit: the shortest are kept whole, the rest share what is left equally (each cut with its note). So
    fifteen long pinned facts are fifteen starts, not the first six in full and nine left out. And the
    note that would name them all, for which room is kept (some may still be left out: too many for
    a start each)."""
    pinned = [p for p in parts if p.section == "pinned"]
    if sum(p.tokens for p in pinned) <= tokens and sum(len(p.text) + 1 for p in pinned) <= chars:
        return parts, NO_NOTE
    shared, whole = _shares(pinned, tokens, chars)
    reserve = NO_NOTE
    if not whole:  # some get no start: keep room for the line that names them
        reserve = _pinned_note([p.key for p in pinned if p.key], tokens, chars, shortest=True) or NO_NOTE
        shared, _ = _shares(pinned, tokens - reserve.tokens, chars - len(reserve.text) - 1)
    order = iter(shared)
    return [next(order) if p.section == "pinned" else p for p in parts], reserve


def _shares(pinned: list[Part], tokens: float, chars: float) -> tuple[list[Part], bool]:
    """The pinned parts, the shortest whole and the others cut to equal shares of what is left; and
    whether each one fits its share (else the loop in build() cuts or drops it)."""
    shared: dict[int, Part] = {}
    fits = True
    by_size = sorted(range(len(pinned)), key=lambda i: (pinned[i].tokens, i))
    for done, i in enumerate(by_size):
        fair_tokens, fair_chars = tokens / (len(pinned) - done), chars / (len(pinned) - done)
        part = pinned[i]
        if part.tokens > fair_tokens or len(part.text) + 1 > fair_chars:
            cut = _cut_to_fit(part, fair_tokens, fair_chars)
            fits = fits and cut is not None
            part = cut or part  # too little for a start: the loop decides
        shared[i] = part
        tokens -= part.tokens
        chars -= len(part.text) + 1
    return [shared[i] for i in range(len(pinned))], fits


def _pinned_note(keys: list[str], tokens: float, chars: float, *, shortest: bool = False) -> Part | None:
    """A line naming the pinned facts left out, as many as fit `tokens` and `chars` (`shortest`: its
    shortest form, naming one); None when none does."""
    for shown in range(1 if shortest else len(keys), 0, -1):
        more = f" and {len(keys) - shown} more" if shown < len(keys) else ""
        text = (f"… {len(keys)} more pinned fact{'s' if len(keys) > 1 else ''} left out to stay within the budget: "
                f"{', '.join(keys[:shown])}{more} (`memctl show NAME` prints one)")
        part = Part("pinned", text)
        if part.tokens <= tokens and len(text) + 1 <= chars:
            return part
    return None


def _cut_to_fit(part: Part, tokens: float, chars: float) -> Part | None:
    """The longest start of `part` that fits `tokens` and `chars` with a note naming the rest (`memctl show`);
    None when less than a short line would be left of it."""
    note = f"\n… (cut to fit the budget: `memctl show {part.key}` prints all of it)"
    low, high = 0, len(part.text)
    while low < high:  # the estimate only grows with the text: search the longest start that fits
        middle = (low + high + 1) // 2
        tried = part.text[:middle].rstrip() + note
        if textnorm.estimate_tokens(tried) + 1 <= tokens and len(tried) + 1 <= chars:
            low = middle
        else:
            high = middle - 1
    if low < 20:
        return None
    return part._replace(text=part.text[:low].rstrip() + note)


def _doc_parts(store: Store, query: str, k: int, mode: str | None, min_score: float | None, documents: str) -> list[Part]:
    """The chunks of the declared sources that answer the query: where, under which headings, from what."""
    if documents == "none" or not store.config.raw.get("sources"):
        return []
    from . import docindex, sources

    declared = sources.declared(store)
    names = ["docs"] if documents == "all" else [n for n, s in declared.items() if s.prompt]
    hits = []
    for name in names:
        _, (found,) = docindex.answer(store, [query], source=name, k=k, mode=mode, min_score=min_score)
        hits += found
    hits = recall_mod.order(hits, k)
    bodies = docindex.bodies(store, [h.item.key for h in hits])
    parts = []
    for hit in hits:
        about = " > ".join(h for h in hit.item.title.split("\x1f") if h)
        origin = f"{hit.item.type}: {hit.item.outcome}" if hit.item.outcome else hit.item.type
        head = f"### {hit.item.path}" + (f" — {about}" if about else "") + f" ({origin}; score {hit.score:.2f})"
        parts.append(Part("docs", f"{head}\n{bodies.get(hit.item.key, hit.item.description).rstrip()}", hit.item.key))
    return parts


def _render(title: str, parts: list[Part]) -> str:
    lines = [title]
    current = heading = None
    for part in parts:
        if part.section != current:
            lines += ["", SECTIONS[part.section]]
            current, heading = part.section, None
        if part.heading is not None and part.heading != heading:
            lines.append(part.heading)
        heading = part.heading
        lines.append(part.text)
    return "\n".join(lines) + "\n"
