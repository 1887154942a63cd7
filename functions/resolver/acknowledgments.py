"""Acknowledgments (spec Table 6.11): telling the Archive that gave a URL that it was used.

Two halves, either side of a durable queue (``queue.py``). :class:`Acknowledgments` runs in the
resolver's request: it builds the message from the answer that gave the URL and puts it on the
queue *before* the handler returns (one SendMessage, a few milliseconds), so a Lambda frozen
after it answers loses nothing. :class:`Delivery` runs in the drain (``drain.py``): it sends the
message to the Archive, still registered, through the same transport and address policy as
the fan-out, and raises when the Archive does not confirm, so that the queue retries it.
The reader's User-Agent goes only in the acknowledgment, to the Archive the reader was sent to
(``clientinformation.useragent``, issue 35); a robot's or a machine's resolution (the
COUNTER-Robots list) is acknowledged to nobody: it is not usage.
"""

from __future__ import annotations

import json
from typing import Any

import counter_robots
from aws_lambda_powertools import Logger

from functions.resolver.directory import ArchiveDirectory
from functions.resolver.network import Endpoint, Request, Transport
from functions.resolver.queue import AckQueue
from functions.resolver.resolution import Found
from ibi.core.pairlist import format_pair_list

logger = Logger(service="resolver", child=True)

MAX_USER_AGENT = 512  # characters of the reader's User-Agent passed on (as the Archive reads)


class AcknowledgmentFailed(RuntimeError):
    """The Archive did not confirm the acknowledgment: the queue delivers it again."""


def acknowledgment_pairs(
    found: Found, persistent_url: str, client_ips: str, user_agent: str | None = None
) -> list[tuple[str, str]]:
    """The ``acknowledgment`` message's pairs (Table 6.11) for the Archive that gave the URL,
    with the reader's User-Agent when it is known (``None``: not known)."""
    pairs = found.answer.pairs
    assert pairs is not None
    ibi_words = pairs.words(found.relation.pair_name("ibi")) or pairs.words("ibi")
    said = (
        [] if user_agent is None else [("clientinformation.useragent", user_agent[:MAX_USER_AGENT])]
    )
    return [
        ("servicesubject", "acknowledgment"),
        ("clientinformation.ipaddress", client_ips),
        *said,
        ("contenttype", pairs.word(found.relation.pair_name("contenttype")) or "Data"),
        ("ibi", " ".join(ibi_words)),
        ("state", pairs.word(found.relation.pair_name("state")) or ""),
        ("url", found.url),
        ("url.persistent", persistent_url),
        ("urlkey", pairs.word("urlkey") or ""),
    ]


class Acknowledgments:
    """Puts each acknowledgment on the queue, in the request; never raises into it."""

    def __init__(self, queue: AckQueue, directory: ArchiveDirectory) -> None:
        self.queue = queue
        self.directory = directory

    def send(
        self,
        found: Found,
        persistent_url: str,
        client_ips: str,
        correlation_id: str,
        user_agent: str | None = None,
    ) -> None:
        """Queue the acknowledgment of ``found`` (when its Archive gave a urlkey), unless the
        reader is a robot or a machine."""
        if user_agent is not None and counter_robots.is_robot_or_machine(
            user_agent[:MAX_USER_AGENT]
        ):
            return
        archive = self.directory.find(found.answer.archive)
        if archive is None or not found.answer.pairs or not found.answer.pairs.word("urlkey"):
            return
        body = json.dumps(
            {
                "archive": archive.service_ibi,
                "ibi": found.ibi,
                "pairs": acknowledgment_pairs(found, persistent_url, client_ips, user_agent),
                "correlation_id": correlation_id,
            },
            separators=(",", ":"),
        )
        try:
            self.queue.send(body)
        except Exception as error:  # the redirect is answered all the same
            logger.warning(
                "acknowledgment not queued",
                extra={"archive": archive.service_ibi, "problem": str(error)[:200]},
            )


class Delivery:
    """Sends one queued acknowledgment to its Archive; raises when it must be retried."""

    def __init__(self, transport: Transport, directory: ArchiveDirectory, *, timeout: float):
        self.transport = transport
        self.directory = directory
        self.timeout = timeout

    def deliver(self, body: str) -> None:
        message: dict[str, Any] = json.loads(body)
        service_ibi, ibi = str(message["archive"]), str(message["ibi"])
        pairs = [(str(name), str(value)) for name, value in message["pairs"]]
        archive = self.directory.find(service_ibi)
        if archive is None or not archive.address:  # unregistered since: nobody to tell
            logger.info("acknowledgment dropped", extra={"archive": service_ibi, "ibi": ibi})
            return
        try:
            endpoint = Endpoint.parse(archive.address, archive.protocol)
            request = Request(endpoint, archive.service_ibi, pairs, str(message["correlation_id"]))
            answer = self.transport.send(request, timeout=self.timeout)
        except Exception as error:
            raise AcknowledgmentFailed(f"{service_ibi}: {str(error)[:200]}") from error
        if answer.words("notice") != ("acknowledgment", "received"):
            raise AcknowledgmentFailed(f"{service_ibi} answered {format_pair_list(answer)[:100]!r}")
