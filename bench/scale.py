"""Internet scale on paper: the fan-out's cost with 1,000 and 10,000 Archives, with and without
location hints, and the cost per million resolutions and per million IBIs on AWS list prices.

Pure arithmetic and a small simulation (no network): `python -m bench.scale`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

# AWS list prices, us-east-1, as known when this was written (2026; not fetched from here —
# check https://aws.amazon.com/lambda/pricing/, /api-gateway/pricing/, /dynamodb/pricing/).
LAMBDA_ARM_GB_SECOND = 0.0000133334
LAMBDA_REQUEST = 0.20 / 1e6
HTTP_API_REQUEST = 1.00 / 1e6
DYNAMODB_WRITE = 0.625 / 1e6  # on-demand write request unit
DYNAMODB_READ = 0.125 / 1e6  # on-demand read request unit (strongly consistent: 1 per 4 KB)
SQS_REQUEST = 0.40 / 1e6  # standard queue, per API request (a batch of 10 is one request)

# Measured here (BENCHMARKS.md): resolver CPU per Archive request ~0.33 ms (a round of 64 costs
# ~21 ms of CPU); an Archive answers a urlRequest with one BatchGetItem of two items (its
# profile and the IBI: two read units), in ~10 ms of Lambda time counting DynamoDB's round trip.
RESOLVER_CPU_PER_REQUEST_S = 0.00033
ARCHIVE_SECONDS_PER_REQUEST = 0.010
ARCHIVE_READS_PER_REQUEST = 2

# The acknowledgment of a resolution that redirected (issue 14, measured in BENCHMARKS.md's
# peer section): one SendMessage in the resolver's request; the drain receives and deletes by
# batches of 10 (one Lambda invocation per batch); the Archive's acknowledgment request checks
# the urlkey in memory (bound to the item and URL: no read) and makes two writes, the spend and
# the count. Before issue 14 it also read the item (one more read unit per acknowledgment).
ACK_SQS_REQUESTS = 1 + 2 / 10  # send; receive and delete, per message, in batches of 10
ACK_BATCH = 10
ACK_DRAIN_SECONDS = 0.010  # per message, 256 MB
ACK_ARCHIVE_SECONDS = 0.008  # the acknowledgment request's Lambda time, 512 MB
ACK_WRITES = 2
ACK_READS = 0


@dataclass(frozen=True, slots=True)
class Scenario:
    archives: int
    hint_hit_rate: float  # share of resolutions whose hinted Archive holds the IBI


def simulate_requests(scenario: Scenario, resolutions: int = 100_000, seed: int = 7) -> float:
    """Archive requests per resolution: 1 when the hint is right, 1 + (N - 1) when it is not."""
    rng = random.Random(seed)
    total = 0
    for _ in range(resolutions):
        if rng.random() < scenario.hint_hit_rate:
            total += 1
        else:
            total += scenario.archives  # the hinted one, then everyone else
    return total / resolutions


def cost_per_million_resolutions(
    requests_per_resolution: float, resolver_memory_gb: float = 1.0
) -> dict[str, float]:
    resolver_seconds = 0.025 + requests_per_resolution * RESOLVER_CPU_PER_REQUEST_S
    resolver = 1e6 * (
        resolver_seconds * resolver_memory_gb * LAMBDA_ARM_GB_SECOND
        + LAMBDA_REQUEST
        + HTTP_API_REQUEST
    )
    archives = (
        1e6
        * requests_per_resolution
        * (
            ARCHIVE_SECONDS_PER_REQUEST * 0.5 * LAMBDA_ARM_GB_SECOND
            + LAMBDA_REQUEST
            + HTTP_API_REQUEST
            + ARCHIVE_READS_PER_REQUEST * DYNAMODB_READ
        )
    )
    acknowledgment = cost_per_million_acknowledgments()
    return {
        "resolver_usd": round(resolver, 2),
        "archives_usd": round(archives, 2),
        "acknowledgments_usd": round(acknowledgment, 2),
        "total_usd": round(resolver + archives + acknowledgment, 2),
    }


def cost_per_million_acknowledgments(reads: int = ACK_READS, writes: int = ACK_WRITES) -> float:
    """The acknowledgment of a million redirects: the queue, the drain, the Archive's request."""
    per_ack = (
        ACK_SQS_REQUESTS * SQS_REQUEST
        + LAMBDA_REQUEST / ACK_BATCH
        + ACK_DRAIN_SECONDS * 0.256 * LAMBDA_ARM_GB_SECOND
        + HTTP_API_REQUEST
        + LAMBDA_REQUEST
        + ACK_ARCHIVE_SECONDS * 0.5 * LAMBDA_ARM_GB_SECOND
        + writes * DYNAMODB_WRITE
        + reads * DYNAMODB_READ
    )
    return 1e6 * per_ack


def cost_per_million_ibis(batch: int, state_writes: float = 1.0) -> float:
    """Minting: ``state_writes`` conditional writes of the state per request (1 uncontended;
    BENCHMARKS.md measures 2-3.3 on one subsystem at 4-16 concurrent clients, a read before
    each), one record item per request, ~15 ms of Lambda."""
    requests = 1e6 / batch
    per_request = (
        0.015 * 0.256 * LAMBDA_ARM_GB_SECOND
        + LAMBDA_REQUEST
        + HTTP_API_REQUEST
        + state_writes * (DYNAMODB_READ + DYNAMODB_WRITE)  # read the state, advance it
        + DYNAMODB_WRITE * max(1, batch * 20 // 1024)  # the record item (about 20 bytes per IBI)
    )
    return round(requests * per_request, 2)


def main() -> None:
    rows = []
    for archives in (1_000, 10_000):
        for hit in (0.0, 0.9, 0.99):
            requests = simulate_requests(Scenario(archives, hit))
            rows.append(
                {
                    "archives": archives,
                    "hint_hit_rate": hit,
                    "requests_per_resolution": round(requests, 1),
                    **cost_per_million_resolutions(requests),
                }
            )
    minting = {f"batch_{b}": cost_per_million_ibis(b) for b in (1, 10, 1000)}
    contended = {f"batch_{b}": cost_per_million_ibis(b, 3.3) for b in (1, 10, 1000)}
    acknowledgments = {
        "now": round(cost_per_million_acknowledgments(), 2),
        "before_issue_14": round(cost_per_million_acknowledgments(reads=1), 2),
    }
    print(
        json.dumps(
            {
                "resolution": rows,
                "acknowledgments_usd_per_million": acknowledgments,
                "minting_usd_per_million_ibis": minting,
                "minting_usd_per_million_ibis_16_clients_one_subsystem": contended,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
