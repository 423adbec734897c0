"""HTML for the ui: one escape function, the page frame, and charts as inline SVG.

Every text that comes from the store goes through `esc` (or `attr`): a fact holding
`<script>` is shown as text. The page has no JavaScript; charts are drawn here,
on the server, with presentation attributes (the Content-Security-Policy of
server.py allows no inline style or script).
"""

from __future__ import annotations

import html
from typing import Iterable, Sequence
from urllib.parse import urlencode

from ..tsv import BIDI_CONTROLS

NAV = (("/", "Facts"), ("/inject", "Injected"), ("/episodes", "Episodes"), ("/state", "State"),
       ("/ledgers", "Ledgers"), ("/conflicts", "Conflicts"))

CSS = """
body{font-family:system-ui,"Noto Sans CJK JP","Hiragino Sans","Yu Gothic","IPAPGothic",sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#2d3e50;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:baseline;flex-wrap:wrap}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:bold;text-decoration:underline}
header .store{color:#9fb3c8;font-size:.85em;margin-left:auto}
main{padding:1em 1.5em;max-width:70em}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef2f6}
td,th,pre,h1,a{unicode-bidi:isolate}
pre{background:#fff;border:1px solid #ddd;padding:.6em;white-space:pre-wrap;word-break:break-word;max-width:100%}
.muted{color:#777}.warn{color:#a40}.err{color:#b00;font-weight:bold}
.side{display:flex;gap:1em}.side>div{flex:1;min-width:0}
form{margin:.5em 0}input[type=text],textarea{width:30em;max-width:100%;font:inherit;padding:.2em}
textarea{height:5em;width:40em}
svg{background:#fff;border:1px solid #ddd;margin:.3em 0}
h2{margin-top:1.3em;font-size:1.2em}
"""


def esc(value: object) -> str:
    """Text for an element's content or a quoted attribute value; a bidi control (which would reorder
    what follows it: `invoice \u202efdp.exe` shown as `invoice exe.pdf`) is shown as `<U+202E>`."""
    text = "" if value is None else str(value)
    if not text.isprintable():
        text = "".join(f"<U+{ord(c):04X}>" if c in BIDI_CONTROLS else c for c in text)
    return html.escape(text, quote=True)


def link(path: str, text: object, **params: str) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f'<a href="{esc(path + ("?" + query if query else ""))}">{esc(text)}</a>'


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, raw: bool = False) -> str:
    """Rows of cells; cells are escaped unless `raw` (then each is HTML built here)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, *, active: str, store_label: str) -> str:
    nav = " ".join(f'<a href="{p}"{" class=on" if p == active else ""}>{esc(t)}</a>' for p, t in NAV)
    return (f'<!doctype html><html lang="ja"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)} · memctl</title><link rel="stylesheet" href="/ui.css"></head>'
            f'<body><header><strong>memctl</strong> {nav}<span class="store">{esc(store_label)} · read-only</span>'
            f'</header><main><h1>{esc(title)}</h1>{body}</main></body></html>')


# ---------------------------------------------------------------- charts

def _num(value: float) -> str:
    return f"{value:.1f}"


def bars(items: Sequence[tuple[str, float]], *, width: int = 420, label_width: int = 110, scale: float | None = None,
         cls: str = "bars") -> str:
    """Horizontal bars, one per (label, value); values in [0, scale] (scale: 1, or the largest value)."""
    top = scale if scale is not None else max([v for _, v in items] + [1e-9])
    row, span = 18, width - label_width - 60
    parts = [f'<svg class="{esc(cls)}" width="{width}" height="{row * len(items) + 4}" role="img">']
    for i, (label, value) in enumerate(items):
        y = i * row + 2
        w = max(0.0, min(1.0, value / top if top else 0.0)) * span
        shown = f"{value:.3f}" if scale == 1 else f"{value:g}"
        parts.append(f'<text x="4" y="{y + 13}" font-size="12" fill="#333">{esc(label)}</text>'
                     f'<rect class="bar" x="{label_width}" y="{y + 2}" width="{_num(w)}" height="12" fill="#4a7fb5">'
                     f'<title>{esc(label)}: {esc(shown)}</title></rect>'
                     f'<text x="{_num(label_width + w + 4)}" y="{y + 13}" font-size="11" fill="#555">{esc(shown)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def columns_chart(items: Sequence[tuple[str, float]], *, width: int = 720, height: int = 140) -> str:
    """Vertical bars over time (e.g. episodes per day), labelled at the ends."""
    if not items:
        return '<p class="muted">nothing to draw</p>'
    top = max(v for _, v in items) or 1
    step = (width - 40) / len(items)
    parts = [f'<svg class="columns" width="{width}" height="{height + 20}" role="img">']
    for i, (label, value) in enumerate(items):
        h = value / top * (height - 10)
        parts.append(f'<rect class="bar" x="{_num(30 + i * step)}" y="{_num(height - h)}" width="{_num(max(1.0, step - 1))}" '
                     f'height="{_num(h)}" fill="#6a9f58"><title>{esc(label)}: {esc(f"{value:g}")}</title></rect>')
    parts.append(f'<text x="30" y="{height + 15}" font-size="11" fill="#555">{esc(items[0][0])}</text>'
                 f'<text x="{width - 10}" y="{height + 15}" font-size="11" fill="#555" text-anchor="end">{esc(items[-1][0])}</text>'
                 f'<text x="2" y="12" font-size="11" fill="#555">{esc(f"{top:g}")}</text></svg>')
    return "".join(parts)


def finite(value) -> float | None:
    """`value` as a finite float for a chart, or None (a number of 400 digits, `nan`, a text)."""
    import math  # noqa: PLC0415

    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None


def line_chart(name: str, points: Sequence[tuple[str, float]], *, width: int = 560, height: int = 160) -> str:
    """One number over time: a polyline with a dot per point (its date and value as a tooltip)."""
    if not points:
        return '<p class="muted">no points</p>'
    values = [v for _, v in points]
    low, high = min(values), max(values)
    spread = (high / 2 - low / 2) or 1.0  # halves: 1e308 - -1e308 is no float
    left, right, top_pad, bottom = 50, 10, 10, 25
    step = (width - left - right) / max(1, len(points) - 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + i * step, top_pad + (1 - (v / 2 - low / 2) / spread) * (height - top_pad - bottom)

    coords = [xy(i, v) for i, (_, v) in enumerate(points)]
    parts = [f'<svg class="line" data-name="{esc(name)}" width="{width}" height="{height}" role="img">',
             f'<text x="4" y="{top_pad + 8}" font-size="11" fill="#555">{esc(f"{high:g}")}</text>',
             f'<text x="4" y="{height - bottom}" font-size="11" fill="#555">{esc(f"{low:g}")}</text>',
             '<polyline fill="none" stroke="#c0562b" stroke-width="2" points="'
             + " ".join(f"{_num(x)},{_num(y)}" for x, y in coords) + '"/>']
    for (label, value), (x, y) in zip(points, coords):
        parts.append(f'<circle class="pt" cx="{_num(x)}" cy="{_num(y)}" r="3" fill="#c0562b">'
                     f'<title>{esc(label)}: {esc(f"{value:g}")}</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 6}" font-size="11" fill="#555">{esc(points[0][0])}</text>'
                 f'<text x="{width - right}" y="{height - 6}" font-size="11" fill="#555" text-anchor="end">'
                 f'{esc(points[-1][0])}</text></svg>')
    return "".join(parts)
