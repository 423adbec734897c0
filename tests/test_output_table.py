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


def recall_row(name: str, description: str) -> dict[str, str]:
    """A row of `recall`'s table: seven columns, the path holding the name."""
    return {"rank": "1", "score": "0.579", "relevance": "0.568", "name": name, "type": "project",
            "description": description, "path": f"memory/{name}.md"}


def test_where_not_every_whole_column_fits_the_widest_folds_first(capsys, monkeypatch):
    """A tester's `recall` at 80 columns: every column folded, so the name broke (`error-budge` / `t`) beside
    the path that holds it. The widest whole column (the path) folds now, and the name stays whole."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    row = recall_row("error-budget", "SLOは可用性99.9%で、エラーバジェットを使い切ったら新機能を止める")
    output._rich_table([[row[c] for c in row]], list(row))
    lines = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    assert any("│ error-budget │" in line for line in lines), "\n".join(lines)


def test_a_terminal_narrower_than_the_headers_gets_the_header_and_the_piped_lines(capsys, monkeypatch):
    """At 20 columns rich printed the frame of seven columns with every cell empty (exit 0); at 40 the
    headers broke (`ran` / `k`). Too narrow for its frame, a table is its header line above the lines a
    pipe gets: fields escaped as piped (a TAB or a line break in a cell is `\\t`, `\\n`), or the
    command's own plain form."""
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("MEMCTL_FORCE_TTY", "1")
    row = recall_row("error-budget", "一行目\n二行目\tタブ")
    for width in ("20", "40"):
        monkeypatch.setenv("COLUMNS", width)
        output.emit_table([row], list(row))
        assert capsys.readouterr().out.splitlines() == [
            "\t".join(row), "1\t0.579\t0.568\terror-budget\tproject\t一行目\\n二行目\\tタブ\tmemory/error-budget.md"]
        output.emit_table([row], list(row), plain="as the command prints it piped\n")
        assert capsys.readouterr().out == "\t".join(row) + "\nas the command prints it piped\n"
    monkeypatch.setenv("COLUMNS", "80")
    output.emit_table([row], list(row))
    assert capsys.readouterr().out.startswith("┏")


def test_headers_stay_whole_where_they_fit(capsys, monkeypatch):
    """A review: at 80 columns `description` broke to `descriptio` / `n` once the path folded (a folded
    column was given 10 cells, fewer than its header's 11)."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    row = recall_row("python-style", "Pythonのコードはblackとruffで整形し、型ヒントを必ず付ける")
    output._rich_table([[row[c] for c in row]], list(row))
    lines = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    assert [cell.strip() for cell in lines[1].strip("┃").split("┃")] == list(row), lines[:3]


def test_a_table_that_cannot_fit_folded_to_ten_cells_a_column_shares_the_width_and_keeps_its_edge(capsys, monkeypatch):
    """`memctl list` at 50 columns: four columns folded to their least (10 cells, `description` 11) needed
    53; rich printed the table 52 wide and the terminal cut off its right edge. Each column now gets its
    share of the width, and every character of every cell is still there."""
    monkeypatch.setenv("TERM", "dumb")
    row = {"name": "procedure-publish-article", "type": "procedure",
           "description": "記事公開の手順：テーマ台帳で重複確認→下書き→CTA確認→公開→台帳に追記",
           "path": "memory/procedure-publish-article.md"}
    for width in (40, 50, 56):
        monkeypatch.setenv("COLUMNS", str(width))
        output._rich_table([[row[c] for c in row]], list(row))
        lines = capsys.readouterr().out.splitlines()
        assert max(cell_len(line) for line in lines) <= width, "\n".join(lines)
        assert [cell.strip() for cell in lines[1].strip("┃").split("┃")] == list(row), lines[:3]  # headers whole
        body = [line for line in lines if line.startswith("│")]
        assert all(line.endswith("│") for line in body), "\n".join(lines)
        for at, column in enumerate(row):
            assert "".join(line.split("│")[at + 1].strip() for line in body) == row[column].replace(" ", "")


def test_random_layouts_never_run_past_the_edge_and_lose_no_character(capsys, monkeypatch):
    """A review measured ~4,800 random layouts: 0.75 % were one cell wider than the terminal (rich
    shrinking the table itself, at 80 columns among others). Every column is now given its width."""
    import random

    monkeypatch.setenv("TERM", "dumb")
    pick = random.Random(20261206)
    words = ["deploy", "error-budget", "2026-12-06T07:39:12+00:00", "0.579", "memory/procedure-publish-article.md",
             "本番DBをPostgreSQL", "記事公開の手順", "ﾃﾞﾌﾟﾛｲ", "x", "ep-20261206073912-0e3e"]
    for _ in range(300):
        count = pick.randint(2, 7)
        columns = [f"c{at}" + "x" * pick.randint(0, 9) for at in range(count)]
        row = [" ".join(pick.choice(words) for _ in range(pick.randint(1, 6))) if pick.random() < 0.5 else pick.choice(words)
               for _ in columns]
        width = pick.randint(1 + sum(3 + min(cell_len(c), output.NARROWEST) for c in columns), 140)
        monkeypatch.setenv("COLUMNS", str(width))
        output._rich_table([row], columns)
        lines = capsys.readouterr().out.splitlines()
        assert max(cell_len(line) for line in lines) <= width, (width, columns, row, "\n".join(lines))
        body = [line for line in lines if line.startswith("│")]
        assert all(line.endswith("│") for line in body), (width, "\n".join(lines))
        for at, text in enumerate(row):
            assert "".join(line.split("│")[at + 1].strip() for line in body).replace(" ", "") == text.replace(" ", "")
