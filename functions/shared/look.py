"""The look every ibi page shares: one stylesheet, one document skeleton, the same headers.

The resolver's pages (``functions/resolver/pages.py``) and an Archive's
(``functions/archive/views.py``) are built on this module, so that a reader going from one to the
other sees one site. Pure: strings in, strings out. The stylesheet is inline and allowed by its
SHA-256 hash (``STYLE_SOURCE``), never by ``'unsafe-inline'``; each service writes the rest of
its own Content-Security-Policy (the resolver runs one script, an Archive none).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ibi.core.usage import Usage

STYLE = """
:root{color-scheme:light dark;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--accent:#0b5cad}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--accent:#58a6ff}}
body{font:16px/1.5 system-ui,sans-serif;color:var(--fg);max-width:46rem;margin:2rem auto;padding:0 1rem}
h1{font-size:1.6rem;margin:.2rem 0 1rem}h2{font-size:1.15rem;margin-top:2rem}
form{display:flex;gap:.5rem;flex-wrap:wrap}label{width:100%;color:var(--muted)}
input[type=text]{flex:1;min-width:16rem;padding:.45rem .6rem;font:inherit;font-family:ui-monospace,monospace;border:1px solid var(--line);border-radius:6px;background:transparent;color:inherit}
button{padding:.45rem .9rem;font:inherit;border:1px solid var(--accent);border-radius:6px;background:var(--accent);color:#fff;cursor:pointer}
code,dd{font-family:ui-monospace,monospace}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{color:var(--muted)}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem .5rem;border-bottom:1px solid var(--line)}
.error{color:#c62828}.muted{color:var(--muted)}a{color:var(--accent)}
.wrap,dd,td{overflow-wrap:anywhere;min-width:0}.ok{color:#1a7f37}section{border-top:1px solid var(--line);margin-top:1.2rem}
nav{margin:1rem 0}
"""  # noqa: E501 - a stylesheet, one rule set a line

STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
STYLE_SOURCE = f"style-src 'sha256-{STYLE_HASH}'"  # the one stylesheet a page may apply

# Beside each service's Content-Security-Policy, on every page.
COMMON_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def escape(text: object) -> str:
    """``text`` as HTML text or a quoted attribute value."""
    return html.escape(str(text), quote=True)


def document(title: str, body: str, *, script: str | None = None, head: str = "") -> str:
    """A whole page: the shared head (viewport, no referrer, the stylesheet) and ``head``
    (already HTML: a landing page's ``<meta>`` tags and JSON-LD), ``body`` (already HTML) and,
    for a page that runs one, its script (allowed by its hash in the page's policy)."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="referrer" content="no-referrer"><title>{escape(title)}</title>{head}'
        f"<style>{STYLE}</style></head><body>{body}"
        + (f"<script>{script}</script>" if script is not None else "")
        + "</body></html>\n"
    )


def link_line(links: Sequence[str], *, element_id: str | None = None) -> str:
    """The pages' line of links (a header or footer): ``a · b · c``, muted, as a ``nav``."""
    ident = f' id="{escape(element_id)}"' if element_id else ""
    return f'<nav class="muted wrap"{ident}>{" · ".join(links)}</nav>' if links else ""


def usage_table(usage: Usage, *, element_id: str | None = None) -> str:
    """An item's usage figures (``ibi/core/usage.py``) as a small table: the accesses of each
    month, newest first, then the total."""
    ident = f' id="{escape(element_id)}"' if element_id else ""
    rows = "".join(
        f"<tr><td>{escape(month)}</td><td>{count}</td></tr>"
        for month, count in reversed(usage.months)
    )
    return (
        f"<table{ident}><thead><tr><th>month (UTC)</th><th>accesses</th></tr></thead>"
        f'<tbody>{rows}<tr><th scope="row">total</th><td>{usage.total}</td></tr></tbody></table>'
    )
