"""`memctl schedule render|install|uninstall|status` and `memctl run-job`: the issue-4 job scenarios."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from memctl import jobs
from memctl.store import open_store

from conftest import REPO, cli, git, memctl

NOW = "2026-10-26T09:00:00+09:00"
JOBS = """
[jobs.state-update]
description = "Regenerate STATE.md"
command = "state update"
hour = 9

[jobs.check]
script = "check.sh"
weekday = [1, 5]
hour = 18
minute = 30
"""
SCRIPTS = ("auto-state-update.sh", "near-dup-check.sh", "daily-maintenance.sh")


def configure(root: Path, text: str) -> None:
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + text)


def executable(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def fake_crontab(tmp_path, monkeypatch):
    """A `crontab` first on PATH that keeps the table in a file; the real one is never touched."""
    table = tmp_path / "crontab.txt"
    executable(tmp_path / "fakebin" / "crontab", f"""\
case "$1" in
  -l) if [ -f {table} ]; then cat {table}; else echo "no crontab for $(id -un)" >&2; exit 1; fi ;;
  -) cat > {table} ;;
  *) echo "fake crontab: unexpected $*" >&2; exit 2 ;;
esac
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:{os.environ['PATH']}")
    return table


# ---------------------------------------------------------------- render

def test_render_writes_plists_commits_and_prints_crontab(root):
    configure(root, JOBS)
    r = cli(root, "schedule", "render")
    store = open_store(root)
    block = jobs.crontab_block(store, jobs.load_jobs(store), jobs.resolve_environment())
    assert (r.exit_code, r.stdout, r.stderr) == (0, block, "memctl: launchd/: 2 plists (2 written, 0 unchanged, 0 removed)\n")
    assert git(root, "log", "-1", "--format=%s").strip() == "schedule: render launchd plists (2 jobs)"
    plist = plistlib.loads((root / "launchd" / "io.memctl.store.check.plist").read_bytes())
    assert plist["StartCalendarInterval"] == [{"Minute": 30, "Hour": 18, "Weekday": 1}, {"Minute": 30, "Hour": 18, "Weekday": 5}]
    assert plist["ProgramArguments"][-4:] == [str(root), "run-job", "--quiet", "check"]
    assert block.splitlines()[5].startswith("30 18 * * 1,5 cd ")

    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "schedule", "render")
    assert r.stderr == "memctl: launchd/: 2 plists (0 written, 2 unchanged, 0 removed)\n"
    assert git(root, "rev-parse", "HEAD") == head

    # A job that is no longer declared loses its plist.
    toml = (root / "memctl.toml").read_text()
    (root / "memctl.toml").write_text(toml[: toml.index("[jobs.check]")])
    r = cli(root, "schedule", "render", "--json")
    assert json.loads(r.stdout)["removed"] == ["launchd/io.memctl.store.check.plist"]
    assert not (root / "launchd" / "io.memctl.store.check.plist").exists()


def test_render_without_jobs(root):
    r = cli(root, "schedule", "render")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "memctl: no jobs declared in memctl.toml ([jobs.NAME])\n")


@pytest.mark.parametrize("table, message", [
    ('[jobs.bad]\ncommand = "doctor"\nhour = 25\n', "memctl.toml: [jobs.bad] hour = 25 is out of range (0-23)"),
    ('[jobs.bad]\ncommand = "doctor"\ninterval = "7m"\n', "memctl.toml: [jobs.bad] interval = '7m' has no crontab equivalent (hint: a divisor of 60 minutes (1m..30m, 1h) or of 24 hours (2h, 3h, 4h, 6h, 8h, 12h, 24h); else use minute/hour/weekday)"),
    ('[jobs."a.b"]\ncommand = "doctor"\nhour = 1\n', "memctl.toml: invalid job name 'a.b' (hint: 1-64 ASCII letters, digits, - or _)"),
])
def test_impossible_schedule_is_refused_and_nothing_written(root, table, message, fake_crontab):
    configure(root, table)
    head = git(root, "rev-parse", "HEAD")
    for args in (["schedule", "render"], ["schedule", "install", "--dry-run"], ["schedule", "install"]):
        r = cli(root, *args)
        assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"memctl: error: {message}\n"), args
    assert [p.name for p in (root / "launchd").iterdir()] == [".gitkeep"]
    assert not fake_crontab.exists()
    assert git(root, "rev-parse", "HEAD") == head


