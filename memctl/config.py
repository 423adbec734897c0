"""memctl.toml: every key has a default, so an empty file is a valid store.

Reading uses tomllib. memctl only ever *adds* tables to the file (a ledger
declaration), appending text so that the user's comments and layout stay.
What tomllib read is kept in `.memctl/config.marshal` beside the file's exact
text: a later command whose memctl.toml has that text takes it from there
without importing tomllib (~5 ms at every start: `memctl sync` with nothing to
do, `ledger append` in loops). The cache is sealed with a key of this user's
that never leaves the machine (`~/.config/memctl/cache.key`): a cache that came
with a commit (another clone's `git add -f .memctl`) is not believed, since what
it says memctl.toml holds (a job's command) would run here unapproved.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from .errors import BadInput

# Fact types: Claude Code's four, then memctl's own; `[facts] types = [...]` in memctl.toml replaces them.
FACT_TYPES = ("user", "feedback", "project", "reference", "procedure")
# Episode types: what agents record, then what `episode import` writes (docs/TRANSCRIPTS.md).
# `[episodes] types = [...]` in memctl.toml adds to them (docs/FORMAT.md).
EPISODE_TYPES = ("decision", "error", "success", "feedback", "conflict", "prompt", "reply", "tool")
TYPE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")  # a declared fact or episode type

DEFAULT_IMPORTANCE = {
    "user": 0.7,
    "feedback": 0.8,
    "project": 0.6,
    "reference": 0.5,
    "procedure": 0.7,
}
# A user's own statement is 1.0; what an agent inferred is 0.7 (docs/FORMAT.md, fact files).
DEFAULT_CONFIDENCE = {"user": 1.0, "feedback": 1.0}
FALLBACK_IMPORTANCE = 0.5
FALLBACK_CONFIDENCE = 0.7

DEFAULT_TOML = """\
# memctl store configuration. Every key has a default; see docs/FORMAT.md.

[git]
commit = true                      # commit every change (MEMCTL_NO_COMMIT=1 or --no-commit to skip)
author_name = "memctl"             # who commits when git has no identity configured (git config user.name)
author_email = "memctl@localhost"

[facts]
types = ["user", "feedback", "project", "reference", "procedure"]  # the types a fact may have
max_index_lines = 200              # Claude Code loads only the first 200 lines of MEMORY.md
max_index_bytes = 25000            # ... and at most 25 KB

# Scheduled jobs (docs/JOBS.md): `memctl schedule install` loads them (launchd on macOS, cron
# elsewhere); `memctl run-job NAME` runs one now. Remove a table to drop its job.
[jobs.state-update]
description = "Regenerate state/STATE.md every morning and commit it"
command = "state update"
hour = 9
minute = 0

[jobs.daily-maintenance]
description = "Regenerate the MEMORY.md index, commit the access log, then doctor"
command = "maintain"
hour = 3
minute = 15
"""


# NamedTuples, not dataclasses: `import dataclasses` costs ~10 ms (it imports
# inspect), and this module is on the start-up path of `ledger append`, which
# scripts call in loops (bench/bench_ledger.py measures that budget). They are immutable records all the same.
class LedgerDecl(NamedTuple):
    name: str
    file: str
    columns: tuple[str, ...]
    header: bool = True
    unique: str | None = None


class Config(NamedTuple):
    commit: bool = True
    author_name: str = "memctl"
    author_email: str = "memctl@localhost"
    max_index_lines: int = 200
    max_index_bytes: int = 25_000
    default_importance: Mapping[str, float] = MappingProxyType(DEFAULT_IMPORTANCE)
    default_confidence: Mapping[str, float] = MappingProxyType(DEFAULT_CONFIDENCE)
    ledgers: Mapping[str, LedgerDecl] = MappingProxyType({})
    fact_types: tuple[str, ...] = FACT_TYPES
    episode_types: tuple[str, ...] = EPISODE_TYPES
    raw: Mapping[str, Any] = MappingProxyType({})

    def default_fact_type(self) -> str:
        """A new fact's type when none is given: project, else the first declared type."""
        return "project" if "project" in self.fact_types else self.fact_types[0]

    def importance_for(self, fact_type: str | None) -> float:
        return self.default_importance.get(fact_type or "", FALLBACK_IMPORTANCE)

    def confidence_for(self, fact_type: str | None) -> float:
        return self.default_confidence.get(fact_type or "", FALLBACK_CONFIDENCE)


