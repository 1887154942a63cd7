"""Demo items for a fresh ``ibi local``: one of each thing the resolver can be asked.

Each Archive deposits under its own prefix (its own identification subsystem), which it owns
at the resolver; the conflicts are archive-b's operator importing originals of archive-a's
IBIs, which the resolver never follows. Seeded once, through the same HTTP APIs a user or a
CI pipeline would use (deposit, upload, links, an operator's import), and written down in
``<data>/demo.json`` so later starts show the same persistent URLs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ibi.client import ApiError, ArchiveClient, MintingClient
from ibi_tools.local.stores import write_private


@dataclass(frozen=True, slots=True)
class DemoURL:
    path: str  # what follows the resolver's address
    expect: int  # the status the spec says
    what: str


def _label(item: dict[str, Any]) -> str:
    forms: dict[str, str] = item["ibi"]
    return forms.get("ibip") or forms["rep"]


def _deposit(
    archive: ArchiveClient,
    fields: dict[str, Any],
    files: list[tuple[str, bytes, str]],
    default_file: str | None = None,
) -> tuple[dict[str, Any], str]:
    """A new item in ``archive`` with ``files`` uploaded: the item, and its label."""
    item = archive.create(fields)
    label = _label(item)
    archive.upload_files(label, files, default_file=default_file)
    return item, label


REPORT_FILE = ("report.txt", b"The IBI resolution system (demo).\n", "text/plain")


def _seed_report(a: ArchiveClient, b: ArchiveClient) -> str:
    """A report in English (Dublin Core kept in the item) and its Portuguese translation (its
    copy in the second Archive: :func:`copy_report`)."""
    _, report_id = _deposit(
        a,
        {
            "language": "en",
            "dc": {
                "title": "Internet Based Identifier (IBI): resolution system",
                "creator": ["Banon, G. J. F.", "Banon, L. C."],
                "date": "2014",
                "type": "Report",
            },
        },
        [REPORT_FILE],
    )
    _, translation_id = _deposit(
        a,
        {"language": "pt-BR", "dc": {"title": "Sistema de resolucao"}},
        [("relatorio.txt", b"O sistema de resolucao do IBI (demo).\n", "text/plain")],
    )
    a.call(
        "POST",
        "/api/item/links",
        {"translation": {"language": "pt-BR", "ibi": translation_id}},
        ibi=report_id,
    )
    return report_id


def copy_report(archive_a: str, archive_b: str, report_id: str) -> None:
    """The copy of the report in the second Archive: made once the resolver runs, since
    archive-b reads the original's files through it (copies are checked by their Archive)."""
    a = ArchiveClient(archive_a, sign=False)
    b = ArchiveClient(archive_b, sign=False)
    report = a.item(report_id)
    path, content, _ = REPORT_FILE
    original = [{"path": path, "sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}]
    b.copy({"ibi": report["ibi"], "language": "en", "dc": report["dc"], "original_files": original})
    b.upload_files(report_id, [REPORT_FILE])


def _seed_editions(a: ArchiveClient, b: ArchiveClient) -> str:
    """A document with a next edition held by the other Archive (the resolver chases it)."""
    _, first_id = _deposit(
        a,
        {"dc": {"title": "Draft standard, 1st edition"}},
        [("edition-1.txt", b"First edition.\n", "text/plain")],
    )
    second, _ = _deposit(
        b,
        {"dc": {"title": "Draft standard, 2nd edition"}},
        [("edition-2.txt", b"Second edition.\n", "text/plain")],
    )
    a.call("POST", "/api/item/links", {"next_edition": second["ibi"]}, ibi=first_id)
    return first_id


def _seed_dataset(a: ArchiveClient) -> str:
    """An item made of several files."""
    _, dataset_id = _deposit(
        a,
        {"dc": {"title": "A dataset of several files"}},
        [
            ("README.txt", b"Three files.\n", "text/plain"),
            ("data.csv", b"x,y\n1,2\n", "text/csv"),
            ("reference.bib", b"@misc{demo, title={Demo}}\n", "application/x-bibtex"),
        ],
        default_file="README.txt",
    )
    return dataset_id


def _seed_deleted(a: ArchiveClient) -> str:
    """An item deleted: its IBI stays known, forever."""
    _, gone_id = _deposit(
        a, {"dc": {"title": "Withdrawn"}}, [("withdrawn.txt", b"Withdrawn.\n", "text/plain")]
    )
    a.call("DELETE", "/api/item", ibi=gone_id)
    return gone_id


def _seed_disputed(a: ArchiveClient, b: ArchiveClient) -> str:
    """Two Archives both claiming the original of one IBI of archive-a's prefix: archive-b
    refuses an original of another subsystem (NotOwnSubsystem), so its operator imports one.
    The resolver never follows archive-b's claim (archive-a owns the prefix) and flags it."""
    disputed, disputed_id = _deposit(
        a, {"dc": {"title": "Disputed"}}, [("disputed.txt", b"Mine.\n", "text/plain")]
    )
    b.import_original(
        {"ibi": disputed["ibi"], "dc": {"title": "Disputed"}, "reason": "the demo's conflict"}
    )
    b.upload_files(disputed_id, [("disputed.txt", b"No, mine.\n", "text/plain")])
    return disputed_id


def _seed_planted(b: ArchiveClient, minting: MintingClient, subsystem_a: str) -> str:
    """An IBI of archive-a's subsystem, minted but never deposited there, of which archive-b's
    operator imports an original (issue 24: a hostile Archive capturing a fresh IBI)."""
    planted: str = minting.mint(subsystem=subsystem_a)["ibis"][0]["ibip"]
    b.import_original(
        {"ibi": planted, "url": "https://example.org/planted", "reason": "the demo's plant"}
    )
    return planted


def seed(archive_a: str, archive_b: str, minting: str, subsystem_a: str) -> list[DemoURL]:
    a = ArchiveClient(archive_a, sign=False)
    b = ArchiveClient(archive_b, sign=False)
    mint = MintingClient(minting, sign=False)
    report_id = _seed_report(a, b)
    first_id = _seed_editions(a, b)
    dataset_id = _seed_dataset(a)
    gone_id = _seed_deleted(a)
    disputed_id = _seed_disputed(a, b)
    planted_id = _seed_planted(b, mint, subsystem_a)
    # An IBI minted but never deposited anywhere (the minting service's own subsystem).
    unknown = mint.mint()["ibis"][0]["ibip"]

    return [
        DemoURL(
            f"/{report_id}", 302, "a report (original in archive-a, its owner; a copy in archive-b)"
        ),
        DemoURL(f"/{report_id}:", 302, "its metadata"),
        DemoURL(f"/{report_id}:(oai_dc)", 302, "its metadata as OAI Dublin Core"),
        DemoURL(f"/{report_id}+(pt-BR)", 302, "its Brazilian Portuguese translation"),
        DemoURL(f"/{report_id}+", 302, "its translation best matching Accept-Language"),
        DemoURL(
            f"/{report_id}?ibiurl.requireditemstatus=Original", 302, "only the original will do"
        ),
        DemoURL(f"/{first_id}", 302, "a first edition"),
        DemoURL(f"/{first_id}!", 302, "its last edition (held by archive-b)"),
        DemoURL(f"/{dataset_id}?ibiurl.verblist=GetFileList", 302, "the list of a dataset's files"),
        DemoURL(f"/{dataset_id}/reference.bib", 302, "one file of it"),
        DemoURL(f"/{gone_id}", 410, "an item deleted"),
        DemoURL(
            f"/{disputed_id}",
            302,
            "archive-b's operator imported an original of it: archive-a (owner) answers alone",
        ),
        DemoURL(
            f"/{disputed_id}?ibiurl.requireditemstatus=Original",
            302,
            "only the original will do: the owner's (archive-b's claim changes nothing)",
        ),
        DemoURL(
            f"/{planted_id}",
            404,
            "archive-b plants an original of an IBI archive-a never deposited: archive-a's word",
        ),
        DemoURL(f"/{unknown}", 404, "an IBI minted but deposited nowhere"),
        DemoURL(f"/{report_id}!!", 400, "a malformed persistent URL"),
    ]


# The demo URLs whose answer issue 34 changed, as a data directory seeded before it lists them
# (their path is kept): the status and line printed for them now.
RESOLVED_SINCE = {
    (409, "two Archives claim the original (every Archive asked)"): DemoURL(
        "", 302, "only the original will do: the owner's (archive-b's claim changes nothing)"
    ),
    (
        409,
        "archive-b plants an original of an IBI archive-a never deposited: not followed",
    ): DemoURL(
        "",
        404,
        "archive-b plants an original of an IBI archive-a never deposited: archive-a's word",
    ),
}


def ensure_demo(
    data_dir: Path, archive_a: str, archive_b: str, minting: str, subsystem_a: str
) -> list[DemoURL]:
    """The demo URLs of this data directory, seeding the demo items on its first start
    (``subsystem_a``: archive-a's own subsystem)."""
    path = data_dir / "demo.json"
    if path.exists():
        kept = [DemoURL(**entry) for entry in json.loads(path.read_text())]
        urls = [RESOLVED_SINCE.get((url.expect, url.what), url) for url in kept]
        urls = [replace(url, path=old.path) for url, old in zip(urls, kept, strict=True)]
        if urls != kept:  # seeded before issue 34: what these URLs answer now
            write_private(path, json.dumps([_asdict(url) for url in urls], indent=2) + "\n")
        return urls
    urls = seed(archive_a, archive_b, minting, subsystem_a)
    write_private(path, json.dumps([_asdict(url) for url in urls], indent=2) + "\n")
    return urls


def ensure_demo_copy(data_dir: Path, archive_a: str, archive_b: str, urls: list[DemoURL]) -> None:
    """The report's copy in archive-b (:func:`copy_report`), once the resolver runs; made once
    per data directory (``demo-copy.json``), and never again where archive-b holds it."""
    marker = data_dir / "demo-copy.json"
    if marker.exists() or not urls:
        return
    report_id = urls[0].path.lstrip("/")
    try:
        ArchiveClient(archive_b, sign=False).item(report_id)  # a data directory from before
    except ApiError as error:
        if error.status != 404:
            raise
        copy_report(archive_a, archive_b, report_id)
    write_private(marker, json.dumps({"copy_of": report_id}) + "\n")


def _asdict(url: DemoURL) -> dict[str, Any]:
    return {"path": url.path, "expect": url.expect, "what": url.what}


CITATION_TYPES = (
    "application/x-bibtex",
    "application/x-research-info-systems",
    "application/vnd.citationstyles.csl+json",
    "text/x-bibliography; style=apa",
)


def citation_examples(resolver_url: str, urls: list[DemoURL]) -> list[str]:
    """``curl -H "Accept: …"`` lines that get the demo report's citation (issue 16)."""
    if not urls:
        return []
    report = f"{resolver_url}{urls[0].path}"
    return [
        "",
        "Its citation, by content negotiation at the persistent URL (docs/resolver.md):",
        *(f'  curl -H "Accept: {kind}" {report}' for kind in CITATION_TYPES),
        f"  curl -I {report}    (the Link header: FAIR Signposting)",
    ]
