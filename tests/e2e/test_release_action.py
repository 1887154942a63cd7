"""The GitHub Action's program (``python -m ibi_tools.release``) against `ibi local` (issue 27),
run as the composite action runs it: a child process given the environment GitHub gives a
step. A first release, a re-run of the same job, releases in sequence and at once, the first
IBI with ``!`` leading to the newest, CITATION.cff, and the checksums at the persistent URL."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ibi.client import MintingClient
from ibi_tools import cff
from ibi_tools.local.stores import free_port
from tests.e2e.support import IBI, LocalRun
from tests.e2e.test_local_federation import fetch
from tests.schemas.cff import valid_cff

pytestmark = pytest.mark.e2e

CITATION = """\
cff-version: 1.2.0
message: If you use this software, please cite it as below.
title: Ionosphere tools
authors:
  - family-names: Banon
    given-names: Gerald J. F.
  - name: INPE
type: software
"""


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRun]:
    run = LocalRun(tmp_path_factory.mktemp("release") / "data", free_port()).start()
    try:
        yield run
    finally:
        run.stop()


def workspace(where: Path, version: str, citation: str = CITATION) -> Path:
    """A checkout after the build: dist/ holds the release's files, CITATION.cff beside it."""
    shutil.rmtree(where / "dist", ignore_errors=True)
    (where / "dist").mkdir(parents=True)
    (where / "dist" / f"tools-{version}.tar.gz").write_bytes(f"tarball {version}\n".encode())
    (where / "dist" / f"tools-{version}-py3-none-any.whl").write_bytes(f"wheel {version}".encode())
    (where / "CITATION.cff").write_text(citation, encoding="utf-8")
    return where


class Step:
    """One run of the action's step: its outputs, its summary, its exit and messages."""

    def __init__(self, done: subprocess.CompletedProcess[str], home: Path) -> None:
        self.done = done
        self.outputs = dict(
            line.split("=", 1) for line in (home / "output").read_text().splitlines()
        )
        self.summary = (home / "summary.md").read_text()


