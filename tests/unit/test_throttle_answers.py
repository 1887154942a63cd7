"""A 429 says which Archive, why, and when to retry: in its text and its Retry-After header,
from the registration service through the resolver's handler to the client (issue 23).

It used to be a bare ``429 Too Many Requests: status.archive refused``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import handler, wiring
from functions.resolver.service import RegistrationService
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.client import ApiClient, ApiError, Raw, page_text, send_switch
from ibi.client import resolver as client_module
from ibi.core.pairlist import encode_query, format_pair_list
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools.local.gateway import LocalContext, build_event
from ibi_tools.local.tables import LocalTables
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle, ScriptedTransport

ARCHIVE = "8JMKD3MGP8W/3FSUP4L"
KEY = "1234567890-0987654321"
WRONG = "5555555555-6666666666"
NOW = 1_700_000_000
GUESSER = "203.0.113.66"


def inclusion(key: str) -> dict[str, str]:
    return {
        "servicesubject": "inclusionRequest",
        "archiveaddress": "archive.example.org",
        "archiveserviceibi": ARCHIVE,
        "archiveip": "192.0.2.20",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "ibi-test",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
    }


def service(clock: FakeClock, **options: Any) -> RegistrationService:
    registration = RegistrationService(
        registry=MemoryRegistry(),
        throttle=MemoryThrottle(),
        transport=ScriptedTransport(answers={ARCHIVE: "confirmation yes"}),
        pepper=FixedPepper().load(),
        clock=clock,
        confirmation_timeout=1.0,
        **options,
    )
    registration.register(ARCHIVE, KEY)
    return registration


def test_a_blocked_address_is_told_which_archive_why_and_when_to_retry() -> None:
    clock = FakeClock(Decimal(NOW))
    registration = service(clock)
    for _ in range(5):
        registration.switch(inclusion(WRONG), client_ip=GUESSER)
    clock.sleep(100)

    answer = registration.switch(inclusion(KEY), client_ip=GUESSER)

    assert (answer.status, answer.retry_after, answer.over_cap) == (429, 800, False)
    said = page_text(format_pair_list(answer.pairs))
    assert said == (
        f"status.archive refused; {ARCHIVE}: too many wrong registration keys from {GUESSER} "
        "(5 within 15 minutes): this address is refused for this Archive, whatever the key, "
        "until the window ends; retry after 800 s (2023-11-14T22:28:20Z)"
    )


def test_past_the_cap_the_answer_says_so_and_when_the_window_ends() -> None:
    clock = FakeClock(Decimal(NOW))
    registration = service(clock, guess_cap=2)
    for n in range(2):
        registration.switch(inclusion(WRONG), client_ip=f"198.51.100.{n}")

    answer = registration.switch(inclusion(WRONG), client_ip="198.51.100.9")

    assert (answer.status, answer.retry_after, answer.over_cap) == (429, 900, True)
    said = page_text(format_pair_list(answer.pairs))
    assert said.startswith(f"status.archive refused; {ARCHIVE}: too many wrong registration keys")
    assert "from all addresses (more than 2 within 15 minutes)" in said
    assert said.endswith("retry after 900 s (2023-11-14T22:28:20Z)")


@pytest.fixture
def resolver(tmp_path: Path) -> Iterator[Callable[[str, str], dict[str, Any]]]:
    """The resolver's handler over local tables (SQLite, no socket), ``ARCHIVE`` registered."""
    client = LocalTables(tmp_path / "tables.sqlite3").client()
    ensure_tables(client, "resolver")
    settings = ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": "resolver",
            "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
            "IBI_ACK_QUEUE_DIR": str(tmp_path / "acknowledgments"),
        }
    )
    runtime = wiring.build(settings, dynamodb=client)
    runtime.registration.register(ARCHIVE, KEY)
    wiring.install(runtime)

    def switch(key: str, source_ip: str) -> dict[str, Any]:
        target = f"/{RESOLVER_SERVICE_IBI}?{encode_query(list(inclusion(key).items()))}"
        event = build_event(
            method="GET", target=target, headers=[], body=b"", source_ip=source_ip, host="r"
        )
        answer: dict[str, Any] = handler.lambda_handler(event, LocalContext("resolver", "t"))
        return answer

    try:
        yield switch
    finally:
        wiring.install(None)


def test_the_resolver_answers_a_429_with_its_reason_and_retry_after(
    resolver: Callable[[str, str], dict[str, Any]],
) -> None:
    statuses = [resolver(WRONG, GUESSER)["statusCode"] for _ in range(5)]
    assert statuses == [403] * 5

    blocked = resolver(KEY, GUESSER)

    retry_after = int(blocked["headers"]["Retry-After"])
    assert blocked["statusCode"] == 429 and 0 < retry_after <= 900
    body = blocked["body"]
    assert body.startswith("status.archive refused\r\nerror {")
    said = page_text(body)
    assert ARCHIVE in said and GUESSER in said and "too many wrong registration keys" in said
    assert f"retry after {retry_after} s" in said


def test_the_client_says_the_resolvers_reason_or_else_its_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = f"{ARCHIVE}: too many wrong registration keys; retry after 300 s"
    answers = [  # the resolver's reason, as it says it; else its Retry-After, added
        (b"status.archive refused\r\nerror {" + said.encode() + b"}", f"; {said}"),
        (b"status.archive refused", "status.archive refused; retry after 300 s"),
    ]
    for body, expected in answers:

        def send(*args: Any, answer: bytes = body, **kwargs: Any) -> Raw:
            return Raw(429, {"Retry-After": "300"}, answer)

        monkeypatch.setattr(client_module, "http_send", send)
        with pytest.raises(ApiError) as refused:
            send_switch(
                "http://resolver.example",
                address="archive.example.org",
                service_ibi=ARCHIVE,
                base_url="http://archive.example.org",
                registration_key=KEY,
                on=True,
            )
        message = str(refused.value)
        assert message.startswith("429 Too Many Requests: status.archive refused")
        assert message.endswith(expected) and message.count("retry after") == 1


def test_a_json_api_429_says_when_to_retry() -> None:
    def transport(*args: Any, **kwargs: Any) -> Raw:
        return Raw(429, {"Retry-After": "7"}, b'{"message":"Too Many Requests"}')

    api = ApiClient("http://api.example", sign=False, retries=0, transport=transport)
    with pytest.raises(ApiError) as refused:
        api.call("GET", "/anything")
    assert str(refused.value) == "429 Too Many Requests: Too Many Requests; retry after 7 s"
