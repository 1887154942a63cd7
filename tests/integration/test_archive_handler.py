"""The Archive's real handler over moto (DynamoDB + S3), fed the events in events/archive/."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from functions.archive import views, wiring
from functions.archive.files import S3FileStore
from functions.archive.handler import lambda_handler
from functions.archive.model import Forms
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore, ensure_table
from functions.archive.wiring import Runtime
from ibi.core.labels import IBI
from ibi.core.pairlist import encode_query, parse_pair_list
from ibi_tools.local.gateway import LocalContext
from ibi_tools.local.tables import LocalTablesClient
from tests.conftest import dynamodb_client
from tests.fakes import FakeClock

EVENTS = Path(__file__).parents[2] / "events" / "archive"
SERVICE = Forms(ibip="8JMKD3MGP8W/3FSUP4L")
ITEM = "8JMKD3MGP8W/35MME4E"
HELLO = b"hello world"
OWN = ("8JMKD3MGP8W", "example.org/ibi")  # the prefixes of the Archive's own subsystems
Invoke = Callable[..., dict[str, Any]]


def event(name: str, **changes: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    loaded.update(changes)
    return loaded


@pytest.fixture
def service_forms() -> Forms:
    """The Archive's service IBI (a test parametrized with ``service_forms`` gives another)."""
    return SERVICE


@pytest.fixture(params=["moto", "local-tables"])
def runtime(
    service_forms: Forms, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Runtime]:
    """The Archive over moto's S3 and, for its items, moto's DynamoDB or local mode's tables."""
    with dynamodb_client(request.param, tmp_path) as dynamodb:
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        ensure_table(dynamodb, "archive-items")
        s3.create_bucket(Bucket="archive-files")
        store = DynamoItemStore(dynamodb, "archive-items")
        store.claim_service_item(service_forms)
        dates = count(1795473000)

        minted: dict[str, Forms] = {}

        def mint(_: str | None, key: str | None) -> Forms:  # a minting service of our own
            if key is not None and key in minted:
                return minted[key]  # idempotent, as the real one
            ibi = IBI.build(Decimal(next(dates)), host="ibi.example.org", ip="192.0.2.10")
            forms = Forms(rep=ibi.rep, ibip=ibi.ibip)
            if key is not None:
                minted[key] = forms
            return forms

        settings = ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "archive-items"})
        clock = FakeClock(Decimal(1795473000))
        yield Runtime(
            service=ArchiveService(store, clock=clock, mint=mint, own_prefixes=OWN),
            store=store,
            settings=settings,
            clock=clock,
            files=S3FileStore(s3, "archive-files", trust_stored_checksum=False),
        )


@pytest.fixture
def invoke(runtime: Runtime) -> Iterator[Invoke]:
    wiring.install(runtime)
    yield lambda name, **changes: lambda_handler(
        event(name, **changes), LocalContext("archive", "t")
    )
    wiring.uninstall()


def body(answer: dict[str, Any]) -> Any:
    return json.loads(answer["body"])


def pairs(answer: dict[str, Any]) -> Any:
    assert answer["headers"]["Content-Type"].startswith("text/plain")
    return parse_pair_list(answer["body"])


def deposit(invoke: Invoke, runtime: Runtime) -> None:
    assert invoke("create_original.json")["statusCode"] == 201
    uploads = body(invoke("upload_files.json"))["uploads"]
    assert uploads[0]["method"] == "PUT" and uploads[0]["headers"]["Content-Length"] == "11"
    assert isinstance(runtime.files, S3FileStore)
    announced = hashlib.sha256(HELLO).hexdigest()
    runtime.files.put(ITEM, "hello.txt", HELLO, "text/plain", announced=announced)  # client's PUT
    assert invoke("commit_files.json")["statusCode"] == 200


def acknowledgment_query(urlkey: str, url: str) -> str:
    """The resolver's acknowledgment (Table 6.11) of ``url`` from the answer with ``urlkey``."""
    return encode_query(
        [
            ("servicesubject", "acknowledgment"),
            ("clientinformation.ipaddress", "198.51.100.7 192.0.2.1"),  # as asked
            ("contenttype", "Data"),
            ("ibi", f"ibip {ITEM}"),
            ("state", "Original"),
            ("url", url),
            ("url.persistent", f"http://urlib.net/{ITEM}"),
            ("urlkey", urlkey),
        ]
    )


def test_service_names_the_archive(invoke: Invoke) -> None:
    answer = body(invoke("service.json"))
    assert answer["archiveserviceibi"] == {"ibip": SERVICE.ibip}
    assert answer["archiveaddress"] == "f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com"


