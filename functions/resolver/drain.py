"""The acknowledgment queue's consumer: ``functions.resolver.drain.lambda_handler``.

In AWS a Lambda of the resolver's own asset, the SQS queue's event source (batches of up to
10, ``ReportBatchItemFailures``): each record is delivered by :class:`Delivery`; a record whose
Archive did not confirm is reported failed, SQS makes it visible again after the visibility
timeout, and after 5 receives moves it to the dead-letter queue, which alarms
(infra/operations.py). Locally :class:`LocalDrainer` receives from a :class:`LocalQueue` and
calls the same :func:`drain` with SQS-shaped events: the same code path, batch for batch.
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from functions.resolver.acknowledgments import Delivery
from functions.resolver.queue import BATCH, LocalQueue, Message

logger = Logger(service="resolver", child=True)

IDLE_SECONDS = 1.0  # a local drainer looks for messages from other processes this often


def drain(event: dict[str, Any], delivery: Delivery) -> dict[str, Any]:
    """Deliver every record of an SQS event: ``{"batchItemFailures": [...]}`` for the rest."""
    # Every record failing is an answer too (each retried), not an exception for the batch.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord) -> None:
        delivery.deliver(record.body)

    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor
    )
    return dict(response)


def sqs_event(messages: list[Message]) -> dict[str, Any]:
    """The event SQS would give the drain Lambda for ``messages``."""
    return {
        "Records": [
            {
                "messageId": m.id,
                "receiptHandle": m.receipt,
                "body": m.body,
                "attributes": {"ApproximateReceiveCount": str(m.receives)},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
            }
            for m in messages
        ]
    }


class LocalDrainer:
    """Drains a :class:`LocalQueue` in a daemon thread (``ibi local``; never in AWS)."""

    def __init__(self, queue: LocalQueue, delivery: Delivery) -> None:
        self.queue = queue
        self.delivery = delivery
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        queue.on_send = self.start

    def drain_once(self) -> int:
        """One batch, as SQS would hand it to the Lambda: how many messages it held."""
        messages = self.queue.receive(BATCH)
        if not messages:
            return 0
        failed = {
            f["itemIdentifier"]
            for f in drain(sqs_event(messages), self.delivery)["batchItemFailures"]
        }
        for message in messages:
            if message.id not in failed:
                self.queue.delete(message.receipt)
        return len(messages)

    def start(self) -> None:
        """Start the thread (once), or wake it: a message was just sent."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ibi-acks", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            try:
                if self.drain_once():
                    continue
            except Exception:
                logger.exception("local acknowledgment drain failed")
            self._wake.wait(IDLE_SECONDS)
            self._wake.clear()


_delivery: list[Delivery] = []


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if not _delivery:
        _delivery.append(delivery_from_environment())
    return drain(event, _delivery[0])


def delivery_from_environment() -> Delivery:
    """The drain's own runtime: the registry (read only), the transport. No pepper."""
    from functions.resolver.directory import ArchiveDirectory
    from functions.resolver.network import AddressPolicy, ArchiveTransport
    from functions.resolver.registry import DynamoRegistry
    from functions.resolver.settings import DrainSettings
    from ibi.aws import aws_client

    settings = DrainSettings.from_environment()
    registry = DynamoRegistry(aws_client("dynamodb"), settings.table)
    transport = ArchiveTransport(
        AddressPolicy(settings.allow_networks), max_answer_bytes=settings.max_answer_bytes
    )
    return Delivery(transport, ArchiveDirectory(registry), timeout=settings.archive_timeout)
