"""Fake Archives for the resolution benchmark, in a process of their own.

Real Archives run on other machines; here they run in one separate process (asyncio, HTTP/1.1
with keep-alive, as API Gateway serves), so that the resolver's measured CPU is its own and
the Archives do not share its interpreter. Each answers a urlRequest after a fixed delay (or,
every ``slow_every``-th one, after ``slow_delay``: a cold start; or never, when ``silent``) and
counts the urlRequests it received (in shared memory, read by the benchmark).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ibi.core.labels import parse_label
from ibi.core.pairlist import parse_query


@dataclass(frozen=True)
class FakeSpec:
    service_ibi: str
    delay: float
    answers: dict[str, str]
    silent: bool = False  # takes urlRequests and never answers them (a black hole)
    slow_every: int = 0  # every n-th urlRequest is answered after ``slow_delay`` instead
    slow_delay: float = 0.0


def _serve(specs: Sequence[FakeSpec], counts: Any, ready: Connection) -> None:
    async def main() -> None:
        ports = []
        serving: set[asyncio.Task[Any]] = set()  # kept referenced: never collected while open
        for index, spec in enumerate(specs):

            async def handle(
                reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter,
                index: int = index,
                spec: FakeSpec = spec,
            ) -> None:
                task = asyncio.current_task()
                assert task is not None
                serving.add(task)
                try:
                    while True:
                        head = await reader.readuntil(b"\r\n\r\n")
                        line = head.split(b" ", 2)
                        if len(line) < 3:  # not a request line (a stray connection): hang up
                            return
                        target = line[1].decode()
                        query = dict(parse_query(target.partition("?")[2]))
                        subject = query.get("servicesubject")
                        body = b""
                        if subject == "inclusionConfirmationRequest":
                            body = b"confirmation yes\r\n"
                        elif subject == "acknowledgment":
                            body = b"notice {acknowledgment received}\r\n"
                        elif subject == "urlRequest":
                            with counts.get_lock():
                                counts[index] += 1
                                seen = counts[index]
                            if spec.silent:  # until the resolver hangs up
                                await reader.read()
                                return
                            slow = spec.slow_every and seen % spec.slow_every == 0
                            await asyncio.sleep(spec.slow_delay if slow else spec.delay)
                            label = parse_label(query.get("parsedibiurl.ibi", "")).label
                            body = spec.answers.get(label, "").encode()
                        writer.write(
                            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                        )
                        await writer.drain()
                except (asyncio.IncompleteReadError, ConnectionError):
                    pass
                finally:
                    writer.close()
                    serving.discard(task)

            server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
            ports.append(server.sockets[0].getsockname()[1])
        ready.send(ports)
        await asyncio.Event().wait()

    asyncio.run(main())


class FakeArchives:
    """``with FakeArchives(specs) as archives``: ``archives.addresses``, ``archives.counted()``."""

    def __init__(self, specs: Sequence[FakeSpec]) -> None:
        self.specs = list(specs)
        context = multiprocessing.get_context("spawn")
        self._counts = context.Array("i", len(self.specs))
        receiving, sending = context.Pipe(duplex=False)
        self._ready = receiving
        self._process = context.Process(
            target=_serve, args=(self.specs, self._counts, sending), daemon=True
        )
        self.addresses: list[str] = []

    def __enter__(self) -> FakeArchives:
        self._process.start()
        if not self._ready.poll(30):
            raise RuntimeError("the fake Archives did not start")
        self.addresses = [f"127.0.0.1:{port}" for port in self._ready.recv()]
        return self

    def __exit__(self, *_: object) -> None:
        self._process.terminate()
        self._process.join(5)

    def counted(self) -> int:
        """urlRequests received so far, by all of them."""
        with self._counts.get_lock():
            return sum(int(count) for count in self._counts[:])
