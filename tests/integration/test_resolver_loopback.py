"""The resolver's real handler, on loopback, with fake Archives written from the spec.

Some Archives are slow, some dead, some answer garbage or lie about originals; registration,
switching on and off, resolution with chasing, the acknowledgment, and every row of §7.7.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import wiring
from functions.resolver.registry import ensure_table
from functions.resolver.settings import ResolverSettings
from ibi.client import ApiError, ResolverClient
from ibi.core.pairlist import encode_query
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from tests.integration.archives import FakeArchive, serving

SERVICE = "J8LNKB5R7W/3FUQHC5"
KEY = "1234567890-0987654321"
ITEM = "8JMKD3MGP8W/35MMLL8"
NEXT = "sid.inpe.br/mtc-m18/2012/07.12.18.08"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def get(
    url: str, accept: str = "text/html", language: str | None = None
) -> tuple[int, dict[str, str], str]:
    headers = {"Accept": accept}
    if language:
        headers["Accept-Language"] = language
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode()


@pytest.fixture
def resolver(dynalite_endpoint: Any, tmp_path: Path) -> Iterator[str]:
    dynalite, client = dynalite_endpoint
    ensure_table(client, "resolver")
    settings = ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": "resolver",
            "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
            "IBI_ARCHIVE_TIMEOUT_SECONDS": "1",
            "IBI_RESOLUTION_DEADLINE_SECONDS": "3",
        }
    )

    def handler() -> Any:  # in each worker process
        from functions.resolver.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=dynalite.client()))
        return lambda_handler

    gateway = LocalGateway("resolver", handler, free_port(), workers=3).start()
    yield gateway.url
    gateway.shutdown()


def switch(
    resolver: str, archive: FakeArchive, *, on: bool = True, key: str = KEY
) -> tuple[int, str]:
    pairs = [
        ("servicesubject", "inclusionRequest" if on else "exclusionRequest"),
        ("archiveaddress", archive.address),
        ("archiveserviceibi", archive.service_ibi),
        ("archiveip", "127.0.0.1"),
        ("archiveprotocol", "HTTP"),
        ("archiveplatformversion", "fake-1.0"),
        ("archiveadmemailaddress", "admin@example.org"),
        ("registrationkey", key),
    ]
    status, _, body = get(f"{resolver}/{SERVICE}?{encode_query(pairs)}", accept="text/plain")
    return status, body.strip()


def include(resolver: str, *archives: FakeArchive) -> None:
    admin = ResolverClient(resolver, sign=False)
    for archive in archives:
        admin.register(archive.service_ibi, KEY)
        assert switch(resolver, archive) == (
            200,
            "status.archive included\r\nstatus.confirmation successful",
        )


def holding(label: str, url: str, state: str = "Original", extra: str = "") -> str:
    return (
        f"archiveaddress x\nibi {{ibip {label}}}\nstate {state}\ncontenttype Data\n"
        f"timestamp 2009-07-21T14:43:31Z\nurl {url}\nurlkey 1427244889-5349022633744855\n{extra}"
    )


def test_seed_8_1_redirect_and_acknowledgment(resolver: str) -> None:
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "http://a.example/doc.pdf")})
    b = FakeArchive("LK47B6W/362SFKH")
    with serving(a, b):
        include(resolver, a, b)
        status, headers, _ = get(f"{resolver}/{ITEM.lower()}")
        assert status == 302 and headers["location"] == "http://a.example/doc.pdf"
        assert len(a.requests) == 1 and len(b.requests) == 1  # every Archive was asked
        assert a.requests[0]["parsedibiurl.ibi"] == ITEM  # canonical case
        assert a.requests[0]["clientinformation.ipaddress"] == "127.0.0.1"
        deadline = time.monotonic() + 5
        while not a.acknowledgments and time.monotonic() < deadline:
            time.sleep(0.05)
        [ack] = a.acknowledgments
        assert ack["urlkey"] == "1427244889-5349022633744855"
        assert ack["url"] == "http://a.example/doc.pdf" and ack["state"] == "Original"
        assert ack["url.persistent"].endswith(f"/{ITEM.lower()}")
        assert not b.acknowledgments


def test_seed_8_2_chasing_across_archives(resolver: str) -> None:
    first = f"archiveaddress a\nibi {{ibip {ITEM}}}\nibi.nextedition {{rep {NEXT}}}\n"
    second = (
        f"archiveaddress b\nibi {{rep {NEXT}}}\ncontenttype.lastedition.metadata(oai_dc) Metadata\n"
        "state.lastedition.metadata(oai_dc) Original\n"
        "url.lastedition.metadata(oai_dc) http://b.example/metadata.cgi?choice=oai_dc\n"
        "urlkey 1426286454-36108967764060357\n"
    )
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: first})
    b = FakeArchive("LK47B6W/362SFKH", {NEXT: second})
    with serving(a, b):
        include(resolver, a, b)
        status, headers, _ = get(f"{resolver}/{ITEM}!:(oai_dc)")
        assert (
            status == 302 and headers["location"] == "http://b.example/metadata.cgi?choice=oai_dc"
        )
        assert [r["parsedibiurl.ibi"] for r in b.requests] == [ITEM, NEXT]
        assert b.requests[1]["parsedibiurl.verblist"] == "GetLastEdition GetMetadata(oai_dc)"


def test_slow_dead_and_garbage_archives_do_not_stop_resolution(resolver: str) -> None:
    good = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "http://good.example/x")})
    slow = FakeArchive("LK47B6W/362SFKH", delay=2.5)
    garbage = FakeArchive("LK47B6W/362SFKJ", mode="garbage")
    huge = FakeArchive("LK47B6W/362SFKK", mode="huge")
    redirect = FakeArchive("LK47B6W/362SFKL", mode="redirect")
    with serving(good, slow, garbage, huge, redirect):
        include(resolver, good, slow, garbage, huge, redirect)
        started = time.monotonic()
        status, headers, _ = get(f"{resolver}/{ITEM}")
        assert status == 302 and headers["location"] == "http://good.example/x"
        assert time.monotonic() - started < 0.9  # did not wait for the slow one (timeout 1 s)
        status, _, body = get(f"{resolver}/LK47B6W/3622222", accept="text/plain")
        assert status == 404 and "No Archive knows" in body


def test_two_claimed_originals_is_409_naming_suspects(resolver: str) -> None:
    liar = FakeArchive("LK47B6W/362SFKH", {ITEM: holding(ITEM, "http://liar.example/x")})
    honest = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "http://honest.example/x")})
    with serving(liar, honest):
        include(resolver, liar, honest)
        status, headers, body = get(f"{resolver}/{ITEM}?ibiurl.requireditemstatus=Original")
        assert status == 409 and headers["content-type"].startswith("text/html")
        assert "LK47B6W/362SFKH" in body and "8JMKD3MGP8W/3FSUP4L" in body
        assert all(
            "parsedibiurl.requireditemstatus" not in r for r in liar.requests + honest.requests
        )
        status, _, _ = get(f"{resolver}/{ITEM}")  # without the requirement: one of them
        assert status == 302


def test_every_alert_of_section_7_7(resolver: str) -> None:
    tombstone = (
        f"archiveaddress a\nibi {{ibip {ITEM}}}\nstate Deleted\ntimestamp 2020-01-01T00:00:00Z\n"
    )
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: tombstone})
    with serving(a):
        include(resolver, a)
        assert get(f"{resolver}/{ITEM}")[0] == 410
        assert get(f"{resolver}/LK47B6W/362SFKH")[0] == 404
        status, headers, body = get(f"{resolver}/LK47B6W/362SFKH!!", accept="text/plain")
        assert (
            status == 400
            and headers["content-type"].startswith("text/plain")
            and "modifier" in body
        )
        assert get(f"{resolver}/not-an-ibi")[0] == 400
    silent = FakeArchive("LK47B6W/362SFKH", delay=5)
    with serving(silent):
        include(resolver, silent)
        # a's address is now closed (connection refused) and silent is too slow
        status, _, _ = get(f"{resolver}/{ITEM}")
        assert status == 504


def switch_from(
    source: str, resolver: str, archive: FakeArchive, *, on: bool = True, key: str = KEY
) -> tuple[int, str]:
    """``switch``, sent from another loopback address (``source``, in 127.0.0.0/8)."""
    import http.client
    from urllib.parse import urlsplit

    pairs = [
        ("servicesubject", "inclusionRequest" if on else "exclusionRequest"),
        ("archiveaddress", archive.address),
        ("archiveserviceibi", archive.service_ibi),
        ("archiveip", "127.0.0.1"),
        ("archiveprotocol", "HTTP"),
        ("archiveplatformversion", "fake-1.0"),
        ("archiveadmemailaddress", "admin@example.org"),
        ("registrationkey", key),
    ]
    where = urlsplit(resolver)
    connection = http.client.HTTPConnection(
        where.hostname or "", where.port, timeout=30, source_address=(source, 0)
    )
    try:
        connection.request("GET", f"/{SERVICE}?{encode_query(pairs)}")
        answer = connection.getresponse()
        return answer.status, answer.read().decode().strip()
    finally:
        connection.close()


def test_keys_are_checked_and_a_guesser_cannot_lock_the_holder_out(resolver: str) -> None:
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L")
    stranger = FakeArchive("LK47B6W/362SFKH")
    guesser = "127.0.0.2"
    with serving(a, stranger):
        include(resolver, a)
        wrong = switch_from(guesser, resolver, a, key="1111111111-1111111111")
        unknown = switch_from(guesser, resolver, stranger)
        assert wrong == unknown == (403, "status.archive refused")
        for _ in range(10):  # nothing is counted for an IBI nobody registered
            assert switch_from(guesser, resolver, stranger)[0] == 403
        for _ in range(4):  # five wrong keys from one source for one Archive block that source
            assert (
                switch_from(guesser, resolver, a, on=False, key="1111111111-1111111111")[0] == 403
            )
        assert switch_from(guesser, resolver, a, on=False) == (429, "status.archive refused")
        # the holder, from its own address, still switches a off and on, and only a
        assert switch(resolver, a, on=False) == (200, "status.archive excluded")
        assert switch(resolver, a, on=False) == (200, "status.archive excluded")  # idempotent
        assert get(f"{resolver}/{ITEM}")[0] == 504  # nobody included any more
        assert switch(resolver, a)[0] == 200


def test_confirmation_must_be_yes(resolver: str) -> None:
    odd = FakeArchive("8JMKD3MGP8W/3FSUP4L", mode="wrong-confirmation")
    with serving(odd):
        ResolverClient(resolver, sign=False).register(odd.service_ibi, KEY)
        assert switch(resolver, odd) == (
            200,
            "status.archive included\r\nstatus.confirmation unsuccessful",
        )


def test_private_addresses_are_refused(resolver: str) -> None:
    ResolverClient(resolver, sign=False).register("8JMKD3MGP8W/3FSUP4L", KEY)
    pairs = [
        ("servicesubject", "inclusionRequest"),
        ("archiveaddress", "10.0.0.1:8080"),
        ("archiveserviceibi", "8JMKD3MGP8W/3FSUP4L"),
        ("archiveip", "10.0.0.1"),
        ("archiveprotocol", "HTTP"),
        ("archiveplatformversion", "x"),
        ("archiveadmemailaddress", "a@b.c"),
        ("registrationkey", KEY),
    ]
    status, _, body = get(f"{resolver}/{SERVICE}?{encode_query(pairs)}", accept="text/plain")
    assert status == 400 and "non-public" in body.replace("%20", " ")


def test_unsafe_location_is_never_sent(resolver: str) -> None:
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "javascript:alert(1)")})
    with serving(a):
        include(resolver, a)
        status, headers, _ = get(f"{resolver}/{ITEM}")
        assert status == 502 and "location" not in headers


def test_registration_needs_a_key_of_the_right_shape(resolver: str) -> None:
    with pytest.raises(ApiError) as caught:
        ResolverClient(resolver, sign=False, retries=0).register("8JMKD3MGP8W/3FSUP4L", "12345")
    assert caught.value.status == 400
    assert ResolverClient(resolver, sign=False).archives() == []


def test_head_requests_resolve_too(resolver: str) -> None:
    a = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "http://a.example/doc.pdf")})
    with serving(a):
        include(resolver, a)
        request = urllib.request.Request(f"{resolver}/{ITEM}", method="HEAD")
        opener = urllib.request.build_opener(NoRedirect)
        try:
            opener.open(request, timeout=30)
            raise AssertionError("expected a redirect")
        except urllib.error.HTTPError as error:
            assert error.code == 302 and error.headers["Location"] == "http://a.example/doc.pdf"


def test_location_hints_ask_the_likely_archive_first(resolver: str) -> None:
    """After a resolution, the next one for that subsystem asks the Archive that held it first."""
    others = [
        FakeArchive(label) for label in ("LK47B6W/362SFKH", "LK47B6W/362SFKJ", "LK47B6W/362SFKK")
    ]
    holder = FakeArchive("8JMKD3MGP8W/3FSUP4L", {ITEM: holding(ITEM, "http://a.example/doc.pdf")})
    with serving(holder, *others):
        include(resolver, holder, *others)
        for _ in range(4):  # every worker process learns (each keeps its own hints)
            assert get(f"{resolver}/{ITEM}")[0] == 302
        asked_before = [len(a.requests) for a in others]
        for _ in range(6):
            assert get(f"{resolver}/{ITEM}")[0] == 302
        # Hinted resolutions asked the holder alone: the others saw few or no new requests.
        new = sum(len(a.requests) for a in others) - sum(asked_before)
        assert new < 3 * 6
        assert len(holder.requests) == 10
        # Never with the original required: then every Archive is asked.
        before = [len(a.requests) for a in others]
        assert get(f"{resolver}/{ITEM}?ibiurl.requireditemstatus=Original")[0] == 302
        assert [len(a.requests) for a in others] == [b + 1 for b in before]


def test_an_archive_configured_to_join_switches_itself_on(
    resolver: str, dynalite_endpoint: Any
) -> None:
    """IBI_JOIN_RESOLVER_URL + a registration key: the Archive includes itself when it starts."""
    from functions.archive import wiring
    from functions.archive.model import Forms
    from functions.archive.settings import ArchiveSettings
    from functions.archive.store import DynamoItemStore
    from functions.archive.store import ensure_table as ensure_items

    dynalite, client = dynalite_endpoint
    ensure_items(client, "joining-items")
    service = Forms(ibip="8JMKD3MGP8W/3FSUP4L")
    DynamoItemStore(client, "joining-items").claim_service_item(service)
    ResolverClient(resolver, sign=False).register(service.ibip or "", KEY)
    port = free_port()
    settings = ArchiveSettings.from_environment(
        {
            "IBI_ARCHIVE_TABLE": "joining-items",
            "IBI_ARCHIVE_BASE_URL": f"http://127.0.0.1:{port}",
            "IBI_JOIN_RESOLVER_URL": resolver,
            "IBI_REGISTRATION_KEY_PARAMETER": "/ibi/test/key",
        }
    )

    def handler() -> Any:
        from functions.archive.handler import lambda_handler

        # in AWS: the SSM SecureString named above
        wiring.install(
            wiring.build(settings, dynamodb=dynalite.client(), registration_key=lambda: KEY)
        )
        return lambda_handler

    gateway = LocalGateway("archive", handler, port, workers=2).start()
    try:
        assert get(f"{gateway.url}/api/service", accept="application/json")[0] == 200
        [archive] = ResolverClient(resolver, sign=False).archives()
        assert archive["included"] and archive["confirmed"]
        assert archive["address"] == f"127.0.0.1:{port}"
    finally:
        gateway.shutdown()
