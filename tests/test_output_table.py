"""Tables on a terminal (output._rich_table): what a person copies from them stays whole."""

from __future__ import annotations

from rich.cells import cell_len

from memctl import output


def shown(capsys, monkeypatch, width: int, row: dict[str, str] | list[str], columns: list[str] | None = None) -> list[str]:
    """The lines of a one-row table on a terminal `width` columns wide (TERM=dumb: no colours), each
    checked to fit it (a CJK character takes 2 cells)."""
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("TERM", "dumb")
    output._rich_table([list(row.values()) if isinstance(row, dict) else row], columns or list(row))
    lines = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in lines) <= width, (width, row, "\n".join(lines))
    return lines


def body_columns(lines: list[str], count: int) -> list[str]:
    """Each column's text, its folded pieces joined, spaces left out (a wrap drops the space it breaks at)."""
    body = [line for line in lines if line.startswith("│")]
    assert all(line.endswith("│") for line in body), "\n".join(lines)  # the table's right edge is there
    return ["".join(line.split("│")[at + 1].strip() for line in body).replace(" ", "") for at in range(count)]


def test_ids_and_times_are_never_broken_and_long_text_wraps_instead(capsys, monkeypatch):
    """helper-57: at 100 columns `episode list` broke `ep-20261206073912-0e3e` and the timestamp over two
    lines (`ep-20261206073912-0` / `e3e`): the id could not be copied. The description wraps instead."""
    row = {"id": "ep-20261206073912-0e3e", "ts": "2026-12-06T07:39:12+00:00", "agent": "", "type": "decision",
           "importance": "0.7", "description": "本番DBをPostgreSQL 17に上げることにした。移行は週末に行い、レプリカ2台を先に上げる"}
    lines = shown(capsys, monkeypatch, 100, row)
    assert any("ep-20261206073912-0e3e" in line for line in lines), lines
    assert any("2026-12-06T07:39:12+00:00" in line for line in lines), lines
    assert sum("│" in line for line in lines) > 2  # the description took more lines


def test_a_terminal_too_narrow_for_whole_ids_folds_every_column_and_loses_no_text(capsys, monkeypatch):
    row = {"id": "ep-20261206073912-0e3e", "ts": "2026-12-06T07:39:12+00:00", "agent": "", "type": "decision",
           "importance": "0.7", "description": "本番DBをPostgreSQL 17に上げることにした"}
    lines = shown(capsys, monkeypatch, 60, row)
    column = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert column == "ep-20261206073912-0e3e"  # folded, every character kept


def recall_row(name: str, description: str) -> dict[str, str]:
    """A row of `recall`'s table: seven columns, the path holding the name."""
    return {"rank": "1", "score": "0.579", "relevance": "0.568", "name": name, "type": "project",
            "description": description, "path": f"memory/{name}.md"}


def test_where_not_every_whole_column_fits_the_widest_folds_first(capsys, monkeypatch):
    """A tester's `recall` at 80 columns: every column folded, so the name broke (`error-budge` / `t`) beside
    the path that holds it. The widest whole column (the path) folds now, and the name stays whole."""
    lines = shown(capsys, monkeypatch, 80, recall_row("error-budget", "SLOは可用性99.9%で、エラーバジェットを使い切ったら新機能を止める"))
    assert any("│ error-budget │" in line for line in lines), "\n".join(lines)


