"""The Archive service protocol (spec §6; seed 001 §7, Algorithms 1 and 2).

``make_url_list`` is MAKEURLLIST followed by FILTER: for the IBI asked, the identification
pairs and, for each relation of the Archive's relation set that serves the verb list, the
``ibi``/``url``/``contenttype``/``state``/``timestamp`` pairs of the related item. Pure: the
items come through ``holdings``, the URLs through ``Views``, the urlkey through ``new_urlkey``.

Decisions (where seed 001 is silent):

* Only relations that serve the verb list are computed (FILTER is then implicit; "filtering
  changes size, never the resolver's result"). With no verb list that is the item itself;
  ``GetTranslation`` without a language serves every translation the Archive can name.
* Pairs are sorted by name, as in Examples 7.2 and 7.3. ``ibi`` is always an identification
  pair (Example 7.3 keeps it). ``urlkey`` is sent only with at least one ``url…`` pair — an
  answer without a URL asks for no acknowledgment (Example 8.2's first answer has none).
* A translation ``(ll)`` is served by an item whose language is ``ll`` or ``ll-CC``; plain
  ``.translation`` by an item of unspecified language. An item is its own translation in its
  own language (Example 7.2) and its own last edition when it has no next edition.
* When an edition chain leaves the Archive (a next edition it does not hold), nothing
  ``…lastedition…`` is answered: ``ibi.nextedition`` lets the resolver continue.
* Metadata answers only in the format asked (Table 7.5, Example 7.5). ``.metadata(oai_dc)``:
  the item's oai_dc link; else its free-format metadata item if held here with a Dublin Core
  record (this Archive renders it as oai_dc, as URLib's metadata.cgi does in Example 7.2);
  else the record kept in the item. A free-format metadata item held elsewhere, or one that
  is only a file, never answers for oai_dc. ``.metadata`` (no format): the free-format link,
  the record kept in the item, then the oai_dc link.
* An item with a damaged file (bytes that failed their SHA-256, found when serving or by
  ``verify``) is not offered: the answer names it, its state, timestamp and next edition, and
  no URL (no urlkey), so that the resolver, for which this Archive may be the authority, knows
  it exists and takes a copy whose files match the ones listed here (issue 34); as a related
  item it is named by its IBI only (``ibi…``, no URL).
* When a relation leads to an item held elsewhere part of the way (``+(pt-BR):`` with the
  translation in another Archive), the ``ibi…`` pair of the part followed is answered
  (``ibi.translation(pt-BR)``), so that the resolver asks that item's own Archive for the rest.
* Related items are looked up by every form of their IBI (``rep`` and ``ibip``).
* ``acknowledgment`` always answers the constant ``notice {acknowledgment received}``
  (Algorithm 1); it counts one access only for a fresh urlkey this Archive issued and never
  used, on the item the acknowledgment names by its ``ibi`` when its ``url`` is one this
  Archive offers for that item (the translation, the metadata, the last edition, a file:
  where the reader went). Urlkeys are signed, not stored (``urlkeys.py``): a urlRequest
  writes nothing; a genuine, fresh key is spent once, by the acknowledgment, in the table.
* Accesses are counted as COUNTER Release 5 counts requests (issue 35; docs/archive.md,
  "Usage figures"): never a robot's or a machine's (the ``clientinformation.useragent`` the
  acknowledgment declares, against the COUNTER-Robots list), once per client and item within
  :data:`DOUBLE_CLICK_SECONDS`, and once more as unique in each client's session (a UTC hour).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol
from urllib.parse import unquote

import counter_robots

from functions.archive.errors import ProtocolError
from functions.archive.holdings import with_holdings
from functions.archive.model import ContentType, Forms, Item, Profile, State
from functions.archive.urlkeys import UrlKeys
from functions.shared.keys import RandomKeys
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, parse_query
from ibi.core.relations import (
    Relation,
    Verb,
    parse_verb_list,
    relation_for_verbs,
    wants_file_list,
)
from ibi.core.transfers import record_pairs
from ibi.core.usage import month_of

MAX_EDITION_HOPS = 64
MAX_ACKNOWLEDGED_LABELS = 4  # an acknowledgment's ``ibi``: ``rep R ibip P`` at most, read
# COUNTER Release 5 (Code of Practice §7.2-7.3): a request for an item by a client that was
# counted less than this many seconds before is a double-click, not counted again; a client's
# session (Unique_Item_Requests) is one UTC hour, COUNTER's session when none is known.
DOUBLE_CLICK_SECONDS = 30
SESSION_SECONDS = 3600
MAX_USER_AGENT = 512  # characters of a declared User-Agent read (the robots list, the digest)


class Views(Protocol):
    """Where a browser gets an item's content from this Archive."""

    def item_url(self, item: Item) -> str | None: ...
    def file_url(self, item: Item, path: str) -> str: ...
    def file_list_url(self, item: Item) -> str: ...
    def metadata_url(self, item: Item, format: str | None) -> str: ...


