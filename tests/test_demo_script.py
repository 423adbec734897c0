"""The demo echoes each command so that it can be pasted back into a shell and do the same thing."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO

WORKFLOW = REPO / "scripts" / "demo_workflow.sh"


def _functions() -> str:
    """quote() and command_line() as the demo defines them."""
    lines = WORKFLOW.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("quote() {"))
    end = next(i for i, line in enumerate(lines) if line.startswith("command_line() {"))
    return "\n".join(lines[start:end + 1]) + "\n"


def _pasted_back(*words: str) -> list[str]:
    """What a shell hands a command when the demo's echoed line is pasted: the words, NUL-separated."""
    script = _functions() + 'line=$(command_line "$@")\neval "set -- ${line#memctl }"\nprintf "%s\\0" "$@"\n'
    done = subprocess.run(["bash", "-c", script, "demo", *words], capture_output=True, check=True)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def test_quoting_keeps_spaces_quotes_and_japanese():
    words = ["remember", "feedback-title-length", "--description", "記事タイトルは32文字以内にする",
             "theme=MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法", "it's $HOME `x` \\n", "", "*"]
    assert _pasted_back(*words) == words


def test_plain_words_stay_bare():
    script = _functions() + 'command_line list --type feedback date=2026-11-29 "a b" "記事"\n'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout == "memctl list --type feedback date=2026-11-29 'a b' '記事'"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12),
                min_size=1, max_size=4))
def test_any_words_survive_the_round_trip(words):
    assert _pasted_back(*words) == words
