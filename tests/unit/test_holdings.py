"""The holdings view (issue 12) over fakes: the extension's wire format, the Archive's side, the
resolver's view and verdict, its route and page, and the CLI (`ibi holdings`, and `ibi deposit`
for copies and file paths: items 1, 2 and 9 of issue 12).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from functions.archive.holdings import report_of, with_holdings
from functions.archive.model import Forms, Item, State, StoredFile, Translation
from functions.archive.protocol import ArchiveIdentity, ProtocolService
from functions.archive.views import ArchiveViews
from functions.resolver import handler, pages, wiring
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.holdings import HoldingsService, prefers_json
from functions.resolver.network import Outcome, Request
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi import client as ibi_client
from ibi.client import Raw
from ibi.core.errors import InvalidInput
from ibi.core.holdings import BUDGET, HeldFile, Link, Report, from_pairs, to_pairs
from ibi.core.pairlist import PairList, format_pair_list, parse_pair_list
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools import cli
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore
from tests.fakes_resolver import MemoryRegistry, ScriptedTransport
from tests.fuzzing import FUZZ, check_answer, event, path_segments, texts

A, B, C, D = "8JMKD3MGP8W/3FSUP4L", "J8LNKB5R7W/3FUQHC5", "LK47B6W/362SFKH", "8JMKD3MGP7W/3EPGUE5"
ITEM = "8JMKD3MGP8W/35MME4E"
ITEM_REP = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"
NEXT = "8JMKD3MGP8W/35MMLL8"
GOOD = hashlib.sha256(b"the original's bytes\n").hexdigest()
OTHER = hashlib.sha256(b"other bytes\n").hexdigest()


# ---------------------------------------------------------------------------- the wire format


def test_a_report_goes_through_pairs_unchanged() -> None:
    report = Report(
        state="Original",
        timestamp="2024-05-01T12:00:00Z",
        language="pt-BR",
        files=(HeldFile("Relatório Final.pdf", GOOD, 21), HeldFile("sub/b {x}.txt", OTHER, 12)),
        file_count=2,
        default_file="Relatório Final.pdf",
        metadata_formats=("free", "oai_dc"),
        metadata_oai_dc=Link(ibi={"ibip": NEXT}),
        translations={
            "en": Link(url="http://x.example/a b?c=1&d"),
            "es": Link(ibi={"rep": ITEM_REP}),
        },
        dc={"title": ("Um relatório", "A {report}"), "creator": ("Banon, G.",)},
        damaged=("sub/b {x}.txt",),
        damaged_count=1,
    )
    pairs = parse_pair_list(format_pair_list(to_pairs(report)))  # as sent, as read
    assert from_pairs(pairs) == report


def test_an_answer_without_the_extension_has_no_report() -> None:
    assert from_pairs(parse_pair_list("state Original\r\nurl http://a.example/x")) is None


def test_a_malformed_file_list_is_refused() -> None:
    with pytest.raises(InvalidInput):
        from_pairs(PairList([("holdings.state", "Copy"), ("holdings.files", ("a", "b"))]))


def test_a_report_stays_within_its_budget_and_says_it_was_cut() -> None:
    files = tuple(HeldFile(f"f{n:05d}-{'x' * 200}", GOOD, n) for n in range(2000))
    report = Report("Original", "2024-05-01T12:00:00Z", files=files, file_count=len(files))
    pairs = to_pairs(report)
    assert len(format_pair_list(pairs)) <= BUDGET + 200
    read = from_pairs(PairList(pairs))
    assert read is not None and read.truncated and read.file_count == 2000
    assert 0 < len(read.files) < 2000


# ---------------------------------------------------------------------------- the Archive side


def item(**changes: Any) -> Item:
    base: dict[str, Any] = {
        "ibi": Forms(rep=ITEM_REP, ibip=ITEM),
        "state": State.ORIGINAL,
        "timestamp": Decimal(1714564800),
        "language": "en",
        "files": (StoredFile("report.pdf", GOOD, 21), StoredFile("sub/b.txt", OTHER, 12)),
        "default_file": "report.pdf",
        "next_edition": Forms(ibip=NEXT),
        "translations": (Translation("pt-BR", url="https://x.example/pt"),),
        "dc": {"title": ("A report",)},
    }
    return Item(**{**base, **changes})


def protocol(*items: Item) -> ProtocolService:
    store = MemoryItemStore()
    for held in items:
        store.create(held)
    identity = ArchiveIdentity("archive.example.org", Forms(ibip=A))
    return ProtocolService(
        store,
        identity=identity,
        views=ArchiveViews("https://archive.example.org"),
        clock=FakeClock(Decimal(1795473000)),
        urlkey_ttl_seconds=600,
    )


def url_request(service: ProtocolService, ibi: str, *extra: str) -> PairList:
    query = "&".join(
        [
            "servicesubject=urlRequest",
            "clientinformation.ipaddress=1.2.3.4",
            f"parsedibiurl.ibi={ibi}",
            *extra,
        ]
    )
    return service.answer(query).pairs


def test_the_archive_reports_what_it_holds_when_asked() -> None:
    service = protocol(item())
    plain = url_request(service, ITEM)
    assert not [name for name in plain.names() if name.startswith("holdings.")]
    asked = url_request(service, ITEM_REP, "extension.holdings=yes")
    report = from_pairs(asked)
    assert report is not None and report.state == "Original" and report.language == "en"
    assert [f.path for f in report.files] == ["report.pdf", "sub/b.txt"]
    assert report.default_file == "report.pdf" and report.dc == {"title": ("A report",)}
    assert report.translations == {"pt-BR": Link(url="https://x.example/pt")}
    assert report.metadata_formats == ("free", "oai_dc")
    assert asked.words("ibi.nextedition") == ("ibip", NEXT)  # the protocol's own pair


def test_an_unlistable_item_reports_no_file() -> None:
    report = from_pairs(url_request(protocol(item(listable=False)), ITEM, "extension.holdings=yes"))
    assert report is not None and not report.listable and report.files == ()
    assert report.default_file is None


def test_a_tombstone_reports_what_was_there_and_an_unknown_ibi_nothing() -> None:
    gone = item().tombstone(Decimal(1714564900))
    answer = url_request(protocol(gone), ITEM, "extension.holdings=yes")
    report = from_pairs(answer)
    assert answer.word("state") == "Deleted" and report is not None
    assert report.state == "Deleted" and report.files == () and report.dc == gone.dc
    assert report.deleted_at == "2024-05-01T12:01:40Z"  # issue 28: the tombstone's 410 pages
    assert len(url_request(protocol(), ITEM, "extension.holdings=yes")) == 0


def test_a_damaged_item_is_offered_to_no_reader_but_its_holdings_say_where() -> None:
    damaged = item(damaged=("sub/b.txt",))
    assert with_holdings(PairList(), damaged, {}) == PairList()
    answer = with_holdings(PairList(), damaged, {"extension.holdings": "yes"})
    report = from_pairs(answer)
    assert "url" not in answer and answer.words("ibi") == ("rep", ITEM_REP, "ibip", ITEM)
    assert report is not None and report.damaged == ("sub/b.txt",) and report.damaged_count == 1
    hidden = report_of(item(listable=False, damaged=("sub/b.txt",)))
    assert hidden.damaged == () and hidden.damaged_count == 1  # no path of an unlisted item


# ---------------------------------------------------------------------------- the resolver's view


class ByItem(ScriptedTransport):
    """Scripted Archives answering by the IBI asked: ``items[archive][label]`` (pair-list text);
    an Archive missing from ``items`` times out."""

    def __init__(self, items: dict[str, dict[str, str]]) -> None:
        super().__init__(answers={})
        self.items = items
        self.asked: list[dict[str, str]] = []

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        if request is None:
            return Outcome.failed(key, "unusable address", 0.0)
        pairs = dict(request.pairs)
        self.asked.append(pairs)
        if key not in self.items:
            return Outcome.failed(key, "timeout", 1.0)
        text = self.items[key].get(pairs.get("parsedibiurl.ibi", ""), "")
        try:
            return Outcome.answered(key, parse_pair_list(text), 0.0)
        except InvalidInput as error:
            return Outcome.failed(key, f"malformed answer: {error}", 0.0)


def held(state: str, files: dict[str, str] | None = None, **more: str) -> str:
    """An Archive's answer with the holdings extension (``files``: path -> SHA-256)."""
    listed = " ".join(f"{path} {sha} 21" for path, sha in (files or {}).items())
    pairs = {
        "ibi": f"{{ibip {more.pop('ibi', ITEM)}}}",
        "state": state,
        "timestamp": "2024-05-01T12:00:00Z",
        "url": "https://x.example/item",
        "holdings.state": state,
        "holdings.timestamp": "2024-05-01T12:00:00Z",
        "holdings.listable": "yes",
        "holdings.files": f"{{{listed}}}",
        "holdings.filecount": str(len(files or {})),
        **more,
    }
    return "\r\n".join(f"{name} {value}" for name, value in pairs.items())


