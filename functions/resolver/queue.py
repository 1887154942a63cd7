"""The acknowledgment queue: where the resolver puts an acknowledgment before it answers.

Two implementations of one small port. :class:`SqsQueue` (AWS) sends one SQS message per
acknowledgment, synchronously, before the handler returns; the drain function (``drain.py``)
is the queue's event source. :class:`LocalQueue` (``ibi local`` and tests) keeps the same
semantics in a directory: one file per message, claimed by an atomic rename that makes it
invisible for ``visibility`` seconds and counts the receive; a message received
``max_receives`` times without being deleted goes to ``dead/`` (SQS's redrive policy).
A message is written whole (a temporary file renamed) but not forced to disk: it survives the
resolver's process dying and ``ibi local`` restarting, not the machine losing power — an fsync
on every resolution cost more CPU than the rest of the queue together (issue 14, bench/history.md).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

BATCH = 10  # the most SQS gives the drain at once (SendMessageBatch, event source batch size)
# A failed delivery is retried after this: 6 times the drain's timeout (40 s), Lambda's advice
# for an SQS event source (infra/resolver.py).
VISIBILITY_SECONDS = 240
MAX_RECEIVES = 3  # then the dead-letter queue: ~10 minutes of an Archive down, the time its
# urlkey lives (docs/decisions.md); a later delivery would count nothing


class AckQueue(Protocol):
    def send(self, body: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Message:
    id: str
    receipt: str
    body: str
    receives: int


class SqsQueue:
    """An SQS queue; the client is made on the first send (none at import or build)."""

    def __init__(self, client: Callable[[], Any], url: str) -> None:
        self._client = client
        self._made: Any = None
        self.url = url

    def send(self, body: str) -> None:
        if self._made is None:
            self._made = self._client()
        self._made.send_message(QueueUrl=self.url, MessageBody=body)


class LocalQueue:
    """A directory of message files: ``messages/<visible-at-ms>-<receives>-<id>.json``."""

    def __init__(
        self,
        directory: Path,
        *,
        visibility: float = VISIBILITY_SECONDS,
        max_receives: int = MAX_RECEIVES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.visibility = visibility
        self.max_receives = max_receives
        self.clock = clock
        self.on_send: Callable[[], None] | None = None  # wakes a drainer (drain.py)
        for sub in ("messages", "dead"):
            (directory / sub).mkdir(parents=True, exist_ok=True, mode=0o700)

    def send(self, body: str) -> None:
        name = f"{self._ms(self.clock()):016d}-0-{uuid.uuid4().hex}.json"
        temporary = self.directory / f".{name}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(body)  # no fsync: on the request path (issue 14), see the module's doc
        os.replace(temporary, self.directory / "messages" / name)  # whole, or not there
        if self.on_send is not None:
            self.on_send()

    def receive(self, limit: int = BATCH) -> list[Message]:
        """Up to ``limit`` visible messages, each now invisible for ``visibility`` seconds."""
        now = self.clock()
        received: list[Message] = []
        for path in sorted((self.directory / "messages").glob("*.json")):
            if len(received) == limit:
                break
            try:
                visible_at, receives, message_id = path.stem.split("-", 2)
                hidden_until, count = int(visible_at), int(receives) + 1
            except ValueError:  # not one of ours: left alone
                continue
            if hidden_until > self._ms(now):
                continue
            if count > self.max_receives:
                target = self.directory / "dead" / f"{message_id}.json"
            else:
                hidden = self._ms(now + self.visibility)
                target = path.with_name(f"{hidden:016d}-{count}-{message_id}.json")
            try:
                path.rename(target)  # atomic: of two drainers, one claims it
            except FileNotFoundError:
                continue
            if count <= self.max_receives:
                received.append(Message(message_id, target.name, target.read_text(), count))
        return received

    def delete(self, receipt: str) -> None:
        (self.directory / "messages" / receipt).unlink(missing_ok=True)

    def waiting(self) -> int:
        return sum(1 for _ in (self.directory / "messages").glob("*.json"))

    def dead(self) -> list[str]:
        return [p.read_text() for p in sorted((self.directory / "dead").glob("*.json"))]

    @staticmethod
    def _ms(seconds: float) -> int:
        return int(seconds * 1000)
