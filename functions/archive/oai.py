"""OAI-PMH 2.0 at ``/oai``: what harvesters (DSpace, Zenodo, BASE, OpenAIRE…) read.

Pure: the items come through a port (:class:`Items`: the store's ``get`` and
``query_datestamps``), the time through a clock, and every answer is an XML document built
with ElementTree. The six verbs, their arguments checked as the protocol says (§3.1, §4), and
its error codes.

* **Identifiers**: ``oai:urlib.net:<IBI>`` (:data:`NAMESPACE`), the IBI's main label (its
  ``ibip`` form when it has one). An IBI never repeats anywhere, so an item has the same OAI
  identifier in every Archive that holds it and after a transfer. ``GetRecord`` and
  ``ListMetadataFormats`` also take either form of the IBI, bare or after the prefix.
* **Datestamps**: the item's timestamp (its last change) to the second, UTC; ``from`` and
  ``until`` in either granularity (day, second), both of the same.
* **Sets**: one per content type (``Data``, ``Metadata``); each header names its item's.
* **Deletions**: a deleted item is a tombstone kept for good (``model.Item.tombstone``), so
  ``deletedRecord`` is ``persistent``: its header says ``status="deleted"`` and it has no
  metadata. Items on their way in (a transfer not complete) and the Archive's own service
  item are not records.
* **Lists** (``ListIdentifiers``, ``ListRecords``) read OAI-PMH's index of the items table
  (``store.DATESTAMP_INDEX``: the records by set, then datestamp), never the whole table: a
  ``set`` is one Query of its partition, with ``from``/``until`` as its key condition; no
  ``set``, one Query of each set's partition, merged by datestamp. Records come in datestamp
  order, so a harvest ``from`` its last datestamp gets what changed since. Each Query asks
  for one record more than a page, so a page is full, or the list's last: a list request
  reads at most (page size + 1) x (sets) records, whatever the table holds, and one whose
  selection matches nothing reads none (one Query per set) and is ``noRecordsMatch``.
* **Resumption tokens**: opaque (base64url of JSON): the verb, its arguments, for each set the
  datestamp and key of the last record sent (the next Query's ``ExclusiveStartKey``), the
  sets whose records were all sent, and the cursor. They never expire. One the Archive did
  not make, or made by the table-scanning version before the index, is
  ``badResumptionToken`` (the harvester starts again).
* **Changes during a harvest**: a record that changes moves to its new datestamp, later than
  any sent: a record not yet sent is still sent (once), one already sent may be sent again.
  A record changed past ``until`` between two requests is not sent; if it was all that was
  left, the page is empty with an empty token (the list's end): the only empty page.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Protocol
from urllib.parse import parse_qsl
from xml.etree import ElementTree

from functions.archive.model import ContentType, Item
from functions.archive.store import datestamp_of, is_record
from functions.archive.views import OAI_DC, RESOLVER_URL, XSI, oai_dc_element
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.defaults import OAI_PAGE_SIZE

OAI = "http://www.openarchives.org/OAI/2.0/"
OAI_PMH_SCHEMA = f"{OAI} http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd"
NAMESPACE = "urlib.net"  # the IBI resolver's domain: oai:urlib.net:<IBI>
PREFIX = f"oai:{NAMESPACE}:"
GRANULARITY = "YYYY-MM-DDThh:mm:ssZ"
# metadataPrefix -> (its schema, its namespace)
FORMATS = {"oai_dc": ("http://www.openarchives.org/OAI/2.0/oai_dc.xsd", OAI_DC)}
SETS = {
    ContentType.DATA.value: "Data: items holding files or pointing to content",
    ContentType.METADATA.value: "Metadata: items that describe other items",
}
LISTS = ("ListIdentifiers", "ListRecords")
# verb -> (required arguments, optional ones); a resumptionToken excludes all but the verb.
VERBS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "Identify": (frozenset(), frozenset()),
    "ListMetadataFormats": (frozenset(), frozenset({"identifier"})),
    "ListSets": (frozenset(), frozenset()),
    "GetRecord": (frozenset({"identifier", "metadataPrefix"}), frozenset()),
    "ListIdentifiers": (frozenset({"metadataPrefix"}), frozenset({"from", "until", "set"})),
    "ListRecords": (frozenset({"metadataPrefix"}), frozenset({"from", "until", "set"})),
}
RESUMABLE = frozenset({"ListSets", *LISTS})
# The protocol's own syntax for a metadataPrefix and a setSpec (OAI-PMH.xsd).
_PREFIX = re.compile(r"[A-Za-z0-9\-_.!~*'()]+")
_SET_SPEC = re.compile(r"[A-Za-z0-9\-_.!~*'()]+(?::[A-Za-z0-9\-_.!~*'()]+)*")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,4000}")
_EMAIL = re.compile(r"\S+@(\S+\.)+\S+")  # OAI-PMH.xsd's emailType
DAY_SECONDS = 86400

# Written as the default namespace (``xmlns=``), as harvesters are used to: ElementTree's
# ``default_namespace`` option refuses the protocol's unqualified attributes.
ElementTree.register_namespace("", OAI)


class OaiError(Exception):
    """One of the protocol's error conditions: ``code`` as §3.6 names it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


