"""`memctl schedule render|install|uninstall|status` and `memctl run-job` and `maintain` (docs/JOBS.md)."""

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
from memctl.store import init_store, open_store

from conftest import REPO, cli, drop_default_jobs, git, memctl

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


def configure_jobs(root: Path) -> None:
    """JOBS, with the script its `check` job runs."""
    executable(root / "check.sh", "exit 0\n")
    configure(root, JOBS)


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



@pytest.fixture
def root(tmp_path) -> Path:
    """A store without the jobs `init` declares: these tests declare their own."""
    path = tmp_path / "store"
    init_store(path)
    return drop_default_jobs(path)

# ---------------------------------------------------------------- render

def test_render_writes_machine_local_plists_and_prints_crontab(root):
    configure_jobs(root)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "jobs")
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "schedule", "render")
    store = open_store(root)
    block = jobs.crontab_block(store, jobs.load_jobs(store), jobs.resolve_environment())
    assert (r.exit_code, r.stdout, r.stderr) == (0, block, "memctl: launchd/: 2 plists (2 written, 0 unchanged, 0 removed)\n")
    # The plists hold this machine's paths: git-ignored, never committed.
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "check-ignore", "launchd/io.memctl.store.check.plist").strip() == "launchd/io.memctl.store.check.plist"
    plist = plistlib.loads((root / "launchd" / "io.memctl.store.check.plist").read_bytes())
    assert plist["StartCalendarInterval"] == [{"Minute": 30, "Hour": 18, "Weekday": 1}, {"Minute": 30, "Hour": 18, "Weekday": 5}]
    assert plist["ProgramArguments"][:2] == ["/bin/sh", "-c"]
    assert f"--root {root} run-job --quiet check >>logs/check.stdout.log 2>>logs/check.stderr.log" in plist["ProgramArguments"][2]
    assert block.splitlines()[5].startswith("30 18 * * 1,5 cd ")

    r = cli(root, "schedule", "render")
    assert r.stderr == "memctl: launchd/: 2 plists (0 written, 2 unchanged, 0 removed)\n"

    # A job that is no longer declared loses its plist.
    toml = (root / "memctl.toml").read_text()
    (root / "memctl.toml").write_text(toml[: toml.index("[jobs.check]")])
    r = cli(root, "schedule", "render", "--json")
    assert json.loads(r.stdout)["removed"] == ["launchd/io.memctl.store.check.plist"]
    assert not (root / "launchd" / "io.memctl.store.check.plist").exists()


def test_render_removes_plists_rendered_under_another_label_prefix(root):
    """The store was rendered when its folder had another name: those plists go, a hand-written one stays."""
    base = (root / "memctl.toml").read_text()
    state_job = '[jobs.state-update]\ncommand = "state update"\nhour = 9\n'
    (root / "memctl.toml").write_text(base + '[schedule]\nlabel_prefix = "io.memctl.oldname"\n\n' + state_job
                                      + '[jobs.gone]\ncommand = "doctor"\nhour = 3\n')
    assert cli(root, "schedule", "render").exit_code == 0
    assert sorted(p.name for p in (root / "launchd").glob("*.plist")) == ["io.memctl.oldname.gone.plist", "io.memctl.oldname.state-update.plist"]
    mine = root / "launchd" / "com.example.backup.plist"
    mine.write_bytes(plistlib.dumps({"Label": "com.example.backup", "ProgramArguments": ["/usr/local/bin/backup"]}))
    (root / "memctl.toml").write_text(base + state_job)
    r = cli(root, "schedule", "render", "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["written"], sorted(data["removed"])) == (
        ["launchd/io.memctl.store.state-update.plist"],
        ["launchd/io.memctl.oldname.gone.plist", "launchd/io.memctl.oldname.state-update.plist"])
    assert sorted(p.name for p in (root / "launchd").glob("*.plist")) == ["com.example.backup.plist", "io.memctl.store.state-update.plist"]


@pytest.mark.parametrize("table, message", [
    ('[jobs.x]\nscript = "scripts/missing.sh"\nhour = 1\n',
     "memctl.toml: [jobs.x] script 'scripts/missing.sh' does not exist ({root}/scripts/missing.sh) "
     "(hint: create it, or run memctl itself: command = \"state update\")"),
    ('[jobs.x]\nscript = "plain.txt"\nhour = 1\n', "memctl.toml: [jobs.x] script 'plain.txt' is not executable (hint: chmod +x {root}/plain.txt)"),
    ('[jobs.x]\ncommand = "frobnicate"\nhour = 1\n',
     "memctl.toml: [jobs.x] command 'frobnicate' is not a memctl command line: No such command 'frobnicate'. (hint: memctl --help lists the commands)"),
    ('[jobs.x]\ncommand = "state updat"\nhour = 1\n',
     "memctl.toml: [jobs.x] command 'state updat' is not a memctl command line: No such command 'updat'. Did you mean 'update'? (hint: memctl --help lists the commands)"),
    ('[jobs.x]\ncommand = "state"\nhour = 1\n',
     "memctl.toml: [jobs.x] command 'state' is not a memctl command line: memctl state needs a subcommand (hint: memctl --help lists the commands)"),
    ('[jobs.x]\ncommand = "doctor --strcit"\nhour = 1\n',
     "memctl.toml: [jobs.x] command 'doctor --strcit' is not a memctl command line: No such option: --strcit (Possible options: --strict) (hint: memctl --help lists the commands)"),
    ('[jobs.x]\ncommand = "ledger append"\nhour = 1\n',
     "memctl.toml: [jobs.x] command 'ledger append' is not a memctl command line: Missing argument 'name'. (hint: memctl --help lists the commands)"),
])
def test_render_and_install_refuse_a_job_that_cannot_run(root, table, message, fake_crontab):
    (root / "plain.txt").write_text("not a program\n")
    configure(root, table)
    for args in (["schedule", "render"], ["schedule", "install", "--dry-run"], ["schedule", "install"]):
        r = cli(root, *args)
        assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"memctl: error: {message.format(root=root)}\n"), args
    assert [p.name for p in (root / "launchd").iterdir()] == [".gitkeep"]
    assert not fake_crontab.exists()


