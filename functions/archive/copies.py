"""A copy checked against its original as the original's Archive lists it (issue 24, item 5).

A copy's expected files (``original_files``: each file's path, SHA-256 and size) bind what may
be committed to it and what ``verify`` compares it with. They are read here, not taken from the
depositor: from the resolver this Archive joins, its public holdings view
(``GET <resolver>/holdings/<ibi>``, JSON; ``outbound.ResolverHoldings.view``). That view asks
the registered Archives (the registry's addresses, the resolver's address rules) and says of
each claim of the original whether the resolver trusts it (``trust``: the owner of the IBI's
prefix, an Archive the owner's transfer record names, or anyone when the prefix has no owner);
the original is the one trusted claim, the one the resolver leads readers to. Its files are
what its Archive reports through the holdings extension: the list its public file-list page
shows. (The persistent URL with ``GetFileList`` leads to that HTML page, at an Archive the
depositor's resolution chose; the view gives the same list as data, with the trust decided.)

Decisions (docs/archive.md, "Copies, damage and counts"):

* The depositor's ``original_files`` is still accepted, as a cross-check: when given it must be
  the list read, file for file (path, SHA-256, size), else :class:`NotTheOriginal` (409) names
  each differing file. ``original_sha256`` (older clients) must be the original's main file's
  (its default file, or its only one; any of its files when it names no default).
* A copy that cannot be checked (no resolver configured, the resolver unreachable, no
  trusted original among the Archives that answered, two of them, the original's files not
  listed or the list cut short) is made all the same, recorded ``unverified`` with the reason
  and when; its expected files are then the depositor's, as before. ``verify`` tries again
  (within :data:`VERIFY_BUDGET` per call) and records ``verified`` with the list read, which
  replaces the depositor's: ``verify`` then names every file that differs. A ``verified`` copy
  is not read again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger

from functions.archive.errors import ArchiveError, Conflict
from functions.archive.model import CopyCheck, Forms, Item, OriginalCheck, State, StoredFile
from functions.archive.service import ArchiveService
from ibi.core.errors import InvalidInput

logger = Logger(service="archive", child=True)

# Seconds to wait for the resolver's holdings view: its fan-out and edition chain end within
# its resolution deadline (10 s by default), and POST /api/copies within API Gateway's 29 s.
CHECK_TIMEOUT = 12.0
# Seconds of one verify call spent reading originals: a new read starts only while a whole
# CHECK_TIMEOUT still fits, so one call stays far below API Gateway's 29 s.
VERIFY_BUDGET = 14.0
NO_RESOLVER = "this Archive has no resolver configured (IBI_RESOLVER_URL) to read the original from"
MAX_NAMED = 20  # differing files named in one refusal


class NotTheOriginal(Conflict):
    """What the depositor says of the original is not what the original's Archive lists."""


class Uncheckable(Exception):
    """The original's files cannot be read now; the message says why."""


@dataclass(frozen=True, slots=True)
class Original:
    """The original as its Archive lists it: that Archive's service IBI and the files."""

    archive: str
    files: tuple[StoredFile, ...]
    default_file: str | None = None

    @property
    def main_sha256(self) -> str | None:
        """The SHA-256 of what its persistent URL serves: the default file, or the only one."""
        chosen = self.default_file
        if chosen is None and len(self.files) == 1:
            chosen = self.files[0].path
        return next((f.sha256 for f in self.files if f.path == chosen), None)


Originals = Callable[[str], Original]  # an IBI's label -> its original; Uncheckable if not now
View = Callable[[str], dict[str, Any]]  # the resolver's holdings view of a label (JSON)


def original_in(view: dict[str, Any]) -> Original:
    """The one original the resolver trusts in its holdings view, with its listed files."""
    ibi = view.get("ibi", "the IBI")
    holders = [h for h in view.get("archives", []) if isinstance(h, dict)]
    claims = [h for h in holders if h.get("state") == "Original"]
    trusted = [h for h in claims if h.get("trust") != "untrusted"]
    if len(trusted) > 1:
        names = ", ".join(str(h.get("archive")) for h in trusted)
        raise Uncheckable(f"{len(trusted)} Archives claim the original of {ibi} ({names})")
    if not trusted:
        silent = [
            f"{h.get('archive')} ({h.get('problem')})"
            for h in holders
            if h.get("state") == "unreachable"
        ]
        why = f"; did not answer: {', '.join(silent[:5])}" if silent else ""
        untrusted = "" if not claims else " (only Archives the resolver does not trust claim it)"
        raise Uncheckable(f"no Archive that answered holds the original of {ibi}{untrusted}{why}")
    holder = trusted[0]
    archive = str(holder.get("archive"))
    if not holder.get("extension"):
        raise Uncheckable(f"{archive}, holding the original, does not report its files")
    if holder.get("listable") is False:
        raise Uncheckable(f"{archive} does not list the original's files (not listable)")
    listed = holder.get("files")
    if (
        not isinstance(listed, list)
        or holder.get("truncated")
        or holder.get("file_count") != len(listed)
    ):
        raise Uncheckable(f"{archive}'s list of the original's files is cut short")
    try:
        files = tuple(StoredFile(f["path"], f["sha256"], int(f["size"])) for f in listed)
        default = holder.get("default_file")
        return Original(archive, files, str(default) if default else None)
    except (InvalidInput, KeyError, TypeError, ValueError):
        raise Uncheckable(f"{archive}'s list of the original's files is malformed") from None


