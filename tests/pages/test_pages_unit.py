"""The pages as documents: escaping, content negotiation, what an alert lists."""

from __future__ import annotations

import pytest

from functions.resolver import pages


@pytest.mark.parametrize(
    ("accept", "text"),
    [
        (None, False),
        ("*/*", False),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", False),
        ("text/plain", True),
        ("text/plain, text/html;q=0.5", True),
        ("text/html, text/plain;q=0.9", False),
        ("text/plain;q=0", False),
    ],
)
def test_wants_text(accept: str | None, text: bool) -> None:
    assert pages.wants_text(accept) is text


def test_alerts_escape_what_the_user_sent() -> None:
    page = pages.alert_page(400, "Malformed", "<script>alert(1)</script>", persistent_url="/<b>")
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page


def test_409_lists_the_suspects() -> None:
    page = pages.alert_page(409, "Two originals", "investigate", details=["a at x", "b at y"])
    assert "a at x" in page and "b at y" in page
    text = pages.alert_text(409, "Two originals", "investigate", details=["a at x", "b at y"])
    assert text.splitlines() == ["409 Two originals", "investigate", "  a at x", "  b at y"]


def test_status_shows_no_secret_fields() -> None:
    fields = set(pages.ArchiveStatus.__dataclass_fields__)
    assert fields == {"service_ibi", "address", "included", "last_answer_iso", "last_outcome"}
    archive = pages.ArchiveStatus("LK47B6W/362SFKH", "a.example", True, None, None)
    assert "never" in pages.status_page([archive], now_iso="2026-11-22T00:00:00Z")
    assert pages.status_text([], now_iso="x") == "Archives as of x\n"


def test_the_csp_allows_exactly_the_page_script() -> None:
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(pages._SCRIPT.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in pages.CONTENT_SECURITY_POLICY
    assert f"<script>{pages._SCRIPT}</script>" in pages.landing_page(
        resolver_name="r", service_ibi="J8LNKB5R7W/3FUQHC5", examples=[]
    )
