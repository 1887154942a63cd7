"""Issue 34: one rule for whose word counts, proved differentially against a lying Archive.

A federation of three whole Archives in memory (``tests.fakes_archive.ArchiveNode``: their
items, files, deposit logic and protocol), each the owner of its own subsystem's prefix at the
resolver, holding originals, copies, an edition chain across them (X1 in a → X2 in b → X3 in
c, with an old copy of X2 in a made before X3 existed), a translation (in c) and a metadata
item (in b) of X1, a deleted item (a copy of it left in c), a file item, an IBI minted but
never deposited, and an item of a prefix no Archive owns (original in b, copy in c). The
resolver is the real one (``ResolvingService`` over the ``FanOut``, owner first, kept answers)
over a transport that hands each request to the Archives' protocol: no socket.

The answer of every persistent-URL form of every item is recorded — status, ``Location``, the
IBI ``cite-as`` names, the negotiated BibTeX — first with the honest federation. Then a
registered Archive that lies is added: Hypothesis generates each of its answers from the
protocol's pair grammar (every relation's ``ibi``/``url``/``state``/``contenttype``/
``timestamp``, ``ibi.nextedition``, ``transfer.*``, ``holdings.*``, deletions), pointing at its
own URLs and at the federation's real IBIs and service IBIs. Every answer must be the one
recorded (only ``IBI-Conflict`` may differ), with the owners fast (the liar never asked) and
slow (asked in the same round, after the owner's head start). Then archive-a is switched off:
its IBIs get the documented degraded answer (what it said last, ``IBI-Degraded``), recorded
without the liar, and the liar changes none of them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.resolver import negotiation
from functions.resolver.acknowledgments import Acknowledgments
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut, OwnerPace
from functions.resolver.kept import MemoryKept
from functions.resolver.network import Outcome, Request
from functions.resolver.resolving import Lookup, Redirect, Refusal, ResolvingService
from ibi.core.labels import IBI
from ibi.core.pairlist import encode_query, parse_pair_list
from ibi.core.persistent_url import parse_persistent_url
from ibi.core.relations import MODIFIERS
from tests.fakes_archive import ArchiveNode
from tests.fakes_resolver import MemoryRegistry, ScriptedTransport

LIAR_HOST = "liar.example.org"
LIAR_SERVICE = "D7N2UA7W/3EPGUE5"  # registered under its own prefix
IPS = {"a": "192.0.2.31", "b": "192.0.2.32", "c": "192.0.2.33"}
UNOWNED_IP = "192.0.2.99"  # a subsystem no registered Archive owns (b may create its originals)
DATE = Decimal(1790000000)
REPORT = {"report.txt": b"The report.\n"}
DATASET = {"report.txt": b"The data's notes.\n", "sub/data.csv": b"a,b\n1,2\n"}


def minted(ip: str, offset: int) -> str:
    ibi = IBI.build(DATE + offset, host="example.org", ip=ip)
    assert ibi.ibip is not None
    return ibi.ibip


def own_prefix(ip: str) -> str:
    from ibi.core.labels import parse_label

    return parse_label(minted(ip, 0)).prefix


class Federation:
    """Three Archives, their items, and the resolver in front of them (module notes)."""

    def __init__(self) -> None:
        self.nodes = {
            name: ArchiveNode(
                name,
                Decimal(1700000000 + 100 * n),
                own=(own_prefix(IPS[name]),) + ((own_prefix(UNOWNED_IP),) if name == "b" else ()),
                ip=IPS[name],
            )
            for n, name in enumerate("abc")
        }
        a, b, c = (self.nodes[n] for n in "abc")
        self.x1, self.d, self.n = minted(IPS["a"], 1), minted(IPS["a"], 2), minted(IPS["a"], 3)
        self.x2, self.m = minted(IPS["b"], 4), minted(IPS["b"], 5)
        self.x3, self.t, self.f = minted(IPS["c"], 6), minted(IPS["c"], 7), minted(IPS["c"], 8)
        self.u = minted(UNOWNED_IP, 9)
        dc = {"title": "The report", "creator": "Banon, Gerald"}
        a.original({"ibip": self.x1}, REPORT, dc=dc, language="en")
        b.copy({"ibip": self.x1}, REPORT, original_files=a.public_files(self.x1))
        b.original({"ibip": self.x2}, {"report.txt": b"Second edition.\n"}, dc={"title": "v2"})
        a.copy({"ibip": self.x2}, {"report.txt": b"Second edition.\n"},
               original_files=b.public_files(self.x2))  # fmt: skip
        c.original({"ibip": self.x3}, {"report.txt": b"Third edition.\n"}, dc={"title": "v3"})
        a.service.link(self.x1, {"next_edition": {"ibip": self.x2}})
        b.service.link(self.x2, {"next_edition": {"ibip": self.x3}})  # a's copy never learns it
        c.original({"ibip": self.t}, {"report.txt": b"O relatorio.\n"},
                   dc={"title": "O relatório"}, language="pt-BR")  # fmt: skip
        a.service.link(self.x1, {"translation": {"language": "pt-BR", "ibi": {"ibip": self.t}}})
        b.original({"ibip": self.m}, {}, dc={"title": "About the report", "creator": "INPE"})
        a.service.link(self.x1, {"metadata": {"ibi": {"ibip": self.m}}})
        a.original({"ibip": self.d}, REPORT, dc={"title": "Withdrawn"})
        c.copy({"ibip": self.d}, REPORT, original_files=a.public_files(self.d))
        a.service.delete(self.d, reason="Retracted")
        c.original({"ibip": self.f}, DATASET)
        b.original({"ibip": self.u}, REPORT, dc={"title": "Unowned"})
        c.copy({"ibip": self.u}, REPORT, original_files=b.public_files(self.u))
        self.registry = MemoryRegistry()
        for node in self.nodes.values():
            self.registry.add(node.service_ibi.ibip or "", node.address + ":443")
        self.transport = Protocols(self.nodes)
        self.kept = MemoryKept()
        self.slow = False

    def items(self) -> list[str]:
        return [self.x1, self.x2, self.x3, self.t, self.m, self.d, self.n, self.f, self.u]

    def add_liar(self, lie: Callable[[Mapping[str, str]], str]) -> None:
        self.registry.add(LIAR_SERVICE, LIAR_HOST + ":443")
        self.transport.liar = lie

    def switch_off(self, name: str) -> None:
        self.registry.exclude(self.nodes[name].service_ibi.ibip or "", at="2026-12-01T00:00:00Z")

    def service(self) -> ResolvingService:
        # Owners answer at once, or (slow) after their head start: everyone is asked too.
        self.transport.delays = dict.fromkeys(self.transport.answers, 0.0)
        if self.slow:
            self.transport.delays.update(
                {n.service_ibi.ibip or "": 1.5 for n in self.nodes.values()}
            )
        fanout = FanOut(
            self.transport,
            ArchiveDirectory(self.registry),
            timeout=3.0,
            deadline=10.0,
            grace=0.05,
            pace=OwnerPace(factor=2.0, floor=0.05, ceiling=1.0),
        )
        return ResolvingService(fanout, Acknowledgments(Queue(), fanout.directory), self.kept)


class Queue:
    def send(self, body: str) -> None:
        pass


class Protocols(ScriptedTransport):
    """Each request handed to its Archive's protocol (``ArchiveNode.protocol``), or to the
    liar's answer function."""

    def __init__(self, nodes: dict[str, ArchiveNode]) -> None:
        self.by_service = {node.service_ibi.ibip or "": node for node in nodes.values()}
        super().__init__(answers=dict.fromkeys([*self.by_service, LIAR_SERVICE], ""))
        self.liar: Callable[[Mapping[str, str]], str] | None = None

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        if request is None or settled:
            return super()._outcome(key, request, settled)
        query = dict(request.pairs)
        if key == LIAR_SERVICE:
            text = self.liar(query) if self.liar is not None else ""
        else:
            text = str(self.by_service[key].protocol.answer(encode_query(request.pairs)).pairs)
        return Outcome.answered(key, parse_pair_list(text), 0.0)


