"""The Archive's own service item: an untransferable original, minted once.

Its IBI is the Archive's service IBI (spec §3): what the resolver registers and the protocol
answers at. :meth:`ServiceItem.bootstrap` runs before an execution environment's first route
(``wiring.Runtime.start``).
"""

from __future__ import annotations

from functions.archive.errors import Unavailable
from functions.archive.items import ItemRecords, Minter
from functions.archive.model import Item, State
from functions.archive.store import ItemExists


class ServiceItem(ItemRecords):
    """The service item, minted with this Archive's own idempotency key (``ArchiveService``
    sets ``_mint`` and ``service_mint_key``)."""

    _mint: Minter | None
    service_mint_key: str

    def bootstrap(self, base_url: str) -> Item:
        """The untransferable original that is this Archive's service, minted the first time.

        Safe to run at once in several execution environments: the IBI is minted with this
        Archive's own idempotency key (every caller gets the same one) and recorded with a
        conditional write (the first record wins; the others read it).
        """
        forms = self.items.service_item()
        if forms is None:
            if self._mint is None:
                raise Unavailable("no minting service to mint this Archive's service IBI")
            forms = self.items.claim_service_item(self._mint(None, self.service_mint_key))
        existing = self.items.get(forms.key)
        if existing is not None:
            return existing
        item = Item(
            ibi=forms,
            state=State.ORIGINAL,
            timestamp=self._clock(),
            external_url=f"{base_url.rstrip('/')}/{forms.key}",
            transferable=False,
            listable=False,
            service=True,
            dc={"title": ("IBI Archive service",), "type": ("Service",)},
        )
        try:
            self.items.create(item)
        except ItemExists as exists:
            if exists.existing is not None:
                return exists.existing
        return item
