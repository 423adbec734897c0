"""memctl.tsv: the one field escape, shared by ledgers, TSV output and near-dup pair files."""

from __future__ import annotations

from hypothesis import given, strategies as st

from memctl import ledger, output, tsv


@given(st.text())
def test_unescape_inverts_escape(value):
    assert tsv.unescape(tsv.escape(value)) == value
    assert not any(c in tsv.escape(value) for c in "\t\n\r")


def test_japanese_and_control_characters():
    assert tsv.escape("記事\tタイトル\n改行\\") == "記事\\tタイトル\\n改行\\\\"
    assert tsv.unescape("a\\qb\\") == "a\\qb\\"  # an invalid escape is kept as written


def test_every_writer_uses_the_one_escape():
    assert ledger.escape is tsv.escape and ledger.unescape is tsv.unescape
    assert output._escape("a\tb") == tsv.escape("a\tb") and output._escape(["x", "y\n"]) == "x,y\\n"


def test_visible_shows_bidi_controls_and_keeps_right_to_left_text():
    """U+202E would show `invoice \u202efdp.exe` as `invoice exe.pdf` on a terminal; Arabic or Hebrew
    text needs no control character and is kept as it is."""
    from memctl.tsv import visible

    assert visible("invoice \u202efdp.exe") == "invoice \\u202efdp.exe"
    assert visible("\u2067x\u2069 and \x1b[2J", keep="") == "\\u2067x\\u2069 and \\x1b[2J"
    assert visible("مرحبا שלום 日本語") == "مرحبا שלום 日本語"
