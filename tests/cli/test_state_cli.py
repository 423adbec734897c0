"""`memctl state update|show|history|check`: the STATE.md scenario of docs/JOBS.md and its bad input."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timedelta

import pytest

from conftest import cli, drop_default_jobs, git, memctl

NUMBERS = '{"completed": 48, "in_progress": 0, "pending": 0, "approvals": 0}'
TEMPLATE = 'message = "auto: STATE.md 自動更新 (日付:{date} 完了:{completed} 進行中:{in_progress} 未着手:{pending} 承認待ち:{approvals})"\n'


def _snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".memctl" not in p.parts}


def test_update_from_stdin_commits_the_numbers_and_history_reads_them_back(root):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[state]\n" + TEMPLATE)
    r = cli(root, "state", "update", "--from-json", "-", input=NUMBERS, env={"MEMCTL_NOW": "2026-10-26T09:00:00+09:00"})
    first = "auto: STATE.md 自動更新 (日付:2026-10-26 完了:48 進行中:0 未着手:0 承認待ち:0)"
    assert (r.exit_code, r.stdout, r.stderr) == (0, "state/STATE.md\n", f"memctl: committed: {first}\n")
    assert git(root, "log", "-1", "--format=%s").strip() == first
    assert (root / "state" / "STATE.md").read_text(encoding="utf-8").startswith(
        "---\nupdated: 2026-10-26T09:00:00+09:00\ngenerator: memctl state update\nnumbers:\n  completed: 48\n")

    r = cli(root, "state", "update", "--from-json", "-", input=NUMBERS.replace("48", "49"),
            env={"MEMCTL_NOW": "2026-10-26T09:01:00+09:00"})
    assert r.exit_code == 0
    second = first.replace("完了:48", "完了:49")
    assert git(root, "log", "-2", "--format=%s", "--", "state/STATE.md").splitlines() == [second, first]

    r = cli(root, "state", "history", "--json")
    assert r.exit_code == 0
    found = json.loads(r.stdout)
    assert [(v["subject"], v["updated"], v["numbers"]["completed"], v["numbers"]["approvals"]) for v in found] == [
        (first, "2026-10-26T09:00:00+09:00", 48, 0), (second, "2026-10-26T09:01:00+09:00", 49, 0)]
    assert found[1]["commit"] == git(root, "rev-parse", "HEAD").strip()

    r = cli(root, "state", "history")
    head = git(root, "rev-parse", "--short=7", "HEAD").strip()
    assert r.stdout.splitlines()[1] == (f"{head}\t2026-10-26T09:01:00+09:00\tcompleted:49 in_progress:0 pending:0 "
                                        "approvals:0 facts:0 facts.changed_today:0 episodes.today:0")


def test_update_from_a_file_with_a_scope_and_a_note(root, tmp_path):
    numbers = tmp_path / "numbers.json"
    numbers.write_text('{"open": 3}', encoding="utf-8")
    r = cli(root, "state", "update", "--name", "blog", "--from-json", str(numbers), "--note", "launch week", "--json",
            env={"MEMCTL_NOW": "2026-10-26T09:00:00+09:00"})
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert (data["path"], data["updated"], data["message"]) == (
        "state/blog/STATE.md", "2026-10-26T09:00:00+09:00", "state: update state/blog/STATE.md (date:2026-10-26 open:3)")
    assert data["commit"] == git(root, "rev-parse", "HEAD").strip()
    shown = cli(root, "state", "show", "--name", "blog")
    assert shown.stdout == (root / "state" / "blog" / "STATE.md").read_text(encoding="utf-8")
    assert shown.stdout.endswith("\n## Note\nlaunch week\n")
    as_json = json.loads(cli(root, "state", "show", "--name", "blog", "--json").stdout)
    assert as_json["numbers"]["open"] == 3 and as_json["body"].startswith("# STATE (blog)\n")


def test_an_update_that_changes_nothing_says_so_and_exits_0(root, pinned_clock):
    """The same numbers within the same second render the same STATE.md: there is nothing to commit, and the
    command says "unchanged", never "written, not committed" (which, with commits on, would mean a change lost)."""
    said = [cli(root, "state", "update").stderr for _ in range(3)]
    head = git(root, "rev-parse", "HEAD")
    again = cli(root, "state", "update")
    assert again.exit_code == 0 and git(root, "rev-parse", "HEAD") == head
    assert again.stderr == "memctl: unchanged: state/STATE.md is as the last update left it (nothing to commit)\n"
    assert said[0].startswith("memctl: committed: state: update state/STATE.md")
    assert git(root, "status", "--porcelain") == ""


def test_no_commit(root):
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "state", "update", "--no-commit")
    assert (r.exit_code, r.stderr) == (0, "memctl: written, not committed\n")
    assert git(root, "rev-parse", "HEAD") == head



def test_an_update_refuses_to_overwrite_a_hand_edit_of_state_md_that_is_not_committed(root):
    """STATE.md is overwritten on every update: a hand edit not committed was lost, in no commit. Refused now, as
    every writer refuses uncommitted hand edits; once it is committed (or discarded) the update runs."""
    assert cli(root, "state", "update").exit_code == 0
    path = root / "state" / "STATE.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n手で書いた注記: 来週は移行作業\n", encoding="utf-8")
    edited, head = path.read_bytes(), git(root, "rev-parse", "HEAD")
    r = cli(root, "state", "update", input=NUMBERS)
    assert r.exit_code == 1 and r.stderr.startswith("memctl: error: state/STATE.md has uncommitted changes (hint: commit or discard"), r.stderr
    assert (path.read_bytes(), git(root, "rev-parse", "HEAD")) == (edited, head)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "my note")
    assert cli(root, "state", "update", input=NUMBERS).exit_code == 0
    assert "手で書いた注記" in git(root, "log", "-p", "--format=", "--", "state/STATE.md")  # kept in history
    assert cli(root, "state", "update", "--no-commit").exit_code == 0  # --no-commit: written over, as asked
    assert cli(root, "state", "update", "--no-commit").exit_code == 0

def test_check_fresh_prints_nothing(root):
    r = cli(root, "state", "check", "--max-age", "24h")  # no STATE.md at all: not found, never a silent pass
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr == "memctl: error: no state/STATE.md yet, so nothing to check (hint: memctl state update)\n"
    cli(root, "state", "update")
    r = cli(root, "state", "check", "--max-age", "24h")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")


def test_check_stale_by_updated_and_by_mtime(root):
    cli(root, "state", "update")
    path = root / "state" / "STATE.md"
    old = (datetime.now().astimezone() - timedelta(hours=25)).isoformat(timespec="seconds")
    text = path.read_text(encoding="utf-8")
    start = text.index("updated: ") + len("updated: ")
    path.write_text(text[:start] + old + text[text.index("\n", start):], encoding="utf-8")

    scoped = root / "state" / "blog" / "STATE.md"
    scoped.parent.mkdir()
    scoped.write_text("# STATE\nwritten by hand, no frontmatter\n", encoding="utf-8")
    then = time.time() - 25 * 3600
    os.utime(scoped, (then, then))
    mtime = datetime.fromtimestamp(int(then)).astimezone().isoformat(timespec="seconds")

    r = cli(root, "state", "check", "--max-age", "24h")
    assert (r.exit_code, r.stderr) == (1, "")
    assert r.stdout == (f"STALE: state/STATE.md (updated {old}, 25h ago)\n"
                        f"STALE: state/blog/STATE.md (updated {mtime}, 25h ago)\n")
    assert cli(root, "state", "check", "--max-age", "26h").exit_code == 0

    r = cli(root, "state", "check", "--json")
    data = json.loads(r.stdout)
    assert r.exit_code == 1 and data["ok"] is False
    assert [(f["path"], f["source"], f["stale"], f["max_age"]) for f in data["files"]] == [
        ("state/STATE.md", "updated", True, "24h"), ("state/blog/STATE.md", "mtime", True, "24h")]

def test_an_updated_line_in_the_future_or_not_a_date_is_not_believed_and_doctor_says_so(root):
    """`updated: 2099-…` was never stale and `updated: not-a-date` fell back to the mtime, both without a word.
    Now neither dates the snapshot (its last commit does), and doctor warns about each."""
    now = {"MEMCTL_NOW": "2026-10-27T09:00:00+09:00"}
    assert cli(root, "state", "update", env={"MEMCTL_NOW": "2026-10-25T09:00:00+09:00"}).exit_code == 0
    path = root / "state" / "STATE.md"
    text = path.read_text(encoding="utf-8")
    start = text.index("updated: ") + len("updated: ")
    for stated, why in (("2099-01-01T00:00:00+09:00", "is in the future"), ("いつか", "is not an ISO-8601 date")):
        path.write_text(text[:start] + stated + text[text.index("\n", start):], encoding="utf-8")
        subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "hand edit"],
                       check=True, env={**os.environ, "GIT_COMMITTER_DATE": "2026-10-25T09:00:00+09:00",
                                        "GIT_AUTHOR_DATE": "2026-10-25T09:00:00+09:00"})
        r = cli(root, "state", "check", "--json", env=now)
        [found] = json.loads(r.stdout)["files"]
        assert (r.exit_code, found["source"], found["stale"], found["age"]) == (1, "commit", True, "48h"), r.stdout
        doctor = cli(root, "doctor", env=now).stdout
        assert f"state/STATE.md: warning: updated: " in doctor and why in doctor, doctor
        assert "its age is taken from its last commit (or mtime) instead" in doctor

@pytest.mark.parametrize("args, stdin, code, message", [
    (["state", "update", "--from-json", "-"], '{"completed": 48,', 2, "memctl: error: stdin: invalid JSON: Expecting property name enclosed in double quotes (line 1, column 18) (hint: give one JSON object, e.g. {\"completed\": 48})"),
    (["state", "update", "--from-json", "-"], '[48]', 2, "memctl: error: stdin: expected a JSON object of numbers, got list (hint: e.g. {\"completed\": 48, \"in_progress\": 0})"),
    (["state", "update", "--from-json", "-"], '{"log": "line 1\\nline 2"}', 2, "memctl: error: stdin: 'log' must be a number, not str (hint: STATE.md holds summarised numbers, never raw logs)"),
    (["state", "update", "--from-json", "-"], b'\xff\xfe', 2, "memctl: error: stdin: not valid UTF-8 (hint: send it as UTF-8)"),
    (["state", "update", "--from-json", "-"], '{"big": 1e400}', 2, "memctl: error: stdin: 'big' must be a finite number, not inf "
     "(hint: give a number a double can hold (up to about 1.8e308))"),
    (["state", "update", "--from-json", "missing.json"], None, 3, "memctl: error: --from-json missing.json: no such file (hint: check the path (relative to the current folder))"),
    (["state", "update", "--name", "a/b"], None, 2, "memctl: error: invalid state scope 'a/b' (hint: 1-80 ASCII letters, digits, - or _, not - first (no /, no ..))"),
    (["state", "update", "--name", ".."], None, 2, "memctl: error: invalid state scope '..' (hint: 1-80 ASCII letters, digits, - or _, not - first (no /, no ..))"),
    (["state", "show", "--name", "a/b"], None, 2, "memctl: error: invalid state scope 'a/b' (hint: 1-80 ASCII letters, digits, - or _, not - first (no /, no ..))"),
    (["state", "check", "--max-age", "0s"], None, 2, "memctl: error: --max-age: '0s' must be more than 0 seconds (hint: a number and a unit: 30m, 24h, 2d, 1w, 1h30m)"),
    (["state", "check", "--max-age", "24"], None, 2, "memctl: error: --max-age: '24' is not a duration (hint: a number and a unit: 30m, 24h, 2d, 1w, 1h30m)"),
    (["state", "show"], None, 3, "memctl: error: no state/STATE.md yet (hint: memctl state update)"),
    (["state", "history", "--name", "blog"], None, 3, "memctl: error: no state/blog/STATE.md yet (hint: memctl state update --name blog)"),
])
def test_bad_input_one_line_and_nothing_written(root, args, stdin, code, message):
    before = _snapshot(root)
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, *args, input=stdin)
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", message + "\n")
    assert _snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == head


def test_doctor_reports_a_stale_state_and_a_stale_job(root):
    drop_default_jobs(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.state]\ncommand = "state update"\nhour = 9\n[jobs.idle]\ncommand = "doctor"\nhour = 3\n')
    assert cli(root, "run-job", "state", env={"MEMCTL_NOW": "2026-10-26T09:00:00+09:00"}).exit_code == 0
    r = cli(root, "doctor", env={"MEMCTL_NOW": "2026-10-27T11:00:00+09:00"})
    assert r.exit_code == 1
    assert r.stdout == (
        "state/STATE.md: error: stale: updated 2026-10-26T09:00:00+09:00, 26h ago "
        "(limit 24h; is the job that runs `memctl state update` alive?)\n"
        "logs/state.log: error: job state: last success 2026-10-26T09:00:00+09:00, 26h ago; "
        "its schedule (0 9 * * *) allows 25h\n"
        "logs/idle.log: warning: job idle has never run on this machine (memctl schedule install, or memctl run-job idle)\n"
    )
    r = cli(root, "doctor", env={"MEMCTL_NOW": "2026-10-26T12:00:00+09:00"})
    assert (r.exit_code, r.stdout) == (0, "logs/idle.log: warning: job idle has never run on this machine "
                                          "(memctl schedule install, or memctl run-job idle)\n")


def test_a_summary_of_a_ledger_that_does_not_exist_names_the_setting(root):
    """It said only "no ledger named 'nosuch'" with a hint to create one: the setting in memctl.toml went unnamed."""
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[[state.summaries]]\nkind = "ledger"\nledger = "nosuch"\n')
    r = cli(root, "state", "update", "--no-commit")
    assert (r.exit_code, r.stderr) == (3, "memctl: error: memctl.toml: [state] summary of ledger 'nosuch': no ledger named "
                                          "'nosuch' (hint: create the ledger, or fix ledger = 'nosuch' in [[state.summaries]])\n")


def test_a_no_commit_update_does_not_stop_the_next_committing_one(root):
    """One documented `state update --no-commit` made every later committing update (the daily job) fail
    with "state/STATE.md has uncommitted changes": memctl's own snapshot was taken for a hand edit. A
    file memctl wrote is replaced and committed now; a hand edit is still refused."""
    env = {"MEMCTL_NOW": "2026-11-29T09:00:00+09:00"}
    assert cli(root, "state", "update", env=env).exit_code == 0
    assert cli(root, "state", "update", "--no-commit", env={"MEMCTL_NOW": "2026-11-29T10:00:00+09:00"}).exit_code == 0
    assert git(root, "status", "--porcelain").split() == ["M", "state/STATE.md"]
    done = cli(root, "state", "update", env={"MEMCTL_NOW": "2026-11-30T09:00:00+09:00"})
    assert done.exit_code == 0, done.stderr
    assert git(root, "status", "--porcelain") == "" and "updated: 2026-11-30T09:00:00+09:00" in git(root, "show", "HEAD:state/STATE.md")
    path = root / "state" / "STATE.md"
    path.write_text(path.read_text(encoding="utf-8") + "手で書いたメモ\n", encoding="utf-8")
    done = cli(root, "state", "update", env={"MEMCTL_NOW": "2026-11-30T10:00:00+09:00"})
    assert done.exit_code == 1 and "state/STATE.md has uncommitted changes" in done.stderr
    assert "手で書いたメモ" in path.read_text(encoding="utf-8")


def test_a_ledger_with_conflict_markers_stops_the_update_instead_of_counting_them_as_rows(root):
    """`state update` counted a merge conflict's marker lines as ledger rows (`ledger.n.rows: 6` for one
    row and one conflict) and committed that snapshot with exit 0. It refuses, as writers do."""
    assert cli(root, "ledger", "create", "n", "--columns", "a,b").exit_code == 0
    assert cli(root, "ledger", "append", "n", "a=1", "b=x").exit_code == 0
    path = root / "ledgers" / "n.tsv"
    path.write_bytes(path.read_bytes() + "<<<<<<< HEAD\n2\ty\n=======\n3\tz\n>>>>>>> theirs\n".encode())
    head = git(root, "rev-parse", "HEAD")
    done = cli(root, "state", "update")
    assert done.exit_code == 1 and "ledgers/n.tsv:3: unresolved merge conflict markers" in done.stderr, done.stderr
    assert git(root, "rev-parse", "HEAD") == head and not (root / "state" / "STATE.md").exists()


def _at(root, when: str, *args: str, zone: str = "America/New_York", ok=(0,), **env):
    """memctl as a real process on a wall clock of `zone` (its summer time rules), pinned at `when`."""
    done = memctl(root, *args, env={"TZ": zone, "MEMCTL_NOW": when, **env})
    assert done.returncode in ok, done.stderr
    return done


def _numbers(root) -> str:
    text = (root / "state" / "STATE.md").read_text(encoding="utf-8")
    return " ".join(line.strip() for line in text.splitlines() if line.strip().startswith(("episodes.today:", "facts.changed_today:")))


def test_today_begins_at_local_midnight_on_the_days_the_clocks_move(root):
    """helper-85: "today" began at now's offset applied to midnight. In New York on the spring day the
    clocks go forward (EST at midnight, EDT at 9:00) Saturday 23:30's episode counted as Sunday's; on the
    autumn day (EDT at midnight, EST at 9:00) what was done from 00:00 to 01:00 EDT was not counted."""
    _at(root, "2027-03-13T23:30:00-05:00", "episode", "add", "土曜の夜の決定", "-t", "decision")
    _at(root, "2027-03-14T00:30:00-05:00", "episode", "add", "日曜になってからの決定", "-t", "decision")
    _at(root, "2027-03-14T09:00:00-04:00", "state", "update", "--no-commit")
    assert _numbers(root) == "facts.changed_today: 0 episodes.today: 1"
    _at(root, "2027-11-07T00:30:00-04:00", "episode", "add", "sunday 00:30 EDT", "-t", "decision")
    _at(root, "2027-11-07T00:30:00-04:00", "remember", "dst-fact", "-d", "written 00:30 EDT on the day summer time ends")
    _at(root, "2027-11-07T09:00:00-05:00", "state", "update", "--no-commit")
    assert _numbers(root) == "facts.changed_today: 1 episodes.today: 1"
    # helper-86: where summer time begins at midnight (Santiago) the day has no 00:00: it begins at 01:00 -03:00,
    # not at 23:00 the day before (Saturday's 23:30 episode was Sunday's)
    _at(root, "2026-09-05T23:30:00-04:00", "episode", "add", "sábado por la noche", "-t", "decision", zone="America/Santiago")
    _at(root, "2026-09-06T09:00:00-03:00", "state", "update", "--no-commit", zone="America/Santiago")
    assert _numbers(root) == "facts.changed_today: 0 episodes.today: 0"


def test_the_night_the_clocks_go_back_a_daily_snapshot_is_not_stale_before_its_next_run(root):
    """helper-85: a daily 09:00 update is 25 hours after the last on the day summer time ends, and `state
    check` (limit 24h) called it stale from 08:00 to 09:00 EST, doctor too. The hour the clock was set back
    is added to the limit; the next morning it is 24 hours again."""
    _at(root, "2027-11-06T09:00:00-04:00", "state", "update")
    assert _at(root, "2027-11-07T08:30:00-05:00", "state", "check").stdout == ""
    late = _at(root, "2027-11-07T10:30:00-05:00", "state", "check", ok=(1,))
    assert late.stdout == "STALE: state/STATE.md (updated 2027-11-06T09:00:00-04:00, 26h30m ago)\n"
    _at(root, "2027-11-13T09:00:00-05:00", "state", "update")
    assert _at(root, "2027-11-14T09:30:00-05:00", "state", "check", ok=(1,)).stdout.startswith("STALE:")


def test_a_snapshot_and_a_job_dated_in_the_future_by_a_wrong_clock_are_stale_not_fresh(root):
    """helper-85: a machine whose clock ran months ahead ran the state job once, then the clock was put right
    and the job never ran again. `updated:` in the future falls back to the commit, dated in the future by
    the same clock: the age was cut to 0, and `state check`, `schedule status` and doctor called a dead job
    healthy until that date came."""
    drop_default_jobs(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.state]\ncommand = "state update"\nhour = 9\n')
    ahead = "2027-06-01T09:00:00+09:00"
    _at(root, ahead, "run-job", "state", zone="Asia/Tokyo", GIT_COMMITTER_DATE=ahead, GIT_AUTHOR_DATE=ahead)
    now = "2027-03-01T09:00:00+09:00"
    check = _at(root, now, "state", "check", zone="Asia/Tokyo", ok=(1,))
    assert check.stdout == ("STALE: state/STATE.md (updated 2027-06-01T09:00:00+09:00: in the future, by a clock that "
                            "was wrong; its age is unknown until the next update)\n"), check.stdout
    [found] = json.loads(_at(root, now, "state", "check", "--json", zone="Asia/Tokyo", ok=(1,)).stdout)["files"]
    assert (found["stale"], found["ahead"], found["age_seconds"], found["source"]) == (True, True, 0, "commit"), found
    [job] = json.loads(_at(root, now, "schedule", "status", "--json", zone="Asia/Tokyo").stdout)
    assert job["state"] == "stale", job
    doctor = _at(root, now, "doctor", zone="Asia/Tokyo", ok=(1,)).stdout
    assert ("state/STATE.md: error: stale: updated 2027-06-01T09:00:00+09:00, in the future (its commit's date, by a "
            "clock that was wrong): its age is unknown") in doctor, doctor
    assert ("logs/state.log: error: job state: last success 2027-06-01T09:00:00+09:00 is in the future (a clock that "
            "was wrong then): no proof that it runs; its next run on time dates it") in doctor, doctor
    _at(root, now, "run-job", "state", zone="Asia/Tokyo")  # one run on time puts it right
    assert _at(root, "2027-03-01T10:00:00+09:00", "state", "check", zone="Asia/Tokyo").stdout == ""


def test_a_no_commit_preview_does_not_take_the_new_rows_from_the_next_committed_snapshot(root):
    """helper-85: `ledger.<name>.new` counted from the file on disk, a `--no-commit` preview's: the 5 rows
    appended before the preview were "new" in no commit, and git's history said 0 new that day."""
    assert cli(root, "ledger", "create", "sales", "--columns", "date,amount").exit_code == 0
    assert cli(root, "state", "update", env={"MEMCTL_NOW": "2027-01-01T09:00:00+09:00"}).exit_code == 0
    cli(root, "ledger", "append", "sales", "-", input="".join(f"2027-01-01\t{n}\n" for n in range(5)).encode())
    preview = cli(root, "state", "update", "--no-commit", env={"MEMCTL_NOW": "2027-01-02T08:30:00+09:00"})
    assert preview.exit_code == 0 and "ledger.sales.new: 5" in (root / "state" / "STATE.md").read_text(encoding="utf-8")
    assert cli(root, "state", "update", env={"MEMCTL_NOW": "2027-01-02T09:00:00+09:00"}).exit_code == 0
    history = json.loads(cli(root, "state", "history", "--json").stdout)
    assert [(v["numbers"]["ledger.sales.rows"], v["numbers"].get("ledger.sales.new")) for v in history] == [(0, None), (5, 5)], history


