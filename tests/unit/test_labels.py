"""Parsing, canonical forms and rejections of IBI labels (spec §1.1, §1.2, §7.1, §7.2, §7.4)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ibi.core import base27
from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import (
    IBI,
    IPV6_DIGITS,
    canonical_host,
    canonical_ip,
    ibip_prefix,
    ibip_suffix,
    parse_label,
    rep_prefix,
    rep_suffix,
    same_ibi,
)

DATE = Decimal(1248182580)  # 2009-07-21T13:23:00Z
IBIP = "8JMKD3MGP8W/35MME4E"
REP = "sid.inpe.br/mtc-m18/2009/07.21.13.23"


# ---------------------------------------------------------------------------- both forms


def test_parse_rep() -> None:
    label = parse_label("sid.inpe.br/mtc-m19/2013/09.04.12.27.57")
    assert label.form == "rep"
    assert label.label == "sid.inpe.br/mtc-m19/2013/09.04.12.27.57"
    assert label.prefix == "sid.inpe.br/mtc-m19"
    assert label.suffix == "2013/09.04.12.27.57"
    assert label.date == Decimal(1378297677)
    assert (label.host, label.port, label.ip) == ("mtc-m19.sid.inpe.br", 80, None)
    assert label.iso == "2013-09-04T12:27:57Z"
    assert str(label) == label.label


def test_parse_ibip() -> None:
    label = parse_label("8JMKD3MGP7W/3EPGUE5")
    assert label.form == "ibip"
    assert (label.label, label.prefix, label.suffix) == (
        "8JMKD3MGP7W/3EPGUE5",
        "8JMKD3MGP7W",
        "3EPGUE5",
    )
    assert label.date == Decimal(1378297677)
    assert (label.ip, label.port, label.host) == ("150.163.34.242", 800, None)
    assert label.iso == "2013-09-04T12:27:57Z"


def test_ibi_build_gives_both_forms_of_one_date() -> None:
    ibi = IBI.build(DATE, host="mtc-m18.sid.inpe.br", ip="150.163.34.243")
    assert (ibi.rep, ibi.ibip, ibi.date) == (REP, IBIP, DATE)
    assert parse_label(REP).date == parse_label(IBIP).date == DATE


def test_ibi_build_one_form_only() -> None:
    assert IBI.build(DATE, host="mtc-m18.sid.inpe.br").ibip is None
    assert IBI.build(DATE, ip="150.163.34.243").rep is None


# ---------------------------------------------------------------------------- case (§1, §7.4)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("SID.INPE.BR/MTC-M18/2009/07.21.13.23", REP),
        ("sid.INPE.br/MTC-m18@80/2009/02.16.17.46", "sid.inpe.br/mtc-m18@80/2009/02.16.17.46"),
        ("8jmkd3mgp8w/35mme4e", IBIP),
        ("8jMkD3mGp8W/35mMe4E", IBIP),
        ("8jmkd3mgp8w/35mme4ew3dp", "8JMKD3MGP8W/35MME4EW3DP"),
    ],
)
def test_canonical_case(text: str, canonical: str) -> None:
    label = parse_label(text)
    assert label.label == canonical
    assert parse_label(canonical) == label
    assert same_ibi(text, canonical)


def test_builders_write_rep_lower_and_ibip_upper() -> None:
    assert rep_prefix("MTC-M18.SID.INPE.BR") == "sid.inpe.br/mtc-m18"
    ibip = IBI.build(Decimal("1287588115.047"), ip="150.163.34.243").ibip
    assert ibip is not None
    assert ibip == ibip.upper()


def test_at_80_is_another_label_for_the_same_date_host_and_port() -> None:
    legacy = parse_label("sid.inpe.br/mtc-m18@80/2009/07.21.13.23")
    current = parse_label(REP)
    assert legacy.label != current.label
    assert not same_ibi(legacy.label, current.label)
    assert (legacy.date, legacy.host, legacy.port) == (current.date, current.host, current.port)


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (IBIP, IBIP.lower(), True),
        (REP, REP.upper(), True),
        (IBIP, REP, False),  # two forms of one item are two labels
        (IBIP, "8JMKD3MGP7W/35MME4E", False),
    ],
)
def test_same_ibi(first: str, second: str, same: bool) -> None:
    assert same_ibi(first, second) is same


# ---------------------------------------------------------------------------- what labels decode to


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("sid.inpe.br/mtc-m18/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 80),
        ("sid.inpe.br/mtc-m18@80/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 80),
        ("sid.inpe.br/mtc-m18.8080/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 8080),
        ("sid.inpe.br/mtc-m18@1905/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 1905),
        ("sid.inpe.br/mtc-m18.1/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 1),
        ("sid.inpe.br/mtc-m18.65535/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 65535),
        ("dpi.inpe.br/banon/2009/07.21.13.23", "banon.dpi.inpe.br", 80),
        ("br/inpe/2009/07.21.13.23", "inpe.br", 80),
        ("sid.inpe.br./mtc-m18/2009/07.21.13.23", "mtc-m18.sid.inpe.br", 80),  # FQDN dot
        ("a1-b.c.d2.example/x9/2009/07.21.13.23", "x9.a1-b.c.d2.example", 80),
    ],
)
def test_rep_decodes_host_and_port(text: str, host: str, port: int) -> None:
    label = parse_label(text)
    assert (label.host, label.port, label.date) == (host, port, DATE)


@pytest.mark.parametrize(
    ("ip", "port"),
    [
        ("150.163.34.243", 800),
        ("150.163.34.243", 80),
        ("150.163.34.243", 1),
        ("150.163.34.243", 65535),
        ("192.0.2.7", 8443),
        ("2001:db8::1", 800),
        ("2001:db8::1", 443),
        ("2001:252:0:1::2008:6", 65535),
        ("::1", 802),
    ],
)
def test_ibip_decodes_ip_and_port(ip: str, port: int) -> None:
    ibi = IBI.build(DATE, ip=ip, ibip_port=port)
    assert ibi.ibip is not None
    prefix = ibi.ibip.partition("/")[0]
    separator = "X" if ":" in ip else "W"
    coded_ip, found, coded_port = prefix.partition(separator)
    assert found == separator
    assert base27.is_digits(coded_ip)
    assert coded_port == ("" if port == 800 else base27.encode(port))
    label = parse_label(ibi.ibip)
    assert (label.ip, label.port, label.date) == (ip, port, DATE)


@pytest.mark.parametrize(
    ("host", "port", "prefix"),
    [
        ("mtc-m18.sid.inpe.br", 80, "sid.inpe.br/mtc-m18"),
        ("mtc-m18.sid.inpe.br", 8080, "sid.inpe.br/mtc-m18.8080"),
        ("banon.iconet.com.br", 80, "iconet.com.br/banon"),
        ("MTC-M18.SID.INPE.BR.", 81, "sid.inpe.br/mtc-m18.81"),
        ("a.b", 80, "b/a"),
    ],
)
def test_rep_prefix(host: str, port: int, prefix: str) -> None:
    assert rep_prefix(host, port) == prefix
    label = parse_label(f"{prefix}/{rep_suffix(DATE)}")
    assert (label.host, label.port) == (canonical_host(host), port)


@pytest.mark.parametrize(
    ("date", "suffix", "iso"),
    [
        (Decimal(1248182580), "2009/07.21.13.23", "2009-07-21T13:23:00Z"),
        (Decimal(1248182585), "2009/07.21.13.23.05", "2009-07-21T13:23:05Z"),
        (Decimal("1248182580.5"), "2009/07.21.13.23.00.5", "2009-07-21T13:23:00.5Z"),
        (Decimal("1248182585.000001"), "2009/07.21.13.23.05.000001", "2009-07-21T13:23:05.000001Z"),
        (Decimal(0), "1970/01.01.00.00", "1970-01-01T00:00:00Z"),
        (Decimal(951782400), "2000/02.29.00.00", "2000-02-29T00:00:00Z"),  # leap day
        (Decimal(253402300799), "9999/12.31.23.59.59", "9999-12-31T23:59:59Z"),
    ],
)
def test_rep_suffix_date_and_iso(date: Decimal, suffix: str, iso: str) -> None:
    assert rep_suffix(date) == suffix
    label = parse_label(f"sid.inpe.br/mtc-m18/{suffix}")
    assert label.date == date
    assert label.suffix == suffix
    assert label.iso == iso


@pytest.mark.parametrize(
    ("date", "suffix"),
    [
        (Decimal(807235200), "2"),  # the IBIp epoch, 1995-08-01T00:00:00Z
        (Decimal(807235201), "3"),
        (Decimal(807235200 + 27), "32"),
        (Decimal("807235200.5"), "2WH"),
        (Decimal(1234806360), "34PGRBS"),
    ],
)
def test_ibip_suffix_date(date: Decimal, suffix: str) -> None:
    assert ibip_suffix(date) == suffix
    assert parse_label(f"{ibip_prefix('127.0.0.1')}/{suffix}").date == date


def test_long_fractions_decode_exactly() -> None:
    """No rounding to the 28 digits of the decimal context, in either form."""
    date = Decimal("1248182585.1234567890123456789012345")
    ibi = IBI.build(date, host="mtc-m18.sid.inpe.br", ip="150.163.34.243")
    assert ibi.rep == "sid.inpe.br/mtc-m18/2009/07.21.13.23.05.1234567890123456789012345"
    assert ibi.ibip is not None
    assert parse_label(ibi.rep).date == date
    assert parse_label(ibi.ibip).date == date


# ---------------------------------------------------------------------------- IPs (§7.2)


@pytest.mark.parametrize(
    ("ip", "canonical"),
    [
        ("2001:0DB8:0:0:0:0:0:1", "2001:db8::1"),
        ("2001:db8::1", "2001:db8::1"),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),  # equal runs: the first one
        ("2001:db8:0:0:0:1:0:0", "2001:db8::1:0:0"),  # the longest run
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),  # one 0 field is not compressed
        ("2001:DB8:AAAA:BBBB:CCCC:DDDD:EEEE:FFFF", "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff"),
        ("0:0:0:0:0:0:0:0", "::"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("1:0:0:0:0:0:0:0", "1::"),
        ("150.163.34.243", "150.163.34.243"),
    ],
)
def test_canonical_ip(ip: str, canonical: str) -> None:
    assert canonical_ip(ip) == canonical
    assert ibip_prefix(ip) == ibip_prefix(canonical)
    assert parse_label(f"{ibip_prefix(ip)}/3").ip == canonical


def test_ipv6_text_is_coded_canonically_only() -> None:
    """A prefix coding non-RFC-5952 text of an address is not accepted (one IP, one prefix)."""
    coded = base27.encode(base27.encode_text("2001:db8:0:0:0:0:0:1", IPV6_DIGITS))
    assert coded + "X" != ibip_prefix("2001:db8::1")
    with pytest.raises(InvalidIBI) as error:
        parse_label(f"{coded}X/3")
    assert error.value.part == "ip"


@pytest.mark.parametrize(
    "ip", ["0.1.2.3", "0.0.0.0", "0:1:0:1:0:1:0:1", "0:1::", "::", "::2", "10.0.0.1"]
)
@pytest.mark.parametrize("port", [800, 8080])
def test_addresses_starting_with_zero_round_trip(ip: str, port: int) -> None:
    """A leading 0 is a leading zero digit of the base-11/17 number; decoding puts it back."""
    label = parse_label(f"{ibip_prefix(ip, port)}/3")
    assert (label.ip, label.port) == (ip, port)


@pytest.mark.parametrize(
    "ip",
    ["::ffff:1.2.3.4", "fe80::1%eth0", "1.2.3", "256.1.1.1", "01.2.3.4", "1::2::3", "", "example"],
)
def test_canonical_ip_rejects(ip: str) -> None:
    with pytest.raises(InvalidInput) as error:
        ibip_prefix(ip)
    assert error.value.part == "ip"


# ---------------------------------------------------------------------------- hosts


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost.",
        "mtc-m18",
        "",
        ".",
        "a..b",
        "-a.b",
        "a-.b",
        "a.b-",
        "a.9b",  # the last label starts with a letter
        "150.163.34.243",
        "a_b.c",
        "a b.c",
        "x" * 64 + ".br",
        ".".join(["abcdefghi"] * 26) + ".br",  # 262 characters
    ],
)
def test_canonical_host_rejects(host: str) -> None:
    with pytest.raises(InvalidInput) as error:
        rep_prefix(host)
    assert error.value.part == "host"


# ---------------------------------------------------------------------------- ports


@pytest.mark.parametrize("port", [0, 65536, -1, True, "80"])
def test_builders_reject_ports(port: object) -> None:
    with pytest.raises(InvalidInput) as error:
        rep_prefix("mtc-m18.sid.inpe.br", port)  # type: ignore[arg-type]
    assert error.value.part == "port"
    with pytest.raises(InvalidInput) as error:
        ibip_prefix("150.163.34.243", port)  # type: ignore[arg-type]
    assert error.value.part == "port"


@pytest.mark.parametrize(
    "text",
    [
        "sid.inpe.br/mtc-m18.0/2009/07.21.13.23",
        "sid.inpe.br/mtc-m18@0/2009/07.21.13.23",
        "sid.inpe.br/mtc-m18.65536/2009/07.21.13.23",
        "sid.inpe.br/mtc-m18.080/2009/07.21.13.23",  # leading zero
        "sid.inpe.br/mtc-m18@0080/2009/07.21.13.23",
        "8JMKD3MGP8W2/35MME4E",  # codes port 0
        f"8JMKD3MGP8W{base27.encode(65536)}/35MME4E",
        "8JMKD3MGP8W2U5H/35MME4E",  # leading zero digit
        f"8JMKD3MGP8W{base27.encode(800)}/35MME4E",  # 800 is written by leaving it out
    ],
)
def test_parse_rejects_ports(text: str) -> None:
    with pytest.raises(InvalidIBI) as error:
        parse_label(text)
    assert error.value.part == "port"


# ---------------------------------------------------------------------------- rejections


def _rejected_part(text: object) -> str:
    with pytest.raises(InvalidIBI) as error:
        parse_label(text)  # type: ignore[arg-type]
    assert error.value.reason
    return error.value.part


@pytest.mark.parametrize("char", ["0", "1", "I", "O", "V", "Y", "Z", "i", "o", "v", "y", "z"])
@pytest.mark.parametrize(
    ("template", "part"),
    [
        ("8JMKD3MGP8W/35MM?E4E", "suffix"),
        ("8JMKD3MGP8W/?35MME4E", "suffix"),
        ("8JMKD3MGP8W/35MME4EW3D?", "suffix"),
        ("8JMK?D3MGP8W/35MME4E", "prefix"),
        ("8JMKD3MGP8W?/35MME4E", "prefix"),
        ("?8JMKD3MGP8W/35MME4E", "prefix"),
    ],
)
def test_ibip_rejects_chars_outside_the_alphabet(char: str, template: str, part: str) -> None:
    assert _rejected_part(template.replace("?", char)) == part


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("8JMKD3MGP8/35MME4E", "prefix"),  # no W or X
        ("8JMKD3MGP8WW/35MME4E", "prefix"),
        ("8JMKD3MGP8WX/35MME4E", "prefix"),
        ("W/35MME4E", "prefix"),
        ("X/35MME4E", "prefix"),
        ("/35MME4E", "prefix"),
        ("8JMKD3MGP8W/", "suffix"),
        ("8JMKD3MGP8W/W", "suffix"),
        ("8JMKD3MGP8W/35MME4EW", "suffix"),
        ("8JMKD3MGP8W/35MME4EX3DP", "suffix"),
        ("8JMKD3MGP8W/35MME4EW3DPW3", "suffix"),
        ("8JMKD3MGP8W/235MME4E", "suffix"),  # leading zero digit
        ("8JMKD3MGP8W/35MME4EW23DP", "suffix"),
        ("8JMKD3MGP8W/35MME4EW3", "suffix"),  # codes 1: no digit after the 1
        ("8JMKD3MGP8W/35MME4EW5", "suffix"),  # codes 3: does not start with 1
        (f"8JMKD3MGP8W/35MME4EW{base27.encode(150)}", "suffix"),  # .50: trailing zero
        (f"8JMKD3MGP8W/35MME4EW{base27.encode(10)}", "suffix"),  # .0
        (f"8JMKD3MGP8W/{base27.encode(253402300800 - 807235200)}", "suffix"),  # after 9999
        ("28JMKD3MGP8W/35MME4E", "ip"),  # leading zero digit
        ("2W/35MME4E", "ip"),
        ("3W/35MME4E", "ip"),  # "1" is no IPv4 address
        ("8JMKD3MGP8X/35MME4E", "ip"),  # an IPv4 number under the IPv6 separator
        (f"{ibip_prefix('2001:db8::1')[:-1]}W/35MME4E", "ip"),  # and the reverse
    ],
)
def test_ibip_rejects(text: str, part: str) -> None:
    assert _rejected_part(text) == part


@pytest.mark.parametrize(
    ("suffix", "why"),
    [
        ("2009/13.21.13.23", "month 13"),
        ("2009/00.21.13.23", "month 0"),
        ("2009/07.00.13.23", "day 0"),
        ("2009/07.32.13.23", "day 32"),
        ("2009/02.30.13.23", "30 February"),
        ("2009/02.29.13.23", "29 February of a common year"),
        ("1900/02.29.13.23", "1900 is no leap year"),
        ("2009/07.21.24.00", "hour 24"),
        ("2009/07.21.13.60", "minute 60"),
        ("2009/07.21.13.23.60", "second 60 (no leap seconds in POSIX time)"),
        ("2009/07.21.13.23.61", "second 61"),
        ("1969/12.31.23.59", "before 1970"),
        ("10000/01.01.00.00", "after 9999"),
        ("9999/12.31.23.59.59.5", "after the last date"),
        ("02009/07.21.13.23", "year with a leading zero"),
        ("2009/07.21.13.23.00", "seconds 00 without a fraction"),
        ("2009/07.21.13.23.05.0", "a zero fraction"),
        ("2009/07.21.13.23.05.050", "a fraction with a trailing zero"),
        ("2009/7.21.13.23", "one-digit month"),
        ("2009/07.21.13.3", "one-digit minute"),
        ("2009/07.21.13.23.5", "one-digit second"),
        ("209/07.21.13.23", "three-digit year"),
        ("2009/07.21.13", "no minute"),
        ("2009/07.21.13.23.05.", "empty fraction"),
        ("2009/07.21.13.23.05.047.1", "two fractions"),
        ("2009/07-21T13:23Z", "ISO 8601"),
        ("2009/07.21.13.23/", "trailing slash"),
        ("2009/07/21.13.23", "a fourth slash"),
    ],
)
def test_rep_rejects_suffixes(suffix: str, why: str) -> None:
    assert _rejected_part(f"sid.inpe.br/mtc-m18/{suffix}") == "suffix", why


@pytest.mark.parametrize(
    "prefix",
    [
        "sid.inpe.br/-m18",
        "sid.inpe.br/m18-",
        "sid.inpe.br/mtc_m18",
        "sid.inpe.br/mtc-m18:80",
        "sid.inpe.br/mtc-m18@",
        "sid.inpe.br/mtc-m18.",
        "sid.inpe.br/mtc-m18.x",
        "sid.inpe.br/mtc.m18.80",
        "sid.inpe.br/",
        "/mtc-m18",
        "sid.inpe.9/mtc-m18",  # the last word starts with a letter
        "sid..inpe.br/mtc-m18",
        "sid.inpe.br../mtc-m18",
        ".sid.inpe.br/mtc-m18",
        "sid-.inpe.br/mtc-m18",
    ],
)
def test_rep_rejects_prefixes(prefix: str) -> None:
    assert _rejected_part(f"{prefix}/2009/07.21.13.23") == "prefix"


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        b"8JMKD3MGP8W/35MME4E",
        " 8JMKD3MGP8W/35MME4E",
        "8JMKD3MGP8W/35MME4E ",
        "8JMKD3MGP8W /35MME4E",
        "sid.inpe.br/mtc-m18/2009/07.21.13.23\n",
        "sid.inpe.br/mtc-m18/2009/07.21.\t13.23",
        "8JMKD3MGP8W/35MMÉ4E",
        "8JMKD3MGP8W\x00/35MME4E",
        "8JMKD3MGP8W35MME4E",  # no slash
        "a/b/c",  # two slashes
        "/8JMKD3MGP8W/35MME4E",
        "8JMKD3MGP8W/35MME4E/",
    ],
)
def test_rejects_what_is_no_label(text: object) -> None:
    assert _rejected_part(text) == "ibi"


def test_four_slashes_are_a_bad_rep_suffix() -> None:
    assert _rejected_part("sid.inpe.br/mtc-m18/2009/07.21.13.23/x") == "suffix"


def test_one_slash_is_read_as_an_ibip() -> None:
    """A rep prefix alone has one slash, like an IBIp: it fails as an IBIp prefix."""
    assert _rejected_part("sid.inpe.br/mtc-m18") == "prefix"


def test_rejections_are_invalid_input() -> None:
    """Callers catching InvalidInput (a ValueError) catch label errors too."""
    with pytest.raises(InvalidInput):
        parse_label("nonsense")
    with pytest.raises(ValueError, match="ibi"):
        parse_label("nonsense")


# ---------------------------------------------------------------------------- dates out of range


@pytest.mark.parametrize("date", [Decimal(807235199), Decimal("807235199.999"), Decimal(0)])
def test_ibip_cannot_code_dates_before_1995_08_01(date: Decimal) -> None:
    with pytest.raises(InvalidInput) as error:
        ibip_suffix(date)
    assert error.value.part == "date"
    with pytest.raises(InvalidInput):
        IBI.build(date, ip="150.163.34.243")
    # the rep form can
    assert parse_label(f"sid.inpe.br/mtc-m18/{rep_suffix(date)}").date == date


@pytest.mark.parametrize(
    "date",
    [Decimal(-1), Decimal("253402300799.5"), Decimal(253402300800), Decimal("NaN"), 1248182580],
)
def test_builders_reject_dates(date: Decimal) -> None:
    for build in (rep_suffix, ibip_suffix):
        with pytest.raises(InvalidInput) as error:
            build(date)
        assert error.value.part == "date"


def test_rep_port_80_after_a_dot_is_not_a_label() -> None:
    """Algorithm 1 leaves port 80 out; only the legacy "@80" writes it."""
    with pytest.raises(InvalidIBI) as caught:
        parse_label("sid.inpe.br/mtc-m18.80/2009/07.21.13.23")
    assert caught.value.part == "port"
    assert parse_label("sid.inpe.br/mtc-m18@80/2009/07.21.13.23").port == 80


def test_rep_host_longer_than_dns_allows_is_refused() -> None:
    with pytest.raises(InvalidIBI) as caught:
        parse_label(f"example.org/{'a' * 64}/2009/07.21.13.23")
    assert caught.value.part == "prefix"