@pytest.mark.parametrize("command", ["near-dup scan --facts", "near-dup 'MCPサーバーのデバッグ' --facts", "maintain --strict",
                                     "state update --note 朝", "ledger append article-themes theme=x"])
def test_render_accepts_memctl_command_lines(root, command):
    configure(root, f'[jobs.x]\ncommand = "{command}"\nhour = 1\n')
    r = cli(root, "schedule", "render")
    assert r.exit_code == 0, r.stderr


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
    configure_jobs(root)
    fake_crontab.write_text(FOREIGN)
    block = jobs.crontab_block(open_store(root), jobs.load_jobs(open_store(root)), jobs.resolve_environment())
    assert "PATH=" in block and str(Path(shutil.which("git")).parent) in block.split("PATH=")[1].split(" ")[0]

    r = cli(root, "schedule", "install", "--dry-run", "--scheduler", "cron")
    assert (r.exit_code, r.stdout, r.stderr) == (0, FOREIGN + block, "memctl: dry run: nothing changed\n")
    assert fake_crontab.read_text() == FOREIGN

    r = cli(root, "schedule", "install", "--scheduler", "cron")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "memctl: cron: 1 change made\n")
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


def test_a_crontab_with_lines_that_are_not_utf8_keeps_them_byte_for_byte(root, fake_crontab):
    """Another program's line in Latin-1 (or Shift_JIS): install and uninstall failed on it, without
    naming the crontab. They are kept as they are, around this store's block."""
    configure_jobs(root)
    foreign = "# café: sauvegarde\n*/5 * * * * echo 保存\n".encode("latin-1", "replace")
    fake_crontab.write_bytes(foreign)
    r = memctl(root, "schedule", "install", "--scheduler", "cron")
    assert r.returncode == 0, r.stderr
    table = fake_crontab.read_bytes()
    assert table.startswith(foreign) and f"# memctl:begin root={root}".encode() in table
    planned = memctl(root, "schedule", "install", "--scheduler", "cron", "--dry-run", input=b"")
    assert planned.returncode == 0 and foreign in planned.stdout  # the crontab as it would be, bytes as they are
    # --json is UTF-8 whatever the crontab holds: a byte that is not UTF-8 reads as U+FFFD (it was written raw,
    # and every JSON parser failed on the whole answer)
    planned = memctl(root, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json", input=b"")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout.decode("utf-8"))["crontab"].startswith("# caf\ufffd: sauvegarde\n*/5 * * * * echo ??\n")
    r = memctl(root, "schedule", "uninstall", "--scheduler", "cron")
    assert r.returncode == 0, r.stderr
    assert fake_crontab.read_bytes() == foreign


def test_two_installs_of_two_stores_at_once_keep_both_blocks(root, tmp_path, fake_crontab):
    """A crontab is read, changed and written back whole: two `schedule install`s at the same moment each
    wrote back what they had read, and one store's block was lost (both said "1 change made"). The fake
    crontab takes a moment to list, as a real one may, so that the two reads meet."""
    other = tmp_path / "other"
    init_store(other)
    drop_default_jobs(other)
    for store in (root, other):
        configure_jobs(store)
    slow = fake_crontab.parent / "fakebin" / "crontab"
    slow.write_text(slow.read_text().replace("-l) ", "-l) sleep 0.5; "))
    for _ in range(2):
        fake_crontab.unlink(missing_ok=True)
        runs = [subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(store), "schedule", "install",
                                  "--scheduler", "cron"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for store in (root, other)]
        said = [run.communicate(timeout=120) for run in runs]
        assert [run.returncode for run in runs] == [0, 0], said
        table = fake_crontab.read_text()
        for store in (root, other):
            assert table.count(f"# memctl:begin root={store}\n") == 1, table
            assert table.count(f"# memctl:end root={store}\n") == 1, table


def test_a_scheduler_lock_that_cannot_be_taken_does_not_stop_the_install(root, tmp_path, fake_crontab):
    """The lock's place holds what another user may have put there (a link, in a shared temporary folder):
    install refused with "the lock file ... is not a regular file" (review). It goes on, unlocked, saying so;
    the lock lives in a folder of this user's own first ($XDG_RUNTIME_DIR, ~/.cache/memctl)."""
    configure_jobs(root)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "scheduler.lock").symlink_to(tmp_path / "elsewhere")
    r = memctl(root, "schedule", "install", "--scheduler", "cron", env={"XDG_RUNTIME_DIR": str(runtime)})
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("memctl: warning: the crontab is changed without the scheduler lock: the lock file "), r.stderr
    assert f"# memctl:begin root={root}" in fake_crontab.read_text() and not (tmp_path / "elsewhere").exists()
    (runtime / "scheduler.lock").unlink()
    r = memctl(root, "schedule", "uninstall", "--scheduler", "cron", env={"XDG_RUNTIME_DIR": str(runtime)})
    assert (r.returncode, r.stderr) == (0, "memctl: cron: 1 change made\n") and (runtime / "scheduler.lock").is_file()


