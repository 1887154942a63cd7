"""A deposit in a language the profile holds already writes no profile (issue 14).

The profile (the languages an Archive's items and translations are in) only grows, so each
process notes a language once: the second deposit in it makes one DynamoDB request fewer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from functions.archive.model import Item
from functions.archive.store import DynamoItemStore, ensure_table

TABLE = "items"


@pytest.fixture
def client(dynamodb: Any) -> Any:
    """The integration tests' client (moto, then local mode's tables), with an items table."""
    ensure_table(dynamodb, TABLE)
    return dynamodb


def _item(language: str | None, *translations: str) -> Item:
    return cast(
        Item,
        SimpleNamespace(
            language=language, translations=[SimpleNamespace(language=t) for t in translations]
        ),
    )


class _CountingUpdates:
    """The client, noting each UpdateItem it is asked for (moto's or local mode's tables)."""

    def __init__(self, client: Any, writes: list[str]) -> None:
        self._client, self._writes = client, writes

    def __getattr__(self, name: str) -> Any:
        if name == "update_item":
            self._writes.append("UpdateItem")
        return getattr(self._client, name)


def test_each_language_is_noted_once_per_process(client: Any) -> None:
    writes: list[str] = []
    client = _CountingUpdates(client, writes)
    store = DynamoItemStore(client, TABLE)
    store.note_item(_item("en"))
    store.note_item(_item("en"))
    assert len(writes) == 1
    store.note_item(_item("en", "pt-BR"))  # the translation's language is new
    store.note_item(_item(None))
    store.note_item(_item(None))
    assert len(writes) == 3
    profile = store.profile()
    assert profile.languages == {"en", "pt-BR"} and profile.unspecified_language
    again = DynamoItemStore(client, TABLE)  # another process: notes it again (idempotent)
    again.note_item(_item("en"))
    assert len(writes) == 4 and again.profile().languages == {"en", "pt-BR"}
