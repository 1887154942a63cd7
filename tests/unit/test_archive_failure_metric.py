"""Issue 26 item 5: ArchiveFailures carries an ``Archive`` dimension (functions/resolver/fanout.py)."""

from __future__ import annotations

import json

import pytest

from functions.resolver.fanout import archive_failure

ARCHIVE = "8JMKD3MGP8W/3FSUP4L"


def test_each_failure_names_its_archive(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    archive_failure(ARCHIVE)
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (declaration,) = record["_aws"]["CloudWatchMetrics"]
    assert declaration["Namespace"] == "ibi"
    assert declaration["Dimensions"] == [["service", "Archive"]]
    assert record["Archive"] == ARCHIVE and record["service"] == "resolver"
    assert record["ArchiveFailures"] == [1.0]


def test_nothing_is_printed_where_metrics_are_off(capsys: pytest.CaptureFixture[str]) -> None:
    archive_failure(ARCHIVE)  # tests/conftest.py turns metrics off, as local mode does
    assert capsys.readouterr().out == ""