def load(path: Path) -> Config:
    """Read memctl.toml (a missing file means all defaults; a symbolic link is refused, never followed)."""
    if os.path.islink(path):
        from .fsutil import refuse_link  # noqa: PLC0415

        refuse_link(path.parent, path)
    try:
        with open(path, "rb") as handle:  # (one fstat, and never more than the limit read: a pushed 400 MB file)
            data = handle.read(min(os.fstat(handle.fileno()).st_size, SETTINGS_LIMIT) + 1)
    except FileNotFoundError:
        return Config()
    if len(data) > SETTINGS_LIMIT:
        raise _too_big(str(path))
    try:
        raw = _parsed(path, universal_newlines(data.decode("utf-8")))  # (as read_text reads it)
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: invalid TOML: {exc}", hint="fix the file by hand") from None
    return from_dict(raw, source=path)


# memctl.toml, and a pushed .gitattributes: a few KiB of settings (a pushed 400 MB memctl.toml, 2 MB packed,
# cost every command 1.6 GB). Beside fsutil's limits (docs/FORMAT.md, Limits), here: every command loads it first.
SETTINGS_LIMIT = 1 << 20


def _too_big(name: str) -> BadInput:
    return BadInput(f"{name} is over {SETTINGS_LIMIT >> 20} MiB: more than settings hold (docs/FORMAT.md, Limits), "
                    "so memctl does not read it", hint="take out what does not belong; `git log -p memctl.toml` shows "
                    "which commit added it")


