"""The resolver's pages: landing (resolve box and IBI inspector), status, alerts.

Pure functions returning documents. Everything user-supplied is HTML-escaped. The pages load
nothing from elsewhere and run under a strict Content-Security-Policy: the one inline script
is allowed by its SHA-256 hash, never by ``'unsafe-inline'``.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_STYLE = """
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
"""

_SCRIPT = """
document.getElementById('resolve').addEventListener('submit', function (event) {
  event.preventDefault();
  var ibi = document.getElementById('resolve-ibi').value.trim().replace(/^\\/+/, '');
  if (!ibi) { return; }
  var keep = /[A-Za-z0-9\\-._~!$&'()*+,;=:@\\/?%]/;
  var path = Array.from(ibi).map(function (c) { return keep.test(c) ? c : encodeURIComponent(c); }).join('');
  window.location.assign('/' + path);
});
document.getElementById('inspect').addEventListener('submit', function (event) {
  event.preventDefault();
  var out = document.getElementById('inspect-result');
  var label = document.getElementById('inspect-ibi').value.trim();
  out.textContent = '';
  if (!label) { return; }
  fetch('/inspect?ibi=' + encodeURIComponent(label), {headers: {'Accept': 'application/json'}})
    .then(function (response) { return response.json().then(function (body) { return [response.ok, body]; }); })
    .then(function (result) {
      var ok = result[0], body = result[1];
      if (!ok) {
        var p = document.createElement('p');
        p.className = 'error';
        p.textContent = (body.error && body.error.message) || 'not an IBI';
        out.appendChild(p);
        return;
      }
      var rows = [
        ['form', body.form === 'rep' ? 'rep (name of a repository: host name, port, date)' : 'ibip (IP address and port, date, in base 27)'],
        ['label', body.label],
        ['minted by', body.form === 'rep' ? 'host ' + body.host : 'IP address ' + body.ip],
        ['port', String(body.port)],
        ['minted at (UTC)', body.iso],
        ['local time', new Date(Number(String(body.date).split('.')[0]) * 1000).toString()],
        ['prefix', body.prefix], ['suffix', body.suffix], ['date (seconds)', body.date]
      ];
      var dl = document.createElement('dl');
      rows.forEach(function (row) {
        var dt = document.createElement('dt'); dt.textContent = row[0];
        var dd = document.createElement('dd'); dd.textContent = row[1];
        dl.appendChild(dt); dl.appendChild(dd);
      });
      out.appendChild(dl);
    })
    .catch(function () { out.textContent = 'The inspector could not be reached.'; });
});
"""

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; "
    f"style-src 'sha256-{_STYLE_HASH}'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; "
    "img-src 'self'"
)


@dataclass(frozen=True, slots=True)
class ArchiveStatus:
    """What /status shows of a registered Archive (nothing secret is in here)."""

    service_ibi: str
    address: str
    included: bool
    last_answer_iso: str | None
    last_outcome: str | None


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _document(title: str, body: str, *, script: bool = False) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="referrer" content="no-referrer"><title>{_e(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}"
        + (f"<script>{_SCRIPT}</script>" if script else "")
        + "</body></html>\n"
    )


def landing_page(*, resolver_name: str, service_ibi: str, examples: Sequence[str]) -> str:
    sample = "".join(f'<li><a href="/{_e(x)}"><code>{_e(x)}</code></a></li>' for x in examples)
    body = f"""
<h1>{_e(resolver_name)}</h1>
<p>This resolver turns persistent URLs of <strong>IBIs</strong> (Internet Based Identifiers)
into the items they name, asking every Archive that has joined it.</p>
<h2 id="resolve-title">Resolve an IBI</h2>
<form id="resolve" aria-labelledby="resolve-title" action="/" method="get">
  <label for="resolve-ibi">An IBI in either form, optionally with a modifier
  (<code>!</code> last edition, <code>+(pt)</code> translation, <code>:(oai_dc)</code> metadata)
  and a file path</label>
  <input id="resolve-ibi" name="ibi" type="text" required autocomplete="off" spellcheck="false"
    placeholder="8JMKD3MGP8W/35MMLL8!:(oai_dc)">
  <button type="submit">Resolve</button>
</form>
<h2 id="inspect-title">Inspect an IBI</h2>
<form id="inspect" aria-labelledby="inspect-title" action="/inspect" method="get">
  <label for="inspect-ibi">Who minted it, and when: an IBI decodes to its subsystem's host or
  IP address, its port, and the date it was minted</label>
  <input id="inspect-ibi" name="ibi" type="text" required autocomplete="off" spellcheck="false"
    placeholder="sid.inpe.br/mtc-m18/2009/07.21.13.23">
  <button type="submit">Inspect</button>
</form>
<div id="inspect-result" aria-live="polite"></div>
<h2>Examples</h2><ul>{sample}</ul>
<p class="muted">Resolver service IBI: <code>{_e(service_ibi)}</code> ·
<a href="/status">Archives</a></p>
"""
    return _document(resolver_name, body, script=True)


def status_page(archives: Sequence[ArchiveStatus], *, now_iso: str) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(a.service_ibi)}</code></td><td>{_e(a.address or '—')}</td>"
        f"<td>{'included' if a.included else 'excluded'}</td>"
        f"<td>{_e(a.last_answer_iso or 'never')}</td><td>{_e(a.last_outcome or '')}</td></tr>"
        for a in archives
    )
    table = (
        "<table><thead><tr><th>Archive service IBI</th><th>address</th><th>state</th>"
        f"<th>last answered</th><th>outcome</th></tr></thead><tbody>{rows}</tbody></table>"
        if archives
        else "<p>No Archive is registered yet.</p>"
    )
    when = f'<p class="muted">As of {_e(now_iso)}.</p>'
    body = f'<h1>Archives</h1>{when}{table}<p><a href="/">Home</a></p>'
    return _document("Archives", body)


def status_text(archives: Sequence[ArchiveStatus], *, now_iso: str) -> str:
    lines = [f"Archives as of {now_iso}"]
    for a in archives:
        state = "included" if a.included else "excluded"
        last = a.last_answer_iso or "never"
        lines.append(
            f"{a.service_ibi} {a.address or '-'} {state} {last} {a.last_outcome or ''}".rstrip()
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class AlertView:
    """An alert (4xx/5xx) as the resolver shows it: a page, or text for ``text/plain``."""

    status: int
    title: str
    message: str
    details: Sequence[str] = ()
    persistent_url: str | None = None

    def page(self) -> str:
        items = "".join(f"<li><code>{_e(d)}</code></li>" for d in self.details)
        listed = f"<ul>{items}</ul>" if items else ""
        url = (
            f'<p class="muted">Persistent URL: <code>{_e(self.persistent_url)}</code></p>'
            if self.persistent_url
            else ""
        )
        body = (
            f'<h1>{_e(self.title)}</h1><p role="alert">{_e(self.message)}</p>{listed}{url}'
            f'<p class="muted">HTTP {self.status} · <a href="/">IBI resolver</a></p>'
        )
        return _document(f"{self.status} {self.title}", body)

    def text(self) -> str:
        lines = [f"{self.status} {self.title}", self.message, *(f"  {d}" for d in self.details)]
        if self.persistent_url:
            lines.append(f"Persistent URL: {self.persistent_url}")
        return "\n".join(lines) + "\n"


def alert_page(status: int, title: str, message: str, **more: Any) -> str:
    return AlertView(status, title, message, **more).page()


def alert_text(status: int, title: str, message: str, **more: Any) -> str:
    return AlertView(status, title, message, **more).text()


def wants_text(accept: str | None) -> bool:
    """Whether the client prefers ``text/plain`` to ``text/html`` (by q-values)."""
    quality: dict[str, float] = {}
    for part in (accept or "").split(","):
        pieces = part.strip().split(";")
        kind = pieces[0].strip().lower()
        q = 1.0
        for parameter in pieces[1:]:
            key, _, value = parameter.strip().partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if kind:
            quality[kind] = max(q, quality.get(kind, 0.0))
    text = quality.get("text/plain", 0.0)
    page = max(quality.get("text/html", 0.0), quality.get("application/xhtml+xml", 0.0))
    return text > 0 and text > page
