"""memctl.jobs and memctl.runjob: job declarations, plists and crontab lines, run-job, status from the log, doctor."""

from __future__ import annotations

import contextlib
import os
import plistlib
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from memctl import episodes, jobs, procs, runjob
from memctl.errors import BadInput, NotFound, Refused
from memctl.fsutil import file_lock
from memctl.store import init_store, open_store

from conftest import drop_default_jobs

NOW = "2026-10-26T09:00:00+09:00"
ENV = jobs.Environment(memctl=("/opt/mem/bin/memctl",), path="/opt/mem/bin:/usr/bin:/bin", git="/usr/bin/git")


def configure(root: Path, text: str):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + text)
    return open_store(root)


def script(root: Path, name: str, body: str) -> str:
    path = root / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return name



@pytest.fixture
def root(tmp_path) -> Path:
    """A store without the jobs `init` declares: these tests declare their own."""
    path = tmp_path / "store"
    init_store(path)
    return drop_default_jobs(path)

# ---------------------------------------------------------------- declarations

def test_parse_calendar_job_defaults():
    job = jobs.parse_job("daily", {"command": "memctl state update", "hour": 9})
    assert job == jobs.Job(name="daily", command=("state", "update"), minute=(0,), hour=(9,), max_age=25 * 3600)
    assert job.cron_schedule() == "0 9 * * *"
    assert job.describe_schedule() == "0 9 * * *"


@pytest.mark.parametrize("table, cron, max_age", [
    ({"hour": 9, "minute": 30, "weekday": [1, 2, 3, 4, 5]}, "30 9 * * 1,2,3,4,5", (72 + 1) * 3600),  # Fri -> Mon
    ({"minute": 15}, "15 * * * *", 2 * 3600),
    ({"weekday": 7}, "0 * * * 7", 6 * 86400 + 3600 + 3600),  # every hour on Sundays: Sun 23:00 -> Sun 00:00
    ({"hour": [3, 15]}, "0 3,15 * * *", 13 * 3600),
    ({"interval": "5m"}, "*/5 * * * *", 10 * 60),
    ({"interval": "1h"}, "0 * * * *", 2 * 3600),
    ({"interval": "6h"}, "0 */6 * * *", 7 * 3600),
    ({"interval": "24h"}, "0 0 * * *", 25 * 3600),
    ({"interval": 600}, "*/10 * * * *", 20 * 60),
    ({"hour": 9, "max_age": "3d"}, "0 9 * * *", 3 * 86400),
])
def test_schedules(table, cron, max_age):
    job = jobs.parse_job("j", {"command": ["doctor"], **table})
    assert (job.cron_schedule(), job.max_age) == (cron, max_age)


@pytest.mark.parametrize("table, message", [
    ({"command": "doctor", "hour": 25}, "memctl.toml: [jobs.j] hour = 25 is out of range (0-23)"),
    ({"command": "doctor", "minute": 60}, "memctl.toml: [jobs.j] minute = 60 is out of range (0-59)"),
    ({"command": "doctor", "weekday": 8}, "memctl.toml: [jobs.j] weekday = 8 is out of range (0-7) (0 and 7 are Sunday)"),
    ({"command": "doctor", "hour": "9"}, "memctl.toml: [jobs.j] hour = '9' is not a whole number"),
    ({"command": "doctor", "hour": [9, 9]}, "memctl.toml: [jobs.j] hour lists a value twice"),
    ({"command": "doctor", "hour": []}, "memctl.toml: [jobs.j] hour = [] is empty"),
    ({"command": "doctor"}, "memctl.toml: [jobs.j] has no schedule"),
    ({"command": "doctor", "hour": 9, "interval": "1h"}, "memctl.toml: [jobs.j] has both interval and minute/hour/weekday"),
    ({"command": "doctor", "interval": "7m"}, "memctl.toml: [jobs.j] interval = '7m' has no crontab equivalent"),
    ({"command": "doctor", "interval": "5h"}, "memctl.toml: [jobs.j] interval = '5h' has no crontab equivalent"),
    ({"command": "doctor", "interval": "30s"}, "memctl.toml: [jobs.j] interval = '30s' has no crontab equivalent"),
    ({"command": "doctor", "interval": "soon"}, "memctl.toml: [jobs.j] interval: 'soon' is not a duration"),
    ({"hour": 9}, "memctl.toml: [jobs.j] needs exactly one of command (memctl arguments) or script (a file in the store)"),
    ({"command": "doctor", "script": "x.sh", "hour": 9}, "memctl.toml: [jobs.j] needs exactly one of command"),
    ({"command": "memctl", "hour": 9}, "memctl.toml: [jobs.j] command is empty"),
    ({"command": "doctor 'open", "hour": 9}, "memctl.toml: [jobs.j] command: No closing quotation"),
    ({"command": "doctor", "args": ["x"], "hour": 9}, "memctl.toml: [jobs.j] args go with script"),
    ({"command": "doctor", "hours": 9}, "memctl.toml: [jobs.j] has an unknown key 'hours'"),
    ({"command": "doctor", "hour": 9, "max_age": "forever"}, "memctl.toml: [jobs.j] max_age: 'forever' is not a duration"),
])
def test_bad_declarations_name_the_job_and_key(table, message):
    with pytest.raises(BadInput) as info:
        jobs.parse_job("j", table)
    assert info.value.message.startswith(message)


