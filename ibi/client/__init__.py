"""HTTP clients of the ibi APIs, signing with SigV4 where that applies.

One module a reason to change: :mod:`.transport` (the one HTTP path and its error),
:mod:`.signing` (SigV4), :mod:`.api` (a JSON API of ibi: retries, errors, which service answers),
and a client per service: :mod:`.minting`, :mod:`.archive` (the deposit API and its uploads),
:mod:`.resolver` (its administration, and the inclusion/exclusion request of spec §4).
"""

from __future__ import annotations

from ibi.client.api import SERVICES, Answer, ApiClient, RetryPolicy
from ibi.client.archive import (
    LINK_CHECK_IBIS,
    ArchiveClient,
    Content,
    LocalFile,
    Upload,
    UploadProgress,
    digest,
)
from ibi.client.minting import MintingClient
from ibi.client.resolver import (
    ResolverClient,
    SwitchOptions,
    send_switch,
    switch_archive,
    switch_pairs,
)
from ibi.client.signing import SigV4Signer, aws_region_of
from ibi.client.transport import ApiError, Raw, Transport, http_send, page_text, pair_list_text

__all__ = [
    "LINK_CHECK_IBIS",
    "SERVICES",
    "Answer",
    "ApiClient",
    "ApiError",
    "ArchiveClient",
    "Content",
    "LocalFile",
    "MintingClient",
    "Raw",
    "ResolverClient",
    "RetryPolicy",
    "SigV4Signer",
    "SwitchOptions",
    "Transport",
    "Upload",
    "UploadProgress",
    "aws_region_of",
    "digest",
    "http_send",
    "page_text",
    "pair_list_text",
    "send_switch",
    "switch_archive",
    "switch_pairs",
]
