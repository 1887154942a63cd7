"""Headless Chromium (Debian's chromium + chromium-driver) against the real resolver handler."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import wiring
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from ibi_tools.local.tables import LocalTables

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        pytest.fail(
            "Chromium is missing: run `make setup` (apt packages chromium, chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def start_resolver(
    data: Path, tables: LocalTables, *, workers: int, archive_timeout: str, deadline: str
) -> LocalGateway:
    """The resolver's handler behind the gateway stand-in, over local mode's ``tables``, its
    pepper in ``data``, talking to Archives on loopback (the page tests' resolver)."""
    ensure_tables(tables.client(), "resolver")
    settings = ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": "resolver",
            "IBI_PEPPER_FILE": str(data / "pepper"),
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
            "IBI_ARCHIVE_TIMEOUT_SECONDS": archive_timeout,
            "IBI_RESOLUTION_DEADLINE_SECONDS": deadline,
        }
    )

    def handler() -> Any:  # in each worker process
        from functions.resolver.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=tables.client()))
        return lambda_handler

    return LocalGateway("resolver", handler, free_port(), workers=workers).start()


@pytest.fixture(scope="session")
def resolver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("resolver")
    tables = LocalTables(data / "tables.sqlite3")
    gateway = start_resolver(data, tables, workers=2, archive_timeout="1", deadline="2")
    yield gateway.url
    gateway.shutdown()
