"""Urlkeys verified without a write (issue 13, item 2): signed when issued, spent once when
acknowledged, on the item the reader went to; three Archives hold the same items."""

from __future__ import annotations

import os
import re
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from functions.archive.urlkeys import SKEW_SECONDS, UrlKeys
from functions.resolver.acknowledgments import acknowledgment_pairs
from functions.shared.keys import REFRESH_SECONDS, FileKeys, RandomKeys, SecretKeys
from ibi.core.pairlist import encode_query
from tests.fakes_archive import ArchiveNode, MemoryFederation
from tests.unit.test_archive_federation import (
    BYTES,
    NOTICE,
    REPORT,
    TRANSLATION,
    both,
    found,
    url_request,
)

# Table 5.1: key = number ["-" number], number = 10*DIGIT.
SPEC_KEY = re.compile(r"\d{10,}(-\d{10,})?")
SCOPE = "8JMKD3MGP8W/3FSUP4L"
NOW = 1795473000


class Keys:
    """A key source whose keys the test changes, counting its reads."""

    def __init__(self, *keys: bytes) -> None:
        self.keys = list(keys)
        self.loads = 0

    def load(self) -> list[bytes]:
        self.loads += 1
        return list(self.keys)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- the token


def test_a_urlkey_is_a_key_of_table_5_1_and_fresh_every_time() -> None:
    keys = UrlKeys(RandomKeys())
    issued = {keys.issue(Decimal(NOW) + Decimal("0.75"), SCOPE) for _ in range(50)}
    assert len(issued) == 50
    for urlkey in issued:
        assert SPEC_KEY.fullmatch(urlkey) and urlkey.startswith(f"{NOW}-")
        assert keys.check(urlkey, NOW, SCOPE, 600) == NOW


def test_a_changed_digit_another_archive_or_another_key_verifies_nothing() -> None:
    keys, other = UrlKeys(Keys(b"k1")), UrlKeys(Keys(b"k2"))
    urlkey = keys.issue(NOW, SCOPE)
    head, body = urlkey.split("-")
    for index in (0, 19, 20, 58):  # the nonce's first and last digits, the tag's
        digit = str((int(body[index]) + 1) % 10)
        forged = f"{head}-{body[:index]}{digit}{body[index + 1 :]}"
        assert keys.check(forged, NOW, SCOPE, 600) is None
    later = f"{NOW + 1}-{body}"  # a later issue time under the same tag
    assert keys.check(later, NOW + 1, SCOPE, 600) is None
    assert keys.check(urlkey, NOW, "8JMKD3MGP8W/3FSUP4M", 600) is None
    assert other.check(urlkey, NOW, SCOPE, 600) is None
    for text in ("", "nonsense", "1426387214-9164566186556927", urlkey + "0", " " + urlkey):
        assert keys.check(text, NOW, SCOPE, 600) is None


def test_a_urlkey_lives_for_its_window_only() -> None:
    keys = UrlKeys(RandomKeys())
    urlkey = keys.issue(NOW, SCOPE)
    assert keys.check(urlkey, NOW + 599, SCOPE, 600) == NOW
    assert keys.check(urlkey, NOW + 600, SCOPE, 600) is None  # expired
    assert keys.check(urlkey, NOW - SKEW_SECONDS, SCOPE, 600) == NOW  # another clock
    assert keys.check(urlkey, NOW - SKEW_SECONDS - 1, SCOPE, 600) is None  # from the future


def test_a_rotation_keeps_the_keys_signed_just_before_it() -> None:
    source, monotonic = Keys(b"old"), Monotonic()
    keys = UrlKeys(source, monotonic=monotonic)
    before = keys.issue(NOW, SCOPE)
    source.keys = [b"new", b"old"]  # rotated: new signs, old still verifies
    monotonic.now += REFRESH_SECONDS
    rotated = UrlKeys(Keys(b"new", b"old"))
    assert rotated.check(before, NOW, SCOPE, 600) == NOW
    after = rotated.issue(NOW, SCOPE)
    # an environment started before the rotation learns the new key when one fails
    assert keys.check(after, NOW, SCOPE, 600) == NOW and source.loads == 2
    assert keys.issue(NOW, SCOPE) != after and rotated.check(
        keys.issue(NOW, SCOPE), NOW, SCOPE, 600
    )


