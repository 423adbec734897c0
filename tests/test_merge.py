"""The pure resolvers of memctl/merge.py: MEMORY.md, STATE.md, ledgers, facts; never a conflict marker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memctl import merge



def index(*lines: str, head: str = "# Memory index\n\n") -> str:
    return head + "<!-- memctl:index:begin -->\n" + "".join(line + "\n" for line in lines) + "<!-- memctl:index:end -->\n"


def test_index_block_keeps_both_sides_new_lines_grouped_and_sorted():
    base = index("## project", "- [a.md](a.md) - A")
    ours = index("## project", "- [a.md](a.md) - A", "- [c.md](c.md) - C側")
    theirs = index("## user", "- [u.md](u.md) - U", "## project", "- [a.md](a.md) - A", "- [b.md](b.md) - B")
    assert merge.merge_index(base, ours, theirs) == index(
        "## user", "- [u.md](u.md) - U", "## project", "- [a.md](a.md) - A", "- [b.md](b.md) - B", "- [c.md](c.md) - C側")


def test_index_a_line_removed_on_one_side_stays_removed_and_text_outside_merges_as_text():
    base = index("## project", "- [a.md](a.md) - A", "- [b.md](b.md) - B", head="# Index\n\nnotes\n\n")
    ours = index("## project", "- [b.md](b.md) - B", head="# Index\n\nnotes\n\n")
    theirs = index("## project", "- [a.md](a.md) - A", "- [b.md](b.md) - B", "- [d.md](d.md) - D",
                   head="# Index\n\nnotes\nmore notes (手書き)\n\n")
    merged = merge.merge_index(base, ours, theirs)
    assert merged == index("## project", "- [b.md](b.md) - B", "- [d.md](d.md) - D",
                           head="# Index\n\nnotes\nmore notes (手書き)\n\n")
    assert "<<<<<<<" not in merged


def test_state_newer_updated_wins_whole_whatever_the_side():
    base = "---\nupdated: 2026-11-30T08:00:00+09:00\n---\nold\n"
    early = "---\nupdated: 2026-11-30T09:00:00+09:00\n---\nearly\n"
    late = "---\nupdated: 2026-11-30T01:00:00+00:00\n---\nlate (UTC, one hour after early)\n"
    assert merge.merge_state(base, early, late) == late
    assert merge.merge_state(base, late, early) == late
    assert merge.merge_state(base, base, early) == early


def test_ledger_union_keeps_one_header_and_every_row_of_both_sides_in_order():
    header = b"id\tts\tdescription\n"
    assert merge.merge_ledger(b"", header + b"1\tt1\ta\n", header + b"2\tt2\tb\n") == header + b"1\tt1\ta\n2\tt2\tb\n"
    base = header + b"0\tt0\tseed\n"
    ours = base + b"1\tt1\t\xe6\x97\xa5\n"
    theirs = header + b"9\tt9\tinserted by an earlier union\n0\tt0\tseed\n2\tt2\tb\n"
    merged = merge.merge_ledger(base, ours, theirs)
    assert merged == header + b"9\tt9\tinserted by an earlier union\n0\tt0\tseed\n1\tt1\t\xe6\x97\xa5\n2\tt2\tb\n"


def test_ledger_torn_last_line_is_not_glued_to_the_next_row():
    assert merge.merge_ledger(b"h\n", b"h\na", b"h\nb\n") == b"h\na\nb\n"


def _is_subsequence(small: list[bytes], big: list[bytes]) -> bool:
    it = iter(big)
    return all(line in it for line in small)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=6), st.lists(st.integers(10, 20), max_size=6),
       st.lists(st.integers(30, 40), max_size=6))
def test_ledger_merge_keeps_every_line_of_both_parents_in_order(base_rows, our_new, their_new):
    header = [b"id\tts\n"]
    base = header + [b"b%d\t0\n" % n for n in base_rows]
    ours = base + [b"o%d\t1\n" % n for n in our_new]
    theirs = base + [b"t%d\t2\n" % n for n in their_new]
    merged = merge.merge_ledger(b"".join(base), b"".join(ours), b"".join(theirs)).splitlines(keepends=True)
    assert _is_subsequence(ours, merged) and _is_subsequence(theirs, merged)
    assert len(merged) == len(base) + len(our_new) + len(their_new)
    assert merged.count(header[0]) == 1


FACT = "---\nname: n\ndescription: {d}\nmetadata:\n  type: project\n  updated: {u}\n---\n{d}\n"


def test_fact_changed_on_both_sides_newer_stays_other_is_the_loser_with_a_stable_copy_name():
    base = FACT.format(d="基本", u="2026-11-30T09:00:00+09:00")
    ours = FACT.format(d="ours", u="2026-11-30T10:00:00+09:00")
    theirs = FACT.format(d="theirs", u="2026-11-30T11:00:00+09:00")
    done = merge.merge_fact(base, ours, theirs)
    assert (done.text, done.loser, done.how) == (theirs, ours, "theirs")
    swapped = merge.merge_fact(base, theirs, ours)
    assert (swapped.text, swapped.loser, swapped.how) == (theirs, ours, "ours")
    assert merge.conflict_name("n", ours) == merge.conflict_name("n", swapped.loser)
    assert merge.conflict_name("n", ours).startswith("n.") and merge.conflict_name("n", ours) != merge.conflict_name("n", theirs)
    assert merge.merge_fact(base, base, theirs) == merge.FactMerge(theirs, None, "clean")


def test_text_merge_never_writes_markers_and_says_when_it_was_not_clean():
    assert merge.merge_text("a\nb\nc\n", "a\nB\nc\n", "a\nb\nC\n") == ("a\nB\nC\n", True)
    assert merge.merge_text("a\nb\nc\n", "a\nB\nc\n", "a\nBB\nc\n") == ("a\nB\nBB\nc\n", False)
