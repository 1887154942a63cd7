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

Never locked out (issue 39): the throttle guards the public switch route only, where a key is all
a sender shows. The key holder's own paths never consult it — the administrator's
(:meth:`RegistrationService.administer`, ``POST /admin/switch``, IAM in AWS) and local mode's own
Archives (:meth:`RegistrationService.admit`) — so a stranger's wrong keys never lock them out; a
rotation (``administer(rotate=True)``) is all or nothing; :meth:`RegistrationService.deregister`
removes an Archive and frees its prefixes.

Owners (issue 24, ``owners.py``): a registered Archive owns the prefix of its service IBI
(unless another Archive's service IBI shares it), and any prefix the administrator registers
with it (:meth:`RegistrationService.register`, :meth:`RegistrationService.change_prefixes`); a
prefix another Archive owns is refused (:class:`~functions.resolver.registry.PrefixTaken`, 409).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from functions.resolver.errors import RegistryError
from functions.resolver.network import Endpoint, Request, Transport, UnsafeAddress
from functions.resolver.owners import own_prefixes, owned_by, owners
from functions.resolver.registry import Contact, PrefixTaken, RegisteredArchive, Registry
from functions.resolver.throttle import Throttle
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label, parse_prefix
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
MAX_PREFIXES = 32  # prefixes added or removed in one request


def check_registration_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise InvalidInput("registrationkey", "a key is 10+ digits, optionally '-' and 10+ digits")
    return key


def check_prefixes(prefixes: object) -> tuple[str, ...]:
    """A list of prefixes, each canonical (``ibi.core.labels.parse_prefix``)."""
    if not isinstance(prefixes, list | tuple) or not all(isinstance(p, str) for p in prefixes):
        raise InvalidInput("prefixes", "a list of prefixes (e.g. 8JMKD3MGP8W, sid.inpe.br/mtc-m18)")
    if len(prefixes) > MAX_PREFIXES:
        raise InvalidInput("prefixes", f"at most {MAX_PREFIXES} at a time")
    canonical: list[str] = []
    for prefix in prefixes:
        try:
            canonical.append(parse_prefix(prefix.strip()))
        except InvalidInput as error:
            raise InvalidInput("prefixes", f"{prefix[:80]!r}: {error.reason}") from error
    return tuple(dict.fromkeys(canonical))


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


class UnknownArchive(LookupError):
    """No Archive of that service IBI is registered."""

    def __init__(self, label: str) -> None:
        super().__init__(f"no Archive {label} is registered: register it first")
        self.label = label


@dataclass(frozen=True, slots=True)
class SwitchAnswer:
    status: int
    pairs: PairList
    retry_after: int | None = None
    over_cap: bool = False  # a wrong key past the Archive's cap: someone is guessing
    message: str = ""  # a refusal's reason, as the administration's JSON says it

    def fields(self) -> dict[str, str]:
        """The answer's pairs as the administration's JSON gives them: ``{name: value}``."""
        return {
            name: value if isinstance(value, str) else " ".join(value)
            for name, value in self.pairs
            if name != "error"
        }


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

    def register(
        self,
        archive_service_ibi: str,
        registration_key: str,
        prefixes: Sequence[str] = (),
        *,
        share_prefix: bool = False,
    ) -> RegisteredArchive:
        """The administrative registration (§7.6): the key is stored only as its HMAC.

        The Archive keeps the prefixes registered with it before, and gets ``prefixes``;
        :class:`PrefixTaken` (nothing changed) when another Archive owns one — also when a new
        Archive's own service IBI has a prefix another Archive owns: registering it would
        silently end that ownership (owners.py: a shared service prefix has no owner), and a
        prefix changes owner only by its owner's or the administrator's explicit act:
        ``share_prefix`` is that act.
        """
        label = parse_label(archive_service_ibi)
        check_registration_key(registration_key)
        forms: dict[str, str] = {label.form: label.label}
        wanted = check_prefixes(prefixes)
        self._refuse_owned(label.label, wanted)
        known = self.registry.get(label.label)
        if known is None and not share_prefix:  # it would end another's ownership (issue 34)
            self._refuse_owned(label.label, own_prefixes(forms))
        explicit = tuple(dict.fromkeys([*(known.prefixes if known else ()), *wanted]))
        self.registry.claim_prefixes(label.label, explicit)
        self.registry.register(label.label, forms, key_hash(self.pepper, registration_key))
        if explicit != (known.prefixes if known else ()):
            self.registry.set_prefixes(label.label, explicit)
        registered = self.registry.get(label.label)
        assert registered is not None
        self.on_change()
        return registered

    def change_prefixes(
        self, archive_service_ibi: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> RegisteredArchive:
        """Add and remove prefixes registered with an Archive (its key unchanged);
        :class:`PrefixTaken` (nothing changed) for one another Archive owns."""
        label = parse_label(archive_service_ibi).label
        added, removed = check_prefixes(add), check_prefixes(remove)
        known = self.registry.get(label)
        if known is None:
            raise UnknownArchive(label)
        self._refuse_owned(label, added)
        explicit = tuple(p for p in dict.fromkeys([*known.prefixes, *added]) if p not in removed)
        self.registry.claim_prefixes(label, explicit)
        self.registry.set_prefixes(label, explicit)
        self.registry.release_prefixes(label, [p for p in removed if p in known.prefixes])
        changed = self.registry.get(label)
        assert changed is not None
        self.on_change()
        return changed

    def _refuse_owned(self, label: str, wanted: Sequence[str]) -> None:
        """:class:`PrefixTaken` for a prefix another Archive owns (its service IBI's prefix;
        one registered with it is refused by the registry's claim)."""
        if not wanted:
            return
        owned = owners(self.registry.archives())
        for prefix in wanted:
            owner = owned.get(prefix)
            if owner is not None and owner.service_ibi != label:
                raise PrefixTaken(prefix, owner.service_ibi)

    def owned(self) -> dict[str, RegisteredArchive]:
        """Every owned prefix and its owner (``owners.py``), as the registry is now."""
        return owners(self.registry.archives())

    def public(
        self, archive: RegisteredArchive, owned: dict[str, RegisteredArchive]
    ) -> dict[str, Any]:
        """What an administrator may list of ``archive``, with the prefixes it owns."""
        return {**archive.public(), "owns": owned_by(archive.service_ibi, owned)}

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

    def admit(self, query: Mapping[str, str]) -> SwitchAnswer:
        """Register and include an Archive for the administrator who owns the registry (local
        mode starting its own Archives): the ``inclusionRequest`` pairs of Table 5.2, the key
        registered as given, the Archive called back as for any inclusion (§4).

        Never through the public switch route, so never throttled: wrong keys someone sent
        from the same address cannot keep the registry's owner from including its Archives.
        """
        request = _parse_switch({**query, "servicesubject": "inclusionRequest"})
        if isinstance(request, SwitchAnswer):
            return request
        # Its own Archives: a data directory from before each had its own subsystem shares
        # one prefix among them, which then has no owner (owners.py), as it always had.
        self.register(request.label, query["registrationkey"], share_prefix=True)
        answer = self._include(request, iso_date(Decimal(int(self.clock()))))
        if answer.status == 200:
            self.on_change()
        return answer

    def administer(self, query: Mapping[str, str], *, rotate: bool = False) -> SwitchAnswer:
        """The administrator's switch (``POST /admin/switch``: IAM-authenticated in AWS): the
        pairs of Table 5.2, the Archive called back as for any inclusion (§4).

        The caller is authenticated, so the wrong-key throttle is never consulted: a
        stranger's wrong keys never lock out the key holder. The key must open the Archive's
        record (a wrong one is refused and never counted) — unless ``rotate``: then the key
        given becomes the Archive's and the Archive is included with it, or nothing changes.
        """
        if query.get("servicesubject") not in SWITCH_SUBJECTS:
            return _error(400, "servicesubject must be inclusionRequest or exclusionRequest")
        request = _parse_switch(query)
        if isinstance(request, SwitchAnswer):
            return request
        registered = self.registry.get(request.label)
        if registered is None:
            raise UnknownArchive(request.label)
        at = iso_date(Decimal(int(self.clock())))
        excluding = query["servicesubject"] == "exclusionRequest"
        if rotate and excluding:
            return _error(
                400, "a key is rotated by an inclusionRequest: the Archive is included with it"
            )
        if rotate:
            return self._rotate(request, registered, at)
        if not hmac.compare_digest(
            key_hash(self.pepper, query["registrationkey"]), registered.key_hash
        ):
            message = f"{request.label}: this registration key does not open its record"
            return SwitchAnswer(403, _refused(), message=message)
        if excluding:
            self.registry.exclude(request.label, at=at)
            answer = SwitchAnswer(200, PairList([("status.archive", "excluded")]))
        else:
            answer = self._include(request, at)
        if answer.status == 200:
            self.on_change()
        return answer

    def _rotate(self, request: _Switch, registered: RegisteredArchive, at: str) -> SwitchAnswer:
        """A new key, and the Archive included with it; or, on any failure, the old key back
        (a rotation is all or nothing)."""
        try:
            self.transport.vet(request.endpoint)
        except UnsafeAddress as error:
            return _error(400, f"archiveaddress: {error}")  # nothing changed
        new = key_hash(self.pepper, request.query["registrationkey"])
        self.registry.register(request.label, registered.forms, new)
        try:
            answer = self._include(request, at)
        except BaseException:
            self.registry.register(request.label, registered.forms, registered.key_hash)
            raise
        finally:
            self.on_change()
        if answer.status != 200:
            self.registry.register(request.label, registered.forms, registered.key_hash)
        return answer

    def deregister(
        self, archive_service_ibi: str, *, forget_answers: Callable[[str], None] = lambda _: None
    ) -> RegisteredArchive:
        """Remove a registered Archive (the administrator): its record, then its claims on the
        prefixes registered with it (free again: ``owners.py``); :class:`UnknownArchive` if
        none. ``forget_answers`` first voids the answers kept as its word (``kept.py``): a
        failure there leaves it registered, and the call can be made again."""
        label = parse_label(archive_service_ibi).label
        for _ in range(3):  # its record changed between the read and the delete: read again
            known = self.registry.get(label)
            if known is None:
                raise UnknownArchive(label)
            forget_answers(label)
            if self.registry.deregister(known):
                self.on_change()
                return known
        raise RegistryError(f"deregistering {label}: its record kept changing")

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
            cause = (
                f"too many wrong registration keys from {source} ({self.failure_limit} within "
                f"{_minutes(self.failure_window)}): this address is refused for this Archive, "
                "whatever the key, until the window ends"
            )
            return _too_many(label, cause, ends=mine.window_ends, now=now)
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
            cause = (
                "too many wrong registration keys from all addresses (more than "
                f"{self.guess_cap} within {_minutes(window)}): each wrong key is refused, and "
                "blocks its address, until the window ends"
            )
            answer = _too_many(label, cause, ends=guesses.window_ends, now=now)
            return dataclasses.replace(answer, over_cap=True)
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


def _too_many(label: str, cause: str, *, ends: int, now: int) -> SwitchAnswer:
    """A ``429``: refused, naming the Archive, the cause and when to retry (the text, and
    the seconds in ``retry_after``, the answer's ``Retry-After``)."""
    retry_after = max(1, ends - now)
    message = f"{label}: {cause}; retry after {retry_after} s ({iso_date(Decimal(ends))})"
    pairs = PairList([("status.archive", "refused"), ("error", _words(message))])
    return SwitchAnswer(429, pairs, retry_after=retry_after, message=message)


def _minutes(seconds: int) -> str:
    return f"{seconds // 60} minutes" if seconds % 60 == 0 else f"{seconds} s"


def _words(message: str) -> tuple[str, ...]:
    return tuple(encode_value(word) for word in message.split())


def _error(status: int, message: str) -> SwitchAnswer:
    return SwitchAnswer(status, PairList([("error", _words(message))]), message=message)
