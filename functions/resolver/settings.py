"""The resolver function's configuration: read once from the environment, validated."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from functions.resolver.service import FAILURE_LIMIT, FAILURE_WINDOW, GUESS_CAP
from functions.resolver.throttle import default_table
from functions.shared.errors import ConfigurationError
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.defaults import RESOLVER_SERVICE_IBI

# After the first answer a round could end with, how long the other Archives still get (an
# Original's answer is preferred to a Copy's; a second claim of the original is seen). Tens of
# milliseconds: a bound on the cost of that preference, never the Archive timeout.
DEFAULT_ORIGINAL_GRACE_MS = 50
MAX_ORIGINAL_GRACE_MS = 1000


@dataclass(frozen=True, slots=True)
class ResolverSettings:
    table: str
    service_ibi: str
    pepper_secret_arn: str | None
    pepper_file: str | None
    allow_networks: tuple[str, ...]
    archive_timeout: float = 3.0
    deadline: float = 10.0
    original_grace: float = DEFAULT_ORIGINAL_GRACE_MS / 1000  # seconds (above)
    max_answer_bytes: int = 256 * 1024
    name: str = "IBI resolver"
    throttle_table: str = ""  # empty: "<table>-throttle" (local mode and tests)
    kept_table: str = ""  # the authorities' kept answers; empty: "<table>-kept" (kept.py)
    failure_limit: int = FAILURE_LIMIT
    failure_window: int = FAILURE_WINDOW
    guess_cap: int = GUESS_CAP
    # Where acknowledgments are queued (acknowledgments.py): an SQS queue in AWS (required
    # there), else a directory (``ibi local``), else a temporary one (tests).
    ack_queue_url: str | None = None
    ack_queue_dir: str | None = None
    # The landing page's example persistent URLs (IBI_EXAMPLES, comma-separated): ``ibi local``
    # gives its demo items; empty: the spec's examples (handler.EXAMPLES).
    examples: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ResolverSettings:
        env = os.environ if environ is None else environ
        try:
            service = parse_label(env.get("IBI_RESOLVER_SERVICE_IBI") or RESOLVER_SERVICE_IBI)
            allow = tuple(
                n.strip() for n in env.get("IBI_ALLOW_NETWORKS", "").split(",") if n.strip()
            )
            for network in allow:
                ipaddress.ip_network(network)
            timeout = float(env.get("IBI_ARCHIVE_TIMEOUT_SECONDS", "3"))
            deadline = float(env.get("IBI_RESOLUTION_DEADLINE_SECONDS", "10"))
            if not 0.1 <= timeout <= deadline <= 25:
                raise ValueError(
                    "need 0.1 <= IBI_ARCHIVE_TIMEOUT_SECONDS"
                    " <= IBI_RESOLUTION_DEADLINE_SECONDS <= 25"
                )
            grace = _grace_seconds(env.get("IBI_ORIGINAL_GRACE_MS"), timeout)
            if not (env.get("IBI_PEPPER_SECRET_ARN") or env.get("IBI_PEPPER_FILE")):
                raise ValueError("set IBI_PEPPER_SECRET_ARN (AWS) or IBI_PEPPER_FILE (local)")
            if env.get("IBI_PEPPER_SECRET_ARN") and not env.get("IBI_ACK_QUEUE_URL"):
                raise ValueError("in AWS (IBI_PEPPER_SECRET_ARN) set IBI_ACK_QUEUE_URL too")
            return cls(
                table=env["IBI_RESOLVER_TABLE"],
                throttle_table=env.get("IBI_THROTTLE_TABLE")
                or default_table(env["IBI_RESOLVER_TABLE"]),
                kept_table=env.get("IBI_KEPT_TABLE") or f"{env['IBI_RESOLVER_TABLE']}-kept",
                service_ibi=service.label,
                pepper_secret_arn=env.get("IBI_PEPPER_SECRET_ARN") or None,
                pepper_file=env.get("IBI_PEPPER_FILE") or None,
                allow_networks=allow,
                archive_timeout=timeout,
                deadline=deadline,
                original_grace=grace,
                max_answer_bytes=int(env.get("IBI_MAX_ANSWER_BYTES", str(256 * 1024))),
                name=env.get("IBI_RESOLVER_NAME", "IBI resolver"),
                ack_queue_url=env.get("IBI_ACK_QUEUE_URL") or None,
                ack_queue_dir=env.get("IBI_ACK_QUEUE_DIR") or None,
                examples=tuple(
                    e.strip().lstrip("/")
                    for e in env.get("IBI_EXAMPLES", "").split(",")
                    if e.strip()
                ),
            )
        except (KeyError, ValueError, InvalidInput) as error:
            raise ConfigurationError(f"invalid resolver configuration: {error}") from error


@dataclass(frozen=True, slots=True)
class DrainSettings:
    """The acknowledgment drain's configuration (drain.py): what delivering needs, no pepper."""

    table: str
    allow_networks: tuple[str, ...]
    archive_timeout: float = 3.0
    max_answer_bytes: int = 256 * 1024

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> DrainSettings:
        env = os.environ if environ is None else environ
        try:
            allow = tuple(
                n.strip() for n in env.get("IBI_ALLOW_NETWORKS", "").split(",") if n.strip()
            )
            for network in allow:
                ipaddress.ip_network(network)
            timeout = float(env.get("IBI_ARCHIVE_TIMEOUT_SECONDS", "3"))
            if not 0.1 <= timeout <= 25:
                raise ValueError("need 0.1 <= IBI_ARCHIVE_TIMEOUT_SECONDS <= 25")
            return cls(
                table=env["IBI_RESOLVER_TABLE"],
                allow_networks=allow,
                archive_timeout=timeout,
                max_answer_bytes=int(env.get("IBI_MAX_ANSWER_BYTES", str(256 * 1024))),
            )
        except (KeyError, ValueError) as error:
            raise ConfigurationError(f"invalid drain configuration: {error}") from error


def _grace_seconds(text: str | None, timeout: float) -> float:
    """``IBI_ORIGINAL_GRACE_MS`` (whole milliseconds, 0 to 1,000, under the Archive timeout)."""
    given = (text or "").strip() or str(DEFAULT_ORIGINAL_GRACE_MS)
    whole = given.isascii() and given.isdigit()
    if not whole or int(given) > MAX_ORIGINAL_GRACE_MS or int(given) / 1000 >= timeout:
        raise ValueError(
            f"IBI_ORIGINAL_GRACE_MS={text!r}: need whole milliseconds from 0 to"
            f" {MAX_ORIGINAL_GRACE_MS}, under IBI_ARCHIVE_TIMEOUT_SECONDS"
        )
    return int(given) / 1000
