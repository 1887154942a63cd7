"""Schemathesis, the property-based API tester, over each service's served ``/openapi.json``.

A fresh ``ibi local`` runs; Schemathesis (its CLI, as a user would run it) tests the minting
API, an Archive's deposit API (``/api/…``) and the resolver's administration (``/admin/…``)
from the document each serves, with every check but two, both about authentication, which
``ibi local`` cannot satisfy: it checks no IAM signature (in AWS, API Gateway does).

* ``ignored_auth``: the documents declare SigV4 (``security: sigv4``); locally an unsigned
  request succeeds, which this check reports as authentication not enforced.
* ``missing_required_header``: it expects 401 when the ``Authorization`` header the SigV4
  scheme names is left out (the documents require no other header).

For the same reason no security parameter is generated (``--generation-with-security-parameters
false``): a request is judged on its data, not on a signature nobody checks. Two answers are
expected of valid data besides Schemathesis's defaults: 410 (an item deleted by an earlier case
stays deleted, its IBI never reused) and 422 (an Idempotency-Key reused for another request).
Invalid data is rejected by any 4xx that refuses it: 404, 405, 409, 410 and 413 besides 400 and
422 (a request about a deleted item is refused as gone before its body is read).
Examples are few and derandomized, so a run is short and the same every time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import LocalRun

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 10
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "410", "422", "429", "5xx"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "409", "410", "413", "422", "428"]
"""


def schemathesis(url: str, config: Path) -> subprocess.CompletedProcess[str]:
    """The CLI run in ``config``'s directory, where it keeps its cache."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--exclude-checks",
            "ignored_auth,missing_required_header",
            "--generation-with-security-parameters",
            "false",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--generation-deterministic",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=config.parent,
    )


@pytest.mark.timeout(600)
def test_schemathesis_finds_nothing_in_the_minting_deposit_and_administration_apis(
    local: LocalRun, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    services = {"minting": local.endpoint, "archive": local.archives[0], "resolver": local.resolver}
    failed = {}
    for name, url in services.items():
        run = schemathesis(url, config)
        if run.returncode != 0:
            failed[name] = run.stdout[-6000:] + run.stderr[-2000:]
    assert not failed, "\n\n".join(f"== {name}\n{output}" for name, output in failed.items())
