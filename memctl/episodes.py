"""Episodes: what an agent decided, got wrong, got right or was told, one ledger line each.

Built on ledgers (`ledgers/episodes.tsv`, columns in docs/FORMAT.md), created and
declared on first use. Episodes are recalled by recall.py, the one ranking for
facts and episodes (`episode recall` is `recall --source episodes`). freshness
here (max(0, 1 − 0.01 × age in days)) is a value forget's policies read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Iterable, Sequence

from . import clock, config, ledger, ledger_ops
from .errors import BadInput, NotFound, Refused, undeclared_type
from .store import Store

LEDGER = "episodes"
COLUMNS = ("id", "ts", "agent", "type", "description", "outcome", "importance", "tags", "refs")
# Forgetting an episode appends here; episodes.tsv itself is never rewritten.
TOMBSTONES = "episode-tombstones"
TOMBSTONE_COLUMNS = ("ts", "id", "action", "policy", "reason", "description", "outcome")
TYPES = config.EPISODE_TYPES  # a store's own list adds `[episodes] types` to these (store.config.episode_types)
DEFAULT_IMPORTANCE = {"decision": 0.7, "error": 0.8, "success": 0.5, "feedback": 0.9, "conflict": 0.85}
FALLBACK_IMPORTANCE = 0.5  # any other declared type
FRESHNESS_DECAY_PER_DAY = 0.01
TYPE_RE = config.TYPE_RE
# A ref with a scheme (`session:`, `record:`, `commit:`, `https://`, ...) points outside the store and is
# kept as written; one without is a fact name or an episode id, and must name one (docs/FORMAT.md).
SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*:")
_ID_ATTEMPTS = 5


@dataclass(frozen=True)
class Episode:
    id: str
    ts: str
    agent: str
    type: str
    description: str
    outcome: str = ""
    importance: float = FALLBACK_IMPORTANCE
    tags: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    lineno: int = 0  # line in episodes.tsv (0 before it is written)

    def to_dict(self) -> dict:
        return {
            "id": self.id, "ts": self.ts, "agent": self.agent, "type": self.type,
            "description": self.description, "outcome": self.outcome, "importance": self.importance,
            "tags": list(self.tags), "refs": list(self.refs), "line": self.lineno,
        }


# ---------------------------------------------------------------- records

ID_RE = re.compile(r"^ep-[A-Za-z0-9_.-]{1,64}$")  # new_id's form is ep-<UTC yyyymmddHHMMSS>-<4 hex>; a ref list splits on commas


def check_records(store: Store, records: Sequence[dict]) -> None:
    """Rows for episodes.tsv written through `ledger append` (CLI, MCP, Python) hold what every reader
    of episodes takes for granted: an id `ep-...`, an ISO time with its offset (the order, freshness),
    an importance from 0 to 1, a description. BadInput on the first that does not. The type and the
    refs are the writer's (rows of any type are read; a bench's refs are its own), as in docs/FORMAT.md."""
    for number, record in enumerate(records, 1):
        where = f"record {number}: " if len(records) > 1 else ""
        hint = "memctl episode add writes an episode whole (id and ts are made for you)"
        value = {column: str(record.get(column, "")) for column in COLUMNS}
        if not ID_RE.match(value["id"]):
            raise BadInput(f"{where}episode id {value['id']!r} is not ep- and 1-64 ASCII letters, digits, _ . or -", hint=hint)
        try:
            stamped = datetime.fromisoformat(value["ts"])
        except ValueError:
            stamped = None
        if stamped is None or stamped.tzinfo is None:
            raise BadInput(f"{where}episode ts {value['ts']!r} is not an ISO 8601 time with its offset", hint=hint)
        try:
            importance = float(value["importance"])
        except ValueError:
            importance = -1.0
        if not 0.0 <= importance <= 1.0:
            raise BadInput(f"{where}episode importance {value['importance']!r} is not a number from 0 to 1", hint=hint)
        if not value["description"].strip():
            raise BadInput(f"{where}an episode needs a description", hint=hint)


def _split_list(text: str) -> tuple[str, ...]:
    if not text:
        return ()
    return tuple(item for item in (part.strip() for part in text.split(",")) if item)


def _check_items(label: str, items: Iterable[str]) -> tuple[str, ...]:
    """Tags or refs as stored: a tag as a fact's is (NFKC: `ｚｅｎｎ` is `zenn`, which recall's tag filter
    looks up); an empty one refused, as a fact's tag is (it was dropped without a word)."""
    import unicodedata  # noqa: PLC0415

    cleaned = []
    for item in items:
        item = (unicodedata.normalize("NFKC", item) if label == "tag" else item).strip()
        if not item:
            raise BadInput(f"invalid {label} ''", hint=f"give a {label} with some text in it, or none")
        if "," in item:
            raise BadInput(f"{label} {item!r} contains a comma", hint=f"the {label}s column is comma-separated; give one per --{label}")
        if item and item not in cleaned:
            cleaned.append(item)
    return tuple(cleaned)


