"""The ui's views: each asks the library for its data and returns (title, HTML body).

A view never writes: recall, context and the hooks are called with log=False.
Parameters arrive already checked by server.py; names are checked again here by
the store's own rules (facts.check_key, ledger.check_name, episodes.check_type,
state.check_scope), which raise BadInput before any file is opened.
Big reads (the episodes ledger, a ledger's counts, the topic conflicts) are kept
per process while their files are unchanged, so a view answers warm.
"""

from __future__ import annotations

import operator
import os
from collections import Counter
from typing import Any, Callable

from ..store import Store
from .html import bars, columns_chart, esc, finite, line_chart, link, table

LIST_LIMIT = 300  # rows of one fact type on the facts view (search finds the rest)
TIMELINE_LIMIT = 200  # newest episodes listed
DAYS_SHOWN = 90  # days on the episodes-per-day chart
TOP_VALUES = 8  # values per column on a ledger's counts
CLAUDE_CODE_LIMIT = 10_000  # characters Claude Code shows of a hook's output (docs/CLAUDE_CODE.md)
MODES = ("keyword", "hybrid", "vector")
MEMO_ENTRIES = 64  # pages and reads kept at most

_MEMO: dict[tuple, tuple[Any, Any]] = {}
_STAT = operator.attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")  # (what, store root, arguments) -> (files' stamp, value)


def _stamp(*paths) -> tuple:
    """What changes when any of these files changes (size and modification time; None when missing)."""
    stamps = []
    for path in paths:
        try:
            st = os.stat(path)
            stamps.append((st.st_size, st.st_mtime_ns))
        except OSError:
            stamps.append(None)
    return tuple(stamps)


def _dir_stamp(*folders) -> tuple:
    """Every entry's name, size and times in these folders: what changes when any fact file changes.
    One listdir and one stat per entry, made in C (as rindex checks the facts): ~10 ms for 10,000
    files, where parsing them takes seconds."""
    import functools

    stamps: list[Any] = []
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            stamps.append(None)
            continue
        try:
            names = os.listdir(fd)
            stats = list(map(functools.partial(os.stat, dir_fd=fd, follow_symlinks=False), names))
            stamps.append(hash(tuple(zip(names, map(_STAT, stats)))))
        except OSError:  # one went away while listing: changed, so a stamp no earlier one equals
            stamps.append(object())
        finally:
            os.close(fd)
    return tuple(stamps)


def _facts_stamp(store: Store) -> tuple:
    return _dir_stamp(store.memory_dir, store.archive_dir)


def _find(store: Store, name: str):
    """A fact by stem or name, live first, then the archive (newest first), as facts.find; facts.find
    itself words the error when there is none."""
    from .. import facts

    def keyed() -> dict[str, Any]:
        found: dict[str, Any] = {}
        for item in sorted(facts.scan_archive(store), key=lambda f: f.stem) + facts.live_facts(store, quiet=True):
            found[item.stem] = item
            if item.name:
                found[item.name] = item
        return found

    facts.check_key(name, titles=store.layout == "claude")
    direct = _live_file(store, name)
    if direct is not None:
        return direct
    by_key = _memo(("keyed", str(store.root)), _facts_stamp(store), keyed)
    return by_key.get(name) or facts.find(store, name)


def _live_file(store: Store, stem: str):
    """The live fact whose file stem is `stem` (what facts.find matches first), read alone; None when
    there is no such regular file or it does not parse (then the full lookup decides)."""
    import stat

    from .. import fact as fact_mod
    from ..fsutil import link_on_way

    if stem == "MEMORY" or stem.startswith(".") or "/" in stem:
        return None
    path = store.memory_dir / f"{stem}.md"
    try:  # a link is never read (docs/RELIABILITY.md)
        if link_on_way(store.root, path) is not None or not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return fact_mod.load(path)
    except (OSError, fact_mod.FactParseError):
        return None


def _memo(key: tuple, stamp: tuple, compute: Callable[[], Any]) -> Any:
    held = _MEMO.get(key)
    if held is not None and held[0] == stamp:
        return held[1]
    value = compute()
    if len(_MEMO) >= MEMO_ENTRIES:  # filters and prompts are many: never an unbounded cache
        _MEMO.clear()
    _MEMO[key] = (stamp, value)
    return value


def _options(name: str, values, chosen: str | None, blank: str) -> str:
    opts = [f'<option value="">{esc(blank)}</option>']
    opts += [f'<option{" selected" if v == chosen else ""}>{esc(v)}</option>' for v in values]
    return f'<select name="{esc(name)}">{"".join(opts)}</select>'


# ---------------------------------------------------------------- facts and search

