"""Shared pieces of the benchmarks: timing, percentiles, results, plots, the machine."""

from __future__ import annotations

import contextlib
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


def process_tree(roots: Sequence[int]) -> list[int]:
    """``roots`` and every process descended from them, as /proc shows them now (Linux)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
    tree = {pid for pid in roots if pid in parents}
    grown = True
    while grown:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= found
        grown = bool(found)
    return sorted(tree)


def cpu_seconds(pids: Sequence[int], *, this_process: bool = False) -> float:
    """User + system CPU time of processes (Linux /proc), this one too when asked."""
    tick = os.sysconf("SC_CLK_TCK")
    total = sum(os.times()[:2]) if this_process else 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


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