Position = tuple[int, str]  # a record's place in its set: its datestamp, then its key


class Items(Protocol):
    """What the repository reads (``store.ItemStore``)."""

    def get(self, label: str) -> Item | None: ...
    def query_datestamps(
        self,
        set_spec: str,
        *,
        first: int | None,
        last: int | None,
        after: Position | None,
        limit: int,
    ) -> list[Item]: ...


def request_arguments(text: str) -> list[tuple[str, str]]:
    """The arguments of a request: its query string (GET) or its form body (POST); a word
    without ``=`` is an argument with no value (refused: badArgument)."""
    return parse_qsl(text, keep_blank_values=True)


def identifier(item: Item) -> str:
    return PREFIX + item.key


def label_of(oai_identifier: str) -> str:
    """The IBI an OAI identifier names (``oai:urlib.net:<IBI>`` or the IBI itself)."""
    text = oai_identifier.removeprefix(PREFIX)
    try:
        return parse_label(text).label
    except InvalidInput:
        raise OaiError("idDoesNotExist", f"{oai_identifier!r} is not {PREFIX}<IBI>") from None


# ---------------------------------------------------------------------------- datestamps


def datestamp(moment: Decimal) -> str:
    """A datestamp to the second (the repository's granularity)."""
    return iso_date(Decimal(int(moment)))


