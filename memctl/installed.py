"""What this machine's scheduler runs for a store, set against what memctl.toml declares (for doctor).

`memctl schedule install` writes the store's crontab block (or launchd agents) from memctl.toml, and
nothing reads them again when memctl.toml changes, by hand or by a `git pull`. So a job removed from
memctl.toml but still installed is refused at every run, and a job added or rescheduled does not run,
or not when memctl.toml says. Only the store's own block or agents are read; nothing is changed.
"""

from __future__ import annotations

import json
import plistlib
import re
from pathlib import Path

from . import jobs
from .errors import BadInput, MemctlError
from .facts import Problem
from .store import Store

# A job line of the store's crontab block as jobs.crontab_block writes it: five time fields, `cd STORE && ...`,
# `run-job --quiet NAME >>log`. A line in another shape (commented out, `@daily`, edited) is not read as a job.
_CRON_JOB_RE = re.compile(r"^([^\s#]\S* \S+ \S+ \S+ \S+) cd .* run-job --quiet ([A-Za-z0-9_-]{1,64}) >>")
_LAUNCHD_TIMES = ("StartInterval", "StartCalendarInterval")
_NO_ENV = jobs.Environment(memctl=("memctl",), path="", git=None)  # a plist's times do not depend on it
CRONTAB_SECONDS = 10.0  # `crontab -l` answers at once; one that hangs must not hold up doctor (and maintain)


class BrokenBlock(Exception):
    """The store's crontab block has its begin marker and not its end marker."""


def installed_cron(store: Store) -> dict[str, str] | None:
    """{job: its five time fields} in the store's crontab block; None when it has none or crontab cannot be
    read (not installed, failing, hanging: doctor goes on without it). BrokenBlock when its end is missing:
    what follows may be another store's block."""
    if jobs.find_tool("crontab") is None:
        return None
    try:
        lines = jobs.read_crontab(timeout=CRONTAB_SECONDS).splitlines()
    except (MemctlError, OSError):
        return None
    begin, end = jobs.begin_marker(store), jobs.end_marker(store)
    if begin not in lines:
        return None
    start = lines.index(begin) + 1
    if end not in lines[start:]:
        raise BrokenBlock
    stop = lines.index(end, start)
    return {m.group(2): m.group(1) for m in map(_CRON_JOB_RE.match, lines[start:stop]) if m}


def _times(data: dict) -> str:
    return json.dumps({key: data.get(key) for key in _LAUNCHD_TIMES}, sort_keys=True)


def installed_launchd(store: Store) -> dict[str, str] | None:
    """{job: its times} of the store's agents in ~/Library/LaunchAgents; None when there are none."""
    agents = jobs.launch_agents_dir()
    if not agents.is_dir():
        return None
    found: dict[str, str] = {}
    for path in sorted(agents.glob("*.plist")):
        name = jobs.rendered_job(path)
        if name is not None and jobs.agent_root(path) == str(store.root):
            found[name] = _times(_plist(path))
    return found or None


def _plist(path: Path) -> dict:
    try:
        return plistlib.loads(path.read_bytes())
    except (OSError, plistlib.InvalidFileException, ValueError):
        return {}


def problems(store: Store, scheduler: str = "auto") -> list[Problem]:
    """Installed jobs memctl.toml no longer declares, declared jobs not installed, and changed schedules,
    when the store's schedule is installed on this machine at all."""
    try:
        return _compared(store, jobs.choose_scheduler(scheduler) == "cron")
    except BadInput as exc:  # memctl.toml's jobs or [schedule] (a label prefix) do not load: named as jobs.problems does
        return [Problem("memctl.toml", 0, "job-config", exc.one_line())]
    except BrokenBlock:
        return [Problem("memctl.toml", 0, "job-crontab", f"the crontab has {jobs.begin_marker(store)!r} but not its end "
                        "marker: the store's jobs cannot be told from what follows (fix the crontab by hand: crontab -e)")]


def _compared(store: Store, cron: bool) -> list[Problem]:
    declared = {job.name: job for job in jobs.load_jobs(store)}
    found = installed_cron(store) if cron else installed_launchd(store)
    if found is None:
        return []  # the schedule is not installed here: nothing to compare
    where = "this machine's crontab" if cron else "~/Library/LaunchAgents"
    fix = "memctl schedule install"
    result = [Problem("memctl.toml", 0, "job-not-declared", f"job {name} is installed in {where} but memctl.toml no "
                      f"longer declares it: every run of it is refused ({fix} removes it)")
              for name in sorted(found.keys() - declared.keys())]
    result += [Problem("memctl.toml", 0, "job-not-installed", f"job {name} is declared in memctl.toml but not installed "
                       f"in {where}: it does not run ({fix})", "warning")
               for name in sorted(declared.keys() - found.keys())]
    for name in sorted(found.keys() & declared.keys()):
        job = declared[name]
        wanted = job.cron_schedule() if cron else _times(jobs.plist(store, job, _NO_ENV))
        if found[name] != wanted:
            now = f" at {found[name]}" if cron else ""
            result.append(Problem("memctl.toml", 0, "job-schedule-changed", f"job {name}: {where} runs it{now}, not as "
                                  f"memctl.toml says ({job.describe_schedule()}): {fix}", "warning"))
    return result