def forms(item: str) -> list[tuple[str, str | None]]:
    """Every persistent-URL form of ``item`` (path, Accept-Language)."""
    base = f"/{item}"
    paths = [base, *(base + m for m in MODIFIERS)]
    paths += [base + "+(pt-BR)", base + "+(pt-BR):", base + "!+(pt-BR)", base + "+(pt-BR)!"]
    paths += [
        base + "?ibiurl.requireditemstatus=Original",
        base + "!?ibiurl.requireditemstatus=Original",
    ]
    paths += [base + "?ibiurl.verblist=GetFileList", base + "/report.txt", base + "/sub/data.csv"]
    with_languages: list[tuple[str, str | None]] = [(p, None) for p in paths]
    return [*with_languages, (base + "+", "pt-BR"), (base + "+", "fr"), (base + "+:", "pt")]


Answer = tuple[int, str | None, str | None, str | None]


def answer_of(service: ResolvingService, path: str, language: str | None) -> Answer:
    """Status, Location, the IBI cite-as names, and the negotiated BibTeX."""
    url = parse_persistent_url(path)
    persistent = f"https://resolver.example.org{path}"
    plain = service.resolve(Lookup(url, persistent, "203.0.113.9", "r", language))
    cited = service.resolve(Lookup(url, persistent, "203.0.113.9", "r", language, holdings=True))
    bibtex = None
    if isinstance(cited, Redirect):
        record = negotiation.record_of(cited.pairs, persistent_url=cited.ibi, ibi=cited.ibi)
        bibtex = negotiation.render(negotiation.BIBTEX, record) if record else None
    if isinstance(plain, Refusal):
        return plain.alert.status, None, None, bibtex
    return 302, plain.url, plain.ibi, bibtex