def test_install_into_an_empty_crontab_then_json(root, fake_crontab):
    configure_jobs(root)
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


def test_the_cron_line_writes_nothing_through_a_logs_link(root, fake_crontab, tmp_path):
    """`logs` as a symbolic link (a `git pull` of another clone's commit brings one: `.gitignore`'s
    `logs/` matches no link): the shell's `>>logs/NAME.stdout.log` would append wherever it points.
    The line stops before its redirections; doctor names the link."""
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    cli(root, "schedule", "install", "--scheduler", "cron")
    line = next(l for l in fake_crontab.read_text().splitlines() if l.startswith("0 9 "))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(root / "logs", ignore_errors=True)
    (root / "logs").symlink_to(elsewhere)
    head = git(root, "rev-parse", "HEAD")
    command = line.split(" ", 5)[5].replace("\\%", "%")
    done = subprocess.run(["env", "-i", "sh", "-c", command], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and list(elsewhere.iterdir()) == []
    assert git(root, "rev-parse", "HEAD") == head  # the job did not run
    assert "logs: error: " in memctl(root, "doctor").stdout
    (root / "logs").unlink()  # now a link in a real logs/ folder: one log file, then the other
    for kind in ("stdout", "stderr"):
        (root / "logs").mkdir(exist_ok=True)
        for old in (root / "logs").iterdir():
            old.unlink()
        (root / "logs" / f"state.{kind}.log").symlink_to(elsewhere / "target.txt")
        done = subprocess.run(["env", "-i", "sh", "-c", command], cwd="/", capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and list(elsewhere.iterdir()) == [], kind
        assert git(root, "rev-parse", "HEAD") == head  # the job did not run


def test_the_launchd_agent_writes_nothing_through_a_log_link_and_runs_the_job_otherwise(root, tmp_path):
    """launchd opened the plist's StandardOutPath (logs/NAME.stdout.log in the store) and followed a link
    there that a `git pull` brought, as cron's `>>` did. The agent now runs the cron line's shell
    command: no redirection through a link, the job not run. (launchd's part, run on any system: the
    plist's ProgramArguments in its WorkingDirectory with only its EnvironmentVariables.)"""
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    assert cli(root, "schedule", "render").exit_code == 0
    path = root / "launchd" / "io.memctl.store.state.plist"
    agent = plistlib.loads(path.read_bytes())
    assert "StandardOutPath" not in agent and "StandardErrorPath" not in agent
    assert jobs.rendered_job(path) == "state"  # (what render and uninstall recognise as theirs)

    def launch():
        return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in agent["EnvironmentVariables"].items()),
                               *agent["ProgramArguments"]], cwd=agent["WorkingDirectory"], capture_output=True,
                              text=True, timeout=120)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    head = git(root, "rev-parse", "HEAD")
    for kind in ("stdout", "stderr"):
        shutil.rmtree(root / "logs", ignore_errors=True)
        (root / "logs").mkdir()
        (root / "logs" / f"state.{kind}.log").symlink_to(elsewhere / "target.txt")
        done = launch()
        assert done.returncode != 0 and list(elsewhere.iterdir()) == [], kind
        assert git(root, "rev-parse", "HEAD") == head  # the job did not run
    shutil.rmtree(root / "logs")
    (root / "logs").symlink_to(elsewhere)
    assert launch().returncode != 0 and list(elsewhere.iterdir()) == []
    (root / "logs").unlink()
    done = launch()
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert git(root, "log", "-1", "--format=%s").startswith("state: update state/STATE.md (date:")
    assert " state end exit=0 " in (root / "logs" / "state.log").read_text()


