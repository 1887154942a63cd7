"""The minting function's configuration: read once from the environment, validated."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from functions.shared.errors import ConfigurationError
from ibi.core.errors import InvalidInput
from ibi.core.subsystem import Subsystem, check_distinct
from ibi.defaults import IDEMPOTENCY_TTL_SECONDS

MAX_COUNT = 1000
# The longest block of dates one execution environment claims past a request's date (see
# MintingService): measured in bench/minting.py, docs/decisions.md "Blocks of dates".
DEFAULT_BLOCK_SECONDS = Decimal(0)


@dataclass(frozen=True, slots=True)
class Settings:
    state_table: str
    record_table: str
    idempotency_table: str
    subsystems: Mapping[str, Subsystem]
    default_subsystem: str
    max_wait: Decimal = Decimal(5)
    block_seconds: Decimal = DEFAULT_BLOCK_SECONDS
    idempotency_ttl_seconds: int = IDEMPOTENCY_TTL_SECONDS

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        try:
            return cls._parse(env)
        except (InvalidInput, KeyError, ValueError, InvalidOperation) as error:
            raise ConfigurationError(f"invalid minting configuration: {error}") from error

    @classmethod
    def _parse(cls, env: Mapping[str, str]) -> Settings:
        missing = [
            name
            for name in ("IBI_STATE_TABLE", "IBI_RECORD_TABLE", "IBI_IDEMPOTENCY_TABLE")
            if not env.get(name)
        ]
        if missing:
            raise KeyError(f"environment variable(s) {missing} not set")
        raw = json.loads(env.get("IBI_SUBSYSTEMS", "[]"))
        if not isinstance(raw, list):
            raise ValueError("IBI_SUBSYSTEMS must be a JSON list of subsystems")
        subsystems = check_distinct(Subsystem.from_mapping(item) for item in raw)
        default = env.get("IBI_DEFAULT_SUBSYSTEM") or next(iter(subsystems))
        if default not in subsystems:
            raise ValueError(f"IBI_DEFAULT_SUBSYSTEM {default!r} is not one of {list(subsystems)}")
        max_wait = Decimal(env.get("IBI_MAX_WAIT_SECONDS", "5"))
        if not max_wait.is_finite() or not Decimal(0) <= max_wait <= Decimal(20):
            raise ValueError("IBI_MAX_WAIT_SECONDS must be between 0 and 20")
        block = Decimal(env.get("IBI_MINT_BLOCK_SECONDS", str(DEFAULT_BLOCK_SECONDS)))
        if not block.is_finite() or not Decimal(0) <= block <= Decimal(1):
            raise ValueError("IBI_MINT_BLOCK_SECONDS must be between 0 and 1")
        return cls(
            state_table=env["IBI_STATE_TABLE"],
            record_table=env["IBI_RECORD_TABLE"],
            idempotency_table=env["IBI_IDEMPOTENCY_TABLE"],
            subsystems=subsystems,
            default_subsystem=default,
            max_wait=max_wait,
            block_seconds=block,
        )