@dataclass(frozen=True, slots=True)
class ArchiveIdentity:
    address: str  # host[:port]
    service: Forms
    platform: Forms | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """Where a relation leads from an item: its IBI if known, the item if held here."""

    ibi: Forms | None
    item: Item | None
    inline_metadata_of: Item | None = None  # metadata with no IBI of its own, kept in the item
    url: str | None = None  # a URL known without holding the item (translation by URL)


def _language_serves(item_language: str | None, wanted: str | None) -> bool:
    if wanted is None:
        return item_language is None
    if item_language is None:
        return False
    return item_language == wanted or ("-" not in wanted and item_language.split("-")[0] == wanted)


class Evaluator:
    """Follows relations from an item, through the items this Archive holds."""

    def __init__(self, holdings: Callable[[str], Item | None]) -> None:
        self._holdings = holdings
        self._cache: dict[str, Item | None] = {}

    def held(self, forms: Forms) -> Item | None:
        """The item of ``forms`` (found by any of its forms) if it may be offered here."""
        for label in forms.labels:
            if label not in self._cache:
                self._cache[label] = self._holdings(label)
            item = self._cache[label]
            if item is not None:
                return item if item.usable else None
        return None

    def follow(self, item: Item, relation: Relation) -> Target | None:
        target: Target | None = Target(ibi=item.ibi, item=item)
        for step in relation.steps:
            if target is None:
                return None
            target = self._step(target, step)
        return target

    def partway(self, item: Item, relation: Relation) -> tuple[int, Forms] | None:
        """How many steps of ``relation`` lead to an item held elsewhere, and its IBI, when
        ``follow`` cannot go the whole way (module notes); None otherwise."""
        target: Target | None = Target(ibi=item.ibi, item=item)
        for done, step in enumerate(relation.steps):
            if target is None:
                return None
            if target.item is None and target.inline_metadata_of is None:
                return (done, target.ibi) if done and target.ibi is not None else None
            target = self._step(target, step)
        return None

    def _step(self, target: Target, step: Verb) -> Target | None:
        if target.inline_metadata_of is not None:
            # Metadata kept in the item has no language: it is its own plain translation.
            plain = step.name == "GetTranslation" and step.parameter is None
            return target if plain else None
        if target.item is None:
            return None  # held elsewhere: what it relates to is that Archive's to say
        item = target.item
        if step.name == "GetLastEdition":
            return self._last_edition(item)
        if step.name == "GetTranslation":
            return self._translation(item, step.parameter)
        return self._metadata(item, step.parameter)

    def _last_edition(self, item: Item) -> Target | None:
        current, seen = item, {item.key}
        for _ in range(MAX_EDITION_HOPS):
            if current.next_edition is None:
                return Target(ibi=current.ibi, item=current)
            following = self.held(current.next_edition)
            if following is None or following.key in seen:
                return None  # the chain leaves this Archive (or loops): the resolver goes on
            seen.add(following.key)
            current = following
        return None

    def _translation(self, item: Item, language: str | None) -> Target | None:
        if _language_serves(item.language, language):
            return Target(ibi=item.ibi, item=item)
        for translation in item.translations:
            if not _language_serves(translation.language, language):
                continue
            if translation.ibi is None:
                return Target(ibi=None, item=None, url=translation.url)
            return Target(ibi=translation.ibi, item=self.held(translation.ibi))
        return None

    def _metadata(self, item: Item, format: str | None) -> Target | None:
        """The item's metadata in ``format`` only (module notes)."""
        inline = Target(ibi=None, item=None, inline_metadata_of=item) if item.dc else None
        if format == "oai_dc":
            if item.metadata_oai_dc is not None:
                return Target(ibi=item.metadata_oai_dc, item=self.held(item.metadata_oai_dc))
            free = self.held(item.metadata) if item.metadata is not None else None
            if free is not None and free.dc:
                return Target(ibi=free.ibi, item=free)
            return inline
        if item.metadata is not None:
            return Target(ibi=item.metadata, item=self.held(item.metadata))
        if inline is not None:
            return inline
        if item.metadata_oai_dc is not None:
            return Target(ibi=item.metadata_oai_dc, item=self.held(item.metadata_oai_dc))
        return None