# ---------------------------------------------------------------- install (cron, with a fake crontab)

FOREIGN = "MAILTO=me@example.com\n# nightly backup\n0 1 * * * /usr/local/bin/backup --all\n"


def test_install_dry_run_keeps_foreign_lines_and_is_idempotent(root, fake_crontab):
    configure(root, JOBS)
    fake_crontab.write_text(FOREIGN)
    block = jobs.crontab_block(open_store(root), jobs.load_jobs(open_store(root)), jobs.resolve_environment())
    assert "PATH=" in block and str(Path(shutil.which("git")).parent) in block.split("PATH=")[1].split(" ")[0]

    r = cli(root, "schedule", "install", "--dry-run", "--scheduler", "cron")
    assert (r.exit_code, r.stdout, r.stderr) == (0, FOREIGN + block, "memctl: dry run: nothing changed\n")
    assert fake_crontab.read_text() == FOREIGN

    r = cli(root, "schedule", "install", "--scheduler", "cron")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "memctl: cron: 1 changes made\n")
    assert fake_crontab.read_text() == FOREIGN + block
    assert (root / "logs").is_dir()

    r = cli(root, "schedule", "install", "--dry-run", "--scheduler", "cron")
    assert (r.stdout, r.stderr) == (FOREIGN + block, "memctl: dry run: already as planned; nothing would change\n")
    r = cli(root, "schedule", "install", "--scheduler", "cron")
    assert r.stderr == "memctl: cron: already up to date; nothing changed\n"
    assert fake_crontab.read_text() == FOREIGN + block

    # A line added after ours by hand survives a re-install and an uninstall.
    fake_crontab.write_text(FOREIGN + block + "*/5 * * * * echo mine\n")
    r = cli(root, "schedule", "uninstall", "--scheduler", "cron")
    assert r.exit_code == 0
    assert fake_crontab.read_text() == FOREIGN + "*/5 * * * * echo mine\n"


def test_install_into_an_empty_crontab_then_json(root, fake_crontab):
    configure(root, JOBS)
    r = cli(root, "schedule", "install", "--scheduler", "cron", "--json")
    data = json.loads(r.stdout)
    assert (data["scheduler"], data["changed"], data["steps"]) == ("cron", True, ["crontab crontab"])
    assert fake_crontab.read_text() == data["crontab"]
    assert data["crontab"].startswith(f"# memctl:begin root={root}\n")


