"""Writes the API Gateway (HTTP API, payload 2.0) events in events/: `python events/make_events.py`.

The events are committed; this script documents how they were made and remakes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ibi.defaults import RESOLVER_SERVICE_IBI

HERE = Path(__file__).parent
SERVICE = "8JMKD3MGP8W/3FSUP4L"  # the test Archive's service IBI (tests claim it first)
ITEM = "8JMKD3MGP8W/35MME4E"
RESOLVER_SERVICE = RESOLVER_SERVICE_IBI
IAM = {
    "iam": {
        "accessKey": "ASIAEXAMPLEEXAMPLE",
        "accountId": "123456789012",
        "callerId": "AROAEXAMPLEEXAMPLE:github-actions",
        "cognitoIdentity": None,
        "principalOrgId": None,
        "userArn": "arn:aws:sts::123456789012:assumed-role/ibi-ci-minter/github-actions",
        "userId": "AROAEXAMPLEEXAMPLE:github-actions",
    }
}


def event(
    method: str,
    path: str,
    *,
    host: str,
    body: Any = None,
    query: str = "",
    headers: dict[str, str] | None = None,
    signed: bool = True,
) -> dict[str, Any]:
    from urllib.parse import parse_qsl

    all_headers = {
        "accept": "application/json",
        "content-type": "application/json",
        "host": host,
        "user-agent": "ibi-cli/0.1.0",
        "x-amzn-trace-id": "Root=1-673f2a4b-0123456789abcdef01234567",
        "x-forwarded-for": "198.51.100.7",
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https",
        **(headers or {}),
    }
    result: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": all_headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": host.split(".", maxsplit=1)[0],
            "domainName": host,
            "domainPrefix": host.split(".", maxsplit=1)[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "198.51.100.7",
                "userAgent": "ibi-cli/0.1.0",
            },
            "requestId": "cJ3mZhXQjoEEMbQ=",
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": "22/Nov/2026:22:30:00 +0000",
            "timeEpoch": 1795473000000,
        },
        "isBase64Encoded": False,
    }
    if signed:
        result["requestContext"]["authorizer"] = IAM
    if query:
        merged: dict[str, str] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            merged[name] = f"{merged[name]},{value}" if name in merged else value
        result["queryStringParameters"] = merged
    if body is not None:
        result["body"] = body if isinstance(body, str) else json.dumps(body)
    return result


def minting() -> dict[str, dict[str, Any]]:
    host = "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"
    return {
        "mint.json": event("POST", "/mint", host=host, body={"subsystem": "default", "count": 1}),
        "mint_batch.json": event("POST", "/mint", host=host, body={"count": 1000}),
        "mint_idempotent.json": event(
            "POST",
            "/mint",
            host=host,
            body={"count": 2},
            headers={"idempotency-key": "run-4242-attempt-1-sha256-9f86d081884c7d65"},
        ),
        "mint_malformed_json.json": event("POST", "/mint", host=host, body='{"count": 1,'),
        "mint_count_out_of_range.json": event("POST", "/mint", host=host, body={"count": 1001}),
        "mint_unknown_subsystem.json": event(
            "POST", "/mint", host=host, body={"subsystem": "nope"}
        ),
        "mint_wrong_method.json": event("GET", "/mint", host=host),
        "list_mints.json": event("GET", "/mints", host=host, query="subsystem=default&limit=10"),
        "list_mints_newest.json": event(
            "GET", "/mints", host=host, query="subsystem=default&order=desc&since=2026-11-01"
        ),
        "list_mints_bad_order.json": event("GET", "/mints", host=host, query="order=newest"),
        "find_mint.json": event(  # the record that issued an IBI (404: none did)
            "GET", "/mints", host=host, query="ibi=example.org/ibi/2026/11.22.22.16.03.639"
        ),
        "verify_mints.json": event("GET", "/mints/verify", host=host, query="subsystem=default"),
        "list_subsystems.json": event("GET", "/subsystems", host=host),
    }


ARCHIVE_HOST = "f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com"
HELLO_SHA256 = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"  # "hello world"


def archive() -> dict[str, dict[str, Any]]:
    return {**_archive_deposit(ARCHIVE_HOST), **_archive_public(ARCHIVE_HOST)}


def _archive_deposit(host: str) -> dict[str, dict[str, Any]]:
    """The deposit API's events (IAM-signed)."""
    sha = HELLO_SHA256
    hello = {"path": "hello.txt", "sha256": sha, "size": 11, "content_type": "text/plain"}
    return {
        "service.json": event("GET", "/api/service", host=host),
        "create_original.json": event(
            "POST",
            "/api/items",
            host=host,
            body={"ibi": ITEM, "language": "en", "dc": {"title": "CCSDS 643.0-B-1"}},
        ),
        "create_minted.json": event(
            "POST", "/api/items", host=host, body={"url": "https://example.org/a.pdf"}
        ),
        "create_copy.json": event(
            "POST",
            "/api/copies",
            host=host,
            body={"ibi": "LK47B6W/362SFKH", "original_sha256": sha},
        ),
        "get_item.json": event("GET", "/api/item", host=host, query=f"ibi={ITEM}"),
        "update_item.json": event(
            "PATCH", "/api/item", host=host, query=f"ibi={ITEM}", body={"language": "en-GB"}
        ),
        "link_translation.json": event(
            "POST",
            "/api/item/links",
            host=host,
            query=f"ibi={ITEM}",
            body={"translation": {"language": "pt", "ibi": "8JMKD3MGP8W/35MMLL8"}},
        ),
        "unlink_translation.json": event(
            "DELETE",
            "/api/item/links",
            host=host,
            query=f"ibi={ITEM}&link=translation%28pt%29",
        ),
        "upload_files.json": event(
            "POST", "/api/item/uploads", host=host, query=f"ibi={ITEM}", body={"files": [hello]}
        ),
        "commit_files.json": event(
            "POST",
            "/api/item/files",
            host=host,
            query=f"ibi={ITEM}",
            body={"files": [hello], "default_file": "hello.txt"},
        ),
        "verify.json": event("POST", "/api/verify", host=host, query=f"ibi={ITEM}"),
        "list_items.json": event("GET", "/api/items", host=host, query="limit=10"),
        "delete_item.json": event("DELETE", "/api/item", host=host, query=f"ibi={ITEM}"),
        "transfer_item.json": event(
            "POST",
            "/api/item/transfer",
            host=host,
            query=f"ibi={ITEM}",
            body={"to": "https://k1l2m3n4o5.execute-api.eu-west-1.amazonaws.com", "leave": "copy"},
        ),
    }