def test_a_no_commit_preview_before_the_first_snapshot_gives_the_first_committed_one_no_new_rows(root):
    """helper-86: with no STATE.md committed yet, the preview on disk was taken as the previous snapshot."""
    assert cli(root, "ledger", "create", "sales", "--columns", "date,amount").exit_code == 0
    cli(root, "ledger", "append", "sales", "-", input=b"2027-01-01\t1\n2027-01-01\t2\n")
    assert cli(root, "state", "update", "--no-commit", env={"MEMCTL_NOW": "2027-01-01T09:00:00+09:00"}).exit_code == 0
    cli(root, "ledger", "append", "sales", "-", input=b"2027-01-01\t3\n")
    assert cli(root, "state", "update", env={"MEMCTL_NOW": "2027-01-01T10:00:00+09:00"}).exit_code == 0
    [first] = json.loads(cli(root, "state", "history", "--json").stdout)
    assert first["numbers"]["ledger.sales.rows"] == 3 and "ledger.sales.new" not in first["numbers"], first


def test_placeholder_dates_are_one_line_or_read_as_what_they_stand_for_not_a_traceback(root):
    """helper-86: `updated: 0001-01-01T00:00:00Z` (Go's zero time) west of UTC made `state check` and doctor
    overflow (its local offset); `expires: 9999-12-31` (.NET's MaxValue) made `state update` overflow (its next
    day), `list` and `recall` too. The first is an unbelievable `updated:` (the commit dates the snapshot), the
    second a fact that never expires."""
    assert cli(root, "remember", "forever", "-d", "永遠に有効な事実").exit_code == 0
    fact = root / "memory" / "forever.md"
    fact.write_text(fact.read_text(encoding="utf-8").replace("metadata:\n", "metadata:\n  expires: 9999-12-31\n"), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a hand edit")
    done = _at(root, "2027-01-01T09:00:00-05:00", "state", "update")
    assert "  facts: 1\n" in (root / "state" / "STATE.md").read_text(encoding="utf-8") and "Traceback" not in done.stderr
    assert "forever" in _at(root, "2027-01-01T09:00:00-05:00", "list").stdout
    path = root / "state" / "STATE.md"
    text = path.read_text(encoding="utf-8")
    start = text.index("updated: ") + len("updated: ")
    path.write_text(text[:start] + "0001-01-01T00:00:00+00:00" + text[text.index("\n", start):], encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "zero time")
    check = _at(root, "2027-01-01T10:00:00-05:00", "state", "check", ok=(0, 1))
    assert "Traceback" not in check.stderr and check.stderr == "", check.stderr
    assert "Traceback" not in _at(root, "2027-01-01T10:00:00-05:00", "doctor", ok=(0, 1)).stderr


def test_an_expired_fact_not_archived_yet_is_not_counted_among_the_facts(root):
    """helper-85: STATE.md's `facts` counted a fact past its `expires`, which recall, context and MEMORY.md
    no longer show (init declares no job that archives it: it stayed in the count for good)."""
    when = {"MEMCTL_NOW": "2026-12-30T09:00:00+09:00"}
    assert cli(root, "remember", "deploy-freeze", "-d", "年末はデプロイしない", "--expires", "2026-12-31", env=when).exit_code == 0
    assert cli(root, "remember", "deploy-day", "-d", "Deploys on Tuesdays", env=when).exit_code == 0
    assert cli(root, "state", "update", "--no-commit", env=when).exit_code == 0
    text = (root / "state" / "STATE.md").read_text(encoding="utf-8")
    assert "  facts: 2\n" in text and "facts.expired" not in text, text
    assert cli(root, "state", "update", "--no-commit", env={"MEMCTL_NOW": "2027-01-01T09:00:00+09:00"}).exit_code == 0
    text = (root / "state" / "STATE.md").read_text(encoding="utf-8")
    assert "  facts: 1\n" in text and "  facts.expired: 1\n" in text and "- expired, not archived yet: 1\n" in text, text