def facts_view(store: Store, q: str | None, mode: str | None) -> tuple[str, str]:
    from .. import recall

    form = (f'<form action="/" method="get"><input type="text" name="q" value="{esc(q or "")}" '
            f'placeholder="search (recall)" autofocus> {_options("mode", MODES, mode, "mode: keyword")} '
            f'<button>Search</button></form>')
    if q:
        _, (hits,) = recall.recall(store, [q], k=20, mode=mode or "keyword", log=False)
        if not hits:
            return "Facts", form + '<p class="muted" id="no-hits">nothing reaches the relevance floor</p>'
        rows = []
        for hit in hits:
            factors = [("relevance", hit.relevance)] + [(k, v) for k, v in hit.factors.items() if k != "relevance"]
            rows.append((link("/fact", hit.item.key, name=hit.item.key), esc(hit.item.type), esc(hit.item.description),
                         f"{hit.score:.3f}", bars(factors, width=300, label_width=80, scale=1, cls="factors")))
        body = form + f'<p id="hits">{len(hits)} {"hit" if len(hits) == 1 else "hits"} for <q>{esc(q)}</q></p>' + table(
            ("name", "type", "description", "score", "relevance and factors"), rows, raw=True)
        return "Facts", body
    return "Facts", form + _memo(("listing", str(store.root)), _facts_stamp(store), lambda: _listing(store))


def _listing(store: Store) -> str:
    from .. import facts

    live = facts.live_facts(store, quiet=True)
    by_type: dict[str, list] = {}
    for found in live:
        by_type.setdefault(found.type or "(none)", []).append(found)
    parts = [f"<p>{len(live)} live facts</p>",
             bars([(t, len(v)) for t, v in sorted(by_type.items())], width=360, label_width=110)]
    for fact_type, items in sorted(by_type.items()):
        rows = [(link("/fact", f.name or f.stem, name=f.name or f.stem), esc(f.description)) for f in items[:LIST_LIMIT]]
        more = (f'<p class="muted">and {len(items) - LIST_LIMIT} more: search to find them</p>'
                if len(items) > LIST_LIMIT else "")
        parts.append(f"<h2>{esc(fact_type)} ({len(items)})</h2>" + table(("name", "description"), rows, raw=True) + more)
    return "".join(parts)


def fact_view(store: Store, name: str) -> tuple[str, str]:
    from .. import access, facts, fsutil, recall

    found = _find(store, name)
    key = found.name or found.stem
    parts = []
    if found.archived:
        replaced = found.meta("superseded_by")
        parts.append('<p class="warn">archived: ' + (f"superseded by {link('/fact', replaced, name=str(replaced))}"
                     if replaced else esc(found.meta("archived_reason") or "no reason recorded")) + "</p>")
    parts.append(f"<p>{esc(found.description)}</p><p class=muted>{esc(found.type)} · {esc(store.rel(found.path))}</p>")
    parts.append("<h2>Text</h2><pre id=fact-text>" + esc(fsutil.read_text(store.root, found.path)) + "</pre>")
    chain = _chain(store, found)
    if len(chain) > 1:
        parts.append("<h2>Supersession chain</h2><p>" + " → ".join(
            f"<strong>{esc(n)}</strong>" if n == key else link("/fact", n, name=n) for n in chain) + "</p>")
    history = facts.path_history(store, found.path)  # facts.history, without finding the fact again
    parts.append("<h2>Git history</h2>" + table(("date", "commit", "message", "changed"), [
        (e.date, e.commit[:10], e.message, f"+{e.added} -{e.removed}") for e in history]))
    rows = recall.audit(store, fact=key)
    shown = [r for r in rows if not access.is_use(r.get("command", ""))]
    used = [r for r in rows if access.is_use(r.get("command", ""))]
    parts.append(f"<h2>Shown ({len(shown)}) and used ({len(used)})</h2>" + table(
        ("ts", "agent", "command", "query"), [(r.get("ts"), r.get("agent"), r.get("command"), r.get("query"))
                                              for r in (used + shown)[-200:]]))
    return key, "".join(parts)


def _chain(store: Store, found) -> list[str]:
    """Older facts this one superseded (oldest first), itself, then what superseded it."""
    from ..errors import MemctlError

    def get(name: str):
        try:
            return _find(store, name)
        except MemctlError:
            return None

    key = found.name or found.stem
    older, seen, at = [], {key}, found
    while at is not None and at.supersedes and len(seen) < 50:
        name = at.supersedes[0]
        if name in seen:
            break
        seen.add(name)
        older.insert(0, name)
        at = get(name)
    newer, at = [], found
    while at is not None and at.meta("superseded_by") and len(seen) < 100:
        name = str(at.meta("superseded_by"))
        if name in seen:
            break
        seen.add(name)
        newer.append(name)
        at = get(name)
    return older + [key] + newer


