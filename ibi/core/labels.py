"""The two forms of an IBI label (spec §1.1, §1.2, §7.1, §7.2, §7.4).

``rep`` (seed 002 §6): ``sid.inpe.br/mtc-m18/2009/07.21.13.23`` — host name, port, UTC date.
``ibip`` (seed 002 §7): ``8JMKD3MGP8W/35MME4E`` — IP and port in base 27, date in base 27.

Both are built from the same date; both decode back to where they came from.
"""

from __future__ import annotations

import calendar
import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Literal

from ibi.core import base27
from ibi.core.dates import (
    MAX_DATE,
    format_date,
    fraction_digits,
    iso_date,
    utc_parts,
    whole_seconds,
)
from ibi.core.errors import InvalidIBI, InvalidInput

IBIP_EPOCH = 807235200  # 1995-08-01T00:00:00Z
DEFAULT_REP_PORT = 80
DEFAULT_IBIP_PORT = 800
IPV4_DIGITS = "0123456789."
IPV6_DIGITS = "0123456789abcdef:"

_WORD = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_LAST_WORD = r"[a-z](?:[a-z0-9-]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"(?:{_WORD}\.)*{_LAST_WORD}\.?")
_WORD_PORT = re.compile(rf"({_WORD})(?:([.@])([0-9]+))?")
_HOST = re.compile(rf"{_WORD}\.(?:{_WORD}\.)*{_LAST_WORD}")
_REP_SUFFIX = re.compile(
    r"([0-9]{4,})/([0-9]{2})\.([0-9]{2})\.([0-9]{2})\.([0-9]{2})(?:\.([0-9]{2})(?:\.([0-9]+))?)?"
)
_B27 = "[2-9A-HJ-NP-U]"
_IBIP_PREFIX = re.compile(rf"({_B27}+)([WX])({_B27}*)")
_IBIP_SUFFIX = re.compile(rf"({_B27}+)(?:W({_B27}+))?")

Form = Literal["rep", "ibip"]


# ---------------------------------------------------------------------------- ports, hosts, IPs


def check_port(port: int, part: str = "port") -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidInput(part, f"{port!r} is not a TCP port (1-65535)")
    return port


def canonical_host(host: str) -> str:
    """A host name in lower case, without a final dot, with at least two labels."""
    name = host.lower()
    if name.endswith("."):
        name = name[:-1]
    if len(name) > 253 or not _HOST.fullmatch(name):
        raise InvalidInput(
            "host",
            f"{host!r} is not a domain name with at least two labels "
            "(letters, digits and inner hyphens; the last label starts with a letter)",
        )
    if any(len(label) > 63 for label in name.split(".")):
        raise InvalidInput("host", f"{host!r} has a label longer than 63 characters")
    return name


def canonical_ip(ip: str) -> str:
    """An IP address as the text that is coded: dotted quad, or RFC 5952 IPv6 (§7.2)."""
    try:
        address = ipaddress.ip_address(ip.strip())
    except ValueError:
        raise InvalidInput("ip", f"{ip!r} is not an IPv4 or IPv6 address") from None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            raise InvalidInput("ip", f"{ip!r} has a zone index; give the bare address")
        if address.ipv4_mapped is not None:
            raise InvalidInput(
                "ip", f"{ip!r} is an IPv4-mapped IPv6 address; give the IPv4 address itself"
            )
    return str(address)


# ---------------------------------------------------------------------------- rep form


def rep_prefix(host: str, port: int = DEFAULT_REP_PORT) -> str:
    """Algorithm 1: ``mtc-m18.sid.inpe.br``, 80 -> ``sid.inpe.br/mtc-m18``."""
    name = canonical_host(host)
    check_port(port)
    first_word, _, subdomain = name.partition(".")
    word_port = first_word if port == DEFAULT_REP_PORT else f"{first_word}.{port}"
    return f"{subdomain}/{word_port}"


