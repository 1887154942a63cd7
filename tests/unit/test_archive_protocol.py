"""MAKEURLLIST and FILTER against seed 001's Examples 7.2-7.12 and 8.1-8.2."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import quote

import pytest

from functions.archive.model import ContentType, Forms, Item, State, StoredFile, Translation
from functions.archive.protocol import ArchiveIdentity, make_url_list, relations_for
from ibi.core.pairlist import PairList, parse_pair_list
from ibi.core.relations import Relation, parse_relation, parse_verb_list

SHA = "0" * 64
ADDRESS = "mtc-m16c.sid.inpe.br"
IDENTITY = ArchiveIdentity(
    address=ADDRESS,
    service=Forms(rep="sid.inpe.br/mtc-m18@80/2008/03.17.15.17"),
    platform=Forms(rep="dpi.inpe.br/banon/1998/08.02.08.56"),
)


def ts(iso: str) -> Decimal:
    from datetime import datetime

    return Decimal(int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()))


class URLibViews:
    """URLs shaped like URLib's (seed 001 examples)."""

    def item_url(self, item: Item) -> str | None:
        if item.external_url:
            return item.external_url
        main = item.main_file
        return self.file_url(item, main.path) if main else None

    def file_url(self, item: Item, path: str) -> str:
        return f"http://{ADDRESS}/col/{item.ibi.rep}/doc/{quote(path)}"

    def file_list_url(self, item: Item) -> str:
        return f"http://{ADDRESS}/displaydoccontent.cgi/{item.key}?displaytype=FileList"

    def metadata_url(self, item: Item, format: str | None) -> str:
        url = f"http://{ADDRESS}/col/{item.ibi.rep}/doc/metadata.cgi"
        return url + ("?choice=oai_dc" if format == "oai_dc" else "")


ITEM = Item(
    ibi=Forms(rep="sid.inpe.br/mtc-m18@80/2009/07.21.13.23", ibip="8JMKD3MGP8W/35MME4E"),
    state=State.ORIGINAL,
    timestamp=ts("2009-07-21T13:23:45Z"),
    language="en",
    files=(StoredFile("CCSDS 643.0-B-1.pdf", SHA, 10),),
    default_file="CCSDS 643.0-B-1.pdf",
    metadata=Forms(rep="sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47"),
    translations=(Translation("pt", Forms(rep="sid.inpe.br/mtc-m18@80/2009/08.25.19.43")),),
)
METADATA = Item(
    ibi=Forms(rep="sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47"),
    state=State.ORIGINAL,
    timestamp=ts("2014-04-04T17:39:54Z"),
    content_type=ContentType.METADATA,
    dc={"title": ("CCSDS 643.0-B-1",)},
)
TRANSLATION = Item(
    ibi=Forms(rep="sid.inpe.br/mtc-m18@80/2009/08.25.19.43"),
    state=State.ORIGINAL,
    timestamp=ts("2011-09-22T14:45:11Z"),
    language="pt",
    files=(StoredFile("RTC-07.pdf", SHA, 10),),
)
REPORT = Item(  # LK47B6W/362SFKH, Examples 7.9-7.12
    ibi=Forms(rep="iconet.com.br/banon/2009/09.09.22.01", ibip="LK47B6W/362SFKH"),
    state=State.ORIGINAL,
    timestamp=ts("2009-09-09T22:01:00Z"),
    files=(StoredFile("@relatorio.pdf", SHA, 1), StoredFile("reference.bib", SHA, 1)),
    default_file="@relatorio.pdf",
)


def holdings(*items: Item):  # type: ignore[no-untyped-def]
    index = {label: item for item in items for label in item.ibi.labels}
    return lambda label: index.get(Forms.of(label).key) or index.get(label)


def answer(label: str, *items: Item, relations: list[Relation], **options: object) -> PairList:
    pairs, _ = make_url_list(
        label,
        holdings=holdings(*items),
        identity=IDENTITY,
        views=URLibViews(),
        relations=relations,
        urlkey=lambda targets: "1426387214-9164566186556927",
        **options,  # type: ignore[arg-type]
    )
    # What goes on the wire must read back as the same pair list.
    assert parse_pair_list(str(pairs)) == pairs
    return pairs


EXAMPLE_7_2_RELATIONS = [
    parse_relation(text)
    for text in (
        "",
        ".lastedition",
        ".lastedition.metadata",
        ".lastedition.metadata(oai_dc)",
        ".metadata",
        ".metadata(oai_dc)",
        ".metadata.translation",
        ".translation(en)",
        ".translation(pt)",
    )
]