# ---------------------------------------------------------------- what the hooks inject

def inject_view(store: Store, prompt: str | None) -> tuple[str, str]:
    from ..integrations import hooks

    from .. import access, clock

    # What session start shows depends on the facts, the state, the ledgers, the access log and the
    # day (stale facts): computed again when one of them changes, else kept (it syncs the recall index).
    stamp = (_facts_stamp(store), _ledger_stamp(store), _dir_stamp(store.state_dir, access.pending_path(store).parent),
             clock.now().date())
    start = _memo(("session-start", str(store.root)), stamp, lambda: hooks.session_start(store, log=False))
    parts = [_injected("Session start", start, "session-start")]
    form = (f'<form action="/inject" method="get"><textarea name="prompt" placeholder="a prompt">{esc(prompt or "")}'
            f'</textarea><br><button>Show what the prompt hook adds</button></form>')
    parts.append("<h2>Per prompt</h2>" + form)
    if prompt:
        parts.append(_injected("For this prompt", hooks.prompt(store, prompt, log=False), "prompt"))
    return "Injected text", "".join(parts)


def _injected(title: str, text: str, ident: str) -> str:
    size = len(text)
    over = ' class="err"' if size > CLAUDE_CODE_LIMIT else ""
    return (f'<h2>{esc(title)}</h2><p id="{ident}-size"{over}>{size:,} of {CLAUDE_CODE_LIMIT:,} characters '
            f"(Claude Code's limit for a hook's output)</p>"
            + (f'<pre id="{ident}-text">{esc(text)}</pre>' if text else '<p class="muted">nothing would be added</p>'))


# ---------------------------------------------------------------- episodes

def _all_episodes(store: Store) -> list:
    from .. import episodes

    return _memo(("episodes", str(store.root)), _ledger_stamp(store), lambda: episodes.list_episodes(store))


def _ledger_stamp(store: Store) -> tuple:
    try:
        names = sorted(os.listdir(store.ledgers_dir))
    except OSError:
        names = []
    return tuple(names) + _stamp(*(store.ledgers_dir / n for n in names))


def episodes_view(store: Store, episode_type: str | None, agent: str | None) -> tuple[str, str]:
    from .. import episodes

    if episode_type:
        episodes.check_type(store, episode_type)
    return "Episodes", _memo(("episodes-page", str(store.root), episode_type, agent), _ledger_stamp(store),
                             lambda: _episodes_page(store, episode_type, agent))


def _episodes_page(store: Store, episode_type: str | None, agent: str | None) -> str:
    every = _all_episodes(store)
    chosen = [e for e in every if (not episode_type or e.type == episode_type) and (not agent or e.agent == agent)]
    agents = sorted({e.agent for e in every if e.agent})
    form = (f'<form action="/episodes" method="get">{_options("type", store.config.episode_types, episode_type, "every type")} '
            f'{_options("agent", agents, agent, "every agent")} <button>Filter</button></form>')
    per_day = _per_day(Counter(e.ts[:10] for e in chosen))
    types = Counter(e.type for e in chosen)
    rows = [(esc(e.ts), esc(e.agent), esc(e.type), esc(e.description), esc(e.outcome))
            for e in reversed(chosen[-TIMELINE_LIMIT:])]
    body = (form + f"<p>{len(chosen)} of {len(every)} episodes</p><h2>Per day</h2>" + columns_chart(per_day)
            + "<h2>Per type</h2>" + bars(sorted(types.items()), width=360)
            + f"<h2>Newest {len(rows)}</h2>" + table(("time", "agent", "type", "description", "outcome"), rows, raw=True))
    return body


def _per_day(days: Counter) -> list[tuple[str, float]]:
    """(day, count) for every day from the first to the last with one, the last DAYS_SHOWN of them
    (a day without episodes is a zero, not a gap the axis skips)."""
    from datetime import date, timedelta

    known = sorted(d for d in days if _is_day(d))
    if not known:
        return []
    last = date.fromisoformat(known[-1])
    first = max(date.fromisoformat(known[0]), last - timedelta(days=DAYS_SHOWN - 1))
    span = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    return [(day, days.get(day, 0)) for day in span]


def _is_day(text: str) -> bool:
    from datetime import date

    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- STATE.md over time