def relations_for(
    verbs: Iterable[Verb], languages: Iterable[str], unspecified: bool
) -> list[Relation]:
    """The relations of the Archive's set that serve ``verbs`` (FILTER).

    A ``GetTranslation`` without a language stands for every language the Archive holds
    (and plain ``.translation`` when it holds items of unspecified language).
    """
    steps = [verb for verb in verbs if verb.name != "GetFileList"]
    options: list[list[Verb]] = []
    for step in steps:
        if step.name == "GetTranslation" and step.parameter is None:
            choices = [Verb.translation(language) for language in sorted(languages)]
            if unspecified:
                choices.append(step)
            options.append(choices)
        else:
            options.append([step])
    relations = [Relation()]
    for choices in options:
        relations = [Relation((*r.steps, choice)) for r in relations for choice in choices]
    return relations


def _url(
    target: Target,
    relation: Relation,
    views: Views,
    *,
    filepath: str,
    file_list: bool,
) -> str | None:
    """CRIARPARURL: the item's URL, a file of it, or its file-list page."""
    metadata_format = next(
        (s.parameter for s in reversed(relation.steps) if s.name == "GetMetadata"), None
    )
    wants_metadata = bool(relation.steps) and relation.steps[-1].name == "GetMetadata"
    if target.inline_metadata_of is not None:
        return views.metadata_url(target.inline_metadata_of, metadata_format)
    if target.item is None:
        return target.url
    item = target.item
    if file_list:
        return views.file_list_url(item)
    if filepath:
        return views.file_url(item, filepath) if item.has_file(filepath) else None
    if wants_metadata and item.dc and (metadata_format == "oai_dc" or not item.files):
        return views.metadata_url(item, metadata_format)
    url = views.item_url(item)
    if url is None and item.dc:  # a metadata record with no file: its page is its content
        return views.metadata_url(item, metadata_format)
    return url


