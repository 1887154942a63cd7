"""Settings → clients → stores → services: everything an Archive's request needs.

``build`` is pure (the clients are passed in); the runtime is held as every function holds its
own (functions/shared/runtime.py): ``runtime`` returns the installed one, or builds it once per
execution environment from the environment; ``install`` puts one in place (local mode and
tests), ``uninstall`` forgets it. AWS clients are made here, lazily, never at import.

The bootstrap is :meth:`Runtime.start`: it mints the Archive's service IBI the first time (with
the Archive's own idempotency key, so environments starting together get the same IBI), and
switches the Archive on at its resolver when so configured. Local mode runs it once before
serving; in AWS it runs once per execution environment, before the first request's route, and
a protocol request (the resolver's confirmation call) never starts a join.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger

from functions.archive.content import ContentService, FileStore, GoodCopy, Receivers
from functions.archive.copies import CopyChecks
from functions.archive.deposits import IdempotencyKeyReused
from functions.archive.errors import BadRequest, Unavailable
from functions.archive.issued import Issue, MintRecords
from functions.archive.links import LinkChecks, LinkItems
from functions.archive.model import Forms
from functions.archive.offers import OfferKeys, Sender
from functions.archive.protocol import ArchiveIdentity, ProtocolService
from functions.archive.service import ArchiveService, Minter
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore
from functions.archive.transfer import DepositApi
from functions.archive.urlkeys import UrlKeys
from functions.archive.views import ArchiveViews
from functions.shared.edge import clock as system_clock
from functions.shared.keys import FileKeys, KeySource, RandomKeys, SecretKeys
from functions.shared.runtime import Holder

logger = Logger(service="archive", child=True)

Joiner = Callable[[str, str, str], None]  # (base URL, address, service IBI) -> switched on


@dataclass(frozen=True, slots=True)
class Site:
    """The Archive as reached at its base URL: who it is, its pages, its protocol."""

    identity: ArchiveIdentity
    views: ArchiveViews
    content: ContentService
    protocol: ProtocolService
    links: LinkChecks  # the items' external URLs checked (links.py)


@dataclass
class Runtime:
    """Everything a request needs, built once per execution environment."""

    service: ArchiveService
    store: DynamoItemStore
    settings: ArchiveSettings
    clock: Callable[[], Decimal]
    files: FileStore | None = None
    join: Joiner | None = None
    receivers: Receivers | None = None
    urlkeys: UrlKeys | None = None  # None: a key of this process only
    offer_keys: OfferKeys | None = None  # the same keys, another context; None: this process's
    _site: Holder[Site] = field(default_factory=Holder, init=False, repr=False, compare=False)

    def start(self, base_url: str, *, join: bool = True) -> Site:
        """The bootstrap, once: the service item (minted the first time), then the join."""
        return self._site.get(
            lambda: self._bootstrap(base_url),
            then=self._join if join and self.join is not None else None,
        )

    @property
    def site(self) -> Site:
        site = self._site.peek()
        if site is None:
            raise RuntimeError("the Archive has not started: call Runtime.start(base_url)")
        return site

    def _bootstrap(self, base_url: str) -> Site:
        base = self.settings.base_url or base_url
        return self._site_at(base, self.service.bootstrap(base).ibi)

    def _join(self, site: Site) -> None:
        assert self.join is not None
        self.join(site.views.base_url, site.identity.address, site.identity.service.key)

    def _site_at(self, base: str, service: Forms) -> Site:
        identity = ArchiveIdentity(
            address=base.split("://", 1)[1], service=service, platform=self.settings.platform
        )
        resolver = self.settings.join_resolver_url or self.settings.resolver_url
        views = ArchiveViews(base, resolver)
        content = ContentService(
            self.service,
            views=views,
            files=self.files,
            serve_inline_bytes=self.settings.serve_inline_bytes,
            receivers=self.receivers or receivers(),
            offer_keys=self.offer_keys or OfferKeys(RandomKeys()),
            good_copy=good_copies(resolver, base, self.settings.allow_networks),
            copies=copy_checks(self.service, resolver, base, self.settings.allow_networks),
        )
        protocol = ProtocolService(
            self.store,
            identity=identity,
            views=views,
            clock=self.clock,
            urlkey_ttl_seconds=self.settings.urlkey_ttl_seconds,
            urlkeys=self.urlkeys,
        )
        links = link_checks(self.store, base, self.settings, self.clock)
        return Site(identity, views, content, protocol, links)


# ---------------------------------------------------------------------------- ports over HTTP


def mint_through(endpoint: str, subsystem: str | None) -> Minter:
    """Mint through the minting API (signed with SigV4 in AWS)."""
    from ibi.client import ApiError, MintingClient

    client = MintingClient(endpoint, timeout=20)

    def mint(requested: str | None, idempotency_key: str | None) -> Forms:
        try:
            answer = client.mint(
                subsystem=requested or subsystem, count=1, idempotency_key=idempotency_key
            )
        except ApiError as error:  # the depositor's mistake (400, 404, 422), else retry later
            if error.code == "IdempotencyKeyReused":  # the same key, another subsystem
                raise IdempotencyKeyReused(
                    f"the minting service refused: {error.message}"
                ) from None
            if error.status in {400, 404, 422}:
                raise BadRequest(f"the minting service refused: {error.message}") from None
            raise Unavailable(f"the minting service cannot mint now: {error}") from None
        ibi = answer["ibis"][0]
        return Forms(rep=ibi["rep"], ibip=ibi["ibip"])

    return mint


class MintRecordsThrough:
    """The mint record, read through the minting API (``GET /mints?ibi=``, signed in AWS)."""

    def __init__(self, endpoint: str) -> None:
        from ibi.client import MintingClient

        self._client = MintingClient(endpoint, timeout=10)

    def issue_of(self, label: str) -> Issue | None:
        from ibi.client import ApiError

        try:
            record = self._client.record_of(label)
        except ApiError as error:
            if error.status == 404 or error.code in {"NotRecorded", "UnknownSubsystem"}:
                return None  # no record holds it, or no subsystem of this service mints it
            raise Unavailable(f"the minting service cannot show its record now: {error}") from None
        return issue_from(record)


def issue_from(record: dict[str, Any]) -> Issue:
    """An :class:`Issue` from a record as ``GET /mints`` answers it."""
    return Issue(
        requester=str(record["requester"]),
        idempotency_key=record.get("idempotency_key"),
        ibis=tuple(Forms(rep=i.get("rep"), ibip=i.get("ibip")) for i in record["ibis"]),
    )


def switch_on(settings: ArchiveSettings, registration_key: Callable[[], str]) -> Joiner:
    """Switch this Archive on at its resolver (spec §4), once per execution environment.

    The resolver calls the Archive back, on another execution environment; a failure is
    logged and does not stop the Archive from serving (an administrator can `ibi archive on`).
    """
    resolver = settings.join_resolver_url
    assert resolver is not None

    def join(base: str, address: str, service_ibi: str) -> None:
        from ibi.client import ApiError, send_switch

        try:
            answer = send_switch(
                resolver,
                address=address,
                service_ibi=service_ibi,
                base_url=base,
                registration_key=registration_key(),
                on=True,
                resolver_service_ibi=settings.resolver_service_ibi,
                admin_email=settings.admin_email,
                timeout=10,
            )
            logger.info("switched on at the resolver", extra={"answer": " ".join(answer.split())})
        except (ApiError, OSError, RegistrationKeyUnavailable) as error:
            logger.warning(
                "could not switch on at the resolver", extra={"reason": str(error)[:200]}
            )

    return join


def receivers(allow_networks: tuple[str, ...] = (), resolver_url: str | None = None) -> Receivers:
    """Receiving Archives over the deposit API, reached only at public addresses (or those of
    ``allow_networks``), each call with a short timeout and no retry (transfer.py); where
    ``resolver_url``'s registry says each registered Archive is (registered.py: without a
    resolver, no original moves)."""
    from functions.archive.outbound import vetted_transport
    from functions.archive.registered import ResolverRegistry
    from functions.archive.transfer import RECEIVER_TIMEOUT
    from functions.shared.addresses import AddressPolicy

    policy = AddressPolicy(allow_networks)
    transport = vetted_transport(policy)
    registry = ResolverRegistry(resolver_url, policy) if resolver_url else None

    def connect(to: str) -> DepositApi:
        from ibi.client import ApiError, ArchiveClient

        try:
            return ArchiveClient(to, timeout=RECEIVER_TIMEOUT, retries=0, transport=transport)
        except ApiError as error:
            raise BadRequest(f'"to": {error.message}') from None

    def sender(base_url: str) -> Sender:
        from functions.archive.outbound import PublicArchive
        from ibi.client import ApiError

        try:
            return PublicArchive(base_url, policy)
        except ApiError as error:
            raise BadRequest(f"the offer's sender: {error.message}") from None

    return Receivers(connect=connect, senders=sender, registry=registry)


def good_copies(
    resolver_url: str | None, base_url: str, allow_networks: tuple[str, ...] = ()
) -> GoodCopy | None:
    """Whether the resolver this Archive joins leads to a good copy elsewhere (asked for the
    first reader of a damaged file, under the transfers' address rules); None: no resolver."""
    if not resolver_url:
        return None
    from functions.archive.outbound import ResolverHoldings
    from functions.shared.addresses import AddressPolicy

    return ResolverHoldings(resolver_url, base_url, AddressPolicy(allow_networks)).elsewhere


def copy_checks(
    archive: ArchiveService,
    resolver_url: str | None,
    base_url: str,
    allow_networks: tuple[str, ...] = (),
) -> CopyChecks:
    """Copies checked against their originals, as the resolver this Archive joins shows them
    (its holdings view, under the transfers' address rules); no resolver: all unverified."""
    if not resolver_url:
        return CopyChecks(None, archive.now)
    from functions.archive.copies import CHECK_TIMEOUT, through_resolver
    from functions.archive.outbound import ResolverHoldings
    from functions.shared.addresses import AddressPolicy

    holdings = ResolverHoldings(resolver_url, base_url, AddressPolicy(allow_networks))
    originals = through_resolver(functools.partial(holdings.view, timeout=CHECK_TIMEOUT))
    return CopyChecks(originals, archive.now)


def link_checks(
    store: LinkItems,
    base_url: str,
    settings: ArchiveSettings,
    clock: Callable[[], Decimal] = system_clock,
) -> LinkChecks:
    """The checks of the items' external URLs (``links.py``): requests to public addresses only
    (or those of ``allow_networks``; only those of ``link_check_networks`` when it is set),
    paced per host, with ibi's link checker's User-Agent."""
    import time

    from functions.archive.links import MAX_READ_BYTES, USER_AGENT, LinkChecker
    from functions.archive.outbound import LinkFetcher
    from functions.shared.addresses import AddressPolicy

    only = settings.link_check_networks
    policy = AddressPolicy(only or settings.allow_networks, public=only is None)
    fetch = LinkFetcher(policy, user_agent=USER_AGENT, max_read=MAX_READ_BYTES)
    checker = LinkChecker(fetch, clock=clock, sleep=time.sleep)
    return LinkChecks(store, checker, base_url=base_url, clock=clock)


def urlkey_source(settings: ArchiveSettings, secretsmanager: Any = None) -> KeySource:
    """Where the urlkeys' HMAC keys come from: the secret, else the file, else this process."""
    if settings.urlkey_secret_arn:
        if secretsmanager is None:
            raise ValueError("IBI_URLKEY_SECRET_ARN needs a Secrets Manager client")
        return SecretKeys(secretsmanager, settings.urlkey_secret_arn)
    if settings.urlkey_secret_file:
        return FileKeys(settings.urlkey_secret_file)
    return RandomKeys()


class RegistrationKeyUnavailable(RuntimeError):
    """The registration key's parameter could not be read: missing, not allowed, its KMS key
    not usable by the role. The Archive keeps serving; it is not switched on."""


def parameter_reader(ssm: Any, name: str) -> Callable[[], str]:
    """Read SecureString ``name`` (the registration key) when it is needed."""
    from botocore.exceptions import BotoCoreError, ClientError

    def read() -> str:
        try:
            answer = ssm.get_parameter(Name=name, WithDecryption=True)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "ClientError")
            raise RegistrationKeyUnavailable(f"SSM parameter {name}: {code}") from error
        except BotoCoreError as error:
            raise RegistrationKeyUnavailable(f"SSM parameter {name}: {error}") from error
        return str(answer["Parameter"]["Value"]).strip()

    return read


