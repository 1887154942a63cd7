"""The fifteen elements of Dublin Core (DCMES 1.1, ISO 15836), in their usual order.

Named once: what an Archive takes in an item's ``dc`` and shows (``functions/archive/model.py``,
its pages and oai_dc records) and what a citation is made from (``ibi/core/citation.py``).
"""

from __future__ import annotations

DC_ELEMENTS = (
    "title",
    "creator",
    "subject",
    "description",
    "publisher",
    "contributor",
    "date",
    "type",
    "format",
    "identifier",
    "source",
    "language",
    "relation",
    "coverage",
    "rights",
)