def test_forged_keys_read_the_keys_again_at_most_once_a_minute() -> None:
    source, monotonic = Keys(b"k"), Monotonic()
    keys = UrlKeys(source, monotonic=monotonic)
    forged = f"{NOW}-{'1' * 59}"
    for _ in range(100):
        assert keys.check(forged, NOW, SCOPE, 600) is None
    assert source.loads == 1
    monotonic.now += REFRESH_SECONDS
    assert keys.check(forged, NOW, SCOPE, 600) is None and source.loads == 2


# ---------------------------------------------------------------- where the keys are kept


def test_the_key_file_is_made_once_0600_and_shared_by_concurrent_makers(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "archive-urlkey"
    with ThreadPoolExecutor(8) as pool:
        loaded = list(pool.map(lambda _: FileKeys(path).load(), range(16)))
    assert all(keys == loaded[0] for keys in loaded) and len(loaded[0][0]) == 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["archive-urlkey"]  # no draft left


def test_a_key_file_lists_the_current_key_first(tmp_path: Path) -> None:
    path = tmp_path / "urlkey"
    path.write_text("new\nold\n\n")
    assert FileKeys(path).load() == [b"new", b"old"]
    path.write_text("\n")
    with pytest.raises(ValueError, match="holds no key"):
        FileKeys(path).load()


def test_the_secret_gives_its_current_then_its_previous_version() -> None:
    client = boto3.client("secretsmanager", region_name="us-east-1")
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:urlkey-AbCdEf"
    with Stubber(client) as stub:
        stub.add_response("get_secret_value", {"SecretString": "new"}, {"SecretId": arn})
        stub.add_response(
            "get_secret_value",
            {"SecretString": "old"},
            {"SecretId": arn, "VersionStage": "AWSPREVIOUS"},
        )
        assert SecretKeys(client, arn).load() == [b"new", b"old"]
        stub.add_response("get_secret_value", {"SecretString": "only"}, {"SecretId": arn})
        stub.add_client_error("get_secret_value", "ResourceNotFoundException")
        assert SecretKeys(client, arn).load() == [b"only"]  # never rotated


# ---------------------------------------------------------------- three Archives, one item


@pytest.fixture
def federation() -> MemoryFederation:
    federation = MemoryFederation("a", "b", "c")
    a, b, c = federation["a"], federation["b"], federation["c"]
    a.original(both(REPORT), BYTES, language="en")
    a.original(TRANSLATION.ibip, {"relatorio.txt": b"O relatorio.\n"}, language="pt-BR")
    a.service.link(REPORT.ibip, {"translation": {"language": "pt-BR", "ibi": TRANSLATION.ibip}})
    for copy in (b, c):
        copy.copy(both(REPORT), BYTES, language="en", original_files=a.public_files(REPORT.ibip))
    return federation


class Calls:
    """Every call of ``names`` an Archive's protocol makes to its store."""

    names: tuple[str, ...] = ()

    def __init__(self, node: ArchiveNode) -> None:
        self.calls: list[str] = []
        for name in self.names:
            real = getattr(node.store, name)
            setattr(node.store, name, self._counting(name, real))

    def _counting(self, name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return real(*args, **kwargs)

        return call


class Writes(Calls):
    names = ("spend_urlkey", "count_access", "create", "replace", "note_item")


class Reads(Calls):
    names = ("get", "profile_and_item")


def test_a_resolution_writes_nothing_at_any_archive(federation: MemoryFederation) -> None:
    writes = {name: Writes(node) for name, node in federation.nodes.items()}
    for persistent in (f"/{REPORT.rep}", f"/{REPORT.ibip}+(pt-BR)", f"/{REPORT.ibip}+"):
        found(federation.resolve(persistent))
    for node in federation.nodes.values():  # each answered with a urlkey
        assert "urlkey" in url_request(node.protocol, REPORT.ibip)
    assert {name: w.calls for name, w in writes.items()} == {"a": [], "b": [], "c": []}
    assert all(node.store.urlkeys == {} for node in federation.nodes.values())  # none stored


def acknowledge(federation: MemoryFederation, persistent: str) -> tuple[ArchiveNode, list[Any]]:
    went = found(federation.resolve(persistent))
    return federation[went.answer.archive], acknowledgment_pairs(went, persistent, "203.0.113.9")


def send(node: ArchiveNode, pairs: list[Any]) -> str:
    return str(node.protocol.answer(encode_query(pairs)).pairs)


def test_a_genuine_urlkey_counts_once_on_the_translation(federation: MemoryFederation) -> None:
    node, pairs = acknowledge(federation, f"/{REPORT.rep}+(pt-BR)")
    writes = Writes(node)
    assert send(node, pairs) == NOTICE
    assert writes.calls == ["spend_urlkey", "count_access"]
    assert send(node, pairs) == NOTICE  # replayed: spent, nothing counted
    assert writes.calls == ["spend_urlkey", "count_access", "spend_urlkey"]
    translation, report = node.service.get(TRANSLATION.ibip), node.service.get(REPORT.ibip)
    assert node.service.accesses(translation) == 1 and node.service.accesses(report) == 0


def test_concurrent_replays_of_one_urlkey_count_once(federation: MemoryFederation) -> None:
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    barrier = threading.Barrier(16)

    def replay(_: int) -> str:
        barrier.wait()
        return send(node, pairs)

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(replay, range(16))) == {NOTICE}
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 1


def replaced(pairs: list[Any], **changes: str) -> list[Any]:
    return [(name, changes.get(name.replace(".", "_"), value)) for name, value in pairs]


def test_a_forged_expired_or_misdirected_urlkey_counts_nothing_and_writes_nothing(
    federation: MemoryFederation,
) -> None:
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    urlkey = dict(pairs)["urlkey"]
    writes = Writes(node)
    head, body = urlkey.split("-")
    forged = f"{head}-{body[:-1]}{(int(body[-1]) + 1) % 10}"
    elsewhere = str(
        federation["b"]
        .protocol.answer(  # a genuine key of another Archive
            f"servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi={REPORT.ibip}"
        )
        .pairs
    )
    other_key = next(line for line in elsewhere.splitlines() if line.startswith("urlkey "))[7:]
    for wrong in (
        replaced(pairs, urlkey=forged),
        replaced(pairs, urlkey=other_key),
        replaced(pairs, urlkey="1426387214-9164566186556927"),  # issue 12's shape: never issued
        replaced(pairs, url=f"https://{node.address}/col/{TRANSLATION.ibip}/relatorio.txt"),
        replaced(pairs, url="https://elsewhere.example.org/report.txt"),
        replaced(pairs, ibi=f"ibip {TRANSLATION.ibip}"),  # not where this URL leads
        replaced(pairs, ibi="not an ibi"),
        [p for p in pairs if p[0] not in {"url", "ibi"}],
    ):
        assert send(node, wrong) == NOTICE
    assert writes.calls == []  # forged keys cost no write (and those with a good tag no count)
    node.clock.sleep(600)
    assert send(node, pairs) == NOTICE and writes.calls == []  # expired
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 0


def test_a_file_path_or_the_file_list_counts_on_the_item(federation: MemoryFederation) -> None:
    for persistent in (
        f"/{REPORT.ibip}/sub/data.csv",
        f"/{REPORT.ibip}?ibiurl.verblist=GetFileList",
    ):
        node, pairs = acknowledge(federation, persistent)
        assert send(node, pairs) == NOTICE
        assert node.protocol.acknowledge(dict(pairs)).metric == "AcknowledgmentsIgnored"  # spent
        node.clock.sleep(31)  # past the double-click window (issue 35)
    counts = [n.service.accesses(n.service.get(REPORT.ibip)) for n in federation.nodes.values()]
    assert sum(counts) == 2


def test_an_acknowledgment_of_a_plain_resolution_reads_nothing(
    federation: MemoryFederation,
) -> None:
    """The urlkey of a one-URL answer is bound to that URL and its item: checking it is
    computation, and counting it is the spend and the count, two writes, no read."""
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    reads, writes = Reads(node), Writes(node)
    assert send(node, pairs) == NOTICE
    assert reads.calls == [] and writes.calls == ["spend_urlkey", "count_access"]
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 1


def test_a_bound_urlkey_counts_only_the_url_it_was_issued_with(
    federation: MemoryFederation,
) -> None:
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    files = f"https://{node.address}/col/{REPORT.ibip}/sub/data.csv"  # offered, but not then
    assert node.protocol.acknowledge(dict(replaced(pairs, url=files))).metric == (
        "AcknowledgmentsIgnored"
    )
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 0
    assert send(node, pairs) == NOTICE  # the URL it was given: counted
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 1


def test_an_item_deleted_after_its_urlkey_was_issued_counts_nothing(
    federation: MemoryFederation,
) -> None:
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    node.store.count_access(REPORT.ibip, month="2024-05")  # one access before
    node.service.delete(REPORT.ibip)
    assert node.protocol.acknowledge(dict(pairs)).metric == "AcknowledgmentsIgnored"
    assert send(node, pairs) == NOTICE  # and the constant notice, as for any key
    assert node.store.access_count(REPORT.ibip) == 1


# ---------------------------------------------------------------- configuration


def test_workers_sharing_the_key_file_accept_each_others_urlkeys(tmp_path: Path) -> None:
    from functions.archive.settings import ArchiveSettings
    from functions.archive.wiring import build

    settings = ArchiveSettings.from_environment(
        {"IBI_ARCHIVE_TABLE": "t", "IBI_URLKEY_SECRET_FILE": str(tmp_path / "keys" / "urlkey")}
    )
    assert settings.urlkey_secret_file == str(tmp_path / "keys" / "urlkey")
    one, two = (build(settings, dynamodb=None).urlkeys for _ in range(2))  # two worker processes
    assert one is not None and two is not None
    assert two.check(one.issue(NOW, SCOPE), NOW, SCOPE, 600) == NOW


def test_the_urlkey_secret_comes_from_secrets_manager_in_aws(tmp_path: Path) -> None:
    from functions.archive.settings import ArchiveSettings
    from functions.archive.wiring import urlkey_source

    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:urlkey-AbCdEf"
    environment = {"IBI_ARCHIVE_TABLE": "t", "IBI_URLKEY_SECRET_ARN": arn}
    settings = ArchiveSettings.from_environment(environment)
    client = boto3.client("secretsmanager", region_name="us-east-1")
    assert isinstance(urlkey_source(settings, client), SecretKeys)
    with pytest.raises(ValueError, match="Secrets Manager client"):
        urlkey_source(settings)
    local = ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "t"})
    assert isinstance(urlkey_source(local), RandomKeys)  # tests: this process only