def universal_newlines(text: str) -> str:
    """The text as `load` reads it (Python's universal newlines: a lone CR ends a line too). Whoever
    reads memctl.toml from git must read it so, or one file would hold two sets of settings."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_text(data: bytes, source: str) -> dict[str, Any]:
    """What TOML makes of `data` (memctl.toml as another commit has it); BadInput when it would not
    load: not UTF-8, not TOML, or a value of the wrong kind (from_dict), or over the size limit."""
    if len(data) > SETTINGS_LIMIT:
        raise _too_big(source)
    try:
        text = universal_newlines(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{source}: not UTF-8") from None
    raw = _loads(text, source)
    from_dict(raw, source=source)
    return raw


PARSED_CACHE = ".memctl/config.marshal"  # seal + marshal of (text, what tomllib made of it): a cache, rebuilt at will
SEAL = 32  # bytes of keyed BLAKE2b before the payload
KEY_FILE = "cache.key"  # in user_dir(): 32 random bytes, this user's only


def user_dir() -> Path:
    """memctl's folder in this user's configuration (outside every store: git never brings it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "memctl"


def _cache_key() -> bytes | None:
    """This user's key for sealing caches, made on first use (None when it cannot be read or made:
    then nothing is cached)."""
    path = user_dir() / KEY_FILE
    try:
        with open(path, "rb") as handle:
            key = handle.read(64)
        return key if len(key) == 32 else None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another process made it meanwhile
        return _cache_key() if path.stat().st_size == 32 else None
    except OSError:
        return None
    key = os.urandom(32)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
        handle.flush()
        os.fsync(handle.fileno())
    return key


def _seal(key: bytes, payload: bytes) -> bytes:
    from _blake2 import blake2b  # noqa: PLC0415  (built in; hashlib would load OpenSSL)

    return blake2b(payload, key=key, digest_size=SEAL).digest()


def _parsed(path: Path, text: str) -> dict[str, Any]:
    """tomllib.loads(text), from the cache when it holds exactly this text under this user's seal."""
    import marshal  # noqa: PLC0415  (built in: costs nothing)

    cache = path.parent / PARSED_CACHE
    key = _cache_key()
    try:
        blob = cache.read_bytes() if key else b""
        if key and blob[:SEAL] == _seal(key, blob[SEAL:]):  # checked before anything is unmarshalled
            kept_text, kept = marshal.loads(blob[SEAL:])
            if kept_text == text and isinstance(kept, dict):
                return kept
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none yet, another Python's, or torn: parse
    raw = _loads(text, path)
    try:
        payload = marshal.dumps((text, raw))  # ValueError for dates and times: those files are parsed each time
        data = _seal(key, payload) + payload if key else b""
        if key and cache.parent.is_dir() and not cache.parent.is_symlink():
            from .fsutil import atomic_write  # noqa: PLC0415  (only when the cache is written)

            atomic_write(cache, data)
    except (OSError, ValueError):
        pass  # a read-only store, a full disk: parsed each time
    return raw


def _loads(text: str, source: Path | str) -> dict[str, Any]:
    import tomllib  # noqa: PLC0415

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: invalid TOML: {exc}", hint="fix the file by hand") from None


def from_dict(raw: dict[str, Any], source: Path | str = "memctl.toml") -> Config:
    """The settings of a parsed memctl.toml; a value of the wrong kind is BadInput naming it (a file
    pulled from a remote is untrusted: `max_index_lines = nan` was a traceback in every command)."""
    git = _table(raw, "git", source)
    facts = _table(raw, "facts", source)
    importance = {**DEFAULT_IMPORTANCE, **_units(facts, "default_importance", source)}
    confidence = {**DEFAULT_CONFIDENCE, **_units(facts, "default_confidence", source)}
    ledgers = {}
    for name, decl in _table(raw, "ledgers", source).items():
        if not isinstance(decl, dict):
            raise BadInput(f"{source}: ledgers.{name} must be a table ([ledgers.{name}])", hint=LEDGER_EXAMPLE)
        columns = decl.get("columns")
        if not isinstance(columns, list) or not columns:
            raise BadInput(f"{source}: [ledgers.{name}] needs a non-empty 'columns' list", hint=LEDGER_EXAMPLE)
        ledgers[name] = LedgerDecl(
            name=name,
            file=_value(decl, "file", str, f"{name}.tsv", f"[ledgers.{name}]", source),
            columns=tuple(str(c) for c in columns),
            header=_value(decl, "header", bool, True, f"[ledgers.{name}]", source),
            unique=_value(decl, "unique", str, None, f"[ledgers.{name}]", source),
        )
    return Config(
        fact_types=_fact_types(facts, source),
        episode_types=_episode_types(raw.get("episodes", {}), source),
        commit=_value(git, "commit", bool, True, "[git]", source),
        author_name=_value(git, "author_name", str, "memctl", "[git]", source),
        author_email=_value(git, "author_email", str, "memctl@localhost", "[git]", source),
        max_index_lines=_count(facts, "max_index_lines", 200, source),
        max_index_bytes=_count(facts, "max_index_bytes", 25_000, source),
        default_importance=importance,
        default_confidence=confidence,
        ledgers=ledgers,
        raw=raw,
    )


def section(raw: dict[str, Any], key: str, within: str | None = None) -> dict[str, Any]:
    """`[key]` of a parsed memctl.toml (`[within.key]` of its table `within`), {} when it is not there;
    BadInput when it is no table (`recall = 1` was a traceback in recall, context and the prompt hook)."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        name = f"{within}.{key}" if within else key
        raise BadInput(f"memctl.toml: {name} must be a table ([{name}]), not {value!r}", hint="fix the file by hand")
    return value


def number(table: dict[str, Any], key: str, default: float, where: str, low: float = 0.0, high: float = float("inf")) -> float:
    """`table[key]` (`default` when absent) as a finite number from `low` to `high`; BadInput naming `where`
    and the value otherwise (`half_life_days = "x"`, `nan`, `1e400` were tracebacks or silently odd)."""
    value = table.get(key, default)
    try:
        given = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        given = None
    if given is None or not low <= given <= high or given in (float("inf"), float("-inf")):  # (NaN fails the range)
        span = ("" if low == float("-inf") else f" from {low:g}") + ("" if high == float("inf") else f" to {high:g}")
        raise BadInput(f"memctl.toml: {where} {key} must be a finite number{span}, not {value!r}", hint="fix the file by hand")
    return given


def text_or_none(table: dict[str, Any], key: str, where: str) -> str | None:
    """`table[key]` as a text, None when absent; BadInput for anything else (`model = [1]`)."""
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"memctl.toml: {where} {key} must be a text, not {value!r}", hint="fix the file by hand")
    return value


LEDGER_EXAMPLE = 'e.g. [ledgers.themes] columns = ["theme", "date"]'
_KINDS = {str: "a text", bool: "true or false", int: "a whole number", dict: "a table"}


def _table(raw: dict[str, Any], key: str, source: Path | str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise BadInput(f"{source}: {key} must be a table ([{key}]), not {value!r}", hint="fix the file by hand")
    return value


def _value(table: dict[str, Any], key: str, kind: type, default: Any, where: str, source: Path | str) -> Any:
    value = table.get(key, default)
    if value is not default and (not isinstance(value, kind) or kind is int and isinstance(value, bool)):
        raise BadInput(f"{source}: {where} {key} must be {_KINDS[kind]}, not {value!r}", hint="fix the file by hand")
    return value


# What git strips from the ends of a name, and refuses a name made only of (ident.c's "crud").
_GIT_CRUD = "".join(chr(c) for c in range(33)) + ".,:;<>\"\\'"


def git_refuses_name(name: str) -> bool:
    """Whether git refuses `name` as a commit's author ("empty ident name"): only spaces and `.,:;<>"\'`."""
    return not name.strip(_GIT_CRUD)


def check_identity(raw: dict[str, Any]) -> None:
    """`[git] author_name` as git takes it (memctl commits as it where git has no identity: a cron job): one
    made only of spaces and `.,:;<>"\'` (`""`, `"."`) is BadInput, as git's "empty ident name" was at every
    commit. The rest git takes as it is (it drops `<` and `>`): they load (doctor and sync check this)."""
    name = section(raw, "git").get("author_name", "memctl")
    if isinstance(name, str) and git_refuses_name(name):
        raise BadInput(f"memctl.toml: [git] author_name {name!r} is no name git takes (a commit made as it fails)",
                       hint='author_name = "memctl" (the default)')


def _count(table: dict[str, Any], key: str, default: int, source: Path | str) -> int:
    value = table.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `200.0` was taken before the values were checked: a file that loaded keeps loading
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput(f"{source}: [facts] {key} must be a whole number from 1, not {value!r}",
                       hint=f"{key} = {default} (the default)")
    return value


def _units(table: dict[str, Any], key: str, source: Path | str) -> dict[str, float]:
    """`[facts.default_importance]` / `default_confidence`: a type's number from 0 to 1 each."""
    values = _value(table, key, dict, {}, "[facts]", source)
    for fact_type, number in values.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number <= 1:
            raise BadInput(f"{source}: [facts.{key}] {fact_type} must be a number from 0 to 1, not {number!r}",
                           hint=f"{fact_type} = 0.5")
    return values


def _fact_types(table: Any, source: Path | str) -> tuple[str, ...]:
    """`[facts] types` (each once, in order), else the defaults; an empty list is refused (no fact could be written)."""
    declared = _types(table.get("types", list(FACT_TYPES)), source, "[facts] types",
                      '"user", "feedback", "project", "reference", "procedure"')
    if not declared:
        raise BadInput(f"{source}: [facts] types is empty", hint=f"types = {toml_value(list(FACT_TYPES))}")
    return tuple(dict.fromkeys(declared))


def _episode_types(table: Any, source: Path | str) -> tuple[str, ...]:
    """The default episode types, then those `[episodes] types` adds (each once, in order)."""
    extra = _types(table.get("types", []) if isinstance(table, dict) else None, source, "[episodes] types",
                   '"review", "incident"')
    return tuple(dict.fromkeys((*EPISODE_TYPES, *extra)))


def _types(value: Any, source: Path | str, key: str, example: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) and TYPE_RE.match(t) for t in value):
        raise BadInput(f"{source}: {key} must be a list of slugs (a-z first, then a-z 0-9 - _; at most 32)",
                       hint=f"types = [{example}]")
    return value