def step(run: LocalRun, checkout: Path, run_id: str, version: str, **inputs: str) -> Step:
    """The action's step as GitHub runs it, in a fresh home for its output files."""
    home = checkout.parent / f"step-{run_id}-{len(list(checkout.parent.glob('step-*')))}"
    home.mkdir()
    (home / "output").touch()
    (home / "summary.md").touch()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(checkout),
        "GITHUB_REPOSITORY": "inpe/ionosphere-tools",
        "GITHUB_RUN_ID": run_id,
        "GITHUB_RUN_ATTEMPT": inputs.pop("attempt", "1"),
        "GITHUB_REF_TYPE": "tag",
        "GITHUB_REF_NAME": f"v{version}",
        "GITHUB_OUTPUT": str(home / "output"),
        "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
        "IBI_FILES": "dist/*.tar.gz\ndist/*.whl",
        "IBI_ARCHIVE_ENDPOINT": run.archives[0],
        "IBI_RESOLVER_URL": run.resolver,
        **{f"IBI_{name.upper()}": value for name, value in inputs.items()},
    }
    done = subprocess.run(
        [sys.executable, "-m", "ibi_tools.release"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Step(done, home)


def minted(run: LocalRun) -> int:
    """How many IBIs the minting service has minted, in every subsystem."""
    client = MintingClient(run.endpoint, sign=False)
    names = [s["name"] for s in client.subsystems()["subsystems"]]
    return sum(len(r["ibis"]) for name in names for r in client.records(subsystem=name))


def lands_on(url: str, label: str) -> bool:
    """The persistent URL leads (302) to the Archive's copy of ``label``."""
    status, location = fetch(url)
    return status == 302 and location is not None and f"/col/{label}" in location


def get(url: str, accept: str = "*/*") -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def test_a_first_release_its_rerun_and_its_citation(local: LocalRun, tmp_path: Path) -> None:
    checkout = workspace(tmp_path / "checkout", "1.0.0")
    pristine = tmp_path / "pristine"
    shutil.copytree(checkout, pristine)
    before = minted(local)

    first = step(local, checkout, "5001", "1.0.0")
    label, url = first.outputs["ibi"], first.outputs["persistent-url"]
    assert url == f"{local.resolver}/{label}"
    assert first.outputs["concept-ibi"] == label  # the first version is the concept
    assert first.outputs["concept-url"] == f"{url}!"
    assert first.outputs["previous-ibi"] == ""
    assert minted(local) == before + 1

    # The summary: each file's SHA-256, as sha256sum prints it for the bytes built.
    tarball = (checkout / "dist" / "tools-1.0.0.tar.gz").read_bytes()
    digest = hashlib.sha256(tarball).hexdigest()
    assert (
        f"| [`tools-1.0.0.tar.gz`]({url}/tools-1.0.0.tar.gz) | {len(tarball)} | `{digest}` |"
        in (first.summary)
    )
    assert f"{digest}  tools-1.0.0.tar.gz" in first.done.stdout

    # The persistent URL serves those bytes, and its file list shows their checksums.
    status, location = fetch(f"{url}/tools-1.0.0.tar.gz")
    assert status == 302 and location is not None and get(location)[1] == tarball
    status, listing = fetch(f"{url}?ibiurl.verblist=GetFileList")
    assert status == 302 and listing is not None
    page = get(listing)[1].decode()
    assert digest in page and "tools-1.0.0-py3-none-any.whl" in page

    # CITATION.cff: valid, both URLs as identifiers, the same citation as the persistent URL's.
    citation = valid_cff((checkout / "CITATION.cff").read_text())
    assert citation["version"] == "1.0.0" and citation["title"] == "Ionosphere tools"
    assert [i["value"] for i in citation["identifiers"]] == [url, f"{url}!"]
    (csl,) = json.loads(get(url, "application/vnd.citationstyles.csl+json")[1])
    assert csl["title"] == citation["title"]
    assert csl["author"] == [{"family": "Banon", "given": "Gerald J. F."}, {"literal": "INPE"}]
    assert csl["issued"]["date-parts"][0] == [
        int(part) for part in citation["date-released"].split("-")
    ]
    assert csl["URL"] == url

    # A re-run of the same job (a new attempt, a fresh checkout): the same IBI, no new mint.
    again = step(local, pristine, "5001", "1.0.0", attempt="2")
    assert again.outputs == first.outputs | {"citation-file": str(pristine / "CITATION.cff")}
    assert minted(local) == before + 1


def test_three_releases_in_sequence_make_the_first_ibi_lead_to_the_newest(
    local: LocalRun, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    labels = []
    citation = CITATION
    for number, version in enumerate(("1.0.0", "1.1.0", "1.2.0")):
        workspace(checkout, version, citation)
        done = step(local, checkout, f"600{number}", version)
        labels.append(done.outputs["ibi"])
        assert done.outputs["previous-ibi"] == (labels[-2] if number else "")
        assert done.outputs["concept-url"] == f"{local.resolver}/{labels[0]}!"
        citation = (checkout / "CITATION.cff").read_text()  # committed with the release
        assert cff.concept_of(cff.load(citation), local.resolver) == labels[0]
        assert valid_cff(citation)["version"] == version
    first, second, third = labels
    assert len(set(labels)) == 3
    assert lands_on(f"{local.resolver}/{first}!", third)
    assert lands_on(f"{local.resolver}/{second}!", third)
    for label in labels:  # each version's own IBI is that version
        assert lands_on(f"{local.resolver}/{label}", label)

    # A re-run of the second release, after the third: nothing minted, nothing relinked.
    count = minted(local)
    workspace(checkout, "1.1.0", citation)
    rerun = step(local, checkout, "6001", "1.1.0", attempt="2")
    assert (rerun.outputs["ibi"], rerun.outputs["previous-ibi"]) == (second, first)
    assert minted(local) == count
    assert lands_on(f"{local.resolver}/{first}!", third)


def test_two_concurrent_releases_make_one_chain(local: LocalRun, tmp_path: Path) -> None:
    first = step(local, workspace(tmp_path / "v1", "1.0.0"), "7000", "1.0.0").outputs["ibi"]
    citation = (tmp_path / "v1" / "CITATION.cff").read_text()
    checkouts = [workspace(tmp_path / f"v{n}", f"1.{n}.0", citation) for n in (2, 3)]
    with ThreadPoolExecutor(2) as pool:
        done = list(
            pool.map(lambda n: step(local, checkouts[n], f"700{n + 1}", f"1.{n + 2}.0"), range(2))
        )
    made = {d.outputs["ibi"]: d.outputs["previous-ibi"] for d in done}
    # One of them follows the first version, the other follows that one: no fork.
    (after_first,) = [label for label, previous in made.items() if previous == first]
    (last,) = [label for label, previous in made.items() if previous == after_first]
    assert chain(local, first) == [first, after_first, last]
    assert lands_on(f"{local.resolver}/{first}!", last)


def chain(run: LocalRun, first: str) -> list[str]:
    labels, item = [first], archive_item(run, first)
    while item.get("next_edition"):
        labels.append(item["next_edition"].get("ibip") or item["next_edition"]["rep"])
        item = archive_item(run, labels[-1])
    return labels


def archive_item(run: LocalRun, label: str) -> dict[str, Any]:
    done = subprocess.run(
        [*IBI, "archive", "item", label, "--endpoint", run.archives[0], "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    item: dict[str, Any] = json.loads(done.stdout)
    return item


def test_ibi_deposit_next_version_of_and_ibi_cite_cff(local: LocalRun, tmp_path: Path) -> None:
    (tmp_path / "v1.txt").write_text("first\n")
    (tmp_path / "v2.txt").write_text("second\n")
    (tmp_path / "dc.json").write_text(json.dumps({"title": "Notes", "creator": ["Banon, G."]}))

    def ibi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*IBI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
        )

    where = ("--endpoint", local.archives[0], "--resolver", local.resolver)
    made = ibi("deposit", "v1.txt", "--metadata", "dc.json", *where, "--json")
    first = json.loads(made.stdout)["ibi"]["ibip"]
    made = ibi("deposit", "v2.txt", "--metadata", "dc.json", "--next-version-of", first, *where)
    assert made.returncode == 0, made.stderr
    second = made.stdout.split()[1]
    assert made.stdout.splitlines()[-1] == f"the next edition of {first}"
    assert lands_on(f"{local.resolver}/{first}!", second)

    cited = ibi("cite", "--cff", second, "--concept", first, "--version", "2", *where[2:])
    assert cited.returncode == 0, cited.stderr
    citation = valid_cff((tmp_path / "CITATION.cff").read_text())
    assert citation["title"] == "Notes" and citation["version"] == "2"
    assert [i["value"] for i in citation["identifiers"]] == [
        f"{local.resolver}/{second}",
        f"{local.resolver}/{first}!",
    ]
