"""Every test vector of spec/IBI.md §1 and §7.1, one case per vector."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ibi.core import base27
from ibi.core.dates import fraction_digits, iso_date
from ibi.core.distributor import Granularity, TemporalDistributor
from ibi.core.labels import (
    IPV4_DIGITS,
    IPV6_DIGITS,
    ibip_prefix,
    ibip_suffix,
    parse_label,
    rep_prefix,
    rep_suffix,
)

# ---------------------------------------------------------------------------- base 27


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (1, "3"),
        (19050, "U5H"),
        (480992662, "38G3TS3"),
        (4588904456580, "J8LNKAN8P"),
        (478239719325051908572237, "7URMDHLL9SSN2D89M"),
    ],
)
def test_base27(number: int, code: str) -> None:
    assert base27.encode(number) == code
    assert base27.decode(code) == number


# ---------------------------------------------------------------------------- IP text as a number


@pytest.mark.parametrize(
    ("ip", "digits", "number", "code"),
    [
        ("150.163.2.174", IPV4_DIGITS, 4588904456580, "J8LNKAN8P"),
        ("2001:252:0:1::2008:6", IPV6_DIGITS, 478239719325051908572237, "7URMDHLL9SSN2D89M"),
    ],
    ids=["base11-ipv4", "base17-ipv6"],
)
def test_ip_text_as_number(ip: str, digits: str, number: int, code: str) -> None:
    assert base27.encode_text(ip, digits) == number
    assert base27.decode_text(number, digits) == ip
    assert base27.encode(number) == code
    separator = "W" if digits == IPV4_DIGITS else "X"
    assert ibip_prefix(ip) == code + separator


# ---------------------------------------------------------------------------- IBIp prefixes


@pytest.mark.parametrize(
    ("ip", "prefix"),
    [
        ("150.163.34.243", "8JMKD3MGP8W"),
        ("150.163.34.242", "8JMKD3MGP7W"),
        ("127.0.0.1", "LK47B6W"),
    ],
)
def test_ibip_prefix(ip: str, prefix: str) -> None:
    assert ibip_prefix(ip, 800) == prefix
    assert ibip_prefix(ip) == prefix  # 800 is the default
    label = parse_label(f"{prefix}/3")
    assert (label.ip, label.port, label.prefix) == (ip, 800, prefix)


# ---------------------------------------------------------------------------- the date 1234806360


def test_date_1234806360_ibip_suffix() -> None:
    assert ibip_suffix(Decimal(1234806360)) == "34PGRBS"


def test_date_1234806360_rep_suffix() -> None:
    assert rep_suffix(Decimal(1234806360)) == "2009/02.16.17.46"
    assert iso_date(Decimal(1234806360)) == "2009-02-16T17:46:00Z"


def test_date_1234806360_seed_labels_decode_to_it() -> None:
    """Seed 002 §5 Example 2 and §6: ``8JMKD3MGP8W/34PGRBS``, ``…mtc-m18@80/2009/02.16.17.46``."""
    ibip = parse_label("8JMKD3MGP8W/34PGRBS")
    rep = parse_label("sid.inpe.br/mtc-m18@80/2009/02.16.17.46")
    assert ibip.date == rep.date == Decimal(1234806360)


# ---------------------------------------------------------------------------- label pairs


LABEL_PAIRS = [
    # (ibip, rep, date, ip, host): the three pairs of §1.2
    (
        "8JMKD3MGP8W/35MME4E",
        "sid.inpe.br/mtc-m18@80/2009/07.21.13.23",
        Decimal(1248182580),
        "150.163.34.243",
        "mtc-m18.sid.inpe.br",
    ),
    (
        "8JMKD3MGP7W/3EPGUE5",
        "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
        Decimal(1378297677),
        "150.163.34.242",
        "mtc-m19.sid.inpe.br",
    ),
    (
        "LK47B6W/362SFKH",
        "iconet.com.br/banon/2009/09.09.22.01",
        Decimal(1252533660),
        "127.0.0.1",
        "banon.iconet.com.br",
    ),
]


PAIR_IDS = [pair[0] for pair in LABEL_PAIRS]


@pytest.mark.parametrize(("ibip", "rep", "date", "ip", "host"), LABEL_PAIRS, ids=PAIR_IDS)
def test_label_pair_shares_its_date(ibip: str, rep: str, date: Decimal, ip: str, host: str) -> None:
    ibip_label = parse_label(ibip)
    rep_label = parse_label(rep)
    assert ibip_label.date == rep_label.date == date
    assert ibip_label.iso == rep_label.iso
    assert (ibip_label.ip, ibip_label.port) == (ip, 800)
    assert (rep_label.host, rep_label.port) == (host, 80)


@pytest.mark.parametrize(("ibip", "rep", "date", "ip", "host"), LABEL_PAIRS, ids=PAIR_IDS)
def test_label_pair_is_rebuilt_from_its_date(
    ibip: str, rep: str, date: Decimal, ip: str, host: str
) -> None:
    assert f"{ibip_prefix(ip)}/{ibip_suffix(date)}" == ibip
    # Algorithm 1 leaves port 80 out; "@80" is the legacy (pre-2010) way of writing it.
    assert f"{rep_prefix(host)}/{rep_suffix(date)}" == rep.replace("@80", "")


@pytest.mark.parametrize(
    ("ibip", "rep"),
    [
        ("8JMKD3MGP8W/3C9EP6P", "sid.inpe.br/mtc-m18/2012/07.12.18.08"),
        ("8JMKD3MGP8W/35MMLL8", "sid.inpe.br/mtc-m18@80/2009/07.21.14.43"),
    ],
)
def test_more_seed_pairs(ibip: str, rep: str) -> None:
    """Pairs ``{rep R ibip P}`` of the examples of seed 001 (not listed in §1)."""
    assert parse_label(ibip).date == parse_label(rep).date


# ---------------------------------------------------------------------------- Table 6.2

# (request, creation date t'_i, granularity of the answer r_t'(i), date-for-suffix t(i), suffix)
TABLE_6_2 = [
    ("1287587646.394023", 1287587646, 1, 1287587646, "2010/10.20.15.14.06"),
    ("1287588012.2930", 1287588012, 60, 1287588000, "2010/10.20.15.20"),
    ("1287588115.186234", 1287588115, 60, 1287588060, "2010/10.20.15.21"),
    ("1287588115.3462", 1287588115, 1, 1287588115, "2010/10.20.15.21.55"),
    ("1287588115.99623", 1287588116, 1, 1287588116, "2010/10.20.15.21.56"),
    ("1287588116.72", 1287588117, 1, 1287588117, "2010/10.20.15.21.57"),
    ("1287588539.788342", 1287588539, 60, 1287588480, "2010/10.20.15.28"),
]


@pytest.mark.parametrize("row", range(len(TABLE_6_2)), ids=[r[0] for r in TABLE_6_2])
def test_table_6_2(row: int) -> None:
    """Rows 0..row run from a fresh state with r = 1; row ``row`` is checked."""
    distributor = TemporalDistributor(Granularity(1))
    for request, *_ in TABLE_6_2[:row]:
        distributor.distribute(Decimal(request))
    request, creation, answer_granularity, date, suffix = TABLE_6_2[row]
    distribution = distributor.distribute(Decimal(request))
    assert distribution.creation_date == creation
    assert distribution.date_for_suffix == date
    # t(i) is t'_i rounded at the granularity r_t'(i) of the table
    step = Decimal(answer_granularity)
    assert date == step * (Decimal(creation) // step)
    assert rep_suffix(distribution.date_for_suffix) == suffix
    assert distributor.last_date == date


# ---------------------------------------------------------------------------- §7.1 fractions


@pytest.mark.parametrize(
    ("fraction", "number", "code"),
    [(".5", 15, "H"), (".05", 105, "5S"), (".047", 1047, "3DP")],
)
def test_fraction_of_a_second(fraction: str, number: int, code: str) -> None:
    date = Decimal("1287588115" + fraction)
    assert base27.encode(number) == code
    seconds = base27.encode(1287588115 - 807235200)
    assert ibip_suffix(date) == f"{seconds}W{code}"
    assert rep_suffix(date) == "2010/10.20.15.21.55" + fraction
    assert parse_label(f"8JMKD3MGP8W/{seconds}W{code}").date == date


def test_fraction_drops_trailing_zeros() -> None:
    date = Decimal("1287588115.500")
    assert fraction_digits(date) == "5"
    assert ibip_suffix(date) == ibip_suffix(Decimal("1287588115.5"))
    assert ibip_suffix(date).endswith("WH")
    assert rep_suffix(date) == "2010/10.20.15.21.55.5"


def test_rep_writes_the_significant_digits() -> None:
    assert rep_suffix(Decimal("1287588115.047")) == "2010/10.20.15.21.55.047"
    label = parse_label("sid.inpe.br/mtc-m18/2010/10.20.15.21.55.047")
    assert label.date == Decimal("1287588115.047")
    assert label.iso == "2010-10-20T15:21:55.047Z"
