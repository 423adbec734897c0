"""Where the `.npy` scan stops being enough (issue 27, point 6): the vector half of a recall at N rows.

    python bench/bench_vector_scan.py [--sizes 10000,100000,300000,1000000] [--dim 384] [--runs 9]

What recall does with the cache once the query is embedded, on N random unit vectors of e5-small's
384 dimensions (the values do not change the cost): the matrix memory-mapped from a `.npy` file in
the page cache, as a command started per query has it (vcache._matrix), and the same matrix held in
memory, as `embed-server` and the MCP server hold theirs; one query's cosines against all rows
(`q @ M.T`), then the best 200 columns by recall.best_columns beside the full stable argsort it
replaced. Medians of RUNS, wall and CPU time, and the matrix's size. A model's own encode time for
one query is not included (bench/bench_embed.py measures it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
CANDIDATES = 200


def timed(work, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    import numpy as np

    from memctl.recall import best_columns

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,300000,1000000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    query = rng.standard_normal((1, args.dim)).astype(np.float32)
    query /= np.linalg.norm(query)
    print(f"load average before: {os.getloadavg()[0]:.2f}; dim {args.dim}; {args.runs} runs; ms (CPU ms)")
    print("| rows | matrix | cosines, memory-mapped | cosines, in memory | best 200 (partition) | full stable argsort |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            matrix = rng.standard_normal((size, args.dim), dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            path = Path(tmp) / f"{size}.npy"
            np.save(path, matrix)
            mapped = np.load(path, mmap_mode="r")
            _ = query @ mapped.T  # the page cache holds it, as after the command before
            row = (query @ matrix.T)[0]
            cells = [timed(lambda: query @ np.load(path, mmap_mode="r").T, args.runs),
                     timed(lambda: query @ matrix.T, args.runs),
                     timed(lambda: best_columns(row, CANDIDATES), args.runs),
                     timed(lambda: np.argsort(-row, kind="stable")[:CANDIDATES], args.runs)]
            shown = " | ".join(f"{wall:.1f} ({cpu:.1f})" for wall, cpu in cells)
            print(f"| {size:,} | {matrix.nbytes / 2**20:.0f} MiB | {shown} |", flush=True)
            del matrix, mapped, row
            path.unlink()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
