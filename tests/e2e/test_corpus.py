"""End to end: the corpus (tests/corpus_files.py) deposited on ``ibi local``, read back through
the persistent URL (issue 23: every JSON file answered 500; names with ``; , # ? & + = %``
could not be deposited).

Once with ``ibi deposit DIR`` (the 50 MB file among them), once through the deposit API as any
client sends it (create, announce, PUT to each presigned URL, commit). Each file is fetched as
a reader does: ``<resolver>/<ibi>/<path>``, redirects followed (the resolver to the Archive,
the Archive to s3rver for a large file): 200, the same bytes, its type, an attachment unless
it is a type shown inline.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.corpus_files import IMPOSSIBLE, CorpusFile, corpus, persistent_path, write
from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e


def send(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    return urllib.request.urlopen(request, timeout=60)


def call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    try:
        with send(method, url, body, {"Content-Type": "application/json"}) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def check_served(resolver: str, ibi: str, files: list[CorpusFile]) -> None:
    """Each file through its persistent URL, as a reader's browser follows it."""
    for file in files:
        url = resolver + persistent_path(ibi, file.path)
        try:
            answer = send("GET", url)
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{file.path!r}: {error.code} {error.read()[:300]!r}") from None
        with answer:
            assert answer.status == 200, file.path
            assert answer.read() == file.data, file.path
            assert answer.headers["Content-Type"] == file.content_type, file.path
            disposition = answer.headers.get("Content-Disposition") or ""
            assert disposition.startswith("attachment;") != file.inline, (file.path, disposition)


def test_the_corpus_deposited_with_ibi_deposit_is_served_through_persistent_urls(
    local: LocalRun, tmp_path: Path
) -> None:
    files = corpus(large=True)
    assert len(files) >= 60
    root = write(files, tmp_path / "corpus")
    done = cli(
        "deposit", str(root), "--endpoint", local.archives[0], "--resolver", local.resolver,
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    item = json.loads(done.stdout)
    recorded = {f["path"]: f for f in item["files"]}
    assert sorted(recorded) == sorted(f.path for f in files)
    for file in files:  # what the CLI declared is what the corpus says each file is
        assert recorded[file.path]["content_type"] == file.content_type, file.path
    assert item["default_file"] == "index.html"
    check_served(local.resolver, item["ibi"]["ibip"], files)


def test_the_corpus_deposited_through_the_api_is_served_through_persistent_urls(
    local: LocalRun,
) -> None:
    archive = local.archives[0]
    files = corpus(large=False)  # the 50 MB file went through ibi deposit above
    status, item = call("POST", f"{archive}/api/items", {})
    assert status == 201, item
    ibi = item["ibi"]["ibip"]
    declared = [
        {
            "path": file.path,
            "sha256": hashlib.sha256(file.data).hexdigest(),
            "size": len(file.data),
            "content_type": file.content_type,
        }
        for file in files
    ]
    status, granted = call("POST", f"{archive}/api/item/uploads?ibi={ibi}", {"files": declared})
    assert status == 200, granted
    for upload, file in zip(granted["uploads"], files, strict=True):
        assert upload["path"] == file.path
        with send("PUT", upload["url"], file.data, upload["headers"]) as answer:
            assert answer.status == 200, file.path
    status, committed = call("POST", f"{archive}/api/item/files?ibi={ibi}", {"files": declared})
    assert status == 200, committed
    check_served(local.resolver, ibi, files)


def test_a_deposit_refused_for_a_file_name_is_finished_later_under_the_same_ibi(
    local: LocalRun, tmp_path: Path
) -> None:
    name = next(name for name in IMPOSSIBLE if "\\" in name)  # one a Linux file name can be
    data = tmp_path / "deposited"  # (tmp_path / "data" is ibi local's)
    data.mkdir()
    (data / "fine.txt").write_text("fine\n")
    (data / name).write_text("refused\n")
    args = ("deposit", str(data), "--endpoint", local.archives[0], "--json")
    refused = cli(*args)
    assert refused.returncode == 1
    assert repr(name)[1:-1] in refused.stderr and "not a relative file path" in refused.stderr
    key = re.search(r"--idempotency-key (\S+)", refused.stderr)
    assert key is not None, refused.stderr
    (data / name).rename(data / name.replace("\\", "-"))
    finished = cli(*args, "--idempotency-key", key.group(1))
    assert finished.returncode == 0, finished.stderr
    item = json.loads(finished.stdout)
    assert item["ibi"]["ibip"] in refused.stderr  # the IBI the first run minted
    assert sorted(f["path"] for f in item["files"]) == ["back-slash.txt", "fine.txt"]
