"""Per-query time of recall on one LoCoMo conversation, in-process (the cost of conversation windows).

    python bench/locomo_query_time.py [PATH/TO/locomo-dev.json] [--conversation 0] [--batches 5] [--mode keyword]

Builds the conversation's store as bench/locomo.py does (one episode per turn),
warms the index, then times recall.answer for all of its questions in one batch,
`--batches` times, and prints the minimum and median milliseconds per query.
To compare two versions of memctl, run it with PYTHONPATH pointing at the other
checkout's source, back to back.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0, help="index in the file (default 0)")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--mode", default="keyword", choices=("keyword",), help="keyword only (no model load)")
    args = parser.parse_args()
    import memctl
    from memctl import episodes, ledger, recall, rindex
    from memctl.store import init_store, open_store

    data = json.loads(args.data.read_text(encoding="utf-8"))
    conv = locomo.build_conversation(args.conversation, data[args.conversation], {})
    root = Path(tempfile.mkdtemp(prefix="memctl-qtime-")) / "store"
    init_store(root, git=False)
    store = open_store(root)
    episodes.ensure_ledger(store, commit_changes=False)
    ledger.append(store, episodes.LEDGER, conv.records, commit_changes=False)
    queries = [q.text for q in conv.questions]
    per_query = []
    with rindex.opened(store) as conn:
        recall.answer(store, conn, queries[:5], source="episodes", mode=args.mode, min_score=0)
        for _ in range(args.batches):
            start = time.perf_counter()
            recall.answer(store, conn, queries, source="episodes", mode=args.mode, min_score=0)
            per_query.append((time.perf_counter() - start) / len(queries) * 1000)
    print(f"{conv.sample_id}: {len(conv.records)} turns, {len(queries)} queries, memctl from {Path(memctl.__file__).parent}: "
          f"ms per query min {min(per_query):.2f}, median {statistics.median(per_query):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
