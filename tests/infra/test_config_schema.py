"""Issue 29: every ``ibi:`` object is read by one reader, from the rules its fields declare."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from infra import config
from infra.config import (
    ArchiveConfig,
    CanaryConfig,
    CiConfig,
    ConcurrencyConfig,
    ConfigError,
    JoinConfig,
    LifecycleConfig,
    MintingConfig,
    ResolverConfig,
    ThrottleConfig,
    WafConfig,
)
from infra.config_schema import Fields, OptionalSection, Section, checks, field_names
from infra.guardrails import CONTEXT_KEYS

pytestmark = pytest.mark.infra

# Every section the app reads, found rather than listed: a section added later is checked too.
SECTIONS = sorted(
    (
        value
        for value in vars(config).values()
        if isinstance(value, type)
        and issubclass(value, (Section, OptionalSection))
        and value.__module__ == config.__name__
    ),
    key=lambda section: section.KEY,
)
JOIN = {"resolver_url": "https://urlib.example.org", "registration_key_parameter": "/ibi/key"}


def test_the_sections_are_found() -> None:
    assert {MintingConfig, ArchiveConfig, JoinConfig, LifecycleConfig, CanaryConfig} <= set(
        SECTIONS
    )


@pytest.mark.parametrize("section", SECTIONS, ids=lambda section: section.__name__)
def test_every_field_declares_its_rule(section: type[Fields]) -> None:
    """No field is read unchecked: each has a Check in its annotation."""
    assert set(checks(section)) == set(field_names(section))


@pytest.mark.parametrize("section", SECTIONS, ids=lambda section: section.__name__)
def test_every_section_refuses_a_field_it_does_not_have(section: type[Fields]) -> None:
    base, _, _ = section.KEY.partition(".")
    assert base in CONTEXT_KEYS
    with pytest.raises(ConfigError, match=rf"^{section.KEY}: unknown fields \['colour'\]$"):
        section.from_context({"colour": "red"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"join": {**JOIN, "colour": "red"}},
            "ibi:archive.join: unknown fields ['colour']",
        ),
        (
            {"join": {"resolver_url": "https://urlib.example.org"}},
            "ibi:archive.join.registration_key_parameter: missing: give an SSM name",
        ),
        (
            {"join": {"registration_key_parameter": "/k", "resolver_service_ibi": "x"}},
            "ibi:archive.join.resolver_url: missing: give https://host",
        ),
        ({"join": "https://urlib.example.org"}, "ibi:archive.join: expected an object"),
        ({"lifecycle": {"access_log_days": 0}}, "ibi:archive.lifecycle.access_log_days: 0 is"),
    ],
)
def test_a_nested_object_names_the_field_at_fault(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        ArchiveConfig.from_context(raw)
    assert message in str(error.value)


def test_the_join_is_one_object_read_as_the_archive_passes_it_on() -> None:
    raw = {"join": {**JOIN, "resolver_service_ibi": "j8lnkb5r7w/3fuqhc5"}}
    for form in (raw, json.dumps(raw)):
        archive = ArchiveConfig.from_context(form)
        assert archive.join == JoinConfig(**JOIN, resolver_service_ibi="J8LNKB5R7W/3FUQHC5")
        assert archive.join_resolver_url == "https://urlib.example.org"
        assert archive.registration_key_parameter == "/ibi/key"
        assert archive.join_resolver_service_ibi == "J8LNKB5R7W/3FUQHC5"
    assert ArchiveConfig.from_context({}).join_resolver_url is None


def test_a_section_built_in_code_is_checked_and_kept_as_one_read() -> None:
    with pytest.raises(ConfigError, match=r"^ibi:throttle.oai_burst: 0 is not in 1-5000$"):
        ThrottleConfig(oai_burst=0)
    resolver = ResolverConfig(
        domain_name="URLib.Example.org.",
        certificate_arn="arn:aws:acm:sa-east-1:123456789012:certificate/abc",
    )
    assert resolver == ResolverConfig.from_context(dataclasses.asdict(resolver))
    assert resolver.domain_name == "urlib.example.org"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"every_minutes": 5}, "ibi:canary.ibi: missing: give an IBI this deployment holds"),
        ({"ibi": 7}, "ibi:canary.ibi: 7 is not an IBI"),
        ({"ibi": "8JMKD3MGP8W/35MME4E", "every_minutes": 61}, "every_minutes: 61 is not in 1-60"),
        ({"ibi": "8JMKD3MGP8W/35MME4E", "resolver_url": "http://x"}, "is not https://host/"),
    ],
)
def test_the_canary_names_what_is_missing_or_wrong(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:canary") as error:
        CanaryConfig.from_context(raw)
    assert message in str(error.value)


def test_an_optional_section_absent_is_off_and_the_edge_takes_a_switch() -> None:
    assert CanaryConfig.from_context(None) is None
    assert CiConfig.from_context(None) is None
    for off in (None, False, "false"):
        assert WafConfig.from_context(off) is None
    for on in (True, "true", {}, "{}"):
        assert WafConfig.from_context(on) == WafConfig()
    assert ConcurrencyConfig.from_context('{"resolver": 50}') == ConcurrencyConfig(resolver=50)
