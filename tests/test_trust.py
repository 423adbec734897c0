"""Issue 29.3: nothing from a remote runs without the local user's consent (memctl/trust.py, docs/JOBS.md).

Real git throughout: a bare remote, the victim's store (made here with `init`, so what it wrote is its
own), an attacker's clone that pushes memctl.toml, and real `memctl` subprocesses. The approvals live
outside git, in $XDG_CONFIG_HOME (the test's own HOME: tests/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, memctl
from memctl import embed
from memctl.store import open_store

ID = ("-c", "user.name=attacker", "-c", "user.email=attacker@example.com")
EVIL = """
[jobs.evil]
description = "nightly cleanup"
script = "/bin/sh"
args = ["-c", "echo pwned > {marker}"]
hour = 4
"""


@pytest.fixture(autouse=True)
def _clock(pinned_clock):
    """Every command reads one pinned clock."""


def _branch(root: Path) -> str:
    return git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()


@pytest.fixture
def victim(tmp_path):
    """(victim, attacker, remote): the victim's own store pushed to a bare remote, and a clone of it
    that anyone with push access controls."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    store = tmp_path / "victim"
    assert memctl(None, "init", str(store)).returncode == 0
    git(store, "remote", "add", "origin", str(remote))
    assert memctl(store, "sync").returncode == 0
    attacker = tmp_path / "attacker"
    subprocess.run(["git", "clone", "-q", str(remote), str(attacker)], check=True)
    return store, attacker, remote