def check_type(store: Store, episode_type: str | None) -> str:
    """`episode_type` when the store declares it, else BadInput naming the declared types."""
    if episode_type not in store.config.episode_types:
        raise undeclared_type("episode", episode_type, store.config.episode_types, '[episodes] types = ["review"]')
    return episode_type


def check_refs(store: Store, refs: Sequence[str]) -> None:
    """Every ref without a scheme names a fact (live or archived) or an episode in the ledger."""
    local = [ref for ref in refs if not SCHEME_RE.match(ref)]
    if not local:
        return
    from . import facts  # noqa: PLC0415  (only when a ref needs looking up)

    every = facts.live_facts(store, quiet=True) + facts.scan_archive(store)
    known = {fact.stem for fact in every} | {fact.name for fact in every if fact.name}
    episode_ids = _episode_ids(store) if any(ref.startswith("ep-") for ref in local) else set()
    for ref in local:
        if ref not in known and ref not in episode_ids:
            raise BadInput(f"ref {ref!r} names no fact and no episode",
                           hint="give a fact name (memctl list), an episode id (memctl episode list), "
                                "or a ref with a scheme such as commit:<sha> or https://...")


def _episode_ids(store: Store) -> set[str]:
    try:
        return {row.values["id"] for row in ledger.read_rows(store, LEDGER)}
    except NotFound:
        return set()


def default_importance(episode_type: str) -> float:
    return DEFAULT_IMPORTANCE.get(episode_type, FALLBACK_IMPORTANCE)


def from_row(row: ledger.Row) -> Episode:
    values = row.values
    try:
        importance = min(1.0, max(0.0, float(values["importance"])))
    except ValueError:
        importance = default_importance(values["type"])
    return Episode(
        id=values["id"], ts=values["ts"], agent=values["agent"], type=values["type"],
        description=values["description"], outcome=values["outcome"], importance=importance,
        tags=_split_list(values["tags"]), refs=_split_list(values["refs"]), lineno=row.lineno,
    )


def to_record(episode: Episode) -> dict[str, str]:
    return {
        "id": episode.id, "ts": episode.ts, "agent": episode.agent, "type": episode.type,
        "description": episode.description, "outcome": episode.outcome,
        "importance": format(round(episode.importance, 4) + 0.0, "g"),  # + 0.0: -0 is written 0
        "tags": ",".join(episode.tags), "refs": ",".join(episode.refs),
    }


def _random_hex() -> str:
    # os.urandom, not secrets: secrets loads OpenSSL, a few ms on every start.
    return os.urandom(2).hex()


def new_id(when: datetime) -> str:
    """`ep-<UTC yyyymmddHHMMSS>-<4 hex>`: sorts by time, unique with 16 random bits a second."""
    return f"ep-{when.astimezone(timezone.utc):%Y%m%d%H%M%S}-{_random_hex()}"


