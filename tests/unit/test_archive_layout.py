"""The Archive in the minting shape: each route calls one facade, each verb is defined once.

handler.py → ``ContentService`` (content.py, the facade: files and records together) → the
item layer (``ArchiveService``: deposits.py, transfers.py, bootstrap.py over items.py) → the
store.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from functions.archive.content import ContentService
from functions.archive.service import ArchiveService
from functions.archive.views import ArchiveViews
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter

ARCHIVE = Path(__file__).resolve().parents[2] / "functions" / "archive"
MAX_MODULE_LINES = 800
ITEM = "8JMKD3MGP8W/35MME4E"


def methods(cls: type) -> set[str]:
    """The methods ``cls`` defines itself (not inherited, not dunder)."""
    return {
        name
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }


def item_layer() -> list[type]:
    return [cls for cls in ArchiveService.__mro__ if cls is not object]


def hands_down_a_port(name: str) -> bool:
    """Whether the facade's ``name`` calls the item layer's ``name`` with one of the facade's
    own ports (``check=self.copies.new_copy``): an extension, not a second definition."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(ContentService, name))))
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        if ast.unparse(call.func) != f"self.archive.{name}":
            continue
        for keyword in call.keywords:
            root = keyword.value
            while isinstance(root, ast.Attribute) and isinstance(root.value, ast.Attribute):
                root = root.value
            own = isinstance(root, ast.Attribute) and ast.unparse(root.value) == "self"
            if own and isinstance(root, ast.Attribute) and root.attr != "archive":
                return True
    return False


def test_the_handler_never_reaches_through_the_facade_to_the_item_layer() -> None:
    tree = ast.parse((ARCHIVE / "handler.py").read_text())
    reached = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "archive"
    ]
    assert reached == []


def test_no_verb_is_defined_both_in_the_facade_and_in_the_item_layer_beneath_it() -> None:
    beneath = set().union(*(methods(cls) for cls in item_layer()))
    twice = sorted(
        name for name in methods(ContentService) & beneath if not hands_down_a_port(name)
    )
    assert twice == []


def test_each_verb_of_the_item_layer_is_defined_in_one_module_of_its_domain() -> None:
    assert methods(ArchiveService) == set()  # it only puts the parts together
    seen: dict[str, str] = {}
    for cls in item_layer():
        for name in methods(cls):
            assert name not in seen, f"{name}: {cls.__qualname__} and {seen[name]}"
            seen[name] = cls.__qualname__
    modules = {cls.__module__ for cls in item_layer()}
    assert "functions.archive.service" in modules and len(modules) > 2


def test_no_module_of_the_archive_is_over_800_lines() -> None:
    long = {
        path.name: lines
        for path in ARCHIVE.glob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_the_facade_answers_the_item_layers_verbs_over_the_same_items() -> None:
    service = ArchiveService(
        MemoryItemStore(),
        clock=FakeClock(Decimal(1795473000)),
        mint=MemoryMinter(),
        own_prefixes=["8JMKD3MGP8W"],
    )
    facade = ContentService(
        service, views=ArchiveViews("https://a.example.org"), files=None, serve_inline_bytes=1
    )
    item = facade.create_original({"ibi": ITEM})
    assert facade.get(ITEM) == service.get(ITEM) == item
    gone = service.delete(ITEM)
    assert facade.get(ITEM) == gone


def test_a_verb_is_named_on_the_facade_only_under_its_own_name() -> None:
    from functions.archive.content import Through

    with pytest.raises(Exception) as refused:  # 3.11 wraps it in a RuntimeError

        class Facade:
            fetch = Through(ArchiveService.get)

    error = refused.value
    assert "would answer get" in str(error) or "would answer get" in str(error.__cause__)