def push(attacker: Path, text: str, message: str = "tidy up") -> None:
    """The attacker appends `text` to memctl.toml, commits with git and pushes."""
    with open(attacker / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(text)
    git(attacker, *ID, "commit", "-qam", message)
    git(attacker, "push", "-q", "origin", "HEAD")


def pull(store: Path, how: str) -> None:
    if how == "sync":
        done = memctl(store, "sync")
        assert done.returncode == 0, done.stderr
        assert "waits for approval on this machine" in done.stderr and "memctl trust" in done.stderr
    else:
        git(store, "pull", "-q", "--no-rebase", "origin", _branch(store))


def one_error(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("memctl: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("how", ["sync", "pull"])
def test_a_job_pushed_by_another_clone_never_runs_until_approved_here(victim, tmp_path, how):
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    push(attacker, EVIL.format(marker=marker))
    pull(store, how)
    for _ in range(2):  # what cron or launchd calls; asked twice, refused twice
        done = memctl(store, "run-job", "--quiet", "evil")
        assert done.returncode == 1
        line = one_error(done)
        assert "[jobs.evil] in memctl.toml waits for approval on this machine" in line
        assert "not by a commit made on this machine" in line and "the job was not run" in line
        assert "memctl trust" in line
        assert not marker.exists()
    assert "refused: [jobs.evil]" in (store / "logs" / "evil.log").read_text(encoding="utf-8")
    doctor = memctl(store, "doctor")
    assert "memctl.toml: warning: [jobs.evil] waits for approval on this machine" in doctor.stdout
    assert "store is clean" not in doctor.stdout + doctor.stderr
    assert "[jobs.state-update]" not in doctor.stdout  # the victim's own jobs do not wait
    listed = json.loads(memctl(store, "trust", "--list", "--json").stdout)
    states = {s["key"]: s["state"] for s in listed["settings"]}
    assert states == {"jobs.state-update": "approved", "jobs.daily-maintenance": "approved", "jobs.evil": "waiting"}
    assert listed["approved"] == []
    assert not marker.exists()

    approved = memctl(store, "trust")
    assert approved.returncode == 0, approved.stderr
    assert "[jobs.evil]: " in approved.stdout and "/bin/sh" in approved.stdout
    assert "approved 1 settings" in approved.stderr
    done = memctl(store, "run-job", "--quiet", "evil")
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "pwned\n"
    assert memctl(store, "trust").stderr == "memctl: nothing waits for approval\n"
    assert "[jobs.evil]" not in memctl(store, "doctor").stdout


def test_trust_expect_approves_only_what_was_reviewed(victim, tmp_path):
    """`memctl trust` approves the value at that moment: a sync between `trust --list` and `trust` (a cron
    sync job) approved a command the user never saw (helper-87). `--list` gives a digest of what waits,
    and `trust --expect DIGEST` approves nothing once that changed."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    push(attacker, EVIL.format(marker=tmp_path / "harmless"))
    pull(store, "sync")
    listed = memctl(store, "trust", "--list", "--json")
    reviewed = json.loads(listed.stdout)["waiting_digest"]
    assert len(reviewed) == 64  # (the whole SHA-256: the remote writes both values, so a short one can be collided)
    text = memctl(store, "trust", "--list")
    assert f"1 of 3 settings wait for approval; `memctl trust --expect {reviewed}` approves exactly these" in text.stderr
    # meanwhile the other clone rewrites the job, and a sync brings it in
    (attacker / "memctl.toml").write_text((attacker / "memctl.toml").read_text(encoding="utf-8").replace(
        str(tmp_path / "harmless"), str(marker)), encoding="utf-8")
    git(attacker, *ID, "commit", "-qam", "tidy up again")
    git(attacker, "push", "-q", "origin", "HEAD")
    pull(store, "sync")
    refused = memctl(store, "trust", "--expect", reviewed)
    assert refused.returncode == 1
    assert one_error(refused).startswith(f"memctl: error: what waits for approval is not what was reviewed with digest {reviewed[:16]}...")
    assert again_digest(store) not in refused.stderr  # (never the digest to paste: review first)
    assert "memctl trust --list" in refused.stderr
    assert memctl(store, "run-job", "--quiet", "evil").returncode == 1 and not marker.exists()  # nothing approved
    again = json.loads(memctl(store, "trust", "--list", "--json").stdout)["waiting_digest"]
    assert again != reviewed
    assert memctl(store, "trust", "jobs.evil", "--expect", again).returncode == 0
    assert json.loads(memctl(store, "trust", "--list", "--json").stdout)["waiting_digest"] is None
    assert memctl(store, "trust", "--list", "--expect", again).returncode == 2  # (--list approves nothing)
    assert memctl(store, "trust", "--expect", " ").returncode == 2
    listed = json.loads(memctl(store, "trust", "--list", "jobs.evil", "--json").stdout)
    assert [s["key"] for s in listed["settings"]] == ["jobs.evil"]  # the table and the digest: the KEYs named
    assert memctl(store, "trust", "--list", "jobs.nothing").returncode == 2  # as `trust jobs.nothing` is


def again_digest(store) -> str:
    return json.loads(memctl(store, "trust", "--list", "--json").stdout)["waiting_digest"]


def test_a_changed_job_waits_again_and_the_approval_is_kept_outside_git(victim, tmp_path):
    store, attacker, remote = victim
    marker = tmp_path / "MARKER"
    text = (attacker / "memctl.toml").read_text(encoding="utf-8")
    # The victim's own daily job, turned into a shell command by the attacker.
    (attacker / "memctl.toml").write_text(text.replace('command = "maintain"', f'command = "maintain"\n# x'), encoding="utf-8")
    push(attacker, "")
    pull(store, "pull")
    assert memctl(store, "run-job", "--quiet", "daily-maintenance").returncode == 0  # a comment: nothing changed
    evil = text.replace('command = "maintain"', f'script = "/bin/sh"\nargs = ["-c", "echo pwned > {marker}"]')
    (attacker / "memctl.toml").write_text(evil, encoding="utf-8")
    push(attacker, "")
    pull(store, "sync")
    done = memctl(store, "run-job", "--quiet", "daily-maintenance")
    assert done.returncode == 1 and "[jobs.daily-maintenance] in memctl.toml waits" in one_error(done)
    assert not marker.exists()
    # What cron does next night, every night: refused. Status and doctor say so (they said `ok`, exit 0).
    status = json.loads(memctl(store, "schedule", "status", "daily-maintenance", "--json").stdout)[0]
    assert status["state"] == "refused" and status["last_exit"] == 0 and status["last_refused"]
    assert "waits for approval on this machine" in status["refused"]
    table = memctl(store, "schedule", "status").stdout
    assert "refused" in next(line for line in table.splitlines() if "daily-maintenance" in line)
    doctor = memctl(store, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert "logs/daily-maintenance.log: error: job daily-maintenance: its last run was refused at " in doctor.stdout, doctor.stdout
    # Nothing in the work tree or in git holds the approval: a commit cannot bring one.
    assert memctl(store, "trust", "jobs.daily-maintenance").returncode == 0
    assert not any(".memctl" in p or "trust" in p for p in git(remote, "log", "--all", "--name-only", "--format=").split())
    record = list((Path.home() / ".config" / "memctl" / "trust").glob("*.json"))
    assert len(record) == 1 and str(store) in record[0].read_text(encoding="utf-8")
    assert memctl(store, "run-job", "--quiet", "daily-maintenance").returncode == 0
    assert marker.read_text() == "pwned\n"
    assert json.loads(memctl(store, "schedule", "status", "daily-maintenance", "--json").stdout)[0]["state"] == "ok"
    # Reverting to the old table by hand (a commit made here) needs no approval.
    (store / "memctl.toml").write_text(text, encoding="utf-8")
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "back")
    assert memctl(store, "trust", "--list", "--json").stdout.count('"waiting"') == 0


@pytest.mark.parametrize("how", ["sync", "pull"])
def test_a_lone_carriage_return_in_a_pushed_memctl_toml_approves_nothing(victim, tmp_path, how):
    """memctl.toml is read with universal newlines, so a lone CR ends a line. The approval check read the
    committed copy with plain tomllib, which refuses the CR: no settings in HEAD, so every setting looked
    like a hand edit, was approved and ran (helper-68)."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    text = (attacker / "memctl.toml").read_text(encoding="utf-8")
    evil = text.replace('command = "maintain"', f'script = "/bin/sh"\nargs = ["-c", "echo pwned > {marker}"]')
    (attacker / "memctl.toml").write_bytes((evil + "# tidy\r# up\n").encode("utf-8"))
    git(attacker, *ID, "commit", "-qam", "tidy")
    git(attacker, "push", "-q", "origin", "HEAD")
    pull(store, how)
    for _ in range(2):
        done = memctl(store, "run-job", "--quiet", "daily-maintenance")
        assert done.returncode == 1 and "[jobs.daily-maintenance] in memctl.toml waits" in one_error(done)
    assert not marker.exists()
    listed = json.loads(memctl(store, "trust", "--list", "--json").stdout)
    assert {s["key"]: s["state"] for s in listed["settings"]}["jobs.daily-maintenance"] == "waiting"


@pytest.mark.parametrize("how", ["sync", "pull"])
def test_a_pushed_change_to_a_jobs_script_in_the_store_waits_for_approval(victim, tmp_path, how):
    """The approval covered the table (`script = "bin/report.sh"`, JOBS.md's own example), not the script:
    another clone rewrote bin/report.sh and the victim's cron ran it (helper-68)."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    (store / "bin").mkdir()
    (store / "bin" / "report.sh").write_text("#!/bin/sh\necho report\n")
    (store / "bin" / "report.sh").chmod(0o755)
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.report]\nscript = "bin/report.sh"\nhour = 8\n')
    git(store, "add", "-A")
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qm", "a report job")
    assert memctl(store, "sync").returncode == 0
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0  # the local user's own script runs
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    (attacker / "bin" / "report.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    git(attacker, *ID, "commit", "-qam", "faster report")
    git(attacker, "push", "-q", "origin", "HEAD")
    if how == "sync":
        done = memctl(store, "sync")
        assert done.returncode == 0 and "the script of [jobs.report] (its contents) waits for approval" in done.stderr, done.stderr
    else:
        git(store, "pull", "-q", "--no-rebase", "origin", _branch(store))
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "the script of [jobs.report] (its contents) waits for approval" in one_error(done)
    assert "not by a commit made on this machine" in one_error(done)
    assert not marker.exists()
    assert "the script of [jobs.report]" in memctl(store, "doctor").stdout
    assert memctl(store, "trust", "jobs.report:script").returncode == 0
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0 and marker.read_text() == "pwned\n"
    # The local user's own edit of the script (by hand, then committed here) never waits.
    (store / "bin" / "report.sh").write_text("#!/bin/sh\necho mine\n")
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "mine")
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0


def _report_job(store: Path, script: str = "bin/report.sh") -> None:
    """The victim's own job running a script of the store, committed and synced."""
    (store / "bin").mkdir(exist_ok=True)
    (store / "bin" / "report.sh").write_text("#!/bin/sh\necho report\n")
    (store / "bin" / "report.sh").chmod(0o755)
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[jobs.report]\nscript = "{script}"\nhour = 8\n')
    git(store, "add", "-A")
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qm", "a report job")
    assert memctl(store, "sync").returncode == 0
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0


def _pushed_script(attacker: Path, marker: Path) -> None:
    """The attacker's clone, brought up to date, rewrites bin/report.sh to write `marker`, and pushes."""
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    (attacker / "bin" / "report.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    git(attacker, *ID, "commit", "-qam", "faster")
    git(attacker, "push", "-q", "origin", "HEAD")


def test_a_pushed_script_behind_a_symbolic_link_in_the_store_is_not_run(victim, tmp_path):
    """helper-69: `git rm -r bin; ln -s tools bin` with the payload in tools/report.sh: HEAD has no blob at
    bin/report.sh, so the contents counted as a hand edit, were approved and ran."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    _report_job(store)
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    git(attacker, "rm", "-rq", "bin")
    (attacker / "tools").mkdir()
    (attacker / "tools" / "report.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    (attacker / "tools" / "report.sh").chmod(0o755)
    (attacker / "bin").symlink_to("tools")
    git(attacker, "add", "-A")
    git(attacker, *ID, "commit", "-qm", "move scripts")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert memctl(store, "sync").returncode == 0
    for _ in range(2):
        done = memctl(store, "run-job", "--quiet", "report")
        assert done.returncode == 1 and "reached through a symbolic link" in one_error(done), done.stderr
    assert not marker.exists()
    listed = {s["key"]: s["state"] for s in json.loads(memctl(store, "trust", "--list", "--json").stdout)["settings"]}
    assert listed["jobs.report:script"] == "waiting"


def test_an_absolute_script_path_through_a_linked_store_is_covered(victim, tmp_path):
    """helper-69: a script named by an absolute path through a link to the store was not under the (resolved)
    store root, so its contents were not covered at all."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    alias = tmp_path / "alias"
    alias.symlink_to(store)
    _report_job(store, script=str(alias / "bin" / "report.sh"))
    _pushed_script(attacker, marker)
    assert memctl(store, "sync").returncode == 0
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "the script of [jobs.report] (its contents) waits" in one_error(done)
    assert not marker.exists()


def test_a_pushed_link_out_of_the_store_behind_an_absolute_script_path_is_not_run(victim, tmp_path):
    """helper-70: with `script = "<link to the store>/bin/report.sh"`, the attacker made bin/report.sh a link to
    /proc/self/cwd/evil.sh: resolved, it left the store, so the script was not covered at all, and ran."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    alias = tmp_path / "alias"
    alias.symlink_to(store)
    _report_job(store, script=str(alias / "bin" / "report.sh"))
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    (attacker / "bin" / "report.sh").unlink()
    (attacker / "bin" / "report.sh").symlink_to("/proc/self/cwd/evil.sh")
    (attacker / "evil.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    (attacker / "evil.sh").chmod(0o755)
    git(attacker, "add", "-A")
    git(attacker, *ID, "commit", "-qm", "tidy")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert memctl(store, "sync").returncode == 0
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "reached through a symbolic link" in one_error(done), done.stderr
    assert not marker.exists()


def test_a_dotdot_through_a_pushed_link_runs_nothing(victim, tmp_path):
    """helper-70: `script = "tools/../bin/report.sh"` with `tools` pushed as a link: read by its name it is
    bin/report.sh (approved), but the kernel goes through the link, then up from where it leads."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    (store / "tools").mkdir()
    (store / "tools" / "README").write_text("tools\n")
    _report_job(store, script="tools/../bin/report.sh")
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    git(attacker, "rm", "-rq", "tools")
    (attacker / "evil" / "sub").mkdir(parents=True)
    (attacker / "evil" / "sub" / "README").write_text("x\n")
    (attacker / "evil" / "bin").mkdir()
    (attacker / "evil" / "bin" / "report.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    (attacker / "evil" / "bin" / "report.sh").chmod(0o755)
    (attacker / "tools").symlink_to("evil/sub")
    git(attacker, "add", "-A")
    git(attacker, *ID, "commit", "-qm", "tidy")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert memctl(store, "sync").returncode == 0
    assert (store / "tools").is_symlink() and (store / "bin" / "report.sh").read_text() == "#!/bin/sh\necho report\n"
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "reached through a symbolic link" in one_error(done), done.stderr
    assert not marker.exists()


def test_a_script_of_the_repository_outside_the_store_is_covered(tmp_path):
    """helper-70: a store in a folder of a repository, `script = "../tools/report.sh"`: git brings the file, but
    only scripts inside the store were covered."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tools").mkdir()
    (repo / "tools" / "report.sh").write_text("#!/bin/sh\necho report\n")
    (repo / "tools" / "report.sh").chmod(0o755)
    me = ("-c", "user.name=me", "-c", "user.email=me@example.com")
    git(repo, "add", "-A")
    git(repo, *me, "commit", "-qm", "tools")
    store = repo / "store"
    assert memctl(None, "init", str(store)).returncode == 0
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.report]\nscript = "../tools/report.sh"\nhour = 8\n')
    git(repo, "add", "-A")
    git(repo, *me, "commit", "-qm", "job")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "HEAD")
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0
    attacker = tmp_path / "attacker"
    subprocess.run(["git", "clone", "-q", str(remote), str(attacker)], check=True)
    marker = tmp_path / "MARKER"
    (attacker / "tools" / "report.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    git(attacker, *ID, "commit", "-qam", "faster")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert memctl(store, "sync").returncode == 0
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "the script of [jobs.report] (its contents) waits" in one_error(done), done.stderr
    assert not marker.exists()


def test_a_script_merged_while_its_job_waited_for_the_turn_is_checked_again(victim, tmp_path):
    """helper-69: run-job checked the approval, then waited for the store's turn (a sync job ahead of it),
    then ran the script as the sync had just merged it."""
    import fcntl
    import time

    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    _report_job(store)
    _pushed_script(attacker, marker)
    turn = store / ".memctl" / "jobs" / ".turn.lock"
    turn.parent.mkdir(parents=True, exist_ok=True)
    with open(turn, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another job of the store has the turn
        waiting = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(store), "run-job", "report"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = store / "logs" / "report.log"
        for _ in range(200):
            if log.exists() and "wait:" in log.read_text(encoding="utf-8"):
                break
            time.sleep(0.05)
        assert "wait:" in log.read_text(encoding="utf-8")
        git(store, "pull", "-q", "--no-rebase", "origin", _branch(store))  # what the sync ahead of it merges
        fcntl.flock(held, fcntl.LOCK_UN)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 1 and "the script of [jobs.report] (its contents) waits" in err, err
    assert not marker.exists()


def test_an_approval_saved_before_scripts_counted_keeps_the_job_running(victim):
    """helper-69: after the upgrade, a job approved by the older memctl on a clone (its script came by clone)
    was refused. The record without `"scripts"` takes an approved job's script as it is, once."""
    store, attacker, _ = victim
    _report_job(store)
    record = next((Path.home() / ".config" / "memctl" / "trust").glob("*.json"))
    saved = json.loads(record.read_text(encoding="utf-8"))
    saved.pop("scripts", None)
    saved["approved"] = {k: v for k, v in saved["approved"].items() if not k.endswith(":script")}
    record.write_text(json.dumps(saved), encoding="utf-8")
    git(store, "rm", "-q", "--cached", "bin/report.sh")  # as if it had come by clone: no commit made here
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qm", "untrack")
    (store / "bin" / "report.sh").unlink()
    git(store, "checkout", "-q", "HEAD~1", "--", "bin/report.sh")
    git(store, "-c", "user.name=other", "-c", "user.email=o@example.com", "commit", "-qm", "back")
    assert memctl(store, "run-job", "--quiet", "report").returncode == 0
    assert json.loads(record.read_text(encoding="utf-8"))["scripts"] == 1


def test_a_job_description_with_japanese_spaces_and_emoji_is_still_a_description(victim):
    """helper-70: the check for control characters took `isprintable()`, false for U+3000, U+00A0 and the joiner
    inside an emoji: such a description stopped every command of the store."""
    store, _, _ = victim
    text = (store / "memctl.toml").read_text(encoding="utf-8")
    (store / "memctl.toml").write_text(text.replace('description = "', 'description = "毎朝\u3000STATE.md (9\u00a0h) 👨\u200d💻 ', 1),
                                       encoding="utf-8")
    assert memctl(store, "schedule", "render").returncode == 0
    assert memctl(store, "run-job", "--quiet", "daily-maintenance").returncode == 0


def test_a_previous_records_script_approval_is_not_taken_as_it_is(victim, tmp_path):
    """helper-70: a record with script approvals but no `"scripts": 1` (written by the commits before the marker)
    took every differing script as it is, one that was waiting included."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    _report_job(store)
    record = next((Path.home() / ".config" / "memctl" / "trust").glob("*.json"))
    _pushed_script(attacker, marker)
    assert memctl(store, "sync").returncode == 0
    saved = json.loads(record.read_text(encoding="utf-8"))
    assert any(k.endswith(":script") for k in saved["approved"])
    saved.pop("scripts", None)
    record.write_text(json.dumps(saved), encoding="utf-8")
    done = memctl(store, "run-job", "--quiet", "report")
    assert done.returncode == 1 and "waits for approval" in one_error(done)
    assert not marker.exists()


def test_a_pushed_job_description_with_a_carriage_return_is_refused_before_it_reaches_the_crontab(victim):
    """helper-69: `description = "report\\r* * * * * touch X #"` became a crontab line of its own at the next
    `schedule install` (splitlines splits at CR), and no approval was asked since descriptions stopped counting."""
    store, attacker, _ = victim
    text = (attacker / "memctl.toml").read_text(encoding="utf-8")
    (attacker / "memctl.toml").write_text(text.replace('description = "', 'description = "x\\r* * * * * touch /tmp/PWNED #', 1),
                                          encoding="utf-8")
    push(attacker, "")
    done = memctl(store, "sync")
    assert done.returncode == 1 and "description must be one line of text, without control characters" in done.stderr, done.stderr


def test_a_pushed_change_to_a_jobs_description_alone_stops_no_job(victim):
    """Every job's table was approved whole: a reworded description made sync itself wait, so not even
    the remote's fix could come in (helper-68). An approval saved with the description still holds."""
    store, attacker, _ = victim
    text = (attacker / "memctl.toml").read_text(encoding="utf-8")
    assert 'description = "' in text
    (attacker / "memctl.toml").write_text(text.replace('description = "', 'description = "(reworded) ', 1), encoding="utf-8")
    push(attacker, "")
    git(store, "pull", "-q", "--no-rebase", "origin", _branch(store))
    listed = json.loads(memctl(store, "trust", "--list", "--json").stdout)
    assert all(s["state"] == "approved" for s in listed["settings"]), listed
    assert memctl(store, "run-job", "--quiet", "daily-maintenance").returncode == 0
    record = next((Path.home() / ".config" / "memctl" / "trust").glob("*.json"))
    saved = json.loads(record.read_text(encoding="utf-8"))
    for key, value in saved["approved"].items():  # as an older memctl saved them: the description in
        if key.startswith("jobs."):
            saved["approved"][key] = json.dumps({**json.loads(value), "description": "old words"}, sort_keys=True)
    record.write_text(json.dumps(saved), encoding="utf-8")
    assert memctl(store, "run-job", "--quiet", "daily-maintenance").returncode == 0


def test_how_a_value_came_is_found_past_hundreds_of_later_commits(victim, tmp_path):
    """The reflog is read 256 entries at a time: a job's origin far down it is found all the same."""
    store, attacker, _ = victim
    push(attacker, EVIL.format(marker=tmp_path / "MARKER"))
    pull(store, "pull")
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(EVIL.format(marker=tmp_path / "MINE").replace("evil", "mine"))
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "my job")
    for n in range(300):
        git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-q", "--allow-empty", "-m", f"later {n}")
    assert memctl(store, "run-job", "--quiet", "mine").returncode == 0 and (tmp_path / "MINE").exists()
    done = memctl(store, "run-job", "--quiet", "evil")
    assert done.returncode == 1 and "it came in by git pull" in one_error(done)
    assert not (tmp_path / "MARKER").exists()


def test_what_the_local_user_writes_never_waits(tmp_path, fake_crontab):
    """init, hand edits in the work tree, commits made here (by hand or by memctl), schedule install."""
    store = tmp_path / "s"
    assert memctl(None, "init", str(store)).returncode == 0
    marker = tmp_path / "MARKER"
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(EVIL.format(marker=marker).replace("evil", "mine"))
    done = memctl(store, "run-job", "--quiet", "mine")  # uncommitted hand edit
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    marker.unlink()
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "my job")
    assert memctl(store, "ledger", "create", "notes", "--columns", "k,v").returncode == 0  # memctl's own commit
    assert memctl(store, "run-job", "--quiet", "mine").returncode == 0
    assert marker.exists()
    assert memctl(store, "doctor").stdout.count("waits for approval") == 0
    installed = memctl(store, "schedule", "install", "--scheduler", "cron")
    assert installed.returncode == 0 and "approved" not in installed.stderr, installed.stderr
    assert memctl(store, "trust").stderr == "memctl: nothing waits for approval\n"


def test_renaming_the_branch_as_github_asks_leaves_the_stores_own_jobs_approved(tmp_path):
    """`git branch -M main` (GitHub's set-up step for a new repository) logs HEAD going to no commit and
    back: init's own jobs then waited for approval ("it came in by git Branch"), and a job pushed by
    another clone after a rename must still wait."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    store = tmp_path / "s"
    assert memctl(None, "init", str(store)).returncode == 0
    git(store, "branch", "-M", "main")
    git(store, "remote", "add", "origin", str(remote))
    git(store, "push", "-q", "-u", "origin", "main")
    assert memctl(store, "sync").returncode == 0
    doctor = memctl(store, "doctor")
    assert "waits for approval" not in doctor.stdout + doctor.stderr, doctor.stdout
    assert memctl(store, "trust").stderr == "memctl: nothing waits for approval\n"
    attacker = tmp_path / "attacker"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(attacker)], check=True)
    push(attacker, EVIL.format(marker=tmp_path / "MARKER"))
    assert memctl(store, "sync").returncode == 0
    git(store, "branch", "-M", "trunk")
    waiting = memctl(store, "doctor").stdout
    assert "[jobs.evil] waits for approval" in waiting and "[jobs.state-update]" not in waiting, waiting


def test_a_fresh_clone_waits_until_its_user_approves_or_installs_the_jobs(victim, tmp_path, fake_crontab):
    store, attacker, remote = victim
    clone = tmp_path / "laptop"
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True)
    done = memctl(clone, "run-job", "--quiet", "state-update")
    assert done.returncode == 1 and "it came in by git clone" in one_error(done)
    doctor = memctl(clone, "doctor").stdout.splitlines()
    assert sum("warning: [jobs." in line and "waits for approval on this machine" in line for line in doctor) == 2
    assert [line.split(" at ")[0] for line in doctor if "refused" in line] == [
        "logs/state-update.log: error: job state-update: its last run was refused"]
    dry = memctl(clone, "schedule", "install", "--scheduler", "cron", "--dry-run")  # says what the install would approve
    assert dry.returncode == 0 and dry.stderr.count("would approve [jobs.") == 2, dry.stderr
    assert "it waits: it came in by git clone" in dry.stderr and "approved [jobs." not in dry.stderr
    installed = memctl(clone, "schedule", "install", "--scheduler", "cron")
    assert installed.returncode == 0, installed.stderr
    assert installed.stderr.count("approved [jobs.") == 2
    assert "run-job --quiet state-update" in fake_crontab.read_text()
    assert memctl(clone, "run-job", "--quiet", "state-update").returncode == 0


def test_schedule_install_expect_installs_and_approves_only_the_jobs_its_dry_run_showed(victim, tmp_path, fake_crontab):
    """`schedule install` approves every job that waits at that moment: a sync between its `--dry-run` and
    the install (a cron sync job) had the install approve a command nobody saw. The dry run now ends with
    the digest of what it would approve, and `--expect DIGEST` installs and approves nothing once that
    changed (the crontab untouched, the job still refused)."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    push(attacker, EVIL.format(marker=tmp_path / "harmless"))
    pull(store, "sync")
    dry = memctl(store, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    reviewed = plan["waiting_digest"]
    assert len(reviewed) == 64 and plan["approved"] == [] and not fake_crontab.exists()
    assert reviewed == json.loads(memctl(store, "trust", "--list", "jobs.evil", "--json").stdout)["waiting_digest"]
    text = memctl(store, "schedule", "install", "--scheduler", "cron", "--dry-run")
    assert f"memctl: `memctl schedule install --expect {reviewed}` installs and approves exactly these\n" in text.stderr
    assert memctl(store, "schedule", "install", "--scheduler", "cron", "--dry-run", "--expect", reviewed).returncode == 0
    (attacker / "memctl.toml").write_text((attacker / "memctl.toml").read_text(encoding="utf-8").replace(
        str(tmp_path / "harmless"), str(marker)), encoding="utf-8")
    git(attacker, *ID, "commit", "-qam", "tidy up again")
    git(attacker, "push", "-q", "origin", "HEAD")
    pull(store, "sync")
    for extra in (["--dry-run"], []):
        refused = memctl(store, "schedule", "install", "--scheduler", "cron", "--expect", reviewed, *extra)
        assert refused.returncode == 1, refused.stderr
        assert one_error(refused).startswith(f"memctl: error: what waits for approval is not what was reviewed with digest "
                                             f"{reviewed[:16]}...: nothing was installed or approved")
        assert "memctl schedule install --dry-run" in refused.stderr and again_digest(store) not in refused.stderr
    assert not fake_crontab.exists()  # nothing installed
    assert memctl(store, "run-job", "--quiet", "evil").returncode == 1 and not marker.exists()  # nothing approved
    assert memctl(store, "schedule", "install", "--scheduler", "cron", "--expect", "").returncode == 2
    again = json.loads(memctl(store, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json").stdout)["waiting_digest"]
    done = memctl(store, "schedule", "install", "--scheduler", "cron", "--expect", again, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["approved"] == ["jobs.evil"] and "run-job --quiet evil" in fake_crontab.read_text()
    assert json.loads(memctl(store, "schedule", "install", "--scheduler", "cron", "--dry-run", "--json").stdout)[
        "waiting_digest"] is None
    again_run = memctl(store, "schedule", "install", "--scheduler", "cron", "--expect", again)  # nothing waits: no error
    assert again_run.returncode == 0 and "approved [" not in again_run.stderr, again_run.stderr


@pytest.fixture
def fake_crontab(tmp_path, monkeypatch):
    """A `crontab` first on PATH that keeps the table in a file; the real one is never touched."""
    table = tmp_path / "crontab.txt"
    fake = tmp_path / "fakebin" / "crontab"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\ncase "$1" in\n  -l) [ -f {table} ] && cat {table} || {{ echo "no crontab for x" >&2; exit 1; }} ;;\n'
                    f'  -) cat > {table} ;;\nesac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    return table


def test_a_pattern_and_an_embedder_from_another_clone_are_left_out_until_approved(victim, tmp_path):
    store, attacker, _ = victim
    push(attacker, '\n[import]\nredact_patterns = ["project-[a-z]+"]\n\n[embedding]\nbackend = "sentence-transformers"\nmodel = "./models/evil"\n')
    pull(store, "pull")
    assert embed.settings_for(open_store(store)).model == embed.DEFAULT_MODEL  # the default answers meanwhile
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "the code name is project-falcon", "ts": "2026-11-01T10:00:00Z"}) + "\n")
    done = memctl(store, "episode", "import", "messages", str(transcript), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert '[import] redact_patterns "project-[a-z]+" in memctl.toml is left out' in done.stderr
    assert "project-falcon" in json.loads(done.stdout)["episodes"][0]["description"]
    assert memctl(store, "trust").returncode == 0
    done = memctl(store, "episode", "import", "messages", str(transcript), "--dry-run", "--json")
    assert "left out" not in done.stderr
    assert "project-falcon" not in done.stdout and "[REDACTED:pattern]" in json.loads(done.stdout)["episodes"][0]["description"]
    assert embed.settings_for(open_store(store)).model == "./models/evil"


@pytest.mark.parametrize("how", ["sync", "pull"])
def test_a_redaction_pattern_removed_by_another_clone_is_still_applied_until_approved(victim, tmp_path, how):
    """Only additions waited: another clone emptied `redact_patterns`, the victim's next import let the
    secret through and sync pushed it, without a word from sync or doctor (helper-68)."""
    store, attacker, _ = victim
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[import]\nredact_patterns = ["ACME-[0-9]{6}"]\n')
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "my pattern")
    assert memctl(store, "sync").returncode == 0
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "the key is ACME-777777", "ts": "2026-11-01T10:00:00Z"}) + "\n")

    def imported() -> subprocess.CompletedProcess:
        done = memctl(store, "episode", "import", "messages", str(transcript), "--dry-run", "--json")
        assert done.returncode == 0, done.stderr
        return done

    assert "ACME-777777" not in imported().stdout
    git(attacker, "pull", "-q", "origin", _branch(attacker))
    text = (attacker / "memctl.toml").read_text(encoding="utf-8")
    (attacker / "memctl.toml").write_text(text.replace('redact_patterns = ["ACME-[0-9]{6}"]', "redact_patterns = []"), encoding="utf-8")
    git(attacker, *ID, "commit", "-qam", "tidy")
    git(attacker, "push", "-q", "origin", "HEAD")
    if how == "sync":
        done = memctl(store, "sync")
        assert done.returncode == 0
        assert 'the removal of [import] redact_patterns "ACME-[0-9]{6}" in memctl.toml waits for approval' in done.stderr, done.stderr
    else:
        git(store, "pull", "-q", "--no-rebase", "origin", _branch(store))
    for _ in range(2):
        done = imported()
        assert "ACME-777777" not in done.stdout and "[REDACTED:pattern]" in done.stdout
        assert "approved here were taken out of memctl.toml by a change not made on this machine ('ACME-[0-9]{6}')" in done.stderr
    doctor = memctl(store, "doctor")
    assert 'the removal of [import] redact_patterns "ACME-[0-9]{6}" waits for approval' in doctor.stdout, doctor.stdout
    assert memctl(store, "trust").returncode == 0  # the local user agrees: the pattern goes
    done = imported()
    assert "ACME-777777" in done.stdout and "taken out" not in done.stderr
    assert "removal" not in memctl(store, "doctor").stdout