def test_a_git_named_by_memctl_git_is_named_in_the_cron_line_too(root, fake_crontab, tmp_path, monkeypatch):
    """A git memctl finds only through MEMCTL_GIT (another file name, on no PATH): the installed cron line
    names it, and the job commits through it under `env -i sh -c`."""
    import shutil

    real = shutil.which("git")
    odd = tmp_path / "tools" / "git-2"
    used = tmp_path / "used"
    executable(odd, f'echo "$1" >> {used}\nexec {real} "$@"\n')
    monkeypatch.setenv("MEMCTL_GIT", str(odd))
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    assert cli(root, "schedule", "install", "--scheduler", "cron").exit_code == 0
    line = next(l for l in fake_crontab.read_text().splitlines() if l.startswith("0 9 "))
    assert f"MEMCTL_GIT={odd}" in line
    command = line.split(" ", 5)[5].replace("\\%", "%")
    used.unlink(missing_ok=True)  # what the install ran
    done = subprocess.run(["env", "-i", "sh", "-c", command], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert git(root, "log", "-1", "--format=%s").startswith("state: update state/STATE.md (date:")
    assert "update-ref" in used.read_text().split()  # the job committed through the named git


def test_launchd_dry_run_with_a_fake_launchctl(root, tmp_path, monkeypatch):
    executable(tmp_path / "fakebin" / "launchctl", "exit 113\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:{os.environ['PATH']}")
    configure_jobs(root)
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

def test_a_found_exit_is_a_finding_not_a_failure_and_the_nightly_doctor_passes(root):
    """near-dup scan exits 1 when it finds near-duplicates: as a job that was an `error` episode, and from the
    first finding `doctor` (so `daily-maintenance`, which runs it) failed every night with "job near-dup-facts
    has never succeeded" (helper-60). With `found_exit = 1` the run worked: a `success` episode, status ok,
    doctor clean; the same script without it is still a failure. (`run-job --help` said "a feedback one for
    a found_exit": it says what is recorded.)"""
    executable(root / "scan.sh", "echo 'near-duplicate: a ~ b'\nexit 1\n")
    configure(root, '[jobs.scan]\nscript = "scan.sh"\nhour = 9\nfound_exit = 1\n\n'
                    '[jobs.plain]\nscript = "scan.sh"\nhour = 9\n')
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two jobs")
    found = cli(root, "run-job", "scan", env={"MEMCTL_NOW": NOW})
    [episode] = json.loads(cli(root, "episode", "list", "--json").stdout)
    assert (found.exit_code, found.stdout) == (1, "near-duplicate: a ~ b\n")  # the command's own code, as grep's
    assert found.stderr.startswith(f"memctl: job scan found something (exit 1) in ") and f"episode {episode['id']})" in found.stderr
    assert (episode["type"], episode["description"]) == ("success", "job scan found something (exit 1)")  # not a person's feedback
    assert "near-duplicate: a ~ b" in episode["outcome"]
    described = " ".join(cli(None, "run-job", "--help").stdout.split())
    assert "an error episode on failure (a success one for a found_exit)" in described and "feedback" not in described
    status = {s["job"]: s for s in json.loads(cli(root, "schedule", "status", "--json", env={"MEMCTL_NOW": NOW}).stdout)}
    assert status["scan"]["state"] == "ok" and status["scan"]["last_success"] == NOW and status["scan"]["last_exit"] == 1
    assert cli(root, "run-job", "plain", "--quiet", env={"MEMCTL_NOW": NOW}).exit_code == 1
    doctor = cli(root, "doctor", "--json", env={"MEMCTL_NOW": NOW})
    kinds = {(p["code"], p["path"]) for p in json.loads(doctor.stdout)["problems"]}
    assert ("job-never-succeeded", "logs/plain.log") in kinds and not any(path == "logs/scan.log" for _, path in kinds)
    [never] = [p for p in json.loads(doctor.stdout)["problems"] if p["path"] == "logs/plain.log"]
    assert never["message"].endswith("if its exit 1 says it found something, declare found_exit = 1 in [jobs.plain]"), never
    configure(root, '[jobs.bad]\nscript = "scan.sh"\nhour = 9\nfound_exit = [0]\n')
    r = cli(root, "schedule", "status")
    assert r.exit_code == 2 and "[jobs.bad] found_exit = [0] is not an exit code from 1 to 125" in r.stderr, r.stderr


def test_run_job_with_a_file_where_logs_should_be_says_what_to_do(root):
    """`logs` a plain file: run-job said `File exists: .../logs (EEXIST)` and nothing more."""
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    (root / "logs").write_text("not a folder\n")
    r = memctl(root, "run-job", "state")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"memctl: error: File exists: {root / 'logs'} (EEXIST) (hint: something is already at "
                               "that path where memctl makes a folder"), r.stderr


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
    assert git(root, "log", "-1", "--format=%s").strip().startswith(("ledger: append episodes", "ledger: create episodes"))

    r = cli(root, "schedule", "status", "broken", "--tail", "1", env={"MEMCTL_NOW": NOW})
    assert r.stdout == (f"broken\t0 9 * * *\t{NOW}\t3\t\tfailing\n"
                        f"==> logs/broken.log <==\n{NOW} broken episode {episode['id']}\n")
    status = json.loads(cli(root, "schedule", "status", "--json").stdout)
    assert (status[0]["last_exit"], status[0]["state"], len(status[0]["log_tail"])) == (3, "failing", 4)


def test_a_jobs_output_is_shown_escaped_by_status_tail_never_obeyed(root):
    """A job prints what it likes (a script pulled from a remote, git's `remote:` lines): an escape
    sequence in its log must not clear the screen or retitle the terminal of whoever reads the tail."""
    executable(root / "loud.sh", "printf 'before\\033[2J\\033]0;pwned\\007after\\tTAB\\n'\n")
    configure(root, '[jobs.loud]\nscript = "loud.sh"\nhour = 9\n')
    assert cli(root, "run-job", "--quiet", "loud", env={"MEMCTL_NOW": NOW}).exit_code == 0
    assert "\x1b[2J" in (root / "logs" / "loud.log").read_text()  # the log keeps the bytes as they came
    r = cli(root, "schedule", "status", "loud", "--tail", "3", env={"MEMCTL_NOW": NOW})
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert f"{NOW} loud | before\\x1b[2J\\x1b]0;pwned\\x07after\tTAB\n" in r.stdout


