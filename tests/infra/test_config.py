"""The ``ibi:minting`` context: defaults, the forms it takes, the errors it names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk import aws_logs as logs

from ibi.core.distributor import Granularity
from infra.config import (
    DEFAULT_SUBSYSTEMS,
    MINTING_CONTEXT_KEY,
    ConfigError,
    MintingConfig,
    cdk_json_context,
    minting_config,
    subsystems_json,
)

pytestmark = pytest.mark.infra

FIRST = {"name": "default", "host": "ibi.example.org", "ip": "192.0.2.10", "granularity": "0.001"}
SECOND = {"name": "second", "host": "ibi.example.net", "ip": "2001:db8::1", "granularity": 1}


def test_defaults_are_one_documentation_subsystem() -> None:
    config = MintingConfig.from_context(None)
    assert config == MintingConfig()
    assert json.loads(subsystems_json(config.subsystems)) == [
        {
            "name": "default",
            "host": "ibi.example.org",
            "ip": "192.0.2.10",
            "rep_port": 80,
            "ibip_port": 800,
            "granularity": "0.001",
        }
    ]
    assert config.default_subsystem == "default"
    assert config.max_wait_seconds == 5
    assert config.log_retention == logs.RetentionDays.ONE_MONTH


def test_cdk_json_states_the_defaults() -> None:
    context = cdk_json_context()
    assert MintingConfig.from_context(context[MINTING_CONTEXT_KEY]) == MintingConfig()
    assert context["cli-telemetry"] is False


def test_context_as_an_object_or_a_json_string() -> None:
    raw = {
        "subsystems": [FIRST, SECOND],
        "default_subsystem": "second",
        "max_wait_seconds": 0,
        "log_retention": "ONE_YEAR",
    }
    for form in (raw, json.dumps(raw)):
        config = minting_config(App(context={MINTING_CONTEXT_KEY: form}))
        assert [s.name for s in config.subsystems] == ["default", "second"]
        assert config.subsystems[1].granularity == Granularity(1)
        assert config.default_subsystem == "second"
        assert config.max_wait_seconds == 0
        assert config.log_retention == logs.RetentionDays.ONE_YEAR


def test_missing_fields_take_defaults() -> None:
    config = MintingConfig.from_context({"max_wait_seconds": 3})
    assert config.subsystems == DEFAULT_SUBSYSTEMS
    assert config.max_wait_seconds == 3


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        ([], "expected an object"),
        ({"max_wait": 5}, "unknown fields ['max_wait']"),
        ({"subsystems": {"name": "x"}}, "expected a list"),
        ({"subsystems": []}, "at least one"),
        ({"subsystems": [{**SECOND, "ip": "999.1.1.1"}]}, "ip"),
        ({"subsystems": [{**SECOND, "granularity": "0.5"}]}, "granularity"),
        ({"subsystems": [{**SECOND, "rep_port": 70000}]}, "rep_port"),
        ({"subsystems": [{**SECOND, "colour": "red"}]}, "unknown field"),
        ({"subsystems": [SECOND, SECOND]}, "two subsystems are named 'second'"),
        ({"default_subsystem": "nope"}, "default_subsystem: 'nope' is not one of ['default']"),
        ({"max_wait_seconds": 16}, "max_wait_seconds: 16 is not in 0-15"),
        ({"max_wait_seconds": "5"}, "max_wait_seconds: '5' is not a whole number"),
        ({"max_wait_seconds": True}, "is not a whole number"),
        ({"log_retention": 30}, "log_retention: 30 is not one of ONE_DAY"),
    ],
)
def test_errors_name_the_field(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:minting") as error:
        MintingConfig.from_context(raw)
    assert message in str(error.value)


def test_subsystems_must_fit_in_the_lambda_environment() -> None:
    many = [
        {**SECOND, "name": f"s{i}", "host": f"h{i}.example.net", "ip": f"192.0.2.{i}"}
        for i in range(60)
    ]
    with pytest.raises(ConfigError, match="fit in the Lambda's environment"):
        MintingConfig.from_context({"subsystems": many, "default_subsystem": "s0"})
