"""The transfer record: where an original went, said by the Archive it left (issue 24).

An Archive that released an original in a transfer keeps a ``Copy`` or a tombstone of it, and
adds to its ``urlRequest`` answer about that IBI (whatever the verb list)::

    transfer.archiveservice {rep R ibip P}    the receiving Archive's service IBI, its forms
    transfer.timestamp 2024-05-01T12:00:00Z   when the original was released here

The resolver trusts a claim of ``Original`` from the Archive that owns the IBI's prefix, or
from the Archive its transfer record names (and so on along a chain of records, each from an
Archive already trusted): docs/resolver.md, "Owners". An old resolver reads only the pairs
of spec §6 and ignores these; an old Archive sends none, and is asked as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from ibi.core.pairlist import PairList, label_of

SERVICE_PAIR = "transfer.archiveservice"
TIMESTAMP_PAIR = "transfer.timestamp"


def record_pairs(
    service: Mapping[str, str], timestamp: str
) -> list[tuple[str, str | tuple[str, ...]]]:
    """The record's pairs: the receiver's service IBI (its forms) and when it was released."""
    forms = tuple(
        word for form in ("rep", "ibip") if service.get(form) for word in (form, service[form])
    )
    return [(SERVICE_PAIR, forms), (TIMESTAMP_PAIR, timestamp)]


def moved_to(pairs: PairList) -> str | None:
    """The receiving Archive's service IBI a record names (its ibip form first), if any."""
    return label_of(pairs, SERVICE_PAIR)