def test_run_job_quiet_success(root):
    configure(root, '[jobs.state]\ncommand = "state update"\nhour = 9\n')
    r = cli(root, "run-job", "--quiet", "state", env={"MEMCTL_NOW": NOW})
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == ""  # cron's stderr file holds only what run-job could not log
    r = cli(root, "run-job", "state", env={"MEMCTL_NOW": NOW})
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

def test_bundled_store_jobs_are_memctl_commands_and_no_plist_is_committed():
    from memctl.cli.jobs import check_command

    config = tomllib.loads((REPO / "memctl.toml").read_text(encoding="utf-8"))
    declared = [jobs.parse_job(name, table) for name, table in config.get("jobs", {}).items()]
    assert len(declared) >= 3
    for job in declared:
        assert job.command and job.script is None, job.name  # scripts/ exists only in this repository
        assert check_command(job.command) is None, job.name
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "launchd"], capture_output=True, text=True, check=True).stdout
    assert ".plist" not in tracked
    assert "launchd/*.plist" in (REPO / ".gitignore").read_text().splitlines()


def test_default_jobs_of_a_fresh_store_render_run_and_keep_doctor_quiet(tmp_path):
    """`init` declares state-update and daily-maintenance as memctl commands; both run as the scheduler runs them."""
    from memctl.store import init_store

    root = tmp_path / "fresh"
    init_store(root)
    assert [j.name for j in jobs.load_jobs(open_store(root))] == ["state-update", "daily-maintenance"]
    assert [j.command for j in jobs.load_jobs(open_store(root))] == [("state", "update"), ("maintain",)]
    # Not installed on this machine: doctor says nothing about jobs.
    r = cli(root, "doctor")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "memctl: store is clean\n")
    r = cli(root, "schedule", "render")
    assert (r.exit_code, r.stderr) == (0, "memctl: launchd/: 2 plists (2 written, 0 unchanged, 0 removed)\n")
    assert git(root, "status", "--porcelain") == ""
    for name in ("state-update", "daily-maintenance"):
        done = memctl(root, "run-job", "--quiet", name, env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, (name, done.stderr)
    r = cli(root, "schedule", "status")
    assert [line.split("\t")[-1] for line in r.stdout.splitlines()] == ["ok", "ok"]
    assert git(root, "log", "-1", "--format=%s", "--", "state/STATE.md").startswith("state: update state/STATE.md")


def test_install_dry_run_without_crontab_or_launchctl_prints_the_plan(root, tmp_path, monkeypatch):
    """No scheduler on this machine: the dry run still shows what install would do, and says what it assumed.
    In process, with the places memctl looks when PATH has no scheduler pointed at nothing: a machine with
    cron installed (/usr/bin/crontab) read its real crontab here."""
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))
    configure_jobs(root)
    monkeypatch.setenv("PATH", str(bare))
    for name in jobs.SCHEDULER_TOOLS:
        monkeypatch.setitem(jobs.SCHEDULER_TOOLS, name, str(tmp_path / "nowhere" / name))
    done = cli(root, "schedule", "install", "--dry-run", "--scheduler", "cron")
    store = open_store(root)
    block = jobs.crontab_block(store, jobs.load_jobs(store), jobs.Environment(
        memctl=jobs.memctl_argv(), path=jobs.resolve_environment().path, git=None))
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"# memctl:begin root={root}"
    assert len(done.stdout.splitlines()) == len(block.splitlines())
    assert done.stderr == ("memctl: crontab not found on PATH: the plan starts from an empty crontab\n"
                           "memctl: dry run: nothing changed\n")
    done = cli(root, "schedule", "install", "--dry-run", "--scheduler", "launchd")
    agents = Path(os.environ["HOME"]) / "Library" / "LaunchAgents"
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        f"write {agents}/io.memctl.store.state-update.plist",
        f"launchctl bootout gui/{os.getuid()}/io.memctl.store.state-update",
        f"launchctl bootstrap gui/{os.getuid()} {agents}/io.memctl.store.state-update.plist",
    ]
    assert done.stderr == ("memctl: launchctl not found on PATH: the plan assumes no agent is loaded\n"
                           "memctl: dry run: nothing changed\n")
    # Without --dry-run the missing tool is an error, and nothing is written.
    done = cli(root, "schedule", "install", "--scheduler", "cron")
    assert (done.exit_code, done.stderr) == (3, "memctl: error: crontab not found on PATH (hint: install cron (the package cron on Debian and "
                                            "Ubuntu, cronie on Fedora), or run the lines `memctl schedule render` prints from "
                                            "another scheduler)\n")
    done = cli(root, "schedule", "install", "--scheduler", "launchd")
    assert (done.exit_code, done.stderr) == (3, "memctl: error: launchctl not found on PATH (hint: launchd is macOS's "
                                            "scheduler: elsewhere, --scheduler cron)\n")
    assert not (root / "logs").exists()


