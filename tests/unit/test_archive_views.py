"""The Archive's pages and file headers, as pure functions (issue 11.3 and 11.4)."""

from __future__ import annotations

import pytest

from functions.archive import views

PAYLOAD = '<img src=x onerror="alert(1)">'


def test_an_error_page_escapes_what_it_quotes() -> None:
    page = views.error_page(404, f"no page {PAYLOAD!r}")
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_the_page_style_is_the_one_the_policy_allows() -> None:
    page = views.error_page(400, "x")
    assert f"<style>{views._STYLE}</style>" in page
    assert f"style-src 'sha256-{views._STYLE_HASH}'" in views.CONTENT_SECURITY_POLICY
    assert "script-src" not in views.CONTENT_SECURITY_POLICY
    assert views.CONTENT_SECURITY_POLICY.startswith("default-src 'none'")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html",
        "TEXT/HTML; charset=utf-8",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/javascript",
        "application/octet-stream",
        "html",
    ],
)
def test_active_or_unknown_types_are_attachments(content_type: str) -> None:
    headers = views.file_headers(content_type, "dir/page.html")
    assert headers["Content-Disposition"].startswith('attachment; filename="page.html"')
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "image/png", "image/jpeg", "video/mp4", "audio/ogg"]
)
def test_passive_types_are_inline_but_sandboxed(content_type: str) -> None:
    headers = views.file_headers(content_type, "a")
    assert "Content-Disposition" not in headers
    assert headers["Content-Security-Policy"].startswith("sandbox;")


def test_a_pdf_is_inline_without_the_sandbox_that_would_stop_its_viewer() -> None:
    headers = views.file_headers("application/pdf", "thesis.pdf")
    assert "Content-Disposition" not in headers and "Content-Security-Policy" not in headers
    assert headers["X-Content-Type-Options"] == "nosniff"