class Failing:
    def __init__(self) -> None:
        self.keys: list[bytes] | None = None

    def load(self) -> list[bytes]:
        if self.keys is None:
            raise OSError("AccessDeniedException")
        return self.keys


def test_an_unreadable_secret_is_a_503_never_a_500_and_a_refresh_failure_keeps_the_keys() -> None:
    from functions.archive.errors import Unavailable

    source, monotonic = Failing(), Monotonic()
    keys = UrlKeys(source, monotonic=monotonic)
    with pytest.raises(Unavailable, match="urlkey secret"):
        keys.issue(NOW, SCOPE)
    with pytest.raises(Unavailable):
        keys.check(f"{NOW}-{'1' * 59}", NOW, SCOPE, 600)
    source.keys = [b"k"]
    monotonic.now += REFRESH_SECONDS
    urlkey = keys.issue(NOW, SCOPE)
    source.keys = None  # the secret becomes unreadable: the keys known go on verifying
    monotonic.now += REFRESH_SECONDS
    assert keys.check(f"{NOW}-{'1' * 59}", NOW, SCOPE, 600) is None
    assert keys.check(urlkey, NOW, SCOPE, 600) == NOW


def test_every_environment_signs_with_the_new_key_within_15_minutes() -> None:
    from functions.shared.keys import MAX_AGE_SECONDS

    source, monotonic = Keys(b"old"), Monotonic()
    keys = UrlKeys(source, monotonic=monotonic)
    keys.issue(NOW, SCOPE)
    source.keys = [b"new", b"old"]
    monotonic.now += MAX_AGE_SECONDS - 1
    assert UrlKeys(Keys(b"old")).check(keys.issue(NOW, SCOPE), NOW, SCOPE, 600) == NOW
    monotonic.now += 1
    assert UrlKeys(Keys(b"new")).check(keys.issue(NOW, SCOPE), NOW, SCOPE, 600) == NOW
    assert source.loads == 2


def test_an_unbound_urlkey_is_checked_against_the_item_read(federation: MemoryFederation) -> None:
    """A key issued with several URLs is bound to none: the item named is read, and the URL
    must be one it offers now."""
    node, pairs = acknowledge(federation, f"/{REPORT.ibip}")
    protocol = node.protocol
    scope, client = protocol.identity.service.key, dict(pairs)["clientinformation.ipaddress"]
    unbound = protocol._urlkeys.issue(protocol._clock(), scope, client=client)
    reads = Reads(node)
    elsewhere = replaced(pairs, urlkey=unbound, url="https://elsewhere.example.org/report.txt")
    assert protocol.acknowledge(dict(elsewhere)).metric == "AcknowledgmentsIgnored"
    assert protocol.acknowledge(dict(replaced(pairs, urlkey=unbound))).metric == "Acknowledgments"
    assert reads.calls and set(reads.calls) == {"get"}
    assert node.service.accesses(node.service.get(REPORT.ibip)) == 1