def make_url_list(
    label: str,
    *,
    holdings: Callable[[str], Item | None],
    identity: ArchiveIdentity,
    views: Views,
    relations: Iterable[Relation],
    filepath: str = "",
    file_list: bool = False,
    urlkey: Callable[[dict[str, str]], str],
) -> tuple[PairList, Item | None]:
    """The answer to ``urlRequest`` for ``label``, and the item it is about (if offered).

    ``urlkey(targets)`` issues the key, given each URL offered and the key of its item.
    """
    item = holdings(label)
    if item is None:
        return PairList(), None
    pairs: list[tuple[str, str | tuple[str, ...]]] = [
        ("archiveaddress", identity.address),
        ("ibi.archiveservice", tuple(identity.service.words())),
        ("ibi.platformsoftware", tuple(identity.platform.words()) if identity.platform else ()),
        ("ibi", tuple(item.ibi.words())),
    ]
    pairs += _transfer_record(item)
    if item.deleted:
        pairs += [("state", State.DELETED.value), ("timestamp", item.iso_timestamp)]
        return PairList(sorted(pairs)), item
    if item.next_edition is not None:
        pairs.append(("ibi.nextedition", tuple(item.next_edition.words())))
    if item.damaged:  # known, not offered: the resolver looks for a verified copy
        pairs += [("state", item.state.value), ("timestamp", item.iso_timestamp)]
        return PairList(sorted(pairs)), None
    evaluator = Evaluator(holdings)
    targets: dict[str, str] = {}
    seen: set[str] = {"ibi"}
    for relation in relations:
        target = evaluator.follow(item, relation)
        if target is None:
            partway = evaluator.partway(item, relation)
            name = Relation(relation.steps[: partway[0]]).pair_name("ibi") if partway else ""
            if partway is not None and name not in seen:
                pairs.append((name, tuple(partway[1].words())))
                seen.add(name)
            continue
        if target.ibi is not None and relation.pair_name("ibi") not in seen:
            pairs.append((relation.pair_name("ibi"), tuple(target.ibi.words())))
            seen.add(relation.pair_name("ibi"))
        url = _url(target, relation, views, filepath=filepath, file_list=file_list)
        if url is None or relation.pair_name("url") in seen:
            continue
        seen.add(relation.pair_name("url"))
        described = target.item or target.inline_metadata_of or item
        targets.setdefault(url, described.key)
        content_type = ContentType.METADATA if target.inline_metadata_of else described.content_type
        pairs += [
            (relation.pair_name("url"), url),
            (relation.pair_name("contenttype"), content_type.value),
            (relation.pair_name("state"), described.state.value),
            (relation.pair_name("timestamp"), described.iso_timestamp),
        ]
    if targets:
        pairs.append(("urlkey", urlkey(targets)))
    return PairList(sorted(pairs)), item


def _transfer_record(item: Item) -> list[tuple[str, str | tuple[str, ...]]]:
    """Where the original went, if this Archive released it in a transfer (issue 24): the
    extension pairs ``transfer.archiveservice`` and ``transfer.timestamp``."""
    if item.moved_to is None or item.moved_at is None or item.state is State.ORIGINAL:
        return []
    return record_pairs(item.moved_to.to_mapping(), iso_date(item.moved_at))


# ---------------------------------------------------------------------------- the service


class ProtocolStore(Protocol):
    """What answering the protocol reads and writes (``functions.archive.store``)."""

    def get(self, label: str) -> Item | None: ...
    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]: ...
    def spend_urlkey(self, urlkey: str, *, expires_at: int) -> bool: ...
    def claim_request(
        self, label: str, client: str, *, at: int, window: int, session_seconds: int
    ) -> bool | None: ...
    def count_access(self, label: str, *, month: str, unique: bool = False) -> int: ...


@dataclass(frozen=True, slots=True)
class ProtocolAnswer:
    """A pair list to answer, and what to count and log about it."""

    pairs: PairList
    metric: str | None = None
    event: str = ""  # what to log, with ``details``
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Client:
    """The client a urlRequest or an acknowledgment declares (Table 6.6): its addresses
    (``clientinformation.ipaddress``) and, when said, its User-Agent (issue 35)."""

    addresses: str
    user_agent: str | None = None  # None: not said (an older resolver)

    @classmethod
    def of(cls, query: dict[str, str]) -> Client:
        agent = query.get("clientinformation.useragent")
        addresses = query.get("clientinformation.ipaddress", "")
        return cls(addresses, agent[:MAX_USER_AGENT] if agent is not None else None)

    @property
    def robot(self) -> bool:
        """Whether the COUNTER-Robots list names its User-Agent a robot or a machine (a
        missing or one-character User-Agent is one); unknown when it is not said."""
        agent = self.user_agent
        return agent is not None and counter_robots.is_robot_or_machine(agent)

    @property
    def digest(self) -> str:
        """Who it is for the double-click and session rules: 128 bits of SHA-256 of its
        addresses and User-Agent (the table keeps this, never the addresses)."""
        said = f"ibi-usage-client-v1\x00{self.addresses}\x00{self.user_agent or ''}"
        return hashlib.sha256(said.encode()).hexdigest()[:32]


