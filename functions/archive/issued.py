"""Whether an IBI may become an original here: issued, to this Archive or its depositor, unused.

An Archive takes an original for an IBI of its own subsystems only when the minting service
issued it (issue 35: an IBI dated a second ahead, or one of 2023 never handed out, was taken
before anyone was issued it). The mint record is the proof (``GET /mints?ibi=``, the record
holding the IBI's date), read through :class:`MintRecords`, and :func:`check_issued` is the rule:

* no record holds the IBI → :class:`NotIssued` (422): nobody was issued it, nobody may claim it;
* the record issued it to this Archive for a deposit (its Idempotency-Key is a deposit's,
  :data:`DEPOSIT_KEY`) → :class:`MintedForAnotherDeposit` (409): that deposit uses it, or is
  using it this very moment; a retried deposit asks for it again under its own key and gets it
  back from the minting service, never by naming it;
* the record issued it to this Archive otherwise, or to the depositor (who minted it to
  deposit it: ``ibi mint``, then ``POST /api/items {"ibi"}``) → accepted;
* issued to anybody else → :class:`IssuedToAnother` (403).

Principals are compared as the minting service and the Archive record them (the IAM ARN in
AWS, ``anonymous:<ip>`` locally): an assumed role's session is not part of it, and this
Archive's role is named by its IAM ARN (``arn:aws:iam::ACCOUNT:role/[path/]NAME``), which a
record names ``arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION``. "Unused" is the store's: one
item per IBI, its tombstone kept for good.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from functions.archive.errors import ArchiveError, Conflict
from functions.archive.model import Forms

# The Idempotency-Key under which an Archive mints for a deposit (``deposits.py``): always one,
# so that every IBI minted for a deposit is known as one.
DEPOSIT_KEY = "deposit:"

_ROLE = re.compile(
    r"arn:(?P<partition>[\w-]+):iam::(?P<account>\d{12}):role/(?:[^/]+/)*(?P<name>[^/]+)"
)
_ASSUMED = re.compile(
    r"arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<name>[^/]+)(?:/.*)?"
)


class NotIssued(ArchiveError):
    """No mint record holds the IBI: the minting service never issued it (or not yet)."""

    status = 422


class IssuedToAnother(ArchiveError):
    """The IBI was issued to a principal that is neither this Archive nor the depositor."""

    status = 403


class MintedForAnotherDeposit(Conflict):
    """The IBI was minted by this Archive for a deposit: only that deposit may use it."""


@dataclass(frozen=True, slots=True)
class Issue:
    """What a mint record says of one IBI: whom it was issued to, under which key, and the
    IBIs the record issued (both forms each)."""

    requester: str
    idempotency_key: str | None
    ibis: tuple[Forms, ...]


class MintRecords(Protocol):
    """The minting service's record, read by IBI (``GET /mints?ibi=``)."""

    def issue_of(self, label: str) -> Issue | None:
        """The record issuing ``label``; None when no record holds it. A record that cannot be
        read now raises :class:`~functions.archive.errors.Unavailable` (never a None)."""
        ...


def principal_of(text: str) -> str:
    """``text`` as a principal is compared: an assumed role or a role → ``sts`` assumed-role
    ARN without its session; anything else as it is."""
    for pattern in (_ASSUMED, _ROLE):
        found = pattern.fullmatch(text)
        if found:
            return f"arn:{found['partition']}:sts::{found['account']}:assumed-role/{found['name']}"
    return text


def check_issued(forms: Forms, issue: Issue | None, *, archive: str, depositor: str) -> None:
    """Refuse an original for ``forms`` unless its mint record lets ``depositor`` deposit it
    here (module docstring); ``archive`` is this Archive's own principal at the minting
    service."""
    if issue is None or not any(_same_ibi(forms, issued) for issued in issue.ibis):
        raise NotIssued(
            f"{forms.key} was never issued: no record of the minting service holds it "
            "(GET /mints?ibi=). An original is deposited only for an IBI minted already: give "
            '"subsystem" instead of "ibi" and the Archive mints one'
        )
    requester = principal_of(issue.requester)
    if requester == principal_of(archive):
        if (issue.idempotency_key or "").startswith(DEPOSIT_KEY):
            raise MintedForAnotherDeposit(
                f"{forms.key} was minted by this Archive for another deposit, which uses it: "
                "a retried deposit sends its own Idempotency-Key again, not the IBI"
            )
        return
    if requester != principal_of(depositor):
        raise IssuedToAnother(
            f"{forms.key} was issued to {issue.requester}, neither this Archive nor you: only "
            "its holder deposits its original, and another Archive's IBI comes through a "
            "transfer (POST /api/transfers) or an operator's import (POST /api/imports)"
        )


def _same_ibi(given: Forms, issued: Forms) -> bool:
    """Whether every form given is the issued IBI's (the rep, the ibip, or both)."""
    pairs = ((given.rep, issued.rep), (given.ibip, issued.ibip))
    return all(mine is None or mine == theirs for mine, theirs in pairs)
