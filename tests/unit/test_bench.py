"""The benchmark suite's own pieces (not timings: benchmarks are never pass/fail on time)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.common import RESULTS, percentile
from bench.report import write_report
from bench.scale import Scenario, cost_per_million_ibis, simulate_requests


def test_percentiles_pick_from_the_sorted_values() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (percentile(values, 0), percentile(values, 50), percentile(values, 100)) == (1, 3, 5)


def test_a_right_hint_is_one_request_a_wrong_one_is_everyone() -> None:
    assert simulate_requests(Scenario(1000, 1.0), resolutions=1000) == 1
    assert simulate_requests(Scenario(1000, 0.0), resolutions=1000) == 1000
    assert 90 < simulate_requests(Scenario(1000, 0.9), resolutions=20_000) < 110


def test_batches_make_each_ibi_cheaper() -> None:
    assert cost_per_million_ibis(1) > cost_per_million_ibis(10) > cost_per_million_ibis(1000)


def test_the_report_shows_every_suite_its_target_and_its_plot(tmp_path: Path) -> None:
    target = tmp_path / "BENCHMARKS.md"
    write_report(target, RESULTS)
    report = target.read_text()
    sections = (
        "## Minting",
        "## Resolution",
        "## Owners",
        "## Start-up",
        "## A peer",
        "## A flood",
    )
    for section in sections:
        assert section in report
    assert len(re.findall(r"^Targets?[: ]", report, flags=re.MULTILINE)) == 6
    for plot in re.findall(r"\(bench/results/(\w+\.png)\)", report):
        assert (RESULTS / plot).is_file(), plot
    assert len(re.findall(r"\(bench/results/(\w+\.png)\)", report)) == 5


def test_the_committed_report_is_what_the_committed_results_make(tmp_path: Path) -> None:
    """BENCHMARKS.md is written from bench/results/ by write_report alone, and together."""
    target = tmp_path / "BENCHMARKS.md"
    write_report(target, RESULTS)
    assert target.read_text() == (RESULTS.parent.parent / "BENCHMARKS.md").read_text()


def test_the_peer_section_gives_every_target_of_issue_14_a_verdict(tmp_path: Path) -> None:
    target = tmp_path / "BENCHMARKS.md"
    write_report(target, RESULTS)
    peer = target.read_text().split("## A peer", 1)[1].split("\n## ", 1)[0]
    verdicts = re.findall(r"^- (.+) \((met|NOT met)\)$", peer, flags=re.MULTILINE)
    assert [name.split(" ", 2)[:2] for name, _ in verdicts] == [
        ["warm", "resolution"],
        ["server", "CPU"],
        ["resolution", "throughput"],
        ["bare", "mint"],
        ["bare", "mint"],
        ["deposit", "with"],
        ["access", "counts"],
    ]
    assert "structural" not in peer
