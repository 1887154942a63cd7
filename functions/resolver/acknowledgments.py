"""Acknowledgments (spec Table 6.11): telling the Archive that gave a URL that it was used.

Built from the answer that gave the URL, and sent in the background, after the redirect is
answered: an acknowledgment never delays a resolution, and its failure is only logged.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from aws_lambda_powertools import Logger

from functions.resolver.directory import ArchiveDirectory
from functions.resolver.network import Endpoint, Request, Transport
from functions.resolver.registry import RegisteredArchive
from functions.resolver.resolution import Found
from ibi.core.pairlist import format_pair_list

logger = Logger(service="resolver", child=True)

WORKERS = 4


def acknowledgment_pairs(
    found: Found, persistent_url: str, client_ips: str
) -> list[tuple[str, str]]:
    """The ``acknowledgment`` message's pairs (Table 6.11) for the Archive that gave the URL."""
    pairs = found.answer.pairs
    assert pairs is not None
    ibi_words = pairs.words(found.relation.pair_name("ibi")) or pairs.words("ibi")
    return [
        ("servicesubject", "acknowledgment"),
        ("clientinformation.ipaddress", client_ips),
        ("contenttype", pairs.word(found.relation.pair_name("contenttype")) or "Data"),
        ("ibi", " ".join(ibi_words)),
        ("state", pairs.word(found.relation.pair_name("state")) or ""),
        ("url", found.url),
        ("url.persistent", persistent_url),
        ("urlkey", pairs.word("urlkey") or ""),
    ]


class Acknowledgments:
    """Sends acknowledgments on a small pool of threads of its own."""

    def __init__(
        self,
        transport: Transport,
        directory: ArchiveDirectory,
        *,
        timeout: float,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.transport = transport
        self.directory = directory
        self.timeout = timeout
        self.pool = pool or ThreadPoolExecutor(max_workers=WORKERS)

    def send(self, found: Found, persistent_url: str, client_ips: str, correlation_id: str) -> None:
        """Acknowledge ``found`` to its Archive (when it gave a urlkey), in the background."""
        archive = self.directory.find(found.answer.archive)
        if archive is None or not found.answer.pairs or not found.answer.pairs.word("urlkey"):
            return
        pairs = acknowledgment_pairs(found, persistent_url, client_ips)
        self.pool.submit(self._deliver, archive, found.ibi, pairs, correlation_id)

    def _deliver(
        self,
        archive: RegisteredArchive,
        ibi: str,
        pairs: list[tuple[str, str]],
        correlation_id: str,
    ) -> None:
        try:
            endpoint = Endpoint.parse(archive.address or "", archive.protocol)
            request = Request(endpoint, archive.service_ibi, pairs, correlation_id)
            answer = self.transport.send(request, timeout=self.timeout)
            if answer.words("notice") != ("acknowledgment", "received"):
                raise ValueError(f"answered {format_pair_list(answer)[:100]!r}")
        except Exception as error:
            logger.warning(
                "acknowledgment failed",
                extra={"archive": archive.service_ibi, "ibi": ibi, "problem": str(error)[:200]},
            )
