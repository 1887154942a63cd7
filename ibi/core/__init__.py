"""The IBI rules: pure functions, no AWS, no I/O (spec/IBI.md §1 and §7)."""

from ibi.core.dates import format_date, iso_date, parse_date
from ibi.core.distributor import Granularity, TemporalDistributor, next_date_for_suffix
from ibi.core.errors import InvalidGranularity, InvalidIBI, InvalidInput
from ibi.core.labels import (
    IBI,
    Label,
    ibip_prefix,
    ibip_suffix,
    parse_label,
    rep_prefix,
    rep_suffix,
    same_ibi,
)

__all__ = [
    "IBI",
    "Granularity",
    "InvalidGranularity",
    "InvalidIBI",
    "InvalidInput",
    "Label",
    "TemporalDistributor",
    "format_date",
    "ibip_prefix",
    "ibip_suffix",
    "iso_date",
    "next_date_for_suffix",
    "parse_date",
    "parse_label",
    "rep_prefix",
    "rep_suffix",
    "same_ibi",
]
