"""Tables on a terminal (output._rich_table): what a person copies from them stays whole."""

from __future__ import annotations

from rich.cells import cell_len

from memctl import output


def test_ids_and_times_are_never_broken_and_long_text_wraps_instead(capsys, monkeypatch):
    """helper-57: at 100 columns `episode list` broke `ep-20261206073912-0e3e` and the timestamp over two
    lines (`ep-20261206073912-0` / `e3e`): the id could not be copied. The description wraps instead."""
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "dumb")
    row = {"id": "ep-20261206073912-0e3e", "ts": "2026-12-06T07:39:12+00:00", "agent": "", "type": "decision",
           "importance": "0.7", "description": "本番DBをPostgreSQL 17に上げることにした。移行は週末に行い、レプリカ2台を先に上げる"}
    output._rich_table([[row[c] for c in row]], list(row))
    shown = capsys.readouterr().out
    assert "ep-20261206073912-0e3e" in shown and "2026-12-06T07:39:12+00:00" in shown, shown
    assert max(cell_len(line) for line in shown.splitlines()) <= 100  # (a CJK character takes 2 cells)
    assert sum("│" in line for line in shown.splitlines()) > 2  # the description took more lines


def test_a_terminal_too_narrow_for_whole_ids_folds_every_column_and_loses_no_text(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("TERM", "dumb")
    row = {"id": "ep-20261206073912-0e3e", "ts": "2026-12-06T07:39:12+00:00", "agent": "", "type": "decision",
           "importance": "0.7", "description": "本番DBをPostgreSQL 17に上げることにした"}
    output._rich_table([[row[c] for c in row]], list(row))
    lines = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in lines) <= 60
    column = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert column == "ep-20261206073912-0e3e"  # folded, every character kept
