"""Property tests: labels round-trip, the distributor always moves forward (Hypothesis)."""

from __future__ import annotations

import ipaddress
import itertools
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ibi.core import base27
from ibi.core.dates import MAX_DATE, format_date, parse_date
from ibi.core.distributor import Granularity, TemporalDistributor
from ibi.core.labels import (
    IBI,
    IBIP_EPOCH,
    IPV4_DIGITS,
    IPV6_DIGITS,
    ibip_prefix,
    ibip_suffix,
    parse_label,
    rep_prefix,
    rep_suffix,
    same_ibi,
)

from .test_distributor import reference

YEAR_2100 = 4102444800
LADDER = ["60", "1", "0.1", "0.01", "0.001", "0.000001"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# ---------------------------------------------------------------------------- strategies


@st.composite
def dates(draw: st.DrawFn, low: int = IBIP_EPOCH, high: int = YEAR_2100) -> Decimal:
    """A date with 0..6 fraction digits (trailing zeros included, e.g. ``.500``)."""
    seconds = draw(st.integers(low, high))
    places = draw(st.integers(0, 6))
    fraction = draw(st.integers(0, 10**places - 1))
    return Decimal(seconds) + Decimal(fraction).scaleb(-places) if places else Decimal(seconds)


_WORD = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_LAST_WORD = st.from_regex(r"[a-z](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)


@st.composite
def hosts(draw: st.DrawFn) -> str:
    """A host name of Table 6.1: words, the last one starting with a letter, 2+ labels."""
    words = draw(st.lists(_WORD, min_size=1, max_size=4))
    return ".".join([*words, draw(_LAST_WORD)])


# IPv4-mapped IPv6 addresses are refused on purpose (canonical_ip): give the IPv4 address.
ip_addresses = st.ip_addresses().filter(
    lambda address: address.version == 4 or address.ipv4_mapped is None
)
ports = st.integers(1, 65535)


def rfc5952(address: IPAddress) -> str:
    """RFC 5952 text written from the address's bytes, independently of the code under test."""
    if address.version == 4:
        return ".".join(str(byte) for byte in address.packed)
    fields = [int.from_bytes(address.packed[i : i + 2], "big") for i in range(0, 16, 2)]
    best_start, best_length = -1, 1  # "::" only for runs of two or more zero fields
    start = None
    for index, value in enumerate([*fields, 1]):
        if value == 0 and start is None:
            start = index
        elif value != 0 and start is not None:
            if index - start > best_length:
                best_start, best_length = start, index - start
            start = None
    text = [f"{value:x}" for value in fields]
    if best_start < 0:
        return ":".join(text)
    head = ":".join(text[:best_start])
    tail = ":".join(text[best_start + best_length :])
    return f"{head}::{tail}"


# ---------------------------------------------------------------------------- (a) round trips


@settings(max_examples=300)
@given(address=ip_addresses, port=ports, date=dates())
def test_ibip_round_trip(address: IPAddress, port: int, date: Decimal) -> None:
    ibi = IBI.build(date, ip=str(address), ibip_port=port)
    assert ibi.ibip is not None
    assert ibi.ibip == f"{ibip_prefix(str(address), port)}/{ibip_suffix(date)}"
    label = parse_label(ibi.ibip)
    assert label.form == "ibip"
    assert label.label == ibi.ibip == ibi.ibip.upper()
    assert label.ip == rfc5952(address)
    assert label.port == port
    assert label.date == date
    assert format_date(label.date) == format_date(date)
    assert parse_label(ibi.ibip.lower()) == label
    rebuilt = IBI.build(label.date, ip=label.ip, ibip_port=label.port)
    assert rebuilt.ibip == ibi.ibip
    # any text of the same address codes the same prefix (§7.2)
    assert ibip_prefix(address.exploded.upper(), port) == label.prefix


@settings(max_examples=300)
@given(host=hosts(), port=ports, date=dates(low=0))
def test_rep_round_trip(host: str, port: int, date: Decimal) -> None:
    ibi = IBI.build(date, host=host, rep_port=port)
    assert ibi.rep is not None
    assert ibi.rep == f"{rep_prefix(host, port)}/{rep_suffix(date)}"
    label = parse_label(ibi.rep)
    assert label.form == "rep"
    assert label.label == ibi.rep == ibi.rep.lower()
    assert label.host == host
    assert label.port == port
    assert label.date == date
    assert parse_label(ibi.rep.upper()) == label
    rebuilt = IBI.build(label.date, host=label.host, rep_port=label.port)
    assert rebuilt.rep == ibi.rep
    # Algorithm 1: subdomain "/" first word, ".port" unless the port is 80
    first_word, _, subdomain = host.partition(".")
    assert label.prefix == f"{subdomain}/{first_word}" + ("" if port == 80 else f".{port}")
    assert rep_prefix(host.upper() + ".", port) == label.prefix


@settings(max_examples=200)
@given(host=hosts(), address=ip_addresses, date=dates())
def test_both_forms_carry_one_date(host: str, address: IPAddress, date: Decimal) -> None:
    ibi = IBI.build(date, host=host, ip=str(address))
    assert ibi.rep is not None
    assert ibi.ibip is not None
    rep, ibip = parse_label(ibi.rep), parse_label(ibi.ibip)
    assert rep.date == ibip.date == date
    assert rep.iso == ibip.iso
    assert (rep.port, ibip.port) == (80, 800)


@settings(max_examples=300)
@given(number=st.integers(min_value=0, max_value=2**256))
def test_base27_round_trip(number: int) -> None:
    code = base27.encode(number)
    assert base27.decode(code) == number
    assert base27.is_digits(code)
    assert number == 0 or not code.startswith("2")  # no leading zero digit
    assert 27 ** (len(code) - 1) <= max(number, 1) < 27 ** len(code)


@settings(max_examples=200)
@given(address=ip_addresses)
def test_ip_text_round_trip(address: IPAddress) -> None:
    text = rfc5952(address)
    digits = IPV4_DIGITS if address.version == 4 else IPV6_DIGITS
    number = base27.encode_text(text, digits)
    # a leading "0" is a leading zero digit: the number keeps everything else
    assert base27.decode_text(number, digits) == (text[1:] if text.startswith("0") else text)


@st.composite
def date_texts(draw: st.DrawFn) -> str:
    integer = str(draw(st.integers(0, int(MAX_DATE) - 1)))
    zeros = "0" * draw(st.integers(0, 3))
    if draw(st.booleans()):
        return zeros + integer
    fraction = draw(st.from_regex(r"[0-9]{1,12}", fullmatch=True))
    return f"{zeros}{integer}.{fraction}"


@settings(max_examples=300)
@given(text=date_texts())
def test_format_date_normalises(text: str) -> None:
    date = parse_date(text)
    integer, _, fraction = text.partition(".")
    integer = integer.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    assert format_date(date) == (f"{integer}.{fraction}" if fraction else integer)
    assert parse_date(format_date(date)) == date
    assert format_date(parse_date(format_date(date))) == format_date(date)


# ---------------------------------------------------------------------------- (b) the distributor

_request_times = st.one_of(
    st.just(Decimal(0)),  # equal times
    st.decimals(min_value=0, max_value=3, places=6),  # bursts
    st.decimals(min_value=-120, max_value=0, places=3),  # the clock going back
    st.integers(1, 10**8).map(Decimal),  # huge jumps
)
_granularities = st.sampled_from(LADDER).map(Granularity)


def _fraction_places(value: Decimal) -> int:
    return len(format_date(value).partition(".")[2])


@settings(max_examples=200)
@given(
    start=dates(),
    first=_granularities,
    steps=st.lists(st.tuples(_request_times, st.none() | _granularities), min_size=1, max_size=60),
)
def test_distributor_strictly_increases(
    start: Decimal, first: Granularity, steps: list[tuple[Decimal, Granularity | None]]
) -> None:
    requests = []
    current = start
    for delta, granularity in steps:
        current = max(current + delta, Decimal(0))
        requests.append((current, granularity))
    distributor = TemporalDistributor(first)
    finest = first.value
    previous: Decimal | None = None
    for current, distribution in distributor.replay(requests):
        r = distributor.granularity.value
        finest = min(finest, r)
        date = distribution.date_for_suffix
        if previous is not None:
            assert date > previous
        assert distribution.creation_date >= r * (current // r)
        assert date <= distribution.creation_date
        # line 4 puts the last date back on the grid of r, every candidate of lines 8-16 is
        # a multiple of r (or of 10r, ..., 1, 60, which are multiples of r): so is the answer
        assert date % r == 0
        assert _fraction_places(date) <= _fraction_places(r)
        assert _fraction_places(date) <= _fraction_places(finest)
        # and it is the date the seed's definitions give (independent, in fractions)
        expected = reference(
            Fraction(current), None if previous is None else Fraction(previous), Fraction(r)
        )
        assert (Fraction(distribution.creation_date), Fraction(date)) == expected
        previous = date


# ---------------------------------------------------------------------------- (c) distinct labels


@settings(max_examples=150)
@given(
    chosen=st.sets(dates(), min_size=2, max_size=40),
    host=hosts(),
    address=ip_addresses,
)
def test_increasing_dates_give_distinct_labels(
    chosen: set[Decimal], host: str, address: IPAddress
) -> None:
    ordered = sorted(chosen)
    built = [IBI.build(date, host=host, ip=str(address)) for date in ordered]
    for labels in ([ibi.rep for ibi in built], [ibi.ibip for ibi in built]):
        texts = [label for label in labels if label is not None]
        assert len(texts) == len(ordered)
        assert len({text.casefold() for text in texts}) == len(ordered)
        assert [parse_label(text).date for text in texts] == ordered
        assert not any(same_ibi(a, b) for a, b in itertools.pairwise(texts))


@settings(max_examples=100)
@given(
    start=dates(),
    granularity=_granularities,
    deltas=st.lists(st.decimals(min_value=0, max_value=2, places=4), min_size=2, max_size=60),
)
def test_distributed_dates_give_distinct_labels(
    start: Decimal, granularity: Granularity, deltas: list[Decimal]
) -> None:
    distributor = TemporalDistributor(granularity)
    current = start
    labels = []
    for delta in deltas:
        current += delta
        date = distributor.distribute(current).date_for_suffix
        ibi = IBI.build(date, host="mtc-m18.sid.inpe.br", ip="150.163.34.243")
        assert ibi.rep is not None
        assert ibi.ibip is not None
        labels.append((ibi.rep, ibi.ibip))
    for index in (0, 1):
        assert len({pair[index].casefold() for pair in labels}) == len(labels)
