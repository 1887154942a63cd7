"""The address rule shared by the resolver's fetches and the Archive's transfers (issue 11.9).

The rule itself is checked here, with no socket: every address below is only classified,
never contacted.
"""

from __future__ import annotations

import ipaddress

import pytest

from functions.shared.addresses import AddressPolicy, UnsafeAddress, embedded_ipv4, is_public

HIDDEN = [
    "::127.0.0.1",  # IPv4-compatible loopback ([::127.0.0.1])
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "::ffff:169.254.169.254",  # IPv4-mapped metadata endpoint
    "::ffff:0:a9fe:a9fe",  # SIIT-translated metadata endpoint
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64 prefix (RFC 8215)
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "::a00:1",  # IPv4-compatible 10.0.0.1
]
PRIVATE = ["127.0.0.1", "10.1.2.3", "169.254.169.254", "192.168.0.1", "::1", "fe80::1", "fc00::1"]
PUBLIC = ["8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "::808:808"]


@pytest.mark.parametrize("ip", HIDDEN + PRIVATE)
def test_loopback_private_and_metadata_addresses_are_refused_in_every_form(ip: str) -> None:
    assert not AddressPolicy().permitted(ip)
    with pytest.raises(UnsafeAddress, match="non-public"):
        AddressPolicy().vet(ip, 80)


@pytest.mark.parametrize(
    ("ip", "inner"),
    [
        ("::127.0.0.1", "127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("2002:7f00:1::1", "127.0.0.1"),
        ("::ffff:0:a9fe:a9fe", "169.254.169.254"),
    ],
)
def test_forms_python_calls_global_are_judged_by_the_ipv4_address_inside(
    ip: str, inner: str
) -> None:
    """Why decoding is needed: ``is_global`` alone calls these public."""
    address = ipaddress.ip_address(ip)
    assert address.is_global
    assert embedded_ipv4(address) == [ipaddress.IPv4Address(inner)]
    assert not is_public(address)


@pytest.mark.parametrize("ip", PUBLIC)
def test_public_addresses_including_embedded_public_ipv4_are_permitted(ip: str) -> None:
    assert is_public(ipaddress.ip_address(ip))
    assert AddressPolicy().vet(ip, 443) == str(ipaddress.ip_address(ip))


def test_the_allow_list_admits_loopback_only_as_written() -> None:
    policy = AddressPolicy(["127.0.0.0/8"])
    assert policy.permitted("127.0.0.1")
    assert policy.vet("[127.0.0.1]", 80) == "127.0.0.1"
    assert not policy.permitted("::127.0.0.1")  # the IPv6 form is not in the IPv4 allow-list
    assert not policy.permitted("64:ff9b::7f00:1")
    assert not policy.permitted("not an address")
