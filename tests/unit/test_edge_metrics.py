"""Metrics at the edge: flushed once per invocation, and never piling up when switched off."""

from __future__ import annotations

import warnings

import pytest
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.metrics import MetricUnit

from functions.shared.edge import make_handler
from ibi_tools.local.gateway import LocalContext, build_event


def _handler() -> object:
    app = APIGatewayHttpResolver()
    metrics = Metrics(namespace="ibi-test", service="edge-test")

    @app.get("/counted")
    def counted() -> dict[str, str]:
        metrics.add_metric(name="Counted", unit=MetricUnit.Count, value=1)
        return {"ok": "yes"}

    @app.get("/quiet")
    def quiet() -> dict[str, str]:  # counts nothing, as most routes
        return {"ok": "yes"}

    return make_handler(app, logger=Logger(service="edge-test"), metrics=metrics)


def _invoke(handler: object, times: int, target: str = "/counted") -> None:
    for _ in range(times):
        event = build_event(
            method="GET", target=target, headers=[], body=b"", source_ip="127.0.0.1", host="h"
        )
        answer = handler(event, LocalContext("edge-test", "r"))  # type: ignore[operator]
        assert answer["statusCode"] == 200


def test_switched_off_metrics_are_never_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Local mode switches metrics off: 250 invocations print no EMF blob (Powertools kept
    them, unflushed, and printed 100 at a time from the add_metric that overflowed)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    _invoke(_handler(), 250)
    assert '"_aws"' not in capsys.readouterr().out


def test_metrics_are_flushed_once_per_invocation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    _invoke(_handler(), 3)
    blobs = [line for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert len(blobs) == 3 and all('"Counted":[1.0]' in b.replace(" ", "") for b in blobs)


@pytest.mark.parametrize("disabled", [True, False])
def test_an_invocation_that_counts_nothing_warns_nothing_and_prints_nothing(
    disabled: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Powertools' ``log_metrics`` warned "No application metrics to publish" for each such
    invocation: 1,320 warnings in ``make test``, hiding any real one."""
    if disabled:
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    else:
        monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
        monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _invoke(_handler(), 3, "/quiet")
    assert [str(w.message) for w in caught] == []
    assert '"_aws"' not in capsys.readouterr().out
