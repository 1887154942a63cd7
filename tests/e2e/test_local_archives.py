"""End to end: the two local Archives, `ibi deposit`, the protocol, a restart."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from ibi.core.pairlist import PairList, parse_pair_list
from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def protocol(archive: str, **pairs: str) -> PairList:
    service = json.loads(get(f"{archive}/api/service")[2])["archiveserviceibi"]["ibip"]
    query = "&".join(f"{k.replace('_', '.')}={v}" for k, v in pairs.items())
    status, headers, body = get(f"{archive}/{service}?{query}")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return parse_pair_list(body.decode("ascii"))


def test_deposit_resolve_acknowledge_restart(local: LocalRun, tmp_path: Path) -> None:
    archive = local.archives[0]
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4 a report\n")
    bib = tmp_path / "reference.bib"
    bib.write_text("@book{x}\n")
    metadata = tmp_path / "dc.json"
    metadata.write_text(json.dumps({"title": "A report", "creator": ["Banon, G."]}))

    done = cli(
        "deposit", str(report), str(bib), "--metadata", str(metadata),
        "--endpoint", archive, "--resolver", "http://resolver.example", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    item = json.loads(done.stdout)
    ibip = item["ibi"]["ibip"]
    assert item["persistent_url"] == f"http://resolver.example/{ibip}"
    assert [f["path"] for f in item["files"]] == ["report.pdf", "reference.bib"]
    assert item["default_file"] == "report.pdf"

    answer = protocol(
        archive,
        servicesubject="urlRequest",
        clientinformation_ipaddress="127.0.0.1",
        parsedibiurl_ibi=ibip,
    )
    assert answer.word("url") == f"{archive}/col/{ibip}/report.pdf"
    status, headers, body = get(answer.word("url") or "")
    assert status == 200 and body == b"%PDF-1.4 a report\n"
    assert headers["etag"] == f'"{item["files"][0]["sha256"]}"'
    assert headers["content-type"] == "application/pdf"

    with_path = protocol(
        archive,
        servicesubject="urlRequest",
        clientinformation_ipaddress="127.0.0.1",
        parsedibiurl_ibi=item["ibi"]["rep"],
        parsedibiurl_filepath="reference.bib",
    )
    assert with_path.word("url") == f"{archive}/col/{ibip}/reference.bib"

    notice = protocol(  # Table 6.11: where the reader went, by its ibi and url, and who
        archive,
        servicesubject="acknowledgment",
        clientinformation_ipaddress="127.0.0.1",  # the client its urlRequest declared
        clientinformation_useragent=quote("Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"),
        urlkey=answer.word("urlkey") or "",
        ibi=f"ibip%20{ibip}",
        url=quote(answer.word("url") or "", safe=""),
    )
    assert notice.words("notice") == ("acknowledgment", "received")
    shown = cli("archive", "item", ibip, "--endpoint", archive, "--json")
    assert json.loads(shown.stdout)["accesses"] == 1

    assert cli("archive", "verify", "--endpoint", archive).returncode == 0

    # The other Archive does not hold it: an empty answer.
    elsewhere = protocol(
        local.archives[1],
        servicesubject="urlRequest",
        clientinformation_ipaddress="127.0.0.1",
        parsedibiurl_ibi=ibip,
    )
    assert len(elsewhere) == 0

    service_before = json.loads(get(f"{archive}/api/service")[2])["archiveserviceibi"]
    local.stop(signal.SIGKILL)
    local.start()
    assert json.loads(get(f"{archive}/api/service")[2])["archiveserviceibi"] == service_before
    status, _, body = get(f"{archive}/col/{ibip}/report.pdf")
    assert status == 200 and body == b"%PDF-1.4 a report\n"
    shown = json.loads(cli("archive", "item", ibip, "--endpoint", archive, "--json").stdout)
    assert shown["accesses"] == 1 and shown["state"] == "Original"


def test_copy_in_the_second_archive_and_tombstone(local: LocalRun, tmp_path: Path) -> None:
    original, copies = local.archives
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    made = json.loads(cli("deposit", str(data), "--endpoint", original, "--json").stdout)
    ibip = made["ibi"]["ibip"]
    copied = cli(
        "deposit", str(data), "--copy-of", ibip, "--endpoint", copies,
        "--resolver", local.resolver, "--json",
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    copy = json.loads(copied.stdout)
    assert copy["state"] == "Copy" and copy["ibi"] == made["ibi"]  # both forms, from the original
    assert copy["original_sha256"] == made["files"][0]["sha256"]  # the original's checksum, kept
    assert copy["original_check"]["status"] == "verified"  # read by the Archive (issue 24)
    assert cli("archive", "verify", ibip, "--endpoint", copies).returncode == 0

    twice = cli(
        "deposit", str(data), "--copy-of", ibip, "--endpoint", copies, "--resolver", local.resolver
    )
    assert twice.returncode == 1 and "one item per IBI" in twice.stderr

    deleted = urllib.request.Request(f"{original}/api/item?ibi={ibip}", method="DELETE")
    with urllib.request.urlopen(deleted, timeout=30) as response:
        assert json.loads(response.read())["state"] == "Deleted"
    tombstone = protocol(
        original,
        servicesubject="urlRequest",
        clientinformation_ipaddress="127.0.0.1",
        parsedibiurl_ibi=ibip,
    )
    assert tombstone.word("state") == "Deleted" and "url" not in tombstone
    still = protocol(
        copies,
        servicesubject="urlRequest",
        clientinformation_ipaddress="127.0.0.1",
        parsedibiurl_ibi=ibip,
    )
    assert still.word("state") == "Copy" and still.word("url")


def test_deposit_needs_something(local: LocalRun) -> None:
    done = cli("deposit", "--endpoint", local.archives[0])
    assert done.returncode == 2 and "FILE" in done.stderr


def test_a_retried_deposit_never_mints_twice(local: LocalRun, tmp_path: Path) -> None:
    artefact = tmp_path / "app-1.0.tar.gz"
    artefact.write_bytes(b"release bytes")
    args = ("deposit", str(artefact), "--endpoint", local.archives[0], "--json")
    first = json.loads(cli(*args, "--idempotency-key", "run-42-1f2e3d").stdout)
    again = json.loads(cli(*args, "--idempotency-key", "run-42-1f2e3d").stdout)
    assert first["ibi"] == again["ibi"] and len(again["files"]) == 1
    assert json.loads(cli(*args).stdout)["ibi"] != first["ibi"]


def test_transfer_an_original_to_the_other_archive(local: LocalRun, tmp_path: Path) -> None:
    sender, receiver = local.archives
    paper = tmp_path / "paper.txt"
    paper.write_text("a transferable paper\n")
    made = json.loads(
        cli("deposit", str(paper), "--language", "en", "--endpoint", sender, "--json").stdout
    )
    ibip = made["ibi"]["ibip"]
    moved = cli("archive", "transfer", ibip, "--to", receiver, "--endpoint", sender, "--json")
    assert moved.returncode == 0, moved.stderr
    answer = json.loads(moved.stdout)
    assert answer["here"]["state"] == "Copy" and answer["there"]["state"] == "Original"
    assert answer["there"]["files"][0]["sha256"] == made["files"][0]["sha256"]

    def state_at(archive: str) -> str | None:
        return protocol(
            archive,
            servicesubject="urlRequest",
            clientinformation_ipaddress="127.0.0.1",
            parsedibiurl_ibi=ibip,
        ).word("state")

    assert (state_at(sender), state_at(receiver)) == ("Copy", "Original")
    status, _, body = get(f"{receiver}/col/{ibip}/paper.txt")
    assert status == 200 and body == b"a transferable paper\n"
    # Only an original moves, and never twice to the same place.
    again = cli("archive", "transfer", ibip, "--to", receiver, "--endpoint", sender)
    assert again.returncode == 1 and "Copy" in again.stderr
    # The Archive's own service item is untransferable.
    service = json.loads(get(f"{sender}/api/service")[2])["archiveserviceibi"]["ibip"]
    refused = cli("archive", "transfer", service, "--to", receiver, "--endpoint", sender)
    assert refused.returncode == 1 and "untransferable" in refused.stderr


def test_a_refused_transfer_leaves_the_original_where_it_was(
    local: LocalRun, tmp_path: Path
) -> None:
    sender, receiver = local.archives
    paper = tmp_path / "paper.txt"
    paper.write_text("stays\n")
    ibip = json.loads(cli("deposit", str(paper), "--endpoint", sender, "--json").stdout)["ibi"][
        "ibip"
    ]
    cli(
        "deposit", str(paper), "--copy-of", ibip, "--endpoint", receiver,
        "--resolver", local.resolver,
    )  # fmt: skip  # receiver holds a copy
    moved = cli("archive", "transfer", ibip, "--to", receiver, "--endpoint", sender)
    assert moved.returncode == 1 and "one item per IBI" in moved.stderr
    shown = json.loads(cli("archive", "item", ibip, "--endpoint", sender, "--json").stdout)
    assert shown["state"] == "Original" and shown["transferable"] is True


def test_archive_service_names_its_ibi(local: LocalRun) -> None:
    done = cli("archive", "service", "--endpoint", local.archives[0])
    assert done.returncode == 0
    label = done.stdout.strip()
    as_json = json.loads(
        cli("archive", "service", "--endpoint", local.archives[0], "--json").stdout
    )
    assert as_json["archiveserviceibi"]["ibip"] == label
    assert as_json["protocol_url"].endswith("/" + label)


def test_published_bytes_never_change_silently_in_local_mode(
    local: LocalRun, tmp_path: Path
) -> None:
    """Issue 11, finding 5, against local mode's S3 (SeaweedFS, which refuses other bytes at the
    presigned PUT itself; an S3 that does not is caught at the commit)."""
    import hashlib

    from ibi.client import ApiError, ArchiveClient, http_send

    archive = ArchiveClient(local.archives[0], sign=False)
    item = archive.create({"dc": {"title": "A release"}})
    label = item["ibi"]["ibip"]
    archive.upload_files(label, [("app.txt", b"release 1.0\n", "text/plain")])
    url = f"{local.archives[0]}/col/{label}/app.txt"
    with pytest.raises(ApiError) as refused:
        archive.upload_files(label, [("app.txt", b"tampered!!!\n", "text/plain")])
    assert refused.value.status == 409 and refused.value.code == "FileExists"
    # The presigned PUT itself, sent straight to the S3 stand-in: it lands on an upload key.
    tampered = b"tampered!!!\n"
    declared = {"path": "app.txt", "sha256": hashlib.sha256(tampered).hexdigest(), "size": 12}
    [grant] = archive.call("POST", "/api/item/uploads", {"files": [declared]}, ibi=label)["uploads"]
    assert http_send("PUT", grant["url"], data=tampered, headers=grant["headers"]).status == 200
    assert get(url)[2] == b"release 1.0\n"
    # An operator's replacement: explicit, recorded, the previous version kept.
    fixed = tmp_path / "app.txt"
    fixed.write_bytes(b"release 1.0, fixed\n")
    done = cli(
        "archive",
        "replace",
        label,
        str(fixed),
        "--reason",
        "a typo",
        "--endpoint",
        local.archives[0],
        "--json",
    )
    assert done.returncode == 0, done.stderr
    [revision] = json.loads(done.stdout)["history"]
    assert revision["old"]["sha256"] == hashlib.sha256(b"release 1.0\n").hexdigest()
    assert revision["by"].startswith("anonymous:127.0.0.1") and revision["reason"] == "a typo"
    assert get(url)[2] == b"release 1.0, fixed\n"
    previous = archive.previous_version(label, "app.txt", revision["old"]["sha256"])
    assert get(previous["url"])[2] == b"release 1.0\n"
    assert cli("archive", "verify", label, "--endpoint", local.archives[0]).returncode == 0


def test_an_original_of_another_subsystem_only_through_an_import(local: LocalRun) -> None:
    """Issue 11, finding 6: locally too, the Archives take originals of the local minting
    service's subsystem only."""
    from ibi.client import ApiError, ArchiveClient

    archive = ArchiveClient(local.archives[1], sign=False)
    with pytest.raises(ApiError) as refused:
        archive.create({"ibi": "LK47B6W/362SFKH"})
    assert refused.value.status == 403 and refused.value.code == "NotOwnSubsystem"
    imported = archive.import_original({"ibi": "LK47B6W/362SFKH", "reason": "a test import"})
    assert imported["state"] == "Original" and imported["history"][0]["action"] == "imported"
