"""Shared pieces of the benchmarks: timing, percentiles, results, plots, the machine."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2) if ms else float("nan"),
    }


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "system": " ".join(platform.uname()[:3]),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }


def save(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2) + "\n")
    return path


def plot(
    name: str,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, tuple[list[float], list[float]]],
    *,
    logx: bool = False,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    for label, (xs, ys) in series.items():
        axes.plot(xs, ys, marker="o", label=label)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if logx:
        axes.set_xscale("log", base=2)
    axes.grid(True, alpha=0.3)
    axes.legend()
    return _save(figure, name)


def bars(
    name: str,
    title: str,
    ylabel: str,
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    line: tuple[str, float] | None = None,
) -> Path:
    """Grouped bars: one group per entry of ``groups``, one bar per series; an optional
    horizontal line (a target)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(1, len(series))
    for index, (label, values) in enumerate(series.items()):
        positions = [g + (index - (len(series) - 1) / 2) * width for g in range(len(groups))]
        axes.bar(positions, values, width=width, label=label)
    axes.set_xticks(range(len(groups)), list(groups))
    if line is not None:
        axes.axhline(line[1], color="black", linestyle="--", linewidth=1, label=line[0])
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend()
    return _save(figure, name)


def _save(figure: Any, name: str) -> Path:
    """``bench/results/<name>.png``, and the figure closed."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
