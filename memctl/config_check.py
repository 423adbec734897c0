"""Every section of a parsed memctl.toml checked as the command that reads it would, without running it.

`config.from_dict` checks the core settings and `jobs.check_declared` the job tables when memctl.toml
loads; the other sections (`[recall]`, `[state]`, `[forget]`, `[embedding]`, `[import]`, `[schedule]`,
`[consolidate]`, `[distill]`, `[neardup]`) are read by their own commands, so a bad value there stopped only those: `recall`,
the prompt hook, the STATE.md job, maintenance. `sync` runs these checks on an incoming memctl.toml
before it merges anything (docs/SYNC.md), so another clone cannot take them down.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from .errors import BadInput


def _view(root: Path, raw: dict[str, Any]) -> Any:
    """What the sections' readers use of a store: its root and its settings (nothing they could write)."""
    return SimpleNamespace(root=root, config=SimpleNamespace(raw=raw))


def _checks(root: Path, raw: dict[str, Any], doctor: bool = False) -> list[Callable[[], object]]:
    """The checks, in order; `doctor`: without those doctor makes itself in its own words ([state])."""
    from . import config, embed, jobs, judge, recall, sources, state, transcripts  # noqa: PLC0415
    from .lifecycle import consolidate, distill  # noqa: PLC0415

    store = _view(root, raw)
    scopes = (raw.get("state") or {}).get("scopes") if isinstance(raw.get("state"), dict) else None
    return [
        lambda: recall.settings_for(store),
        lambda: recall.stale_days_for(store),
        *([] if doctor else [lambda: [state.state_config(store, scope) for scope in (None, *(scopes if isinstance(scopes, dict) else ()))]]),
        lambda: embed.settings_from(raw),
        lambda: transcripts.checked_settings(raw),
        lambda: jobs.label_prefix(store),
        lambda: consolidate.rules_for(store, 0.95, "check"),
        lambda: consolidate.neighbours_for(store),
        lambda: distill.timeout_for(store, None),
        lambda: judge.timeout_for(store),
        lambda: judge.checked_command(raw),
        lambda: sources.declared(store),
        lambda: config.check_identity(raw),
    ]


def problems(root: Path, raw: dict[str, Any], source: str = "memctl.toml", *, doctor: bool = False) -> list[str]:
    """Each section of `raw` its command would refuse, as that command's message with the file called
    `source` (in the order of _checks), then every `[forget]` rule that does not parse. A reader that
    fails another way (`[recall] weights = 1`) is a problem too. `doctor`: what doctor does not name itself."""
    from .lifecycle import policy  # noqa: PLC0415

    found = []
    for check in _checks(root, raw, doctor):
        try:
            check()
        except BadInput as exc:
            message = exc.message
        except (TypeError, AttributeError, ValueError, KeyError) as exc:
            message = f"memctl.toml: a section memctl cannot read ({type(exc).__name__}: {exc})"
        else:
            continue
        found.append(message)
    found += policy.problems(raw)
    return [message.replace("memctl.toml", source, 1) if message.startswith("memctl.toml") else f"{source}: {message}"
            for message in found]