def test_bad_job_name():
    with pytest.raises(BadInput) as info:
        jobs.parse_job("a/b", {"command": "doctor", "hour": 1})
    assert info.value.message == "memctl.toml: invalid job name 'a/b'"


def test_get_job_ignores_other_jobs_typos(root):
    store = configure(root, '[jobs.good]\ncommand = "doctor"\nhour = 1\n[jobs.bad]\ncommand = "doctor"\nhour = 25\n')
    assert jobs.get_job(store, "good").hour == (1,)
    with pytest.raises(BadInput):
        jobs.load_jobs(store)
    with pytest.raises(NotFound) as info:
        jobs.get_job(store, "missing")
    assert info.value.message == "no job named 'missing' in memctl.toml (good, bad)"


def test_label_prefix(root, store):
    assert jobs.label_prefix(store) == "io.memctl.store"
    store = configure(root, '[schedule]\nlabel_prefix = "com.example.mem"\n')
    assert jobs.label_prefix(store) == "com.example.mem"
    store = configure(root, '[schedule.x]\n')
    with pytest.raises(BadInput):
        jobs.label_prefix(store)


@pytest.mark.parametrize("names", [("記憶", "メモ"), ("メモ-2026", "日記-2026"), ("mémoire", "memoire")])
def test_stores_named_in_other_letters_get_labels_of_their_own(tmp_path, names):
    """Every store named only in Japanese was `io.memctl.store` (and `メモ-2026`, `日記-2026` both
    `io.memctl.2026`): the second one's `schedule install` was refused as another store's plist."""
    from memctl import api

    labels = [jobs.label_prefix(api.init_store(tmp_path / name)) for name in names]
    assert len(set(labels)) == 2 and all(jobs.LABEL_RE.match(label) for label in labels), labels
    assert jobs.label_prefix(api.init_store(tmp_path / "again" / names[0])) == labels[0]  # the name decides, as for ASCII


# ---------------------------------------------------------------- rendering

def test_plist_calendar(root, store):
    job = jobs.parse_job("morning", {"script": "scripts/x.sh", "hour": 9, "minute": 5})
    data = plistlib.loads(jobs.plist_bytes(store, job, ENV))
    assert data == {
        "Label": "io.memctl.store.morning",
        "ProgramArguments": ["/bin/sh", "-c", f"cd {root} && test ! -L logs && mkdir -p logs && test ! -L logs/morning.stdout.log "
                             "&& test ! -L logs/morning.stderr.log && exec /opt/mem/bin/memctl --root "
                             f"{root} run-job --quiet morning >>logs/morning.stdout.log 2>>logs/morning.stderr.log"],
        "WorkingDirectory": str(root),
        "EnvironmentVariables": {"PATH": "/opt/mem/bin:/usr/bin:/bin", "MEMCTL_ROOT": str(root), "PYTHONUTF8": "1"},
        "RunAtLoad": False,
        "ProcessType": "Background",
        "StartCalendarInterval": {"Minute": 5, "Hour": 9},
    }


def test_a_plist_an_older_memctl_wrote_is_still_recognised_as_render_s_own(root, store, tmp_path):
    """Older versions ran memctl directly, with StandardOutPath in logs/: render and uninstall must still
    know such a plist as theirs (to replace or remove it), and no other."""
    job = jobs.parse_job("morning", {"script": "scripts/x.sh", "hour": 9})
    new = tmp_path / "new.plist"
    new.write_bytes(jobs.plist_bytes(store, job, ENV))
    old = tmp_path / "old.plist"
    old.write_bytes(plistlib.dumps({"Label": "io.memctl.store.morning", "ProgramArguments": [
        "/opt/mem/bin/memctl", "--root", str(root), "run-job", "--quiet", "morning"]}))
    other = tmp_path / "other.plist"
    other.write_bytes(plistlib.dumps({"Label": "io.memctl.store.morning", "ProgramArguments": ["/bin/sh", "-c", "echo hi"]}))
    assert [jobs.rendered_job(p) for p in (new, old, other)] == ["morning", "morning", None]


def test_plist_lists_and_interval(store):
    many = jobs.parse_job("m", {"command": "doctor", "hour": [9, 18], "weekday": [1, 5]})
    assert jobs.plist(store, many, ENV)["StartCalendarInterval"] == [
        {"Minute": 0, "Hour": 9, "Weekday": 1}, {"Minute": 0, "Hour": 18, "Weekday": 1},
        {"Minute": 0, "Hour": 9, "Weekday": 5}, {"Minute": 0, "Hour": 18, "Weekday": 5},
    ]
    hourly = jobs.parse_job("h", {"command": "doctor", "minute": 7})
    assert jobs.plist(store, hourly, ENV)["StartCalendarInterval"] == {"Minute": 7}
    every = jobs.parse_job("e", {"command": "doctor", "interval": "15m"})
    data = jobs.plist(store, every, ENV)
    assert data["StartInterval"] == 900 and "StartCalendarInterval" not in data


def test_resolved_path_holds_git_and_memctl():
    env = jobs.resolve_environment()
    dirs = env.path.split(":")
    assert str(Path(env.memctl[0]).parent) in dirs
    assert env.git is not None and str(Path(env.git).parent) in dirs
    assert "/usr/bin" in dirs and "/bin" in dirs