def view_of(items: dict[str, dict[str, str]], ibi: str = ITEM) -> tuple[dict[str, Any], ByItem]:
    registry = MemoryRegistry()
    for archive, host in ((A, "a"), (B, "b"), (C, "c"), (D, "d")):
        registry.add(archive, f"{host}.example:80")
    transport = ByItem(items)
    fanout = FanOut(transport, ArchiveDirectory(registry), timeout=1.0, deadline=3.0)
    view = HoldingsService(fanout, deadline=10.0).view(ibi, client_ips="1.2.3.4")
    return view.to_mapping(), transport


def test_three_archives_original_copy_next_edition_and_one_silent() -> None:
    view, transport = view_of(
        {
            A: {
                ITEM: held(
                    "Original", {"report.pdf": GOOD}, **{"ibi.nextedition": f"{{ibip {NEXT}}}"}
                )
            },
            B: {
                ITEM: held("Copy", {"report.pdf": GOOD}, **{"ibi.nextedition": f"{{ibip {NEXT}}}"})
            },
            C: {NEXT: held("Original", {"report.pdf": OTHER}, ibi=NEXT)},
        }
    )
    states = {h["archive"]: h["state"] for h in view["archives"]}
    assert states == {A: "Original", B: "Copy", C: "none", D: "unreachable"}
    verdict = view["verdict"]
    assert verdict["copies"] == [{"archive": B, "agrees": True, "differences": [], "note": None}]
    assert [e["ibi"] for e in verdict["edition_chain"]] == [ITEM, NEXT]
    assert verdict["edition_chain"][1]["holders"] == {C: "Original"}
    assert verdict["last_edition"] == NEXT and not verdict["conflict"]
    assert verdict["failed"] == [{"archive": D, "problem": "timeout"}]
    assert verdict["problems"] == [f"{D} did not answer: timeout"] and not verdict["ok"]
    # Every included Archive asked at once, with the extension; one round per edition.
    assert [sorted(r) for r in transport.rounds] == [sorted([A, B, C, D])] * 2
    assert all(asked["extension.holdings"] == "yes" for asked in transport.asked)


