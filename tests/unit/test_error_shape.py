"""Issue 29: one error-to-HTTP shape and one 405 idiom for the three APIs.

Each API declares its errors (class → status, code: ``ERRORS``) and its routes (path →
methods: ``ROUTES``) and answers them through functions/shared/errors.py and edge.py: the
same body, ``{"error": {"code", "message"}}``, for the same kind of failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from functions.archive import handler as archive_handler
from functions.archive import wiring as archive_wiring
from functions.archive.store import ArchiveStoreError
from functions.minting import handler as minting_handler
from functions.minting import wiring as minting_wiring
from functions.minting.service import StoreUnavailable
from functions.resolver import handler as resolver_handler
from functions.resolver import wiring as resolver_wiring
from functions.resolver.errors import RegistryError
from functions.shared.errors import ConfigurationError, Refusal, error_answer, refusal_for
from ibi_tools.local.gateway import LocalContext
from tests.fuzzing import event

OPENAPI = Path(__file__).parents[2] / "docs" / "openapi.yaml"
METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


class Failing:
    """A runtime (or any part of one) every use of which raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise self._error


class Started(Failing):
    """An Archive's runtime whose bootstrap succeeds and whose every other use raises."""

    def start(self, base_url: str, *, join: bool = True) -> Failing:
        return self.site

    @property
    def site(self) -> Failing:
        return Failing(self._error)


API = tuple[ModuleType, ModuleType, str]  # handler, wiring, a JSON route's "METHOD /path"
APIS: dict[str, API] = {
    "minting": (minting_handler, minting_wiring, "GET /subsystems"),
    "archive": (archive_handler, archive_wiring, "GET /api/service"),
    "resolver": (resolver_handler, resolver_wiring, "GET /admin/archives"),
}


@pytest.fixture(params=sorted(APIS))
def api(request: pytest.FixtureRequest) -> Iterator[API]:
    handler, wiring, route = APIS[request.param]
    yield handler, wiring, route
    wiring.uninstall()


def ask(handler: ModuleType, route: str) -> dict[str, Any]:
    method, target = route.split(" ", 1)
    path, _, query = target.partition("?")
    answer: dict[str, Any] = handler.lambda_handler(
        event(method, path, query), LocalContext("test", "shape")
    )
    return answer


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer's error body, after checking it is the one shape: exactly code and message."""
    assert answer["headers"]["Content-Type"] == "application/json", answer
    body: dict[str, Any] = json.loads(answer["body"])
    assert list(body) == ["error"] and sorted(body["error"]) == ["code", "message"], body
    assert all(isinstance(value, str) and value for value in body["error"].values()), body
    return body["error"]