def test_crontab_block_and_merge(root, store):
    store = configure(root, '[jobs.morning]\ndescription = "state"\nscript = "scripts/x.sh"\nhour = 9\n'
                            '[jobs.often]\ncommand = "doctor"\ninterval = "30m"\n')
    block = jobs.crontab_block(store, jobs.load_jobs(store), ENV)
    r = str(root)
    assert block == (
        f"# memctl:begin root={r}\n"
        "# generated by memctl from memctl.toml: edit [jobs.*] there, then `memctl schedule install`\n"
        "# morning: state\n"
        f"0 9 * * * cd {r} && test ! -L logs && mkdir -p logs && test ! -L logs/morning.stdout.log && test ! -L logs/morning.stderr.log "
        f"&& PATH=/opt/mem/bin:/usr/bin:/bin MEMCTL_ROOT={r} PYTHONUTF8=1 /opt/mem/bin/memctl --root {r} run-job --quiet morning >>logs/morning.stdout.log 2>>logs/morning.stderr.log\n"
        "# often\n"
        f"*/30 * * * * cd {r} && test ! -L logs && mkdir -p logs && test ! -L logs/often.stdout.log && test ! -L logs/often.stderr.log "
        f"&& PATH=/opt/mem/bin:/usr/bin:/bin MEMCTL_ROOT={r} PYTHONUTF8=1 /opt/mem/bin/memctl --root {r} run-job --quiet often >>logs/often.stdout.log 2>>logs/often.stderr.log\n"
        f"# memctl:end root={r}\n"
    )
    foreign = "MAILTO=me@example.com\n# my backups\n0 1 * * * /usr/local/bin/backup\n"
    merged = jobs.merge_crontab(foreign, block, store)
    assert merged == foreign + block
    assert jobs.merge_crontab(merged, block, store) == merged  # idempotent
    later = merged + "5 5 * * * echo after\n"
    smaller = jobs.crontab_block(store, jobs.load_jobs(store)[:1], ENV)
    assert jobs.merge_crontab(later, smaller, store) == foreign + smaller + "5 5 * * * echo after\n"
    assert jobs.merge_crontab(later, "", store) == foreign + "5 5 * * * echo after\n"
    with pytest.raises(Refused):
        jobs.merge_crontab(foreign + jobs.begin_marker(store) + "\n", block, store)


def test_cron_quotes_odd_paths(tmp_path):
    from memctl.store import init_store

    odd = tmp_path / "my store 100%"
    init_store(odd)
    store = configure(drop_default_jobs(odd), '[jobs.j]\ncommand = "doctor"\nhour = 1\n')
    line = jobs.crontab_block(store, jobs.load_jobs(store), ENV).splitlines()[3]
    assert line.startswith(f"0 1 * * * cd '{tmp_path}/my store 100\\%' && ")


# ---------------------------------------------------------------- run-job

