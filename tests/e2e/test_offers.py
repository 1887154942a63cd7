"""End to end: `ibi archive offer` on one local Archive, `ibi archive accept` on the other.

The two Archives of `ibi local` keep separate tables, buckets and HMAC keys; each command
talks to its own Archive only (docs/archive.md#transfers-between-institutions).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.support import IBI, LocalRun, cli

pytestmark = pytest.mark.e2e


def test_offer_and_accept_move_an_original(local: LocalRun, tmp_path: Path) -> None:
    sender, receiver = local.archives
    paper = tmp_path / "paper.txt"
    paper.write_text("a paper for another institution\n")
    data = tmp_path / "data.bin"  # above the inline limit: read through a presigned redirect
    data.write_bytes(bytes(range(256)) * (5 * 4096))
    made = json.loads(cli("deposit", str(paper), str(data), "--endpoint", sender, "--json").stdout)
    ibip = made["ibi"]["ibip"]
    to = cli("archive", "service", "--endpoint", receiver).stdout.strip()

    offered = cli("archive", "offer", ibip, "--to", to, "--endpoint", sender)
    assert offered.returncode == 0, offered.stderr
    offer = offered.stdout.strip()
    assert offer.startswith("ibioffer1.")
    # The offer on stdin, as it would come from a file or a message.
    accepted = subprocess.run(
        [*IBI, "archive", "accept", "-", "--endpoint", receiver, "--json"],
        input=offer,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert accepted.returncode == 0, accepted.stderr
    there = json.loads(accepted.stdout)
    assert there["state"] == "Original"
    assert {f["path"]: f["sha256"] for f in there["files"]} == {
        f["path"]: f["sha256"] for f in made["files"]
    }
    assert there["files"][1]["size"] == 5 * 1024 * 1024
    here = json.loads(cli("archive", "item", ibip, "--endpoint", sender, "--json").stdout)
    assert here["state"] == "Copy"
    again = cli("archive", "accept", offer, "--endpoint", receiver)
    assert again.returncode == 1 and "held here already" in again.stderr
