"""Who may change what in an Archive (issue 11, findings 5 and 6), over in-memory fakes.

Published bytes never change silently: the commit route refuses other bytes at a published
path, only the depositor adds files (within the CI session's hour), an operator's revision
keeps the previous version and records it. An original is taken only for the Archive's own
subsystems, unless an operator imports it (recorded); a copy's checksum is a real SHA-256.
"""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal

import pytest

from functions.archive.content import ContentService
from functions.archive.errors import BadRequest, Conflict
from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import Forms, State
from functions.archive.service import (
    CREATOR_WINDOW,
    ArchiveService,
    FileExists,
    NotCreator,
    NotOwnSubsystem,
)
from functions.archive.settings import ArchiveSettings, ConfigurationError
from functions.archive.transfer import check_item
from functions.archive.views import ArchiveViews
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter

ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W", "sid.inpe.br/mtc-m18")
CI = "arn:aws:sts::123456789012:assumed-role/ibi-ci/gh-9001-1"
NEXT_RUN = "arn:aws:sts::123456789012:assumed-role/ibi-ci/gh-9002-1"
OPERATOR = "arn:aws:iam::123456789012:user/curator"
PUBLISHED, OTHER = b"release 1.0 bytes\n", b"something else entirely\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def declared(data: bytes, path: str = "app.tar.gz") -> dict[str, object]:
    return {"path": path, "sha256": sha256(data), "size": len(data), "content_type": "text/plain"}


class Archive:
    """One Archive over fakes, with its clock in reach."""

    def __init__(self) -> None:
        self.clock = FakeClock(Decimal(1795473000))
        self.files = MemoryFileStore()
        self.service = ArchiveService(
            MemoryItemStore(), clock=self.clock, mint=MemoryMinter(), own_prefixes=OWN
        )
        self.content = ContentService(
            self.service,
            views=ArchiveViews("https://archive.example.org"),
            files=self.files,
            serve_inline_bytes=1024,
        )

    def commit(self, data: bytes, principal: str, path: str = "app.tar.gz") -> object:
        """What ``ibi deposit`` does: upload through the presigned URL, then commit."""
        self.files.upload(ITEM, path, data)
        return self.content.commit_files(ITEM, {"files": [declared(data, path)]}, principal)[0]

    def served(self) -> bytes:
        answer = self.content.serve_file(ITEM, "", None)
        assert answer.page is not None and isinstance(answer.page.body, bytes)
        return answer.page.body


@pytest.fixture
def archive() -> Archive:
    made = Archive()
    made.service.create_original({"ibi": ITEM}, principal=CI)
    made.commit(PUBLISHED, CI)
    return made


# -- finding 5: published bytes never change silently --------------------------------------------


def test_other_bytes_at_a_published_path_are_refused_and_nothing_changes(
    archive: Archive,
) -> None:
    before = archive.service.get(ITEM)
    with pytest.raises(FileExists, match=r"POST /api/item/files/replace") as refused:
        archive.commit(OTHER, CI)  # the very principal that deposited it, within the hour
    assert refused.value.status == 409
    assert archive.service.get(ITEM) == before
    assert archive.served() == PUBLISHED
    assert archive.files.files[(ITEM, "app.tar.gz")] == PUBLISHED
    assert archive.content.verify(ITEM, None).problems == []


def test_the_same_bytes_again_are_a_no_op_for_anyone(archive: Archive) -> None:
    before = archive.service.get(ITEM)
    again = archive.content.commit_files(ITEM, {"files": [declared(PUBLISHED)]}, NEXT_RUN)
    assert again == (before, 0)  # a re-run of a finished deposit: nothing written
    assert archive.service.get(ITEM).version == before.version


def test_files_join_an_item_only_from_its_depositor_within_the_hour(archive: Archive) -> None:
    with pytest.raises(NotCreator) as other:
        archive.commit(OTHER, NEXT_RUN, path="extra.txt")
    assert other.value.status == 403
    archive.clock.now += CREATOR_WINDOW + 1
    with pytest.raises(NotCreator):
        archive.commit(OTHER, CI, path="extra.txt")  # the same session name, an hour later
    assert [f.path for f in archive.service.get(ITEM).files] == ["app.tar.gz"]


def test_the_depositor_completes_its_own_item_within_the_hour(archive: Archive) -> None:
    archive.clock.now += CREATOR_WINDOW - 1
    item = archive.commit(OTHER, CI, path="checksums.txt")
    assert [f.path for f in item.files] == ["app.tar.gz", "checksums.txt"]  # type: ignore[attr-defined]


