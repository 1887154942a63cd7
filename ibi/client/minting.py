"""The minting API's client: mint, the mint record, its verification, the subsystems."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ibi.client.api import ApiClient


class MintingClient(ApiClient):
    # 409: a request with the same Idempotency-Key is still being served: retry it.
    retry_statuses = frozenset({408, 409, 429, 502, 503, 504})
    service_name = "the minting service"

    def mint(
        self, *, subsystem: str | None = None, count: int = 1, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"count": count}
        if subsystem is not None:
            body["subsystem"] = subsystem
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = self.ok(self.request("POST", "/mint", body, headers), "POST /mint")
        return answer

    def records(
        self,
        *,
        subsystem: str | None = None,
        after: str | None = None,
        limit: int = 50,
        newest_first: bool = False,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every mint record (from ``since`` to ``until``: epoch or ISO 8601), page after
        page, oldest first or newest first."""
        query: dict[str, str] = {"limit": str(limit)}
        for name, value in (("subsystem", subsystem), ("since", since), ("until", until)):
            if value:
                query[name] = value
        if newest_first:
            query["order"] = "desc"
        while True:
            if after:
                query["after"] = after
            page = self.call("GET", "/mints", None, **query)
            yield from page["records"]
            after = page.get("next")
            if not after:
                return

    def record_of(self, ibi: str) -> dict[str, Any]:
        """The record that issued ``ibi`` (either form); :class:`ApiError` 404 if none did."""
        answer: dict[str, Any] = self.call("GET", "/mints", None, ibi=ibi)
        return dict(answer["records"][0])

    def verify(self, *, subsystem: str | None = None) -> dict[str, Any]:
        """The verification of a subsystem's record (``GET /mints/verify``)."""
        query = {"subsystem": subsystem} if subsystem else {}
        answer: dict[str, Any] = self.call("GET", "/mints/verify", None, **query)
        return answer

    def subsystems(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/subsystems")
        return answer
