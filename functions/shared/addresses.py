"""Which addresses a service may contact: public ones, plus an explicit allow-list.

One rule for every outgoing request a stranger can steer: the resolver's calls to Archives
(``archiveaddress`` comes from an inclusion request) and an Archive's transfer to another
Archive (``to`` comes from the deposit API). A host is resolved once; every IP it resolves to
must be public (global) unless it falls in the allow-list (loopback, for local mode and tests);
the caller then connects to the very IP that was checked, so a second lookup cannot rebind it.

IPv6 forms that carry an IPv4 address are judged by the IPv4 address inside, so that
``[::127.0.0.1]``, ``[::ffff:169.254.169.254]``, NAT64 (``64:ff9b::a9fe:a9fe``), 6to4
(``2002:7f00:1::``) and Teredo cannot smuggle loopback, link-local (the cloud metadata
endpoint) or private addresses past the check. The local-use NAT64 prefix ``64:ff9b:1::/48``
(RFC 8215) is never public.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (RFC 4291 §2.5.5.1)
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT (RFC 2765)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 prefix (RFC 6052)
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215)
_CARRIERS = (_NAT64, _IPV4_TRANSLATED, _IPV4_COMPATIBLE)  # the IPv4 address is the last 32 bits


class UnsafeAddress(Exception):
    """An address this service will not contact."""


class Unresolvable(UnsafeAddress):
    """A host name that does not resolve (nothing to contact)."""


def embedded_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    elif any(address in prefix for prefix in _CARRIERS) and int(address) > 1:  # not ::, ::1
        found.append(low32)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def is_public(address: Address) -> bool:
    """Whether ``address`` and every IPv4 address it carries are global unicast addresses."""
    if address in _NAT64_LOCAL or address.is_multicast or not address.is_global:
        return False
    return all(inner.is_global and not inner.is_multicast for inner in embedded_ipv4(address))


class AddressPolicy:
    """Public addresses, plus the networks of ``allow`` (e.g. ``127.0.0.0/8`` locally);
    ``public=False``: the networks of ``allow`` only (tests that must stay on loopback)."""

    def __init__(self, allow: Sequence[str] = (), *, public: bool = True) -> None:
        self.allow: tuple[Network, ...] = tuple(ipaddress.ip_network(n) for n in allow)
        self.public = public

    def permitted(self, ip: str) -> bool:
        try:
            address = ipaddress.ip_address(ip.split("%", 1)[0])
        except ValueError:
            return False
        if any(address in network for network in self.allow):
            return True
        return self.public and is_public(address)

    def vet(self, host: str, port: int) -> str:
        """The IP to connect to, once every address ``host`` resolves to is found permitted."""
        try:
            ips = [str(ipaddress.ip_address(host.strip("[]")))]  # a literal: nothing to look up
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (socket.gaierror, UnicodeError) as error:
                raise Unresolvable(f"{host} does not resolve: {error}") from None
            ips = sorted({str(info[4][0]) for info in infos})
        refused = [ip for ip in ips if not self.permitted(ip)]
        if not ips or refused:
            raise UnsafeAddress(
                f"{host} resolves to a non-public address ({', '.join(refused)}); "
                "only public addresses are contacted"
            )
        return ips[0]