def test_an_item_deposited_before_creators_were_recorded_takes_no_new_files(
    archive: Archive,
) -> None:
    earlier = {**item_to_mapping(archive.service.get(ITEM)), "creator": None, "created": None}
    archive.service.items.items[ITEM] = item_from_mapping(earlier, 7)  # type: ignore[attr-defined]
    with pytest.raises(NotCreator):
        archive.commit(OTHER, CI, path="extra.txt")


def test_an_operator_replaces_a_file_keeping_the_previous_version_and_recording_it(
    archive: Archive,
) -> None:
    archive.clock.now += 86400
    archive.files.upload(ITEM, "app.tar.gz", OTHER)
    body = {"files": [declared(OTHER)], "reason": "the 1.0 tarball missed a licence file"}
    item, changed = archive.content.revise_files(ITEM, body, OPERATOR)
    assert changed == 1 and archive.served() == OTHER
    [revision] = item_to_mapping(item)["history"]
    assert revision == {
        "action": "replaced",
        "at": "2026-11-24T22:30:00Z",
        "date": "1795559400",
        "by": OPERATOR,
        "path": "app.tar.gz",
        "old": {"sha256": sha256(PUBLISHED), "size": len(PUBLISHED)},
        "new": {"sha256": sha256(OTHER), "size": len(OTHER)},
        "reason": "the 1.0 tarball missed a licence file",
    }
    assert archive.files.versions[(ITEM, "app.tar.gz", sha256(PUBLISHED))] == PUBLISHED
    previous = archive.content.previous_version(ITEM, "app.tar.gz", sha256(PUBLISHED).upper())
    assert previous["sha256"] == sha256(PUBLISHED) and previous["size"] == len(PUBLISHED)
    assert previous["url"].startswith("memory://history/")
    report = archive.content.verify(ITEM, None)
    assert report.problems == [] and report.items[0]["revisions"] == [revision]


def test_a_lost_previous_version_is_a_problem_for_verify(archive: Archive) -> None:
    archive.files.upload(ITEM, "app.tar.gz", OTHER)
    archive.content.revise_files(ITEM, {"files": [declared(OTHER)], "reason": "fix"}, OPERATOR)
    del archive.files.versions[(ITEM, "app.tar.gz", sha256(PUBLISHED))]
    [problem] = check_item(archive.service.get(ITEM), archive.files)["problems"]
    assert problem["problem"] == "previous version missing"


def test_an_operator_adds_files_to_anybodys_item_and_must_say_why(archive: Archive) -> None:
    archive.files.upload(ITEM, "NOTICE", OTHER)
    with pytest.raises(BadRequest, match="reason"):
        archive.content.revise_files(ITEM, {"files": [declared(OTHER, "NOTICE")]}, OPERATOR)
    item, _ = archive.content.revise_files(
        ITEM, {"files": [declared(OTHER, "NOTICE")], "reason": "legal notice"}, OPERATOR
    )
    added, retargeted = item.history  # a second file, no default: the URL serves no file now
    assert (added.action, added.path, added.old_sha256) == ("added", "NOTICE", None)
    assert (retargeted.action, retargeted.served_after) == ("retargeted", None)
    unchanged, none = archive.content.revise_files(
        ITEM, {"files": [declared(OTHER, "NOTICE")], "reason": "again"}, OPERATOR
    )
    assert none == 0 and unchanged.history == item.history  # same bytes: nothing to record


def test_a_replaced_version_unknown_is_not_found(archive: Archive) -> None:
    from functions.archive.errors import NotHeld

    with pytest.raises(NotHeld):
        archive.content.previous_version(ITEM, "app.tar.gz", sha256(b"never"))


# -- finding 6: an original only for the Archive's own subsystems -----------------------------------


@pytest.mark.parametrize(
    "ibi",
    [
        "LK47B6W/35MME4E",  # another subsystem's IBIp (another address)
        "urlib.net/www/2009/07.21.13.23",  # another institution's repository name
        {"ibip": ITEM, "rep": "urlib.net/www/2009/07.21.13.23"},  # ours, paired with theirs
    ],
)
def test_no_original_for_an_ibi_of_another_subsystem(ibi: object) -> None:
    archive = Archive()
    with pytest.raises(NotOwnSubsystem, match="POST /api/imports") as refused:
        archive.service.create_original({"ibi": ibi}, principal=CI)
    assert refused.value.status == 403
    assert archive.service.items.items == {}  # type: ignore[attr-defined]


