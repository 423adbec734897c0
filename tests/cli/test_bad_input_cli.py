"""Bad input: a one-line error with a hint, a documented exit code, and no change on disk."""

from __future__ import annotations

import pytest

from conftest import cli, git


def _snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts and ".memctl" not in p.parts}


@pytest.mark.parametrize(
    "args, code",
    [
        (["remember", "../evil", "--description", "x"], 2),
        (["remember", "a/b", "--description", "x"], 2),
        (["remember", "", "--description", "x"], 2),
        (["remember", "n" * 10_000, "--description", "x"], 2),
        (["remember", "ok", "--description", "line one\nline two"], 2),
        (["remember", "ok", "--description", "   "], 2),
        (["remember", "ok", "--description", "x", "--importance", "1.5"], 2),
        (["remember", "ok", "--description", "x", "--expires", "next tuesday"], 2),
        (["remember", "ok", "--description", "x", "--supersedes", "missing"], 3),
        (["remember", "ok"], 2),
        (["remember", "ok", "--update", "--description", "x"], 3),
        (["show", "../evil"], 2),
        (["show", "missing"], 3),
        (["forget", "missing", "--reason", "x"], 3),
        (["forget", "missing"], 2),
        (["log", "missing"], 3),
        (["remember", "ok", "--description", "x", "--importance", "high"], 2),
        (["remember", "ok", "--descriptio", "x"], 2),
        (["list", "--bogus"], 2),
        # (helper-80: these three had no hint)
        (["ledger", "create", "x", "--columns", "a,b", "--unique", "c"], 2),
        (["episode", "list", "--since", "bogus"], 2),
        (["near-dup", "x", "--facts", "--threshold", "2"], 2),
    ],
)
def test_bad_input_changes_nothing(root, args, code):
    before = _snapshot(root)
    head = git(root, "rev-parse", "HEAD")
    r = cli(root, *args)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("memctl: error: ")
    assert "(hint: " in r.stderr
    assert _snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == head


def test_root_pointing_at_missing_directory(tmp_path):
    r = cli(tmp_path / "nope", "list")
    assert r.exit_code == 3
    assert r.stderr.count("\n") == 1 and "does not exist" in r.stderr and "hint" in r.stderr
    assert not (tmp_path / "nope").exists()


def test_root_pointing_at_the_stores_memctl_toml_says_it_is_a_file(root):
    """helper-80: `--root STORE/memctl.toml` said "store directory does not exist", of a path that exists."""
    r = cli(root / "memctl.toml", "list")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "memctl.toml is a file, not a store directory (hint: give the folder that holds memctl.toml)" in r.stderr


def test_no_store_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(None, "list")
    assert r.exit_code == 3 and "memctl init" in r.stderr


BROKEN = {
    "broken-yaml.md": "---\nname: broken\n  description: indented: wrongly\n---\nbody\n",
    "python-tag.md": "---\nname: evil\ndescription: !!python/object/apply:os.system ['touch /tmp/pwned']\n---\n",
    "no-frontmatter.md": "just text\n",
}