def test_a_table_a_cell_or_two_too_wide_drops_its_outer_padding_before_it_breaks_a_column(capsys, monkeypatch):
    """helper-67: `audit` at 80 columns needed 81 and broke every timestamp (`2026-12-06T19:` / `24:38+00:00`).
    The space inside the outer edges goes first; at a width that needs more, the widest column folds as before."""
    row = {"ts": "2026-12-06T19:24:38+00:00", "agent": "claude-code", "command": "context", "query": "デプロイ",
           "shown": "deploy-rule-v2"}
    for width in (80, 79):
        lines = shown(capsys, monkeypatch, width, row)
        assert any("2026-12-06T19:24:38+00:00" in line for line in lines), "\n".join(lines)
        assert body_columns(lines, 5) == [v.replace(" ", "") for v in row.values()]
    lines = shown(capsys, monkeypatch, 90, row)  # room to spare: the padding stays
    assert any(line.startswith("│ 2026-12-06T19:24:38+00:00 │") for line in lines), "\n".join(lines)
    assert body_columns(shown(capsys, monkeypatch, 70, row), 5) == [v.replace(" ", "") for v in row.values()]


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
    row = recall_row("python-style", "Pythonのコードはblackとruffで整形し、型ヒントを必ず付ける")
    lines = shown(capsys, monkeypatch, 80, row)
    assert [cell.strip() for cell in lines[1].strip("┃").split("┃")] == list(row), lines[:3]


def test_a_table_that_cannot_fit_folded_to_ten_cells_a_column_shares_the_width_and_keeps_its_edge(capsys, monkeypatch):
    """`memctl list` at 50 columns: four columns folded to their least (10 cells, `description` 11) needed
    53; rich printed the table 52 wide and the terminal cut off its right edge. Each column now gets its
    share of the width, and every character of every cell is still there."""
    row = {"name": "procedure-publish-article", "type": "procedure",
           "description": "記事公開の手順：テーマ台帳で重複確認→下書き→CTA確認→公開→台帳に追記",
           "path": "memory/procedure-publish-article.md"}
    for width in (40, 50, 56):
        lines = shown(capsys, monkeypatch, width, row)
        assert [cell.strip() for cell in lines[1].strip("┃").split("┃")] == list(row), lines[:3]  # headers whole
        assert body_columns(lines, len(row)) == [text.replace(" ", "") for text in row.values()]


def test_random_layouts_never_run_past_the_edge_and_lose_no_character(capsys, monkeypatch):
    """A review measured ~4,800 random layouts: 0.75 % were one cell wider than the terminal (rich
    shrinking the table itself, at 80 columns among others). Every column is now given its width."""
    import random

    pick = random.Random(20261206)
    words = ["deploy", "error-budget", "2026-12-06T07:39:12+00:00", "0.579", "memory/procedure-publish-article.md",
             "本番DBをPostgreSQL", "記事公開の手順", "ﾃﾞﾌﾟﾛｲ", "x", "ep-20261206073912-0e3e"]
    for _ in range(300):
        count = pick.randint(2, 7)
        columns = [f"c{at}" + "x" * pick.randint(0, 9) for at in range(count)]
        row = [" ".join(pick.choice(words) for _ in range(pick.randint(1, 6))) if pick.random() < 0.5 else pick.choice(words)
               for _ in columns]
        width = pick.randint(1 + sum(3 + min(cell_len(c), output.NARROWEST) for c in columns), 140)
        lines = shown(capsys, monkeypatch, width, row, columns)
        assert body_columns(lines, count) == [text.replace(" ", "") for text in row], (width, columns, row)


def test_a_column_every_cell_of_which_is_empty_is_left_out_header_too(capsys, monkeypatch):
    """helper-77: an episode's `agent` nobody set kept its 7 cells; the cells it had go to the description."""
    rows = [{"id": "ep-20261207023108-03fb", "agent": "", "type": "decision", "description": "移行は週末に行う"},
            {"id": "ep-20261207023109-1a2b", "agent": "", "type": "error", "description": "deploy failed on a timeout"}]
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("TERM", "dumb")
    output._rich_table([list(row.values()) for row in rows], list(rows[0]))
    lines = capsys.readouterr().out.splitlines()
    assert [part.strip() for part in lines[1].strip("┃").split("┃")] == ["id", "type", "description"], "\n".join(lines)
    monkeypatch.setenv("MEMCTL_FORCE_TTY", "0")  # piped: the empty field is still there
    output.emit_table(rows, list(rows[0]))
    assert capsys.readouterr().out.splitlines()[0].split("\t") == ["ep-20261207023108-03fb", "", "decision", "移行は週末に行う"]