def toml_value(value: Any) -> str:
    """Render a simple value (str, bool, number, list of those) as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        import json  # noqa: PLC0415  (only when writing memctl.toml)

        # JSON string escapes are valid TOML basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot render {type(value).__name__} as TOML")


def toml_table(header: str, values: dict[str, Any]) -> str:
    lines = [f"[{header}]"]
    lines += [f"{key} = {toml_value(val)}" for key, val in values.items() if val is not None]
    return "\n".join(lines) + "\n"


def toml_key(name: str) -> str:
    """A bare key when allowed, else a quoted one."""
    if name and all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
        return name
    return toml_value(name)


def text_to_edit(path: Path) -> tuple[str, str]:
    """memctl.toml's text (lines ended by LF, "" when there is none) and the line end to write it back with:
    CRLF for a file saved on Windows (an edit that added one table rewrote every line of it)."""
    data = path.read_bytes() if path.exists() else b""
    if data.count(b"\r\n") and data.count(b"\r\n") == data.count(b"\n") == data.count(b"\r"):
        return data.decode("utf-8").replace("\r\n", "\n"), "\r\n"
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"), "\n"  # (as the loader reads it)


def write_edited(path: Path, text: str, newline: str) -> None:
    """`text` (from text_to_edit, changed) written back atomically with the file's own line ends."""
    from .fsutil import atomic_write  # noqa: PLC0415

    atomic_write(path, text.replace("\n", newline) if newline != "\n" else text)


