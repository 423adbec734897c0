"""The near-dup judge: a command (any LLM CLI) that says whether two texts are the same.

Vector search proposes, the judge decides: `near-dup --judge-cmd CMD` (or
`[neardup] judge_cmd`) gives each check's top JUDGED hits at or above the
similar band (the threshold without one) to CMD, one pair per run: argv from
shlex, no shell, the prompt on stdin (the two texts also in MEMCTL_JUDGE_A and
MEMCTL_JUDGE_B), as `distill --llm-cmd` runs its command. The first word of
the answer, `same` or `different`, is the hit's verdict. Answers are kept in
`.memctl/judge.tsv` (a hash of the command and both texts, TAB, the answer),
so a pair is asked once. A judge that fails, times out or answers anything
else leaves that hit to its score, with a one-line warning.

`[neardup] judge_cmd` makes memctl run something, so it is an executable
setting (memctl/trust.py): a value a commit not made here brought is not used
until `memctl trust`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from . import config, errors
from .errors import BadInput

if TYPE_CHECKING:  # pragma: no cover
    from .neardup import Check, Hit
    from .store import Store

JUDGED = 3  # hits per check that go to the judge
DEFAULT_TIMEOUT = 30.0
CACHE = "judge.tsv"
PROMPT = (
    "Two texts follow. Do they say the same thing (a near-duplicate: the same theme, fact or topic, "
    "perhaps worded differently), or different things? Answer with one word: same or different.\n\n"
    "Text A:\n{a}\n\nText B:\n{b}\n"
)


def checked_command(raw: dict) -> str | None:
    """`[neardup] judge_cmd` of a parsed memctl.toml as written (None when absent); BadInput when no text."""
    value = config.section(raw, "neardup").get("judge_cmd")
    if value is not None and not isinstance(value, str):
        raise BadInput(f"memctl.toml: [neardup] judge_cmd must be a string, got {value!r}")
    return value


def command_for(store: "Store", given: str | None) -> str | None:
    """The judge command: `given`, else `[neardup] judge_cmd` once approved on this machine."""
    if given is not None:
        return given or None
    value = checked_command(store.config.raw)
    if value is None:
        return None
    from . import trust  # noqa: PLC0415

    return value if trust.JUDGE_KEY in trust.acted_on(store, [trust.JUDGE_KEY]) else None


def timeout_for(store: "Store") -> float:
    value = config.section(store.config.raw, "neardup").get("judge_timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BadInput(f"memctl.toml: [neardup] judge_timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def key(command: str, a: str, b: str) -> str:
    return hashlib.sha256("\0".join((command, a, b)).encode("utf-8")).hexdigest()


def parse(answer: str) -> str | None:
    """`same` or `different` from the answer's first word (any case, punctuation around it), else None."""
    match = re.match(r"\W*([A-Za-z]+)", answer)
    word = match.group(1).lower() if match else ""
    return word if word in ("same", "different") else None


def judge_checks(store: "Store", checks: list["Check"], command: str) -> list["Check"]:
    """Each check with its top hits at or above the band judged (Hit.judge set)."""
    from .runcmd import BadAnswer, parse_command, run_command  # noqa: PLC0415

    argv = parse_command(command, "judge_cmd")
    seconds = timeout_for(store)
    cache = _read_cache(store)
    learned: dict[str, str] = {}
    given_up = False  # a judge that timed out (or cannot run) is not asked again: each ask would wait as long

    def ask(a: str, b: str) -> str:
        nonlocal given_up
        k = key(command, a, b)
        if k in cache or k in learned:
            return cache.get(k) or learned[k]
        if given_up:
            return "failed"
        try:
            answer = run_command(argv, PROMPT.format(a=a, b=b), seconds, env={"MEMCTL_JUDGE_A": a, "MEMCTL_JUDGE_B": b})
        except BadAnswer as exc:
            given_up = not exc.again
            errors.warn(f"near-dup judge {command!r}: {exc}; the score decides"
                        + ("" if exc.again else " (the judge is not asked again in this run)"), hint="check the judge command")
            return "failed"
        verdict = parse(answer)
        if verdict is None:
            errors.warn(f"near-dup judge {command!r} answered {answer.strip()[:60]!r}, not same or different; "
                        "the score decides", hint="make the judge answer one word: same or different")
            return "failed"
        learned[k] = verdict
        return verdict

    # A stop between two asks is noted and raised before the next (errors.stops_noted): raised where it
    # landed, in a finished command's Popen.__del__, it was swallowed and memctl asked on.
    with errors.stops_noted() as stop_if_asked:
        judged = [_judge_one(check, ask, stop_if_asked) for check in checks]
    if learned:
        _save_cache(store, learned)
    return judged


def _judge_one(check: "Check", ask: Callable[[str, str], str], stop_if_asked: Callable[[], None]) -> "Check":
    floor = check.threshold if check.similar is None else check.similar
    candidates = [i for i, h in enumerate(check.hits) if h.score >= floor][:JUDGED]
    hits: list[Hit] = list(check.hits)
    for i in candidates:
        stop_if_asked()
        hits[i] = replace(hits[i], judge=ask(check.text, hits[i].text))
    return replace(check, hits=tuple(hits))


# ---------------------------------------------------------------- the cache, in .memctl/


def _read_cache(store: "Store") -> dict[str, str]:
    from .fsutil import read_text  # noqa: PLC0415

    try:
        text = read_text(store.root, store.cache_dir / CACHE)  # a link on the way is refused, never followed
    except (OSError, UnicodeDecodeError):  # missing, a folder, unreadable: a cache, so none (saving says why)
        return {}
    pairs = (line.split("\t") for line in text.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2 and p[1] in ("same", "different")}


def _save_cache(store: "Store", learned: dict[str, str]) -> None:
    """The new answers added to the cache (atomically, under the store lock)."""
    from .fsutil import atomic_write, refuse_link  # noqa: PLC0415

    path = store.cache_dir / CACHE
    with store.lock():
        merged = {**_read_cache(store), **learned}
        refuse_link(store.root, path)
        try:
            atomic_write(path, "".join(f"{k}\t{v}\n" for k, v in merged.items()))
        except OSError as exc:  # a folder in its place, a full disk: the answer stands, the judge is asked again next time
            errors.warn(f"the judge's answers were not cached in {store.rel(path)}: {exc.strerror or exc}",
                        hint=f"remove {store.rel(path)} if it is not a file" if path.is_dir() else None)
