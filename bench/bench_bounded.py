"""What the input bounds cost (issue 29.5): the size check before each read, and the anchor scan.

    python bench/bench_bounded.py [--facts 1000] [--runs 7] [--marked 0.1]

Writes N fact files (English and Japanese; a --marked share of them with `&` or `*` in their
frontmatter, so they take the precise anchor scan before the C YAML loader) into a temp folder, then times, in this
process with time.perf_counter, the median of --runs passes over all of them:

- reading each file as memctl did before (`Path.read_bytes`) and as it does now (`read_bounded`:
  one fstat on the open descriptor, a read that stops past the limit);
- `fact.parse` and `fact.load` of every file as fact.py was before (a plain read, the C loader
  alone: the two checks patched out) and as it is now;
- `memctl list` on a store of the same facts with a cold and a warm parse cache (a subprocess).

Information only: no budget, exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def write_facts(folder: Path, n: int, marked: float) -> list[Path]:
    """N facts; a `marked` share of them with `R&D` or `*bold*` in the description (the anchor scan's case)."""
    rng = random.Random(29)
    words = ["deploy", "billing", "backup", "release", "デプロイ", "請求", "バックアップ", "レビュー", "公開"]
    paths = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(8)) + (rng.choice([" R&D", " *bold*"]) if rng.random() < marked else "")
        body = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(4))
        path = folder / f"fact-{i:05d}.md"
        path.write_text(f"---\nname: fact-{i:05d}\ndescription: {text!r}\nmetadata:\n  type: project\n  importance: 0.5\n"
                        f"  tags: [bench, t{i % 7}]\n  created: 2026-01-01T00:00:00+00:00\n---\n{body}\n", encoding="utf-8")
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--marked", type=float, default=0.1, help="share of facts with & or * (0-1)")
    args = parser.parse_args()

    from memctl import fact as fact_mod
    from memctl.fsutil import FACT_LIMIT, read_bounded

    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-bounded-"))
    try:
        store = tmp / "store"
        subprocess.run([sys.executable, "-m", "memctl", "init", str(store), "--no-git"], check=True, capture_output=True)
        paths = write_facts(store / "memory", args.facts, args.marked)
        texts = [fact_mod.split(p.read_text(encoding="utf-8"))[0] for p in paths]
        with_marks = sum(1 for t in texts if "&" in t or "*" in t)

        def as_before() -> contextlib.AbstractContextManager:
            """fact.py as it was: a plain read, the C loader alone (the two checks patched out)."""
            stack = contextlib.ExitStack()
            for name, plain in (("read_bounded", lambda path, *_: Path(path).read_bytes()), ("_refuse_anchors", lambda *_: None)):
                stack.callback(setattr, fact_mod, name, getattr(fact_mod, name))
                setattr(fact_mod, name, plain)
            return stack

        def parse_all() -> None:
            for text in texts:
                fact_mod.parse(f"---\n{text}\n---\n", "x")

        def load_all() -> None:
            for path in paths:
                fact_mod.load(path)

        def paired(before, now) -> tuple[float, float]:
            """Medians of the two, run alternately (a busy machine slows both alike)."""
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.runs):
                for slot, (fn, patched) in enumerate(((before, True), (now, False))):
                    with as_before() if patched else contextlib.nullcontext():
                        started = time.perf_counter()
                        fn()
                        times[slot].append(time.perf_counter() - started)
            return statistics.median(times[0]), statistics.median(times[1])

        rows = []
        for label, before, now in (
            ("read: Path.read_bytes (before) / read_bounded (now)", lambda: [p.read_bytes() for p in paths],
             lambda: [read_bounded(p, FACT_LIMIT, "a fact file") for p in paths]),
            ("fact.parse: C loader alone (before) / anchor scan where & or * (now)", parse_all, parse_all),
            ("fact.load", load_all, load_all),
        ):
            rows.append((label, *paired(before, now)))

        def listing() -> None:
            subprocess.run([sys.executable, "-m", "memctl", "--root", str(store), "list"], check=True, capture_output=True)

        def cold() -> None:
            (store / ".memctl" / "facts.json").unlink(missing_ok=True)
            listing()

        print(f"{args.facts} facts ({with_marks} with & or * in their frontmatter), median of {args.runs} runs each, alternated")
        for label, before, now in rows:
            print(f"  {label}\n      before {before * 1e6 / args.facts:7.1f} us/fact   now {now * 1e6 / args.facts:7.1f} us/fact"
                  f"   ({(now - before) * 1e6 / args.facts:+.1f} us/fact)")
        print(f"  memctl list, cold parse cache: {median_time(cold, args.runs) * 1000:.0f} ms; "
              f"warm: {median_time(listing, args.runs) * 1000:.0f} ms (now)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
