"""Start-up: each Lambda handler's import time, and the size of each deployment package."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import bars, save
from infra.bundling import runtime_python

ROOT = Path(__file__).parents[1]
HANDLERS = {
    "minting": "functions.minting.handler",
    "archive": "functions.archive.handler",
    "resolver": "functions.resolver.handler",
}


def import_ms(module: str, runs: int, asset: Path) -> dict[str, Any]:
    """Import ``module`` from a deployment package as Lambda would.

    The interpreter is the runtime's version when this machine has one (else this one); the
    package comes first on the path, then botocore and the rest of what the runtime provides
    (from this environment, compiled once, as the runtime ships them). Measured: the wall time
    minus an empty interpreter's, with the package as built (its bytecode, if it ships any),
    and with no bytecode at all for the package's own modules (compiled at every start: Lambda's
    ``/var/task`` is read-only); and -X importtime's total.
    """
    python = runtime_python() or sys.executable
    purelib = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        env.pop(name, None)

    def wall(code: str, package: Path, *, write_bytecode: bool = False) -> float:
        extra = {"PYTHONPATH": f"{package}{os.pathsep}{purelib}"}
        if not write_bytecode:
            extra["PYTHONDONTWRITEBYTECODE"] = "1"
        started = time.perf_counter()
        subprocess.run([python, "-c", code], check=True, env={**env, **extra}, cwd=package)
        return time.perf_counter() - started

    shipped = bool(list(asset.rglob("*.pyc")))
    bare = Path(tempfile.mkdtemp(prefix="ibi-bench-bare-")) / "package"
    shutil.copytree(asset, bare, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        warm = Path(tempfile.mkdtemp(prefix="ibi-bench-warm-")) / "package"
        shutil.copytree(asset, warm)
        wall(f"import {module}", warm, write_bytecode=True)  # the runtime's side compiled once
        shutil.rmtree(warm.parent, ignore_errors=True)
        if not shipped:
            wall(f"import {module}", asset, write_bytecode=True)  # then cached in the package
        empty = statistics.median(wall("pass", asset) for _ in range(runs))
        built = statistics.median(wall(f"import {module}", asset) for _ in range(runs))
        uncompiled = statistics.median(wall(f"import {module}", bare) for _ in range(runs))
        trace = subprocess.run(
            [python, "-X", "importtime", "-c", f"import {module}"],
            check=True,
            env={
                **env,
                "PYTHONPATH": f"{asset}{os.pathsep}{purelib}",
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            cwd=asset,
            capture_output=True,
            text=True,
        ).stderr
    finally:
        shutil.rmtree(bare.parent, ignore_errors=True)
    cumulative = 0
    for line in trace.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            cumulative = int(parts[1])
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "python": version,
        "bytecode_shipped": shipped,
        "wall_ms": round((built - empty) * 1000, 1),
        "wall_uncompiled_ms": round((uncompiled - empty) * 1000, 1),
        "importtime_ms": round(cumulative / 1000, 1),
    }


def measure_packages(runs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Synthesize the app (bundling locally, offline); each function's asset: its size, and
    its handler's import time from the asset itself."""
    out = Path(tempfile.mkdtemp(prefix="ibi-bench-synth-"))
    try:
        subprocess.run(
            [sys.executable, "app.py"],
            check=True,
            cwd=ROOT,
            capture_output=True,
            env={**os.environ, "CDK_OUTDIR": str(out), "CDK_DISABLE_CLI_TELEMETRY": "true"},
        )
        sizes, imports = {}, {}
        for asset in sorted(out.glob("asset.*")):
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
            # (the size includes the bytecode, when the package ships it)
            sizes[handler] = {"bytes": total, "mb": round(total / 1e6, 2)}
            imports[handler] = import_ms(HANDLERS[handler], runs, asset)
        return dict(sorted(imports.items())), dict(sorted(sizes.items()))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 7
    imports, packages = measure_packages(runs)
    result = {"imports": imports, "packages": packages}
    save("startup", result)
    bars(
        "startup",
        "Handler import from the deployment package (median)",
        "ms",
        list(imports),
        {
            "as built": [row["wall_ms"] for row in imports.values()],
            "no bytecode": [row["wall_uncompiled_ms"] for row in imports.values()],
        },
        line=("target", 300),
    )
    return result
