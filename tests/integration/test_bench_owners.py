"""The owners benchmark in its smoke size (bench/owners.py): every scenario resolves where it
must and costs the requests it must. Not timings: benchmarks are never pass/fail on time."""

from __future__ import annotations

from bench.owners import CHOSEN, DESIGNS, PROFILES, SCENARIOS, measure


def test_the_owners_benchmark_runs_every_scenario_at_its_request_count() -> None:
    result = measure(
        archives=12, rounds=2, profile_rounds=2, waited_rounds=1, timeout=0.5, pause=0.05
    )
    rows = {(r["scenario"], r["design"]): r for r in result["rows"]}
    requests = {s: rows[(s, CHOSEN)]["requests_per_resolution"] for s in SCENARIOS}
    everyone = result["archives"]  # 12 answering and one at a closed port
    assert requests == {
        "a": 1,
        "b": 2,
        "c refused": everyone,
        "c silent": everyone,
        "d": everyone,
        "d copy": everyone,
    }
    assert {design for _, design in rows} == set(DESIGNS)
    assert {scenario for scenario, _ in rows} == set(SCENARIOS) | set(PROFILES)
    assert rows[("far", "fixed 50 ms")]["requests_per_resolution"] == everyone  # it hedges
    assert rows[("far", CHOSEN)]["requests_per_resolution"] == 1  # it waits the 300 ms