def test_run_job_failure_logs_and_records_an_error_episode(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    name = script(root, "fail.sh", "echo going\necho oops >&2\nexit 3\n")
    store = configure(root, f'[jobs.broken]\nscript = "{name}"\nhour = 9\n')
    seen = []
    result = runjob.run_job(store, "broken", echo=seen.append)
    assert (result.exit_code, result.tail, seen) == (3, ("going", "oops"), ["going", "oops"])
    [episode] = episodes.list_episodes(store, episode_type="error")
    assert result.episode == episode.id
    assert episode.description == "job broken failed with exit 3"
    assert episode.agent == "job:broken" and episode.tags == ("job", "broken")
    assert episode.outcome.startswith("exit 3 after ") and episode.outcome.endswith("s; last lines of logs/broken.log:\ngoing\noops")
    log = (root / "logs" / "broken.log").read_text(encoding="utf-8").splitlines()
    assert log[0] == f"{NOW} broken start pid={os.getpid()} cmd={root}/fail.sh"
    assert log[1:3] == [f"{NOW} broken | going", f"{NOW} broken | oops"]
    assert log[3].startswith(f"{NOW} broken end exit=3 seconds=")
    assert log[4] == f"{NOW} broken episode {episode.id}"
    assert len(log) == 5


def test_run_job_success_runs_memctl_in_the_store(root, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    monkeypatch.chdir(tmp_path)  # not the store: the job must find it anyway
    store = configure(root, '[jobs.state]\ncommand = "memctl state update --no-commit"\nhour = 9\n')
    result = runjob.run_job(store, "state")
    assert (result.exit_code, result.episode, result.tail) == (0, None, ("state/STATE.md", "memctl: written, not committed"))
    assert (root / "state" / "STATE.md").read_text(encoding="utf-8").startswith(f"---\nupdated: {NOW}\n")
    assert episodes.list_episodes(store) == []


def test_run_job_script_that_cannot_start(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    (root / "noexec.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    store = configure(root, '[jobs.a]\nscript = "missing.sh"\nhour = 9\n[jobs.b]\nscript = "noexec.sh"\nhour = 9\n')
    assert runjob.run_job(store, "a").exit_code == 127
    assert runjob.run_job(store, "b").exit_code == 126
    assert f"{NOW} a | cannot start {root}/missing.sh: No such file or directory" in (root / "logs" / "a.log").read_text()


def test_second_copy_exits_at_once(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    store = configure(root, '[jobs.slow]\ncommand = "doctor"\nhour = 9\n')
    lock = root / ".memctl" / "jobs" / "slow.lock"
    with file_lock(lock, timeout=0):
        lock.write_text("4242\n")
        with pytest.raises(jobs.JobRunning) as info:
            runjob.run_job(store, "slow")
    assert info.value.exit_code == 4
    assert info.value.message == "job slow is already running (pid 4242); this copy did not start it"
    assert (root / "logs" / "slow.log").read_text() == f"{NOW} slow skip: already running (pid 4242)\n"


# ---------------------------------------------------------------- status and doctor

LOG = """\
2026-10-20T09:00:00+09:00 daily start pid=1 cmd=x
2026-10-20T09:00:01+09:00 daily | fine
2026-10-20T09:00:02+09:00 daily end exit=0 seconds=2.00
2026-10-21T09:00:00+09:00 daily start pid=2 cmd=x
2026-10-21T09:00:01+09:00 daily | end exit=0 (a line of output, not an event)
2026-10-21T09:00:02+09:00 daily end exit=3 seconds=2.00
2026-10-21T09:00:02+09:00 daily episode ep-1
"""


def test_status_reads_the_log(root, monkeypatch):
    store = configure(root, '[jobs.daily]\ncommand = "doctor"\nhour = 9\n')
    (root / "logs").mkdir()
    (root / "logs" / "daily.log").write_text(LOG)
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-21T10:00:00+09:00")
    st = jobs.status(store, jobs.get_job(store, "daily"), tail=2)
    assert (st.last_run, st.last_exit, st.last_success, st.state) == (
        "2026-10-21T09:00:00+09:00", 3, "2026-10-20T09:00:02+09:00", "failing")
    assert st.tail == ("2026-10-21T09:00:02+09:00 daily end exit=3 seconds=2.00", "2026-10-21T09:00:02+09:00 daily episode ep-1")
    [problem] = jobs.problems(store)
    assert (problem.path, problem.code, problem.severity) == ("logs/daily.log", "job-failing", "warning")
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-22T10:00:02+09:00")
    [problem] = jobs.problems(store)
    assert (problem.code, problem.severity) == ("job-stale", "error")
    assert problem.message == ("job daily: last success 2026-10-20T09:00:02+09:00, 49h ago; "
                               "its schedule (0 9 * * *) allows 25h (last exit 3)")



def test_status_of_a_run_whose_run_job_was_killed_is_failing(root, monkeypatch):
    """A run with a `start` line and no `end` (run-job killed with SIGKILL) once showed the exit of the run before."""
    store = configure(root, '[jobs.daily]\ncommand = "doctor"\nhour = 9\n')
    (root / "logs").mkdir()
    ok = LOG.replace("exit=3", "exit=0")
    (root / "logs" / "daily.log").write_text(ok)
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-21T10:00:00+09:00")
    assert jobs.status(store, jobs.get_job(store, "daily")).state == "ok"
    (root / "logs" / "daily.log").write_text(ok + "2026-10-21T09:30:00+09:00 daily start pid=1 cmd=x\n")
    st = jobs.status(store, jobs.get_job(store, "daily"))
    assert (st.last_run, st.last_exit, st.state) == ("2026-10-21T09:30:00+09:00", None, "failing")  # not the run before's 0
    assert st.to_dict()["last_exit"] is None and st.last_success is not None
    [problem] = jobs.problems(store)  # (doctor said nothing: the exit shown was the run before's 0)
    assert (problem.code, problem.severity) == ("job-failing", "warning")
    assert problem.message == "job daily: last run failed (the run started at 2026-10-21T09:30:00+09:00 did not end: run-job was killed)"


def test_a_run_killed_in_the_second_the_run_before_ended_is_failing(root, monkeypatch):
    """helper-53: the timestamps have whole seconds; a run started (and killed) in the second the run before
    ended compared its start with that end as "not before" and showed `ok`. The order of the lines says it."""
    store = configure(root, '[jobs.daily]\ncommand = "doctor"\nhour = 9\n')
    (root / "logs").mkdir()
    (root / "logs" / "daily.log").write_text(LOG.replace("exit=3", "exit=0") + "2026-10-21T09:00:02+09:00 daily start pid=3 cmd=x\n")
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-21T10:00:00+09:00")
    st = jobs.status(store, jobs.get_job(store, "daily"))
    assert (st.last_run, st.last_exit, st.state) == ("2026-10-21T09:00:02+09:00", None, "failing")


def test_status_reads_a_long_log_backwards(root):
    store = configure(root, '[jobs.daily]\ncommand = "doctor"\nhour = 9\n')
    (root / "logs").mkdir()
    filler = "".join(f"2026-10-21T09:00:01+09:00 daily | line {i}\n" for i in range(20000))
    (root / "logs" / "daily.log").write_text(LOG + filler)
    st = jobs.status(store, jobs.get_job(store, "daily"), tail=1)
    assert (st.last_exit, st.last_success, st.tail) == (3, "2026-10-20T09:00:02+09:00", ("2026-10-21T09:00:01+09:00 daily | line 19999",))


def test_problems_never_run_and_never_succeeded(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    name = script(root, "fail.sh", "exit 2\n")
    store = configure(root, f'[jobs.idle]\ncommand = "doctor"\nhour = 9\n[jobs.bad]\nscript = "{name}"\nhour = 9\n')
    runjob.run_job(store, "bad")
    found = {p.code: p for p in jobs.problems(store)}
    assert found["job-never-run"].severity == "warning"
    assert found["job-never-run"].message == "job idle has never run on this machine (memctl schedule install, or memctl run-job idle)"
    assert found["job-never-succeeded"].message == f"job bad has never succeeded (last exit 2 at {NOW})"


def test_problems_report_bad_config(root):
    store = configure(root, '[jobs.x]\ncommand = "doctor"\nhour = 25\n')
    [problem] = jobs.problems(store)
    assert (problem.path, problem.code, problem.message) == (
        "memctl.toml", "job-config", "memctl.toml: [jobs.x] hour = 25 is out of range (0-23)")


# ---------------------------------------------------------------- install plans

def fake_tool(bindir: Path, name: str, body: str) -> None:
    bindir.mkdir(exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_launchd_plan_with_a_fake_launchctl(root, tmp_path, monkeypatch):
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    fake_tool(bindir, "launchctl", f'echo "$@" >> {calls}\n[ "$1" = print ] && exit 113\nexit 0\n')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    store = configure(root, '[jobs.morning]\ncommand = "doctor"\nhour = 9\n')
    plan = jobs.plan_install(store, scheduler="launchd", env=ENV)
    agents = Path(os.environ["HOME"]) / "Library" / "LaunchAgents"
    dest = agents / "io.memctl.store.morning.plist"
    domain = f"gui/{os.getuid()}"
    assert [s.describe() for s in plan.steps] == [
        f"write {dest}",
        f"{bindir}/launchctl bootout {domain}/io.memctl.store.morning",
        f"{bindir}/launchctl bootstrap {domain} {dest}",
    ]
    jobs.apply(store, plan)
    assert plistlib.loads(dest.read_bytes())["Label"] == "io.memctl.store.morning"
    assert (root / "logs").is_dir()
    # A plist of a job no longer declared is booted out and removed.
    store = open_store(root)
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text().replace("[jobs.morning]", "[jobs.evening]"))
    store = open_store(root)
    plan = jobs.plan_install(store, scheduler="launchd", env=ENV)
    assert plan.steps[-2:] == (
        jobs.Step("run", f"{domain}/io.memctl.store.morning", argv=(f"{bindir}/launchctl", "bootout", f"{domain}/io.memctl.store.morning"), check=False),
        jobs.Step("remove", str(dest)),
    )
    # Another store's agent with the same label is not taken over.
    other = dict(plistlib.loads(dest.read_bytes()), WorkingDirectory="/elsewhere")
    (agents / "io.memctl.store.evening.plist").write_bytes(plistlib.dumps(other))
    with pytest.raises(Refused) as info:
        jobs.plan_install(store, scheduler="launchd", env=ENV)
    assert info.value.message == f"{agents}/io.memctl.store.evening.plist belongs to the store at /elsewhere"


def test_unknown_scheduler(store):
    with pytest.raises(BadInput):
        jobs.plan_install(store, scheduler="systemd")


# ---------------------------------------------------------------- run-job stopped

STOPPABLE = """echo $$ > job.pid
trap 'echo > got-term; echo "got TERM"; n=0; while [ ! -e release ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; echo done > cleaned; exit 143' TERM
echo started
while :; do sleep 0.1; done
"""


def _run_job(root: Path, name: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    return subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "--quiet", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@pytest.fixture
def job_killed_after(root):
    """A test that fails midway must not leave its looping job behind."""
    yield
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((root / "job.pid").read_text()), signal.SIGKILL)


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_stopped_run_job_stops_its_job_and_holds_the_lock_until_the_job_has_ended(root, job_killed_after):
    """SIGTERM to run-job (launchd stopping it) once left the script running as an orphan, released the job's lock
    (a second copy then ran beside it), and logged no `end` line, so `status` showed the run before. Now the stop
    goes on to the job, run-job holds the lock until the job has ended, and the run ends as a failure."""
    configure(root, f'[jobs.slow]\nscript = "{script(root, "slow.sh", STOPPABLE)}"\nhour = 9\n')
    first = _run_job(root, "slow")
    _wait_for(root / "job.pid")
    while "| started" not in (root / "logs" / "slow.log").read_text(encoding="utf-8"):
        time.sleep(0.05)
    first.send_signal(signal.SIGTERM)
    while "| got TERM" not in (root / "logs" / "slow.log").read_text(encoding="utf-8"):
        assert first.poll() is None, first.communicate()
        time.sleep(0.05)
    second = _run_job(root, "slow")  # the job is still cleaning up: its lock is held
    out, err = second.communicate(timeout=120)
    assert second.returncode == 4 and b"already running" in err, err
    (root / "release").write_text("", encoding="utf-8")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    assert (root / "cleaned").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int((root / "job.pid").read_text()), 0)
    log = [line.split(" ", 2)[2] for line in (root / "logs" / "slow.log").read_text(encoding="utf-8").splitlines()]
    assert "stop: run-job got SIGTERM; sent it to the job" in log
    assert [line for line in log if line.startswith("end ")][-1].startswith("end exit=143 ")
    assert log[-1].startswith("episode ep-")
    [status] = jobs.statuses(open_store(root), "slow")
    assert (status.last_exit, status.state, status.running) == (143, "failing", False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_job_gets_sigterm_when_run_job_itself_is_killed(root, job_killed_after):
    """SIGKILL cannot be forwarded: the kernel sends the job SIGTERM when run-job dies, so no job outlives its lock."""
    configure(root, f'[jobs.slow]\nscript = "{script(root, "slow.sh", STOPPABLE)}"\nhour = 9\n')
    (root / "release").write_text("", encoding="utf-8")
    first = _run_job(root, "slow")
    _wait_for(root / "job.pid")
    first.kill()
    first.communicate(timeout=60)
    _wait_for(root / "got-term")  # (its next line, an echo into the dead run-job's pipe, ends it: SIGPIPE)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
def test_what_a_killed_run_left_running_is_ended_by_the_next_run(root):
    """run-job killed with SIGKILL: the job's shell got SIGTERM, but the command it was running (a
    grandchild) lived on without the lock, so a second run started beside it. The next run ends what
    the killed one left (its processes alone: another process of the same script is not touched)."""
    configure(root, f'[jobs.slow]\nscript = "{script(root, "slow.sh", "sleep 300 & echo $! > child.pid; wait")}"\nhour = 9\n')
    bystander = subprocess.Popen(["sleep", "300"])  # not of the run: it must live on
    children = []
    try:
        first = _run_job(root, "slow")
        _wait_for(root / "child.pid")
        time.sleep(0.2)
        children.append(int((root / "child.pid").read_text()))
        first.kill()
        first.communicate(timeout=60)
        time.sleep(0.5)
        assert procs.alive(children[0])  # the grandchild outlived run-job (and its lock)
        (root / "child.pid").unlink()
        second = _run_job(root, "slow")
        _wait_for(root / "child.pid")
        children.append(int((root / "child.pid").read_text()))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and procs.alive(children[0]):
            time.sleep(0.05)
        assert not procs.alive(children[0]), "what the killed run left still runs beside the new run"
        assert bystander.poll() is None and procs.alive(children[1])
        second.kill()
        second.communicate(timeout=60)
        log = (root / "logs" / "slow.log").read_text(encoding="utf-8")
        assert f"ended what it left running (pid {children[0]})" in log, log
    finally:
        bystander.kill()
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_job_that_cannot_be_read_says_so_in_its_log(root):
    """A broken memctl.toml, or a wrong job table, once left no line in logs/NAME.log: only cron's stderr file."""
    configure(root, '[jobs.daily]\ncommand = "list"\nhour = 9\n')
    toml = (root / "memctl.toml").read_text(encoding="utf-8")
    assert _run_job(root, "daily").wait(timeout=120) == 0  # it has run here: it has a log
    for text, code, reason in ((toml + "x = [1\n", 2, "invalid TOML"),
                               (toml.replace("hour = 9", "hour = 25"), 2, "[jobs.daily] hour = 25 is out of range (0-23)")):
        (root / "memctl.toml").write_text(text, encoding="utf-8")
        done = _run_job(root, "daily")
        _out, err = done.communicate(timeout=120)
        assert done.returncode == code and reason.encode() in err, err
        last = (root / "logs" / "daily.log").read_text(encoding="utf-8").splitlines()[-1]
        assert " daily refused: " in last and reason in last and last.endswith("; the job was not run"), last
    (root / "memctl.toml").write_text(toml, encoding="utf-8")
    done = _run_job(root, "daily")
    _out, err = done.communicate(timeout=120)
    assert (done.returncode, err) == (0, b"")  # --quiet: a success writes nothing to cron's stderr file
    assert (root / "logs" / "daily.log").read_text(encoding="utf-8").splitlines()[-1].split(" ")[2] == "end"
    for gone in ("nightly", "../x"):  # bad input: no log is created
        assert _run_job(root, gone).wait(timeout=120) in (2, 3)
    assert sorted(p.name for p in (root / "logs").iterdir()) == ["daily.log"]


# ---------------------------------------------------------------- jobs of one store take turns

HELD = """echo "$1 start" >> order.txt
echo started
n=0; while [ ! -e release ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done
echo "$1 end" >> order.txt
"""


def _run_pinned(root: Path, name: str, **extra: str) -> subprocess.Popen:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}, "MEMCTL_NOW": NOW, **extra}
    return subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "--quiet", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _log_events(root: Path, name: str) -> list[str]:
    path = root / "logs" / f"{name}.log"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [line.split(" ", 2)[2] for line in text.splitlines() if " | " not in line]


def _until_logged(root: Path, name: str, wanted: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not any(event.startswith(wanted) for event in _log_events(root, name)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, _log_events(root, name)
        time.sleep(0.05)


@contextlib.contextmanager
def first_running(root: Path, **names: str) -> Iterator[subprocess.Popen]:
    """Jobs `first` and `second` (and `names`: name -> first arg) of the HELD script declared, `first`
    started and running until the block ends (then released, and waited for)."""
    held = script(root, "held.sh", HELD)
    declared = {"first": "first", "second": "second", **names}
    configure(root, "".join(f'[jobs.{name}]\nscript = "{held}"\nargs = ["{arg}"]\nhour = 9\n' for name, arg in declared.items()))
    first = _run_pinned(root, "first")
    try:
        _until_logged(root, "first", "start ", first)
        yield first
    finally:
        (root / "release").write_text("")
        first.wait(timeout=120)


def test_jobs_of_one_store_started_together_run_one_after_the_other(root, monkeypatch):
    """Cron starts every job due in a minute at once; a doctor beside a state update found STATE.md
    written and not yet committed. The second job waits for the first, says so in its log, then runs."""
    with first_running(root) as first:
        second = _run_pinned(root, "second")
        _until_logged(root, "second", "wait: ", second)
        assert _log_events(root, "second") == [f"wait: job first (pid {first.pid}) is running; this run starts after it"]
        assert (root / "order.txt").read_text() == "first start\n"
        monkeypatch.setenv("MEMCTL_NOW", NOW)
        assert [(s.job.name, s.state, s.running) for s in jobs.statuses(open_store(root))] == [
            ("first", "running", True), ("second", "waiting", True)]
    assert first.returncode == 0
    assert second.wait(timeout=120) == 0, second.communicate()
    assert (root / "order.txt").read_text() == "first start\nfirst end\nsecond start\nsecond end\n"
    assert [event.split(" ")[0] for event in _log_events(root, "second")] == ["wait:", "start", "end"]
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    [status] = jobs.statuses(open_store(root), "second")
    assert (status.last_exit, status.state) == (0, "ok")


def test_a_job_that_waits_too_long_for_its_turn_does_not_start(root):
    with first_running(root) as first:
        second = _run_pinned(root, "second", MEMCTL_JOB_WAIT="0.5")
        out, err = second.communicate(timeout=120)
        assert (second.returncode, out) == (4, b"")
        assert err.decode() == (f"memctl: error: job first (pid {first.pid}) of this store still runs after 0.5 s; "
                                "job second was not started (hint: memctl schedule status)\n")
        assert [event.split(":")[0] for event in _log_events(root, "second")] == ["wait", "skip"]
        bad = _run_pinned(root, "second", MEMCTL_JOB_WAIT="soon")
        out, err = bad.communicate(timeout=120)
        assert (bad.returncode, err.decode()) == (2, "memctl: error: MEMCTL_JOB_WAIT='soon' is not a number of seconds "
                                                     "(hint: e.g. MEMCTL_JOB_WAIT=3600 (0 or more))\n")
        assert _log_events(root, "second")[-1].startswith("refused: MEMCTL_JOB_WAIT='soon' is not a number of seconds")
    assert (root / "order.txt").read_text() == "first start\nfirst end\n"


def test_a_job_may_run_another_job_within_its_turn(root):
    """A job whose script runs `memctl run-job` for another job of the store: no wait for itself."""
    inner = script(root, "inner.sh", 'echo "inner ran" >> order.txt\n')
    outer = script(root, "outer.sh", f'"{sys.executable}" -m memctl run-job --quiet inner\n')
    configure(root, f'[jobs.inner]\nscript = "{inner}"\nhour = 9\n[jobs.outer]\nscript = "{outer}"\nhour = 9\n')
    run = _run_pinned(root, "outer", MEMCTL_JOB_WAIT="5")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert (root / "order.txt").read_text() == "inner ran\n"
    assert [event.split(" ")[0] for event in _log_events(root, "inner")] == ["start", "end"]


def test_what_a_killed_job_left_running_is_ended_before_another_job_takes_the_turn(root):
    """A review: run-job of job `a` killed with SIGKILL left its grandchild running, and job `b`, whose
    turn came at once, ran beside it (only a's next run ended it). The turn's next holder ends it first."""
    configure(root, f'[jobs.a]\nscript = "{script(root, "a.sh", "sleep 300 & echo $! > child.pid; wait")}"\nhour = 9\n'
                    f'[jobs.b]\nscript = "{script(root, "b.sh", "echo b ran")}"\nhour = 9\n')
    left = None
    try:
        first = _run_pinned(root, "a")
        _wait_for(root / "child.pid")
        time.sleep(0.2)
        left = int((root / "child.pid").read_text())
        first.kill()
        first.communicate(timeout=60)
        time.sleep(0.5)
        assert procs.alive(left)
        second = _run_pinned(root, "b")
        assert second.wait(timeout=120) == 0, second.communicate()
        assert not procs.alive(left), "what job a's killed run left ran beside job b"
        assert [e.split(" ")[0] for e in _log_events(root, "b")] == ["stop:", "start", "end"]
        assert _log_events(root, "b")[0].startswith(f"stop: job a's last run-job was killed (SIGKILL) while its job ran; "
                                                    f"ended what it left running (pid {left})")
        assert not (root / ".memctl" / "jobs" / "a.run").exists()
    finally:
        if left:
            with contextlib.suppress(OSError):
                os.kill(left, signal.SIGKILL)


def test_a_run_job_of_another_store_inside_a_job_waits_for_that_stores_turn(tmp_path, root):
    """A review: the exemption for a run-job inside a job held for any store: a job of store one that ran
    `memctl --root two run-job y` started y at once beside two's running job."""
    init_store(tmp_path / "two")
    two = drop_default_jobs(tmp_path / "two")
    held = script(two, "held.sh", HELD)
    configure(two, f'[jobs.x]\nscript = "{held}"\nargs = ["x"]\nhour = 9\n[jobs.y]\nscript = "{held}"\nargs = ["y"]\nhour = 9\n')
    outer = script(root, "outer.sh", f'"{sys.executable}" -m memctl --root "{two}" run-job --quiet y\n')
    configure(root, f'[jobs.outer]\nscript = "{outer}"\nhour = 9\n')
    x = _run_pinned(two, "x")
    try:
        _until_logged(two, "x", "start ", x)
        run = _run_pinned(root, "outer", MEMCTL_JOB_WAIT="0.5")
        out, err = run.communicate(timeout=120)
        assert run.returncode == 4, err  # y waited for x, in vain, and was not started
        assert [e.split(":")[0] for e in _log_events(two, "y")] == ["wait", "skip"]
    finally:
        (two / "release").write_text("")
        x.wait(timeout=120)
    assert (two / "order.txt").read_text() == "x start\nx end\n"


def test_a_stop_while_waiting_for_the_turn_is_in_the_log_and_a_second_copy_says_it_waits(root):
    with first_running(root):
        second = _run_pinned(root, "second")
        _until_logged(root, "second", "wait: ", second)
        copy = _run_pinned(root, "second")
        out, err = copy.communicate(timeout=120)
        assert (copy.returncode, err.decode()) == (4, f"memctl: error: job second is already waiting for its turn "
                                                      f"(pid {second.pid}); this copy did not start it (hint: memctl schedule status)\n")
        second.send_signal(signal.SIGTERM)
        out, err = second.communicate(timeout=120)
        assert (second.returncode, err.decode()) == (143, "memctl: error: terminated\n")
        assert _log_events(root, "second")[-1] == "stop: run-job got SIGTERM while it waited for its turn; the job was not run"
    assert (root / "order.txt").read_text() == "first start\nfirst end\n"


def test_a_waiting_run_job_says_so_on_a_terminal_and_a_broken_turn_lock_is_in_the_log(root):
    with first_running(root) as first:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}, "MEMCTL_NOW": NOW, "MEMCTL_JOB_WAIT": "0.2"}
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "second"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 4
        assert done.stderr.splitlines()[0] == (f"memctl: job second waits for job first (pid {first.pid}) to end "
                                               "(at most 0.2 s, MEMCTL_JOB_WAIT)")
    turn = root / ".memctl" / "jobs" / ".turn.lock"
    turn.unlink()
    turn.mkdir()
    done = _run_pinned(root, "second")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 1 and b"is not a regular file" in err, err
    assert _log_events(root, "second")[-1].startswith("refused: the lock file ")
    [status] = jobs.statuses(open_store(root), "second")
    assert status.state == "refused"


def test_a_job_started_while_another_ends_its_leftovers_waits_for_that_and_runs(root):
    """A review: the next holder of the turn takes the lock of a job whose killed run left processes while
    it ends them (2 s when they ignore SIGTERM); that job, started by cron meanwhile, was told it was
    `already running` under the other run-job's pid, and skipped. It waits for the ending now, and runs."""
    orphan = script(root, "orphan.sh", '[ -e again ] && exit 0\n( trap "" TERM; sleep 300 ) & echo $! > child.pid; wait\n')
    configure(root, f'[jobs.orphan]\nscript = "{orphan}"\nhour = 9\n[jobs.quick]\nscript = "{script(root, "q.sh", "echo q")}"\nhour = 9\n')
    left = None
    try:
        first = _run_pinned(root, "orphan")
        _wait_for(root / "child.pid")
        time.sleep(0.3)
        left = runjob._processes_of((root / ".memctl" / "jobs" / "orphan.run").read_text().strip())
        first.kill()
        first.communicate(timeout=60)
        (root / "again").write_text("")
        quick = _run_pinned(root, "quick")
        deadline = time.monotonic() + 30
        while _holder_text(root, "orphan") is None or not _holder_text(root, "orphan").endswith(jobs.ENDING):
            assert time.monotonic() < deadline and quick.poll() is None, _holder_text(root, "orphan")
            time.sleep(0.02)
        again = _run_pinned(root, "orphan")
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        assert quick.wait(timeout=120) == 0
        assert [e.split(" ")[0] for e in _log_events(root, "orphan")][-2:] == ["start", "end"]
        assert not any(procs.alive(pid) for pid in left)
    finally:
        for pid in left or ():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _holder_text(root: Path, name: str) -> str | None:
    try:
        return (root / ".memctl" / "jobs" / f"{name}.lock").read_text().strip()
    except OSError:
        return None


def test_a_run_job_a_finished_job_left_in_the_background_waits_for_the_next_holder(root):
    """A review: MEMCTL_JOB_TURN let any run-job started from a job's environment skip the wait, also one a
    job left running in the background that starts once the job has ended, beside the next job."""
    late = script(root, "late.sh", '( n=0; while [ ! -e go ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; '
                                    f'"{sys.executable}" -m memctl run-job --quiet second ) >/dev/null 2>&1 &\n')
    configure(root, f'[jobs.late]\nscript = "{late}"\nhour = 9\n')
    assert _run_pinned(root, "late").wait(timeout=120) == 0
    with first_running(root) as first:
        (root / "go").write_text("")  # the run-job `late` left behind starts now, while `first` holds the turn
        _wait_for(root / "logs" / "second.log", 30)
        deadline = time.monotonic() + 30
        while not _log_events(root, "second"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _log_events(root, "second")[0] == f"wait: job first (pid {first.pid}) is running; this run starts after it"
    deadline = time.monotonic() + 60
    while [e.split(" ")[0] for e in _log_events(root, "second")][-1:] != ["end"]:
        assert time.monotonic() < deadline, _log_events(root, "second")
        time.sleep(0.05)
    assert (root / "order.txt").read_text() == "first start\nfirst end\nsecond start\nsecond end\n"
