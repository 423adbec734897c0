"""Consent: what memctl.toml makes this machine run, only once the local user has approved it.

A clone trusts its own machine and user, never the remote (docs/RELIABILITY.md,
"A remote is untrusted input"). The *executable settings* are the parts of memctl.toml that
make memctl run something or spend time on it:

- `jobs.NAME`: a job's table (its command, or its script and arguments; not its `description`),
  which `run-job` (what cron and launchd call) runs;
- `jobs.NAME:script`: the contents of a job's script when the script is a file in the store (git
  brings those: a pushed change to `bin/report.sh` is a new command as much as a changed table);
- `import.redact_patterns:PATTERN`: each regular expression `episode import` runs;
- `embedding`: `[embedding] backend` and `model` (a model folder is loaded and run);
- `neardup.judge_cmd`: the command `near-dup` asks whether two texts are the same;
- `git.commit = false`: writes that are not committed (so not shared by `sync`), which the local user
  must ask for by name: while it waits, memctl commits as by default;
- `sources.NAME`: what a document source reads (`paths`, `exclude`, and `kind`, which picks a folder's files) and whether the prompt hook shows
  it (`prompt`): a pushed `paths = ["~/.ssh/*"]` would be read, indexed and put in the agent's prompt.

Each one's value, as this machine last approved it, is kept outside git, in
`$XDG_CONFIG_HOME/memctl/trust/<store>.json` (default `~/.config`), keyed by
the store's real path: nothing a commit brings can approve anything. A value
the local user wrote is approved as it is seen: a hand edit in the work tree,
and a commit made on this machine (git's reflog says `commit:`), memctl's own
commits included. A value that came in any other way (`pull`, `merge`,
`clone`, `reset`, a sync's merge commit) waits: `run-job` refuses the job,
`episode import` leaves the pattern out, the embedder falls back to the
default, `source index` skips the source and `show` refuses its files, `doctor`
names it, until `memctl trust` approves it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

from . import errors
from .errors import BadInput, Refused
from .store import Store

try:  # hashlib would load OpenSSL (~3 ms of a hybrid recall's start-up) for a sha256 Python has in C
    from _sha2 import sha256  # Python 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:  # pragma: no cover
        from hashlib import sha256

PATTERN_KEY = "import.redact_patterns:"
EMBEDDING_KEYS = ("backend", "model")
JUDGE_KEY = "neardup.judge_cmd"
COMMIT_KEY = "git.commit"
SOURCE_KEY = "sources."
SOURCE_KEYS = ("paths", "exclude", "kind", "prompt")  # what a source reads (a folder: `kind` picks the files) and where it goes
DEFAULT_KIND = "markdown"  # left out of a source's value: an approval made before `kind` counted still holds
# How a reflog entry begins when the commit was made here, by hand or by memctl: the only way a
# value from history counts as the local user's own. (A rebase's picks do not: `rebase -i` can
# replay commits that came from the remote.)
LOCAL_ACTIONS = ("commit:", "commit (initial):", "commit (amend):")
# `git branch -M main` (GitHub's set-up step) logs two HEAD entries, the commit to none and back: they
# brought nothing, and the value's origin is further back.
RENAMES = ("Branch: renamed ",)


class Setting(NamedTuple):
    key: str
    value: str  # canonical JSON of what memctl.toml says now
    approved: bool
    was: str | None = None  # what this machine approved before (None: nothing)
    why: str | None = None  # why it waits (None: approved)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "state": "approved" if self.approved else "waiting",
                "was": self.was, "why": self.why}


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def executable(raw: Mapping[str, Any]) -> dict[str, str]:
    """Every executable setting of a parsed memctl.toml, by key, as canonical JSON."""
    found: dict[str, Any] = {}
    jobs = raw.get("jobs", {})
    if isinstance(jobs, dict):
        found.update((f"jobs.{name}", _job_value(table)) for name, table in jobs.items())
    table = raw.get("import", {})
    patterns = table.get("redact_patterns", []) if isinstance(table, dict) else []
    if isinstance(patterns, list):
        found.update((PATTERN_KEY + p, p) for p in patterns if isinstance(p, str))
    table = raw.get("neardup", {})
    if isinstance(table, dict) and JUDGE_KEY.split(".")[1] in table:
        found[JUDGE_KEY] = table["judge_cmd"]
    table = raw.get("embedding", {})
    if isinstance(table, dict) and any(k in table for k in EMBEDDING_KEYS):
        found["embedding"] = {k: table[k] for k in EMBEDDING_KEYS if k in table}
    table = raw.get("git", {})
    if isinstance(table, dict) and table.get("commit", True) is not True:
        found[COMMIT_KEY] = table["commit"]
    tables = raw.get("sources", {})
    if isinstance(tables, dict):
        found.update((f"{SOURCE_KEY}{name}", _source_value(t)) for name, t in tables.items())
    return {key: _canonical(value) for key, value in found.items()}


def _job_value(table: Any) -> Any:
    """What a `[jobs.NAME]` approval covers: the table without its `description` (a comment's worth: a
    reworded one made every job wait, sync included, so the remote's fix could never come in)."""
    return {k: v for k, v in table.items() if k != "description"} if isinstance(table, dict) else table


SCRIPT_SUFFIX = ":script"


class Script(NamedTuple):
    path: Path  # the file that runs (every link on the way followed, as the kernel does)
    link: Path | None  # the first symbolic link on the way that lives in the repository (git can bring it)


def scripts(store: Store, raw: Mapping[str, Any]) -> dict[str, Script]:
    """`jobs.NAME:script` -> the job's script, for each job whose script is a file of the store's git work
    tree (where a pull can bring it: the store, or the repository around it), named relatively or absolutely.
    A script reached through a link inside the work tree is one too: its contents are not approved, and
    run-job refuses it."""
    jobs = raw.get("jobs", {})
    found: dict[str, Script] = {}
    top = _work_tree_top(store.root)
    for name, table in (jobs.items() if isinstance(jobs, dict) else ()):
        script = table.get("script") if isinstance(table, dict) else None
        if not isinstance(script, str) or not script.strip() or "\0" in script:
            continue
        written = os.path.join(store.root, script)  # as run-job runs it (an absolute script stays itself)
        real, link = _resolved(written, top)
        if link is not None or (Path(real).is_relative_to(top) and os.path.isfile(real)):  # (a link git brought
            # may lead anywhere: /proc/self/cwd/x is the job's own working directory, the store)
            found[f"jobs.{name}{SCRIPT_SUFFIX}"] = Script(Path(real), link)
    return found


def _work_tree_top(root: Path) -> str:
    """The real path of the git work tree holding `root` (the folder with `.git`, a folder or a worktree's
    file), found without running git; the store root itself outside git."""
    real = os.path.realpath(root)
    for folder in (real, *map(str, Path(real).parents)):
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
    return real


def _resolved(written: str, top: str) -> tuple[str, Path | None]:
    """`written` resolved one name at a time as the kernel does (a `..` after a link goes up from where the
    link leads), and the first link met inside `top` (one git can bring), or None."""
    parts = Path(written).parts
    here = os.path.realpath(parts[0])
    first = None
    for part in parts[1:]:
        if part == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, part)
        if first is None and os.path.islink(step) and Path(here).is_relative_to(top):
            first = Path(step)
        here = os.path.realpath(step)
    return here, first


