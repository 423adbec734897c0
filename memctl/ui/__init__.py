"""`memctl ui`: a read-only page on 127.0.0.1 to look at one store (docs/UI.md).

html.py renders (escaping, the page frame, inline SVG charts), views.py asks the
library for each view's data and renders it, server.py answers HTTP (loopback
only, GET/HEAD only, Host and Origin checked). Nothing here writes to the store.
"""
