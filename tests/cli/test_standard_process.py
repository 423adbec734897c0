"""memctl started as cron, launchd or a hand-made service start it: a locale that is not UTF-8, closed
standard descriptors, an output that fills up (memctl.cli.standard_process, _exit_after_output)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git

FACT = "ラテン環境で書いた事実"


def run_in(root: Path, env: dict, *args: str, shell_redirect: str = "") -> subprocess.CompletedProcess:
    """`python -m memctl --root ROOT ARGS` under `env` alone (as cron gives it), through sh for `shell_redirect`."""
    argv = [sys.executable, "-m", "memctl", "--root", str(root), *args]
    line = "exec " + " ".join(_quote(a) for a in argv) + (" " + shell_redirect if shell_redirect else "")
    return subprocess.run(["sh", "-c", line], capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def bare_env(**more: str) -> dict:
    repo = str(Path(__file__).resolve().parents[2])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": repo, "HF_HUB_OFFLINE": "1", "MEMCTL_NOW": "2026-11-30T12:00:00+00:00"}
    return {**env, **more}


def _built_locale(tmp_path: Path, language: str = "en_US", charset: str = "ISO-8859-1") -> dict | None:
    """LOCPATH and LC_ALL of a locale built for the test (localedef), or None where it cannot be."""
    if shutil.which("localedef") is None:
        return None
    where = tmp_path / "locales"
    where.mkdir(exist_ok=True)
    name = f"{language}.{charset}"
    done = subprocess.run(["localedef", "-i", language, "-f", charset, str(where / name)], capture_output=True)
    if not (where / name).exists():
        return None
    return {"LOCPATH": str(where), "LC_ALL": name} if done.returncode in (0, 1) else None


def _latin1_locale(tmp_path: Path) -> dict | None:
    return _built_locale(tmp_path)


def test_japanese_arguments_under_an_ascii_locale_are_written_as_given(root):
    """`LC_ALL=C` with Python's UTF-8 mode off (PYTHONUTF8=0, as a service may set it): the arguments were
    decoded as ASCII, and `remember` refused valid UTF-8 as "not valid UTF-8"; list and state update failed."""
    env = bare_env(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    done = run_in(root, env, "remember", "ascii-env", "--type", "user", "--description", FACT)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert f"description: {FACT}\n" in (root / "memory" / "ascii-env.md").read_text(encoding="utf-8")
    listed = run_in(root, env, "list")
    assert listed.returncode == 0 and f"ascii-env\tuser\t{FACT}".encode() in listed.stdout, listed.stderr
    assert run_in(root, env, "state", "update").returncode == 0


def test_japanese_arguments_under_a_latin1_locale_are_not_committed_as_mojibake(root, tmp_path):
    """Under an ISO-8859-1 locale every byte decodes, so `remember` took the UTF-8 bytes of Japanese as
    Latin-1 letters and committed `description: "ã\\x83©ã\\x83\\x86…"` with exit 0 (a ledger append, the same,
    for good); list and show failed on output."""
    locale = _latin1_locale(tmp_path)
    if locale is None:
        pytest.skip("localedef cannot build an ISO-8859-1 locale here; the ASCII test above covers the mechanism")
    env = bare_env(**locale)
    done = run_in(root, env, "remember", "latin-env", "--type", "user", "--description", FACT)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert f"description: {FACT}\n" in (root / "memory" / "latin-env.md").read_text(encoding="utf-8")
    assert FACT in git(root, "show", "HEAD:memory/MEMORY.md")
    shown = run_in(root, env, "show", "latin-env")
    assert shown.returncode == 0 and FACT.encode() in shown.stdout, shown.stderr


def test_a_command_with_its_standard_descriptors_closed_works_and_says_nothing_it_cannot(root):
    """`memctl remember ... >&-` committed, then failed with a traceback (print to None) and exit 1: a
    caller retrying on 1 then met "name exists"; `list >&-` too. Closed descriptors are /dev/null."""
    env = bare_env()
    done = run_in(root, env, "remember", "closed-out", "--type", "user", "--description", "閉じた出力",
                  shell_redirect="<&- >&-")
    assert (done.returncode, done.stderr) == (0, b""), done.stderr
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember closed-out"
    listed = run_in(root, env, "list", shell_redirect=">&-")
    assert (listed.returncode, listed.stderr) == (0, b""), listed.stderr
    quiet = run_in(root, env, "remember", "closed-all", "--type", "user", "--description", "全部閉じた",
                   shell_redirect="<&- >&- 2>&-")
    assert quiet.returncode == 0
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember closed-all"
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("args,committed", [
    (("remember", "full-out", "--type", "user", "--description", "満杯の出力"), "memory: remember full-out"),
    (("list",), None),
])
def test_output_to_a_full_device_is_one_line_and_exit_1_with_a_buffered_stdout(root, args, committed):
    """Without PYTHONUNBUFFERED (cron and launchd do not set it) stdout is buffered, and its last write
    failed only at shutdown: Python's "Exception ignored ... OSError" lines after memctl's, and exit 120."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    env = {k: v for k, v in bare_env().items() if k != "PYTHONUNBUFFERED"}
    if committed is None:
        assert run_in(root, env, "remember", "x", "--type", "user", "--description", "something to list").returncode == 0
    done = run_in(root, env, *args, shell_redirect=">/dev/full")
    lines = done.stderr.decode("utf-8").splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("memctl: error: No space left on device while printing the output (ENOSPC)"), lines
    if committed:
        assert git(root, "log", "-1", "--format=%s").strip() == committed