def test_uninstall_without_crontab_has_nothing_to_remove(root, tmp_path, monkeypatch):
    """A machine without cron holds no crontab with this store's lines: uninstall says so and exits 0
    (before, it failed with exit 3 and the hint to install cron, which a user removing jobs does not want)."""
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))
    configure_jobs(root)
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.setitem(jobs.SCHEDULER_TOOLS, "crontab", str(tmp_path / "nowhere" / "crontab"))
    for extra in ((), ("--dry-run",)):
        done = cli(root, "schedule", "uninstall", "--scheduler", "cron", *extra)
        assert (done.exit_code, done.stdout) == (0, ""), done.stderr
        assert done.stderr.splitlines()[0] == "memctl: crontab not found on PATH: no crontab holds this store's jobs"
        assert done.stderr.splitlines()[1] == ("memctl: cron: nothing to remove; nothing changed" if not extra
                                               else "memctl: dry run: already as planned; nothing would change")
    data = json.loads(cli(root, "schedule", "uninstall", "--scheduler", "cron", "--json").stdout)
    assert (data["changed"], data["steps"], data["notes"]) == (False, [], ["crontab not found on PATH: no crontab holds this store's jobs"])


def test_maintain_regenerates_the_index_commits_the_access_log_and_runs_doctor(root):
    assert cli(root, "remember", "deploy-window", "--description", "デプロイは火曜の午前だけ").exit_code == 0
    assert cli(root, "recall", "デプロイ").exit_code == 0  # its access row waits in .memctl/: the tree stays clean
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    index = root / "memory" / "MEMORY.md"
    index.write_text("".join(l for l in index.read_text().splitlines(keepends=True) if "deploy-window" not in l))
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-am", "hand edit")
    r = cli(root, "maintain", "--json")
    data = json.loads(r.stdout)
    assert (r.exit_code, data["index"]["changed"], data["ok"], data["problems"]) == (0, True, True, [])
    assert data["access"]["appended"] == 1 and data["access"]["commit"]
    assert git(root, "status", "--porcelain") == ""
    subjects = git(root, "log", "-2", "--format=%s").splitlines()
    assert subjects == ["ledger: append access (+1)", "memory: regenerate index"]
    r = cli(root, "maintain")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "memctl: MEMORY.md is up to date\nmemctl: access log: nothing to commit\nmemctl: store is clean\n")
    # doctor's errors fail the job (so run-job records an error episode).
    (root / "memory" / "broken.md").write_text("---\nname: broken\n  description: indented: wrongly\n---\nbody\n")
    r = cli(root, "maintain")
    assert r.exit_code == 1 and "memory/broken.md" in r.stdout


def test_maintain_packs_git_objects_left_loose_once_they_are_large(root, monkeypatch):
    """memctl commits with plumbing, so git's own `gc --auto` never ran, and it counts objects, not bytes:
    each episode added to a 40 MB ledger left an 8.5 MB copy loose (ten adds: 85 MB, then pushed by sync)."""
    import random

    from memctl import gitstore

    rng = random.Random(7)
    rows = "".join(f"ep-2026{i:08d}-abcd\t2026-11-30T12:00:00+00:00\tagent\tdecision\t0.7\t"
                   f"{' '.join(rng.choice(['deploy', 'xylophone', 'デプロイ', 'backup', 'token']) for _ in range(12))}"
                   "\t\t\t\n" for i in range(20_000))  # ~1.6 MB of rows, as a year's ledger grows
    assert cli(root, "episode", "add", "first", "--type", "decision").exit_code == 0
    with (root / "ledgers" / "episodes.tsv").open("a", encoding="utf-8") as f:
        f.write(rows)
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-am", "a year of episodes")
    for i in range(4):
        assert cli(root, "episode", "add", f"decision {i}", "--type", "decision").exit_code == 0

    def loose() -> int:
        counted = dict(line.split(": ") for line in git(root, "count-objects", "-v").splitlines())
        return int(counted["size"]) * 1024

    before, commits = loose(), git(root, "rev-list", "--count", "HEAD")
    assert before > 1 << 20  # five copies of the ledger, each compressed
    assert json.loads(cli(root, "maintain", "--json").stdout)["packed"] == 0  # under the limit (64 MiB): left alone
    monkeypatch.setattr(gitstore, "LOOSE_LIMIT", 512 << 10)
    r = cli(root, "maintain", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["packed"] >= before
    assert loose() < before / 10 and git(root, "rev-list", "--count", "HEAD") == commits
    subprocess.run(["git", "-C", str(root), "fsck", "--no-progress", "--strict"], check=True, capture_output=True)
    assert cli(root, "maintain").stderr.count("packed") == 0  # nothing loose left to pack
    assert cli(root, "episode", "add", "one more", "--type", "decision").exit_code == 0
    monkeypatch.setattr(gitstore, "LOOSE_LIMIT", 0)  # a repository that forbids repacking: a warning, and doctor runs
    git(root, "config", "core.repositoryformatversion", "1")
    git(root, "config", "extensions.preciousObjects", "true")
    r = cli(root, "maintain", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["packed"] == 0 and json.loads(r.stdout)["ok"] is True
    assert "were not packed" in r.stderr and "(hint: run `git gc` in the store)" in r.stderr


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


def test_daily_maintenance_script_commits_the_first_access_rows_of_a_store(root):
    """helper-53: the script committed the access log only once ledgers/access.tsv existed, which only
    that commit makes: a store's pending rows stayed machine-local for good, and doctor said clean."""
    (root / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "daily-maintenance.sh", root / "scripts" / "daily-maintenance.sh")
    configure(root, '[jobs.upkeep]\nscript = "scripts/daily-maintenance.sh"\nhour = 3\n')
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the upkeep job")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root.parent)}

    def job() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "run-job", "upkeep"],
                              capture_output=True, text=True, env=env, cwd="/", timeout=120)

    done = job()  # nothing pending, no access ledger: no failure
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (root / "ledgers" / "access.tsv").exists()
    assert cli(root, "remember", "deploys", "-d", "Deploys on Tuesdays").exit_code == 0
    assert cli(root, "show", "deploys").exit_code == 0  # a use: an access row, pending
    done = job()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\tshow\t\tdeploys\n" in (root / "ledgers" / "access.tsv").read_text(encoding="utf-8")
    assert git(root, "status", "--porcelain") == ""