def rep_suffix(date: Decimal) -> str:
    """Algorithm 2: ``YYYY/MM.DD.hh.mm[.ss[.fff]]`` in UTC."""
    _check_date(date)
    moment = utc_parts(date)
    suffix = moment.strftime("%Y/%m.%d.%H.%M")
    fraction = fraction_digits(date)
    if fraction:
        suffix += f".{moment.second:02d}.{fraction}"
    elif moment.second:
        suffix += f".{moment.second:02d}"
    return suffix


# ---------------------------------------------------------------------------- ibip form


def ibip_prefix(ip: str, port: int = DEFAULT_IBIP_PORT) -> str:
    """Algorithm 5: ``150.163.34.243``, 800 -> ``8JMKD3MGP8W``."""
    text = canonical_ip(ip)
    check_port(port)
    coded_port = "" if port == DEFAULT_IBIP_PORT else base27.encode(port)
    if "." in text:
        return base27.encode(base27.encode_text(text, IPV4_DIGITS)) + "W" + coded_port
    return base27.encode(base27.encode_text(text, IPV6_DIGITS)) + "X" + coded_port


def ibip_suffix(date: Decimal) -> str:
    """Algorithm 6 with the fraction coded as in §7.1 (``.047`` -> 1047 -> ``3DP``)."""
    _check_date(date)
    seconds = whole_seconds(date) - IBIP_EPOCH
    if seconds < 0:
        raise InvalidInput("date", "an IBIp can only code dates from 1995-08-01T00:00:00Z on")
    suffix = base27.encode(seconds)
    fraction = fraction_digits(date)
    if fraction:
        suffix += "W" + base27.encode(int("1" + fraction))
    return suffix


def _check_date(date: Decimal) -> None:
    if not isinstance(date, Decimal) or not date.is_finite() or date < 0 or date > MAX_DATE:
        raise InvalidInput("date", f"{date!r} is not a date between 1970 and 9999")


# ---------------------------------------------------------------------------- parsed labels


@dataclass(frozen=True, slots=True)
class Label:
    """A valid IBI label in one form, decoded.

    ``label`` is canonical: a ``rep`` label in lower case, an ``ibip`` label in upper case.
    Two labels are the same IBI iff their canonical texts are equal (§7.4).
    """

    form: Form
    label: str
    prefix: str
    suffix: str
    date: Decimal
    port: int
    host: str | None = None
    ip: str | None = None

    def __str__(self) -> str:
        return self.label

    @property
    def iso(self) -> str:
        return iso_date(self.date)

    def describe(self) -> dict[str, str | int | None]:
        """What ``ibi inspect --json`` prints: form, canonical label, parts, date, origin."""
        info: dict[str, str | int | None] = {
            "form": self.form,
            "label": self.label,
            "prefix": self.prefix,
            "suffix": self.suffix,
            "date": format_date(self.date),
            "iso": self.iso,
        }
        if self.form == "rep":
            info.update(host=self.host, port=self.port)
        else:
            info.update(ip=self.ip, port=self.port)
        return info


@lru_cache(maxsize=4096)
def parse_label(text: str) -> Label:
    """Parse and validate a label of either form; :class:`InvalidIBI` names the bad part.

    Kept per process for the labels last parsed (a ``Label`` is immutable): an Archive parses
    the same IBI several times per urlRequest, and a resolver the same popular IBIs again
    and again (issue 14).
    """
    if not isinstance(text, str) or not text:
        raise InvalidIBI("ibi", "empty label")
    if any(char.isspace() for char in text) or not text.isascii() or not text.isprintable():
        raise InvalidIBI("ibi", f"{text!r} holds a space, control or non-ASCII character")
    slashes = text.count("/")
    if slashes == 1:
        return _parse_ibip(text)
    if slashes >= 3:
        return _parse_rep(text)
    raise InvalidIBI(
        "ibi",
        f"{text!r} is neither an IBIp (PREFIX/SUFFIX) nor a repository name "
        "(subdomain/word[.port]/YYYY/MM.DD.hh.mm[.ss[.f]])",
    )


