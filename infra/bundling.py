"""Lambda code assets built without Docker, and offline.

A function's asset is the ``ibi`` package (the core, AWS clients, API clients), the shared edge
``functions/shared/``, its own ``functions/<name>/`` directory and
the wheels its ``requirements.txt`` pins, installed for the Lambda platform (python3.13 on
arm64) from a local wheelhouse. ``cdk synth`` therefore needs neither Docker nor the network;
only filling the wheelhouse does, once, at setup time::

    python -m infra.bundling --download     # what `make setup` runs

``requirements.txt`` lists the complete dependency closure and is installed with ``--no-deps``:
boto3 and botocore come from the Lambda runtime, and a bundled botocore would shadow the one
the runtime's boto3 was released with.

Bytecode: ``/var/task`` is read-only, so a package without ``.pyc`` files is compiled again at
every cold start (hundreds of milliseconds for Powertools and ibi). When an interpreter of the
runtime's exact version is on this machine (``IBI_LAMBDA_PYTHON``, ``python3.13`` on the
``PATH``, or pyenv's), the asset ships bytecode compiled by it, checked by hash of nothing
(``unchecked-hash``: a deployed package never changes, and zip archives do not keep the
modification times a timestamp check would compare). Without one, the asset is the same, less
the bytecode.
"""

from __future__ import annotations

import argparse
import functools
import glob
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
WHEELHOUSE = REPO_ROOT / ".cache" / "wheelhouse"
SHARED_PACKAGE = "ibi"

# The platform every function runs on, and the wheels installed for it.
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
_MANYLINUX = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
LAMBDA_PLATFORM = (
    "--platform",
    _MANYLINUX[ARCHITECTURE.name],
    "--implementation",
    "cp",
    "--python-version",
    RUNTIME.name.removeprefix("python"),
    "--only-binary=:all:",
)
PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")


class BundlingError(RuntimeError):
    """The asset could not be built; the message says what to run to fix it."""


DATA_SUFFIXES = (".csl", ".json")  # the resolver's citation styles, the OpenAPI document


def _python_sources(directory: str, names: list[str]) -> set[str]:
    """``shutil.copytree`` ignore function: keep sub-packages, ``.py`` files and data files
    the code reads (:data:`DATA_SUFFIXES`) only."""
    return {
        name
        for name in names
        if name == "__pycache__"
        or not (name.endswith((".py", *DATA_SUFFIXES)) or Path(directory, name).is_dir())
    }


