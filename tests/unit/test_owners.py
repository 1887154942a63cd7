"""Owners (issue 24): the prefixes each registered Archive mints under, one owner per prefix,
kept in the registry table, read through the directory, changed through the admin API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.resolver import handler, wiring
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.owners import owners
from functions.resolver.registry import DynamoRegistry, PrefixTaken
from functions.resolver.service import RegistrationService
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_prefix
from ibi_tools.local.gateway import LocalContext
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle, ScriptedTransport
from tests.fuzzing import event

A = "8JMKD3MGP8W/3FSUP4L"  # prefix 8JMKD3MGP8W
B = "J8LNKB5R7W/3FUQHC5"  # prefix J8LNKB5R7W
B_TOO = "J8LNKB5R7W/3FUQHC6"  # the same subsystem minted this Archive's service IBI
REP_PREFIX = "sid.inpe.br/mtc-m18"
KEY = "1234567890-0987654321"


@pytest.fixture
def registry() -> Iterator[DynamoRegistry]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        yield DynamoRegistry(client, "resolver")


def service_over(registry: Any) -> RegistrationService:
    return RegistrationService(
        registry=registry,
        throttle=MemoryThrottle(),
        transport=ScriptedTransport(),
        pepper=FixedPepper().load(),
        clock=FakeClock(Decimal(1_700_000_000)),
        confirmation_timeout=1.0,
    )


def test_a_prefix_is_canonical_in_either_form() -> None:
    assert parse_prefix("8jmkd3mgp8w") == "8JMKD3MGP8W"
    assert parse_prefix("SID.inpe.br/mtc-m18") == REP_PREFIX
    assert parse_prefix("sid.inpe.br/mtc-m18.8080") == "sid.inpe.br/mtc-m18.8080"
    for bad in ("", "a/b/c", "zz", "8JMKD3MGP8W/35MME4E"):
        with pytest.raises(InvalidIBI):
            parse_prefix(bad)


def test_prefixes_are_kept_in_the_registry_table_with_one_owner_each(
    registry: DynamoRegistry,
) -> None:
    service = service_over(registry)
    generation = registry.generation()
    service.register(A, KEY, [REP_PREFIX, "3sjeg8dtkw"])
    assert registry.generation() > generation  # readers see the change
    assert registry.get(A).prefixes == (REP_PREFIX, "3SJEG8DTKW")  # type: ignore[union-attr]
    with pytest.raises(PrefixTaken) as taken:
        service.register(B, KEY, ["D7N2UA7W", REP_PREFIX])
    assert (taken.value.prefix, taken.value.owner) == (REP_PREFIX, A)
    assert registry.get(B) is None  # nothing changed: not registered, no claim kept
    service.register(B, KEY, ["D7N2UA7W"])  # the claim of D7N2UA7W was released
    assert registry.get(B).prefixes == ("D7N2UA7W",)  # type: ignore[union-attr]
    service.register(A, KEY)  # re-registered (a new key, say): its prefixes stay
    assert registry.get(A).prefixes == (REP_PREFIX, "3SJEG8DTKW")  # type: ignore[union-attr]


def test_prefixes_change_without_the_key_changing(registry: DynamoRegistry) -> None:
    service = service_over(registry)
    service.register(A, KEY, [REP_PREFIX])
    service.register(B, KEY)
    hash_before = registry.get(A).key_hash  # type: ignore[union-attr]
    with pytest.raises(PrefixTaken):
        service.change_prefixes(B, add=[REP_PREFIX])
    service.change_prefixes(A, remove=[REP_PREFIX], add=["3SJEG8DTKW"])
    assert registry.get(A).prefixes == ("3SJEG8DTKW",)  # type: ignore[union-attr]
    assert registry.get(A).key_hash == hash_before  # type: ignore[union-attr]
    service.change_prefixes(B, add=[REP_PREFIX])  # free again
    owned = owners(registry.archives())
    assert owned[REP_PREFIX].service_ibi == B and owned["3SJEG8DTKW"].service_ibi == A
    with pytest.raises(PrefixTaken) as taken:  # A's service IBI's prefix: A's
        service.change_prefixes(B, add=["8JMKD3MGP8W"])
    assert taken.value.owner == A


def test_the_directory_knows_the_owner_of_an_ibi() -> None:
    registry = MemoryRegistry()
    registry.add(A, "a.example:80", prefixes=[REP_PREFIX])
    registry.add(B, "b.example:80")
    directory = ArchiveDirectory(registry)
    assert directory.owner_of("8JMKD3MGP8W/35MME4E").service_ibi == A  # type: ignore[union-attr]
    assert directory.owner_of(f"{REP_PREFIX}/2009/07.21.13.23").service_ibi == A  # type: ignore[union-attr]
    assert directory.owner_of("J8LNKB5R7W/35MME4E").service_ibi == B  # type: ignore[union-attr]
    assert directory.owner_of("3SJEG8DTKW/35MME4E") is None
    registry.add(B_TOO, "c.example:80")  # a second Archive minted by B's subsystem
    directory.forget()
    assert directory.owner_of("J8LNKB5R7W/35MME4E") is None  # shared: nobody owns it
    registry.add(B, "b.example:80", prefixes=["J8LNKB5R7W"])  # until registered with one
    directory.forget()
    assert directory.owner_of("J8LNKB5R7W/35MME4E").service_ibi == B  # type: ignore[union-attr]


def test_an_excluded_owner_still_owns_its_prefix() -> None:
    registry = MemoryRegistry()
    registry.add(A, "a.example:80", included=False)
    assert ArchiveDirectory(registry).owner_of("8JMKD3MGP8W/35MME4E").service_ibi == A  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- the admin API


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[None]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "pepper")}
        )
        wiring.install(wiring.build(settings, dynamodb=client))
        try:
            yield
        finally:
            wiring.install(None)


def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = event("POST", path, "", body=json.dumps(body).encode(), headers={})
    answer = handler.lambda_handler(request, LocalContext("owners", "r-1"))
    return answer["statusCode"], json.loads(answer["body"])


def test_the_admin_api_registers_prefixes_and_refuses_anothers(admin: None) -> None:
    status, body = post(
        "/admin/archives",
        {"archiveserviceibi": A, "registrationkey": KEY, "prefixes": [REP_PREFIX]},
    )
    assert status == 200 and body["prefixes"] == [REP_PREFIX]
    assert body["owns"] == sorted(["8JMKD3MGP8W", REP_PREFIX])
    status, body = post(
        "/admin/archives",
        {"archiveserviceibi": B, "registrationkey": KEY, "prefixes": [REP_PREFIX]},
    )
    assert status == 409 and body["error"]["code"] == "PrefixOwned"
    assert A in body["error"]["message"]
    status, body = post("/admin/archives", {"archiveserviceibi": B, "registrationkey": KEY})
    assert status == 200 and body["owns"] == ["J8LNKB5R7W"]
    status, body = post("/admin/prefixes", {"archiveserviceibi": A, "remove": [REP_PREFIX]})
    assert status == 200 and body["owns"] == ["8JMKD3MGP8W"] and body["prefixes"] == []
    status, body = post("/admin/prefixes", {"archiveserviceibi": B, "add": [REP_PREFIX]})
    assert status == 200 and REP_PREFIX in body["owns"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/admin/archives", {"archiveserviceibi": A, "registrationkey": KEY, "prefixes": "P"}, 422),
        ("/admin/archives", {"archiveserviceibi": A, "registrationkey": KEY, "prefixes": {}}, 422),
        (
            "/admin/archives",
            {"archiveserviceibi": A, "registrationkey": KEY, "prefixes": ["?"]},
            422,
        ),
        ("/admin/prefixes", {"archiveserviceibi": A, "add": ["\u0013x"]}, 422),
        ("/admin/prefixes", {"archiveserviceibi": A, "add": ["8JMKD3MGP8W"]}, 404),
        ("/admin/prefixes", {"archiveserviceibi": A, "other": []}, 400),
    ],
)
def test_the_admin_api_says_what_to_send(
    admin: None, path: str, body: dict[str, Any], status: int
) -> None:
    answered, error = post(path, body)
    assert answered == status and error["error"]["message"]


def test_too_many_prefixes_at_once_are_refused() -> None:
    from functions.resolver.service import check_prefixes

    with pytest.raises(InvalidInput, match="at most"):
        check_prefixes([f"{n}W" for n in range(2, 40)])


# ---------------------------------------------------------------------------- the CLI


def test_the_cli_registers_prefixes_and_changes_them(
    admin: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``ibi resolver register --prefix``, ``ibi resolver prefixes``, to the real handler."""
    from urllib.parse import urlsplit

    from ibi import client as ibi_client
    from ibi.client import Raw
    from ibi_tools import cli

    def send(method: str, url: str, *, data: Any = b"", **_: Any) -> Raw:
        split = urlsplit(url)
        request = event(method, split.path, split.query, body=data or b"", headers={})
        answer = handler.lambda_handler(request, LocalContext("owners", "r-2"))
        headers = {"Content-Type": "application/json"}
        return Raw(answer["statusCode"], headers, answer["body"].encode())

    real = ibi_client.ResolverClient
    monkeypatch.setattr(
        ibi_client, "ResolverClient", lambda *a, **k: real(*a, **{**k, "transport": send})
    )
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    common = ("--endpoint", "http://r.example/", "--key-file", str(key))
    register = ("resolver", "register", "--archive", A, "--prefix", REP_PREFIX, *common)
    assert cli.main(list(register)) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"owns 8JMKD3MGP8W {REP_PREFIX}"
    argv = ["resolver", "prefixes", "--archive", A, "--remove", REP_PREFIX, "--add", "3SJEG8DTKW"]
    assert cli.main([*argv, "--endpoint", "http://r.example/"]) == 0
    assert capsys.readouterr().out == f"{A} owns 3SJEG8DTKW 8JMKD3MGP8W\n"
    taken = ("resolver", "register", "--archive", B, "--prefix", "3SJEG8DTKW", *common)
    assert cli.main(list(taken)) != 0
    assert A in capsys.readouterr().err
