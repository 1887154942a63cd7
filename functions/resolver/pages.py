"""The resolver's pages: landing (resolve box and IBI inspector), status, alerts.

Pure functions returning documents. Everything user-supplied is HTML-escaped. The pages load
nothing from elsewhere and run under a strict Content-Security-Policy: the one inline script
is allowed by its SHA-256 hash, never by ``'unsafe-inline'``. Their stylesheet and skeleton are
the ones an Archive's pages share (``functions/shared/look.py``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from functions.shared import look

if TYPE_CHECKING:
    from ibi.core.citation import Record
from functions.shared.headers import prefers

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
      var more = document.createElement('p');
      var holdings = document.createElement('a');
      holdings.href = '/holdings/' + body.label;
      holdings.textContent = 'Who holds it: the holdings view';
      more.appendChild(holdings);
      out.appendChild(more);
    })
    .catch(function () { out.textContent = 'The inspector could not be reached.'; });
});
"""

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; "
    f"{look.STYLE_SOURCE}; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; "
    "img-src 'self'"
)
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, **look.COMMON_HEADERS}


@dataclass(frozen=True, slots=True)
class ArchiveStatus:
    """What /status shows of a registered Archive (nothing secret is in here)."""

    service_ibi: str
    address: str
    included: bool
    last_answer_iso: str | None
    last_outcome: str | None


_e = look.escape


def _document(title: str, body: str, *, script: bool = False) -> str:
    return look.document(title, body, script=_SCRIPT if script else None)


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
    holdings: str | None = None  # the IBI whose holdings view the alert links to
    tombstone: Record | None = None  # a 410's: what was there, as its Archive keeps it

    def was_here(self) -> list[tuple[str, str]]:
        """A deleted item's title, creators and date, and when and why it was withdrawn."""
        record = self.tombstone
        if record is None:
            return []
        withdrawn = record.withdrawn
        rows = [
            ("Title", record.first("title")),
            ("Creators", "; ".join(record.all("creator"))),
            ("Date", record.first("date")),
            ("Deleted", withdrawn.at if withdrawn else None),
            ("Reason", withdrawn.reason if withdrawn else None),
        ]
        return [(name, " ".join(value.split())) for name, value in rows if value]

    def page(self) -> str:
        items = "".join(f"<li><code>{_e(d)}</code></li>" for d in self.details)
        listed = f"<ul>{items}</ul>" if items else ""
        url = (
            f'<p class="muted">Persistent URL: <code>{_e(self.persistent_url)}</code></p>'
            if self.persistent_url
            else ""
        )
        rows = "".join(f"<dt>{name}</dt><dd>{_e(value)}</dd>" for name, value in self.was_here())
        was = f'<h2>What was here</h2><dl id="tombstone">{rows}</dl>' if rows else ""
        body = (
            f'<h1>{_e(self.title)}</h1><p role="alert">{_e(self.message)}</p>{listed}{was}{url}'
            f'<p class="muted">HTTP {self.status} · <a href="/">IBI resolver</a></p>'
        )
        if self.holdings:
            body += (
                f'<p><a id="holdings" href="/holdings/{_e(self.holdings)}">Who holds '
                f"<code>{_e(self.holdings)}</code>, in what state: the holdings view</a></p>"
            )
        return _document(f"{self.status} {self.title}", body)

    def text(self) -> str:
        lines = [f"{self.status} {self.title}", self.message, *(f"  {d}" for d in self.details)]
        lines += [f"{name}: {value}" for name, value in self.was_here()]
        if self.persistent_url:
            lines.append(f"Persistent URL: {self.persistent_url}")
        return "\n".join(lines) + "\n"


def alert_page(status: int, title: str, message: str, **more: Any) -> str:
    return AlertView(status, title, message, **more).page()


def alert_text(status: int, title: str, message: str, **more: Any) -> str:
    return AlertView(status, title, message, **more).text()


def wants_text(accept: str | None) -> bool:
    """Whether the client prefers ``text/plain`` to ``text/html`` (by q-values)."""
    return prefers(accept, "text/plain", over=("text/html", "application/xhtml+xml"))


# ---------------------------------------------------------------------------- holdings


def _forms_text(forms: Any) -> str:
    if not isinstance(forms, dict) or not forms:
        return "—"
    return " · ".join(
        f"<code>{_e(forms[form])}</code> ({form})" for form in ("ibip", "rep") if form in forms
    )


def _holdings_link(forms: Any) -> str:
    if not isinstance(forms, dict) or not forms:
        return "—"
    label = str(forms.get("ibip") or forms.get("rep"))
    return f'<a href="/holdings/{_e(label)}"><code>{_e(label)}</code></a>'


def _link_text(link: Any) -> str:
    if not isinstance(link, dict):
        return "—"
    if link.get("ibi"):
        return _holdings_link(link["ibi"])
    return f"<code>{_e(link.get('url') or '—')}</code>"


def _web_link(url: Any) -> str:
    text = str(url or "")
    if text.startswith(("http://", "https://")) and text.isascii():
        return f'<a href="{_e(text)}" rel="noreferrer"><code>{_e(text)}</code></a>'
    return f"<code>{_e(text or '—')}</code>"


