"""Issue 29: one runtime holder (functions/shared/runtime.py) for the three functions."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from functions.archive import wiring as archive_wiring
from functions.archive.settings import ArchiveSettings
from functions.minting import wiring as minting_wiring
from functions.resolver import wiring as resolver_wiring
from functions.shared.runtime import Holder

THREADS = 8


def test_a_holder_builds_once_however_many_threads_ask_at_once() -> None:
    built: list[object] = []

    def build() -> object:
        time.sleep(0.05)  # long enough for every thread to be waiting
        built.append(object())
        return built[-1]

    holder: Holder[object] = Holder(build)
    start = threading.Barrier(THREADS)

    def ask(_: int) -> object:
        start.wait()
        return holder.get()

    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(ask, range(THREADS)))
    assert len(built) == 1 and all(value is built[0] for value in got)
    assert holder.get() is built[0]


def test_an_installed_value_is_served_until_reset_then_one_is_built_again() -> None:
    made = iter(["first", "second"])
    holder: Holder[str] = Holder(lambda: next(made))
    assert holder.peek() is None  # peeking never builds
    assert holder.install("installed") == "installed" and holder.get() == "installed"
    holder.reset()
    assert holder.get() == "first" and holder.get() == "first"
    assert holder.install(None) is None and holder.peek() is None
    assert holder.get() == "second"


def test_a_holder_without_a_builder_says_so() -> None:
    holder: Holder[str] = Holder()
    with pytest.raises(RuntimeError, match="nothing to build"):
        holder.get()
    assert holder.get(lambda: "given") == "given"


def test_what_runs_after_a_build_sees_the_value_already_served_to_others() -> None:
    """``then`` (the Archive's join) runs once, while other threads already get the value:
    a resolver calling the Archive back during the join is answered, not blocked."""
    holder: Holder[str] = Holder(lambda: "site")
    seen: list[str] = []

    def then(value: str) -> None:
        with ThreadPoolExecutor(1) as pool:  # another request, during the join
            seen.append(pool.submit(holder.get).result(timeout=2))

    assert holder.get(then=then) == "site" and holder.get(then=then) == "site"
    assert seen == ["site"]


@pytest.mark.parametrize("wiring", [minting_wiring, archive_wiring, resolver_wiring])
def test_every_function_holds_its_runtime_in_the_shared_holder(wiring: ModuleType) -> None:
    assert isinstance(wiring.holder, Holder)
    runtime = object()
    try:
        assert wiring.install(runtime) is runtime and wiring.runtime() is runtime
        wiring.uninstall()
        assert wiring.holder.peek() is None
    finally:
        wiring.uninstall()


def test_an_archive_bootstraps_and_joins_once_and_is_served_during_its_join(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstraps: list[str] = []
    joins: list[tuple[str, str, str]] = []
    served_during_join: list[Any] = []

    def bootstrap(base: str) -> Any:
        time.sleep(0.05)
        bootstraps.append(base)
        return SimpleNamespace(ibi=SimpleNamespace(key="8JMKD3MGP8W/35MME4E"))

    def site_at(self: archive_wiring.Runtime, base: str, service: Any) -> Any:
        identity = SimpleNamespace(address=base.split("://")[1], service=service)
        return SimpleNamespace(identity=identity, views=SimpleNamespace(base_url=base))

    monkeypatch.setattr(archive_wiring.Runtime, "_site_at", site_at)
    settings = ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "items"})

    def join(base: str, address: str, service_ibi: str) -> None:
        joins.append((base, address, service_ibi))
        with ThreadPoolExecutor(1) as pool:  # the resolver's confirmation call, meanwhile
            served_during_join.append(pool.submit(lambda: runtime.site).result(timeout=2))

    runtime = archive_wiring.Runtime(
        service=SimpleNamespace(bootstrap=bootstrap),  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
        settings=settings,
        clock=time.time,  # type: ignore[arg-type]
        join=join,
    )
    with pytest.raises(RuntimeError, match="has not started"):
        _ = runtime.site
    start = threading.Barrier(THREADS)

    def first_request(_: int) -> Any:
        start.wait()
        return runtime.start("https://archive.example.org")

    with ThreadPoolExecutor(THREADS) as pool:
        sites = list(pool.map(first_request, range(THREADS)))
    assert bootstraps == ["https://archive.example.org"]
    assert joins == [("https://archive.example.org", "archive.example.org", "8JMKD3MGP8W/35MME4E")]
    assert all(site is runtime.site for site in [*sites, *served_during_join])
