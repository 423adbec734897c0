"""Scheduled jobs: declared in memctl.toml, run by launchd or cron, never silently dead.

A job is `[jobs.<name>]`: what to run (a memctl command or a script in the
store), when (minute / hour / weekday, or an interval) and, optionally, how old
its last success may get. `render` turns the jobs into launchd plists and an
equivalent crontab block; `install` loads them. What the scheduler actually
runs is `memctl run-job NAME` (runjob.py), which takes a per-job lock and the store's
turn (its jobs run one at a time), logs every line
with a timestamp to `logs/<name>.log`, and on failure records an `error`
episode, so that a failing job leaves a trace that `episode recall` and
`doctor` find.

Scheduled jobs run with a minimal environment (cron: PATH=/usr/bin:/bin, no
~/.gitconfig, another working directory), so everything rendered here is
absolute: the memctl executable, the store, the logs, and a PATH that holds
the directories of git and memctl as they were resolved at render time.
"""

from __future__ import annotations

import contextlib
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from . import clock, errors, trust
from .errors import BadInput, LockTimeout, MemctlError, NotFound, Refused
from .fsutil import CONTROL_CHARS, atomic_write, file_lock, link_on_way, refuse_link
from .state import SKEW, format_duration, parse_duration
from .store import Store

JOB_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,127}$")
STANDARD_PATH = ("/usr/local/bin", "/opt/homebrew/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
CALENDAR_KEYS = {"minute": (0, 59), "hour": (0, 23), "weekday": (0, 7)}
_JOB_KEYS = {"description", "command", "script", "args", "minute", "hour", "weekday", "interval", "max_age", "found_exit"}
_SCHEDULE_KEYS = {"label_prefix"}
WEEK_MINUTES = 7 * 24 * 60
TAIL_LINES = 10
EPISODE_TAIL_CHARS = 4000
_LOG_EVENT_RE = re.compile(r"^(\S+) (\S+) (start|end|skip|refused)\b:?(.*)$")


class JobRunning(LockTimeout):
    """Another copy of the job holds its lock (exit 4, like any lock held elsewhere)."""


# ---------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Job:
    name: str
    description: str = ""
    command: tuple[str, ...] = ()  # memctl arguments (without `memctl`)
    script: str | None = None  # a path relative to the store (or absolute)
    args: tuple[str, ...] = ()  # the script's arguments
    minute: tuple[int, ...] | None = None
    hour: tuple[int, ...] | None = None
    weekday: tuple[int, ...] | None = None  # 0 and 7 are Sunday
    interval: int | None = None  # seconds
    max_age: int = 0  # seconds: the last success may not be older
    found_exit: tuple[int, ...] = ()  # exit codes of a run that worked and found something for a person (near-dup scan's 1)

    def succeeded(self, code: int | None) -> bool:
        """Whether a run that ended with `code` did its work (0, or a found_exit)."""
        return code == 0 or code in self.found_exit

    @property
    def calendar(self) -> bool:
        return self.interval is None

    def cron_schedule(self) -> str:
        """The five crontab time fields."""
        if self.interval is not None:
            minutes = self.interval // 60
            if minutes < 60:
                return f"*/{minutes} * * * *"
            hours = minutes // 60
            return "0 * * * *" if hours == 1 else "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"

        def field_(values: tuple[int, ...] | None) -> str:
            return "*" if values is None else ",".join(str(v) for v in values)

        return f"{field_(self.minute)} {field_(self.hour)} * * {field_(self.weekday)}"

    def describe_schedule(self) -> str:
        return f"every {format_duration(self.interval)}" if self.interval is not None else self.cron_schedule()

    def run_times(self) -> list[int]:
        """Minutes of the week (Sunday 00:00 = 0) at which a calendar job runs."""
        minutes = self.minute or (0,)
        hours = self.hour if self.hour is not None else tuple(range(24))
        days = tuple(sorted({d % 7 for d in self.weekday})) if self.weekday is not None else tuple(range(7))
        return sorted({d * 1440 + h * 60 + m for d in days for h in hours for m in minutes})

    def longest_gap(self) -> int:
        """Seconds between two runs, at the most."""
        if self.interval is not None:
            return self.interval
        times = self.run_times()
        gaps = [b - a for a, b in zip(times, times[1:])] + [times[0] + WEEK_MINUTES - times[-1]]
        return max(gaps) * 60


def job_table(name: str) -> str:
    return f"memctl.toml: [jobs.{name}]"


def _calendar_field(name: str, key: str, value: Any) -> tuple[int, ...]:
    low, high = CALENDAR_KEYS[key]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise BadInput(f"{job_table(name)} {key} = [] is empty", hint=f"a whole number from {low} to {high}, or a list of them")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int):
            raise BadInput(f"{job_table(name)} {key} = {item!r} is not a whole number", hint=f"{low}-{high}")
        if not low <= item <= high:
            extra = " (0 and 7 are Sunday)" if key == "weekday" else ""
            raise BadInput(f"{job_table(name)} {key} = {item} is out of range ({low}-{high}){extra}")
    if len(set(values)) != len(values):
        raise BadInput(f"{job_table(name)} {key} lists a value twice")
    return tuple(sorted(values))