def test_broken_files_are_skipped_and_named_by_doctor(root):
    cli(root, "remember", "good", "--description", "a good fact")
    for name, text in BROKEN.items():
        (root / "memory" / name).write_text(text, encoding="utf-8")
    (root / "memory" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR")
    r = cli(root, "list")
    assert r.exit_code == 0
    assert r.stdout.startswith("good\t")
    for name in (*BROKEN, "binary.md"):
        assert f"skipped memory/{name}" in r.stderr
    assert cli(root, "remember", "other", "--description", "still works").exit_code == 0
    r = cli(root, "doctor", "--json")
    assert r.exit_code == 1
    import json

    problems = {p["path"]: p for p in json.loads(r.stdout)["problems"] if p["code"] == "unreadable"}
    assert problems["memory/broken-yaml.md"]["line"] == 3
    assert problems["memory/python-tag.md"]["line"] == 3
    assert "python/object" in problems["memory/python-tag.md"]["message"]
    assert problems["memory/no-frontmatter.md"]["line"] == 1
    assert "binary" in problems["memory/binary.md"]["message"]
    text = cli(root, "doctor").stdout
    assert "memory/python-tag.md:3: error: invalid YAML frontmatter" in text
    # Dropped in by hand and not committed: said as what they are, never "commit them" first.
    (root / "memory" / "blob.bin").write_bytes(b"x\0y")
    (root / "memory" / "handmade.md").write_text("---\nname: handmade\ndescription: Written by hand\n---\nbody\n",
                                                  encoding="utf-8")
    uncommitted = {p["path"]: p["message"] for p in json.loads(cli(root, "doctor", "--json").stdout)["problems"]
                   if p["code"] == "uncommitted"}
    assert uncommitted["memory/blob.bin"].startswith("a file memctl does not write, not committed: move it out of memory/")
    for name in (*BROKEN, "binary.md"):
        assert uncommitted[f"memory/{name}"].startswith("a fact file that does not parse, not committed: fix it")
    assert uncommitted["memory/handmade.md"].startswith("a new file that is not committed yet (commit it: git -C ")
    # An editor's backup or a merge's leftover: a warning saying what it is, not an error that fails doctor.
    (root / "memory" / "handmade.md").unlink()
    (root / "memory" / "blob.bin").unlink()
    for name in (*BROKEN, "binary.md"):
        (root / "memory" / name).unlink()
    for leftover in ("other.md~", "other.md.orig"):
        (root / "memory" / leftover).write_text("x\n", encoding="utf-8")
    checked = json.loads(cli(root, "doctor", "--json").stdout)
    found = {p["path"]: p for p in checked["problems"] if p["code"] == "uncommitted"}
    assert {p: (f["severity"], f["message"].split(":")[0]) for p, f in found.items()} == {
        "memory/other.md~": ("warning", "an editor's or a merge's leftover, not committed"),
        "memory/other.md.orig": ("warning", "an editor's or a merge's leftover, not committed")}
    assert "`*~`" in found["memory/other.md~"]["message"] and "`*.orig`" in found["memory/other.md.orig"]["message"]


def test_doctor_reports_drift_duplicates_and_dangling(root):
    cli(root, "remember", "a", "--description", "fact a")
    (root / "memory" / "a-copy.md").write_text("---\nname: a\ndescription: copy of a\n---\n", encoding="utf-8")
    (root / "memory" / "c.md").write_text("---\nname: c\ndescription: c\nmetadata:\n  supersedes: [ghost]\n---\n", encoding="utf-8")
    (root / "memory" / "nodesc.md").write_text("---\nname: nodesc\n---\n", encoding="utf-8")
    r = cli(root, "doctor")
    assert r.exit_code == 1
    out = r.stdout
    assert "memory/a-copy.md:2: error: name 'a' is used by memory/a-copy.md, memory/a.md" in out
    assert "supersedes 'ghost', which does not exist" in out
    assert "memory/nodesc.md:2: error: frontmatter has no 'description'" in out
    assert "c.md is not listed in MEMORY.md" in out
    r = cli(root, "index", "--check")
    assert r.exit_code == 1 and "c.md is not listed" in r.stdout


def test_hand_edits_not_yet_committed_are_not_swept_into_a_commit(root):
    cli(root, "remember", "a", "--description", "fact a")
    path = root / "memory" / "a.md"
    path.write_text(path.read_text(encoding="utf-8") + "hand edit in progress\n", encoding="utf-8")
    before = _snapshot(root)
    head = git(root, "rev-parse", "HEAD")
    for args in (["remember", "a", "--update", "--importance", "0.1"], ["forget", "a", "--reason", "x"],
                 ["remember", "b", "--description", "new b", "--supersedes", "a"]):
        r = cli(root, *args)
        assert r.exit_code == 1, r.stderr
        assert "memory/a.md has uncommitted changes" in r.stderr and "hint" in r.stderr
        assert _snapshot(root) == before and git(root, "rev-parse", "HEAD") == head
    # unrelated dirty files do not block other facts
    assert cli(root, "remember", "c", "--description", "fact c").exit_code == 0
    assert git(root, "status", "--porcelain") == " M memory/a.md\n"
    # --no-commit is the explicit way through
    assert cli(root, "remember", "a", "--update", "--importance", "0.1", "--no-commit").exit_code == 0


def test_doctor_warns_of_fact_files_that_differ_only_in_case(root):
    """`remember` refuses a case twin, but one pushed or written by hand was not named: a clone on
    macOS or Windows then holds one of the two files."""
    import json

    assert cli(root, "remember", "deploy", "--description", "deploys on Tuesdays").exit_code == 0
    (root / "memory" / "Deploy.md").write_text("---\nname: Deploy\ndescription: deploys on Fridays\n---\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "a twin")
    found = [p for p in json.loads(cli(root, "doctor", "--json").stdout)["problems"] if p["code"] == "case-twin"]
    assert sorted((p["path"], p["severity"]) for p in found) == [("memory/Deploy.md", "warning"), ("memory/deploy.md", "warning")]
    assert "differs from memory/deploy.md only in case" in found[0]["message"] + found[1]["message"]


def test_doctor_warns_of_fact_files_whose_names_differ_only_in_unicode_form(root):
    """`ガイド.md` written once as NFC (Linux, Claude Code) and once as NFD (a Mac's file name pushed
    back) are two files to git and one on macOS: doctor named only case twins."""
    import json
    import unicodedata

    nfc, nfd = "ガイド.md", unicodedata.normalize("NFD", "ガイド.md")
    assert nfc != nfd
    for name, said in [(nfc, "guide"), (nfd, "the same guide")]:
        (root / "memory" / name).write_text(f"---\nname: guide\ndescription: {said}\ntype: project\n---\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "twins")
    found = [p for p in json.loads(cli(root, "doctor", "--json").stdout)["problems"] if p["code"] == "case-twin"]
    assert sorted(p["path"] for p in found) == sorted(["memory/" + nfc, "memory/" + nfd])
    assert {p["severity"] for p in found} == {"warning"}
    messages = sorted(p["message"] for p in found)
    assert "Unicode form NFC" in messages[0] + messages[1] and "Unicode form not NFC" in messages[0] + messages[1]


def test_doctor_names_an_uncommitted_topic_file_as_memctls_own_not_as_a_broken_fact(root):
    """Review: after `index --no-commit` wrote memory-index/<type>.md, doctor called it "a fact file that does
    not parse ... (its error is above)", with no error above: a topic file is memctl's own, not a fact."""
    import json
    import re

    toml = root / "memctl.toml"
    text = re.sub(r"(?m)^max_index_lines = \d+", "max_index_lines = 8", toml.read_text(encoding="utf-8"))
    toml.write_text(text, encoding="utf-8")
    assert "max_index_lines = 8" in toml.read_text(encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qam", "a short index")
    for i in range(12):
        assert cli(root, "remember", f"f{i:02d}", "--description", f"事実その{i}について", "--no-commit").exit_code == 0
    assert list((root / "memory" / "memory-index").glob("*.md"))
    found = [p for p in json.loads(cli(root, "doctor", "--json").stdout)["problems"] if "memory-index/" in p["path"]]
    assert found and all("does not parse" not in p["message"] for p in found), found
    assert all(p["message"].startswith("a new file that is not committed yet") for p in found), found


@pytest.mark.parametrize("args", [
    ["remember", "ok", "--description", "x", "--expires", "next tuesday"],
    ["recall", "x", "--since", "last week"],
    ["episode", "list", "--since", "2027/01/06"],
    ["ledger", "rows", "episodes", "--since", "Jan 9 2027"],
])
def test_every_date_refused_hints_that_a_time_is_accepted_too(root, args):
    """--expires and recall's --since accept an ISO-8601 time, yet their hint said "use YYYY-MM-DD"."""
    cli(root, "episode", "add", "made the ledger", "--type", "decision")
    r = cli(root, *args)
    assert r.exit_code == 2 and "(hint: an ISO-8601 date or time, e.g. 2026-12-01 or 2026-12-01T09:00)" in r.stderr, r.stderr