def test_no_original_minted_under_another_archives_subsystem() -> None:
    """One minting service, several Archives' subsystems: a depositor naming another
    Archive's subsystem gets no original here (its IBI would be that Archive's prefix)."""
    archive = Archive()
    archive.service._mint = lambda subsystem, key: (  # type: ignore[assignment]
        Forms(rep="urlib.net/www/2009/07.21.13.23") if subsystem == "theirs" else Forms(ibip=ITEM)
    )
    with pytest.raises(NotOwnSubsystem, match=re.escape("urlib.net/www/2009/07.21.13.23")):
        archive.service.create_original({"subsystem": "theirs"}, principal=CI)
    assert archive.service.items.items == {}  # type: ignore[attr-defined]
    ours = archive.service.create_original({"subsystem": "ours"}, principal=CI)
    assert ours.state is State.ORIGINAL


def test_an_original_of_its_own_subsystems_in_either_form() -> None:
    archive = Archive()
    rep = archive.service.create_original({"ibi": "sid.inpe.br/mtc-m18/2009/07.21.13.23"})
    assert rep.state is State.ORIGINAL
    assert archive.service.create_original({"ibi": ITEM}).state is State.ORIGINAL


def test_no_original_for_an_ibi_not_minted_yet() -> None:
    archive = Archive()  # now: 2026-11-22; this IBI is of 2027
    with pytest.raises(BadRequest, match="future"):
        archive.service.create_original({"ibi": "sid.inpe.br/mtc-m18/2027/01.01.00.00"})


def test_an_operator_imports_an_original_of_another_subsystem_and_it_is_recorded() -> None:
    archive = Archive()
    with pytest.raises(BadRequest, match="reason"):
        archive.service.import_original({"ibi": "LK47B6W/35MME4E"}, principal=OPERATOR)
    item = archive.service.import_original(
        {"ibi": "LK47B6W/35MME4E", "reason": "its Archive closed", "language": "pt"},
        principal=OPERATOR,
    )
    assert item.state is State.ORIGINAL and item.creator == OPERATOR and item.language == "pt"
    [revision] = item_to_mapping(item)["history"]
    assert (revision["action"], revision["by"], revision["reason"]) == (
        "imported",
        OPERATOR,
        "its Archive closed",
    )


def test_a_minted_original_needs_no_prefix_of_its_own() -> None:
    archive = Archive()
    archive.service.own_prefixes = frozenset()
    item = archive.service.create_original({}, principal=CI)
    assert item.state is State.ORIGINAL and item.creator == CI


@pytest.mark.parametrize("checksum", ["z" * 64, "a" * 63, "a" * 65, "g" + "0" * 63])
def test_a_copys_original_checksum_is_64_hex_digits(checksum: object) -> None:
    archive = Archive()
    with pytest.raises(BadRequest, match="64 hex digits"):
        archive.service.add_copy({"ibi": "LK47B6W/35MME4E", "original_sha256": checksum})


def test_a_copys_original_checksum_is_kept_in_lower_case() -> None:
    archive = Archive()
    copy = archive.service.add_copy({"ibi": "LK47B6W/35MME4E", "original_sha256": "AB" * 32})
    assert copy.original_sha256 == "ab" * 32 and copy.state is State.COPY


def test_the_settings_name_the_archives_own_prefixes() -> None:
    settings = ArchiveSettings.from_environment(
        {
            "IBI_ARCHIVE_TABLE": "t",
            "IBI_ARCHIVE_SUBSYSTEM_PREFIXES": "8jmkd3mgp8w, Sid.inpe.br/mtc-m18",
        }
    )
    assert settings.subsystem_prefixes == ("8JMKD3MGP8W", "sid.inpe.br/mtc-m18")
    with pytest.raises(ConfigurationError):
        ArchiveSettings.from_environment(
            {"IBI_ARCHIVE_TABLE": "t", "IBI_ARCHIVE_SUBSYSTEM_PREFIXES": "not a prefix"}
        )
    with pytest.raises(ConfigurationError):
        ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "t", "IBI_ALLOW_NETWORKS": "nope"})


def test_the_service_item_takes_no_files(archive: Archive) -> None:
    service = archive.service.bootstrap("https://archive.example.org")
    with pytest.raises((NotCreator, Conflict)):
        archive.content.commit_files(service.key, {"files": [declared(OTHER)]}, CI)
