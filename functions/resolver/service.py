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
from dataclasses import dataclass, field
from decimal import Decimal

from functions.resolver.network import Endpoint, Request, Transport, UnsafeAddress
from functions.resolver.registry import Contact, RegisteredArchive, Registry
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
SWITCH_SUBJECTS = frozenset({"inclusionRequest", "exclusionRequest"})


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


@dataclass(frozen=True, slots=True)
class _Switch:
    """A well-formed inclusion or exclusion request."""

    label: str
    endpoint: Endpoint
    query: Mapping[str, str]


@dataclass(kw_only=True)
class RegistrationService:
    """Registering Archives (administrator) and switching them on and off (the Archive)."""

    registry: Registry
    transport: Transport
    pepper: bytes = field(repr=False)
    clock: Callable[[], Decimal]
    confirmation_timeout: float
    failure_limit: int = 5
    failure_window: int = 900
    on_change: Callable[[], None] = lambda: None  # the registry changed (or may have)

    def register(self, archive_service_ibi: str, registration_key: str) -> RegisteredArchive:
        """The administrative registration (§7.6): the key is stored only as its HMAC."""
        label = parse_label(archive_service_ibi)
        check_registration_key(registration_key)
        forms: dict[str, str] = {label.form: label.label}
        self.registry.register(label.label, forms, key_hash(self.pepper, registration_key))
        registered = self.registry.get(label.label)
        assert registered is not None
        self.on_change()
        return registered

    def archives(self) -> list[RegisteredArchive]:
        """Every registered Archive, included or not."""
        return self.registry.archives()

    def switch(self, query: Mapping[str, str]) -> SwitchAnswer:
        """``inclusionRequest`` / ``exclusionRequest`` with the eight pairs of Table 5.2."""
        try:
            return self._switch(query)
        finally:
            self.on_change()

    def _switch(self, query: Mapping[str, str]) -> SwitchAnswer:
        if query.get("servicesubject") not in SWITCH_SUBJECTS:
            return _error(400, "servicesubject must be inclusionRequest or exclusionRequest")
        request = _parse_switch(query)
        if isinstance(request, SwitchAnswer):
            return request
        now = int(self.clock())
        refused = self._check_key(request.label, query["registrationkey"], now)
        if refused is not None:
            return refused
        at = iso_date(Decimal(now))
        if query["servicesubject"] == "exclusionRequest":
            self.registry.exclude(request.label, at=at)
            return SwitchAnswer(200, PairList([("status.archive", "excluded")]))
        return self._include(request, at)

    def _check_key(self, label: str, key: str, now: int) -> SwitchAnswer | None:
        """None if ``key`` opens ``label``'s record; else the refusal (and the failure counted).

        The presented key is always compared, in constant time, with a hash: the stored one,
        or a dummy's when the Archive is unknown, so both take the same time and answer.
        """
        if self.registry.blocked_until(label) > now:
            return SwitchAnswer(429, _refused(), retry_after=self.failure_window)
        registered = self.registry.get(label)
        presented = key_hash(self.pepper, key)
        expected = registered.key_hash if registered else key_hash(self.pepper, "0" * 10)
        if hmac.compare_digest(presented, expected) and registered is not None:
            return None
        self.registry.note_failure(
            label, now=now, limit=self.failure_limit, window=self.failure_window
        )
        return SwitchAnswer(403, _refused())

    def _include(self, request: _Switch, at: str) -> SwitchAnswer:
        try:
            self.transport.vet(request.endpoint)
        except UnsafeAddress as error:
            return _error(400, f"archiveaddress: {error}")
        confirmed = self._confirm(request.endpoint, request.label)
        query = request.query
        contact = Contact(
            address=query["archiveaddress"],
            protocol=query["archiveprotocol"].upper(),
            ip=query["archiveip"],
            platform_version=query["archiveplatformversion"],
            admin_email=query["archiveadmemailaddress"],
        )
        self.registry.include(request.label, contact, at=at, confirmed=confirmed)
        confirmation = "successful" if confirmed else "unsuccessful"
        return SwitchAnswer(
            200,
            PairList([("status.archive", "included"), ("status.confirmation", confirmation)]),
        )

    def _confirm(self, endpoint: Endpoint, label: str) -> bool:
        """Call the Archive back: it must answer the constant ``confirmation yes``."""
        try:
            request = Request(endpoint, label, [("servicesubject", "inclusionConfirmationRequest")])
            answer = self.transport.send(request, timeout=self.confirmation_timeout)
        except Exception:
            return False
        return answer.word("confirmation") == "yes" and len(answer) == 1


def _parse_switch(query: Mapping[str, str]) -> _Switch | SwitchAnswer:
    """The request's parts, or the 400 that says what is missing or malformed."""
    missing = [name for name in INCLUSION_PAIRS if not query.get(name)]
    if missing:
        return _error(400, f"missing pair(s): {' '.join(missing)}")
    try:
        label = parse_label(query["archiveserviceibi"]).label
        endpoint = Endpoint.parse(query["archiveaddress"], query["archiveprotocol"])
        check_registration_key(query["registrationkey"])
    except InvalidInput as error:
        return _error(400, str(error))
    return _Switch(label, endpoint, query)


def _refused() -> PairList:
    return PairList([("status.archive", "refused")])


def _error(status: int, message: str) -> SwitchAnswer:
    return SwitchAnswer(
        status, PairList([("error", tuple(encode_value(word) for word in message.split()))])
    )