def through_resolver(view: View) -> Originals:
    """The originals read from the resolver's holdings view (``ResolverHoldings.view``)."""
    from ibi.client import ApiError

    def original(label: str) -> Original:
        try:
            answer = view(label)
        except ApiError as error:
            raise Uncheckable(f"the resolver cannot be read: {error.message}") from None
        return original_in(answer)

    return original


def differences(declared: Iterable[StoredFile], original: Original) -> list[str]:
    """Each file where the depositor's list and the original's differ, in words."""
    theirs = {f.path: f for f in original.files}
    ours = {f.path: f for f in declared}
    found: list[str] = []
    for path, expected in theirs.items():
        given = ours.get(path)
        if given is None:
            found.append(f"{path!r}: a file of the original, not in original_files")
        elif (given.sha256, given.size) != (expected.sha256, expected.size):
            found.append(
                f"{path!r}: SHA-256 {given.sha256}, {given.size} bytes; the original's "
                f"{expected.sha256}, {expected.size} bytes"
            )
    found += [f"{path!r}: not a file of the original" for path in ours if path not in theirs]
    return found


def _main_agrees(sha256: str, original: Original) -> bool:
    """Whether ``original_sha256`` is the original's main file's (any of its files' when it
    names no main one)."""
    main = original.main_sha256
    return sha256 == main if main is not None else sha256 in {f.sha256 for f in original.files}


class CopyChecks:
    """Copies checked against their originals, read through ``originals`` (None: no resolver
    configured, so that every copy is ``unverified``)."""

    def __init__(
        self,
        originals: Originals | None,
        clock: Callable[[], Decimal],
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._originals = originals
        self._clock = clock
        self._monotonic = monotonic

    def _read(self, label: str) -> Original | str:
        """The original, or why it cannot be read now."""
        if self._originals is None:
            return NO_RESOLVER
        try:
            return self._originals(label)
        except Uncheckable as error:
            return str(error)

    def new_copy(
        self, forms: Forms, declared: tuple[StoredFile, ...], declared_sha256: str | None
    ) -> tuple[tuple[StoredFile, ...], str | None, OriginalCheck]:
        """A new copy's expected files and main checksum, and its check (``add_copy``'s
        ``check``): the original's as read, the depositor's agreeing; else the depositor's."""
        original = self._read(forms.ibip or str(forms.rep))
        now = self._clock()
        if isinstance(original, str):  # logged with the copy (handler.py)
            return declared, declared_sha256, OriginalCheck(CopyCheck.UNVERIFIED, now, original)
        differing = differences(declared, original) if declared else []
        main = original.main_sha256
        if declared_sha256 is not None and not _main_agrees(declared_sha256, original):
            differing.append(
                f"original_sha256 {declared_sha256}: the original's main file has {main or 'none'}"
            )
        if differing:
            named = "; ".join(differing[:MAX_NAMED])
            more = f"; and {len(differing) - MAX_NAMED} more" if len(differing) > MAX_NAMED else ""
            raise NotTheOriginal(
                f"{forms.key}: not the original's files as {original.archive} lists them "
                f"(read through the resolver): {named}{more}. Leave original_files out (this "
                "Archive reads them), or send the original's"
            )
        checked = OriginalCheck(CopyCheck.VERIFIED, now, archive=original.archive)
        return original.files, declared_sha256 or main, checked

    def recheck(self, archive: ArchiveService, items: Iterable[Item]) -> dict[str, Item]:
        """Read again the originals of those of ``items`` that are copies not verified yet,
        within :data:`VERIFY_BUDGET`; record what is found. The items rechecked, by key."""
        started, found = self._monotonic(), dict[str, Item]()
        for item in items:
            check = item.original_check
            if item.state is not State.COPY or item.pending or (check and check.verified):
                continue
            if self._monotonic() - started + CHECK_TIMEOUT > VERIFY_BUDGET and found:
                break
            found[item.key] = self._recheck(archive, item)
        return found

    def _recheck(self, archive: ArchiveService, item: Item) -> Item:
        original = self._read(item.ibi.ibip or str(item.ibi.rep))
        now = self._clock()
        if isinstance(original, str):
            before = item.original_check
            if before is not None and before.reason == original:
                return item  # unverified since then, for the same reason
            failed = OriginalCheck(CopyCheck.UNVERIFIED, now, original)
            return _record(archive, replace(item, original_check=failed))
        verified = OriginalCheck(CopyCheck.VERIFIED, now, archive=original.archive)
        logger.info("copy verified", extra={"ibi": item.key, "original": original.archive})
        found = replace(
            item,
            original_check=verified,
            original_files=original.files,
            original_sha256=original.main_sha256,
        )
        return _record(archive, found, expected=True)


def _record(archive: ArchiveService, found: Item, *, expected: bool = False) -> Item:
    """``found`` (the item with its new check) as recorded; as found when it cannot be."""
    checked = found.original_check
    assert checked is not None
    files = found.original_files if expected else None
    try:
        return archive.record_original_check(
            found.key, checked, expected=files, original_sha256=found.original_sha256
        )
    except ArchiveError as error:  # the report says what was found all the same
        logger.warning("copy check not recorded", extra={"ibi": found.key, "why": str(error)})
        return found
