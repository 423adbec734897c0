"""`memctl episode import` through the CLI, and the Claude Code hook as a real subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, cli, git, memctl

FIXTURES = REPO / "tests" / "fixtures" / "claude-code"
S1 = "5d0c6a1e-1111-4a7b-9c1d-000000000001"
S2 = "5d0c6a1e-2222-4a7b-9c1d-000000000002"


@pytest.fixture
def project(tmp_path) -> Path:
    """A Claude Code project folder holding the two fixture sessions."""
    folder = tmp_path / "projects" / "-home-dev-shop"
    folder.mkdir(parents=True)
    for session in (S1, S2):
        shutil.copy(FIXTURES / f"{session}.jsonl", folder / f"{session}.jsonl")
    return folder


def test_import_prints_per_file_counts_and_a_summary(root, project):
    files = [str(project / f"{S1}.jsonl"), str(project / f"{S2}.jsonl")]
    r = cli(root, "episode", "import", "claude-code", *files)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{files[0]}\t4\t0\t0\t8\tFalse\t\n{files[1]}\t4\t0\t0\t1\tFalse\t\n"
    sha = git(root, "rev-parse", "HEAD").strip()
    assert r.stderr == f"memctl: imported 8 episodes from 2 transcripts (commit {sha[:10]})\n"
    r = cli(root, "episode", "import", "claude-code", "--project", str(project), "--json")
    data = json.loads(r.stdout)
    assert (data["imported"], data["commit"], [f["records"] for f in data["files"]]) == (0, None, [0, 0])
    assert r.stderr == "memctl: imported 0 episodes from 2 transcripts\n"


def test_dry_run_writes_nothing(root, project):
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, "episode", "import", "claude-code", "--project", str(project), "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["imported"] == 8
    assert r.stderr == "memctl: would import 8 episodes from 2 transcripts\n"
    assert git(root, "rev-parse", "HEAD") == head and not (root / "ledgers" / "episodes.tsv").exists()
    assert not (root / ".memctl" / "imports.json").exists()


def test_project_skips_a_bad_file_with_a_warning(root, project):
    (project / "broken.jsonl").write_bytes(b"\x00\x01binary")
    r = cli(root, "episode", "import", "claude-code", "--project", str(project))
    assert r.exit_code == 0
    assert f"memctl: warning: skipped {project / 'broken.jsonl'}: a binary file, not a JSONL transcript\n" in r.stderr
    assert "imported 8 episodes from 3 transcripts" in r.stderr


def test_recall_over_episodes_finds_what_an_earlier_session_decided(root, project):
    assert cli(root, "episode", "import", "claude-code", "--project", str(project)).exit_code == 0
    r = cli(root, "recall", "--source", "episodes", "which day do we deploy to production", "--json", "--no-log")
    assert r.exit_code == 0, r.stderr
    top = json.loads(r.stdout)[0]
    assert top["description"] == "OK, decided: production deploys happen on Tuesday at 10:00, never on Friday."
    r = cli(root, "recall", "--source", "episodes", "本番デプロイは何曜日？", "--k", "3", "--json", "--no-log")
    found = [hit["description"] for hit in json.loads(r.stdout)]
    assert "過去90日の障害は金曜日に集中しています。本番デプロイは火曜日の午前10時に行うことにしましょう。" in found
    r = cli(root, "recall", "--source", "episodes", "マイグレーションの順番", "--k", "3", "--json", "--no-log")
    found = [hit["description"] for hit in json.loads(r.stdout)]
    assert "決定: マイグレーションは users → orders の順。ロールバック手順も書いておいて。" in found


def hook_input(path: Path, session: str = S1) -> str:
    return json.dumps({"session_id": session, "transcript_path": str(path), "cwd": "/home/dev/shop",
                       "hook_event_name": "SessionEnd", "reason": "exit"})


def test_hook_imports_the_session_transcript(root, project):
    run = memctl(root, "episode", "import", "claude-code", "--hook", input=hook_input(project / f"{S1}.jsonl"))
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr.startswith("memctl: imported 4 episodes from 1 transcript (commit ")
    assert git(root, "status", "--porcelain") == ""
    again = memctl(root, "episode", "import", "claude-code", "--hook", input=hook_input(project / f"{S1}.jsonl"))
    assert (again.returncode, again.stderr) == (0, "memctl: imported 0 episodes from 1 transcript\n")


def test_a_relative_transcript_path_is_the_sessions_own_read_against_its_cwd(root, project):
    """A hook runs wherever its host starts it (here `/`, through `sh -c`); a relative `transcript_path`
    belongs to the session, whose folder the input names as `cwd`."""
    import subprocess
    import sys

    payload = json.dumps({"session_id": S1, "transcript_path": f"{S1}.jsonl", "cwd": str(project),
                          "hook_event_name": "SessionEnd"})
    command = f"{sys.executable} -m memctl --root {root} episode import claude-code --hook"
    run = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, text=True, cwd="/", timeout=120)
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr.startswith("memctl: imported 4 episodes from 1 transcript (commit "), run.stderr


@pytest.mark.parametrize("stdin, reason", [
    ("not json", "--hook: stdin is not the JSON a Claude Code hook receives"),
    ('{"session_id": "x"}', "--hook: the hook input has no transcript_path"),
    ('{"transcript_path": "/nonexistent/x.jsonl"}', "no such file: /nonexistent/x.jsonl (hint: check the path (relative to the current folder))"),
], ids=["garbage", "no-path", "missing-file"])
def test_hook_never_fails_the_session(root, stdin, reason):
    head = git(root, "rev-parse", "HEAD")
    run = memctl(root, "episode", "import", "claude-code", "--hook", input=stdin)
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr == f"memctl: warning: episode import --hook: nothing imported: {reason}\n"
    assert git(root, "rev-parse", "HEAD") == head


def test_hook_outside_any_store_still_exits_0(tmp_path, project):
    elsewhere = tmp_path / "not-a-store"
    elsewhere.mkdir()
    run = memctl(elsewhere, "episode", "import", "claude-code", "--hook", input=hook_input(project / f"{S1}.jsonl"))
    assert run.returncode == 0 and "episode import --hook: nothing imported:" in run.stderr


@pytest.mark.parametrize("args, message, code", [
    (["episode", "import", "slack"], "unknown transcript format 'slack' (hint: claude-code | codex | gemini | cursor | messages)", 2),
    (["episode", "import", "claude-code"], "no transcript to import (hint: give FILE.jsonl arguments or --project DIR)", 2),
    (["episode", "import", "claude-code", "a.jsonl", "--project", "."], "give transcript files or --project, not both", 2),
    (["episode", "import", "claude-code", "/nonexistent/a.jsonl"], "no such file: /nonexistent/a.jsonl (hint: check the path (relative to the current folder))", 3),  # not found: 3 everywhere
])
def test_bad_input_is_one_line(root, args, message, code):
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, *args)
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", f"memctl: error: {message}\n")
    assert git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""


def test_project_can_name_the_working_directory(root, tmp_path, monkeypatch):
    # Claude Code keeps /home/dev/shop's sessions in <config>/projects/-home-dev-shop/
    config = tmp_path / "claude-config"
    kept = config / "projects" / "-home-dev-shop"
    kept.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{S2}.jsonl", kept / f"{S2}.jsonl")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    r = cli(root, "episode", "import", "claude-code", "--project", "/home/dev/shop", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["imported"] == 4
    r = cli(root, "episode", "import", "claude-code", "--project", "/home/dev/other")
    assert r.exit_code == 3 and r.stderr.startswith("memctl: error: no transcripts for /home/dev/other: ")


def test_two_hooks_at_once_import_each_record_once(root, project):
    import subprocess
    import sys

    argv = [sys.executable, "-m", "memctl", "--root", str(root), "episode", "import", "claude-code", "--hook"]
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(hook_input(project / f"{S1}.jsonl"), timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    counts = sorted(err for _, err in outs)
    assert counts[0] == "memctl: imported 0 episodes from 1 transcript\n"
    assert counts[1].startswith("memctl: imported 4 episodes from 1 transcript (commit ")
    rows = (root / "ledgers" / "episodes.tsv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + 4 and git(root, "status", "--porcelain") == ""