def test_doctor_names_the_installed_schedule_memctl_toml_no_longer_matches(root, fake_crontab):
    """The crontab block is written once, by `schedule install`; memctl.toml changes after it (by hand, by a
    pull). A job removed from it but still installed was refused at every run, and doctor looked only at the
    declared jobs: nobody heard of it. Doctor now sets the installed block against memctl.toml."""
    configure_jobs(root)
    assert memctl(root, "schedule", "install", "--scheduler", "cron").returncode == 0
    report = memctl(root, "doctor").stdout
    assert "memctl.toml:" not in report, report

    text = (root / "memctl.toml").read_text()
    text = text.replace("[jobs.check]", "[jobs.gone]").replace("hour = 9\n", "hour = 7\n")
    (root / "memctl.toml").write_text(text + '\n[jobs.added]\ncommand = "doctor"\nhour = 2\n')
    executable(root / "gone.sh", "exit 0\n")
    report = memctl(root, "doctor").stdout
    assert ("memctl.toml: error: job check is installed in this machine's crontab but memctl.toml no longer declares it: "
            "every run of it is refused (memctl schedule install removes it)") in report.splitlines(), report
    assert ("memctl.toml: warning: job added is declared in memctl.toml but not installed in this machine's crontab: "
            "it does not run (memctl schedule install)") in report.splitlines(), report
    assert ("memctl.toml: warning: job state-update: this machine's crontab runs it at 0 9 * * *, not as memctl.toml "
            "says (0 7 * * *): memctl schedule install") in report.splitlines(), report
    assert memctl(root, "doctor").returncode == 1  # the refused job is an error

    assert memctl(root, "schedule", "install", "--scheduler", "cron").returncode == 0
    assert "memctl.toml:" not in memctl(root, "doctor").stdout
    assert memctl(root, "schedule", "uninstall", "--scheduler", "cron").returncode == 0
    assert "memctl.toml:" not in memctl(root, "doctor").stdout  # not installed here: nothing to compare


def test_installed_launchd_agents_are_read_back_by_job_and_times(root, tmp_path, monkeypatch):
    """On macOS the agents in ~/Library/LaunchAgents are what runs; launchctl is not needed to read them."""
    from memctl import installed

    configure_jobs(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = open_store(root)
    assert installed.installed_launchd(store) is None
    agents = jobs.launch_agents_dir()
    agents.mkdir(parents=True)
    env = jobs.resolve_environment()
    for path, data in jobs.plan_plists(store, jobs.load_jobs(store), env).items():
        (agents / path.name).write_bytes(data)
    (agents / "other.plist").write_bytes(b"not a plist")
    found = installed.installed_launchd(store)
    assert sorted(found) == ["check", "state-update"]
    assert json.loads(found["state-update"]) == {"StartCalendarInterval": {"Hour": 9, "Minute": 0}, "StartInterval": None}
    assert installed.problems(store, "launchd") == []
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text().replace("hour = 9\n", "hour = 7\n"))
    assert [(p.code, p.message) for p in installed.problems(open_store(root), "launchd")] == [
        ("job-schedule-changed", "job state-update: ~/Library/LaunchAgents runs it, not as memctl.toml says (0 7 * * *): "
         "memctl schedule install")]
    configure(root, '[schedule]\nlabel_prefix = "bad prefix!"\n')  # a review: it raised out of doctor on macOS
    assert [p.code for p in installed.problems(open_store(root), "launchd")] == ["job-config"]
    other = tmp_path / "other-store"
    init_store(other)
    assert installed.installed_launchd(open_store(other)) is None  # another store's agents are not its own


