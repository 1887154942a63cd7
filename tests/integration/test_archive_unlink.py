"""``DELETE /api/item/links``: a link removed through the handler, over moto and the local tables,
recorded in the item's history; what the protocol then answers for the related item."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from functions.archive.wiring import Runtime
from tests.integration import test_archive_handler as handler
from tests.integration.test_archive_handler import ITEM, Invoke, body, deposit, pairs

# The handler tests' fixtures: the Archive over moto and over the local tables.
service_forms, runtime, invoke = handler.service_forms, handler.runtime, handler.invoke

NEXT = "8JMKD3MGP8W/35MMLL9"


def unlink(invoke: Invoke, query: str) -> dict[str, Any]:
    """``DELETE /api/item/links?ibi=ITEM&<query>`` (the recorded event, its query changed)."""
    raw = f"ibi={ITEM}&{query}".rstrip("&")
    return invoke(
        "unlink_translation.json",
        rawQueryString=raw,
        queryStringParameters=dict(parse_qsl(raw)),
    )


def link(invoke: Invoke, link_body: str) -> dict[str, Any]:
    return invoke("link_translation.json", body=link_body)


def test_a_removed_translation_is_gone_and_recorded_in_the_history(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    assert body(invoke("link_translation.json"))["translations"]
    answer = invoke("unlink_translation.json")
    assert answer["statusCode"] == 200, answer["body"]
    item = body(answer)
    assert item["translations"] == []
    (entry,) = item["history"]
    assert entry["action"] == "unlinked" and entry["by"].startswith("arn:aws:sts::")
    assert entry["reason"] == "the translation into pt, 8JMKD3MGP8W/35MMLL8, removed"
    stored = body(invoke("get_item.json"))
    assert stored["translations"] == [] and stored["history"] == item["history"]


def test_a_removed_next_edition_is_no_longer_answered(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    assert body(link(invoke, f'{{"next_edition": "{NEXT}"}}'))["next_edition"] == {"ibip": NEXT}
    assert pairs(invoke("url_request.json")).words("ibi.nextedition") == ("ibip", NEXT)
    item = body(unlink(invoke, "link=next_edition"))
    assert item["next_edition"] is None
    assert item["history"][-1]["reason"] == f"the next edition link to {NEXT}, removed"
    assert "ibi.nextedition" not in pairs(invoke("url_request.json"))


def test_each_metadata_link_is_removed_on_its_own(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    link(invoke, f'{{"metadata": {{"ibi": "{NEXT}"}}}}')
    link(invoke, f'{{"metadata": {{"ibi": "{NEXT}", "format": "oai_dc"}}}}')
    item = body(unlink(invoke, "link=metadata_oai_dc"))
    assert item["metadata_oai_dc"] is None and item["metadata"] == {"ibip": NEXT}
    item = body(unlink(invoke, "link=metadata"))
    assert item["metadata"] is None
    assert [entry["action"] for entry in item["history"]] == ["unlinked", "unlinked"]


def test_a_link_the_item_does_not_have_is_404_and_changes_nothing(
    invoke: Invoke, runtime: Runtime
) -> None:
    deposit(invoke, runtime)
    link(invoke, '{"translation": {"language": "pt-BR", "url": "https://example.org/pt"}}')
    before = body(invoke("get_item.json"))
    missing = unlink(invoke, "link=translation(fr)")
    assert missing["statusCode"] == 404
    assert "no translation into fr (it has: pt-BR)" in body(missing)["error"]["message"]
    assert unlink(invoke, "link=next_edition")["statusCode"] == 404
    assert body(invoke("get_item.json")) == before


def test_a_removal_says_which_link_to_give(invoke: Invoke, runtime: Runtime) -> None:
    deposit(invoke, runtime)
    for query in ("", "link=edition", "link=translation", "link=translation(pt"):
        answer = unlink(invoke, query)
        assert answer["statusCode"] == 400, query
        assert body(answer)["error"]["message"] == (
            "say which link to remove: "
            "?link=next_edition|metadata|metadata_oai_dc|translation(LANG)"
        )
    assert unlink(invoke, "link=translation(p%20t)")["statusCode"] == 400  # not a language
    assert body(invoke("get_item.json"))["history"] == []