def test_a_copy_with_other_bytes_and_a_copy_with_another_next_edition_are_named() -> None:
    view, _ = view_of(
        {
            A: {
                ITEM: held(
                    "Original", {"report.pdf": GOOD}, **{"ibi.nextedition": f"{{ibip {NEXT}}}"}
                )
            },
            B: {ITEM: held("Copy", {"report.pdf": OTHER})},  # other bytes, and no next edition
            C: {
                ITEM: held(
                    "Copy",
                    {"report.pdf": GOOD, "extra.txt": GOOD},
                    **{"ibi.nextedition": f"{{ibip {NEXT}}}"},
                )
            },
            D: {},
        }
    )
    verdict = view["verdict"]
    checks = {c["archive"]: c for c in verdict["copies"]}
    assert checks[B]["agrees"] is False and "report.pdf: SHA-256" in checks[B]["differences"][0]
    assert checks[C]["agrees"] is False and checks[C]["differences"] == [
        "extra.txt: not in the original"
    ]
    assert verdict["edition_disagreements"] == [
        f"{B} (Copy) says next edition none; {A} (Original) says {NEXT}"
    ]
    assert any(f"the copy in {B} differs" in p for p in verdict["problems"])


def test_two_originals_are_a_conflict_and_nothing_is_compared() -> None:
    view, _ = view_of(
        {
            A: {ITEM: held("Original", {})},
            B: {ITEM: held("Original", {})},
            C: {ITEM: held("Copy", {})},
            D: {},
        }
    )
    verdict = view["verdict"]
    # Issue 24: A owns ITEM's prefix (its service IBI's), so B's claim is named, not believed.
    assert verdict["conflict"] and verdict["originals"] == [A]
    assert verdict["untrusted_originals"] == [B]
    assert verdict["problems"][0] == f"2 Archives claim the original: {A}, {B}"
    assert verdict["problems"][1].startswith(f"{B} claims the original, but the prefix is owned")
    assert verdict["copies"][0]["agrees"] is True  # compared with the owner's original