@jsii.implements(ILocalBundling)
class LocalPythonBundling:
    """Builds a function's asset on this machine: copy the sources, install the wheels."""

    def __init__(
        self,
        *,
        sources: Sequence[str],
        requirements: Path,
        source_root: Path = REPO_ROOT,
        wheelhouse: Path = WHEELHOUSE,
    ) -> None:
        self.sources = tuple(sources)
        self.requirements = requirements
        self.source_root = source_root
        self.wheelhouse = wheelhouse

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_options: Any) -> bool:
        output = Path(output_dir)
        for source in self.sources:
            self._copy(source, output)
        self._install(output)
        compile_bytecode(output)
        return True

    def _copy(self, source: str, output: Path) -> None:
        origin = self.source_root / source
        target = output / source
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=_python_sources, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)

    def _install(self, output: Path) -> None:
        if not any(self.wheelhouse.glob("*.whl")):
            raise BundlingError(
                f"no wheels in {self.wheelhouse}: run `make setup` "
                "(or `python -m infra.bundling --download`) once, with network access"
            )
        command = [
            *PIP,
            "install",
            "--no-index",
            "--find-links",
            str(self.wheelhouse),
            *LAMBDA_PLATFORM,
            "--no-deps",
            "--no-compile",
            "--quiet",
            "--target",
            str(output),
            "--requirement",
            str(self.requirements),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        if result.returncode != 0:
            raise BundlingError(
                f"installing {self.requirements} from {self.wheelhouse} failed; if the "
                "requirements changed, run `python -m infra.bundling --download` again.\n"
                f"{result.stderr.strip()}"
            )
        shutil.rmtree(output / "bin", ignore_errors=True)  # console scripts: unused in Lambda


@functools.cache
def runtime_python() -> str | None:
    """An interpreter of the Lambda runtime's version (3.13), or ``None`` if there is none."""
    version = RUNTIME.name.removeprefix("python")
    candidates = [
        os.environ.get("IBI_LAMBDA_PYTHON", ""),
        shutil.which(f"python{version}") or "",
        *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}"))),
    ]
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run(  # noqa: S603
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except OSError:
            continue
        if found.returncode == 0 and found.stdout.strip() == version:
            return candidate
    return None


def compile_bytecode(output: Path) -> bool:
    """Compile every module of ``output`` for the Lambda runtime, if its interpreter is here."""
    python = runtime_python()
    if python is None:
        logger.info("no %s interpreter here: the asset ships no bytecode", RUNTIME.name)
        return False
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode"]
    subprocess.run(  # noqa: S603
        [*command, "unchecked-hash", str(output)],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
    )
    return True


def function_sources(function: str) -> tuple[str, ...]:
    """What a function's asset holds: the core, the shared edge and the function's own package."""
    return (SHARED_PACKAGE, "functions/__init__.py", "functions/shared", f"functions/{function}")


def _asset_exclude(sources: Sequence[str]) -> list[str]:
    """Glob patterns that leave only ``sources`` in the asset's source hash.

    Everything is excluded, then each source and its parent directories are let back in, so
    the hash changes with the function's code and requirements, not with ``.venv``,
    ``cdk.out``, the tests or another function.
    """
    patterns = ["*", ".*"]
    for source in sources:
        parts = Path(source).parts
        patterns += [f"!{Path(*parts[:depth])}" for depth in range(1, len(parts) + 1)]
        patterns.append(f"!{source}/**")
    return [*dict.fromkeys(patterns), "__pycache__", "*.pyc"]


def requirements_path(function: str) -> str:
    """Where a function's pinned wheels are listed, relative to the repository."""
    return f"functions/{function}/requirements.txt"


def function_code(
    function: str, *, requirements_of: str | None = None, source_root: Path = REPO_ROOT
) -> lambda_.Code:
    """The asset of ``functions/<function>/``, bundled locally (Docker is never used).

    ``requirements_of`` names another function whose ``requirements.txt`` this one installs,
    for a function with the same dependency closure and no file of its own; the file is part
    of the asset's hash either way.
    """
    sources = function_sources(function)
    requirements = requirements_path(requirements_of or function)
    bundler = LocalPythonBundling(
        sources=sources,
        requirements=source_root / requirements,
        source_root=source_root,
    )
    return lambda_.Code.from_asset(
        str(source_root),
        exclude=_asset_exclude([*sources, requirements]),
        bundling=BundlingOptions(
            # Required by the API but never pulled: local bundling always succeeds or raises.
            image=DockerImage.from_registry("local-bundling-only"),
            local=bundler,
            # Part of the asset hash: a change of target platform rebuilds the asset.
            environment={"LAMBDA_PLATFORM": " ".join(LAMBDA_PLATFORM)},
        ),
    )


def download_wheels(*, wheelhouse: Path = WHEELHOUSE) -> list[Path]:
    """Fill the wheelhouse with every function's pinned wheels (needs the network)."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    requirements = sorted(FUNCTIONS_DIR.glob("*/requirements.txt"))
    for requirement in requirements:
        logger.info("downloading wheels for %s into %s", requirement, wheelhouse)
        subprocess.run(  # noqa: S603
            [
                *PIP,
                "download",
                *LAMBDA_PLATFORM,
                "--no-deps",
                "--quiet",
                "--dest",
                str(wheelhouse),
                "--requirement",
                str(requirement),
            ],
            check=True,
        )
    return requirements


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.bundling", description="Prepare Lambda assets for offline synth."
    )
    parser.add_argument(
        "--download",
        action="store_true",
        help=f"download the wheels pinned by functions/*/requirements.txt into {WHEELHOUSE}",
    )
    args = parser.parse_args(argv)
    if not args.download:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    download_wheels()
    return 0


if __name__ == "__main__":
    sys.exit(main())