def test_example_7_2_make_url_list() -> None:
    pairs = answer(
        "8JMKD3MGP8W/35MME4E", ITEM, METADATA, TRANSLATION, relations=EXAMPLE_7_2_RELATIONS
    )
    doc = f"http://{ADDRESS}/col/sid.inpe.br/mtc-m18@80/2009/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf"
    meta = f"http://{ADDRESS}/col/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47/doc/metadata.cgi"
    assert pairs.word("archiveaddress") == ADDRESS
    assert pairs.words("ibi") == ("rep", ITEM.ibi.rep, "ibip", ITEM.ibi.ibip)
    assert pairs.words("ibi.archiveservice") == ("rep", "sid.inpe.br/mtc-m18@80/2008/03.17.15.17")
    assert pairs.words("ibi.platformsoftware") == ("rep", "dpi.inpe.br/banon/1998/08.02.08.56")
    assert (
        pairs.word("url")
        == doc
        == pairs.word("url.lastedition")
        == pairs.word("url.translation(en)")
    )
    assert pairs.word("url.metadata") == meta == pairs.word("url.lastedition.metadata")
    assert pairs.word("url.metadata(oai_dc)") == meta + "?choice=oai_dc"
    assert pairs.word("url.lastedition.metadata(oai_dc)") == meta + "?choice=oai_dc"
    assert pairs.word("url.metadata.translation") == meta
    assert pairs.word("url.translation(pt)").endswith("/2009/08.25.19.43/doc/RTC-07.pdf")
    assert pairs.words("ibi.translation(pt)") == ("rep", "sid.inpe.br/mtc-m18@80/2009/08.25.19.43")
    assert (
        pairs.words("ibi.lastedition") == pairs.words("ibi") == pairs.words("ibi.translation(en)")
    )
    assert pairs.words("ibi.metadata(oai_dc)") == ("rep", METADATA.ibi.rep)
    for relation in EXAMPLE_7_2_RELATIONS:
        assert pairs.word(relation.pair_name("state")) == "Original"
    assert pairs.word("contenttype") == "Data" and pairs.word("contenttype.metadata") == "Metadata"
    assert pairs.word("timestamp") == "2009-07-21T13:23:45Z"
    assert pairs.word("timestamp.lastedition.metadata") == "2014-04-04T17:39:54Z"
    assert pairs.word("timestamp.translation(pt)") == "2011-09-22T14:45:11Z"
    assert pairs.word("urlkey") == "1426387214-9164566186556927"
    assert "ibi.nextedition" not in pairs
    assert list(pairs.names()) == sorted(pairs.names())  # ordered as in the seed
    assert len([n for n in pairs.names() if n.startswith("url.") or n == "url"]) == 9


def test_example_7_3_filter_get_translation() -> None:
    relations = relations_for(parse_verb_list("GetTranslation"), {"en", "pt"}, unspecified=True)
    pairs = answer("8JMKD3MGP8W/35MME4E", ITEM, METADATA, TRANSLATION, relations=relations)
    assert set(pairs.names()) == {
        "archiveaddress",
        "contenttype.translation(en)",
        "contenttype.translation(pt)",
        "ibi",
        "ibi.archiveservice",
        "ibi.platformsoftware",
        "ibi.translation(en)",
        "ibi.translation(pt)",
        "state.translation(en)",
        "state.translation(pt)",
        "timestamp.translation(en)",
        "timestamp.translation(pt)",
        "url.translation(en)",
        "url.translation(pt)",
        "urlkey",
    }


def test_example_7_9_to_7_12_urls() -> None:
    itself = [Relation()]
    base = f"http://{ADDRESS}/col/iconet.com.br/banon/2009/09.09.22.01/doc/"
    assert (
        answer("LK47B6W/362SFKH", REPORT, relations=itself).word("url") == base + "%40relatorio.pdf"
    )
    with_path = answer("LK47B6W/362SFKH", REPORT, relations=itself, filepath="reference.bib")
    assert with_path.word("url") == base + "reference.bib"
    listing = answer(
        "LK47B6W/362SFKH", REPORT, relations=itself, filepath="reference.bib", file_list=True
    )  # GetFileList wins over the path
    assert listing.word("url") == (
        f"http://{ADDRESS}/displaydoccontent.cgi/LK47B6W/362SFKH?displaytype=FileList"
    )
    missing = answer("LK47B6W/362SFKH", REPORT, relations=itself, filepath="nope.txt")
    assert "url" not in missing and "urlkey" not in missing and "ibi" in missing


def test_either_form_and_any_case_finds_the_item() -> None:
    for label in ("iconet.com.br/banon/2009/09.09.22.01", "lk47b6w/362sfkh"):
        assert answer(label, REPORT, relations=[Relation()]).word("state") == "Original"