def record(federation: Federation) -> dict[tuple[str, str | None], Answer]:
    service = federation.service()
    return {form: answer_of(service, *form) for item in federation.items() for form in forms(item)}


# -------------------------------------------------------------------------- the liar

RELATIONS = [
    "",
    ".lastedition",
    ".translation(pt-BR)",
    ".translation(fr)",
    ".metadata",
    ".metadata(oai_dc)",
    ".lastedition.metadata",
    ".translation(pt-BR).lastedition",
    ".lastedition.translation(pt-BR)",
    ".translation(pt-BR).metadata",
]
KINDS = ["ibi", "url", "state", "contenttype", "timestamp"]
OTHER_NAMES = [
    "ibi.nextedition",
    "transfer.archiveservice",
    "transfer.timestamp",
    "holdings.state",
    "holdings.files",
    "holdings.defaultfile",
    "holdings.deleted",
    "holdings.language",
    "holdings.dc.title",
    "urlkey",
    "archiveaddress",
]


def liar_strategy(federation: Federation) -> Callable[[st.DataObject], Callable[..., str]]:
    """The liar's answers: Hypothesis draws the pair names it answers with (any of the
    grammar's, shrunk to the few a failure needs) and a seed; each request then gets those
    pairs with values chosen from the federation's real IBIs and service IBIs, its own URLs
    and every state, the same for the same request."""
    labels = [*federation.items(), LIAR_SERVICE.replace("3EPGUE5", "35MMLL8")]
    services = [n.service_ibi.ibip or "" for n in federation.nodes.values()] + [LIAR_SERVICE]
    names = [f"{kind}{relation}" for kind in KINDS for relation in RELATIONS] + OTHER_NAMES
    files = ["{report.txt " + "ab" * 32 + " 12}", "{sub/data.csv " + "0" * 64 + " 1}"]

    def value(name: str, chance: random.Random) -> str:
        if name.startswith("transfer.archiveservice"):
            return f"{{ibip {chance.choice(services)}}}"
        if name.startswith("ibi"):
            return f"{{ibip {chance.choice(labels)}}}"
        if name.startswith("url") and name != "urlkey":
            return f"http://{LIAR_HOST}/col/{chance.randrange(100)}"
        if name.startswith(("state", "holdings.state")):
            return chance.choice(["Original", "Copy", "Deleted"])
        if name.startswith("contenttype"):
            return chance.choice(["Data", "Metadata"])
        if name == "holdings.files":
            return chance.choice(files)
        if name == "holdings.dc.title":
            return "{Lies}"
        if name == "urlkey":
            return "1234567890-1234567890"
        if name == "holdings.language":
            return chance.choice(["fr", "pt-BR"])
        if name == "holdings.defaultfile":
            return "report.txt"
        return "2026-01-01T00:00:00Z"

    def liar(data: st.DataObject) -> Callable[..., str]:
        chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=16, unique=True))
        seed = data.draw(st.integers(min_value=0, max_value=2**32))
        said: dict[str, str] = {}

        def lie(query: Mapping[str, str]) -> str:
            key = encode_query(sorted(query.items()))
            if key not in said:
                chance = random.Random(f"{seed} {key}")
                pairs = [name for name in chosen if chance.random() < 0.7]
                said[key] = "\n".join(f"{name} {value(name, chance)}" for name in pairs)
            return said[key]

        return lie

    return liar