def test_a_redaction_pattern_the_local_user_removes_is_gone_at_once(victim, tmp_path):
    store, _, _ = victim
    with open(store / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[import]\nredact_patterns = ["ACME-[0-9]{6}"]\n')
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "my pattern")
    assert "ACME" in memctl(store, "trust", "--list").stdout
    text = (store / "memctl.toml").read_text(encoding="utf-8")
    (store / "memctl.toml").write_text(text.replace('redact_patterns = ["ACME-[0-9]{6}"]', "redact_patterns = []"), encoding="utf-8")
    listed = memctl(store, "trust", "--list", "--json")
    assert "ACME" not in listed.stdout, listed.stdout  # a hand edit: no waiting removal
    git(store, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "no pattern")
    assert "ACME" not in memctl(store, "trust", "--list", "--json").stdout


def test_a_catastrophic_redaction_pattern_cannot_hang_an_import(root, tmp_path):
    """`(a+)+$` on 'aaaa…b' backtracks for hours in Python's re: the import stops within its time limit."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[import]\nredact_patterns = ["(a+)+$"]\n')
    git(root, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qam", "a pattern")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "a" * 40 + "b", "ts": "2026-11-01T10:00:00Z"}) + "\n")
    done = memctl(root, "episode", "import", "messages", str(transcript), timeout=60)
    assert done.returncode == 2
    line = one_error(done)
    assert "redact_patterns '(a+)+$' took more than 1 s on one text" in line and "nothing was written" in line
    assert json.loads(memctl(root, "episode", "list", "--json").stdout) == []
    assert git(root, "status", "--porcelain") == ""


def test_the_time_limit_holds_off_the_main_thread_and_keeps_an_outer_timer(monkeypatch):
    import re
    import signal
    import threading

    from memctl.errors import BadInput
    from memctl.importers import redact

    outcome = {}

    def off_main():
        try:
            redact.bounded_spans(re.compile(r"(a+)+$"), "a" * 40 + "b", seconds=0.3)
        except BadInput as exc:
            outcome["error"] = exc.message
        outcome["spans"] = redact.bounded_spans(re.compile("秘密"), "これは秘密、あれも秘密")

    thread = threading.Thread(target=off_main)
    thread.start()
    thread.join(30)
    assert "took more than 0.3 s" in outcome["error"] and outcome["spans"] == [(3, 5), (9, 11)]
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        assert redact.bounded_spans(re.compile("b+"), "abba") == [(1, 3)]
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 3.0 < left <= 5.0  # the outer timer runs on, as it was
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []


def test_trust_refuses_a_key_that_is_no_executable_setting(root):
    done = memctl(root, "trust", "jobs.nope")
    assert done.returncode == 2 and "'jobs.nope' is not an executable setting of memctl.toml" in one_error(done)
    assert memctl(root, "trust", "--json").stdout.startswith('{"settings": [')


def test_a_pushed_gitattributes_and_git_config_run_nothing_here(victim, tmp_path):
    """Merge and filter drivers: git runs only those this clone's or this user's git config defines, and no commit
    brings config. The attacker pushes `.gitattributes` pointing every markdown file at a driver and a filter
    named `evil`, and a committed `.gitconfig` and `.git-config` defining them; both sides changed one fact, so
    the merge needs a driver. Neither `memctl sync` nor a plain `git pull` runs them."""
    store, attacker, _ = victim
    marker = tmp_path / "MARKER"
    assert memctl(store, "remember", "shared", "--description", "共有の事実", "--type", "project").returncode == 0
    assert memctl(store, "sync").returncode == 0
    git(attacker, "pull", "-q", "--no-rebase", "origin", _branch(attacker))
    fact = attacker / "memory" / "shared.md"
    fact.write_text(fact.read_text(encoding="utf-8").replace("共有の事実", "攻撃者が書き換えた事実"), encoding="utf-8")
    run = f"sh -c 'echo pwned > {marker}'"
    with open(attacker / ".gitattributes", "a", encoding="utf-8") as handle:
        handle.write("*.md merge=evil filter=evil diff=evil\n*.tsv merge=evil filter=evil\n")
    for name in (".gitconfig", ".git-config"):
        (attacker / name).write_text(f'[merge "evil"]\n\tdriver = {run}\n[filter "evil"]\n\tsmudge = {run}\n\tclean = {run}\n'
                                     f'[diff "evil"]\n\ttextconv = {run}\n', encoding="utf-8")
    git(attacker, "add", "-A")
    git(attacker, *ID, "commit", "-qm", "attributes")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert memctl(store, "remember", "shared", "--update", "--description", "被害者が更新した事実").returncode == 0
    done = memctl(store, "sync")
    assert "Traceback" not in done.stderr and not marker.exists(), done.stderr
    subprocess.run(["git", "-C", str(store), "pull", "-q", "--no-rebase", "origin", _branch(store)], capture_output=True)
    memctl(store, "doctor")
    git(store, "log", "-p", "-1")
    assert not marker.exists()


def test_how_a_value_came_names_a_reflog_entry_without_a_message():
    """helper-56: in a linked worktree doctor said "it came in by git  (7bc83e80d3)": `git worktree add`
    leaves a reflog entry with no message."""
    from memctl.trust import _verb

    assert [_verb(a) for a in ("pull: Fast-forward", "commit (merge): Merge x", "reset: moving to HEAD~1")] == [
        "pull", "commit (merge)", "reset"]
    assert _verb("") == "worktree add (or another command that left no message)"