def _archive_public(host: str) -> dict[str, dict[str, Any]]:
    """The service protocol and the public pages (unsigned)."""
    protocol = f"/{SERVICE}"
    public = {"signed": False}
    return {
        "url_request.json": event(
            "GET",
            protocol,
            host=host,
            query=f"servicesubject=urlRequest&clientinformation.ipaddress=198.51.100.7%20192.0.2.1&parsedibiurl.ibi={ITEM}",
            **public,
        ),
        "url_request_metadata.json": event(
            "GET",
            protocol,
            host=host,
            query=f"servicesubject=urlRequest&clientinformation.ipaddress=198.51.100.7&parsedibiurl.ibi={ITEM}&parsedibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)",
            **public,
        ),
        "url_request_unknown.json": event(
            "GET",
            protocol,
            host=host,
            query="servicesubject=urlRequest&clientinformation.ipaddress=198.51.100.7&parsedibiurl.ibi=LK47B6W/362SFKJ",
            **public,
        ),
        "acknowledgment_bad_key.json": event(
            "GET",
            protocol,
            host=host,
            query="servicesubject=acknowledgment&urlkey=1426387214-9164566186556927",
            **public,
        ),
        "inclusion_confirmation.json": event(
            "GET",
            protocol,
            host=host,
            query="servicesubject=inclusionConfirmationRequest",
            **public,
        ),
        "unknown_subject.json": event(
            "GET", protocol, host=host, query="servicesubject=hello", **public
        ),
        "file.json": event("GET", f"/col/{ITEM}/hello.txt", host=host, **public),
        "file_list.json": event("GET", f"/list/{ITEM}", host=host, **public),
        "metadata_oai_dc.json": event(
            "GET", f"/metadata/{ITEM}", host=host, query="format=oai_dc", **public
        ),
        "metadata_page.json": event("GET", f"/metadata/{ITEM}", host=host, **public),
    }


def resolver() -> dict[str, dict[str, Any]]:
    host = "ibi.example.org"
    public = {"signed": False}
    switch = (
        "servicesubject={subject}&archiveaddress=archive.example.org&archiveserviceibi=8JMKD3MGP8W/3FSUP4L"
        "&archiveip=192.0.2.20&archiveprotocol=HTTPS&archiveplatformversion=ibi-0.1.0"
        "&archiveadmemailaddress=admin%40example.org&registrationkey=1234567890-0987654321"
    )
    browser = {
        "accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "accept-language": "pt-BR,pt;q=0.9,en;q=0.8",
    }
    return {
        "landing.json": event("GET", "/", host=host, headers=browser, **public),
        "inspect.json": event(
            "GET", "/inspect", host=host, query="ibi=8JMKD3MGP8W/35MME4E", **public
        ),
        "inspect_invalid.json": event(
            "GET", "/inspect", host=host, query="ibi=8JMKD3MGP8W/35MMIE4E", **public
        ),
        "status.json": event("GET", "/status", host=host, headers=browser, **public),
        "favicon.json": event("GET", "/favicon.ico", host=host, **public),
        "register_archive.json": event(
            "POST",
            "/admin/archives",
            host=host,
            body={
                "archiveserviceibi": "8JMKD3MGP8W/3FSUP4L",
                "registrationkey": "1234567890-0987654321",
            },
        ),
        "list_archives.json": event("GET", "/admin/archives", host=host),
        "inclusion_request.json": event(
            "GET",
            f"/{RESOLVER_SERVICE}",
            host=host,
            query=switch.format(subject="inclusionRequest"),
            **public,
        ),
        "exclusion_request.json": event(
            "GET",
            f"/{RESOLVER_SERVICE}",
            host=host,
            query=switch.format(subject="exclusionRequest"),
            **public,
        ),
        "resolve.json": event("GET", f"/{ITEM}", host=host, headers=browser, **public),
        "resolve_modifier.json": event(
            "GET", "/8JMKD3MGP8W/35MMLL8!:(oai_dc)", host=host, headers=browser, **public
        ),
        "resolve_original_required.json": event(
            "GET",
            f"/{ITEM}",
            host=host,
            query="ibiurl.requireditemstatus=Original",
            headers=browser,
            **public,
        ),
        "resolve_file_list.json": event(
            "GET",
            "/LK47B6W/362SFKH",
            host=host,
            query="ibiurl.verblist=GetFileList",
            headers=browser,
            **public,
        ),
        "resolve_malformed.json": event(
            "GET", f"/{ITEM}!!", host=host, headers={"accept": "text/plain"}, **public
        ),
    }


def main() -> None:
    for folder, events in (
        ("minting", minting()),
        ("archive", archive()),
        ("resolver", resolver()),
    ):
        (HERE / folder).mkdir(exist_ok=True)
        for name, content in events.items():
            (HERE / folder / name).write_text(json.dumps(content, indent=2) + "\n")


if __name__ == "__main__":
    main()