def state_view(store: Store, scope: str | None) -> tuple[str, str]:
    from .. import gitstore, state
    from ..errors import NotFound

    state.check_scope(scope)
    names = [s for s in state.scopes(store) if s]
    form = (f'<form action="/state" method="get">{_options("scope", names, scope, "the store")} <button>Show</button></form>'
            if names else "")
    path = state.state_path(store, scope)
    try:
        versions = _memo(("state", str(store.root), scope), _stamp(path, gitstore.git_dir(store.root) or path),
                         lambda: state.history(store, scope))
    except NotFound as exc:
        return "State", form + f'<p class="muted">{esc(exc.message)}</p>'
    keys: list[str] = []
    for version in versions:
        keys += [k for k in version.numbers if k not in keys]
    charts = []
    for key in keys:
        points = [((v.updated or v.commit[:8])[:16], number) for v in versions
                  if key in v.numbers and (number := finite(v.numbers[key])) is not None]
        charts.append(f"<h2>{esc(key)}</h2>" + line_chart(key, points))
    latest = versions[-1] if versions else None
    body = form + f"<p>{len(versions)} committed versions of {esc(store.rel(path))}</p>" + "".join(charts)
    if latest is not None:
        body += "<h2>Latest numbers</h2>" + table(("number", "value"), sorted((k, str(v)) for k, v in latest.numbers.items()))
    return "State", body


# ---------------------------------------------------------------- ledgers

def ledgers_view(store: Store, name: str | None) -> tuple[str, str]:
    from .. import ledger

    found = ledger.list_ledgers(store)
    nav = "<p>" + " · ".join(link("/ledgers", led.name, name=led.name) for led in found) + "</p>"
    if not name:
        return "Ledgers", nav + table(("ledger", "columns", "file"), [
            (link("/ledgers", led.name, name=led.name), esc(", ".join(led.columns)), esc(store.rel(led.path)))
            for led in found], raw=True)
    chosen = ledger.open_ledger(store, ledger.check_name(name))
    total, counts = _memo(("ledger", str(store.root), chosen.name), _stamp(chosen.path), lambda: _counts(chosen))
    parts = [nav, f"<p>{total} rows in {esc(store.rel(chosen.path))}</p>"]
    for column in chosen.columns:
        values = counts[column]
        top = values.most_common(TOP_VALUES)
        parts.append(f"<h2>{esc(column)} <span class=muted>({len(values)} distinct)</span></h2>"
                     + (bars([(v or "(empty)", n) for v, n in top], width=520, label_width=200) if top else ""))
    return f"Ledger {chosen.name}", "".join(parts)


def _counts(chosen) -> tuple[int, dict[str, Counter]]:
    """Rows, and per column the count of each value (a time column counted by day)."""
    from .. import ledger

    when = ledger.time_column(chosen)
    counts: dict[str, Counter] = {c: Counter() for c in chosen.columns}
    total = 0
    for row in ledger.iter_rows(chosen):
        total += 1
        for column, value in row.values.items():
            if column in counts:
                counts[column][value[:10] if column == when else value[:80]] += 1
    return total, counts


# ---------------------------------------------------------------- conflicts

def conflicts_view(store: Store, topic: bool) -> tuple[str, str]:
    from .. import sync

    merged = sync.list_conflicts(store)
    parts = [f"<h2>Changed on two machines ({len(merged)})</h2>"]
    for conflict in merged:
        local, other = sync.conflict_texts(store, conflict)
        parts.append(f'<h3>{link("/fact", conflict.name, name=conflict.name)}</h3><div class="side conflict">'
                     f"<div><p>{esc(conflict.path)} (in place)</p><pre>{esc(local)}</pre></div>"
                     f"<div><p>{esc(conflict.copy)} (the other machine)</p><pre>{esc(other)}</pre></div></div>")
    if not merged:
        parts.append('<p class="muted">none</p>')
    parts.append("<h2>Live facts on one topic that differ in a detail</h2>")
    if not topic:
        parts.append('<p><a href="/conflicts?topic=1">Compare the live facts</a> '
                     '<span class="muted">(embeds facts not in the vector cache yet: can take a while)</span></p>')
        return "Conflicts", "".join(parts)
    from ..lifecycle import consolidate as cons

    plan = _memo(("topic", str(store.root)), _stamp(store.memory_dir, store.index_path), lambda: cons.conflicts(store))
    for g, c in cons.ranked(plan.conflicts, 50):
        a, b, text_a, text_b = (c.a, c.b, c.text_a, c.text_b) if c.a == g.fact else (c.b, c.a, c.text_b, c.text_a)
        parts.append(f'<div class="side conflict"><div>{link("/fact", a, name=a)}<pre>{esc(text_a)}</pre></div>'
                     f'<div>{link("/fact", b, name=b)}<pre>{esc(text_b)}</pre></div></div>'
                     f'<p class="muted">score {c.score:.3f}; differs: {esc("; ".join(c.differs))}</p>')
    if not plan.conflicts:
        parts.append('<p class="muted">none</p>')
    return "Conflicts", "".join(parts)