def test_the_archive_service_is_an_item_like_any_other(invoke: Invoke) -> None:
    query = f"servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi={SERVICE.ibip}"
    answer = pairs(invoke("url_request.json", rawQueryString=query))
    assert answer.word("state") == "Original"
    assert answer.words("ibi") == ("ibip", SERVICE.ibip)
    item = body(invoke("get_item.json", queryStringParameters={"ibi": SERVICE.ibip}))
    assert item["service"] is True and item["transferable"] is False


def test_deposit_then_resolve_then_acknowledge(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    answer = pairs(invoke("url_request.json"))
    assert answer.word("url") == (
        f"https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/col/{ITEM}/hello.txt"
    )
    assert answer.word("state") == "Original" and answer.word("contenttype") == "Data"
    urlkey = answer.word("urlkey")
    again = pairs(invoke("url_request.json")).word("urlkey")
    assert urlkey and again and urlkey != again  # a fresh key in every answer
    acknowledgment = acknowledgment_query(urlkey, answer.word("url"))
    acknowledged = invoke("acknowledgment_bad_key.json", rawQueryString=acknowledgment)
    assert acknowledged["body"].strip() == "notice {acknowledgment received}"
    replayed = invoke("acknowledgment_bad_key.json", rawQueryString=acknowledgment)
    # Algorithm 1: the constant notice all the same, but a key counts once.
    assert replayed["statusCode"] == 200
    assert replayed["body"].strip() == "notice {acknowledgment received}"
    assert body(invoke("get_item.json"))["accesses"] == 1

    served = invoke("file.json")
    assert served["statusCode"] == 200 and served["isBase64Encoded"] is True
    assert served["headers"]["ETag"] == f'"{runtime.store.get(ITEM).files[0].sha256}"'  # type: ignore[union-attr]
    not_modified = invoke(
        "file.json",
        headers={**event("file.json")["headers"], "if-none-match": served["headers"]["ETag"]},
    )
    assert not_modified["statusCode"] == 304


def test_metadata_views(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    xml = invoke("metadata_oai_dc.json")
    assert xml["headers"]["Content-Type"].startswith("text/xml")
    assert "<dc:title>CCSDS 643.0-B-1</dc:title>" in xml["body"]
    assert f"<dc:identifier>{ITEM}</dc:identifier>" in xml["body"]
    page = invoke("metadata_page.json")
    assert page["statusCode"] == 200 and "CCSDS 643.0-B-1" in page["body"]
    listing = invoke("file_list.json")
    assert listing["statusCode"] == 200 and "hello.txt" in listing["body"]


def test_listing_not_allowed_says_so(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    invoke("update_item.json", body=json.dumps({"listable": False}))
    page = invoke("file_list.json")
    assert page["statusCode"] == 403 and "not allowed" in page["body"]
    assert "hello.txt" not in page["body"]


def test_a_damaged_file_is_reported_never_served(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    assert isinstance(runtime.files, S3FileStore)
    runtime.files.put(ITEM, "hello.txt", b"hello w0rld", "text/plain")  # bit rot
    refused = invoke("file.json")
    assert refused["statusCode"] == 500
    # A page of the Archive's own, styled, under its strict policy (views.PAGE_HEADERS).
    assert refused["headers"]["Content-Security-Policy"] == views.CONTENT_SECURITY_POLICY
    assert "<style>" in refused["body"] and "integrity check" in refused["body"]
    report = body(invoke("verify.json"))
    assert report["problems"] == 1
    assert report["items"][0]["problems"][0]["problem"] == "sha256"
    assert report["items"][0]["damaged"] == ["hello.txt"]


def test_a_damaged_item_is_not_offered_until_an_operator_repairs_it(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    assert isinstance(runtime.files, S3FileStore)
    runtime.files.put(ITEM, "hello.txt", b"hello w0rld", "text/plain")  # bit rot
    assert pairs(invoke("url_request.json")).word("url")  # not known yet: offered
    assert invoke("file.json")["statusCode"] == 500  # found when serving, and recorded
    assert body(invoke("get_item.json"))["damaged"] == ["hello.txt"]
    offered = invoke("url_request.json")
    known = pairs(offered)  # known, not offered: the resolver takes a verified copy elsewhere
    assert offered["statusCode"] == 200 and known.word("state") == "Original"
    assert not any(name.startswith("url") for name in known.names())  # no URL, no urlkey
    repair = {"files": [stage(runtime, HELLO)], "reason": "restored from the copy in b"}
    repaired = body(invoke("replace_files.json", body=json.dumps(repair)))
    assert repaired["damaged"] == [] and repaired["history"][-1]["action"] == "repaired"
    assert served(invoke) == HELLO and pairs(invoke("url_request.json")).word("url")


REP_SERVICE = IBI.build(Decimal(1204816620), host="mtc-m18.sid.inpe.br", ip="150.163.34.243")


def at(path: str) -> dict[str, Any]:
    """An event's changes that send it to ``path``."""
    context = event("url_request.json")["requestContext"]
    context["http"]["path"] = path
    return {"rawPath": path, "requestContext": context}


@pytest.mark.parametrize(
    "service_forms", [Forms(rep=REP_SERVICE.rep, ibip=REP_SERVICE.ibip)], ids=["both-forms"]
)
def test_the_protocol_answers_at_either_form_of_the_service_ibi(
    invoke: Invoke, runtime: Runtime, service_forms: Forms
) -> None:
    deposit(invoke, runtime)
    answers = []
    for form in (REP_SERVICE.rep, REP_SERVICE.ibip):  # seed 001 §8.1 uses the rep form
        answer = invoke("url_request.json", **at(f"/{form}"))
        assert answer["statusCode"] == 200, answer["body"]
        answers.append(pairs(answer))
        confirmed = invoke("inclusion_confirmation.json", **at(f"/{form}"))
        assert confirmed["body"].strip() == "confirmation yes"
    assert answers[0].word("url") == answers[1].word("url") and answers[0].word("url")
    assert answers[0].words("ibi.archiveservice") == (
        "rep",
        REP_SERVICE.rep,
        "ibip",
        REP_SERVICE.ibip,
    )
    assert invoke("url_request.json", **at(f"/{REP_SERVICE.rep}/more"))["statusCode"] == 404


def test_files_are_served_under_either_form_and_in_directories(
    invoke: Invoke, runtime: Runtime
) -> None:
    item = body(invoke("create_minted.json", body=json.dumps({})))
    rep, ibip = item["ibi"]["rep"], item["ibi"]["ibip"]
    assert isinstance(runtime.files, S3FileStore)
    declared = []
    for path, data in (("hello.txt", HELLO), ("sub/b.txt", b"in a directory")):
        digest = hashlib.sha256(data).hexdigest()
        runtime.files.put(ibip, path, data, "text/plain", announced=digest)
        declared.append({"path": path, "sha256": digest, "size": len(data)})
    commit = {"files": declared, "default_file": "hello.txt"}
    committed = invoke(
        "commit_files.json", queryStringParameters={"ibi": rep}, body=json.dumps(commit)
    )
    assert committed["statusCode"] == 200, committed["body"]
    for label in (rep, ibip):
        for path, data in (("hello.txt", HELLO), ("sub/b.txt", b"in a directory")):
            answer = invoke("file.json", **at(f"/col/{label}/{path}"))
            assert answer["statusCode"] == 200, (label, path, answer["body"])
            assert base64.b64decode(answer["body"]) == data
    for filepath in ("sub/b.txt", "/sub/b.txt"):  # seed 001 Table 6.9: path-absolute
        query = (
            "servicesubject=urlRequest&clientinformation.ipaddress=192.0.2.1"
            f"&parsedibiurl.ibi={rep}&parsedibiurl.filepath={filepath}"
        )
        answer = pairs(invoke("url_request.json", rawQueryString=query))
        assert (answer.word("url") or "").endswith(f"/col/{ibip}/sub/b.txt")


@pytest.mark.parametrize(
    "verbs",
    [
        "GetMetadata GetLastEdition",
        "GetMetadata+GetMetadata",
        "GetTranslation GetLastEdition GetTranslation GetLastEdition",
    ],
)
def test_a_verb_order_the_grammar_forbids_is_a_400_pair_list(invoke: Invoke, verbs: str) -> None:
    query = (
        "servicesubject=urlRequest&clientinformation.ipaddress=192.0.2.1"
        f"&parsedibiurl.ibi={ITEM}&parsedibiurl.verblist={verbs.replace(' ', '%20')}"
    )
    answer = invoke("url_request.json", rawQueryString=query)
    assert answer["statusCode"] == 400 and pairs(answer).words("error")


def test_an_acknowledgment_with_an_unknown_urlkey_gets_the_constant_notice(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    answer = invoke("acknowledgment_bad_key.json")
    assert answer["statusCode"] == 200
    assert answer["body"].strip() == "notice {acknowledgment received}"
    assert body(invoke("get_item.json"))["accesses"] == 0


def test_commit_refuses_a_wrong_upload(invoke: Invoke, runtime: Runtime) -> None:
    assert invoke("create_original.json")["statusCode"] == 201
    assert isinstance(runtime.files, S3FileStore)
    announced = hashlib.sha256(HELLO).hexdigest()
    runtime.files.put(ITEM, "hello.txt", b"something else", "text/plain", announced=announced)
    refused = invoke("commit_files.json")
    assert refused["statusCode"] == 422 and body(refused)["error"]["code"] == "FileMismatch"
    assert body(invoke("get_item.json"))["files"] == []


def test_update_advances_the_timestamp_and_links(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    runtime.clock.now += 100  # type: ignore[attr-defined]
    before = body(invoke("get_item.json"))["date"]
    after = body(invoke("update_item.json"))
    assert Decimal(after["date"]) > Decimal(before) and after["language"] == "en-GB"
    linked = body(invoke("link_translation.json"))
    assert linked["translations"] == [
        {"language": "pt", "ibi": {"ibip": "8JMKD3MGP8W/35MMLL8"}, "url": None}
    ]
    answer = pairs(
        invoke(
            "url_request.json",
            rawQueryString=event("url_request.json")["rawQueryString"]
            + "&parsedibiurl.verblist=GetTranslation(pt)",
        )
    )
    assert answer.words("ibi.translation(pt)") == ("ibip", "8JMKD3MGP8W/35MMLL8")
    assert "url.translation(pt)" not in answer  # held elsewhere: the resolver chases its IBI


def test_delete_leaves_a_tombstone(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    assert body(invoke("delete_item.json"))["state"] == "Deleted"
    answer = pairs(invoke("url_request.json"))
    assert answer.word("state") == "Deleted" and "url" not in answer and "urlkey" not in answer
    assert invoke("create_original.json")["statusCode"] == 409  # never reused
    assert invoke("delete_item.json")["statusCode"] == 410
    assert invoke("file.json")["statusCode"] == 410


def test_one_item_per_ibi_never_original_and_copy(invoke: Invoke) -> None:
    assert invoke("create_original.json")["statusCode"] == 201
    conflict = invoke("create_original.json")
    assert (
        conflict["statusCode"] == 409 and "one item per IBI" in body(conflict)["error"]["message"]
    )
    as_copy = invoke("create_copy.json", body=json.dumps({"ibi": ITEM}))
    assert as_copy["statusCode"] == 409
    # by its other form too
    rep = invoke(
        "create_copy.json",
        body=json.dumps({"ibi": {"rep": "sid.inpe.br/mtc-m18@80/2009/07.21.13.23", "ibip": ITEM}}),
    )
    assert rep["statusCode"] == 409


def test_a_copy_keeps_the_original_ibi_and_checksum(invoke: Invoke) -> None:
    copy = body(invoke("create_copy.json"))
    assert copy["state"] == "Copy" and copy["ibi"] == {"ibip": "LK47B6W/362SFKH"}
    assert copy["original_sha256"].startswith("b94d27b9")
    minted = body(invoke("create_minted.json"))
    assert minted["ibi"]["rep"].startswith("example.org/ibi/") and minted["state"] == "Original"


@pytest.mark.parametrize(
    ("name", "changes", "status"),
    [
        ("create_original.json", {"body": "{not json"}, 400),
        ("create_original.json", {"body": json.dumps({"ibi": "NOT/AN/IBI"})}, 400),
        ("create_original.json", {"body": json.dumps({"colour": "red"})}, 400),
        ("create_original.json", {"body": json.dumps({"language": "portuguese"})}, 400),
        ("create_original.json", {"body": json.dumps({"url": "ftp://x"})}, 400),
        ("create_original.json", {"body": json.dumps({"dc": {"colour": "red"}})}, 400),
        ("get_item.json", {"queryStringParameters": {"ibi": "LK47B6W/362SFKJ"}}, 404),
        ("get_item.json", {"queryStringParameters": {}}, 400),
        (
            "upload_files.json",
            {
                "body": json.dumps(
                    {"files": [{"path": "../etc/passwd", "sha256": "0" * 64, "size": 1}]}
                )
            },
            400,
        ),
        (
            "url_request.json",
            {"rawQueryString": "servicesubject=urlRequest&parsedibiurl.ibi=x"},
            400,
        ),
        (
            "url_request.json",
            {
                "rawQueryString": "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4&parsedibiurl.ibi=nope"
            },
            400,
        ),
        ("unknown_subject.json", {}, 400),
    ],
)
def test_bad_input_gets_a_clear_4xx(
    invoke: Invoke, name: str, changes: dict[str, Any], status: int
) -> None:
    answer = invoke(name, **changes)
    assert answer["statusCode"] == status, answer["body"]
    assert "Traceback" not in answer["body"]


def test_unknown_ibi_answers_nothing(invoke: Invoke) -> None:
    answer = invoke("url_request_unknown.json")
    assert answer["statusCode"] == 200 and answer["body"] == ""


def test_confirmation(invoke: Invoke) -> None:
    assert invoke("inclusion_confirmation.json")["body"].strip() == "confirmation yes"


def test_every_event_is_used() -> None:
    """By these tests or another file's of the Archive's handler (test_archive_unlink.py)."""
    text = "".join(test.read_text() for test in Path(__file__).parent.glob("test_archive_*.py"))
    assert {p.name for p in EVENTS.glob("*.json") if f'"{p.name}"' not in text} == set()


def test_last_edition_metadata_of_an_item_with_its_own_record(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    answer = pairs(invoke("url_request_metadata.json"))
    assert answer.word("url.lastedition.metadata(oai_dc)") == (
        f"https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/metadata/{ITEM}?format=oai_dc"
    )
    assert answer.word("contenttype.lastedition.metadata(oai_dc)") == "Metadata"
    assert "url" not in answer  # filtered: only what the verb list asks for


def test_list_items(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    listed = body(invoke("list_items.json"))
    keys = {item["ibi"].get("ibip") for item in listed["items"]}
    assert keys == {ITEM, SERVICE.ibip} and listed["next"] is None


def test_a_retried_deposit_gets_the_same_item(invoke: Invoke) -> None:
    headers = {**event("create_minted.json")["headers"], "idempotency-key": "run-9-sha256-abc"}
    first = body(invoke("create_minted.json", headers=headers))
    again = body(invoke("create_minted.json", headers=headers))
    assert first["ibi"] == again["ibi"]
    other = body(invoke("create_minted.json"))
    assert other["ibi"] != first["ibi"]
    bad = invoke("create_minted.json", headers={**headers, "idempotency-key": "no spaces"})
    assert bad["statusCode"] == 400


def test_a_transfer_the_receiver_does_not_take_is_rolled_back(
    invoke: Invoke, runtime: Runtime
) -> None:
    from ibi_tools.local.stores import free_port

    deposit(invoke, runtime)
    # An address the Archive will not contact (loopback, outside its allowed networks): the
    # caller's to correct (422), never contacted, nothing moved.
    unreachable = json.dumps({"to": f"http://127.0.0.1:{free_port()}", "leave": "copy"})
    answer = invoke("transfer_item.json", body=unreachable)
    assert answer["statusCode"] == 422 and body(answer)["error"]["code"] == "Unprocessable"
    assert "will not contact" in body(answer)["error"]["message"]
    item = body(invoke("get_item.json"))
    assert item["state"] == "Original" and item["transferable"] is True
    bad = invoke("transfer_item.json", body=json.dumps({"to": "ftp://x", "leave": "copy"}))
    assert bad["statusCode"] == 400
    assert body(invoke("get_item.json"))["state"] == "Original"


def test_logs_carry_the_resolvers_correlation_id_and_the_ibi(
    invoke: Invoke, runtime: Runtime
) -> None:
    import io
    import logging

    from functions.archive.handler import logger

    deposit(invoke, runtime)
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logger.registered_formatter)
    logger.addHandler(handler)
    logger.setLevel("INFO")
    try:
        headers = {**event("url_request.json")["headers"], "x-correlation-id": "resolver-req-42"}
        invoke("url_request.json", headers=headers)
    finally:
        logger.setLevel("WARNING")
        logger.removeHandler(handler)
    record = json.loads(buffer.getvalue().splitlines()[-1])
    assert record["correlation_id"] == "resolver-req-42"
    assert record["ibi"] == ITEM and record["held"] is True


def _dynamodb_calls(runtime: Runtime) -> list[str]:
    """The DynamoDB operations the store's client makes from now on, in order."""
    calls: list[str] = []
    client = runtime.store._client  # type: ignore[attr-defined]
    if isinstance(client, LocalTablesClient):  # local mode's tables: one entry point
        make_call = client._make_api_call

        def noting(operation: str, params: dict[str, Any]) -> dict[str, Any]:
            calls.append(operation)
            return make_call(operation, params)

        client._make_api_call = noting  # type: ignore[method-assign]
    else:
        client.meta.events.register(
            "before-call.dynamodb.*", lambda model, **_: calls.append(model.name)
        )
    return calls


def test_a_url_request_costs_one_read_and_no_write(invoke: Invoke, runtime: Runtime) -> None:
    """The profile and the item in one round trip; the urlkey is signed, never written."""
    deposit(invoke, runtime)
    calls = _dynamodb_calls(runtime)
    assert pairs(invoke("url_request.json")).word("urlkey")
    assert calls == ["BatchGetItem"]
    calls.clear()
    assert pairs(invoke("url_request_unknown.json")) == parse_pair_list("")
    assert calls == ["BatchGetItem"]


def test_only_a_genuine_acknowledgment_writes_once_per_urlkey(
    invoke: Invoke, runtime: Runtime
) -> None:
    """A forged, expired or spent urlkey costs no write; a genuine one is spent (a conditional
    put) and counted, once."""
    deposit(invoke, runtime)
    answer = pairs(invoke("url_request.json"))
    urlkey, url = answer.word("urlkey"), answer.word("url")
    head, tail = urlkey.split("-")
    forged = f"{head}-{tail[:-1]}{(int(tail[-1]) + 1) % 10}"
    calls = _dynamodb_calls(runtime)
    for key in (forged, "1426387214-9164566186556927"):
        invoke("acknowledgment_bad_key.json", rawQueryString=acknowledgment_query(key, url))
    assert calls == []  # checked in memory: not even a read
    genuine = acknowledgment_query(urlkey, url)
    invoke("acknowledgment_bad_key.json", rawQueryString=genuine)
    # Bound to this item and URL when issued: not read again, spent, counted (issue 14), the
    # client's request claimed first (issue 35: the double-click and session rules).
    assert calls == ["PutItem", "UpdateItem", "UpdateItem"]
    calls.clear()
    invoke("acknowledgment_bad_key.json", rawQueryString=genuine)
    assert calls == ["PutItem"]  # spent already: the conditional put refuses
    calls.clear()
    runtime.clock.sleep(600)  # type: ignore[attr-defined]
    fresh = pairs(invoke("url_request.json")).word("urlkey")
    runtime.clock.sleep(600)  # type: ignore[attr-defined]
    calls.clear()
    invoke("acknowledgment_bad_key.json", rawQueryString=acknowledgment_query(fresh, url))
    assert calls == []  # expired
    assert body(invoke("get_item.json"))["accesses"] == 1
    spent = runtime.store._client.get_item(  # type: ignore[attr-defined]
        TableName="archive-items", Key={"label": {"S": f"#urlkey#{urlkey}"}}
    )["Item"]
    assert spent["expires_at"] == {"N": str(int(head) + 600)}  # the table's TTL removes it


def test_concurrent_replays_count_once(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    answer = pairs(invoke("url_request.json"))
    genuine = acknowledgment_query(answer.word("urlkey"), answer.word("url"))
    barrier = threading.Barrier(8)

    def replay(_: int) -> int:
        barrier.wait()
        return int(invoke("acknowledgment_bad_key.json", rawQueryString=genuine)["statusCode"])

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(replay, range(8))) == {200}
    assert body(invoke("get_item.json"))["accesses"] == 1


def test_the_profile_and_the_item_survive_keys_left_unprocessed(runtime: Runtime) -> None:
    """DynamoDB may leave keys of a batch unprocessed (throttling): they are read one by one."""
    store = runtime.store
    assert isinstance(store, DynamoItemStore)
    runtime.service.create_original({"ibi": ITEM, "url": "https://example.org/a", "language": "pt"})
    client = store._client
    real = client.batch_get_item

    def throttled(**request: Any) -> Any:
        table, asked = next(iter(request["RequestItems"].items()))
        answer = real(**request)
        answer["Responses"][table] = []  # nothing processed
        answer["UnprocessedKeys"] = {table: asked}
        return answer

    client.batch_get_item = throttled
    profile, item = store.profile_and_item(ITEM)
    assert item is not None and item.external_url == "https://example.org/a"
    assert profile.languages == frozenset({"pt"})
    assert store.profile_and_item("8JMKD3MGP8W/35MMLL8")[1] is None


# -- issue 11: who may change what (findings 5, 6), transfers that prove themselves (7) ---------

AGAIN = b"hello again"  # as long as HELLO: only the SHA-256 tells them apart


def as_principal(name: str, user_arn: str) -> dict[str, Any]:
    """``name``'s event, signed by another IAM principal."""
    context = event(name)["requestContext"]
    context["authorizer"]["iam"]["userArn"] = user_arn
    return {"requestContext": context}


def stage(runtime: Runtime, data: bytes, path: str = "hello.txt") -> dict[str, Any]:
    """What the client does before a commit: the PUT to the presigned URL; the declaration."""
    assert isinstance(runtime.files, S3FileStore)
    digest = hashlib.sha256(data).hexdigest()
    runtime.files.put(ITEM, path, data, "text/plain", announced=digest)
    return {"path": path, "sha256": digest, "size": len(data), "content_type": "text/plain"}


def served(invoke: Invoke) -> bytes:
    import base64

    answer = invoke("file.json")
    assert answer["statusCode"] == 200
    return base64.b64decode(answer["body"])


def test_the_ci_routes_never_replace_a_published_file(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    other = json.dumps({"files": [stage(runtime, AGAIN)]})
    refused = invoke("commit_files.json", body=other)
    assert refused["statusCode"] == 409
    error = body(refused)["error"]
    assert error["code"] == "FileExists" and "POST /api/item/files/replace" in error["message"]
    assert served(invoke) == HELLO
    assert body(invoke("verify.json"))["problems"] == 0
    before = body(invoke("get_item.json"))
    assert invoke("commit_files.json")["statusCode"] == 200  # the same bytes again: a no-op
    assert body(invoke("get_item.json")) == before


def test_files_join_an_item_only_from_its_depositor(invoke: Invoke, runtime: Runtime) -> None:
    assert invoke("create_original.json")["statusCode"] == 201
    assert body(invoke("get_item.json"))["creator"] == (
        "arn:aws:sts::123456789012:assumed-role/ibi-ci-minter/github-actions"
    )
    stage(runtime, HELLO)
    other_run = as_principal(
        "commit_files.json", "arn:aws:sts::123456789012:assumed-role/ibi-ci-minter/gh-9002"
    )
    refused = invoke("commit_files.json", **other_run)
    assert refused["statusCode"] == 403 and body(refused)["error"]["code"] == "NotCreator"
    assert body(invoke("get_item.json"))["files"] == []


def test_an_operator_replaces_a_file_and_the_history_says_so(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    stage(runtime, AGAIN)
    revised = invoke("replace_files.json")
    assert revised["statusCode"] == 200, revised["body"]
    [revision] = body(revised)["history"]
    assert revision["action"] == "replaced" and revision["reason"] == "a corrected greeting"
    assert revision["by"] == "arn:aws:iam::123456789012:user/curator"
    assert revision["old"] == {"sha256": hashlib.sha256(HELLO).hexdigest(), "size": 11}
    assert revision["new"] == {"sha256": hashlib.sha256(AGAIN).hexdigest(), "size": 11}
    assert served(invoke) == AGAIN
    previous = body(invoke("previous_version.json"))
    assert previous["sha256"] == revision["old"]["sha256"] and "/history/" in previous["url"]
    report = body(invoke("verify.json"))
    assert report["problems"] == 0 and report["items"][0]["revisions"] == [revision]


def test_an_original_of_another_subsystem_comes_only_through_an_import(invoke: Invoke) -> None:
    foreign = json.dumps({"ibi": "LK47B6W/362SFKH"})
    refused = invoke("create_original.json", body=foreign)
    assert refused["statusCode"] == 403 and body(refused)["error"]["code"] == "NotOwnSubsystem"
    imported = invoke("create_import.json")
    assert imported["statusCode"] == 201
    item = body(imported)
    assert item["state"] == "Original" and item["creator"].endswith(":user/curator")
    assert [r["action"] for r in item["history"]] == ["imported"]


def test_a_copys_original_checksum_is_64_hex_digits(invoke: Invoke) -> None:
    bad = invoke(
        "create_copy.json", body=json.dumps({"ibi": "LK47B6W/362SFKH", "original_sha256": "z" * 64})
    )
    assert bad["statusCode"] == 400
    upper = json.dumps({"ibi": "LK47B6W/362SFKH", "original_sha256": "B94D27B9" + "0" * 56})
    assert body(invoke("create_copy.json", body=upper))["original_sha256"] == "b94d27b9" + "0" * 56


def test_the_receiving_side_holds_an_incoming_transfer_silently_until_complete(
    invoke: Invoke,
) -> None:
    incoming = invoke("receive_transfer.json")
    assert incoming["statusCode"] == 201 and body(incoming)["pending"] is True
    asked = "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
    query = f"{asked}&parsedibiurl.ibi=LK47B6W/362SFKH"
    assert invoke("url_request.json", rawQueryString=query)["body"] == ""
    assert invoke("cancel_transfer.json")["statusCode"] == 200  # forgotten, never answered
    assert (
        invoke("get_item.json", queryStringParameters={"ibi": "LK47B6W/362SFKH"})["statusCode"]
        == 404
    )
    assert invoke("receive_transfer.json")["statusCode"] == 201
    done = invoke("complete_transfer.json")
    assert done["statusCode"] == 200, done["body"]
    assert body(done)["state"] == "Original" and body(done)["pending"] is False
    assert pairs(invoke("url_request.json", rawQueryString=query)).word("state") == "Original"
    assert invoke("cancel_transfer.json")["statusCode"] == 409  # an original stays
    assert invoke("receive_transfer.json")["statusCode"] == 409  # one item per IBI


def test_a_receiver_answering_an_empty_200_takes_nothing(invoke: Invoke, runtime: Runtime) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class EmptyOk(BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), EmptyOk)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runtime.receivers = wiring.receivers(("127.0.0.0/8",))  # loopback allowed, as locally
    try:
        deposit(invoke, runtime)
        to = json.dumps({"to": f"http://127.0.0.1:{server.server_address[1]}", "leave": "copy"})
        answer = invoke("transfer_item.json", body=to)
    finally:
        server.shutdown()
        server.server_close()
    assert answer["statusCode"] == 502 and body(answer)["error"]["code"] == "TransferRefused"
    item = body(invoke("get_item.json"))
    assert item["state"] == "Original" and item["transferable"] is True
    assert served(invoke) == HELLO


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("replace_files.json", {"files": []}),  # no reason
        ("replace_files.json", {"files": "x", "reason": "r"}),
        ("replace_files.json", {"files": [], "reason": 7}),
        ("replace_files.json", {"files": [], "reason": "r", "default_file": "nope.txt"}),
        ("create_import.json", {"reason": "no IBI"}),
        ("create_import.json", {"ibi": "LK47B6W/362SFKH", "reason": "", "colour": 1}),
        ("receive_transfer.json", {"ibi": "LK47B6W/362SFKH", "translations": "pt"}),
        ("receive_transfer.json", {"ibi": "LK47B6W/362SFKH", "translations": [{"x": 1}]}),
        ("receive_transfer.json", {"ibi": "LK47B6W/362SFKH", "next_edition": "nope"}),
        ("receive_transfer.json", {"ibi": "LK47B6W/362SFKH", "metadata": {"rep": 5}}),
        ("receive_transfer.json", {"ibi": "LK47B6W/362SFKH", "transferable": False}),
        ("receive_transfer.json", [1, 2]),
    ],
)
def test_the_operators_and_the_transfer_routes_refuse_bad_input_with_a_4xx(
    invoke: Invoke, runtime: Runtime, name: str, sent: Any
) -> None:
    deposit(invoke, runtime)
    answer = invoke(name, body=json.dumps(sent))
    assert 400 <= answer["statusCode"] < 500, answer["body"]
    assert body(answer)["error"]["code"] in {"BadRequest", "NotHeld", "Conflict"}


@pytest.mark.parametrize(
    "query",
    [{}, {"ibi": ITEM}, {"ibi": ITEM, "path": "hello.txt"}, {"ibi": ITEM, "sha256": "x"}],
)
def test_a_previous_version_not_asked_for_properly_is_a_4xx(
    invoke: Invoke, runtime: Runtime, query: dict[str, str]
) -> None:
    deposit(invoke, runtime)
    answer = invoke("previous_version.json", queryStringParameters=query)
    assert answer["statusCode"] in {400, 404}, answer["body"]


def test_an_unreadable_urlkey_secret_is_a_503_and_writes_nothing(
    invoke: Invoke, runtime: Runtime
) -> None:
    """The secret deleted or its permission removed: retry later, never a 500."""
    from functions.archive.urlkeys import UrlKeys

    class Denied:
        def load(self) -> list[bytes]:
            raise OSError("AccessDeniedException: secretsmanager:GetSecretValue")

    deposit(invoke, runtime)
    wiring.uninstall()
    wiring.install(dataclasses.replace(runtime, urlkeys=UrlKeys(Denied())))  # not started
    calls = _dynamodb_calls(runtime)
    answer = invoke("url_request.json")
    assert answer["statusCode"] == 503 and calls[-1] == "BatchGetItem"  # after the bootstrap
    assert not {"PutItem", "UpdateItem", "DeleteItem"} & set(calls)
    assert pairs(invoke("url_request_unknown.json")) == parse_pair_list("")  # no URL, no key
