"""Who owns each prefix (issue 24): pure, from the registered Archives.

A registered Archive owns the prefixes (identification subsystems) the administrator
registered with it (``RegisteredArchive.prefixes``: at most one owner each, which the registry's
claims enforce), and the prefix of its own service IBI, in each form it was registered with —
unless another registered Archive's service IBI has the same prefix (one minting subsystem
serving several Archives): such a shared prefix has no owner until the administrator registers
it with one of them. A prefix registered with an Archive beats the service IBI's prefix of
another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from functions.resolver.registry import RegisteredArchive
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label


def own_prefixes(forms: Mapping[str, str]) -> tuple[str, ...]:
    """The prefixes of an Archive's service IBI, in each form it was registered with."""
    found: list[str] = []
    for label in forms.values():
        try:
            found.append(parse_label(label).prefix)
        except InvalidInput:
            continue
    return tuple(dict.fromkeys(found))


def owners(archives: Iterable[RegisteredArchive]) -> dict[str, RegisteredArchive]:
    """Every owned prefix and its owner (module notes)."""
    archives = list(archives)
    found = {prefix: a for a in archives for prefix in a.prefixes}
    services = Counter(p for a in archives for p in own_prefixes(a.forms))
    for archive in archives:
        for prefix in own_prefixes(archive.forms):
            if services[prefix] == 1:
                found.setdefault(prefix, archive)
    return found


def owned_by(archive: str, owned: Mapping[str, RegisteredArchive]) -> list[str]:
    """The prefixes ``archive`` (a service IBI) owns, in ``owned`` (:func:`owners`)."""
    return sorted(p for p, a in owned.items() if a.service_ibi == archive)