def _interval(name: str, value: Any) -> int:
    seconds = parse_duration(value, f"{job_table(name)} interval")
    minutes, rest = divmod(seconds, 60)
    # Only what cron can say too, so that launchd and cron run a job alike.
    if rest == 0 and ((minutes < 60 and 60 % minutes == 0) or (minutes % 60 == 0 and 24 % (minutes // 60) == 0)):
        return seconds
    raise BadInput(f"{job_table(name)} interval = {value!r} has no crontab equivalent",
                   hint="a divisor of 60 minutes (1m..30m, 1h) or of 24 hours (2h, 3h, 4h, 6h, 8h, 12h, 24h); else use minute/hour/weekday")


def _words(name: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise BadInput(f"{job_table(name)} {key}: {exc}") from None
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        words = list(value)
    else:
        raise BadInput(f"{job_table(name)} {key} must be a string or a list of strings")
    if any("\0" in w or "\n" in w for w in words):
        raise BadInput(f"{job_table(name)} {key} must not contain NUL or newlines")
    return tuple(words)


def _found_exit(name: str, value: Any) -> tuple[int, ...]:
    codes = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 125
                                              for c in codes):
        raise BadInput(f"{job_table(name)} found_exit = {value!r} is not an exit code from 1 to 125 (or a list of them)",
                       hint="the codes a command exits with when it worked and found something: near-dup scan's is 1")
    return tuple(sorted(set(codes)))


def parse_job(name: str, table: Any) -> Job:
    """One `[jobs.<name>]` table, validated; every problem names the job and the key."""
    if not JOB_NAME_RE.match(name):
        raise BadInput(f"memctl.toml: invalid job name {name!r}", hint="1-64 ASCII letters, digits, - or _")
    if not isinstance(table, dict):
        raise BadInput(f"{job_table(name)} must be a table")
    unknown = sorted(set(table) - _JOB_KEYS)
    if unknown:
        raise BadInput(f"{job_table(name)} has an unknown key {unknown[0]!r}", hint="keys: " + ", ".join(sorted(_JOB_KEYS)))
    if ("command" in table) == ("script" in table):
        raise BadInput(f"{job_table(name)} needs exactly one of command (memctl arguments) or script (a file in the store)")
    command: tuple[str, ...] = ()
    script = None
    if "command" in table:
        command = _words(name, "command", table["command"])
        if command[:1] == ("memctl",):
            command = command[1:]
        if not command:
            raise BadInput(f"{job_table(name)} command is empty")
        if "args" in table:
            raise BadInput(f"{job_table(name)} args go with script; put them in command")
    else:
        script = table["script"]
        if not isinstance(script, str) or not script.strip() or "\0" in script or "\n" in script:
            raise BadInput(f"{job_table(name)} script must be a path (relative to the store)")
    args = _words(name, "args", table.get("args", []))
    calendar = {key: _calendar_field(name, key, table[key]) for key in CALENDAR_KEYS if key in table}
    if calendar and "interval" in table:
        raise BadInput(f"{job_table(name)} has both interval and minute/hour/weekday", hint="give one kind of schedule")
    if not calendar and "interval" not in table:
        raise BadInput(f"{job_table(name)} has no schedule", hint="minute/hour/weekday (e.g. hour = 9), or interval = \"1h\"")
    interval = _interval(name, table["interval"]) if "interval" in table else None
    description = table.get("description", "")
    if not isinstance(description, str) or re.search(f"[{CONTROL_CHARS}]", description):
        # it is a comment in the crontab: a CR or a \x0b there ended the comment and started a line of its own
        raise BadInput(f"{job_table(name)} description must be one line of text, without control characters")
    if calendar and "minute" not in calendar:
        calendar["minute"] = (0,)
    job = Job(name=name, description=description, command=command, script=script, args=args,
              minute=calendar.get("minute"), hour=calendar.get("hour"), weekday=calendar.get("weekday"), interval=interval,
              found_exit=_found_exit(name, table.get("found_exit", [])))
    if "max_age" in table:
        max_age = parse_duration(table["max_age"], f"{job_table(name)} max_age")
    else:
        gap = job.longest_gap()
        max_age = gap + min(gap, 3600)  # one missed hour of grace, at most one more run
    return Job(**{**job.__dict__, "max_age": max_age})


def _jobs_table(store: Store) -> dict[str, Any]:
    return _tables(store.config.raw)


def _tables(raw: dict[str, Any]) -> dict[str, Any]:
    table = raw.get("jobs", {})
    if not isinstance(table, dict):
        raise BadInput("memctl.toml: jobs must be tables ([jobs.NAME])")
    return table


def check_declared(raw: dict[str, Any]) -> None:
    """BadInput for the first job table of a memctl.toml (parsed: `raw`) that memctl would not load."""
    for name, table in _tables(raw).items():
        parse_job(name, table)


def load_jobs(store: Store) -> list[Job]:
    """Every declared job, in file order; the first problem raises BadInput."""
    return [parse_job(name, table) for name, table in _jobs_table(store).items()]


def get_job(store: Store, name: str) -> Job:
    """One job (a typo in another job does not stop this one from running)."""
    if not JOB_NAME_RE.match(name or ""):
        raise BadInput(f"invalid job name {name!r}", hint="1-64 ASCII letters, digits, - or _")
    table = _jobs_table(store)
    if name not in table:
        known = ", ".join(table) or "none declared"
        raise NotFound(f"no job named {name!r} in memctl.toml ({known})", hint=f"declare it in [jobs.{name}]")
    return parse_job(name, table[name])


def script_path(store: Store, job: Job) -> Path:
    script = Path(job.script or "")
    return script if script.is_absolute() else store.root / script


def check_runnable(store: Store, jobs: list[Job], check_command: Callable[[tuple[str, ...]], str | None] | None = None) -> None:
    """Refuse (BadInput) a job whose script is missing or not executable, or whose memctl
    command would not parse, so that it fails now and not at 3 a.m. with exit 127.

    `check_command` says why `memctl WORDS` would not parse (None: it would); the CLI
    passes one that asks its own command table. Without it only scripts are checked.
    """
    for job in jobs:
        if job.script is not None:
            path = script_path(store, job)
            if not path.is_file():
                raise BadInput(f"{job_table(job.name)} script {job.script!r} does not exist ({path})",
                               hint="create it, or run memctl itself: command = \"state update\"")
            if not os.access(path, os.X_OK):
                raise BadInput(f"{job_table(job.name)} script {job.script!r} is not executable", hint=f"chmod +x {path}")
        elif check_command is not None:
            why = check_command(job.command)
            if why:
                raise BadInput(f"{job_table(job.name)} command {shlex.join(job.command)!r} is not a memctl command line: {why}",
                               hint="memctl's help lists the commands", kind="not-a-command")


def label_prefix(store: Store) -> str:
    table = store.config.raw.get("schedule", {})
    if not isinstance(table, dict):
        raise BadInput("memctl.toml: schedule must be a table ([schedule])")
    unknown = sorted(set(table) - _SCHEDULE_KEYS)
    if unknown:
        raise BadInput(f"memctl.toml: [schedule] has an unknown key {unknown[0]!r}", hint="keys: label_prefix")
    if "label_prefix" in table:
        prefix = table["label_prefix"]
        if not isinstance(prefix, str) or not LABEL_RE.match(prefix):
            raise BadInput(f"memctl.toml: [schedule] label_prefix = {prefix!r} is not a launchd label", hint="letters, digits, . and -")
        return prefix
    name = store.root.name.lower()
    # A name with other letters (記憶, メモ-2026) by its Punycode: each its own label, where all of them were
    # `io.memctl.store` (or shared the ASCII left over), and the second store's install was refused.
    spelled = name if name.isascii() else name.encode("punycode").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", spelled).strip("-") or "store"
    return f"io.memctl.{slug}"


def label(store: Store, job: Job) -> str:
    return f"{label_prefix(store)}.{job.name}"


# ---------------------------------------------------------------- the environment a scheduler gives

@dataclass(frozen=True)
class Environment:
    """What a job needs from a machine, resolved when the schedule is rendered."""

    memctl: tuple[str, ...]  # argv that starts memctl
    path: str  # PATH with git's and memctl's directories first
    git: str | None
    named_git: str | None = None  # MEMCTL_GIT when the user named their git so: the job names it too


def memctl_argv() -> tuple[str, ...]:
    """The memctl of the running Python (its venv's script), else the one on PATH, else `python -m memctl`."""
    beside = Path(sys.executable).parent / "memctl"
    if beside.is_file() and os.access(beside, os.X_OK):
        return (str(beside),)
    found = shutil.which("memctl")
    if found:
        return (str(Path(found).absolute()),)
    return (sys.executable, "-m", "memctl")


def resolve_environment() -> Environment:
    from . import gitstore  # noqa: PLC0415  (light: GitPython is not imported to find git)

    argv = memctl_argv()
    git = gitstore.git_executable()
    dirs = [str(Path(argv[0]).parent)]
    if git:
        dirs.append(str(Path(git).absolute().parent))
    dirs.append(str(Path(sys.executable).parent))
    dirs += STANDARD_PATH
    path = ":".join(dict.fromkeys(dirs))
    named = os.environ.get("MEMCTL_GIT") or None
    return Environment(argv, path, git, str(Path(named).absolute()) if named and git else None)


def git_warning(env: Environment) -> tuple[str, ...]:
    """A warning when no git is on the PATH the jobs will have (every run that commits would fail), or when
    MEMCTL_GIT names no git to run (the jobs would not carry it, and would run another git, or none)."""
    named = os.environ.get("MEMCTL_GIT")
    if named and not env.named_git:
        return (f"MEMCTL_GIT names {named}, which is not a program to run: the jobs get the git on their PATH "
                "instead (fix MEMCTL_GIT, or unset it, then install the schedule again)",)
    if env.git or any(os.access(os.path.join(d, "git"), os.X_OK) for d in env.path.split(":") if d):
        return ()
    return ("git not found, here or on the jobs' PATH: every job that commits will fail "
            "(install git, or name it in MEMCTL_GIT, then install the schedule again)",)


def logs_dir(store: Store) -> Path:
    return store.root / "logs"


def log_path(store: Store, name: str) -> Path:
    return logs_dir(store) / f"{name}.log"


def _program(store: Store, job: Job, env: Environment) -> list[str]:
    return [*env.memctl, "--root", str(store.root), "run-job", "--quiet", job.name]


def _variables(store: Store, env: Environment) -> dict[str, str]:
    named = {"MEMCTL_GIT": env.named_git} if env.named_git else {}
    return {"PATH": env.path, "MEMCTL_ROOT": str(store.root), "PYTHONUTF8": "1", **named}


def _logged(store: Store, job: Job, program: str, quote: Callable[[str], str]) -> str:
    """The shell line that runs `program` in the store with its output appended to logs/NAME.stdout.log
    and logs/NAME.stderr.log, for cron and launchd alike. `test ! -L`: the shell's redirections (and
    launchd's StandardOutPath, which this replaces) would follow a link a `git pull` brought (`logs`,
    or a log file in it) out of the store."""
    out, err = (quote(f"logs/{job.name}.{kind}.log") for kind in ("stdout", "stderr"))
    return (f"cd {quote(str(store.root))} && test ! -L logs && mkdir -p logs && test ! -L {out} && test ! -L {err} "
            f"&& {program} >>{out} 2>>{err}")


def plist(store: Store, job: Job, env: Environment) -> dict[str, Any]:
    """The launchd agent for one job, as a dict for plistlib."""
    program = " ".join(shlex.quote(w) for w in _program(store, job, env))
    data: dict[str, Any] = {
        "Label": label(store, job),
        "ProgramArguments": ["/bin/sh", "-c", _logged(store, job, f"exec {program}", shlex.quote)],
        "WorkingDirectory": str(store.root),
        "EnvironmentVariables": _variables(store, env),
        "RunAtLoad": False,
        "ProcessType": "Background",
    }
    if job.interval is not None:
        data["StartInterval"] = job.interval
    else:
        entries = [
            {k: v for k, v in (("Minute", m), ("Hour", h), ("Weekday", d)) if v is not None}
            for d in (job.weekday or (None,)) for h in (job.hour or (None,)) for m in (job.minute or (None,))
        ]
        data["StartCalendarInterval"] = entries[0] if len(entries) == 1 else entries
    return data


def plist_bytes(store: Store, job: Job, env: Environment) -> bytes:
    return plistlib.dumps(plist(store, job, env), sort_keys=True)


def _cron_quote(word: str) -> str:
    # cron turns an unescaped % into a newline.
    return shlex.quote(word).replace("%", "\\%")


def begin_marker(store: Store) -> str:
    return f"# memctl:begin root={store.root}"


def end_marker(store: Store) -> str:
    return f"# memctl:end root={store.root}"


def crontab_block(store: Store, jobs: list[Job], env: Environment) -> str:
    """The crontab lines for the store's jobs, between this store's marker lines."""
    if not jobs:
        return ""
    q = _cron_quote
    root = str(store.root)
    if any(c < " " or c == "\x7f" for c in root):  # a newline in the path would split the block's lines
        raise BadInput(f"the store's path {root!r} holds a control character: a crontab line cannot name it",
                       hint="move the store to a folder whose path has none, then install again")
    lines = [begin_marker(store), "# generated by memctl from memctl.toml: edit [jobs.*] there, then `memctl schedule install`"]
    for job in jobs:
        variables = " ".join(f"{k}={q(v)}" for k, v in _variables(store, env).items())
        program = " ".join(q(w) for w in _program(store, job, env))
        lines.append(f"# {job.name}" + (f": {job.description}" if job.description else ""))
        lines.append(f"{job.cron_schedule()} {_logged(store, job, f'{variables} {program}', q)}")
    lines.append(end_marker(store))
    return "\n".join(lines) + "\n"


def merge_crontab(current: str, block: str, store: Store) -> str:
    """`current` with this store's block replaced by `block` (or added); every other line kept."""
    lines = current.splitlines()
    begin, end = begin_marker(store), end_marker(store)
    if begin in lines:
        start = lines.index(begin)
        if end not in lines[start:]:
            raise Refused(f"the crontab has {begin!r} but not its end marker", hint="fix the crontab by hand (crontab -e)")
        stop = lines.index(end, start)
        new = lines[:start] + block.splitlines() + lines[stop + 1:]
    else:
        new = lines + block.splitlines()
    return "\n".join(new) + "\n" if new else ""


# ---------------------------------------------------------------- render into launchd/

@dataclass(frozen=True)
class Rendered:
    written: tuple[Path, ...]
    removed: tuple[Path, ...]
    unchanged: tuple[Path, ...]
    crontab: str
    warnings: tuple[str, ...] = ()  # what the jobs will lack (git)


def plist_dir(store: Store) -> Path:
    return store.root / "launchd"


def plan_plists(store: Store, jobs: list[Job], env: Environment) -> dict[Path, bytes]:
    return {plist_dir(store) / f"{label(store, job)}.plist": plist_bytes(store, job, env) for job in jobs}


def rendered_job(path: Path) -> str | None:
    """The job a plist written by `render` runs (`... run-job --quiet NAME`, through `/bin/sh -c` with its
    log redirections, or alone as older versions wrote it), else None."""
    try:
        data = plistlib.loads(path.read_bytes())
        args = data["ProgramArguments"]
        if args[:2] == ["/bin/sh", "-c"] and len(args) == 3:
            args = shlex.split(args[2])[:-2]  # (the last two: >>logs/NAME.stdout.log 2>>logs/NAME.stderr.log)
        name = args[-1]
        if args[-3:-1] == ["run-job", "--quiet"] and data["Label"].endswith("." + name) and JOB_NAME_RE.match(name):
            return name
    except (OSError, plistlib.InvalidFileException, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass
    return None


def _own_plists(directory: Path, prefix: str) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f"{prefix}.*.plist") if JOB_NAME_RE.match(p.name[len(prefix) + 1:-len(".plist")]))


def render(store: Store, *, env: Environment | None = None,
           check_command: Callable[[tuple[str, ...]], str | None] | None = None) -> Rendered:
    """Write one plist per job into launchd/; remove every plist there that render wrote for a job
    no longer declared (under any label prefix: the store may have had another folder name).

    The plists hold this machine's paths, so they are machine-local: git-ignored and never
    committed (docs/JOBS.md). A job whose script or command does not exist is refused first.
    """
    jobs = load_jobs(store)
    check_runnable(store, jobs, check_command)
    refuse_link(store.root, plist_dir(store))  # it removes old plists there: never in a folder a link names
    env = env or resolve_environment()
    planned = plan_plists(store, jobs, env)
    written, unchanged = [], []
    with store.lock():
        for path, data in planned.items():
            if path.is_file() and path.read_bytes() == data:
                unchanged.append(path)
                continue
            atomic_write(path, data)
            written.append(path)
        here = sorted(plist_dir(store).glob("*.plist")) if plist_dir(store).is_dir() else []
        removed = [p for p in here if p not in planned and rendered_job(p) is not None]
        for path in removed:
            path.unlink()
    return Rendered(tuple(written), tuple(removed), tuple(unchanged), crontab_block(store, jobs, env),
                    git_warning(env) if jobs else ())


# ---------------------------------------------------------------- install into launchd or cron

@dataclass(frozen=True)
class Step:
    """One thing install/uninstall does: write/remove a file, or run a command."""

    action: str  # write | remove | run | crontab
    target: str
    data: bytes | None = None
    argv: tuple[str, ...] = ()
    check: bool = True  # a failing command is an error (bootout of an agent that is not loaded is not)

    def describe(self) -> str:
        if self.action == "run":
            return " ".join(shlex.quote(a) for a in self.argv)
        return f"{self.action} {self.target}"


@dataclass(frozen=True)
class Plan:
    scheduler: str  # launchd | cron
    steps: tuple[Step, ...]
    crontab_after: str | None = None
    notes: tuple[str, ...] = ()  # what a dry run could not find out (no crontab or launchctl here)
    warnings: tuple[str, ...] = ()  # what the jobs will lack (git)

    @property
    def changed(self) -> bool:
        return bool(self.steps)


def choose_scheduler(scheduler: str = "auto") -> str:
    if scheduler == "auto":
        return "launchd" if sys.platform == "darwin" else "cron"
    if scheduler not in ("launchd", "cron"):
        raise BadInput(f"unknown scheduler {scheduler!r}", hint="auto, launchd or cron")
    return scheduler


SCHEDULER_TOOLS = {"crontab": "/usr/bin/crontab", "launchctl": "/bin/launchctl"}  # where each is when PATH lacks it


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    fallback = SCHEDULER_TOOLS[name]
    if os.access(fallback, os.X_OK):
        return fallback
    if name == "crontab":
        raise NotFound("crontab not found on PATH", hint=_NO_TOOL_HINTS[name], kind="no-crontab")
    raise NotFound(f"{name} not found on PATH", hint=_NO_TOOL_HINTS[name], kind="no-launchctl")


_NO_TOOL_HINTS = {  # the library's (no flag named); the CLI's are in cli/hints.py
    "crontab": "install cron (the package cron on Debian and Ubuntu, cronie on Fedora), or have another scheduler "
               "run the jobs' lines",
    "launchctl": "launchd is macOS's scheduler; elsewhere, cron",
}


def find_tool(name: str) -> str | None:
    try:
        return _tool(name)
    except NotFound:
        return None


def read_crontab(timeout: float | None = None) -> str:
    crontab = _tool("crontab")
    try:
        done = subprocess.run([crontab, "-l"], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MemctlError(f"crontab -l did not answer within {timeout:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()
        if "no crontab" in said.lower():
            return ""
        raise MemctlError(f"crontab -l failed: {said or done.returncode}")
    # Other lines are anyone's bytes (a comment in Latin-1, say): kept as they are, written back the same.
    return done.stdout.decode("utf-8", "surrogateescape")


def _plan_cron(store: Store, jobs: list[Job], env: Environment, remove: bool, dry_run: bool = False) -> Plan:
    notes: tuple[str, ...] = ()
    if remove and find_tool("crontab") is None:  # no cron here: no crontab holds this store's lines
        return Plan("cron", (), "", ("crontab not found on PATH: no crontab holds this store's jobs",))
    if dry_run and find_tool("crontab") is None:
        current = ""
        notes = ("crontab not found on PATH: the plan starts from an empty crontab",)
    else:
        current = read_crontab()
    if remove:
        new = merge_crontab(current, "", store) if begin_marker(store) in current.splitlines() else current
    else:
        new = merge_crontab(current, crontab_block(store, jobs, env), store)
    steps = () if new == current else (Step("crontab", "crontab", new.encode("utf-8", "surrogateescape")),)
    return Plan("cron", steps, new, notes)


def launch_agents_dir() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def _domain() -> str:
    return f"gui/{os.getuid()}"


def agent_root(path: Path) -> str | None:
    try:
        return plistlib.loads(path.read_bytes()).get("WorkingDirectory")
    except (OSError, plistlib.InvalidFileException, ValueError, AttributeError):
        return None


def _loaded(launchctl: str, target: str) -> bool:
    return subprocess.run([launchctl, "print", target], capture_output=True).returncode == 0


def _plan_launchd(store: Store, jobs: list[Job], env: Environment, remove: bool, dry_run: bool = False) -> Plan:
    notes: tuple[str, ...] = ()
    found = find_tool("launchctl") if dry_run else _tool("launchctl")
    if found is None:
        notes = ("launchctl not found on PATH: the plan assumes no agent is loaded",)
    launchctl = found or "launchctl"
    agents = launch_agents_dir()
    domain = _domain()
    prefix = label_prefix(store)
    wanted = {} if remove else {agents / p.name: data for p, data in plan_plists(store, jobs, env).items()}
    steps: list[Step] = []
    for dest, data in wanted.items():
        owner = agent_root(dest) if dest.exists() else None
        if owner is not None and owner != str(store.root):
            raise Refused(f"{dest} belongs to the store at {owner}", hint="set [schedule] label_prefix in memctl.toml")
        target = f"{domain}/{dest.stem}"
        if dest.exists() and dest.read_bytes() == data and found and _loaded(launchctl, target):
            continue
        steps += [
            Step("write", str(dest), data),
            Step("run", target, argv=(launchctl, "bootout", target), check=False),
            Step("run", target, argv=(launchctl, "bootstrap", domain, str(dest))),
        ]
    # This store's agents of jobs no longer declared, under this label prefix or another one.
    stale = set(_own_plists(agents, prefix))
    if agents.is_dir():
        stale.update(p for p in agents.glob("*.plist") if rendered_job(p) is not None)
    for old in sorted(stale):
        if old in wanted or agent_root(old) != str(store.root):
            continue
        target = f"{domain}/{old.stem}"
        steps += [Step("run", target, argv=(launchctl, "bootout", target), check=False), Step("remove", str(old))]
    return Plan("launchd", tuple(steps), notes=notes)


def plan_install(store: Store, *, scheduler: str = "auto", remove: bool = False, env: Environment | None = None,
                 dry_run: bool = False, check_command: Callable[[tuple[str, ...]], str | None] | None = None) -> Plan:
    """What install (or uninstall, with `remove`) would change; nothing is touched.

    With `dry_run`, a missing crontab or launchctl does not stop the plan: it is shown
    as it would run, with a note on what could not be read.
    """
    jobs = [] if remove else load_jobs(store)
    check_runnable(store, jobs, check_command)
    env = env or resolve_environment()
    which = choose_scheduler(scheduler)
    plan = (_plan_launchd if which == "launchd" else _plan_cron)(store, jobs, env, remove, dry_run)
    return replace(plan, warnings=git_warning(env)) if jobs else plan


@contextlib.contextmanager
def scheduler_lock() -> Iterator[None]:
    """This user's scheduler changed by one memctl at a time: a crontab is read, changed and written back
    whole, and two installs of two stores at once each wrote back what they had read, so one store's
    block was lost (both said "1 change made"). A lock file per user (_scheduler_lock_path); where it
    cannot be taken (no such folder, a file another user put there, held too long), the change goes on
    unlocked, with a warning."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(_scheduler_lock_path()))
        except (OSError, MemctlError) as exc:
            why = exc.one_line() if isinstance(exc, MemctlError) else errors.from_os_error(exc).one_line()
            errors.warn(f"the crontab is changed without the scheduler lock: {why}")
        yield


def _scheduler_lock_path() -> Path:
    """Where this user's scheduler lock lives: a folder only this user writes ($XDG_RUNTIME_DIR, else
    ~/.cache/memctl), else the temporary folder, where another user may have put a file of that name."""
    import tempfile  # noqa: PLC0415

    for folder in (os.environ.get("XDG_RUNTIME_DIR"), os.path.join(os.path.expanduser("~"), ".cache", "memctl")):
        if folder and os.path.isabs(folder):
            with contextlib.suppress(OSError):
                os.makedirs(folder, mode=0o700, exist_ok=True)
                if os.access(folder, os.W_OK):
                    return Path(folder) / "scheduler.lock"
    return Path(tempfile.gettempdir()) / f"memctl-scheduler-{os.getuid()}.lock"


def apply(store: Store, plan: Plan) -> None:
    """Carry out a plan (the logs/ folder is created first: launchd will not start a job without it)."""
    if plan.steps:
        logs_dir(store).mkdir(parents=True, exist_ok=True)
    for step in plan.steps:
        if step.action == "write":
            atomic_write(Path(step.target), step.data or b"")
        elif step.action == "remove":
            Path(step.target).unlink(missing_ok=True)
        elif step.action == "crontab":
            crontab = _tool("crontab")
            done = subprocess.run([crontab, "-"], input=step.data, capture_output=True)
            if done.returncode != 0:
                raise MemctlError(f"crontab - failed: {done.stderr.decode(errors='replace').strip() or done.returncode}")
        else:
            done = subprocess.run(list(step.argv), capture_output=True)
            if done.returncode != 0 and step.check:
                detail = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
                raise MemctlError(f"{step.describe()} failed: {detail}")


def install(store: Store, plan: Plan, expect: str | None = None) -> list[trust.Setting]:
    """Carry out an install plan. Installing is the local user's choice of the jobs: those that
    waited for approval (memctl/trust.py) are approved, and returned. With `expect` (the digest of
    what a dry run said it would approve: `waiting_digest`), nothing is installed or approved once
    what waits differs (a sync merged a new command since); checked again as it approves (a job's
    script changed while the schedule was written: installed, nothing approved, so run-job still
    refuses that job)."""
    trust.check_expected(waiting(store), expect, jobs=True)
    apply(store, plan)
    return trust.approve_written(store, "jobs.", expect=expect, jobs=True, installed=True)


def waiting(store: Store) -> list[trust.Setting]:
    """The job settings (tables, scripts) an install would approve: those that wait now."""
    return [s for s in trust.written(store, "jobs.") if not s.approved]



# ---------------------------------------------------------------- a job's files in .memctl/jobs/

WAITING = " waiting"  # after the pid in a job's lock while its run-job waits for the turn
ENDING = " ending"  # after the pid in a job's lock while another job's run-job ends what its killed run left


def jobs_folder(store: Store) -> Path:
    """`.memctl/jobs/`, the jobs' locks and run files; Refused when it (or `.memctl/`) is a symbolic link
    (git writes one over an ignored folder: a run would remove and write files where it leads)."""
    folder = store.cache_dir / "jobs"
    refuse_link(store.root, folder)
    return folder


def job_lock(store: Store, name: str) -> Path:
    """A job's lock: held while its run-job lives; its text, the holder's pid (WAITING, ENDING after it)."""
    return jobs_folder(store) / f"{name}.lock"


def lock_holder(lock: Path) -> str:
    try:
        return lock.read_text().strip() or "?"
    except OSError:
        return "?"


# ---------------------------------------------------------------- status

@dataclass(frozen=True)
class Status:
    job: Job
    log: str  # relative to the store
    last_run: str | None = None
    last_exit: int | None = None
    last_end: str | None = None
    last_success: str | None = None
    running: bool = False
    tail: tuple[str, ...] = ()
    age: int | None = None  # seconds since the last success
    last_refused: str | None = None  # when run-job last refused to start it, if after its last run
    refused_why: str | None = None  # (its table waits for approval, its log is a link, ...)
    waiting: bool = False  # running, its run-job waiting for the store's turn (another job runs)

    @property
    def refused(self) -> bool:
        """Whether the last attempt to run it was refused: nothing ran since (cron keeps trying)."""
        return self.last_refused is not None

    @property
    def state(self) -> str:
        if self.running:
            return "waiting" if self.waiting else "running"
        if self.refused:
            return "refused"
        if self.last_run is None:
            return "never run"
        if self.last_success is None or self.last_end is None or self.last_end < self.last_run:
            return "failing"  # the last run has no `end` line: run-job itself was killed (SIGKILL, a power cut)
        if self.age is not None and (self.age > self.job.max_age or self.ahead):
            return "stale"
        return "ok" if self.job.succeeded(self.last_exit) else "failing"

    @property
    def ahead(self) -> bool:
        """Whether its last success is dated in the future (a clock that ran ahead then): no proof that it runs."""
        return self.age is not None and self.age < -SKEW

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job.name, "schedule": self.job.describe_schedule(), "max_age": format_duration(self.job.max_age),
            "last_run": self.last_run, "last_exit": self.last_exit, "last_success": self.last_success,
            "state": self.state, "running": self.running, "log": self.log, "log_tail": list(self.tail),
            "last_refused": self.last_refused, "refused": self.refused_why,
        }


def _reverse_lines(path: Path, block: int = 65536) -> Iterator[str]:
    """The lines of a file, last first, read in blocks from the end (logs only grow)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        position = handle.tell()
        rest = b""
        while position > 0:
            size = min(block, position)
            position -= size
            handle.seek(position)
            data = handle.read(size) + rest
            lines = data.split(b"\n")
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line:
                    yield line.decode("utf-8", "replace")
        if rest:
            yield rest.decode("utf-8", "replace")


def _is_running(store: Store, name: str) -> bool:
    # Probing takes the lock for an instant; a run-job starting in that instant
    # would log "skip" and exit 4, which status and doctor then show.
    lock = job_lock(store, name)
    if not lock.exists():
        return False
    try:
        with file_lock(lock, timeout=0):
            return False
    except LockTimeout:
        return True


def status(store: Store, job: Job, *, tail: int = TAIL_LINES) -> Status:
    """Last run, last exit code, last success and the log's last lines, read back from logs/<name>.log."""
    path = log_path(store, job.name)
    found: dict[str, Any] = {}
    lines: list[str] = []
    if link_on_way(store.root, path) is None and path.is_file():  # a linked log is never read (doctor names it)
        for line in _reverse_lines(path):
            if len(lines) < tail:
                lines.append(line)
            match = _LOG_EVENT_RE.match(line)
            if match and match.group(2) == job.name:
                ts, event, rest = match.group(1), match.group(3), match.group(4)
                if event == "start" and "last_run" not in found:
                    found["last_run"] = ts
                    found.setdefault("last_exit", None)  # no `end` after it: killed, or running; not an older run's exit
                    found.setdefault("last_end", None)  # (by the order of the lines: an older run's end may share its second)
                elif event == "refused" and "last_refused" not in found and "last_run" not in found:
                    found["last_refused"], found["refused_why"] = ts, rest.strip()  # refused since its last run
                elif event == "end":
                    code = re.search(r"exit=(-?\d+)", rest)
                    if code:
                        found.setdefault("last_exit", int(code.group(1)))
                        found.setdefault("last_end", ts)
                        if job.succeeded(int(code.group(1))):
                            found.setdefault("last_success", ts)
            if {"last_run", "last_exit", "last_success"} <= set(found) and len(lines) >= tail:
                break
    age = None
    if "last_success" in found:
        with contextlib.suppress(ValueError):
            age = int((clock.now() - clock.parse_date(found["last_success"])).total_seconds())
    running = _is_running(store, job.name)
    return Status(job, store.rel(path), running=running, tail=tuple(reversed(lines)), age=age,
                  waiting=running and lock_holder(job_lock(store, job.name)).endswith(WAITING), **found)


def statuses(store: Store, name: str | None = None, *, tail: int = TAIL_LINES) -> list[Status]:
    jobs = [get_job(store, name)] if name else load_jobs(store)
    return [status(store, job, tail=tail) for job in jobs]


def problems(store: Store) -> list:
    """doctor: jobs whose last success is older than their schedule allows, failing, or never run here."""
    from .facts import Problem  # noqa: PLC0415

    try:
        found = statuses(store, tail=0)
    except BadInput as exc:
        return [Problem("memctl.toml", 0, "job-config", exc.one_line())]
    result = []
    for st in found:
        name, allowed = st.job.name, format_duration(st.job.max_age)
        if st.running:
            continue  # its run decides (and daily maintenance runs doctor from inside its own job)
        if st.refused:
            result.append(Problem(st.log, 0, "job-refused", f"job {name}: its last run was refused at {st.last_refused}, "
                                  f"nothing ran: {st.refused_why}"))
        elif st.last_run is None:
            if not logs_dir(store).is_dir():
                continue  # no job was installed or run on this machine: scheduling is not in use here
            result.append(Problem(st.log, 0, "job-never-run", f"job {name} has never run on this machine "
                                  "(memctl schedule install, or memctl run-job " + name + ")", "warning"))
        elif st.last_success is None:
            result.append(Problem(st.log, 0, "job-never-succeeded", f"job {name} has never succeeded "
                                  f"({_last_outcome(st)})" + (f"; if its exit {st.last_exit} says it found something, "
                                  f"declare found_exit = {st.last_exit} in [jobs.{name}]" if st.last_exit == 1  # (grep's "found")
                                  and not st.job.found_exit else "")))
        elif st.ahead:
            result.append(Problem(st.log, 0, "job-stale", f"job {name}: last success {st.last_success} is in the future "
                                  "(a clock that was wrong then): no proof that it runs; its next run on time dates it"))
        elif st.age is not None and st.age > st.job.max_age:
            result.append(Problem(st.log, 0, "job-stale", f"job {name}: last success {st.last_success}, "
                                  f"{format_duration(st.age)} ago; its schedule ({st.job.describe_schedule()}) allows {allowed}"
                                  + (f" (last exit {st.last_exit})" if st.last_exit else "")))
        elif st.state == "failing":
            result.append(Problem(st.log, 0, "job-failing", f"job {name}: last run failed ({_last_outcome(st)})", "warning"))
    return result


def _last_outcome(st: Status) -> str:
    if st.last_exit is None:  # its run has no `end` line
        return f"the run started at {st.last_run} did not end: run-job was killed"
    return f"last exit {st.last_exit} at {st.last_end}"
