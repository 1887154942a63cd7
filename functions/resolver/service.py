"""The resolver's own service (spec §4): registration, switching Archives on and off.

Registration keys are kept only as an HMAC-SHA256 under a secret pepper and compared in
constant time; a wrong key and an unknown Archive get the same answer. One Archive can never
switch another: a key opens only its own record.

Guessing is throttled without letting a guesser lock the key holder out. Wrong keys for a
registered Archive are counted per (source, Archive) — the source is the connection's IPv4
address, or its IPv6 /64 — and per Archive: after ``failure_limit`` wrong keys in a window of
``failure_window`` seconds, that source gets ``429`` for that Archive, whatever the key, until
the window ends, and every other source is served as before. Past ``guess_cap`` wrong keys
for one Archive in a window, from all sources together, every wrong key gets ``429`` (and
blocks its source at once), the answer says so for the alarm, and the right key from any
source not blocked is still accepted. Nothing at all is written for an IBI that is not
registered, and a refused request changes nothing, so it never makes anyone re-read the
registry.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from functions.resolver.network import Endpoint, Request, Transport, UnsafeAddress
from functions.resolver.registry import Contact, RegisteredArchive, Registry
from functions.resolver.throttle import Throttle
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
FAILURE_LIMIT = 5  # wrong keys from one source for one Archive, per window
FAILURE_WINDOW = 900  # seconds: 15 minutes
GUESS_CAP = 100  # wrong keys for one Archive from all sources together, per window


def check_registration_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise InvalidInput("registrationkey", "a key is 10+ digits, optionally '-' and 10+ digits")
    return key


def key_hash(pepper: bytes, key: str) -> str:
    return hmac.new(pepper, key.encode("ascii"), hashlib.sha256).hexdigest()


def source_of(ip: str) -> str:
    """Who is counted for a wrong key: an IPv4 address, or an IPv6 address's /64 (one host
    usually holds a whole /64); an IPv4-mapped IPv6 address is its IPv4 address."""
    try:
        address = ipaddress.ip_address(ip.strip())
    except ValueError:
        return "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(frozen=True, slots=True)
class SwitchAnswer:
    status: int
    pairs: PairList
    retry_after: int | None = None
    over_cap: bool = False  # a wrong key past the Archive's cap: someone is guessing


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
    throttle: Throttle
    transport: Transport
    pepper: bytes = field(repr=False)
    clock: Callable[[], Decimal]
    confirmation_timeout: float
    failure_limit: int = FAILURE_LIMIT
    failure_window: int = FAILURE_WINDOW
    guess_cap: int = GUESS_CAP
    on_change: Callable[[], None] = lambda: None  # the registry changed: never on a refusal

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

    def switch(self, query: Mapping[str, str], *, client_ip: str) -> SwitchAnswer:
        """``inclusionRequest`` / ``exclusionRequest`` with the eight pairs of Table 5.2,
        from ``client_ip`` (the connection's address; counted as :func:`source_of` says)."""
        answer = self._switch(query, source_of(client_ip))
        if answer.status == 200:  # included or excluded: the registry changed
            self.on_change()
        return answer

    def _switch(self, query: Mapping[str, str], source: str) -> SwitchAnswer:
        if query.get("servicesubject") not in SWITCH_SUBJECTS:
            return _error(400, "servicesubject must be inclusionRequest or exclusionRequest")
        request = _parse_switch(query)
        if isinstance(request, SwitchAnswer):
            return request
        now = int(self.clock())
        refused = self._check_key(request.label, query["registrationkey"], source, now)
        if refused is not None:
            return refused
        at = iso_date(Decimal(now))
        if query["servicesubject"] == "exclusionRequest":
            self.registry.exclude(request.label, at=at)
            return SwitchAnswer(200, PairList([("status.archive", "excluded")]))
        return self._include(request, at)

    def _check_key(self, label: str, key: str, source: str, now: int) -> SwitchAnswer | None:
        """None if ``key`` opens ``label``'s record and ``source`` is not blocked for it;
        else the refusal (and, for a registered Archive only, the wrong key counted).

        An unknown IBI costs one keyed read and is refused with the same ``403`` as a wrong
        key; nothing is read or written for its sender. (Whether an IBI is registered is no
        secret: ``/status`` lists every registered Archive.) The presented key is compared in
        constant time with the stored hash.
        """
        registered = self.registry.get(label)
        if registered is None:
            return SwitchAnswer(403, _refused())  # nothing recorded for an unknown IBI
        opens = hmac.compare_digest(key_hash(self.pepper, key), registered.key_hash)
        mine = self.throttle.tally(_source_counter(label, source), now=now)
        if mine.current(now) >= self.failure_limit:  # this source only, whatever the key
            return SwitchAnswer(429, _refused(), retry_after=max(1, mine.window_ends - now))
        if opens:
            return None
        return self._count_wrong_key(label, source, now)

    def _count_wrong_key(self, label: str, source: str, now: int) -> SwitchAnswer:
        """Count a wrong key for a registered Archive: for it, and for the source."""
        window = self.failure_window
        guesses = self.throttle.count_failure(_archive_counter(label), now=now, window=window)
        over_cap = guesses.failures > self.guess_cap
        weight = self.failure_limit if over_cap else 1  # past the cap: blocked at once
        counter = _source_counter(label, source)
        self.throttle.count_failure(counter, now=now, window=window, weight=weight)
        if over_cap:
            retry_after = max(1, guesses.window_ends - now)
            return SwitchAnswer(429, _refused(), retry_after=retry_after, over_cap=True)
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


def _source_counter(label: str, source: str) -> str:
    return f"source {label} {source}"


def _archive_counter(label: str) -> str:
    return f"archive {label}"


def _refused() -> PairList:
    return PairList([("status.archive", "refused")])


def _error(status: int, message: str) -> SwitchAnswer:
    return SwitchAnswer(
        status, PairList([("error", tuple(encode_value(word) for word in message.split()))])
    )
