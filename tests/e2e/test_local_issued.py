"""Identifiers taken before they are issued, through `ibi local` (issue 35, High): the Archive
reads its minting service's record over HTTP (``GET /mints?ibi=``) before it takes an original
for an IBI a depositor names, and an Idempotency-Key is bound to its body. Real processes, real
HTTP on loopback."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from ibi.client import ApiError, ArchiveClient, MintingClient
from ibi.core.labels import parse_label
from ibi.core.subsystem import Subsystem
from tests.e2e.support import LocalRun

pytestmark = pytest.mark.e2e


def refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value


def test_an_original_only_for_an_ibi_issued_and_unused(local: LocalRun) -> None:
    archive = ArchiveClient(local.archives[0], retries=0)
    minting = MintingClient(local.endpoint, sign=False)
    made = archive.create({"dc": {"title": ["A deposit"]}})  # minted for this deposit
    own = parse_label(made["ibi"]["ibip"])
    (mapping,) = [s for s in minting.subsystems()["subsystems"] if s["ibip_prefix"] == own.prefix]
    subsystem = Subsystem.from_mapping(
        {k: v for k, v in mapping.items() if k not in {"rep_prefix", "ibip_prefix"}}
    )

    ahead = subsystem.ibi(own.date + 15)  # the squatter's IBI, 15 s ahead: nobody's yet
    error = refused(lambda: archive.create({"ibi": ahead.ibip, "url": "https://evil.example/"}))
    assert (error.status, error.code) == (422, "NotIssued")
    long_ago = subsystem.ibi(Decimal(1690000000))  # 2023: never handed out
    assert refused(lambda: archive.create({"ibi": long_ago.ibip})).code == "NotIssued"
    taken = refused(lambda: archive.create({"ibi": made["ibi"]["ibip"]}))
    assert taken.status == 409  # the deposit's, and held

    # minted by hand (locally every caller is the loopback address: the Archive's principal,
    # but not under a deposit's key), then deposited by name
    (issued,) = minting.mint(subsystem=subsystem.name)["ibis"]
    named = archive.create({"ibi": issued["ibip"], "dc": {"title": ["Named"]}})
    assert named["ibi"]["ibip"] == issued["ibip"] and named["state"] == "Original"


def test_an_idempotency_key_is_bound_to_its_body(local: LocalRun) -> None:
    archive = ArchiveClient(local.archives[0], retries=0)
    body = {"dc": {"title": ["Release 1.0.0"]}}
    first = archive.create(body, idempotency_key="gh:owner/repo:1:1.0.0")
    again = archive.create(body, idempotency_key="gh:owner/repo:1:1.0.0")
    assert again["ibi"] == first["ibi"]
    other = {"dc": {"title": ["Something else"]}}
    error = refused(lambda: archive.create(other, idempotency_key="gh:owner/repo:1:1.0.0"))
    assert (error.status, error.code) == (422, "IdempotencyKeyReused")
