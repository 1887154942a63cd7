"""The Archive's item layer: :class:`ArchiveService`, made of one part per domain.

* ``items.py`` — :class:`~functions.archive.items.ItemRecords`: reading items, and the
  conditional write every change goes through;
* ``deposits.py`` — originals, copies, their files, links, updates, deletions (who may do what);
* ``transfers.py`` — an original released, restored, received, completed, cancelled;
* ``bootstrap.py`` — the Archive's own service item.

Each verb is defined once, in its part; this class only puts them together over one store,
clock and minter. Above it, ``content.py`` (:class:`~functions.archive.content.ContentService`)
keeps files and records together and is what the routes call.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from functions.archive.bootstrap import ServiceItem
from functions.archive.deposits import (
    CREATOR_WINDOW,
    Deposits,
    DiffersFromOriginal,
    FileChange,
    FileExists,
    IdempotencyKeyReused,
    NextEditionExists,
    NotCreator,
    NotOwnSubsystem,
    reason_of,
)
from functions.archive.issued import MintRecords
from functions.archive.items import UNKNOWN, Clock, Minter
from functions.archive.store import ItemStore
from functions.archive.transfers import Transfers

__all__ = [
    "CREATOR_WINDOW",
    "UNKNOWN",
    "ArchiveService",
    "DiffersFromOriginal",
    "FileChange",
    "FileExists",
    "IdempotencyKeyReused",
    "Minter",
    "NextEditionExists",
    "NotCreator",
    "NotOwnSubsystem",
    "reason_of",
]


class ArchiveService(Deposits, Transfers, ServiceItem):
    """An Archive's items: deposit, change, delete, list, transfer, and its own service item.

    ``name`` names this Archive among those minting through the same service (its table):
    the service IBI is minted with an idempotency key derived from it, so every execution
    environment that bootstraps at once gets the same IBI.
    """

    def __init__(
        self,
        items: ItemStore,
        *,
        clock: Clock,
        mint: Minter | None = None,
        name: str = "archive",
        own_prefixes: Iterable[str] = (),
        creator_window: Decimal = CREATOR_WINDOW,
        mint_records: MintRecords | None = None,
        principal: str = UNKNOWN,
    ) -> None:
        super().__init__(items, clock=clock)
        self._mint = mint
        self._mint_records = mint_records
        self._principal = principal
        self.service_mint_key = f"archive-service:{name}"
        self.own_prefixes = frozenset(own_prefixes)
        self._window = creator_window
