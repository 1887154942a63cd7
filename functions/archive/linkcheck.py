"""The Archive's scheduled link check: one run over its items' external URLs (``links.py``).

An EventBridge rule invokes it (daily unless ``ibi:archive.link_check.every_hours`` says
otherwise: ``infra/archive.py``). A run checks the items due, oldest-checked first, until
:data:`MARGIN_SECONDS` before the Lambda's timeout, so that the next run resumes where it
stopped; it publishes ``BrokenLinks`` (the broken URLs this run found: namespace ``ibi``,
dimension ``service=archive``, alarmed as a ticket by ``infra/operations.py``) and logs each
broken one. It reads the items table and writes only each item's ``link_check``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.archive import wiring
from functions.archive.links import LinkChecks, Run
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore
from functions.shared.errors import ConfigurationError

logger = Logger(service="archive")
metrics = Metrics(namespace="ibi", service="archive")

MARGIN_SECONDS = 30  # results written and the metric flushed before the Lambda's timeout
BROKEN_LINKS = "BrokenLinks"


@lru_cache(maxsize=1)
def _from_environment() -> LinkChecks:
    from ibi.aws import aws_client

    settings = ArchiveSettings.from_environment()
    if settings.base_url is None:  # what is outside the Archive is decided against it
        raise ConfigurationError("the link check needs IBI_ARCHIVE_BASE_URL")
    store = DynamoItemStore(aws_client("dynamodb"), settings.table)
    return wiring.link_checks(store, settings.base_url, settings)


_installed: list[LinkChecks] = []


def install(checks: LinkChecks) -> None:
    """Use ``checks`` for every run from now on (tests)."""
    _installed[:] = [checks]


def uninstall() -> None:
    _installed.clear()


def checks() -> LinkChecks:
    return _installed[0] if _installed else _from_environment()


def report(run: Run) -> dict[str, Any]:
    """The run as its logs, its metric and its answer tell it."""
    metrics.add_metric(name=BROKEN_LINKS, unit=MetricUnit.Count, value=len(run.broken))
    for result in run.broken:
        logger.warning(
            "broken link",
            extra={"ibi": result.item.key, **result.check.to_mapping()},
        )
    summary = {"checked": len(run.results), "broken": len(run.broken), "left": run.left}
    logger.info("links checked", extra=summary)
    return summary


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    seconds = context.get_remaining_time_in_millis() / 1000 - MARGIN_SECONDS
    return report(checks().run(seconds=max(seconds, 1.0)))