def test_unknown_ibi_is_an_empty_answer() -> None:
    assert len(answer("LK47B6W/362SFKH", ITEM, relations=[Relation()])) == 0


def test_deleted_item_answers_its_tombstone() -> None:
    deleted = REPORT.tombstone(ts("2020-01-02T03:04:05Z"))
    pairs = answer("LK47B6W/362SFKH", deleted, relations=[Relation()])
    assert set(pairs.names()) == {
        "archiveaddress",
        "ibi",
        "ibi.archiveservice",
        "ibi.platformsoftware",
        "state",
        "timestamp",
    }
    assert pairs.word("state") == "Deleted" and pairs.word("timestamp") == "2020-01-02T03:04:05Z"


def test_example_8_2_the_chain_of_editions_leaves_the_archive() -> None:
    first = Item(
        ibi=Forms(rep="sid.inpe.br/mtc-m18@80/2009/07.21.14.43", ibip="8JMKD3MGP8W/35MMLL8"),
        state=State.ORIGINAL,
        timestamp=ts("2009-07-21T14:43:31Z"),
        files=(StoredFile("CCSDS 650.0-B-1.pdf", SHA, 1),),
        next_edition=Forms(rep="sid.inpe.br/mtc-m18/2012/07.12.18.08"),
    )
    relation = relations_for(parse_verb_list("GetLastEdition GetMetadata(oai_dc)"), set(), False)
    assert [str(r) for r in relation] == [".lastedition.metadata(oai_dc)"]
    pairs = answer("8JMKD3MGP8W/35MMLL8", first, relations=relation)
    assert set(pairs.names()) == {
        "archiveaddress",
        "ibi",
        "ibi.archiveservice",
        "ibi.nextedition",
        "ibi.platformsoftware",
    }
    assert pairs.words("ibi.nextedition") == ("rep", "sid.inpe.br/mtc-m18/2012/07.12.18.08")

    second = Item(  # the Archive that holds the next edition and its oai_dc metadata
        ibi=Forms(rep="sid.inpe.br/mtc-m18/2012/07.12.18.08", ibip="8JMKD3MGP8W/3C9EP6P"),
        state=State.ORIGINAL,
        timestamp=ts("2012-07-12T18:08:00Z"),
        metadata_oai_dc=Forms(rep="sid.inpe.br/mtc-m18/2012/07.12.18.08.49"),
    )
    oai = Item(
        ibi=Forms(rep="sid.inpe.br/mtc-m18/2012/07.12.18.08.49"),
        state=State.ORIGINAL,
        timestamp=ts("2014-04-04T17:36:01Z"),
        content_type=ContentType.METADATA,
        dc={"title": ("x",)},
    )
    pairs = answer("sid.inpe.br/mtc-m18/2012/07.12.18.08", second, oai, relations=relation)
    assert pairs.word("url.lastedition.metadata(oai_dc)") == (
        f"http://{ADDRESS}/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/metadata.cgi?choice=oai_dc"
    )
    assert pairs.word("contenttype.lastedition.metadata(oai_dc)") == "Metadata"
    assert pairs.word("timestamp.lastedition.metadata(oai_dc)") == "2014-04-04T17:36:01Z"
    assert pairs.words("ibi.lastedition.metadata(oai_dc)") == ("rep", oai.ibi.rep)
    assert "urlkey" in pairs


def test_last_edition_followed_inside_the_archive() -> None:
    v1 = REPORT
    v2 = Item(
        ibi=Forms(ibip="LK47B6W/362SFKJ"),
        state=State.ORIGINAL,
        timestamp=REPORT.timestamp + 1,
        files=(StoredFile("v2.pdf", SHA, 1),),
    )
    v1 = Item(**{**{f: getattr(v1, f) for f in v1.__dataclass_fields__}, "next_edition": v2.ibi})
    pairs = answer("LK47B6W/362SFKH", v1, v2, relations=[parse_relation(".lastedition")])
    assert pairs.words("ibi.lastedition") == ("ibip", "LK47B6W/362SFKJ")
    assert pairs.word("url.lastedition") == f"http://{ADDRESS}/col/None/doc/v2.pdf"


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [("pt", "RTC-07.pdf"), ("pt-BR", None), ("en", "CCSDS%20643.0-B-1.pdf"), ("fr", None)],
)
def test_translation_languages(wanted: str, expected: str | None) -> None:
    relation = relations_for(parse_verb_list(f"GetTranslation({wanted})"), {"en", "pt"}, False)
    pairs = answer("8JMKD3MGP8W/35MME4E", ITEM, TRANSLATION, relations=relation)
    url = pairs.word(f"url.translation({wanted})")
    assert (url.rsplit("/", 1)[-1] if url else None) == expected