def _file_value(data: bytes | None) -> str | None:
    return None if data is None else _canonical(f"sha256:{sha256(data).hexdigest()}")


def _current(store: Store, keys: set[str] | None = None) -> dict[str, str]:
    """The executable settings as they are now (those of `keys`, or all): memctl.toml's, and the contents
    of the in-store scripts (read and hashed only when asked for)."""
    current = executable(store.config.raw)
    if keys is not None:
        current = {k: v for k, v in current.items() if k in keys}
        if not any(k.endswith(SCRIPT_SUFFIX) for k in keys):
            return current
    for key, script in scripts(store, store.config.raw).items():
        if keys is not None and key not in keys:
            continue
        try:
            current[key] = LINKED if script.link is not None else _file_value(script.path.read_bytes())
        except OSError:
            pass  # run-job refuses a script it cannot read
    return current


LINKED = '"(reached through a symbolic link)"'  # a script's value then: never approved as a hand edit


def _source_value(table: Any) -> Any:
    """What a `[sources.NAME]` approval covers: its SOURCE_KEYS (`kind` only when not the default)."""
    if not isinstance(table, dict):
        return table
    return {k: table.get(k) for k in SOURCE_KEYS if k != "kind" or table.get(k, DEFAULT_KIND) != DEFAULT_KIND}


# ---------------------------------------------------------------- the approvals, outside git

def record_path(store: Store) -> Path:
    from .config import user_dir  # noqa: PLC0415

    key = sha256(os.fsencode(os.path.realpath(store.root))).hexdigest()[:32]
    return user_dir() / "trust" / f"{key}.json"


