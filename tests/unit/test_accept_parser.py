"""One Accept parser (``functions/shared/headers.py``) for every resolver answer (issue 29): the
pages, the holdings view and content negotiation read q-values the same way."""

from __future__ import annotations

import pytest

from functions.resolver import negotiation, pages
from functions.resolver.holdings import prefers_json
from functions.resolver.languages import parse_accept_language
from functions.shared.headers import MAX_RANGES, accept_ranges, link_target, prefers, quality


@pytest.mark.parametrize(
    ("value", "q"),
    [
        ("1", 1.0),
        ("0.5", 0.5),
        (" 0.25 ", 0.25),
        ("0", 0.0),
        ("2", 1.0),  # clamped
        ("1e9", 1.0),
        ("-1", 0.0),
        ("NaN", 0.0),  # no finite number: refused
        ("nan", 0.0),
        ("inf", 0.0),
        ("-Infinity", 0.0),
        ("x", 0.0),
        ("", 0.0),
    ],
)
def test_a_q_value_is_clamped_and_anything_but_a_finite_number_counts_as_zero(
    value: str, q: float
) -> None:
    assert quality(value) == q


@pytest.mark.parametrize(
    ("header", "ranges"),
    [
        (None, []),
        ("", []),
        (" , ,", []),
        ("*/*", [("*/*", 1.0, {})]),
        ("text/*;q=0.3", [("text/*", 0.3, {})]),
        ("Text/HTML", [("text/html", 1.0, {})]),
        (
            "text/html, application/json;q=0.9",
            [("text/html", 1.0, {}), ("application/json", 0.9, {})],
        ),
        (
            'text/x-bibliography; Style="apa"; locale=pt-BR; q=0.8',
            [("text/x-bibliography", 0.8, {"style": "apa", "locale": "pt-BR"})],
        ),
        ("application/json;q=NaN", [("application/json", 0.0, {})]),
        ("application/json;q=inf;q=0.4", [("application/json", 0.4, {})]),  # the last q
        ("text/plain;;=x;level=1", [("text/plain", 1.0, {"level": "1"})]),
    ],
)
def test_an_accept_header_is_read_range_by_range_in_the_order_given(
    header: str | None, ranges: list[tuple[str, float, dict[str, str]]]
) -> None:
    assert accept_ranges(header) == ranges


def test_only_the_first_ranges_of_a_long_header_are_read() -> None:
    header = ", ".join(f"type/n{i}" for i in range(MAX_RANGES + 10))
    assert [kind for kind, _, _ in accept_ranges(header)] == [
        f"type/n{i}" for i in range(MAX_RANGES)
    ]


@pytest.mark.parametrize(
    ("header", "wanted"),
    [
        ("text/plain", True),
        ("text/plain, text/html;q=0.5", True),
        ("text/plain;q=0.5, text/html;q=0.5", False),  # a tie keeps the page
        ("text/plain;q=0.2, text/plain;q=0.9, text/html;q=0.5", True),  # the highest q counts
        ("text/plain;q=0", False),
        ("*/*", False),  # a wildcard wants the page
        ("text/plain;q=NaN", False),
        ("text/plain;q=0.5, text/html;q=NaN", True),  # a NaN page counts as 0
        ("text/plain;q=inf, text/html", False),  # inf counts as 0, never above 1
        ("text/plain;q=2, text/html", False),  # clamped to 1: a tie
    ],
)
def test_prefers_compares_one_type_with_the_others_by_their_q(header: str, wanted: bool) -> None:
    assert prefers(header, "text/plain", over=("text/html",)) is wanted


@pytest.mark.parametrize(
    "header",
    [
        "text/plain;q=inf, text/html",
        "text/plain;q=2, text/html",
        "text/plain;q=1e9, text/html;q=1",
    ],
)
def test_the_pages_no_longer_take_an_out_of_range_q_as_a_preference(header: str) -> None:
    assert pages.wants_text(header) is False
    json_header = header.replace("text/plain", "application/json")
    assert prefers_json(json_header) is False
    assert negotiation.choose(header.replace("text/plain", negotiation.CSL_JSON)) is None


@pytest.mark.parametrize(
    "header",
    [
        "text/plain;q=0.5, text/html;q=NaN",
        "text/plain;q=0.5, text/html;q=nan, application/xhtml+xml;q=0.1",
    ],
)
def test_a_page_asked_with_q_nan_no_longer_wins(header: str) -> None:
    assert pages.wants_text(header) is True
    assert prefers_json(header.replace("text/plain", "application/json")) is True
    wanted = header.replace("text/plain", negotiation.CSL_JSON)
    assert negotiation.choose(wanted) == negotiation.CSL_JSON


def test_accept_language_reads_q_values_the_same_way() -> None:
    assert parse_accept_language("en;q=0.5, pt;q=inf, de;q=NaN, fr;q=2") == ["fr", "en"]


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://a.example/x?y=1", "https://a.example/x?y=1"),
        ("https://a.example/a b", "https://a.example/a%20b"),
        ('https://a.example/<x>;"q",\\', "https://a.example/%3Cx%3E%3B%22q%22%2C%5C"),
        ("https://a.example/é", "https://a.example/%C3%A9"),
        ("https://a.example/\r\nx", "https://a.example/%0D%0Ax"),
    ],
)
def test_a_link_target_is_ascii_and_nothing_in_it_can_end_the_link(url: str, target: str) -> None:
    assert link_target(url) == target
