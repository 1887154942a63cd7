"""One reader for every ``ibi:`` context object: a frozen dataclass whose fields say their rules.

A section of the configuration is a dataclass deriving from :class:`Section` (absent: its
defaults) or :class:`OptionalSection` (absent: ``None``, the feature is off). Each field's
annotation carries its rule, ``Annotated[int, Whole(0, 15)]``: a :class:`Check` turns a context
value into the field's value (``"ONE_YEAR"`` into ``logs.RetentionDays.ONE_YEAR``, a domain into
lower case) or raises a :class:`ConfigError` naming the field. :func:`read` takes the context
value (an object, or that object as a JSON string, how ``-c`` passes it), refuses unknown
fields, treats ``null`` as absent and names a required field that is missing; the checks run in
``__post_init__``, so a section built in code is checked as one read from the context.
"""

from __future__ import annotations

import abc
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Annotated, Any, ClassVar, Self, TypeVar, get_args, get_origin, get_type_hints

from constructs import Construct

from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label


class ConfigError(ValueError):
    """A context value is malformed or inconsistent; the message names the field."""


class Check(abc.ABC):
    """The rule of one field: the field's value from a context value, or a ConfigError."""

    @property
    @abc.abstractmethod
    def what(self) -> str:
        """What a value must be, for the messages: ``a whole number in 0-15``."""

    @abc.abstractmethod
    def __call__(self, value: Any, path: str) -> Any:
        """``value`` as the field keeps it; ``path`` (``ibi:minting.max_wait_seconds``) names
        the field in the error."""


@dataclass(frozen=True, slots=True)
class Whole(Check):
    """A whole number in ``low``-``high`` (``True`` is not one)."""

    low: int
    high: int

    @property
    def what(self) -> str:
        return f"a whole number in {self.low}-{self.high}"

    def __call__(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: {value!r} is not a whole number")
        if not self.low <= value <= self.high:
            raise ConfigError(f"{path}: {value!r} is not in {self.low}-{self.high}")
        return value


@dataclass(frozen=True, slots=True)
class Text(Check):
    """A string that, once ``normalize``d (and kept so), matches ``pattern``."""

    pattern: re.Pattern[str]
    what: str
    normalize: Callable[[str], str] = str

    def __call__(self, value: Any, path: str) -> str:
        if isinstance(value, str) and self.pattern.fullmatch(self.normalize(value)):
            return self.normalize(value)
        raise ConfigError(f"{path}: {value!r} is not {self.what}")


@dataclass(frozen=True, slots=True)
class Label(Check):
    """An IBI, kept in its canonical form (``ibi.core.labels``)."""

    what: str = "an IBI"

    def __call__(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {value!r} is not an IBI")
        try:
            return parse_label(value).label
        except InvalidInput as error:
            raise ConfigError(f"{path}: {error}") from None


@dataclass(frozen=True, slots=True)
class Choice(Check):
    """A member of ``choices``, given by its name (``"ONE_MONTH"``)."""

    choices: type[enum.Enum]

    @property
    def what(self) -> str:
        return f"one of {', '.join(member.name for member in self.choices)}"

    def __call__(self, value: Any, path: str) -> enum.Enum:
        if isinstance(value, self.choices):
            return value
        try:
            return self.choices[str(value)]
        except KeyError:
            raise ConfigError(f"{path}: {value!r} is not {self.what}") from None


@dataclass(frozen=True, slots=True)
class Nested(Check):
    """A section inside a section (``ibi:archive.lifecycle``), read as its own."""

    section: type[Fields]

    @property
    def what(self) -> str:
        return f"an object of {', '.join(field_names(self.section))}"

    def __call__(self, value: Any, path: str) -> Fields:
        if isinstance(value, self.section):
            return value
        if not isinstance(value, Mapping):  # JSON text is for a whole context value, not a field
            raise ConfigError(f"{path}: expected an object, got {value!r}")
        return read(self.section, value)


class Fields:
    """What every section shares: its context key, and its fields checked on construction."""

    __slots__ = ()
    KEY: ClassVar[str]  # the context key (or ``key.field`` for a nested section)

    def __post_init__(self) -> None:
        for name, check in checks(type(self)).items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check(value, f"{self.KEY}.{name}"))
        self.check()

    def check(self) -> None:
        """The rules between fields, once each field has passed its own."""

    def both_or_neither(self, first: str, second: str, why: str) -> None:
        if (getattr(self, first) is None) != (getattr(self, second) is None):
            raise ConfigError(f"{self.KEY}: give {first} and {second} together{why}")


class Section(Fields):
    """A section that is always there: absent, it takes its defaults."""

    __slots__ = ()

    @classmethod
    def from_context(cls, raw: Any) -> Self:
        """The section from its context value; ``None`` (key absent) gives the defaults."""
        return cls() if raw is None else read(cls, raw)

    @classmethod
    def from_scope(cls, scope: Construct) -> Self:
        """The section from the context visible at ``scope``."""
        return cls.from_context(scope.node.try_get_context(cls.KEY))


class OptionalSection(Fields):
    """A section that turns a feature on: absent, there is no such feature (``None``)."""

    __slots__ = ()

    @classmethod
    def from_context(cls, raw: Any) -> Self | None:
        """The section from its context value; ``None`` (key absent): the feature is off."""
        return None if raw is None else read(cls, raw)

    @classmethod
    def from_scope(cls, scope: Construct) -> Self | None:
        """The section from the context visible at ``scope``, or ``None``."""
        return cls.from_context(scope.node.try_get_context(cls.KEY))


S = TypeVar("S", bound=Fields)


def read(cls: type[S], raw: Any) -> S:
    """The section ``cls`` from its context value (an object, or it as a JSON string)."""
    key = cls.KEY
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{key}: not valid JSON ({error})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{key}: expected an object, got {raw!r}")
    names = field_names(cls)
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(f"{key}: unknown fields {unknown}")
    values = {name: raw[name] for name in names if raw.get(name) is not None}
    for field in fields(cls):  # type: ignore[arg-type]
        required = field.default is MISSING and field.default_factory is MISSING
        if required and field.name not in values:
            what = checks(cls)[field.name].what
            raise ConfigError(f"{key}.{field.name}: missing: give {what}")
    return cls(**values)


def field_names(cls: type[Fields]) -> tuple[str, ...]:
    """The fields a context object of ``cls`` may name."""
    return tuple(field.name for field in fields(cls) if field.init)  # type: ignore[arg-type]


def checks(cls: type[Fields]) -> dict[str, Check]:
    """Each field's check, from its ``Annotated`` type (read once per class)."""
    if cls not in _CHECKS:
        found = {}
        for name, hint in get_type_hints(cls, include_extras=True).items():
            if get_origin(hint) is Annotated:
                (check,) = [extra for extra in get_args(hint)[1:] if isinstance(extra, Check)]
                found[name] = check
        _CHECKS[cls] = found
    return _CHECKS[cls]


_CHECKS: dict[type[Fields], dict[str, Check]] = {}