def _approved(store: Store) -> dict[str, str]:
    return _record(store)[0]


def _record(store: Store) -> tuple[dict[str, str], bool]:
    """The approvals kept for this store, and whether they were saved by a memctl that approves scripts'
    contents (`"scripts": 1`; before it, an approved job's script is taken as it is, once)."""
    try:
        data = json.loads(record_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, True
    kept = data.get("approved") if isinstance(data, dict) else None
    found = {k: v for k, v in kept.items() if isinstance(v, str)} if isinstance(kept, dict) else {}
    for key, value in found.items():
        if key.startswith("jobs.") and SCRIPT_SUFFIX not in key and '"description"' in value:
            try:  # approved before the description stopped counting: the same approval without it
                found[key] = _canonical(_job_value(json.loads(value)))
            except ValueError:
                pass
    known = not isinstance(data, dict) or bool(data.get("scripts")) or any(k.endswith(SCRIPT_SUFFIX) for k in found)
    return found, known


def _save(store: Store, approved: dict[str, str]) -> None:
    """Write the approvals (temp file, fsync, rename; readable by this user only)."""
    path = record_path(store)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = json.dumps({"store": str(store.root), "scripts": 1, "approved": dict(sorted(approved.items()))},
                      ensure_ascii=False, indent=1)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------- who wrote a value

def _parse(text: str | bytes | None) -> dict[str, str] | None:
    """The executable settings of one version of memctl.toml, read as `config.load` reads it; None when
    there is no such version or it does not parse."""
    if text is None:
        return None
    import tomllib  # noqa: PLC0415

    from .config import universal_newlines  # noqa: PLC0415

    try:
        return executable(tomllib.loads(universal_newlines(text.decode("utf-8") if isinstance(text, bytes) else text)))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def _origins(store: Store, waiting: dict[str, str], approved: dict[str, str]) -> dict[str, str | None]:
    """For each waiting key, why it waits; None when the local user wrote its value (see the module doc)."""
    from . import gitstore  # noqa: PLC0415

    if gitstore.git_dir(store.root) is None:
        return dict.fromkeys(waiting)  # no repository: nothing arrives through git
    top = gitstore.toplevel(store.root) if gitstore.git_executable() is not None else None
    if top is None:
        return dict.fromkeys(waiting, f"git was not found ({gitstore.where_git_was_sought()}), so how it came in "
                                      "cannot be checked")
    files = {key: script.path for key, script in scripts(store, store.config.raw).items()}
    why: dict[str, str | None] = {}
    for path in {files.get(key, store.config_path) for key in waiting}:
        keys = {k: v for k, v in waiting.items() if files.get(k, store.config_path) == path}
        read = _parse if path == store.config_path else _script_reader(list(keys))
        why.update(_file_origins(store, top, path, read, keys, approved))
    return why


def _script_reader(keys: list[str]):
    """The settings one version of a script gives: its contents' value under each key naming it."""
    def read(data: bytes | None) -> dict[str, str] | None:
        return None if data is None else dict.fromkeys(keys, _file_value(data))
    return read


def _file_origins(store: Store, top: Path, path: Path, read, waiting: dict[str, str],
                  approved: dict[str, str]) -> dict[str, str | None]:
    """Why each of `waiting` (settings the file `path` holds, as `read` makes them of its bytes) waits."""
    from . import gitstore  # noqa: PLC0415

    rel = os.path.relpath(path, top)
    committed = gitstore.committed_bytes(top, path)
    head = read(committed)
    if head is None and committed is not None:  # nothing can be told apart from what the commit brought
        return dict.fromkeys(waiting, f"{rel} as committed (HEAD) does not parse, so how it came in cannot be checked")
    head = head or {}
    unfinished = gitstore.unfinished_operation(store.root)
    why: dict[str, str | None] = {}
    from_history: dict[str, str] = {}
    for key, value in waiting.items():
        if value == LINKED:
            why[key] = "the script is reached through a symbolic link in the store, so what runs cannot be checked"
        elif head.get(key) == value:
            from_history[key] = value
        elif unfinished is not None:  # the work tree holds what the merge brought, not a hand edit
            why[key] = f"changed in the work tree while a git {unfinished} is unfinished"
        elif key not in head or approved.get(key) == head[key]:
            why[key] = None  # a hand edit: new here, or of a value approved here
        else:
            from_history[key] = head[key]  # edited by hand, but what it edited must be approved first
    why.update(_reflog_origins(top, rel, from_history, read))
    return why


def _reflog(top: Path) -> list[tuple[str, str, str]]:
    """HEAD's reflog, newest first, as (old commit, new commit, what moved HEAD): the record of how
    HEAD moved that git keeps on this machine only (`.git/logs/HEAD`)."""
    from . import gitstore  # noqa: PLC0415

    gitdir = gitstore.git_dir(top)
    try:
        text = (gitdir / "logs" / "HEAD").read_bytes().decode("utf-8", "replace") if gitdir else ""
    except OSError:
        return []
    entries = []
    for line in reversed(text.splitlines()):
        head, _, action = line.partition("\t")
        parts = head.split(" ", 2)
        if len(parts) == 3:
            entries.append((parts[0], parts[1], action))
    return entries


def _reflog_origins(top: Path, rel: str, wanted: dict[str, str], read=_parse) -> dict[str, str | None]:
    """Which entry of HEAD's reflog brought each value: None when it was a commit made here, else
    why the value waits."""
    if not wanted:
        return {}
    from . import gitstore  # noqa: PLC0415

    entries = _reflog(top)
    known: dict[str, dict[str, str]] = {}  # commit -> its memctl.toml's executable settings
    parsed: dict[bytes | None, dict[str, str]] = {}  # the file rarely changes: each text parsed once

    def at(i: int) -> tuple[dict[str, str], dict[str, str]]:
        """The settings before and after entry i (read 256 entries at a time: the entry that brought
        a value is most often one of the last few)."""
        if entries[i][0] not in known or entries[i][1] not in known:
            shas = list(dict.fromkeys(sha for old, new, _ in entries[i:i + 256] for sha in (old, new) if sha not in known))
            texts = gitstore.files_at(top, rel, [s for s in shas if s.strip("0")])
            known.update((sha, parsed.setdefault(texts.get(sha), read(texts.get(sha)) or {})) for sha in shas)
        return known[entries[i][0]], known[entries[i][1]]

    found: dict[str, str | None] = {}
    for key, value in wanted.items():
        found[key] = "git's reflog has no record of how it came"
        for i, (old, new, action) in enumerate(entries):
            if action.startswith(RENAMES):
                continue  # (logged as the commit going to no commit, then back: HEAD's commit stayed)
            before, after = at(i)
            if after.get(key) != value:
                break  # HEAD moved without a record: how the value came cannot be told
            if before.get(key) != value:  # this entry brought the value
                found[key] = None if action.startswith(LOCAL_ACTIONS) else \
                    f"it came in by git {_verb(action)} ({new[:10]}), not by a commit made on this machine"
                break
            if i == len(entries) - 1:  # as old as the reflog: what brought it has expired (90 days)
                found[key] = "it is older than git's reflog here, which cannot tell how it came" \
                    if gitstore.run(top, "remote").out.strip() else None  # no remote: nothing came from another
    return found


def _verb(action: str) -> str:
    """What moved HEAD, from a reflog subject: `pull: Fast-forward` -> pull, `commit (merge): ...` -> commit (merge),
    nothing (`git worktree add` leaves no subject) -> what that is likely to be."""
    head = action.split(":", 1)[0]
    return head if head.startswith("commit (") else head.split(" ", 1)[0] or "worktree add (or another command that left no message)"


# ---------------------------------------------------------------- asking and approving

def settings(store: Store, keys: Iterable[str] | None = None) -> list[Setting]:
    """The executable settings (those named by `keys`, or all), each approved or waiting.

    A waiting value the local user wrote is approved here and then (recorded), so it never waits.
    """
    wanted = None if keys is None else set(keys)
    approved, scripts_known = _record(store)
    current = _current(store, wanted if scripts_known else None)  # (taking scripts as they are looks at all)
    tables = executable(store.config.raw)
    gone = {k: v for k, v in approved.items() if k.startswith(PATTERN_KEY) and k not in tables
            and (wanted is None or k in wanted)}
    waiting = {k: v for k, v in current.items() if approved.get(k) != v}
    if not scripts_known:  # approved by a memctl that did not look at scripts: an approved job's script, as it is
        job = lambda key: key.removesuffix(SCRIPT_SUFFIX)  # noqa: E731
        first = {k: v for k, v in waiting.items() if k.endswith(SCRIPT_SUFFIX) and v != LINKED
                 and k not in approved and approved.get(job(k)) == tables.get(job(k))}
        approved = {**approved, **first}
        current = {k: v for k, v in current.items() if wanted is None or k in wanted}
        waiting = {k: v for k, v in waiting.items() if k not in first and k in current}
    why = _origins(store, {**waiting, **dict.fromkeys(gone)}, approved) if waiting or gone else {}
    own = {k: waiting[k] for k, reason in why.items() if reason is None and k in waiting}
    dropped = {k for k, reason in why.items() if reason is None and k in gone}  # removed by the local user
    if own or dropped or not scripts_known:
        try:
            _save(store, _pruned(store, {k: v for k, v in {**approved, **own}.items() if k not in dropped}))
        except OSError:
            pass  # approved for this command all the same; asked again next time
    return [Setting(k, v, why.get(k) is None, approved.get(k), why.get(k)) for k, v in current.items()] + [
        Setting(k, REMOVED, False, v, why[k]) for k, v in gone.items() if why.get(k) is not None]


# A redaction pattern approved here that memctl.toml no longer has, taken out by a change not made here:
# its removal waits (a pattern gone lets the secrets it caught into the episodes, and `sync` pushes them),
# and `episode import` goes on applying it until `memctl trust` approves the removal (removed_patterns).
REMOVED = "(removed)"


def removed_patterns(store: Store) -> list[str]:
    """The redaction patterns whose removal waits for approval: still applied. (Asks about no other setting:
    the Stop hook's import reads this at every turn.)"""
    current = executable(store.config.raw)
    gone = [k for k in _approved(store) if k.startswith(PATTERN_KEY) and k not in current]
    return [json.loads(s.was) for s in settings(store, gone) if s.value == REMOVED and s.was] if gone else []


def _pruned(store: Store, approved: dict[str, str]) -> dict[str, str]:
    """Approvals of settings memctl.toml still has (a removed job that comes back is asked for again), and
    of redaction patterns whose removal waits (settings)."""
    current = _current(store)
    return {k: v for k, v in approved.items() if k in current or k.startswith(PATTERN_KEY)}


def waiting(store: Store, keys: Iterable[str] | None = None) -> list[Setting]:
    return [s for s in settings(store, keys) if not s.approved]


def digest(found: Iterable[Setting]) -> str | None:
    """The SHA-256 of what waits among `found` (keys and values; None when nothing does): what `trust
    --list` shows, and `approve(expect=)` checks, so that a value a sync changed between the review and
    the approval is not approved unseen. Whole: the remote writes both values, and a short one (48 bits)
    let it find two with one digest in a minute (helper-90)."""
    import hashlib  # noqa: PLC0415

    waiting_now = sorted((s.key, s.value) for s in found if not s.approved)
    return hashlib.sha256(_canonical(waiting_now).encode("utf-8")).hexdigest() if waiting_now else None


def _named(found: list[Setting], keys: list[str]) -> list[Setting]:
    """The settings `keys` name; a key that is no executable setting of memctl.toml is bad input."""
    unknown = [k for k in keys if k not in {s.key for s in found}]
    if unknown:
        raise BadInput(f"{unknown[0]!r} is not an executable setting of memctl.toml",
                       hint="settings(store) lists them", kind="not-a-setting")
    return [s for s in found if s.key in keys]


def check_expected(chosen: Iterable[Setting], expect: str | None, *, jobs: bool = False, installed: bool = False) -> None:
    """Refuse unless what waits among `chosen` is what the digest `expect` (None: no check) was taken
    of, or nothing waits (then nothing is approved: a second run of the same approval is no error).
    `jobs`: the digest came from a `schedule install` dry run (the refusal's kind says so, for the CLI's
    hint), not from a review of the settings; `installed`: the schedule is already in place."""
    if expect is None:
        return
    if not expect.strip():
        raise BadInput("expect is empty", hint="the digest of what was reviewed: digest(settings(store))", arg="expect",
                       kind="expect-empty")
    now = digest(chosen)
    if now is None or now == expect.strip().lower():
        return
    done = ("the schedule is installed, nothing was approved" if installed else
            "nothing was installed or approved" if jobs else "nothing was approved")
    said = f"what waits for approval is not what was reviewed with digest {expect.strip()[:16]}...: {done}"
    if jobs:  # (the digest now is not said: review first)
        raise Refused(said, hint="review it again: jobs.waiting(store), digest(...)", kind="jobs-changed")
    raise Refused(said, hint="review it again: settings(store), digest(...)", kind="trust-changed")


def approve(store: Store, keys: Iterable[str] | None = None, *, expect: str | None = None,
            jobs: bool = False, installed: bool = False) -> list[Setting]:
    """Approve what waits (only `keys`, when given); return what was approved. A key that is no
    executable setting of memctl.toml is bad input. With `expect` (a digest `trust --list` showed),
    nothing is approved unless what waits is still exactly what it showed (check_expected)."""
    found = settings(store)
    if keys is not None:
        found = _named(found, list(keys))
    chosen = [s for s in found if not s.approved]
    check_expected(chosen, expect, jobs=jobs, installed=installed)
    if chosen:
        kept = {**_approved(store), **{s.key: s.value for s in chosen if s.value != REMOVED}}
        _save(store, _pruned(store, {k: v for k, v in kept.items() if k not in {s.key for s in chosen if s.value == REMOVED}}))
    return chosen


def review(store: Store, keys: Iterable[str] | None = None, *, approving: bool = True,
           expect: str | None = None) -> tuple[list[Setting], list[Setting]]:
    """`memctl trust`: (every executable setting afterwards, or those `keys` name; those approved now);
    nothing is approved unless `approving` (and, with `expect`, unless what waits is what the digest
    says: approve)."""
    approved = approve(store, keys, expect=expect) if approving else []
    found = settings(store)
    return (found if keys is None else _named(found, list(keys))), approved


def written(store: Store, prefix: str) -> list[Setting]:
    """The executable settings whose keys start with `prefix` (`jobs.`: every job and its script)."""
    return [s for s in settings(store) if s.key.startswith(prefix)]


def approve_written(store: Store, prefix: str = "", *, expect: str | None = None,
                    jobs: bool = False, installed: bool = False) -> list[Setting]:
    """What the local user has just chosen (`schedule install` of the jobs): approved as it is (with
    `expect`, only while what waits is what that digest was taken of)."""
    return approve(store, [s.key for s in written(store, prefix)], expect=expect, jobs=jobs, installed=installed)


def describe(setting: Setting) -> str:
    """A key as memctl.toml spells it: [jobs.NAME], [import] redact_patterns "...", [embedding]."""
    if setting.key.startswith(PATTERN_KEY):
        if setting.value == REMOVED:
            return f"the removal of [import] redact_patterns {setting.was}"
        return f"[import] redact_patterns {setting.value}"
    if setting.key == JUDGE_KEY:
        return f"[neardup] judge_cmd {setting.value}"
    if setting.key == COMMIT_KEY:
        return f"[git] commit = {setting.value}"
    if setting.key.endswith(SCRIPT_SUFFIX) and setting.key.startswith("jobs."):
        return f"the script of [{setting.key[:-len(SCRIPT_SUFFIX)]}]"
    return f"[{setting.key}]"


def named(setting: Setting) -> str:
    """A setting and where it is: `[jobs.X] in memctl.toml`, `the script of [jobs.X] (its contents)`."""
    if setting.key.endswith(SCRIPT_SUFFIX) and setting.key.startswith("jobs."):
        return f"{describe(setting)} (its contents)"
    return f"{describe(setting)} in memctl.toml"


def refuse_waiting(store: Store, keys: str | Iterable[str], what: str) -> None:
    """Refused (kind "untrusted") when a setting of `keys` waits for approval: `what` was not done."""
    for setting in waiting(store, [keys] if isinstance(keys, str) else keys):
        raise Refused(f"{named(setting)} waits for approval on this machine: {setting.why}; {what}",
                      hint="review it, then approve it on this machine: `memctl trust`", kind="untrusted")


_WARNED: set[str] = set()  # keys already named in a warning by this process


def acted_on(store: Store, keys: Iterable[str]) -> set[str]:
    """Of `keys`, those memctl may act on; each one left out is named in a warning (once a process)."""
    keys = list(keys)
    held = waiting(store, keys)
    for setting in held:
        if setting.key in _WARNED:
            continue
        _WARNED.add(setting.key)
        errors.warn(f"{named(setting)} is left out: it waits for approval on this machine ({setting.why})",
                    hint="review it, then approve it with `memctl trust`")
    return set(keys) - {s.key for s in held}



def commits_off(store: Store) -> bool:
    """Whether `[git] commit = false` holds here: approved (the local user wrote it, or `memctl trust`);
    one that came through git is named in a warning and memctl goes on committing."""
    return COMMIT_KEY in acted_on(store, [COMMIT_KEY])