def _parse_rep(text: str) -> Label:
    subdomain, word_port, rest = text.lower().split("/", 2)
    if not _SUBDOMAIN.fullmatch(subdomain):
        raise InvalidIBI("prefix", f"{subdomain!r} is not a subdomain (e.g. sid.inpe.br)")
    match = _WORD_PORT.fullmatch(word_port)
    if not match:
        raise InvalidIBI("prefix", f"{word_port!r} is not a word with an optional .port or @port")
    word, separator, port_text = match.groups()
    port = DEFAULT_REP_PORT
    if port_text is not None:
        port = _port_from_digits(port_text)
        if port == DEFAULT_REP_PORT and separator == ".":
            raise InvalidIBI("port", "port 80 is written by leaving the port out (or @80)")
    suffix, date = _parse_rep_suffix(rest)
    prefix = f"{subdomain}/{word_port}"
    host = f"{word}.{subdomain.rstrip('.')}"
    if len(host) > 253 or any(len(label) > 63 for label in host.split(".")):
        raise InvalidIBI("prefix", f"{host!r} is longer than a domain name may be")
    return Label("rep", f"{prefix}/{suffix}", prefix, suffix, date, port, host=host)


def _port_from_digits(port_text: str) -> int:
    if port_text.startswith("0"):
        raise InvalidIBI("port", f"{port_text!r} has a leading zero")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise InvalidIBI("port", f"{port_text} is not a TCP port (1-65535)")
    return port


def _parse_rep_suffix(suffix: str) -> tuple[str, Decimal]:
    match = _REP_SUFFIX.fullmatch(suffix)
    if not match:
        raise InvalidIBI("suffix", f"{suffix!r} is not a date YYYY/MM.DD.hh.mm[.ss[.fraction]]")
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0))
    except ValueError as error:
        raise InvalidIBI("suffix", f"{suffix!r} is not a calendar date: {error}") from None
    if int(year) < 1970:
        raise InvalidIBI("suffix", f"{suffix!r} is before 1970")
    # Algorithm 2 writes no leading zero in the year, no ".00" without a fraction and only
    # the significant digits of a fraction (§7.1): anything else would be a second label
    # for the same date.
    if year.startswith("0"):
        raise InvalidIBI("suffix", f"{suffix!r}: the year has a leading zero")
    if second == "00" and fraction is None:
        raise InvalidIBI("suffix", f"{suffix!r}: seconds 00 are written by leaving them out")
    if fraction is not None and fraction.endswith("0"):
        raise InvalidIBI("suffix", f"{suffix!r}: the fraction of a second ends with a zero")
    seconds = calendar.timegm(moment.timetuple())
    # Built from its text, so exact whatever the number of digits (no context rounding).
    date = Decimal(f"{seconds}.{fraction}" if fraction is not None else seconds)
    if date > MAX_DATE:
        raise InvalidIBI("suffix", f"{suffix!r} codes a date after {MAX_DATE}")
    return suffix, date


def _parse_ibip(text: str) -> Label:
    prefix, suffix = text.upper().split("/")
    match = _IBIP_PREFIX.fullmatch(prefix)
    if not match:
        raise InvalidIBI(
            "prefix",
            f"{prefix!r} is not an IBIp prefix: base-27 digits ({base27.ALPHABET}), "
            "then W (IPv4) or X (IPv6), then an optional base-27 port",
        )
    coded_ip, separator, coded_port = match.groups()
    ip = _decode_ip(coded_ip, ipv6=separator == "X")
    port = DEFAULT_IBIP_PORT
    if coded_port:
        _no_leading_zero(coded_port, "port")
        port = base27.decode(coded_port)
        if port == DEFAULT_IBIP_PORT:
            raise InvalidIBI("port", "port 800 is written by leaving the port out")
        if not 1 <= port <= 65535:
            raise InvalidIBI("port", f"{coded_port!r} codes {port}, not a TCP port (1-65535)")
    date = _decode_ibip_suffix(suffix)
    return Label("ibip", f"{prefix}/{suffix}", prefix, suffix, date, port, ip=ip)


