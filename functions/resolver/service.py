"""The resolver's own service (spec §4): registration, switching Archives on and off.

Registration keys are kept only as an HMAC-SHA256 under a secret pepper and compared in
constant time; a wrong key and an unknown Archive get the same answer; repeated failures for
an IBI are throttled. One Archive can never switch another: a key opens only its own record.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from functions.resolver.network import ArchiveTransport, Endpoint, UnsafeAddress
from functions.resolver.registry import DynamoRegistry, RegisteredArchive
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, encode_value

_KEY = re.compile(r"[0-9]{10,}(?:-[0-9]{10,})?")  # Table 5.1
INCLUSION_PAIRS = (
    "servicesubject",
    "archiveaddress",
    "archiveserviceibi",
    "archiveip",
    "archiveprotocol",
    "archiveplatformversion",
    "archiveadmemailaddress",
    "registrationkey",
)


def check_registration_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise InvalidInput("registrationkey", "a key is 10+ digits, optionally '-' and 10+ digits")
    return key


def key_hash(pepper: bytes, key: str) -> str:
    return hmac.new(pepper, key.encode("ascii"), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class SwitchAnswer:
    status: int
    pairs: PairList
    retry_after: int | None = None


class RegistrationService:
    def __init__(
        self,
        registry: DynamoRegistry,
        transport: ArchiveTransport,
        *,
        pepper: bytes,
        clock: Callable[[], Decimal],
        confirmation_timeout: float,
        failure_limit: int = 5,
        failure_window: int = 900,
    ) -> None:
        self.registry = registry
        self.transport = transport
        self._pepper = pepper
        self._clock = clock
        self._timeout = confirmation_timeout
        self._failure_limit = failure_limit
        self._failure_window = failure_window

    def register(self, archive_service_ibi: str, registration_key: str) -> RegisteredArchive:
        """The administrative registration (§7.6): the key is stored only as its HMAC."""
        label = parse_label(archive_service_ibi)
        check_registration_key(registration_key)
        forms: dict[str, str] = {label.form: label.label}
        self.registry.register(label.label, forms, key_hash(self._pepper, registration_key))
        registered = self.registry.get(label.label)
        assert registered is not None
        return registered

    def switch(self, query: Mapping[str, str]) -> SwitchAnswer:
        """``inclusionRequest`` / ``exclusionRequest`` with the eight pairs of Table 5.2."""
        subject = query.get("servicesubject")
        missing = [name for name in INCLUSION_PAIRS if not query.get(name)]
        if missing:
            return _error(400, f"missing pair(s): {' '.join(missing)}")
        try:
            label = parse_label(query["archiveserviceibi"]).label
            endpoint = Endpoint.parse(query["archiveaddress"], query["archiveprotocol"])
            check_registration_key(query["registrationkey"])
        except InvalidInput as error:
            return _error(400, str(error))
        now = int(self._clock())
        if self.registry.blocked_until(label) > now:
            return SwitchAnswer(429, _refused(), retry_after=self._failure_window)
        registered = self.registry.get(label)
        presented = key_hash(self._pepper, query["registrationkey"])
        expected = registered.key_hash if registered else key_hash(self._pepper, "0" * 10)
        if not hmac.compare_digest(presented, expected) or registered is None:
            self.registry.note_failure(
                label, now=now, limit=self._failure_limit, window=self._failure_window
            )
            return SwitchAnswer(403, _refused())
        at = iso_date(Decimal(now))
        if subject == "exclusionRequest":
            self.registry.set_included(label, included=False, at=at)
            return SwitchAnswer(200, PairList([("status.archive", "excluded")]))
        try:
            self.transport.policy.vet(endpoint)
        except UnsafeAddress as error:
            return _error(400, f"archiveaddress: {error}")
        confirmed = self._confirm(endpoint, label)
        self.registry.set_included(
            label,
            included=True,
            at=at,
            address=query["archiveaddress"],
            protocol=query["archiveprotocol"].upper(),
            ip=query["archiveip"],
            platform_version=query["archiveplatformversion"],
            admin_email=query["archiveadmemailaddress"],
            confirmed=confirmed,
        )
        return SwitchAnswer(
            200,
            PairList(
                [
                    ("status.archive", "included"),
                    ("status.confirmation", "successful" if confirmed else "unsuccessful"),
                ]
            ),
        )

    def _confirm(self, endpoint: Endpoint, label: str) -> bool:
        """Call the Archive back: it must answer the constant ``confirmation yes``."""
        try:
            answer = self.transport.get(
                endpoint,
                label,
                [("servicesubject", "inclusionConfirmationRequest")],
                timeout=self._timeout,
            )
        except Exception:
            return False
        return answer.word("confirmation") == "yes" and len(answer) == 1


def _refused() -> PairList:
    return PairList([("status.archive", "refused")])


def _error(status: int, message: str) -> SwitchAnswer:
    return SwitchAnswer(
        status, PairList([("error", tuple(encode_value(word) for word in message.split()))])
    )
