"""Start-up: each Lambda handler's import time, and the size of each deployment package."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import save

ROOT = Path(__file__).parents[1]
HANDLERS = {
    "minting": "functions.minting.handler",
    "archive": "functions.archive.handler",
    "resolver": "functions.resolver.handler",
}


def import_ms(module: str, runs: int) -> dict[str, float]:
    """Wall time of `python -c "import module"` minus an empty interpreter, and -X importtime's own total."""
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "PYTHONDONTWRITEBYTECODE": "0"}

    def wall(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)
        return time.perf_counter() - started

    wall(f"import {module}")  # compile .pyc once
    empty = statistics.median(wall("pass") for _ in range(runs))
    loaded = statistics.median(wall(f"import {module}") for _ in range(runs))
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stderr
    cumulative = 0
    for line in trace.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            cumulative = int(parts[1])
    return {
        "wall_ms": round((loaded - empty) * 1000, 1),
        "importtime_ms": round(cumulative / 1000, 1),
    }


def package_sizes() -> dict[str, Any]:
    """Synthesize the app (bundling locally, offline) and measure each function's asset."""
    out = Path(tempfile.mkdtemp(prefix="ibi-bench-synth-"))
    try:
        subprocess.run(
            [sys.executable, "app.py"],
            check=True,
            cwd=ROOT,
            capture_output=True,
            env={**os.environ, "CDK_OUTDIR": str(out), "CDK_DISABLE_CLI_TELEMETRY": "true"},
        )
        sizes = {}
        for asset in out.glob("asset.*"):
            if not asset.is_dir():
                continue
            handler = next(
                (
                    name
                    for name, module in HANDLERS.items()
                    if (asset / module.replace(".", "/")).with_suffix(".py").exists()
                ),
                None,
            )
            if handler is None:
                continue
            total = sum(f.stat().st_size for f in asset.rglob("*") if f.is_file())
            sizes[handler] = {"bytes": total, "mb": round(total / 1e6, 2)}
        return sizes
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 7
    result = {
        "imports": {name: import_ms(module, runs) for name, module in HANDLERS.items()},
        "packages": package_sizes(),
    }
    save("startup", result)
    return result
