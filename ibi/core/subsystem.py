"""Identification subsystems (spec §7.3): one minting counter, one prefix in each form."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ibi.core.distributor import Granularity
from ibi.core.errors import InvalidInput
from ibi.core.labels import (
    DEFAULT_IBIP_PORT,
    DEFAULT_REP_PORT,
    IBI,
    canonical_host,
    canonical_ip,
    check_port,
    ibip_prefix,
    rep_prefix,
)

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,62})")
_FIELDS = {"name", "host", "ip", "rep_port", "ibip_port", "granularity"}


@dataclass(frozen=True, slots=True)
class Subsystem:
    """An identification subsystem as a deployment configures it."""

    name: str
    host: str
    ip: str
    granularity: Granularity
    rep_port: int = DEFAULT_REP_PORT
    ibip_port: int = DEFAULT_IBIP_PORT
    rep_prefix: str = field(init=False)
    ibip_prefix: str = field(init=False)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise InvalidInput(
                "subsystem", f"{self.name!r}: names are 1-63 of a-z 0-9 _ -, starting alphanumeric"
            )
        object.__setattr__(self, "host", canonical_host(self.host))
        object.__setattr__(self, "ip", canonical_ip(self.ip))
        check_port(self.rep_port, "rep_port")
        check_port(self.ibip_port, "ibip_port")
        object.__setattr__(self, "rep_prefix", rep_prefix(self.host, self.rep_port))
        object.__setattr__(self, "ibip_prefix", ibip_prefix(self.ip, self.ibip_port))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Subsystem:
        if not isinstance(data, Mapping):
            raise InvalidInput("subsystems", f"each subsystem is an object, not {data!r}")
        unknown = set(data) - _FIELDS
        if unknown:
            raise InvalidInput("subsystems", f"unknown field(s) {sorted(unknown)}")
        for required in ("name", "host", "ip", "granularity"):
            if required not in data:
                raise InvalidInput("subsystems", f"a subsystem needs {required!r}: {dict(data)}")
        return cls(
            name=str(data["name"]),
            host=str(data["host"]),
            ip=str(data["ip"]),
            granularity=Granularity(str(data["granularity"])),
            rep_port=_int(data.get("rep_port", DEFAULT_REP_PORT), "rep_port"),
            ibip_port=_int(data.get("ibip_port", DEFAULT_IBIP_PORT), "ibip_port"),
        )

    def to_mapping(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "ip": self.ip,
            "rep_port": self.rep_port,
            "ibip_port": self.ibip_port,
            "granularity": str(self.granularity),
            "rep_prefix": self.rep_prefix,
            "ibip_prefix": self.ibip_prefix,
        }

    def ibi(self, date: Decimal) -> IBI:
        """Both labels of the item identified at ``date`` by this subsystem."""
        return IBI.build(
            date, host=self.host, rep_port=self.rep_port, ip=self.ip, ibip_port=self.ibip_port
        )


def _int(value: Any, part: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput(part, f"{value!r} is not an integer")
    try:
        return int(value)
    except ValueError:
        raise InvalidInput(part, f"{value!r} is not an integer") from None


def check_distinct(subsystems: Iterable[Subsystem]) -> dict[str, Subsystem]:
    """Index subsystems by name; two subsystems may share neither a name nor a prefix."""
    by_name: dict[str, Subsystem] = {}
    prefixes: dict[str, str] = {}
    for subsystem in subsystems:
        if subsystem.name in by_name:
            raise InvalidInput("subsystems", f"two subsystems are named {subsystem.name!r}")
        for prefix in (subsystem.rep_prefix, subsystem.ibip_prefix):
            if prefix in prefixes:
                raise InvalidInput(
                    "subsystems",
                    f"{subsystem.name!r} and {prefixes[prefix]!r} share the prefix {prefix!r}: "
                    "their IBIs could collide; give each its own host, IP or port",
                )
            prefixes[prefix] = subsystem.name
        by_name[subsystem.name] = subsystem
    if not by_name:
        raise InvalidInput("subsystems", "at least one identification subsystem is needed")
    return by_name
