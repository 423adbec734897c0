"""`episode list` reads in time order (the `ts` column), whatever order a merge left the rows in (docs/FORMAT.md, Ledgers)."""

from __future__ import annotations

import json

from memctl import episodes
from memctl.store import open_store

from conftest import cli


def test_list_orders_by_ts_across_offsets_and_keeps_file_order_for_the_ledger_as_written(root):
    store = open_store(root)
    # As a merge leaves them: this machine's rows, then the other's (partly older).
    for ts, text in (("2026-11-30T10:00:00+09:00", "here 01:00Z"), ("2026-11-30T03:00:00+00:00", "here 03:00Z"),
                     ("2026-11-30T00:30:00+00:00", "there 00:30Z"), ("2026-11-30T11:00:00+09:00", "there 02:00Z 日本語"),
                     ("2026-11-30T03:00:00+00:00", "there 03:00Z, same ts as a row above")):
        assert cli(root, "episode", "add", text, "--type", "decision", env={"MEMCTL_NOW": ts}).exit_code == 0
    listed = [e.description for e in episodes.list_episodes(store)]
    assert listed == ["there 00:30Z", "here 01:00Z", "there 02:00Z 日本語", "here 03:00Z", "there 03:00Z, same ts as a row above"]
    as_written = [e.description for e in episodes.list_episodes(store, include_forgotten=True)]
    assert as_written == ["here 01:00Z", "here 03:00Z", "there 00:30Z", "there 02:00Z 日本語", "there 03:00Z, same ts as a row above"]
    r = cli(root, "episode", "list", "--json")

    assert [e["description"] for e in json.loads(r.stdout)] == listed