def test_installed_cron_line_runs_in_cron_s_minimal_environment(root, fake_crontab):
    """The rendered command works under `env -i sh -c` (no PATH, no HOME, another cwd), as cron runs it."""
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    cli(root, "schedule", "install", "--scheduler", "cron")
    line = next(l for l in fake_crontab.read_text().splitlines() if l.startswith("0 9 "))
    command = line.split(" ", 5)[5].replace("\\%", "%")
    done = subprocess.run(["env", "-i", "sh", "-c", command], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    log = (root / "logs" / "state.log").read_text()
    assert " state end exit=0 " in log
    assert git(root, "log", "-1", "--format=%s").startswith("state: update state/STATE.md (date:")


def test_launchd_dry_run_with_a_fake_launchctl(root, tmp_path, monkeypatch):
    executable(tmp_path / "fakebin" / "launchctl", "exit 113\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:{os.environ['PATH']}")
    configure(root, JOBS)
    r = cli(root, "schedule", "install", "--dry-run", "--scheduler", "launchd")
    agents = Path(os.environ["HOME"]) / "Library" / "LaunchAgents"
    domain = f"gui/{os.getuid()}"
    launchctl = tmp_path / "fakebin" / "launchctl"
    assert r.stdout.splitlines() == [
        f"write {agents}/io.memctl.store.state-update.plist",
        f"{launchctl} bootout {domain}/io.memctl.store.state-update",
        f"{launchctl} bootstrap {domain} {agents}/io.memctl.store.state-update.plist",
        f"write {agents}/io.memctl.store.check.plist",
        f"{launchctl} bootout {domain}/io.memctl.store.check",
        f"{launchctl} bootstrap {domain} {agents}/io.memctl.store.check.plist",
    ]
    assert not agents.exists()


def test_auto_scheduler_is_launchd_on_macos_and_cron_elsewhere(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert jobs.choose_scheduler() == "launchd"
    monkeypatch.setattr(sys, "platform", "linux")
    assert jobs.choose_scheduler() == "cron"
    assert jobs.choose_scheduler("launchd") == "launchd"


# ---------------------------------------------------------------- run-job

def test_run_job_failure_exit_log_and_episode(root):
    executable(root / "fail.sh", "echo going\nexit 3\n")
    configure(root, '[jobs.broken]\nscript = "fail.sh"\nhour = 9\n')
    r = cli(root, "run-job", "broken", env={"MEMCTL_NOW": NOW})
    episodes = json.loads(cli(root, "episode", "list", "--type", "error", "--json").stdout)
    [episode] = episodes
    assert (r.exit_code, r.stdout) == (3, "going\n")
    # (the first line warns that memctl.toml, edited by this test, keeps the episodes declaration uncommitted)
    assert r.stderr.splitlines()[-1] == f"memctl: error: job broken failed with exit 3 (log: logs/broken.log; episode {episode['id']})"
    assert episode["description"] == "job broken failed with exit 3"
    log = (root / "logs" / "broken.log").read_text().splitlines()
    assert log[1] == f"{NOW} broken | going" and log[2].startswith(f"{NOW} broken end exit=3 ")
    recalled = json.loads(cli(root, "episode", "recall", "broken job failed", "--json").stdout)
    assert recalled[0]["id"] == episode["id"]
    assert git(root, "log", "-1", "--format=%s").strip().startswith("ledger: append episodes")

    r = cli(root, "schedule", "status", "broken", "--tail", "1", env={"MEMCTL_NOW": NOW})
    assert r.stdout == (f"broken\t0 9 * * *\t{NOW}\t3\t\tfailing\n"
                        f"==> logs/broken.log <==\n{NOW} broken episode {episode['id']}\n")
    status = json.loads(cli(root, "schedule", "status", "--json").stdout)
    assert (status[0]["last_exit"], status[0]["state"], len(status[0]["log_tail"])) == (3, "failing", 4)


def test_run_job_quiet_success(root):
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    r = cli(root, "run-job", "--quiet", "state", env={"MEMCTL_NOW": NOW})
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr.startswith("memctl: job state succeeded in ") and r.stderr.endswith("s (log: logs/state.log)\n")
    r = cli(root, "schedule", "status", env={"MEMCTL_NOW": NOW})
    assert r.stdout == f"state\t0 9 * * *\t{NOW}\t0\t{NOW}\tok\n"


@pytest.mark.parametrize("args, code, message", [
    (["run-job", "missing"], 3, "memctl: error: no job named 'missing' in memctl.toml (none declared) (hint: declare it in [jobs.missing])"),
    (["run-job", "../x"], 2, "memctl: error: invalid job name '../x' (hint: 1-64 ASCII letters, digits, - or _)"),
    (["schedule", "status", "missing"], 3, "memctl: error: no job named 'missing' in memctl.toml (none declared) (hint: declare it in [jobs.missing])"),
    (["schedule", "install", "--scheduler", "systemd", "--dry-run"], 2, "memctl: error: unknown scheduler 'systemd' (hint: auto, launchd or cron)"),
])
def test_run_job_bad_input(root, args, code, message):
    r = cli(root, *args)
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", message + "\n")
    assert not (root / "logs").exists()


def test_two_copies_at_once_one_runs_the_other_exits_at_once(root):
    executable(root / "slow.sh", "echo working\nsleep 3\necho done\n")
    configure(root, '[jobs.slow]\nscript = "slow.sh"\nhour = 9\n')
    first = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "slow"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = root / "logs" / "slow.log"
    deadline = time.monotonic() + 30
    while " slow | working" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    began = time.monotonic()
    second = memctl(root, "run-job", "slow")
    took = time.monotonic() - began
    out, err = first.communicate(timeout=60)
    assert (first.returncode, out) == (0, "working\ndone\n")
    assert second.returncode == 4
    assert second.stderr == (f"memctl: error: job slow is already running (pid {first.pid}); this copy did not start it "
                             "(hint: memctl schedule status)\n")
    assert took < 2.5  # at once: not after the first one's 3 seconds
    events = [line.split(" ", 2)[2].split(" ")[0] for line in log.read_text().splitlines() if " | " not in line]
    assert events == ["start", "skip:", "end"]


# ---------------------------------------------------------------- the bundled example store

def test_bundled_plists_match_memctl_toml():
    config = tomllib.loads((REPO / "memctl.toml").read_text(encoding="utf-8"))
    declared = {name: jobs.parse_job(name, table) for name, table in config.get("jobs", {}).items()}
    plists = sorted((REPO / "launchd").glob("*.plist"))
    assert len(declared) >= 2 and len(plists) == len(declared)
    for path in plists:
        data = plistlib.loads(path.read_bytes())
        name = data["ProgramArguments"][-1]
        job = declared[name]
        assert path.name == f"{data['Label']}.plist" and data["Label"].endswith("." + name)
        assert data["ProgramArguments"][-3:] == ["run-job", "--quiet", name]
        assert data["StartCalendarInterval"] == jobs.plist(open_store(REPO), job, jobs.resolve_environment())["StartCalendarInterval"]
        assert data["WorkingDirectory"] == data["EnvironmentVariables"]["MEMCTL_ROOT"]
        path_dirs = data["EnvironmentVariables"]["PATH"].split(":")
        assert any(os.access(Path(d) / "git", os.X_OK) for d in path_dirs), path_dirs
        assert Path(data["ProgramArguments"][0]).parent.as_posix() in path_dirs
        assert data["StandardOutPath"].endswith(f"/logs/{name}.stdout.log")
        if job.script:
            assert (REPO / job.script).is_file() and os.access(REPO / job.script, os.X_OK)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_parse_and_pass_shellcheck_when_installed(name):
    path = REPO / "scripts" / name
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    assert os.access(path, os.X_OK)
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    if shutil.which("shellcheck"):
        done = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (0, "")


def test_auto_state_update_script_as_a_job_with_a_minimal_path(root):
    (root / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "auto-state-update.sh", root / "scripts" / "auto-state-update.sh")
    configure(root, '[jobs.state-update]\nscript = "scripts/auto-state-update.sh"\nargs = ["--note", "from cron"]\nhour = 9\n')
    numbers = root.parent / "numbers.json"
    numbers.write_text('{"completed": 5}')
    env = {"PATH": "/usr/bin:/bin", "MEMCTL_STATE_JSON": str(numbers), "HOME": str(root.parent)}
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "state-update"],
                          capture_output=True, text=True, env=env, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("state/STATE.md\nmemctl: committed: state: update state/STATE.md (date:")
    assert done.stdout.endswith(" completed:5)\n")
    assert "completed:5" in git(root, "log", "-1", "--format=%s")
    assert (root / "state" / "STATE.md").read_text().endswith("## Note\nfrom cron\n")