def test_a_configuration_error_is_the_same_500_in_every_api(
    api: API, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment configured wrong: every API answers InternalError, never the setting."""
    handler, wiring, route = api
    wiring.install(Failing(ConfigurationError("IBI_SECRET_TABLE is missing")))
    answer = ask(handler, route)
    assert answer["statusCode"] == 500
    error = error_of(answer)
    assert error["code"] == "InternalError" and "IBI_SECRET" not in error["message"]


@pytest.mark.parametrize(
    ("name", "failure", "code"),
    [
        ("minting", StoreUnavailable("the state table is throttled"), "StoreUnavailable"),
        ("archive", ArchiveStoreError("the items table is throttled"), "Unavailable"),
        ("resolver", RegistryError("the registry is throttled"), "Unavailable"),
    ],
)
def test_a_store_that_cannot_answer_is_a_503_with_retry_after_in_every_api(
    name: str, failure: Exception, code: str
) -> None:
    handler, wiring, route = APIS[name]
    wiring.install(Started(failure))
    try:
        answer = ask(handler, route)
    finally:
        wiring.uninstall()
    assert (answer["statusCode"], answer["headers"]["Retry-After"]) == (503, "1")
    assert error_of(answer)["code"] == code


def test_a_reader_of_the_resolver_still_gets_an_alert_page_when_the_registry_fails() -> None:
    """The JSON shape is the administration's; a persistent URL's reader gets a page."""
    resolver_wiring.install(Failing(RegistryError("the registry is throttled")))
    try:
        answer = ask(resolver_handler, "GET /status")
    finally:
        resolver_wiring.uninstall()
    assert answer["statusCode"] == 503
    assert answer["headers"]["Content-Type"].startswith("text/html")
    assert "registry is unavailable" in answer["body"]


def test_an_archive_refusal_is_json_to_the_api_and_a_page_to_a_reader() -> None:
    from functions.archive.errors import NotHeld

    archive_wiring.install(Started(NotHeld("no such item")))
    try:
        api = ask(archive_handler, "GET /api/item?ibi=x")
        page = ask(archive_handler, "GET /list/8JMKD3MGP8W/35MME4E")
    finally:
        archive_wiring.uninstall()
    assert api["statusCode"] == page["statusCode"] == 404
    assert error_of(api) == {"code": "NotHeld", "message": "no such item"}
    assert page["headers"]["Content-Type"].startswith("text/html")


def test_an_error_is_answered_by_the_entry_of_its_nearest_class() -> None:
    class Base(Exception):
        status = 409
        retry_after = 2

    class Child(Base):
        pass

    table = {Base: Refusal(), Exception: Refusal(500, "InternalError", "failed")}
    assert refusal_for(Child("x"), table) is table[Base]
    answer = error_answer(Child("busy"), Refusal(hint="; retry"))
    assert (answer.status_code, answer.headers["Retry-After"]) == (409, "2")
    assert json.loads(str(answer.body)) == {"error": {"code": "Child", "message": "busy; retry"}}
    hidden = error_answer(KeyError("secret"), table[Exception])
    assert json.loads(str(hidden.body))["error"] == {"code": "InternalError", "message": "failed"}
    assert refusal_for(KeyboardInterrupt(), table) is None


# ---------------------------------------------------------------------------- 405s


def declared(name: str, *, json_only: bool = False) -> list[tuple[str, str]]:
    """(path, method) of every route an API declares (``json_only``: whose errors are JSON,
    its 405s too: the resolver's pages and persistent URLs answer alerts)."""
    routes: dict[str, tuple[str, ...]] = APIS[name][0].ROUTES
    json_prefix = "/admin/" if name == "resolver" and json_only else "/"
    return [
        (path, method)
        for path, methods in routes.items()
        if path.startswith(json_prefix)
        for method in methods
    ]


@pytest.mark.parametrize("name", sorted(APIS))
def test_a_method_a_path_lacks_is_a_405_naming_the_declared_ones(name: str) -> None:
    handler, wiring, _ = APIS[name]
    wiring.install(Started(RuntimeError("a 405 needs no runtime but the bootstrap")))
    try:
        for path in {path for path, _ in declared(name, json_only=True)}:
            allowed = handler.ROUTES[path]
            for method in ("PUT", *(m for m in METHODS if m not in allowed and m != "GET")):
                answer = ask(handler, f"{method} {path}")
                assert answer["statusCode"] == 405, (method, path, answer)
                assert answer["headers"]["Allow"] == ", ".join(sorted(allowed))
                assert error_of(answer)["code"] == "MethodNotAllowed"
    finally:
        wiring.uninstall()


@pytest.mark.parametrize("name", sorted(APIS))
def test_every_declared_route_is_served(name: str) -> None:
    """Each declared (path, method) reaches a route: here, one whose runtime fails (500)."""
    handler, wiring, _ = APIS[name]
    wiring.install(Started(RuntimeError("the route ran")))
    try:
        for path, method in declared(name):
            status = ask(handler, f"{method} {path}")["statusCode"]
            assert status not in {404, 405}, (method, path, status)
    finally:
        wiring.uninstall()


def documented(name: str) -> set[tuple[str, str]]:
    document = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    return {
        (path, method.upper())
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if name in operation.get("tags", ())
    }


UNDOCUMENTED: dict[str, Callable[[str], bool]] = {  # routes of another kind than the JSON API
    "minting": lambda path: False,
    "archive": lambda path: path == "/oai" or path.startswith("/transfers/"),
    "resolver": lambda path: not path.startswith(("/admin/", "/openapi.json")),
}


@pytest.mark.parametrize("name", sorted(APIS))
def test_the_declared_routes_are_the_documented_ones(name: str) -> None:
    """docs/openapi.yaml and each API's ``ROUTES`` name the same JSON routes."""
    routes = {(p, m) for p, m in declared(name) if not UNDOCUMENTED[name](p)}
    assert routes == documented(name)