def test_an_archive_without_the_extension_is_shown_from_its_ordinary_answer() -> None:
    plain = (
        f"ibi {{ibip {ITEM}}}\r\nstate Copy\r\ntimestamp 2024-05-01T12:00:00Z\r\nurl https://b/x"
    )
    view, _ = view_of({A: {ITEM: held("Original", {"a": GOOD})}, B: {ITEM: plain}, C: {}, D: {}})
    copy = next(h for h in view["archives"] if h["archive"] == B)
    assert copy["state"] == "Copy" and copy["extension"] is False
    assert view["verdict"]["copies"][0]["agrees"] is None
    assert view["verdict"]["ok"]  # nothing wrong is known


def test_an_edition_loop_is_followed_once() -> None:
    loop = {
        ITEM: held("Original", {}, **{"ibi.nextedition": f"{{ibip {NEXT}}}"}),
        NEXT: held("Original", {}, ibi=NEXT, **{"ibi.nextedition": f"{{ibip {ITEM}}}"}),
    }
    view, transport = view_of({A: loop, B: {}, C: {}, D: {}})
    assert len(transport.rounds) == 2
    assert view["verdict"]["problems"] == [f"the edition chain loops back to {ITEM}"]


def test_nobody_holds_it() -> None:
    view, _ = view_of({A: {}, B: {}, C: {}, D: {}})
    assert view["verdict"]["problems"] == ["no Archive that answered holds this IBI"]


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("application/json", True),
        ("application/json, text/html;q=0.5", True),
        ("text/html,application/json;q=0.9", False),
        (None, False),
        ("*/*", False),
        ("application/json;q=0", False),
    ],
)
def test_json_by_accept(accept: str | None, wanted: bool) -> None:
    assert prefers_json(accept) is wanted


def test_the_page_escapes_everything_an_archive_says() -> None:
    evil = "<script>alert(1)</script>"
    view, _ = view_of(
        {
            A: {
                ITEM: held(
                    "Original", {"x%3Cscript%3E.pdf": GOOD}, **{"holdings.dc.title": "%3Cb%3E"}
                )
            },
            B: {ITEM: f"ibi {{ibip {ITEM}}}\r\nstate Copy\r\nurl javascript:alert(1)"},
            C: {},
            D: {},
        }
    )
    page = pages.holdings_page(view)
    assert "<script>" not in page and "&lt;script&gt;.pdf" in page
    assert 'href="javascript:' not in page and "javascript:alert(1)" in page  # shown, not linked
    assert evil not in pages.holdings_page({**view, "ibi": evil})
    assert f'href="/holdings/{NEXT}"' not in page