def _no_leading_zero(coded: str, part: str) -> None:
    if len(coded) > 1 and coded[0] == "2":
        raise InvalidIBI(part, f"{coded!r} starts with the digit 2 (zero)")


def _decode_ip(coded: str, *, ipv6: bool) -> str:
    _no_leading_zero(coded, "ip")
    digits = IPV6_DIGITS if ipv6 else IPV4_DIGITS
    text = base27.decode_text(base27.decode(coded), digits)
    # A leading "0" (0.x.x.x, or IPv6 0:...) is the one digit that a number cannot keep.
    for candidate in (text, "0" + text):
        try:
            if canonical_ip(candidate) == candidate and (":" in candidate) == ipv6:
                return candidate
        except InvalidInput:
            continue
    kind = "IPv6" if ipv6 else "IPv4"
    raise InvalidIBI("ip", f"{coded!r} does not decode to an {kind} address (got {text!r})")


def _decode_ibip_suffix(suffix: str) -> Decimal:
    match = _IBIP_SUFFIX.fullmatch(suffix)
    if not match:
        raise InvalidIBI(
            "suffix",
            f"{suffix!r} is not an IBIp suffix: base-27 seconds since 1995-08-01, "
            "then optionally W and the coded fraction",
        )
    coded_seconds, coded_fraction = match.groups()
    _no_leading_zero(coded_seconds, "suffix")
    date = Decimal(base27.decode(coded_seconds) + IBIP_EPOCH)
    if coded_fraction is not None:
        _no_leading_zero(coded_fraction, "suffix")
        digits = str(base27.decode(coded_fraction))
        if len(digits) < 2 or digits[0] != "1" or digits.endswith("0"):
            raise InvalidIBI(
                "suffix",
                f"fraction {coded_fraction!r} codes {digits}, which is not 1 followed by the "
                "significant digits of a fraction of a second",
            )
        date = Decimal(f"{date}.{digits[1:]}")  # exact, whatever the number of digits
    if date > MAX_DATE:
        raise InvalidIBI("suffix", f"{suffix!r} codes a date after the year 9999")
    return date


# ---------------------------------------------------------------------------- an IBI, both forms


@dataclass(frozen=True, slots=True)
class IBI:
    """The two equivalent labels an identification subsystem gives one item."""

    date: Decimal
    rep: str | None = None
    ibip: str | None = None

    @classmethod
    def build(
        cls,
        date: Decimal,
        *,
        host: str | None = None,
        rep_port: int = DEFAULT_REP_PORT,
        ip: str | None = None,
        ibip_port: int = DEFAULT_IBIP_PORT,
    ) -> IBI:
        rep = f"{rep_prefix(host, rep_port)}/{rep_suffix(date)}" if host is not None else None
        ibip = f"{ibip_prefix(ip, ibip_port)}/{ibip_suffix(date)}" if ip is not None else None
        return cls(date=date, rep=rep, ibip=ibip)


def same_ibi(first: str, second: str) -> bool:
    """Two labels are the same IBI iff they are equal ignoring case (§7.4)."""
    return first.casefold() == second.casefold()


def parse_prefix(text: str) -> str:
    """An identification subsystem's prefix, canonical (``Label.prefix`` of its labels):
    ``sid.inpe.br/mtc-m18`` (rep: lower case) or ``8JMKD3MGP8W`` (ibip: upper case).

    Checked as the prefix of a label of its form: :class:`InvalidIBI` names the bad part.
    """
    if not isinstance(text, str) or not text or text.count("/") > 1:
        raise InvalidIBI(
            "prefix", f"{text!r} is neither an IBIp prefix nor a rep one (subdomain/word[.port])"
        )
    # Any valid suffix of the form: the label's checks are the prefix's.
    suffix = "1995/08.01.00.00" if "/" in text else "2"
    return parse_label(f"{text}/{suffix}").prefix