FEDERATION = Federation()
HONEST = record(FEDERATION)
FEDERATION.slow = True
HONEST_SLOW = record(FEDERATION)
FEDERATION.slow = False


def test_the_honest_federation_answers_what_its_authorities_say() -> None:
    f = FEDERATION
    b, c = f.nodes["b"].address, f.nodes["c"].address
    assert HONEST == HONEST_SLOW  # the owners' pace changes nothing
    assert HONEST[(f"/{f.x1}!", None)][:3] == (302, f"https://{c}/col/{f.x3}/report.txt", f.x3)
    assert HONEST[(f"/{f.x2}!", None)][1] == f"https://{c}/col/{f.x3}/report.txt"
    assert HONEST[(f"/{f.x1}+(pt-BR)", None)][:3] == (302, f"https://{c}/col/{f.t}/report.txt", f.t)
    assert HONEST[(f"/{f.x1}+", "pt-BR")] == HONEST[(f"/{f.x1}+(pt-BR)", None)]
    assert HONEST[(f"/{f.x1}:", None)][2] == f.m and HONEST[(f"/{f.x1}:", None)][1].startswith(
        f"https://{b}/"
    )
    assert HONEST[(f"/{f.x1}+(pt-BR):", None)][2] == f.t  # the translation's metadata
    assert HONEST[(f"/{f.d}", None)][0] == 410  # a copy remains in c: still 410
    assert HONEST[(f"/{f.n}", None)][0] == 404
    assert HONEST[(f"/{f.u}", None)][1] == f"https://{b}/col/{f.u}/report.txt"
    assert HONEST[(f"/{f.f}/sub/data.csv", None)][1] == f"https://{c}/col/{f.f}/sub/data.csv"
    assert HONEST[(f"/{f.x1}", None)][3] is not None  # a BibTeX was negotiated


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(data=st.data(), slow=st.booleans())
def test_a_lying_archive_changes_no_answer(data: st.DataObject, slow: bool) -> None:
    f = Federation()
    f.slow = slow
    assert record(f) == HONEST  # the same federation, fresh: the same answers
    f.add_liar(liar_strategy(f)(data))
    lied = record(f)
    changed = {form: (HONEST[form], got) for form, got in lied.items() if got != HONEST[form]}
    assert not changed, changed
    assert not any((got[1] or "").startswith(f"http://{LIAR_HOST}") for got in lied.values())


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(data=st.data())
def test_with_the_authority_off_the_degraded_answer_is_never_the_liars(data: st.DataObject) -> None:
    f = Federation()
    assert record(f) == HONEST  # what each authority said is kept
    f.switch_off("a")
    degraded = record(f)
    x1 = f"/{f.x1}"
    assert degraded[(x1, None)][:3] == HONEST[(x1, None)][:3]  # what archive-a said last
    assert degraded[(f"/{f.x1}!", None)][1] == HONEST[(f"/{f.x1}!", None)][1]  # never X2's copy
    assert degraded[(f"/{f.d}", None)][0] == 410  # still deleted: its copy in c is not served
    f.add_liar(liar_strategy(f)(data))
    lied = record(f)
    changed = {form: (degraded[form], got) for form, got in lied.items() if got != degraded[form]}
    assert not changed, changed
    assert not any((got[1] or "").startswith(f"http://{LIAR_HOST}") for got in lied.values())


def test_a_degraded_answer_says_so() -> None:
    f = Federation()
    record(f)
    f.switch_off("a")
    service = f.service()
    url = parse_persistent_url(f"/{f.x1}!")
    answer = service.resolve(Lookup(url, f"https://r.example/{f.x1}!", "203.0.113.9", "r"))
    assert isinstance(answer, Redirect)
    a = f.nodes["a"].service_ibi.ibip
    assert answer.headers["IBI-Degraded"].startswith(f'authority-down; ibi="{f.x1}"; archive="{a}"')