def test_alerts_of_a_resolution_link_the_holdings_view() -> None:
    page = pages.alert_page(409, "Two originals", "investigate", holdings=ITEM)
    assert f'href="/holdings/{ITEM}"' in page
    assert "/holdings/" not in pages.alert_page(400, "Malformed", "x")


def test_the_inspector_links_the_holdings_view() -> None:
    assert "'/holdings/' + body.label" in pages._SCRIPT
    page = pages.landing_page(resolver_name="r", service_ibi=RESOLVER_SERVICE_IBI, examples=[])
    assert pages._SCRIPT in page


# ---------------------------------------------------------------------------- the route


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ByItem]:
    """The real handler and registry (moto); three Archives registered, scripted answers."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(dynamodb, "resolver")
        pepper = tmp_path_factory.mktemp("holdings") / "pepper"
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(pepper)}
        )
        runtime = wiring.build(settings, dynamodb=dynamodb)
        scripted = ByItem(
            {
                A: {label: held("Original", {"report.pdf": GOOD}) for label in (ITEM, ITEM_REP)},
                B: {label: held("Copy", {"report.pdf": OTHER}) for label in (ITEM, ITEM_REP)},
                C: {},
            }
        )
        for name in ("vet", "send", "ask_all"):
            setattr(runtime.transport, name, getattr(scripted, name))
        wiring.install(runtime)
        for archive in (A, B, C):
            runtime.registry.register(archive, {"ibip": archive}, "hash")
            from functions.resolver.registry import Contact

            runtime.registry.include(
                archive,
                Contact(f"{archive[:4].lower()}.example.org", "HTTPS", "192.0.2.1", "x", "a@b"),
                at="2024-01-01T00:00:00Z",
                confirmed=True,
            )
        runtime.directory.forget()
        try:
            yield scripted
        finally:
            wiring.install(None)


def invoke(path: str, accept: str = "text/html") -> dict[str, Any]:
    request = event("GET", path, headers={"accept": accept})
    return check_answer(
        handler.lambda_handler, request, json_api=False, server_errors=frozenset({502, 503, 504})
    )


def test_the_route_answers_json_and_a_page(routed: ByItem) -> None:
    answer = invoke(f"/holdings/{ITEM}", "application/json")
    assert answer["statusCode"] == 200 and answer["headers"]["Content-Type"] == "application/json"
    view = json.loads(answer["body"])
    assert {h["archive"]: h["state"] for h in view["archives"]} == {
        A: "Original",
        B: "Copy",
        C: "none",
    }
    assert view["verdict"]["copies"][0]["agrees"] is False
    page = invoke(f"/holdings/{ITEM_REP}")
    assert page["statusCode"] == 200 and "differs" in page["body"]
    assert "script-src" in page["headers"]["Content-Security-Policy"]
    assert "<script" not in page["body"]  # the page needs no script


def test_a_path_that_is_no_single_ibi_is_a_persistent_url(routed: ByItem) -> None:
    answer = invoke(f"/holdings/{ITEM}/file.pdf")
    assert answer["statusCode"] == 400  # "holdings/…" is no IBI: resolved as any other path


@FUZZ
@given(
    rest=st.sampled_from([ITEM, ITEM_REP, NEXT]) | path_segments([ITEM, ITEM_REP]) | texts,
    answer=st.lists(
        st.sampled_from(
            [
                "holdings.state",
                "Copy",
                "holdings.files",
                "{",
                "}",
                "a",
                GOOD,
                "21",
                "holdings.dc.title",
                "holdings.translation(pt)",
                "url",
                "%ZZ",
            ]
        )
        | texts,
        max_size=12,
    ).map(" ".join),
    accept=st.sampled_from(["application/json", "text/html"]),
)
def test_whatever_archives_answer_the_holdings_route_never_fails(
    routed: ByItem, rest: str, answer: str, accept: str
) -> None:
    routed.items[C] = {ITEM: answer}
    try:
        invoke("/holdings/" + rest, accept)
    finally:
        routed.items[C] = {}


# ---------------------------------------------------------------------------- the CLI


def test_file_paths_are_kept_and_directories_give_their_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub" / "b.txt").write_text("b")
    files, default = cli.gather_files(["./a.txt", "sub/b.txt"])
    assert [f[0] for f in files] == ["a.txt", "sub/b.txt"] and default == "a.txt"
    site = tmp_path / "site"
    (site / "css").mkdir(parents=True)
    (site / "index.html").write_text("<p>")
    (site / "css" / "a.css").write_text("p{}")
    files, default = cli.gather_files([str(site)])
    assert [f[0] for f in files] == ["css/a.css", "index.html"] and default == "index.html"
    files, _ = cli.gather_files([str(tmp_path / "sub" / "b.txt"), "../" + tmp_path.name + "/a.txt"])
    assert [f[0] for f in files] == ["b.txt", "a.txt"]  # absolute, or climbing out: the name
    with pytest.raises(cli.CommandError, match="same path"):
        cli.gather_files(["a.txt", str(tmp_path / "a.txt")])


class Federation:
    """The resolver's holdings JSON and an Archive's deposit API, in memory (no socket)."""

    def __init__(self, original: dict[str, Any]) -> None:
        self.view: dict[str, Any] = {
            "ibi": ITEM,
            "archives": [original],
            "verdict": {"ok": True, "problems": [], "copies": [], "edition_chain": []},
        }
        self.calls: list[tuple[str, str, Any]] = []
        self.item: dict[str, Any] = {}

    def send(
        self, method: str, url: str, *, data: bytes = b"", headers: Any = None, timeout: float = 0
    ) -> Raw:
        split = urlsplit(url)
        body: Any = json.loads(data) if data and split.hostname != "s3.example" else None
        self.calls.append((method, split.path, body))
        if split.path.startswith("/holdings/"):
            return self._json(self.view)
        if split.path == "/api/copies":
            self.item = {"ibi": body["ibi"], "state": "Copy", "files": [], "urls": {"item": "u"}}
            return self._json(self.item, 201)
        if split.path == "/api/item/uploads":
            uploads = [
                {"path": f["path"], "method": "PUT", "url": "http://s3.example/x", "headers": {}}
                for f in body["files"]
            ]
            return self._json({"uploads": uploads})
        if split.hostname == "s3.example":
            return Raw(200, {}, b"")
        assert parse_qs(split.query)["ibi"]
        return self._json(self.item)

    @staticmethod
    def _json(body: Any, status: int = 200) -> Raw:
        return Raw(status, {"Content-Type": "application/json"}, json.dumps(body).encode())


REAL = {name: getattr(ibi_client, name) for name in ("ArchiveClient", "ResolverClient")}


def original_holding(**more: Any) -> dict[str, Any]:
    return {
        "archive": A,
        "address": "a.example",
        "state": "Original",
        "ibi": {"rep": ITEM_REP, "ibip": ITEM},
        "extension": True,
        "listable": True,
        "files": [{"path": "data.csv", "sha256": hashlib.sha256(b"a,b\n").hexdigest(), "size": 4}],
        "default_file": "data.csv",
        "language": "pt-BR",
        "dc": {"title": ["Dados"]},
        "next_edition": {"ibip": NEXT},
        "translations": {"en": {"ibi": {"ibip": "8JMKD3MGP8W/35MMLL9"}, "url": None}},
        "metadata": None,
        "metadata_oai_dc": {"ibi": {"ibip": "8JMKD3MGP8W/35MMLLA"}, "url": None},
        **more,
    }


def deposit(
    federation: Federation,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> tuple[int, str, str]:
    for name in ("ArchiveClient", "ResolverClient"):
        real = REAL[name]

        def made(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            return _real(*args, **{**kwargs, "transport": federation.send})

        monkeypatch.setattr(ibi_client, name, made)
    status = cli.main(["deposit", *argv, "--endpoint", "http://b.example", "--json"])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_copy_takes_the_originals_checksums_metadata_and_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "mine.csv"
    local.write_bytes(b"a,b\n")
    federation = Federation(original_holding())
    status, _, err = deposit(
        federation,
        monkeypatch,
        capsys,
        str(local),
        "--copy-of",
        ITEM,
        "--resolver",
        "http://r.example",
    )
    assert status == 0, err
    sent = {path: body for method, path, body in federation.calls if method == "POST"}
    copy = sent["/api/copies"]
    assert copy["ibi"] == {"rep": ITEM_REP, "ibip": ITEM}  # both forms: found by either
    assert copy["original_files"] == [
        {"path": "data.csv", "sha256": hashlib.sha256(b"a,b\n").hexdigest(), "size": 4}
    ]
    assert copy["language"] == "pt-BR" and copy["dc"] == {"title": ["Dados"]}
    assert [f["path"] for f in sent["/api/item/files"]["files"]] == ["data.csv"]  # the original's
    links = [body for method, path, body in federation.calls if path == "/api/item/links"]
    assert links == [
        {"next_edition": {"ibip": NEXT}},
        {"translation": {"language": "en", "ibi": {"ibip": "8JMKD3MGP8W/35MMLL9"}}},
        {"metadata": {"ibi": {"ibip": "8JMKD3MGP8W/35MMLLA"}, "format": "oai_dc"}},
    ]


def test_a_copy_of_other_bytes_is_refused_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "data.csv"
    local.write_bytes(b"other bytes\n")
    federation = Federation(original_holding())
    status, _, err = deposit(
        federation,
        monkeypatch,
        capsys,
        str(local),
        "--copy-of",
        ITEM,
        "--resolver",
        "http://r.example",
    )
    assert status == 1 and "not the original's bytes" in err
    assert [path for _, path, _ in federation.calls] == [f"/holdings/{ITEM}"]


def test_a_copy_needs_a_resolver_and_one_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "data.csv"
    local.write_bytes(b"a,b\n")
    monkeypatch.delenv("IBI_RESOLVER_URL", raising=False)
    status, _, err = deposit(
        Federation(original_holding()), monkeypatch, capsys, str(local), "--copy-of", ITEM
    )
    assert status == 2 and "--resolver" in err
    two = Federation(original_holding())
    two.view["archives"].append(original_holding(archive=B))
    status, _, err = deposit(
        two, monkeypatch, capsys, str(local), "--copy-of", ITEM, "--resolver", "http://r.example"
    )
    assert status == 1 and "2 Archives claim its original" in err


def test_a_copy_of_an_unlisted_original_warns_and_sends_no_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "data.csv"
    local.write_bytes(b"anything\n")
    federation = Federation(original_holding(listable=False, files=[]))
    status, _, err = deposit(
        federation,
        monkeypatch,
        capsys,
        str(local),
        "--copy-of",
        ITEM,
        "--resolver",
        "http://r.example",
    )
    assert status == 0 and "cannot be checked" in err
    copy = next(body for method, path, body in federation.calls if path == "/api/copies")
    assert (
        "original_files" not in copy and "original_sha256" not in copy and copy["listable"] is False
    )


def test_holdings_command_prints_the_view_and_fails_on_a_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    federation = Federation(original_holding())
    federation.view["verdict"] = {
        "ok": False,
        "problems": [f"{B} did not answer: timeout"],
        "copies": [],
        "edition_chain": [{"ibi": ITEM, "holders": {A: "Original"}, "next_edition": None}],
    }
    for name in ("ResolverClient",):
        real = getattr(ibi_client, name)
        monkeypatch.setattr(
            ibi_client, name, lambda *a, _r=real, **k: _r(*a, **{**k, "transport": federation.send})
        )
    status = cli.main(["holdings", ITEM_REP, "--resolver", "http://r.example"])
    out = capsys.readouterr().out
    assert status == 1
    assert f"Original    {A} a.example" in out and "data.csv" in out and "timeout" in out
    assert federation.calls[0][1] == f"/holdings/{ITEM_REP}"
    assert cli.main(["holdings", "not-an-ibi", "--resolver", "http://r.example"]) == 2
