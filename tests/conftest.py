"""Shared fixtures. No test reaches AWS: credentials are fake and the region is fixed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.minting.service import MintingService
from ibi.core.distributor import Granularity
from ibi.core.subsystem import Subsystem, check_distinct
from tests import aws_calls
from tests.fakes import FakeClock, MemoryMintStore

AWS_CALL_LOG = pytest.StashKey[Path]()

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ.pop("AWS_PROFILE", None)
os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
# Where `ibi local` claims its minting ports (ibi_tools/local/subsystems.py): the tests' own
# directory, never the user's, removed at the end of the session.
STATE_DIR = Path(tempfile.mkdtemp(prefix="ibi-test-state-"))
os.environ["IBI_STATE_DIR"] = str(STATE_DIR)

IAM_CHECK = "tests/infra/test_iam_calls.py::test_every_recorded_call"


def pytest_configure(config: pytest.Config) -> None:
    """Record every AWS call the functions make (tests/aws_calls.py), for the IAM check."""
    log = config.rootpath / ".cache" / f"aws-calls-{os.getpid()}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    config.stash[AWS_CALL_LOG] = log
    aws_calls.install(log)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    log = config.stash.get(AWS_CALL_LOG, None)
    if log is not None:
        log.unlink(missing_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The IAM check runs last, after the tests whose calls it checks; without integration or
    e2e tests in the session it has nothing to check and is left out."""
    check = [item for item in items if item.nodeid.startswith(IAM_CHECK)]
    recorded = any(item.nodeid.startswith(("tests/integration/", "tests/e2e/")) for item in items)
    items[:] = [item for item in items if not item.nodeid.startswith(IAM_CHECK)]
    if recorded:
        items.extend(check)
    elif check:
        config.hook.pytest_deselected(items=check)


@pytest.fixture(scope="session")
def aws_call_log(request: pytest.FixtureRequest) -> Path:
    return request.config.stash[AWS_CALL_LOG]


SUBSYSTEMS = [
    {"name": "default", "host": "ibi.example.org", "ip": "192.0.2.10", "granularity": "0.001"},
    {
        "name": "classic",
        "host": "mtc-m18.sid.inpe.br",
        "ip": "150.163.34.243",
        "granularity": "1",
    },
]
TABLES = {"state": "mint-state", "record": "mint-record", "idempotency": "mint-idempotency"}


def minting_environment(max_wait: str = "5") -> dict[str, str]:
    return {
        "IBI_STATE_TABLE": TABLES["state"],
        "IBI_RECORD_TABLE": TABLES["record"],
        "IBI_IDEMPOTENCY_TABLE": TABLES["idempotency"],
        "IBI_SUBSYSTEMS": json.dumps(SUBSYSTEMS),
        "IBI_DEFAULT_SUBSYSTEM": "default",
        "IBI_MAX_WAIT_SECONDS": max_wait,
    }


@pytest.fixture
def subsystems() -> dict[str, Subsystem]:
    return check_distinct(Subsystem.from_mapping(item) for item in SUBSYSTEMS)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> MemoryMintStore:
    return MemoryMintStore()


@pytest.fixture
def service(
    store: MemoryMintStore, subsystems: dict[str, Subsystem], clock: FakeClock
) -> Iterator[MintingService]:
    yield MintingService(
        store,
        subsystems,
        default_subsystem="default",
        clock=clock,
        sleep=clock.sleep,
        max_wait=Decimal(5),
    )


def granularity(text: str) -> Granularity:
    return Granularity(text)


@contextlib.contextmanager
def dynamodb_client(backend: str, directory: Path) -> Iterator[Any]:
    """A DynamoDB client for the stores: moto's (``"moto"``, inside ``mock_aws``, which also
    fakes S3 for the test) or local mode's SQLite tables in ``directory`` (``"local-tables"``,
    beside a ``mock_aws`` for S3)."""
    import boto3
    from moto import mock_aws

    from ibi_tools.local.tables import LocalTables

    with mock_aws():
        if backend == "moto":
            yield boto3.client("dynamodb", region_name="us-east-1")
        else:
            yield LocalTables(directory / "tables.sqlite3").client()