CONFIRMATION = ProtocolAnswer(PairList([("confirmation", "yes")]))
NOTICE = PairList([("notice", ("acknowledgment", "received"))])  # Algorithm 1, line 20
SUBJECTS = "servicesubject must be inclusionConfirmationRequest, urlRequest or acknowledgment"


class ProtocolService:
    """The Archive service protocol at this Archive's service IBI (spec §6)."""

    def __init__(
        self,
        store: ProtocolStore,
        *,
        identity: ArchiveIdentity,
        views: Views,
        clock: Callable[[], Decimal],
        urlkey_ttl_seconds: int,
        urlkeys: UrlKeys | None = None,
    ) -> None:
        self._store = store
        self.identity = identity
        self._views = views
        self._clock = clock
        self._ttl = urlkey_ttl_seconds
        # Without keys of its own (tests): a key for this process only.
        self._urlkeys = urlkeys or UrlKeys(RandomKeys())

    def is_service(self, label: str) -> bool:
        """Whether ``label`` is this Archive's service IBI (the protocol's address)."""
        return label == self.identity.service.key or label in self.identity.service.labels

    def answer(self, query_text: str) -> ProtocolAnswer:
        """The answer to a request at the service IBI, by its ``servicesubject``."""
        try:
            query = dict(parse_query(query_text))
        except InvalidInput as error:
            raise ProtocolError(str(error)) from None
        subject = query.get("servicesubject")
        if subject == "inclusionConfirmationRequest":
            return CONFIRMATION
        if subject == "urlRequest":
            return self.url_request(query)
        if subject == "acknowledgment":
            return self.acknowledge(query)
        raise ProtocolError(SUBJECTS)

    def url_request(self, query: dict[str, str]) -> ProtocolAnswer:
        """The URL list for the IBI asked, with a fresh urlkey when it names a URL."""
        if "clientinformation.ipaddress" not in query:
            raise ProtocolError("clientinformation.ipaddress is mandatory in urlRequest")
        try:
            label = Forms.of(query.get("parsedibiurl.ibi", "")).key
            verbs = parse_verb_list(query.get("parsedibiurl.verblist", ""))
            relation_for_verbs(verbs)  # an order Table 7.5 allows (one of the 14 modifiers)
        except InvalidInput as error:
            raise ProtocolError(f"{error}") from None
        profile, asked = self._store.profile_and_item(label)  # one round trip
        now = self._clock()

        def issue(targets: dict[str, str]) -> str:  # signed, not stored: no write
            # One URL (a plain resolution): the key is bound to it and to its item, so that
            # its acknowledgment is checked without reading the item (``acknowledge``).
            bound = next((key, url) for url, key in targets.items()) if len(targets) == 1 else None
            client = query["clientinformation.ipaddress"]  # its acknowledgment must declare it
            return self._urlkeys.issue(now, self.identity.service.key, bound, client=client)

        def holdings(wanted: str) -> Item | None:
            held = asked if wanted == label else self._store.get(wanted)
            return None if held is None or held.pending else held  # (an incoming transfer)

        pairs, item = make_url_list(
            label,
            holdings=holdings,
            identity=self.identity,
            views=self._views,
            relations=relations_for(verbs, profile.languages, profile.unspecified_language),
            filepath=query.get("parsedibiurl.filepath", "").strip("/"),
            file_list=wants_file_list(verbs),
            urlkey=issue,
        )
        pairs = with_holdings(pairs, item or asked, query)  # the holdings extension
        held = item is not None
        metric = "UrlRequestsHeld" if held else "UrlRequestsNotHeld"
        details: dict[str, object] = {"ibi": label, "held": held, "pairs": len(pairs)}
        if asked is not None and asked.damaged and not asked.deleted:
            metric, details["damaged"] = "UrlRequestsDamaged", list(asked.damaged)
        return ProtocolAnswer(pairs, metric, "urlRequest", details)

    def acknowledge(self, query: dict[str, str]) -> ProtocolAnswer:
        """The constant notice; one access counted per genuine, fresh urlkey, spent once, on
        the item the acknowledgment's ``ibi`` names and its ``url`` leads to, for the client
        the urlRequest declared, unless it is a robot's or a double-click (module notes)."""
        urlkey = query.get("urlkey", "")
        url = query.get("url", "")
        client = Client.of(query)
        if client.robot:  # before anything is read or written: robots cost nothing
            return ProtocolAnswer(NOTICE, "AcknowledgmentsRobots", "robot not counted", {})
        keys = _acknowledged_keys(query.get("ibi", ""))
        scope = self.identity.service.key
        now = self._clock()
        checked = (
            self._urlkeys.check_bound(
                urlkey,
                now,
                scope,
                self._ttl,
                [(key, url) for key in keys],
                client=client.addresses,
            )
            if urlkey
            else None
        )
        # A key bound to one of the items named, with this URL: this Archive offered that URL
        # for that item when it issued the key, so nothing is read; otherwise the item is read.
        went = checked[1] if checked is not None and checked[1] else None
        if checked is not None and went is None:
            went = self._went_to(keys, url)
        if (
            checked is None
            or went is None
            or not self._store.spend_urlkey(urlkey, expires_at=checked[0] + self._ttl)
        ):
            ignored: dict[str, object] = {"urlkey": urlkey[:40]}
            event = "acknowledgment ignored"
            return ProtocolAnswer(NOTICE, "AcknowledgmentsIgnored", event, ignored)
        at = int(now)
        unique = self._store.claim_request(
            went, client.digest, at=at, window=DOUBLE_CLICK_SECONDS, session_seconds=SESSION_SECONDS
        )
        if unique is None:  # this client's request for this item was counted just before
            details: dict[str, object] = {"ibi": went}
            return ProtocolAnswer(NOTICE, "AcknowledgmentsDoubleClicks", "double-click", details)
        # in all and in this month (UTC), the public usage figures (ibi/core/usage.py)
        count = self._store.count_access(went, month=month_of(now), unique=unique)
        details = {"ibi": went, "accesses": count}
        if not count:  # deleted since the key was issued
            return ProtocolAnswer(NOTICE, "AcknowledgmentsIgnored", "item gone", details)
        return ProtocolAnswer(NOTICE, "Acknowledgments", "acknowledged", details)

    def _went_to(self, keys: list[str], url: str) -> str | None:
        """The key of the item held here among ``keys`` whose URL the acknowledgment gives, as
        this Archive offers it now (for a urlkey issued with several URLs)."""
        for key in keys:
            item = self._store.get(key)
            if item is not None and item.usable and offers(item, url, self._views):
                return item.key
        return None


def _acknowledged_keys(ibi: str) -> list[str]:
    """The storage keys of the labels an acknowledgment's ``ibi`` names (``rep R ibip P`` or a
    label), at most :data:`MAX_ACKNOWLEDGED_LABELS`; malformed labels are skipped."""
    words = [w for w in ibi.split() if w not in {"rep", "ibip"}]
    keys: list[str] = []
    for label in words[:MAX_ACKNOWLEDGED_LABELS]:
        try:
            keys.append(Forms.of(label).key)
        except InvalidInput:
            continue
    return keys


def offers(item: Item, url: str, views: Views) -> bool:
    """Whether ``url`` is one this Archive offers for ``item`` (``_url``): the item's own URL,
    a file of it, its file list, its metadata page, or a translation known by its URL."""
    if not url:
        return False
    if url in {
        views.item_url(item),
        views.file_list_url(item),
        views.metadata_url(item, None),
        views.metadata_url(item, "oai_dc"),
    }:
        return True
    if any(t.ibi is None and t.url == url for t in item.translations):
        return True
    files = views.file_url(item, "")
    path = unquote(url[len(files) :]) if url.startswith(files) else ""
    return bool(path) and item.has_file(path) and views.file_url(item, path) == url