def test_a_column_is_never_wider_than_its_widest_cell_or_header(capsys, monkeypatch):
    """A short number gets its header's width, the description what is left; at 140 columns nothing is
    wider than it needs (the table ends before the terminal does)."""
    row = {"id": "ep-20261206073912-0e3e", "ts": "2026-12-06T07:39:12+00:00", "type": "decision", "importance": "0.7",
           "description": "本番DBをPostgreSQL 17に上げることにした"}
    for width in (80, 100, 140):
        lines = shown(capsys, monkeypatch, width, row)
        heads = lines[1].strip("┃").split("┃")
        wanted = [max(cell_len(name), cell_len(value)) for name, value in row.items()]
        assert all(cell_len(head) - 2 <= want for head, want in zip(heads, wanted)), (width, "\n".join(lines))
        assert cell_len(heads[3]) - 2 == len("importance")


def test_spare_columns_go_least_useful_first_until_the_description_has_room(capsys, monkeypatch):
    """helper-77: `recall` at 80 columns left 13 cells to the description and broke the path
    (`memory/ja-fac` / `t-0330.md`). Its spare columns go, in its order, until the description has
    WRAPPED_ROOM cells beside the whole name and path; a wide terminal keeps them all."""
    monkeypatch.setenv("TERM", "dumb")
    row = recall_row("ja-fact-0330", "本番環境へのデプロイは火曜日の午前中だけに行い、凍結期間の後は必ずリリース担当者の確認を受けること")
    spare = ("relevance", "rank", "score", "type")
    for width, kept in ((80, ["score", "name", "type", "description", "path"]), (72, ["name", "type", "description", "path"]),
                        (70, ["name", "description", "path"]),
                        (140, list(row))):
        monkeypatch.setenv("COLUMNS", str(width))
        output._rich_table([list(row.values())], list(row), spare)
        lines = capsys.readouterr().out.splitlines()
        heads = lines[1].strip("┃").split("┃")
        assert [head.strip() for head in heads] == kept, "\n".join(lines)
        assert cell_len(heads[kept.index("description")]) - 2 >= output.WRAPPED_ROOM
        assert body_columns(lines, len(kept))[kept.index("path")] == "memory/ja-fact-0330.md"
        assert any("memory/ja-fact-0330.md" in line for line in lines), "\n".join(lines)  # on one line


def test_japanese_descriptions_wrap_aligned(capsys, monkeypatch):
    """A kanji is two cells: every rule of the table sits at the same cell on every line, whatever mix of
    full- and half-width text a cell holds, and no character is lost."""
    rows = [recall_row("ja-fact-0330", "本番環境へのデプロイは火曜日の午前中だけに行い、凍結期間の後は必ずリリース担当者の確認を受けること"),
            recall_row("deploy-friday", "No deploys to production on Friday afternoons; the on-call team is thin"),
            recall_row("mixed", "ﾃﾞﾌﾟﾛｲ手順: make deploy を実行し、Slack の #release に報告する")]
    monkeypatch.setenv("TERM", "dumb")
    for width in (40, 60, 80, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        output._rich_table([list(row.values()) for row in rows], list(rows[0]), ("relevance", "rank", "score", "type"))
        lines = capsys.readouterr().out.splitlines()
        rules = {tuple(cell_len(line[:at]) for at, char in enumerate(line) if char in "│┃┏┓┳┡┩╇└┘┴") for line in lines}
        assert len(rules) == 1 and max(map(cell_len, lines)) <= width, (width, "\n".join(lines))
        heads = [head.strip() for head in lines[1].strip("┃").split("┃")]
        assert "description" in heads
        texts = body_columns(lines, len(heads))[heads.index("description")]
        assert texts == "".join(row["description"].replace(" ", "") for row in rows), (width, "\n".join(lines))