# ---------------------------------------------------------------- the ledger

def ensure_ledger(store: Store, *, commit_changes: bool = True) -> ledger.Ledger:
    """The episodes ledger, created and declared in memctl.toml the first time."""
    try:
        return ledger.open_ledger(store, LEDGER)
    except NotFound:
        pass
    try:
        ledger.create(store, LEDGER, COLUMNS, unique="id", commit_changes=commit_changes, own=True)
    except Refused:
        pass  # another process created it between our look and our lock
    return ledger.open_ledger(store, LEDGER)


def _created_with(store: Store, episode: Episode, commit_changes: bool) -> bool:
    """Whether the episodes ledger was missing and is now created holding `episode`, in one commit: the
    first episode of a store never leaves a committed, empty ledger behind when its own write fails."""
    try:
        ledger.open_ledger(store, LEDGER)
        return False
    except NotFound:
        pass
    records = [to_record(episode)]
    check_records(store, records)  # (what ledger.append checks of episodes; create validates only the columns)
    try:
        ledger.create(store, LEDGER, COLUMNS, unique="id", commit_changes=commit_changes, own=True, records=records)
    except Refused:
        return False  # another process created it between our look and our lock: append as usual
    return True


def _line_of(path, episode_id: str) -> int:
    """The file line number of the record with this id (ids are unique and lines never move)."""
    data = path.read_bytes()
    at = data.find(b"\n" + episode_id.encode("utf-8") + b"\t")
    return data.count(b"\n", 0, at) + 2 if at != -1 else 1


def add(store: Store, description: str, episode_type: str, *, agent: str | None = None, outcome: str = "",
        importance: float | None = None, tags: Sequence[str] = (), refs: Sequence[str] = (),
        commit_changes: bool = True, allow_secrets: bool = False) -> Episode:
    """Append one episode; `id` and `ts` are generated, importance defaults by type.
    Secrets in its text are redacted, with a warning, unless `allow_secrets`; `<private>` text is always hidden."""
    from .secrets import scrub

    description, outcome, *more = scrub([description, outcome, *tags, *refs], "episode add", secrets=not allow_secrets)
    tags, refs = more[:len(tags)], more[len(tags):]
    description = description.strip()
    if not description:
        raise BadInput("an episode needs a description", hint="say in one line what happened", kind="description-empty")
    check_type(store, episode_type)
    if importance is None:
        importance = default_importance(episode_type)
    if not 0.0 <= importance <= 1.0:
        raise BadInput(f"importance {importance} is not between 0 and 1", hint="from 0 (trivial) to 1 (must not be forgotten)")
    when = clock.now()
    episode = Episode(
        id=new_id(when), ts=when.isoformat(timespec="seconds"),
        agent=os.environ.get("MEMCTL_AGENT", "") if agent is None else agent,
        type=episode_type, description=description, outcome=outcome, importance=importance,
        tags=_check_items("tag", tags), refs=_check_items("ref", refs),
    )
    check_refs(store, episode.refs)
    if _created_with(store, episode, commit_changes):
        return replace(episode, lineno=2)
    for attempt in range(_ID_ATTEMPTS):
        try:
            done = ledger.append(store, LEDGER, [to_record(episode)], unique="id", commit_changes=commit_changes,
                                 allow_secrets=True)  # redacted above, or allowed
            return replace(episode, lineno=_line_of(done.path, episode.id))
        except Refused:
            # Same second, same 16 random bits: draw again.
            if attempt == _ID_ATTEMPTS - 1:
                raise
            episode = Episode(**{**episode.__dict__, "id": new_id(when)})
    raise AssertionError("unreachable")


def _since(since: str | datetime | None) -> datetime | None:
    if since is None or isinstance(since, datetime):
        return since
    try:
        return clock.parse_date(since)
    except ValueError:
        raise BadInput(f"since {since!r} is not an ISO date or timestamp", hint=clock.DATE_HINT, arg="since") from None