def test_render_and_install_warn_when_the_jobs_will_have_no_git(root, fake_crontab, monkeypatch):
    """The jobs' PATH holds git's folder as render finds it; with no git found at all, every job that
    commits failed at its first run, and render and install said nothing of it."""
    from memctl import early

    configure_jobs(root)
    warning = ("memctl: warning: git not found, here or on the jobs' PATH: every job that commits will fail "
               "(install git, or name it in MEMCTL_GIT, then install the schedule again)\n")
    assert warning not in cli(root, "schedule", "render").stderr
    monkeypatch.setattr(early, "FALLBACK_GITS", ())
    monkeypatch.setattr(jobs, "STANDARD_PATH", ())
    (fake_crontab.parent / "fakebin" / "cat").symlink_to(shutil.which("cat"))  # the fake crontab's
    monkeypatch.setenv("PATH", str(fake_crontab.parent / "fakebin"))
    monkeypatch.delenv("GIT_PYTHON_GIT_EXECUTABLE", raising=False)
    monkeypatch.delenv("MEMCTL_GIT", raising=False)
    r = cli(root, "schedule", "render")
    assert r.exit_code == 0 and warning in r.stderr, r.stderr
    r = cli(root, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["warnings"] == [warning.split("warning: ")[1].rstrip("\n")]
    r = cli(root, "schedule", "install", "--scheduler", "cron")
    assert r.exit_code == 0 and warning in r.stderr, r.stderr
    assert "warning" not in cli(root, "schedule", "uninstall", "--scheduler", "cron").stderr


def test_the_bundled_state_update_job_commits_numbers_it_has(tmp_path):
    """The bundled job runs `state update` with no --from-json; its message template named task counts
    only --from-json gives, so every night it committed `完了:- 進行中:- 未着手:- 承認待ち:-`."""
    store = tmp_path / "bundled"
    store.mkdir()
    for part in ("memory", "ledgers", "state"):
        shutil.copytree(REPO / part, store / part)
    shutil.copy(REPO / "memctl.toml", store)
    git(store, "init", "-q")
    git(store, "add", "-A")
    git(store, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "bundled store")
    done = memctl(store, "run-job", "--quiet", "state-update", env={"MEMCTL_NOW": "2026-12-07T09:00:00+09:00"})
    assert done.returncode == 0, done.stderr
    message = git(store, "log", "-1", "--format=%s").strip()
    assert message.startswith("auto: STATE.md 自動更新 (日付:2026-12-07 facts:") and ":-" not in message, message


def test_doctor_reads_only_this_stores_block_and_only_the_lines_install_writes(root, tmp_path, fake_crontab):
    """A review: without this store's end marker the next store's block was read as this one's (its jobs an
    error, and `schedule install` refuses such a crontab); a job line commented out by hand, or a comment
    holding `run-job --quiet NAME >>`, was read as an installed job."""
    from memctl import installed

    configure_jobs(root)
    other = tmp_path / "other"
    init_store(other)
    drop_default_jobs(other)
    configure(other, '[jobs.other-check]\ncommand = "doctor"\nhour = 4\n')
    for store in (root, other):
        assert memctl(store, "schedule", "install", "--scheduler", "cron").returncode == 0
    table = fake_crontab.read_text()
    assert installed.problems(open_store(root), "cron") == []
    commented = table.replace("\n0 9 * * * cd", "\n#0 9 * * * cd").replace(
        "# state-update: Regenerate STATE.md", "# state-update: run-job --quiet ghost >> here")
    fake_crontab.write_text(commented)
    assert [(p.code, p.message) for p in installed.problems(open_store(root), "cron")] == [
        ("job-not-installed", "job state-update is declared in memctl.toml but not installed in this machine's crontab: "
         "it does not run (memctl schedule install)")]
    fake_crontab.write_text(table.replace(f"# memctl:end root={root}\n", "", 1))
    report = memctl(root, "doctor")
    assert report.returncode == 1 and "other-check" not in report.stdout, report.stdout
    assert (f"memctl.toml: error: the crontab has '# memctl:begin root={root}' but not its end marker: the store's jobs "
            "cannot be told from what follows (fix the crontab by hand: crontab -e)") in report.stdout.splitlines()


def test_doctor_goes_on_when_crontab_fails_hangs_or_cannot_run(root, fake_crontab, monkeypatch):
    """A review: a `crontab` that could not be executed ended doctor with ENOEXEC alone; one that hung held doctor
    (and the nightly maintain) as long as it hung."""
    from memctl import installed

    configure_jobs(root)
    assert memctl(root, "schedule", "install", "--scheduler", "cron").returncode == 0
    fake = fake_crontab.parent / "fakebin" / "crontab"
    fake.write_text("echo no shebang\n")  # executable, no #!: exec fails with ENOEXEC
    assert installed.installed_cron(open_store(root)) is None
    executable(fake, "sleep 30\n")
    monkeypatch.setattr(installed, "CRONTAB_SECONDS", 0.5)
    began = time.monotonic()
    assert installed.installed_cron(open_store(root)) is None
    assert time.monotonic() - began < 20
    executable(fake, "echo broken >&2; exit 3\n")
    assert installed.problems(open_store(root), "cron") == []


def test_a_memctl_git_that_names_no_program_is_a_warning_at_install(root, tmp_path, fake_crontab, monkeypatch):
    """A review: MEMCTL_GIT naming a file that does not run was dropped in silence, and the jobs ran another git."""
    configure_jobs(root)
    not_git = tmp_path / "notgit"
    not_git.write_text("just text\n")
    monkeypatch.setenv("MEMCTL_GIT", str(not_git))
    r = cli(root, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["warnings"] == [
        f"MEMCTL_GIT names {not_git}, which is not a program to run: the jobs get the git on their PATH instead "
        "(fix MEMCTL_GIT, or unset it, then install the schedule again)"]


def test_a_store_path_with_a_newline_makes_no_crontab_block(tmp_path):
    """helper-72: `schedule render` split the block's marker and job lines at the newline in the store's path,
    so `schedule install` would have written a crontab that runs a line cut in two."""
    store = tmp_path / "nl\nine"
    assert memctl(None, "init", str(store)).returncode == 0
    result = memctl(store, "schedule", "render")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("memctl: error: the store's path ") and "holds a control character" in result.stderr
