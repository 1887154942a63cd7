"""Transfers between institutions: a signed offer, public reads, a public confirmation.

The deposit-API transfer (``transfer.py``) has the sender's role call the receiver's IAM-only
API, which only works when one owner holds credentials for both Archives. Between two
institutions each owner holds credentials for its own Archive only, so the original moves
through what each Archive already shows the world, and a capability the sender signs:

1. **offer** (sender, IAM ``POST /api/item/offers``): the sender's owner gets a short-lived
   offer for one transferable original, naming the item (its deposit fields, links, access
   count, and each file's path, SHA-256 and size), this Archive (service IBI, base URL), the
   receiver's service IBI, what stays here (``copy`` or ``tombstone``), the item's version
   and an expiry. It is signed with HMAC-SHA256 under the Archive's own keys (the urlkeys'
   ``KeySource``, under the distinct context :data:`CONTEXT`). Issuing one writes nothing.
2. **accept** (receiver, IAM ``POST /api/transfers/accept``): the receiver's owner hands the
   offer to its Archive, which refuses an offer naming another receiver or expired, asks the
   sender whether the offer still holds (``check``), pulls every file through the sender's
   public ``/col/`` (as any reader would, under ``outbound.py``'s address rules), refuses on any
   SHA-256 or size other than the offer's, and only then stages the item: a pending ``Copy``
   answered to no one, files committed and checked like any upload.
3. **confirm** (sender, public ``POST /transfers/confirm``): the sender verifies the offer's
   HMAC, the receiver it names, the expiry, and that the item is still the original at the
   offered version with the offered files; then it reads the receiver **at the address the
   resolver has registered for it** (``registered.py``) and demotes the item only if that read
   shows it staged there with the offered files (one conditional write on that version,
   recorded in its history as ``released`` with the offer's id) and answers. Who sends the
   confirmation does not matter: before the receiver staged the item, it changes nothing.
4. **promote** (receiver): on that answer, the staged item becomes the ``Original`` (one
   conditional write).

Where the original is, step by step: until the sender's conditional write in step 3, the
sender's item is the original and the receiver holds nothing or a pending copy it answers to
no one. The write is the moment the original moves: from then on the sender answers ``Copy``
(or a tombstone) and the receiver's staged item, already complete and checked, is the one
that becomes the original; step 4 follows at once. So two originals never exist: the receiver
promotes only on the sender's answer that it demoted. Nothing is lost in between: the staged
item stays until it is promoted, and the sender's history names the offer and the receiver.

Lost answers. An offer is single-use: it names the item's version, which the demotion
changes. A confirmation of an offer that already demoted the item (its id in the history)
is answered ``confirmed`` again, even after the expiry, so that a receiver whose first answer
was lost accepts the same offer again and finishes (its staged item is kept: only a definite
refusal, a 4xx, makes it forget the staged item; a network error or a 5xx leaves it, and says
so). Once promoted, the receiver refuses the offer as a replay.

Registered Archives only (issue 24). An offer names an Archive registered and included at the
sender's resolver; the sender reads the receiver, and the receiver the sender, only at the
address the resolver has registered for each (never at one an offer or a caller gave).

Taken back. Should the receiver lose what it staged after the release (its owner cancelled it,
or it never was honest), the original is held nowhere. Once that offer has expired and the
receiver, read at its registered address, holds neither the original nor a staged item of the
IBI (so it can never promote one), offering the item again first takes the original back here
(``restored`` in its history; the old offer is dead: the item's version moved on). A copy is
taken back; a tombstone kept no files, so an operator must import the item again.

The offer is a bearer capability, like a presigned URL: whoever holds it can ask the sender to
demote the item in favour of the named receiver — and the sender does only once that receiver
staged it. Send it over a private channel and keep it short-lived (:data:`DEFAULT_TTL_SECONDS`);
it can move the item to no other Archive.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from functions.archive.errors import (
    ArchiveError,
    BadRequest,
    Conflict,
    NotHeld,
    Unavailable,
    Unprocessable,
)
from functions.archive.mapping import transfer_body
from functions.archive.model import Forms, Item, Revision, State
from functions.archive.registered import NotRegistered, RegisteredArchive, Registry, included
from functions.archive.service import UNKNOWN, ArchiveService
from functions.archive.transfer import NotProven, _expect, leave_of
from functions.shared.keys import CachedKeys, KeySource, KeysUnavailable
from ibi.client import ApiError
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput

logger = Logger(service="archive", child=True)

CONTEXT = b"ibi-transfer-offer-v1"  # never the urlkeys' context: a tag of one is none of other
PREFIX = "ibioffer1"
DEFAULT_TTL_SECONDS = 3600
MAX_TTL_SECONDS = 7 * 24 * 3600
MAX_OFFER_CHARS = 256 * 1024
SKEW_SECONDS = 60  # the two institutions' clocks may differ by this much
OFFER_MAX_FILE_BYTES = 64 * 1024 * 1024  # each file is pulled in one answer
OFFER_MAX_BYTES = 128 * 1024 * 1024  # all of them are held in memory until they are staged
Expected = dict[str, tuple[str, int]]  # path -> (sha256, size)
BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
NOT_AN_OFFER = (
    "this is not an offer: give the whole text `ibi archive offer` printed on the sending "
    "Archive (ibioffer1.<payload>.<signature>), unchanged"
)


class OfferRefused(ArchiveError):
    """The offer is not one this Archive may act on (forged, for another, used, expired)."""

    status = 403


class OfferExpired(OfferRefused):
    status = 410


class Unconfirmed(ArchiveError):
    """The sender could not be read, or its answer is unknown (unreachable, 5xx): whatever was
    staged here is kept; accept the same offer again to finish."""

    status = 502


@dataclass(frozen=True, slots=True)
class Offer:
    """What the sender signs. ``item``: the transfer body, the access count, the files."""

    id: str
    ibi: str  # the item's key
    sender: str  # the sender's service IBI
    base_url: str  # where the sender is read and confirms
    to: str  # the receiver's service IBI
    version: int
    expires: int  # seconds since the epoch
    leave: str
    item: dict[str, Any]

    @property
    def files(self) -> Expected:
        return {f["path"]: (f["sha256"], f["size"]) for f in self.item.get("files", [])}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Unpadded base64url, strictly: any other character is refused (``ValueError``), never
    skipped as the standard decoder would."""
    if not BASE64URL.fullmatch(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _tag(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, CONTEXT + b"\x00" + payload, hashlib.sha256).digest()


class OfferKeys:
    """Signs and verifies offers under the Archive's keys (newest signs, any verifies), held as
    ``functions.shared.keys.CachedKeys`` holds them: read again every 15 minutes, and at most
    once a minute when an offer verifies under none of them."""

    def __init__(self, source: KeySource, *, monotonic: Callable[[], float] = time.monotonic):
        self._keys = CachedKeys(source, name="offer keys", logger=logger, monotonic=monotonic)

    def _load(self, *, again: bool = False) -> list[bytes]:
        try:
            return self._keys.load(again=again)
        except KeysUnavailable:
            raise Unavailable("the Archive's key cannot be read now") from None

    def seal(self, offer: Offer) -> str:
        payload = json.dumps(asdict(offer), sort_keys=True, separators=(",", ":")).encode()
        return f"{PREFIX}.{_b64(payload)}.{_b64(_tag(self._load()[0], payload))}"

    def verified(self, token: Any) -> Offer:
        """The offer if this Archive signed it (``OfferRefused`` otherwise)."""
        payload, tag = _split(token)
        for again in (False, True):
            if any(hmac.compare_digest(_tag(k, payload), tag) for k in self._load(again=again)):
                return _offer_of(payload)
        raise OfferRefused("this is no offer of this Archive (its signature does not verify)")


def _split(token: Any) -> tuple[bytes, bytes]:
    if not isinstance(token, str) or len(token) > MAX_OFFER_CHARS:
        raise BadRequest('give "offer": the text `ibi archive offer` printed')
    parts = token.strip().split(".")
    try:
        if len(parts) != 3 or parts[0] != PREFIX:
            raise ValueError("not an offer")
        return _unb64(parts[1]), _unb64(parts[2])
    except (ValueError, binascii.Error):
        raise Unprocessable(NOT_AN_OFFER) from None


def _offer_of(payload: bytes) -> Offer:
    """The offer a payload holds: UTF-8 JSON of every :class:`Offer` field (else a 422 that
    says what to send, never the parser's words)."""
    try:
        data = json.loads(payload.decode("utf-8"))
        offer = Offer(**data)
        texts = (offer.id, offer.ibi, offer.sender, offer.base_url, offer.to, offer.leave)
        if not all(isinstance(text, str) for text in texts):
            raise TypeError("a field that is text")
        if not isinstance(offer.item, dict) or not all(
            isinstance(number, int) for number in (offer.version, offer.expires)
        ):
            raise TypeError("item, version or expiry")
        offer.files  # noqa: B018 - every file has a path, a SHA-256 and a size
    except (ValueError, TypeError, KeyError, AttributeError):  # UnicodeDecodeError included
        raise Unprocessable(NOT_AN_OFFER) from None
    return offer


def read_offer(token: Any) -> Offer:
    """The offer's content, not verified (only its sender can): what the receiver reads."""
    payload, _ = _split(token)
    return _offer_of(payload)


# ---------------------------------------------------------------------------- the sender


def make_offer(
    service: ArchiveService,
    keys: OfferKeys,
    label: str,
    body: Any,
    *,
    sender: str,
    base_url: str,
    registry: Registry | None,
) -> tuple[Offer, str]:
    """An offer of ``label``'s original to the registered, included Archive whose service IBI
    is ``body["to"]`` (the original taken back first, if an expired offer left it nowhere)."""
    if not isinstance(body, dict) or not isinstance(body.get("to"), str):
        raise BadRequest('send {"to": "<receiving Archive service IBI>", "leave": "copy"}')
    leave, ttl = leave_of(body.get("leave", "copy")), body.get("expires_in", DEFAULT_TTL_SECONDS)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 60 <= ttl <= MAX_TTL_SECONDS:
        raise BadRequest(f'"expires_in" is a whole number of seconds, 60 to {MAX_TTL_SECONDS}')
    try:
        to = Forms.of(body["to"]).key
    except ValueError:
        raise BadRequest(f'"to" is not an IBI: {body["to"]!r}') from None
    if to == sender:
        raise BadRequest("an offer is for another Archive")
    to = included(registry, to).key  # the service IBI as the resolver registered it
    item = take_back(service, registry, service.get(label))
    if item.state is not State.ORIGINAL or item.pending:
        raise Conflict(f"{item.key} is a {item.state.value} here: only an original moves")
    if item.service or not item.transferable:
        raise Conflict(f"{item.key} is an untransferable original")
    offer = Offer(
        id=secrets.token_hex(16),
        ibi=item.key,
        sender=sender,
        base_url=base_url,
        to=to,
        version=item.version,
        expires=int(service.now()) + ttl,
        leave=leave,
        item={
            **transfer_body(item),
            "accesses": service.accesses(item),
            "files": [f.to_mapping() for f in item.files],
            "default_file": item.default_file,
        },
    )
    return offer, keys.seal(offer)


def released_by(item: Item, offer: Offer) -> bool:
    """Whether ``offer`` moved ``item`` away from here (its id in the history), and it was not
    taken back since."""
    if item.state is State.ORIGINAL:
        return False
    marks = {release_reason(offer), f"offer {offer.id} to {offer.to}"}  # and before expiries
    return any(r.action == "released" and r.reason in marks for r in item.history)


def release_reason(offer: Offer) -> str:
    return f"offer {offer.id} to {offer.to}, open until {offer.expires}"


RELEASED = re.compile(r"offer (?P<id>[0-9a-f]+) to (?P<to>[^\s,]+)(?:, open until (?P<until>\d+))?")


def take_back(service: ArchiveService, registry: Registry | None, item: Item) -> Item:
    """``item``, or its original back here if an offer released it and no one can take it any
    more: the offer expired, and its receiver, read at its registered address, holds neither
    the original nor a staged item of the IBI. Else ``item`` as it is, or a 409 saying why."""
    last = next((r for r in reversed(item.history) if r.action in {"released", "restored"}), None)
    if last is None or last.action != "released" or item.state is State.ORIGINAL or item.pending:
        return item
    found = RELEASED.fullmatch(last.reason)
    if found is None:
        return item
    offer, to = found["id"], found["to"]
    until = int(found["until"]) if found["until"] else int(last.at) + MAX_TTL_SECONDS
    there = _held_at(registry, to, item.key)
    if there is not None and there.get("pending") is not True and there.get("state") == "Original":
        return item  # the transfer is done: the original is there
    left = f"{item.key} left by offer {offer} to {to}"
    if there is not None and there.get("pending") is True:
        raise Conflict(
            f"{left}, which holds it staged: its owner completes the transfer by accepting the "
            "offer again"
        )
    if service.now() < until + SKEW_SECONDS:
        raise Conflict(
            f"{left}, open until {iso_date(Decimal(until))}: {to} may still take it (its "
            "owner accepts that offer again); offer it again once the offer has expired"
        )
    if item.state is not State.COPY:
        raise Conflict(
            f"{left}, leaving a tombstone, and {to} does not hold it: its files are not kept "
            "here to take back (an operator imports the item again)"
        )
    now = service.now()
    restored = Revision("restored", at=now, by=UNKNOWN, reason=f"offer {offer} to {to}: not taken")
    service.restore_original(
        replace(
            item,
            state=State.ORIGINAL,
            transferable=True,
            original_sha256=None,
            original_files=(),
            moved_to=None,
            moved_at=None,
            history=(*item.history, restored),
        )
    )
    logger.warning("original taken back", extra={"ibi": item.key, "offer": offer, "to": to})
    return service.get(item.key)


def _held_at(registry: Registry | None, to: str, ibi: str) -> dict[str, Any] | None:
    """What the Archive ``to`` holds of ``ibi``, read at its registered address."""
    if registry is None:
        raise NotRegistered(
            "this Archive knows no resolver (IBI_RESOLVER_URL) to read the receiver at"
        )
    archive = registry.find(to)
    if archive is None:
        raise NotRegistered(
            f"{to} is not registered at this Archive's resolver: what it holds of {ibi} "
            "cannot be read"
        )
    try:
        return registry.held(archive, ibi)
    except ApiError as error:
        raise Unavailable(f"{to} cannot be read at its registered address now: {error}") from None


def confirm(
    service: ArchiveService,
    keys: OfferKeys,
    body: Any,
    *,
    sender: str,
    registry: Registry | None,
) -> dict[str, Any]:
    """The sender's public answer to a receiver: ``check`` whether the offer holds, or
    ``confirm``: demote the original (once), only once the receiver, read at its registered
    address, holds it staged with the offered files, and say so. Refusals raise (4xx)."""
    if not isinstance(body, dict) or body.get("action") not in {"check", "confirm"}:
        raise BadRequest('send {"offer": …, "receiver": <service IBI>, "action": "confirm"}')
    offer = keys.verified(body.get("offer"))
    if offer.sender != sender:
        raise OfferRefused("this offer was made by another Archive")
    if body.get("receiver") != offer.to:
        raise OfferRefused(f"this offer is for {offer.to}, not for {body.get('receiver')!r}")
    item = service.get(offer.ibi)
    answer = {"ibi": item.ibi.to_mapping(), "offer": offer.id}
    if released_by(item, offer):  # a retry whose first answer was lost: the same answer
        return {**answer, "confirmed": True, "here": item.state.value}
    if int(service.now()) >= offer.expires:
        raise OfferExpired(f"the offer expired at {offer.expires}; ask for a new one")
    if item.state is not State.ORIGINAL or item.pending or item.version != offer.version:
        raise OfferRefused(f"{item.key} changed since the offer was made; ask for a new one")
    if {f.path: (f.sha256, f.size) for f in item.files} != offer.files:
        raise OfferRefused(f"{item.key}'s files are not the offered ones")
    if body["action"] == "check":
        return {**answer, "valid": True}
    _staged_there(registry, offer, item)
    try:
        _, after = service.release_original(
            offer.ibi,
            leave=offer.leave,
            version=offer.version,
            reason=release_reason(offer),
            to=_service_forms(offer.to),
        )
    except Conflict:  # a concurrent confirmation of the same offer may have won
        after = service.get(offer.ibi)
        if not released_by(after, offer):
            raise
    logger.info("original released", extra={"ibi": item.key, "to": offer.to, "offer": offer.id})
    return {**answer, "confirmed": True, "here": after.state.value}


def _staged_there(registry: Registry | None, offer: Offer, item: Item) -> None:
    """The receiver, read at the address the resolver has registered for it, holds the item
    staged (pending) with the offered files; else nothing changes here (409, or 503 when it
    cannot be read now: the receiver keeps what it staged and accepts again)."""
    archive = included(registry, offer.to)
    assert registry is not None  # included() refuses without one
    try:
        there = registry.held(archive, offer.ibi)
    except ApiError as error:
        raise Unavailable(
            f"{offer.to} cannot be read at its registered address ({archive.base_url}) now: "
            f"{error}; nothing changed here, confirm again"
        ) from None
    if there is None:
        raise Conflict(
            f"{offer.to}, read at its registered address ({archive.base_url}), holds nothing of "
            f"{item.key}: nothing changed here; the receiver stages it when its owner accepts "
            "the offer, and confirms then"
        )
    try:
        _expect(there, item, pending=True, files=offer.files)
    except NotProven as error:
        raise Conflict(
            f"{offer.to}, read at its registered address ({archive.base_url}), does not hold "
            f"{item.key} staged with the offered files ({error}): nothing changed here"
        ) from None


def _service_forms(label: str) -> Forms | None:
    """The receiver's service IBI of an offer, for the transfer record (issue 24)."""
    try:
        return Forms.of(label)
    except InvalidInput:
        return None


# ---------------------------------------------------------------------------- the receiver


class Sender(Protocol):
    """A sending Archive as the public reaches it (``outbound.PublicArchive``)."""

    def file(self, ibi: Forms, path: str, *, max_bytes: int) -> bytes: ...
    def confirm(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]: ...


class Staging(Protocol):
    """The receiver's side: its items, and its file store's upload and check."""

    archive: ArchiveService

    def stage_file(self, item_key: str, path: str, data: bytes, content_type: str) -> None: ...
    def commit_files(self, label: str, body: Any, principal: str = UNKNOWN) -> Any: ...


def accept(
    staging: Staging,
    connect: Callable[[str], Sender],
    token: Any,
    *,
    me: Forms,
    principal: str,
    registry: Registry | None,
) -> Item:
    """Take the offered original: check, pull, verify, stage, confirm, promote (module doc);
    the sender is read only at the address the resolver has registered for it."""
    archive = staging.archive
    offer = read_offer(token)
    if offer.to not in me.labels and offer.to != me.key:
        raise OfferRefused(f"this offer is for {offer.to}, not for this Archive ({me.key})")
    body = {"offer": token, "receiver": offer.to}
    held = _find(archive, offer.ibi)
    if held is not None and held.deleted_original:
        raise Conflict(f"this Archive deleted the original of {held.key}: it is never held again")
    if held is not None and not held.yields_to_transfer:
        state = held.state.value
        article = "an" if state[0] in "AEIOU" else "a"
        raise Conflict(f"{held.key} is held here already ({article} {state}): offer used")
    sender = connect(_registered_sender(registry, offer).base_url)
    staged = held is not None and held.pending and _files(held) == offer.files
    if not staged:
        if int(archive.now()) >= offer.expires + SKEW_SECONDS:
            raise OfferExpired(f"the offer expired at {offer.expires}; ask for a new one")
        _answer(sender, {**body, "action": "check"}, offer, cancel=None)
        contents = _pull(sender, offer)
        _stage(staging, offer, contents, principal)
    answer = _answer(sender, {**body, "action": "confirm"}, offer, cancel=archive)
    if answer.get("confirmed") is not True:
        raise Unconfirmed("the sender did not confirm; the item stays staged here")
    staged_item = archive.get(offer.ibi)
    return archive.complete_transfer(offer.ibi, principal=staged_item.creator or UNKNOWN)


def _registered_sender(registry: Registry | None, offer: Offer) -> RegisteredArchive:
    """The offer's sender as the resolver registered it (registered; it may have been
    excluded since), whatever base URL the offer gives (the receiver cannot verify it)."""
    if registry is None:
        raise NotRegistered(
            "this Archive knows no resolver (IBI_RESOLVER_URL): it takes originals only from "
            "Archives registered at it"
        )
    found = registry.find(offer.sender)
    if found is None:
        raise NotRegistered(
            f"the offer's sender {offer.sender} is not registered at this Archive's resolver"
        )
    return found


def _find(archive: ArchiveService, label: str) -> Item | None:
    try:
        return archive.get(label)
    except NotHeld:
        return None


def _files(item: Item) -> Expected:
    return {f.path: (f.sha256, f.size) for f in item.files}


def _pull(sender: Sender, offer: Offer) -> list[tuple[str, bytes, str]]:
    """Every offered file through the sender's public reads, each checked against the offer."""
    forms = Forms.from_mapping(offer.item["ibi"])
    if sum(size for _, size in offer.files.values()) > OFFER_MAX_BYTES:
        raise BadRequest(f"the files are too large to transfer this way (> {OFFER_MAX_BYTES} B)")
    contents = []
    for entry in offer.item.get("files", []):
        path, sha256, size = entry["path"], entry["sha256"], entry["size"]
        if size > OFFER_MAX_FILE_BYTES:
            raise BadRequest(f"{path!r} is too large to transfer this way ({size} bytes)")
        try:
            data = sender.file(forms, path, max_bytes=size + 1)  # a longer one fails below
        except Exception as error:  # nothing is staged yet: nothing changed
            raise Unconfirmed(f"{path!r} cannot be read from the sender: {error}") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            raise OfferRefused(f"{path!r} read from the sender is not the offered file")
        contents.append((path, data, str(entry.get("content_type", "application/octet-stream"))))
    return contents


def _stage(
    staging: Staging, offer: Offer, contents: list[tuple[str, bytes, str]], principal: str
) -> None:
    """The item held here as an incoming transfer, its files committed (answered to no one)."""
    fields = {k: v for k, v in offer.item.items() if k not in {"files", "default_file"}}
    item = staging.archive.receive_transfer(fields, principal=principal)
    for path, data, content_type in contents:
        staging.stage_file(item.key, path, data, content_type)
    declared = [{"path": p, "sha256": s, "size": n} for p, (s, n) in offer.files.items()]
    if declared:
        default = offer.item.get("default_file")
        staging.commit_files(item.key, {"files": declared, "default_file": default}, principal)


def _answer(
    sender: Sender, body: dict[str, Any], offer: Offer, *, cancel: ArchiveService | None
) -> dict[str, Any]:
    """The sender's answer; a refusal (4xx) forgets the staged item (``cancel``): the sender
    answers a refusal only while it holds the original. Anything else keeps it."""
    try:
        status, answer = sender.confirm(body)
    except Exception as error:
        raise Unconfirmed(f"the sender cannot be reached ({error}); accept again") from None
    if 200 <= status < 300:
        return answer
    if 400 <= status < 500 and status != 429:
        if cancel is not None:
            cancel.cancel_transfer(offer.ibi)
        refusal = answer.get("error")
        message = refusal.get("message") if isinstance(refusal, dict) else status
        raise OfferRefused(f"the sender refused the offer: {message}")
    raise Unconfirmed(f"the sender answered {status}; the item stays staged here, accept again")