def _holding_rows(holding: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("address", f"<code>{_e(holding['address'] or '—')}</code>")]
    if holding.get("problem"):
        rows.append(("problem", f'<span class="error">{_e(holding["problem"])}</span>'))
    if holding["state"] in {"none", "unreachable"}:
        return rows
    rows += [
        ("IBI", _forms_text(holding.get("ibi"))),
        ("timestamp", _e(holding.get("timestamp") or "—")),
        ("URL", _web_link(holding.get("url"))),
        ("next edition", _holdings_link(holding.get("next_edition"))),
    ]
    if not holding.get("extension"):
        note = holding.get("extension_problem") or "this Archive does not report its holdings"
        rows.append(("details", f'<span class="muted">{_e(note)}</span>'))
        return rows
    translations = holding.get("translations") or {}
    rows += [
        ("language", _e(holding.get("language") or "—")),
        (
            "translations",
            ", ".join(f"{_e(k)}: {_link_text(v)}" for k, v in translations.items()) or "—",
        ),
        ("metadata", _e(" ".join(holding.get("metadata_formats") or []) or "—")),
    ]
    if isinstance(holding.get("usage"), dict):
        rows.append(("accesses", _e(holding["usage"]["total"])))
    if isinstance(holding.get("unique_usage"), dict):
        rows.append(("unique accesses", _e(holding["unique_usage"]["total"])))
    return rows


def _holding_files(holding: dict[str, Any]) -> str:
    if not holding.get("extension") or holding["state"] not in {"Original", "Copy", "held"}:
        return ""
    if not holding.get("listable"):
        return '<p class="muted">Listing the files of this item is not allowed here.</p>'
    damaged = set(holding.get("damaged") or [])
    rows = "".join(
        f"<tr><td><code>{_e(f['path'])}</code>"
        + (' <strong class="error">damaged</strong>' if f["path"] in damaged else "")
        + f"</td><td>{_e(f['size'])}</td><td><code>{_e(f['sha256'])}</code></td></tr>"
        for f in holding.get("files") or []
    )
    if not rows:
        return '<p class="muted">No files.</p>'
    more = (
        f'<p class="muted">{_e(holding["file_count"])} files in all; the list was cut short.</p>'
        if holding.get("truncated")
        else ""
    )
    return (
        "<table><thead><tr><th>file</th><th>bytes</th><th>SHA-256</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>{more}"
    )


def _holding_section(holding: dict[str, Any]) -> str:
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in _holding_rows(holding))
    state = holding["state"]
    css = "error" if state == "unreachable" else "muted" if state == "none" else ""
    trust = {"owner": " · owns the prefix", "named": " · named by a transfer record"}.get(
        holding.get("trust", ""), ""
    )
    if state == "Original" and holding.get("trust") == "untrusted":
        state, css = "Original (claim not trusted: not the prefix's owner)", "error"
    return (
        f'<section><h3 class="wrap"><code>{_e(holding["archive"])}</code> · '
        f'<span class="{css}">{_e(state)}</span>{_e(trust)}</h3><dl>{rows}</dl>'
        f"{_holding_files(holding)}</section>"
    )


def _verdict(verdict: dict[str, Any]) -> str:
    if verdict["ok"]:
        summary = '<p class="ok" role="status">Every Archive that answered agrees.</p>'
    else:
        items = "".join(f"<li>{_e(p)}</li>" for p in verdict["problems"])
        summary = f'<ul class="error" role="alert">{items}</ul>'
    copies = "".join(
        f"<li><code>{_e(c['archive'])}</code>: "
        + (
            '<span class="ok">same files as the original</span>'
            if c["agrees"]
            else '<span class="error">differs</span>'
            if c["agrees"] is False
            else f'<span class="muted">{_e(c["note"] or "not compared")}</span>'
        )
        + "</li>"
        for c in verdict["copies"]
    )
    chain = "".join(
        f"<li>{_holdings_link({'ibip': e['ibi']})} — "
        + (
            _e(", ".join(f"{a} ({s})" for a, s in e["holders"].items()))
            if e["holders"]
            else '<span class="muted">held by no Archive that answered</span>'
        )
        + "</li>"
        for e in verdict["edition_chain"]
    )
    return (
        f"<h2>Verdict</h2>{summary}"
        + (f"<h3>Copies</h3><ul>{copies}</ul>" if copies else "")
        + f"<h3>Edition chain</h3><ol>{chain}</ol>"
    )


def _usage(view: dict[str, Any]) -> str:
    """The item's usage figures (``ibi/core/usage.py``), summed over the Archives, and what
    they count (COUNTER Release 5's requests: ``holdings.COUNTED``)."""
    usage, unique = view.get("usage"), view.get("unique_usage")
    if not isinstance(usage, dict):
        return ""
    from ibi.core.usage import Usage

    figures = Usage.of(int(usage["total"]), usage["months"])
    counted = str(view.get("usage_counted") or "Accesses through the persistent URL.")
    return (
        f'<h2>Usage</h2><p class="muted">{_e(counted)} By calendar month (UTC).</p>'
        f"{look.usage_table(figures, element_id='usage')}"
        + (
            f'<p id="unique-usage">Unique requests: {_e(unique["total"])}</p>'
            if isinstance(unique, dict)
            else ""
        )
    )


def holdings_page(view: dict[str, Any]) -> str:
    """The holdings view (``functions/resolver/holdings.py``) as a page: no script at all."""
    label = str(view["ibi"])
    archives = "".join(_holding_section(h) for h in view["archives"]) or (
        "<p>No Archive is included in this resolver.</p>"
    )
    body = (
        f'<h1 class="wrap">Holdings of <code>{_e(label)}</code></h1>'
        '<p class="muted">Who holds this IBI, in what state, and whether their bytes agree: '
        "every Archive included in this resolver, asked now.</p>"
        f'<p>Persistent URL: <a class="wrap" href="/{_e(label)}"><code>/{_e(label)}</code></a></p>'
        f"{_verdict(view['verdict'])}{_usage(view)}<h2>Archives</h2>{archives}"
        '<p class="muted">The same as JSON: <code>Accept: application/json</code> · '
        '<a href="/">IBI resolver</a></p>'
    )
    return _document(f"Holdings of {label}", body)
