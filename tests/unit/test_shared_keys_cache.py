"""One cached key source (``functions.shared.keys``) for every function's HMAC keys (issue 29):
offers and urlkeys read their keys again after the same maximum age, and the resolver's pepper
file is made as every key file is, 0600 from its creation."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from aws_lambda_powertools import Logger
from moto import mock_aws

from functions.archive.errors import Unavailable
from functions.archive.offers import Offer, OfferKeys
from functions.resolver.pepper import FilePepper
from functions.shared.keys import (
    MAX_AGE_SECONDS,
    REFRESH_SECONDS,
    CachedKeys,
    KeysUnavailable,
    SecretKeys,
)

OFFER = Offer(
    id="offer-1",
    ibi="8JMKD3MGP8W/35MME4E",
    sender="D7N2U8HW/4GRGLD2",
    base_url="https://a.example.org",
    to="D7N2U8HW/4GRHGMK",
    version=1,
    expires=1795476600,
    leave="copy",
    item={"files": []},
)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """Keys newest first; ``None``: the store cannot be read."""

    def __init__(self, *keys: bytes) -> None:
        self.keys: list[bytes] | None = list(keys)
        self.loads = 0

    def load(self) -> list[bytes]:
        self.loads += 1
        if self.keys is None:
            raise ConnectionError("the secret's store is down")
        return self.keys


class Down:
    def load(self) -> list[bytes]:
        raise ConnectionError("the secret's store is down")


@pytest.fixture
def secrets() -> Iterator[tuple[object, str]]:
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="archive-keys", SecretString="old-key")["ARN"]
        yield client, arn


def signed_by(token: str, key: bytes) -> bool:
    try:
        OfferKeys(Source(key)).verified(token)
    except Exception:
        return False
    return True


def test_a_long_lived_environment_signs_offers_with_the_rotated_key_after_the_max_age(
    secrets: tuple[object, str],
) -> None:
    client, arn = secrets
    monotonic = Monotonic()
    keys = OfferKeys(SecretKeys(client, arn), monotonic=monotonic)
    before = keys.seal(OFFER)
    assert signed_by(before, b"old-key")
    client.put_secret_value(SecretId=arn, SecretString="new-key")  # type: ignore[attr-defined]
    monotonic.now += MAX_AGE_SECONDS - 1
    assert signed_by(keys.seal(OFFER), b"old-key")  # within the max age: the keys known
    monotonic.now += 1
    after = keys.seal(OFFER)
    assert signed_by(after, b"new-key") and not signed_by(after, b"old-key")
    assert keys.verified(before) == OFFER  # the previous version (AWSPREVIOUS) still verifies


def test_an_offer_under_an_unknown_key_reads_the_keys_again_at_most_once_a_minute() -> None:
    source, monotonic = Source(b"old"), Monotonic()
    keys = OfferKeys(source, monotonic=monotonic)
    keys.seal(OFFER)
    rotated = OfferKeys(Source(b"new", b"old")).seal(OFFER)
    source.keys = [b"new", b"old"]
    with pytest.raises(Exception, match="signature"):
        keys.verified(rotated)  # the keys were read this very minute: not again
    assert source.loads == 1
    monotonic.now += REFRESH_SECONDS
    assert keys.verified(rotated) == OFFER and source.loads == 2


def test_a_failed_read_keeps_the_keys_known_and_none_known_is_unavailable() -> None:
    source, monotonic = Source(), Monotonic()
    source.keys = None
    cache = CachedKeys(source, name="test keys", logger=Logger(service="test"), monotonic=monotonic)
    with pytest.raises(KeysUnavailable, match="test keys cannot be read now"):
        cache.load()
    with pytest.raises(Unavailable, match="key cannot be read"):  # a 503 that says so
        OfferKeys(Down()).seal(OFFER)
    source.keys = [b"k"]
    monotonic.now += REFRESH_SECONDS
    assert cache.load(again=True) == [b"k"]
    source.keys = None
    monotonic.now += MAX_AGE_SECONDS
    assert cache.load() == [b"k"]  # the store is down: the keys known go on
    assert cache.load() == [b"k"] and source.loads == 3  # and it is not asked at every call


def test_the_pepper_file_is_created_0600_never_narrowed_after_it_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With umask 0 and every chmod made a no-op, only a file created 0600 ends up 0600: one
    written first and narrowed afterwards was readable by anyone in between."""
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(os, "fchmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(Path, "chmod", lambda *args, **kwargs: None)
    previous = os.umask(0)
    try:
        pepper = FilePepper(tmp_path / "keys" / "resolver-pepper").load()
    finally:
        os.umask(previous)
    path = tmp_path / "keys" / "resolver-pepper"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(pepper) == 64 and FilePepper(path).load() == pepper
    assert [p.name for p in path.parent.iterdir()] == ["resolver-pepper"]  # no draft left


def test_a_pepper_file_made_before_is_read_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "resolver-pepper"
    path.write_text("ab" * 32)  # the old maker wrote the hex without a newline
    assert FilePepper(path).load() == b"ab" * 32