def add_ledger_decl(path: Path, decl: LedgerDecl) -> None:
    """Append a `[ledgers.<name>]` table to memctl.toml; the text already there is kept byte for byte."""
    from .errors import Refused  # noqa: PLC0415

    text, newline = text_to_edit(path)
    if decl.name in load(path).ledgers:
        raise Refused(f"ledger {decl.name!r} is already declared in {path.name}")
    table = toml_table(f"ledgers.{toml_key(decl.name)}", {
        "file": decl.file,
        "columns": list(decl.columns),
        "header": None if decl.header else False,
        "unique": decl.unique,
    })
    sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    new_text = text + sep + table
    import tomllib  # noqa: PLC0415

    try:
        tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        # e.g. the file already has `ledgers = {...}` inline: a table cannot be added to it.
        raise BadInput(f"cannot add [ledgers.{decl.name}] to {path.name}: {exc}", hint="declare the ledger by hand") from None
    write_edited(path, new_text, newline)


THRESHOLDS_TABLE = "embedding.thresholds"


def save_threshold(path: Path, model: str, value: float) -> str:
    """Set `model = value` in memctl.toml's [embedding.thresholds], keeping the rest of the text.

    Replaces the key's line when the table has it, adds a line at the end of the
    table when it exists, or appends the table. Returns the line written.
    """
    text, newline = text_to_edit(path)
    key = toml_key(model)
    line = f"{key} = {toml_value(round(float(value), 4))}"
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip().replace(" ", "") == f"[{THRESHOLDS_TABLE}]"), None)
    if start is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        new_text = text + sep + ("\n" if text.strip() else "") + f"[{THRESHOLDS_TABLE}]\n{line}\n"
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        for i in range(start + 1, end):
            stripped = lines[i].split("#", 1)[0].strip()
            if "=" in stripped and _same_key(stripped.split("=", 1)[0].strip(), model):
                lines[i] = line
                break
        else:
            insert = end
            while insert > start + 1 and not lines[insert - 1].strip():
                insert -= 1
            lines.insert(insert, line)
        new_text = "\n".join(lines) + "\n"
    import tomllib  # noqa: PLC0415

    try:
        tomllib.loads(new_text)  # never write a file memctl could not read back
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: cannot add {line!r} to [{THRESHOLDS_TABLE}] ({exc})", hint="add it by hand") from None
    write_edited(path, new_text, newline)
    return line


def _same_key(written: str, model: str) -> bool:
    if written == model:
        return True
    import tomllib  # noqa: PLC0415

    try:
        return tomllib.loads(f"{written} = 0\n") == {model: 0}
    except tomllib.TOMLDecodeError:
        return False
