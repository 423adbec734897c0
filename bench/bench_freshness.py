"""What it costs to learn whether any of N fact files changed (the recall index's freshness check).

    python bench/bench_freshness.py [--facts 10000] [--runs 30]

Writes N small fact files into a temp folder and times, in this process,
interleaved, each way of looking at them (CPU time, user + system, and wall
time; median and minimum), next to what each one sees:

  - stat of the folder only       sees files added, removed, renamed (rename-on-save editors,
                                  `sed -i`, git checkout); NOT an in-place write (nano, VS Code,
                                  `>>`, Path.write_text): that changes the file, not its folder
  - os.listdir                    the names only
  - os.scandir + DirEntry.inode   names and inode numbers (Linux gives no mtime without a stat)
  - scandir + DirEntry.stat()     a stat per file, in a Python loop
  - listdir + stat in a loop,     the recall index before issue 12: per-file stamp strings,
    stamp strings, sorted digest  a sorted join hashed
  - listdir + map(stat) in C,     the recall index now (rindex._fact_stats + _facts_digest)
    one tuple hash
  - read every file               what a content hash would cost
"""

from __future__ import annotations

import argparse
import functools
import operator
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b


def write_files(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"fact-{i:05d}.md").write_text(
            f"---\nname: fact-{i:05d}\ndescription: Rule {i}: 記事の公開は朝9時\nmetadata:\n  type: project\n---\n"
            + "Run the deploy before the review.\n" * (1 + i % 5), encoding="utf-8")


def ways(folder: Path):
    name = str(folder)
    get = operator.attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns", "st_mode")

    def folder_stat():
        return os.stat(name).st_mtime_ns

    def listdir():
        return os.listdir(name)

    def scandir_inode():
        with os.scandir(name) as it:
            return [(e.name, e.inode()) for e in it]

    def scandir_stat():
        with os.scandir(name) as it:
            return [(e.name, e.stat().st_mtime_ns) for e in it]

    def loop_strings():  # the code before issue 12
        import stat as stat_mod

        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY)
        found = {}
        try:
            for entry in os.listdir(fd):
                if entry.endswith(".md") and entry != "MEMORY.md" and not entry.startswith("."):
                    st = os.stat(entry, dir_fd=fd)
                    if stat_mod.S_ISREG(st.st_mode):
                        found[os.path.join(name, entry)] = (f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}", False)
        finally:
            os.close(fd)
        text = "\n".join(sorted(f"{p}\t{s}\t{a:d}" for p, (s, a) in found.items()))
        return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()

    def map_hash():  # rindex._fact_stats + _facts_digest
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY)
        try:
            names = [n for n in os.listdir(fd) if n.endswith(".md") and n != "MEMORY.md" and not n.startswith(".")]
            stats = list(map(functools.partial(os.stat, dir_fd=fd), names))
        finally:
            os.close(fd)
        digest = blake2b(digest_size=16)
        digest.update("\0".join(names).encode("utf-8", "surrogateescape"))
        digest.update(hash(tuple(map(get, stats))).to_bytes(8, "little", signed=True))
        return digest.hexdigest()

    def read_all():
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY)
        digest = blake2b(digest_size=16)
        try:
            for entry in os.listdir(fd):
                handle = os.open(entry, os.O_RDONLY, dir_fd=fd)
                try:
                    digest.update(os.read(handle, 1 << 20))
                finally:
                    os.close(handle)
        finally:
            os.close(fd)
        return digest.hexdigest()

    return {
        "stat of the folder only": folder_stat,
        "os.listdir": listdir,
        "os.scandir + inode": scandir_inode,
        "os.scandir + DirEntry.stat()": scandir_stat,
        "listdir + stat loop, strings (before)": loop_strings,
        "listdir + map(stat), tuple hash (now)": map_hash,
        "read every file": read_all,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-freshness-"))
    try:
        folder = tmp / "memory"
        write_files(folder, args.facts)
        candidates = ways(folder)
        for run in candidates.values():
            run()  # warm the dentry and inode caches
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label in candidates}
        for _ in range(args.runs):
            for label, run in candidates.items():
                cpu, wall = time.process_time(), time.perf_counter()
                run()
                samples[label].append(((time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'check':<40} {'cpu ms':>7} {'min':>6} {'wall ms':>8} {'min':>6}")
    for label, values in samples.items():
        cpu = [c for c, _ in values]
        wall = [w for _, w in values]
        print(f"{label:<40} {statistics.median(cpu):>7.2f} {min(cpu):>6.2f} {statistics.median(wall):>8.2f} {min(wall):>6.2f}")
    print(f"({args.facts} files, {args.runs} interleaved runs, medians; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}; {sys.platform})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