def test_a_reader_that_went_away_is_a_quiet_end_with_the_commands_own_code(root):
    """`memctl recall ... | true` with a buffered stdout: the end-of-output check made a broken pipe an error
    and exit 1, which is recall's "nothing found" (review); before it was Python's 120. The commands'
    own handlers make a broken pipe a quiet end: so does the last flush."""
    env = {k: v for k, v in bare_env().items() if k != "PYTHONUNBUFFERED"}
    assert run_in(root, env, "remember", "deploy-rule", "--type", "project", "--description",
                  "Deploys only on Tuesdays").returncode == 0
    read, write = os.pipe()
    os.close(read)  # nobody reads: the first write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "recall", "deploys", "--no-log"],
                              stdout=write, stderr=subprocess.PIPE, env=env, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr


def test_init_makes_the_store_at_root_when_no_folder_is_given(tmp_path):
    """`memctl --root DIR init` ignored --root and made a store of the current folder (a reviewer's made one
    of /tmp). A folder given to init itself is where the store goes (scripts pass --root to every command)."""
    there, cwd = tmp_path / "there", tmp_path / "cwd"
    cwd.mkdir()
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(there), "init"], cwd=cwd,
                          capture_output=True, env=bare_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert (there / "memctl.toml").is_file() and list(cwd.iterdir()) == []
    other = tmp_path / "other"
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(there), "init", str(other)], cwd=cwd,
                          capture_output=True, env=bare_env(), timeout=120)
    assert done.returncode == 0 and (other / "memctl.toml").is_file() and list(cwd.iterdir()) == [], done.stderr


def test_text_typed_in_a_terminal_of_a_legacy_locale_is_read_in_its_encoding(root, tmp_path):
    """A terminal really in EUC-JP (or Latin-1) passes its own bytes: once memctl ran in UTF-8 mode it refused
    them as "not valid UTF-8" (review); they are read in the locale's encoding and written as UTF-8, and the
    output comes back in that encoding, as before."""
    euc = _built_locale(tmp_path, "ja_JP", "EUC-JP")
    latin = _built_locale(tmp_path, "en_US", "ISO-8859-1")
    if euc is None or latin is None:
        pytest.skip("localedef cannot build EUC-JP and ISO-8859-1 locales here")
    cases = [(euc, "euc-typed", "EUC端末で書いた事実", "euc-jp"), (latin, "latin-typed", "café au lait", "latin-1")]
    for locale, name, text, encoding in cases:
        argv = [sys.executable, "-m", "memctl", "--root", str(root), "remember", name, "--type", "user",
                "--description", text.encode(encoding)]
        done = subprocess.run(argv, capture_output=True, env=bare_env(**locale), stdin=subprocess.DEVNULL, timeout=120)
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
        assert f"description: {text}\n" in (root / "memory" / f"{name}.md").read_text(encoding="utf-8")
    shown = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "show", "euc-typed"],
                           capture_output=True, env=bare_env(**euc), stdin=subprocess.DEVNULL, timeout=120)
    assert shown.returncode == 0 and "EUC端末で書いた事実".encode("euc-jp") in shown.stdout, shown.stdout
