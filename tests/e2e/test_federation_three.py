"""Issue 12, "Done when": three local Archives, as a user drives them with the `ibi` command.

The original in archive-a, a copy in archive-b (`ibi deposit --copy-of`: the original's
checksums, metadata and links come from archive-a through the resolver's holdings view), its
next edition in archive-c; then a file of the original is damaged on disk. The holdings view,
`!`, a plain resolution and `ibiurl.requireditemstatus=Original` give the right answers before
and after.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ibi.client import ArchiveClient
from ibi_tools.local.federation import S3_DIR
from ibi_tools.local.s3 import SECRETS_FILE, s3_client
from ibi_tools.local.stores import free_port
from tests.e2e.support import IBI, LocalRun

pytestmark = pytest.mark.e2e


class ThreeArchives(LocalRun):
    """`ibi local --archive-ports A,B,C`: archive-a, archive-b and archive-c."""

    def __init__(self, data_dir: Path, port: int) -> None:
        super().__init__(data_dir, port)
        self.archive_ports = (*self.archive_ports, free_port())
        self.archives = [f"http://127.0.0.1:{p}" for p in self.archive_ports]


@pytest.fixture
def three(tmp_path: Path) -> Iterator[ThreeArchives]:
    run = ThreeArchives(tmp_path / "data", free_port())
    run.start()
    yield run
    run.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch(url: str, **headers: str) -> tuple[int, str | None, bytes]:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, response.headers.get("Location"), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location"), error.read()


def ibi(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*IBI, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def holdings(cwd: Path, run: LocalRun, label: str) -> tuple[int, dict[str, Any]]:
    done = ibi(cwd, "holdings", label, "--resolver", run.resolver, "--json")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_original_copy_next_edition_and_a_damaged_file(
    three: ThreeArchives, tmp_path: Path
) -> None:
    a, b, c = three.archives
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "report.txt").write_bytes(b"the report, first edition\n")
    (work / "sub" / "notes.txt").write_bytes(b"notes kept at sub/notes.txt\n")
    (work / "v2.txt").write_bytes(b"the report, second edition\n")
    (work / "bad" / "sub").mkdir(parents=True)  # a tree of the same paths, other bytes
    (work / "bad" / "report.txt").write_bytes(b"not the report at all\n")
    (work / "bad" / "sub" / "notes.txt").write_bytes(b"notes kept at sub/notes.txt\n")
    (work / "dc.json").write_text(json.dumps({"title": "A report", "creator": "Banon, G."}))

    # The original in archive-a, with a file in a subdirectory (issue 12, item 9).
    made = ibi(
        work, "deposit", "report.txt", "sub/notes.txt", "--metadata", "dc.json",
        "--language", "en", "--endpoint", a, "--resolver", three.resolver, "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    original = json.loads(made.stdout)
    label = original["ibi"]["ibip"]
    assert [f["path"] for f in original["files"]] == ["report.txt", "sub/notes.txt"]
    status, location, _ = fetch(f"{three.resolver}/{label}/sub/notes.txt")
    assert status == 302 and location is not None
    assert fetch(location)[2] == b"notes kept at sub/notes.txt\n"

    # Its next edition in archive-c, linked from the original.
    edition = json.loads(ibi(work, "deposit", "v2.txt", "--endpoint", c, "--json").stdout)
    second = edition["ibi"]["ibip"]
    ArchiveClient(a, sign=False).link(label, {"next_edition": second})

    # A copy in archive-b: other bytes are refused; the original's bytes take its metadata,
    # its checksums and its links, read from archive-a through the resolver (items 1 and 2).
    refused = ibi(
        work, "deposit", "bad", "--copy-of", label, "--endpoint", b,
        "--resolver", three.resolver,
    )  # fmt: skip
    assert refused.returncode == 1 and "report.txt: not the original's bytes" in refused.stderr
    copied = ibi(
        work, "deposit", "report.txt", "sub/notes.txt", "--copy-of", label, "--endpoint", b,
        "--resolver", three.resolver, "--json",
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    copy = json.loads(copied.stdout)
    assert copy["state"] == "Copy" and copy["ibi"] == original["ibi"]  # both forms
    assert copy["next_edition"] == {"ibip": second} and copy["language"] == "en"
    assert copy["dc"]["title"] == ["A report"]
    assert {f["path"]: f["sha256"] for f in copy["files"]} == {
        f["path"]: f["sha256"] for f in original["files"]
    }

    # The holdings view: who holds it, in what state, and their bytes agree.
    code, view = holdings(work, three, label)
    states = {h["address"]: h["state"] for h in view["archives"]}
    assert states == {a[7:]: "Original", b[7:]: "Copy", c[7:]: "none"}
    verdict = view["verdict"]
    assert code == 0 and verdict["ok"], verdict["problems"]
    assert [check["agrees"] for check in verdict["copies"]] == [True]
    assert [e["ibi"] for e in verdict["edition_chain"]] == [label, second]
    page = fetch(f"{three.resolver}/holdings/{label}")
    assert page[0] == 200 and b"same files as the original" in page[2]

    # `!` reaches the next edition in archive-c.
    status, location, _ = fetch(f"{three.resolver}/{label}!")
    assert status == 302 and location is not None and location.startswith(c)

    # A file of the original is damaged in storage (written behind the Archive's back, with
    # the S3 server's own credentials); `verify` finds it.
    secrets = json.loads((three.data_dir / S3_DIR / SECRETS_FILE).read_text())
    storage = s3_client(
        f"http://127.0.0.1:{three.s3_port}", secrets["access_key"], secrets["secret_key"]
    )
    listed = storage.list_objects_v2(Bucket="ibi-archive-a-files", Prefix="items/")
    stored = [
        entry["Key"]
        for entry in listed.get("Contents", [])
        if entry["Key"].endswith("/report.txt") and label.split("/")[-1] in entry["Key"]
    ]  # the published file, not the staged upload
    assert len(stored) == 1, stored
    storage.put_object(
        Bucket="ibi-archive-a-files", Key=stored[0], Body=b"the report, damaged on disk\n"
    )
    verify = ibi(work, "archive", "verify", label, "--endpoint", a)
    assert verify.returncode == 1 and "report.txt" in verify.stdout

    # Readers now reach the good copy; the original alone is asked for: no good one exists.
    status, location, _ = fetch(f"{three.resolver}/{label}")
    assert status == 302 and location is not None and location.startswith(b), location
    assert fetch(location)[2] == b"the report, first edition\n"
    status, _, _ = fetch(f"{three.resolver}/{label}?ibiurl.requireditemstatus=Original")
    assert status == 404
    # `!` still reaches the next edition: the copy knows the original's links.
    status, location, _ = fetch(f"{three.resolver}/{label}!")
    assert status == 302 and location is not None and location.startswith(c)

    # The holdings view says where the damage is.
    code, view = holdings(work, three, label)
    assert code == 1
    damaged = next(h for h in view["archives"] if h["address"] == a[7:])
    assert damaged["state"] == "Original" and damaged["damaged"] == ["report.txt"]
    assert any("damaged" in problem for problem in view["verdict"]["problems"])