def _when(episode: Episode) -> datetime | None:
    return _time_of(episode.ts)


def _time_of(text: str) -> datetime | None:
    try:
        return clock.parse_date(text)
    except ValueError:
        return None


def forgotten(store: Store) -> dict[str, dict[str, str]]:
    """Episode id -> its row in the tombstone ledger (`memctl forget --policies`, docs/LIFECYCLE.md).

    A `tombstone` row hides the episode; a `compress` row shows its short
    description and outcome instead. A tombstone outranks a compression.
    """
    if not (store.ledgers_dir / f"{TOMBSTONES}.tsv").exists():
        return {}
    marks: dict[str, dict[str, str]] = {}
    for row in ledger.read_rows(store, TOMBSTONES):
        mark = row.values
        if marks.get(mark["id"], {}).get("action") != "tombstone":
            marks[mark["id"]] = mark
    return marks


def list_episodes(store: Store, *, agent: str | None = None, episode_type: str | None = None,
                  since: str | datetime | None = None, include_forgotten: bool = False,
                  tail: int | None = None) -> list[Episode]:
    """Episodes in time order (the `ts` column; a merged ledger holds each machine's rows in turn),
    filtered by agent, type and time; the last `tail` of them when it is given.

    Forgotten episodes are left out and compressed ones shortened, unless
    `include_forgotten` asks for the ledger as written (then in file order too).
    """
    after = _since(since)
    if tail is not None and tail < 0:
        raise BadInput("tail must be 0 or more", arg="tail")
    if episode_type is not None:
        check_type(store, episode_type)
    try:
        rows = ledger.read_rows(store, LEDGER)
    except NotFound:
        return []
    marks = {} if include_forgotten else forgotten(store)
    found = []
    for row in rows:
        episode = from_row(row)
        mark = marks.get(episode.id) if marks else None
        if mark is not None:
            if mark["action"] == "tombstone":
                continue
            episode = replace(episode, description=mark["description"], outcome=mark["outcome"])
        if agent is not None and episode.agent != agent:
            continue
        if episode_type is not None and episode.type != episode_type:
            continue
        if after is not None:
            when = _when(episode)
            if when is None or when < after:
                continue
        found.append(episode)
    if not include_forgotten:
        # Stable: rows with the same ts (or an unreadable one, kept last) stay in the order written.
        far = datetime.max.replace(tzinfo=timezone.utc)
        found.sort(key=lambda e: _when(e) or far)
    return found if tail is None else found[len(found) - min(tail, len(found)):]


def refuse_damaged(store: Store) -> None:
    """For a reader that has printed the episodes: Refused (exit 1) when the ledger's last line has no LF,
    when lines are damaged (fields missing or extra...), or when a row's `ts` is no time or its
    `importance` no number from 0 to 1 (such a row was read with its type's importance and listed last)."""
    try:
        found = ledger.open_ledger(store, LEDGER)
    except NotFound:
        return
    ledger.check_tail(found)
    ledger_ops.refuse_damaged(store, found)
    for row in ledger.read_rows(store, LEDGER):
        problem = _bad_value(row.values)
        if problem:
            raise Refused(f"{store.rel(found.path)}:{row.lineno}: {problem}; the episode was listed as read",
                          hint="repair the row by hand (git log -p shows how it was written)")


def _bad_value(values: dict[str, str]) -> str | None:
    if _time_of(values["ts"]) is None:
        return f"ts {values['ts']!r} is not a time"
    try:
        importance = float(values["importance"])
    except ValueError:
        importance = -1.0
    if not 0.0 <= importance <= 1.0:
        return f"importance {values['importance']!r} is not a number from 0 to 1"
    return None


# ---------------------------------------------------------------- values

def freshness(episode: Episode, now: datetime) -> float:
    when = _when(episode)
    if when is None:
        return 0.0
    age_days = (now - when).total_seconds() / 86400
    return min(1.0, max(0.0, 1.0 - FRESHNESS_DECAY_PER_DAY * age_days))