def _instant(text: str, name: str) -> tuple[int, bool]:
    """``text`` as whole seconds since the epoch, and whether it is a day (not a second)."""
    day = _DAY.fullmatch(text) is not None
    if not day and not _SECOND.fullmatch(text):
        raise OaiError("badArgument", f"{name} is YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ: {text!r}")
    try:
        moment = datetime.strptime(text, "%Y-%m-%d" if day else "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise OaiError("badArgument", f"{name}: {text!r} is no date") from None
    return int(moment.replace(tzinfo=UTC).timestamp()), day


def _bounds(start: str | None, end: str | None) -> tuple[int | None, int | None]:
    """``from`` and ``until`` as inclusive bounds in seconds (a day until: to its end)."""
    low = _instant(start, "from") if start is not None else None
    high = _instant(end, "until") if end is not None else None
    if low and high and low[1] != high[1]:
        raise OaiError("badArgument", "from and until must have the same granularity")
    first = low[0] if low else None
    last = (high[0] + (DAY_SECONDS - 1 if high[1] else 0)) if high else None
    if first is not None and last is not None and first > last:
        raise OaiError("badArgument", "from is later than until")
    return first, last


# ---------------------------------------------------------------------------- list requests


@dataclass(frozen=True, slots=True)
class Harvest:
    """A list request (ListIdentifiers, ListRecords): its arguments, and where it resumes."""

    verb: str
    metadata_prefix: str
    start: str | None = None  # `from`
    until: str | None = None
    set: str | None = None
    after: Mapping[str, Position] = field(default_factory=dict)  # set -> its last record sent
    done: frozenset[str] = frozenset()  # the sets whose records were all sent
    cursor: int = 0

    @classmethod
    def of(cls, verb: str, arguments: dict[str, str]) -> Harvest:
        harvest = cls(
            verb=verb,
            metadata_prefix=arguments["metadataPrefix"],
            start=arguments.get("from"),
            until=arguments.get("until"),
            set=arguments.get("set"),
        )
        harvest.bounds()  # badArgument now, not later
        return harvest

    def bounds(self) -> tuple[int | None, int | None]:
        return _bounds(self.start, self.until)

    def sets(self) -> list[str]:
        """The sets whose records are still to be sent (an unknown set has none)."""
        chosen = list(SETS) if self.set is None else [self.set] if self.set in SETS else []
        return [spec for spec in chosen if spec not in self.done]

    def token(self) -> str:
        data = {
            "verb": self.verb,
            "metadata_prefix": self.metadata_prefix,
            "start": self.start,
            "until": self.until,
            "set": self.set,
            "after": {spec: list(position) for spec, position in sorted(self.after.items())},
            "done": sorted(self.done),
            "cursor": self.cursor,
        }
        text = json.dumps({k: v for k, v in data.items() if v is not None}, separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def resumed(cls, token: str, verb: str) -> Harvest:
        """The list request a token continues; ``badResumptionToken`` if it is not ours."""
        try:
            if not _TOKEN.fullmatch(token):
                raise ValueError("not base64url")
            data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            after, done = data.pop("after"), data.pop("done")
            harvest = cls(**data)
            if not isinstance(after, dict) or not isinstance(done, list):
                raise ValueError("not a token of this design")  # (the Scan's: "after": a key)
            harvest = replace(
                harvest,
                after={spec: _position(value) for spec, value in after.items()},
                done=frozenset(done),
            )
            sets = set(SETS) if harvest.set is None else {harvest.set}
            valid = (
                harvest.verb == verb
                and harvest.metadata_prefix in FORMATS
                and isinstance(harvest.cursor, int)
                and harvest.cursor > 0  # a token follows a page of records
                and all(isinstance(v, str | None) for v in (harvest.start, harvest.until))
                and (harvest.set is None or harvest.set in SETS)
                and set(harvest.after) <= sets
                and harvest.done < sets  # (a list with every set done has no token)
            )
            if not valid:
                raise ValueError("not a token of this request")
            harvest.bounds()
        except (ValueError, TypeError, KeyError, AttributeError, OaiError, binascii.Error):
            message = f"{token[:80]!r} is not a token of this list"
            raise OaiError("badResumptionToken", message) from None
        return harvest


def _position(value: object) -> Position:
    """A record's place as a token holds it: ``[datestamp, key]``."""
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("a position is [datestamp, key]")
    stamp, key = value
    if isinstance(stamp, bool) or not isinstance(stamp, int) or stamp < 0:
        raise ValueError("a datestamp is whole seconds")
    if not isinstance(key, str) or not 0 < len(key) <= 2048:
        raise ValueError("a key is a label")
    return stamp, key


# ---------------------------------------------------------------------------- the repository


@dataclass(frozen=True, slots=True)
class RepositoryIdentity:
    """What ``Identify`` says: the repository's name, base URL, contact and first datestamp."""

    name: str
    base_url: str  # the OAI-PMH endpoint: <Archive base URL>/oai
    admin_email: str
    earliest: Decimal  # no item's datestamp is earlier


def admin_address(address: str) -> str:
    """``address`` as OAI-PMH.xsd takes it (a dotted domain): ``admin@localhost``, local
    mode's default, is written ``admin@localhost.localdomain``."""
    return address if _EMAIL.fullmatch(address) else f"{address}.localdomain"


class Repository:
    """An Archive as an OAI-PMH repository: :meth:`answer` takes a request's arguments and
    returns the response document (always HTTP 200, errors included, as §3.6 says)."""

    def __init__(
        self,
        items: Items,
        identity: RepositoryIdentity,
        *,
        clock: Callable[[], Decimal],
        page_size: int = OAI_PAGE_SIZE,
        resolver_url: str = RESOLVER_URL,
    ) -> None:
        self._items = items
        self._identity = identity
        self._clock = clock
        self._page_size = page_size
        self._resolver_url = resolver_url.rstrip("/")
        self._verbs: dict[str, Callable[[str, dict[str, str]], ElementTree.Element]] = {
            "Identify": self._identify,
            "ListMetadataFormats": self._list_metadata_formats,
            "ListSets": self._list_sets,
            "GetRecord": self._get_record,
            "ListIdentifiers": self._list,
            "ListRecords": self._list,
        }

    def answer(self, arguments: Sequence[tuple[str, str]] | str) -> bytes:
        """The response to a request with ``arguments`` (pairs, or the query string / form
        body they come in)."""
        root, request = self._envelope()
        try:
            verb, given = checked(
                request_arguments(arguments) if isinstance(arguments, str) else arguments
            )
        except OaiError as error:  # badVerb, badArgument: the request element has no attributes
            root.append(_error(error))
            return _document(root)
        request.attrib.update({"verb": verb, **given})  # valid arguments only: echoed
        try:
            root.append(self._verbs[verb](verb, given))
        except OaiError as error:
            root.append(_error(error))
        return _document(root)

    def unreadable(self, message: str) -> bytes:
        """The document for a request whose arguments cannot be read at all (a form body that
        is not UTF-8): ``badArgument`` saying what to send; the route answers it with a 400."""
        root, _ = self._envelope()
        root.append(_error(OaiError("badArgument", message)))
        return _document(root)

    def _envelope(self) -> tuple[ElementTree.Element, ElementTree.Element]:
        """The document's root with its ``responseDate``, and its ``request`` (the base URL)."""
        root = ElementTree.Element(
            f"{{{OAI}}}OAI-PMH", {f"{{{XSI}}}schemaLocation": OAI_PMH_SCHEMA}
        )
        ElementTree.SubElement(root, f"{{{OAI}}}responseDate").text = datestamp(self._clock())
        request = ElementTree.SubElement(root, f"{{{OAI}}}request")
        request.text = self._identity.base_url
        return root, request

    # -- the verbs -----------------------------------------------------------------------------

    def _identify(self, _verb: str, _arguments: dict[str, str]) -> ElementTree.Element:
        identity = self._identity
        element = ElementTree.Element(f"{{{OAI}}}Identify")
        earliest = datetime.fromtimestamp(int(identity.earliest), tz=UTC).date().isoformat()
        for name, text in (
            ("repositoryName", identity.name),
            ("baseURL", identity.base_url),
            ("protocolVersion", "2.0"),
            ("adminEmail", admin_address(identity.admin_email)),
            ("earliestDatestamp", f"{earliest}T00:00:00Z"),
            ("deletedRecord", "persistent"),
            ("granularity", GRANULARITY),
        ):
            ElementTree.SubElement(element, f"{{{OAI}}}{name}").text = text
        return element

    def _list_metadata_formats(self, _verb: str, arguments: dict[str, str]) -> ElementTree.Element:
        if "identifier" in arguments:
            self._record_item(arguments["identifier"])  # idDoesNotExist if not a record here
        element = ElementTree.Element(f"{{{OAI}}}ListMetadataFormats")
        for prefix, (schema, namespace) in FORMATS.items():
            entry = ElementTree.SubElement(element, f"{{{OAI}}}metadataFormat")
            for name, text in (
                ("metadataPrefix", prefix),
                ("schema", schema),
                ("metadataNamespace", namespace),
            ):
                ElementTree.SubElement(entry, f"{{{OAI}}}{name}").text = text
        return element

    def _list_sets(self, _verb: str, arguments: dict[str, str]) -> ElementTree.Element:
        if "resumptionToken" in arguments:  # the list of sets is never split
            raise OaiError("badResumptionToken", "ListSets answers in one response: no token")
        element = ElementTree.Element(f"{{{OAI}}}ListSets")
        for spec, name in SETS.items():
            entry = ElementTree.SubElement(element, f"{{{OAI}}}set")
            ElementTree.SubElement(entry, f"{{{OAI}}}setSpec").text = spec
            ElementTree.SubElement(entry, f"{{{OAI}}}setName").text = name
        return element

    def _get_record(self, _verb: str, arguments: dict[str, str]) -> ElementTree.Element:
        _check_format(arguments["metadataPrefix"])
        item = self._record_item(arguments["identifier"])
        element = ElementTree.Element(f"{{{OAI}}}GetRecord")
        element.append(self._record(item))
        return element

    def _list(self, verb: str, arguments: dict[str, str]) -> ElementTree.Element:
        token = arguments.get("resumptionToken")
        if token is not None:
            harvest = Harvest.resumed(token, verb)
        else:
            harvest = Harvest.of(verb, arguments)
            _check_format(harvest.metadata_prefix)
        page, following = self._page(harvest)
        if not page and token is None:
            raise OaiError("noRecordsMatch", "no record matches these arguments")
        element = ElementTree.Element(f"{{{OAI}}}{verb}")
        for item in page:
            element.append(_header(item) if verb == "ListIdentifiers" else self._record(item))
        if following is not None or token is not None:  # the last part: an empty token
            resume = ElementTree.SubElement(
                element, f"{{{OAI}}}resumptionToken", {"cursor": str(harvest.cursor)}
            )
            if following is not None:
                resume.text = following.token()
        return element

    # -- reading -------------------------------------------------------------------------------

    def _page(self, harvest: Harvest) -> tuple[list[Item], Harvest | None]:
        """The next records of ``harvest`` (a page at most, in datestamp order), and the list
        request that follows it (None: they were the last). Each set still to be sent is read
        for one record more than a page, so the page is full unless it is the last."""
        first, last = harvest.bounds()
        limit = self._page_size + 1
        read = {
            spec: self._items.query_datestamps(
                spec, first=first, last=last, after=harvest.after.get(spec), limit=limit
            )
            for spec in harvest.sets()
        }
        # By datestamp; of equal ones, each set's in its own (the index's) order.
        merged = heapq.merge(
            *([(spec, item) for item in items] for spec, items in read.items()),
            key=lambda pair: datestamp_of(pair[1]),
        )
        page = list(itertools.islice(merged, self._page_size))
        after = dict(harvest.after)
        sent = dict.fromkeys(read, 0)
        for spec, item in page:
            after[spec] = (datestamp_of(item), item.key)
            sent[spec] += 1
        done = harvest.done | {
            spec for spec, items in read.items() if len(items) < limit and sent[spec] == len(items)
        }
        following = replace(harvest, after=after, done=done, cursor=harvest.cursor + len(page))
        return [item for _, item in page], (following if following.sets() else None)

    def _record(self, item: Item) -> ElementTree.Element:
        """A record: its header, and its metadata unless it is a tombstone."""
        record = ElementTree.Element(f"{{{OAI}}}record")
        record.append(_header(item))
        if not item.deleted:
            persistent = f"{self._resolver_url}/{item.key}"
            metadata = ElementTree.SubElement(record, f"{{{OAI}}}metadata")
            metadata.append(oai_dc_element(item, persistent_url=persistent))
        return record

    def _record_item(self, oai_identifier: str) -> Item:
        item = self._items.get(label_of(oai_identifier))
        if item is None or not is_record(item):
            raise OaiError("idDoesNotExist", f"this Archive holds no record {oai_identifier!r}")
        return item


# ---------------------------------------------------------------------------- arguments


def checked(pairs: Sequence[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """The verb and its arguments, as §3.1 and §4 allow them (else badVerb, badArgument)."""
    verbs = [value for name, value in pairs if name == "verb"]
    if len(verbs) != 1 or verbs[0] not in VERBS:
        shown = ", ".join(repr(v) for v in verbs) or "none"
        raise OaiError("badVerb", f"one verb of {', '.join(VERBS)} is needed (given: {shown})")
    verb = verbs[0]
    given: dict[str, str] = {}
    for name, value in pairs:
        if name == "verb":
            continue
        if name in given:
            raise OaiError("badArgument", f"{name} is repeated")
        given[name] = value
    required, optional = VERBS[verb]
    if "resumptionToken" in given and verb in RESUMABLE:
        required, optional = frozenset({"resumptionToken"}), frozenset()
    unknown = sorted(set(given) - required - optional)
    if unknown:
        raise OaiError("badArgument", f"{verb} takes no {', '.join(unknown)}")
    missing = sorted(required - set(given))
    if missing:
        raise OaiError("badArgument", f"{verb} needs {', '.join(missing)}")
    empty = sorted(name for name, value in given.items() if not value)
    if empty:
        raise OaiError("badArgument", f"{', '.join(empty)} is empty")
    _check_syntax(given)
    return verb, given


def _check_syntax(given: dict[str, str]) -> None:
    if "metadataPrefix" in given and not _PREFIX.fullmatch(given["metadataPrefix"]):
        raise OaiError("badArgument", f"{given['metadataPrefix']!r} is no metadataPrefix")
    if "set" in given and not _SET_SPEC.fullmatch(given["set"]):
        raise OaiError("badArgument", f"{given['set']!r} is no setSpec")
    if "identifier" in given and any(c.isspace() for c in given["identifier"]):
        raise OaiError("badArgument", "an identifier holds no white space")
    _bounds(given.get("from"), given.get("until"))


def _check_format(prefix: str) -> None:
    if prefix not in FORMATS:
        raise OaiError(
            "cannotDisseminateFormat", f"{prefix!r}: this Archive disseminates {', '.join(FORMATS)}"
        )


# ---------------------------------------------------------------------------- XML


def _header(item: Item) -> ElementTree.Element:
    header = ElementTree.Element(f"{{{OAI}}}header", {"status": "deleted"} if item.deleted else {})
    ElementTree.SubElement(header, f"{{{OAI}}}identifier").text = identifier(item)
    ElementTree.SubElement(header, f"{{{OAI}}}datestamp").text = datestamp(item.timestamp)
    ElementTree.SubElement(header, f"{{{OAI}}}setSpec").text = item.content_type.value
    return header


def _error(error: OaiError) -> ElementTree.Element:
    element = ElementTree.Element(f"{{{OAI}}}error", {"code": error.code})
    element.text = str(error)
    return element


def _document(root: ElementTree.Element) -> bytes:
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'.encode()


def archive_repository(
    items: Items,
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    admin_email: str,
    clock: Callable[[], Decimal],
    page_size: int = OAI_PAGE_SIZE,
    resolver_url: str = RESOLVER_URL,
) -> Repository:
    """The repository of the Archive at ``base_url`` whose service item is ``service_ibi``;
    its records name their items' persistent URLs at ``resolver_url``.

    Its earliest datestamp is the day its service IBI was minted: the service item is made
    when the Archive first starts, before it takes any item, and every item's timestamp comes
    from the Archive's clock.
    """
    identity = RepositoryIdentity(
        name=f"IBI Archive {address} (service IBI {service_ibi})",
        base_url=f"{base_url.rstrip('/')}/oai",
        admin_email=admin_email,
        earliest=parse_label(service_ibi).date,
    )
    return Repository(items, identity, clock=clock, page_size=page_size, resolver_url=resolver_url)