# ---------------------------------------------------------------------------- the runtime


def build(
    settings: ArchiveSettings,
    *,
    dynamodb: Any,
    s3: Any = None,
    registration_key: Callable[[], str] | None = None,
    mint: Minter | None = None,
    mint_records: MintRecords | None = None,
    clock: Callable[[], Decimal] = system_clock,
    secretsmanager: Any = None,
) -> Runtime:
    """The runtime over these clients; ``mint`` and ``mint_records`` default to the settings'
    minting API."""
    store = DynamoItemStore(dynamodb, settings.table)
    if mint is None and settings.mint_endpoint:
        mint = mint_through(settings.mint_endpoint, settings.mint_subsystem)
    if mint_records is None and settings.mint_endpoint:
        mint_records = MintRecordsThrough(settings.mint_endpoint)
    files: FileStore | None = None
    if s3 is not None and settings.bucket:
        from functions.archive.files import S3FileStore

        files = S3FileStore(s3, settings.bucket)
    joining = bool(settings.join_resolver_url) and registration_key is not None
    keys = urlkey_source(settings, secretsmanager)  # urlkeys and offers, distinct contexts
    return Runtime(
        service=ArchiveService(
            store,
            clock=clock,
            mint=mint,
            name=settings.table,
            own_prefixes=settings.subsystem_prefixes,
            mint_records=mint_records,
            principal=settings.principal,
        ),
        store=store,
        settings=settings,
        clock=clock,
        files=files,
        join=switch_on(settings, registration_key) if joining and registration_key else None,
        receivers=receivers(
            settings.allow_networks, settings.join_resolver_url or settings.resolver_url
        ),
        # Read when the first urlkey is issued or checked, once per execution environment.
        urlkeys=UrlKeys(keys),
        offer_keys=OfferKeys(keys),
    )


def from_environment() -> Runtime:
    """The runtime of an execution environment in AWS, its clients made now."""
    from botocore.config import Config

    from ibi.aws import aws_client

    settings = ArchiveSettings.from_environment()
    # SigV4 presigning signs the length and checksum of uploads (SigV2 would not).
    s3 = aws_client("s3", config=Config(signature_version="s3v4")) if settings.bucket else None
    parameter = settings.registration_key_parameter
    key = parameter_reader(aws_client("ssm"), parameter) if parameter else None
    secrets = aws_client("secretsmanager") if settings.urlkey_secret_arn else None
    return build(
        settings,
        dynamodb=aws_client("dynamodb"),
        s3=s3,
        registration_key=key,
        secretsmanager=secrets,
    )


holder: Holder[Runtime] = Holder(from_environment)
runtime = holder.get  # the installed runtime; else one built from the environment, once
install = holder.install  # put a runtime in place for every request from now on
uninstall = holder.reset  # forget it (tests, SnapStart's restore)
