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
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from functions.archive.errors import ProtocolError
from functions.archive.model import ContentType, Forms, Item, Profile, State
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, parse_query
from ibi.core.relations import Relation, Verb, parse_verb_list, wants_file_list

MAX_EDITION_HOPS = 64


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


def new_urlkey(now: Decimal) -> str:
    """``number "-" number`` with 10+ digits each (Table 5.1), fresh at every answer."""
    return f"{int(now):010d}-{secrets.randbelow(10**16):016d}"


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
        key = forms.key
        if key not in self._cache:
            self._cache[key] = self._holdings(key)
        item = self._cache[key]
        return None if item is None or item.deleted else item

    def follow(self, item: Item, relation: Relation) -> Target | None:
        target: Target | None = Target(ibi=item.ibi, item=item)
        for step in relation.steps:
            if target is None:
                return None
            target = self._step(target, step)
        return target

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
        link = (item.metadata_oai_dc or item.metadata) if format == "oai_dc" else item.metadata
        if link is not None:
            return Target(ibi=link, item=self.held(link))
        if item.dc:
            return Target(ibi=None, item=None, inline_metadata_of=item)
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
    urlkey: Callable[[], str],
) -> tuple[PairList, Item | None]:
    """The answer to ``urlRequest`` for ``label``, and the item it is about (if held)."""
    item = holdings(label)
    if item is None:
        return PairList(), None
    pairs: list[tuple[str, str | tuple[str, ...]]] = [
        ("archiveaddress", identity.address),
        ("ibi.archiveservice", tuple(identity.service.words())),
        ("ibi.platformsoftware", tuple(identity.platform.words()) if identity.platform else ()),
        ("ibi", tuple(item.ibi.words())),
    ]
    if item.deleted:
        pairs += [("state", State.DELETED.value), ("timestamp", item.iso_timestamp)]
        return PairList(sorted(pairs)), item
    if item.next_edition is not None:
        pairs.append(("ibi.nextedition", tuple(item.next_edition.words())))
    evaluator = Evaluator(holdings)
    has_url = False
    seen: set[str] = {"ibi"}
    for relation in relations:
        target = evaluator.follow(item, relation)
        if target is None:
            continue
        if target.ibi is not None and relation.pair_name("ibi") not in seen:
            pairs.append((relation.pair_name("ibi"), tuple(target.ibi.words())))
            seen.add(relation.pair_name("ibi"))
        url = _url(target, relation, views, filepath=filepath, file_list=file_list)
        if url is None or relation.pair_name("url") in seen:
            continue
        has_url = True
        seen.add(relation.pair_name("url"))
        described = target.item or target.inline_metadata_of or item
        content_type = ContentType.METADATA if target.inline_metadata_of else described.content_type
        pairs += [
            (relation.pair_name("url"), url),
            (relation.pair_name("contenttype"), content_type.value),
            (relation.pair_name("state"), described.state.value),
            (relation.pair_name("timestamp"), described.iso_timestamp),
        ]
    if has_url:
        pairs.append(("urlkey", urlkey()))
    return PairList(sorted(pairs)), item


# ---------------------------------------------------------------------------- the service


class ProtocolStore(Protocol):
    """What answering the protocol reads and writes (``functions.archive.store``)."""

    def get(self, label: str) -> Item | None: ...
    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]: ...
    def issue_urlkey(self, urlkey: str, label: str, *, expires_at: int) -> None: ...
    def use_urlkey(self, urlkey: str, *, now: int) -> str | None: ...
    def count_access(self, label: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ProtocolAnswer:
    """A pair list to answer, and what to count and log about it."""

    pairs: PairList
    metric: str | None = None
    event: str = ""  # what to log, with ``details``
    details: dict[str, object] = field(default_factory=dict)


CONFIRMATION = ProtocolAnswer(PairList([("confirmation", "yes")]))
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
    ) -> None:
        self._store = store
        self.identity = identity
        self._views = views
        self._clock = clock
        self._ttl = urlkey_ttl_seconds

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
            return self.acknowledge(query.get("urlkey", ""))
        raise ProtocolError(SUBJECTS)

    def url_request(self, query: dict[str, str]) -> ProtocolAnswer:
        """The URL list for the IBI asked, with a fresh urlkey when it names a URL."""
        if "clientinformation.ipaddress" not in query:
            raise ProtocolError("clientinformation.ipaddress is mandatory in urlRequest")
        try:
            label = Forms.of(query.get("parsedibiurl.ibi", "")).key
            verbs = parse_verb_list(query.get("parsedibiurl.verblist", ""))
        except InvalidInput as error:
            raise ProtocolError(f"{error}") from None
        profile, asked = self._store.profile_and_item(label)  # one round trip
        now = self._clock()

        def issue() -> str:
            key = new_urlkey(now)
            self._store.issue_urlkey(key, label, expires_at=int(now) + self._ttl)
            return key

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
        held = item is not None
        metric = "UrlRequestsHeld" if held else "UrlRequestsNotHeld"
        details = {"ibi": label, "held": held, "pairs": len(pairs)}
        return ProtocolAnswer(pairs, metric, "urlRequest", details)

    def acknowledge(self, urlkey: str) -> ProtocolAnswer:
        """Count an access, once per urlkey this Archive issued and that is still fresh."""
        label = self._store.use_urlkey(urlkey, now=int(self._clock())) if urlkey else None
        if label is None:
            raise ProtocolError("urlkey: not one this Archive issued recently (or used already)")
        count = self._store.count_access(label)
        pairs = PairList([("notice", ("acknowledgment", "received"))])
        details = {"ibi": label, "accesses": count}
        return ProtocolAnswer(pairs, "Acknowledgments", "acknowledged", details)
