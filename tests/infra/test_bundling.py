"""The Lambda asset, bundled for real: no Docker, no index, only the function's files."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, DockerImage, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.bundling import (
    REPO_ROOT,
    WHEELHOUSE,
    BundlingError,
    LocalPythonBundling,
    function_code,
    runtime_python,
)
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra

RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "urllib3", "dateutil")


def _function_stack(app: App, code: lambda_.Code) -> Stack:
    stack = Stack(app, "Bundled")
    lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        architecture=lambda_.Architecture.ARM_64,
        handler="functions.minting.handler.lambda_handler",
        code=code,
    )
    return stack


def _asset_key(stack: Stack) -> str:
    (function,) = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    key: str = function["Properties"]["Code"]["S3Key"]
    return key


@pytest.fixture(scope="module")
def asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The minting asset as ``cdk synth`` stages it, built with no package index reachable."""
    outdir = tmp_path_factory.mktemp("bundled")
    with pytest.MonkeyPatch.context() as env:
        # Any attempt to reach an index fails at once: the install must use the wheelhouse.
        env.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        env.setenv("PIP_RETRIES", "0")
        app = App(outdir=str(outdir))
        stack = _function_stack(app, function_code("minting"))
        app.synth()
    asset_hash = _asset_key(stack).removesuffix(".zip")
    return outdir / f"asset.{asset_hash}"


@pytest.fixture(scope="module")
def resolver_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The resolver's asset, built offline as :func:`asset` is."""
    outdir = tmp_path_factory.mktemp("bundled-resolver")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        env.setenv("PIP_RETRIES", "0")
        app = App(outdir=str(outdir))
        stack = _function_stack(app, function_code("resolver"))
        app.synth()
    return outdir / f"asset.{_asset_key(stack).removesuffix('.zip')}"


def test_the_resolver_asset_carries_its_citation_styles_and_formatter(
    resolver_asset: Path,
) -> None:
    """text/x-bibliography in AWS: the .csl files beside bibliography.py, citeproc-py and lxml
    (arm64) installed, citeproc's own locales with it."""
    styles = REPO_ROOT / "functions" / "resolver" / "styles"
    shipped = resolver_asset / "functions" / "resolver" / "styles"
    assert sorted(p.name for p in shipped.glob("*.csl")) == sorted(
        p.name for p in styles.glob("*.csl")
    )
    assert len(list(shipped.glob("*.csl"))) >= 8
    assert (resolver_asset / "citeproc" / "data" / "locales" / "locales-pt-BR.xml").is_file()
    (lxml,) = resolver_asset.glob("lxml-*.dist-info")
    assert "aarch64" in (lxml / "WHEEL").read_text()


def test_asset_holds_the_function_the_core_and_its_wheels(asset: Path) -> None:
    assert (asset / "functions" / "__init__.py").is_file()
    assert (asset / "functions" / "minting" / "handler.py").is_file()
    assert (asset / "ibi" / "core" / "labels.py").is_file()
    assert (asset / "aws_lambda_powertools" / "__init__.py").is_file()
    assert not (asset / "aws_xray_sdk").exists()  # no Tracer: its import costs 250 ms


def test_asset_holds_the_pinned_wheels_and_nothing_else(asset: Path) -> None:
    requirements = (REPO_ROOT / "functions" / "minting" / "requirements.txt").read_text()
    pinned = {
        line.split("==")[0].split("[")[0].lower().replace("-", "_") + "-" + line.split("==")[1]
        for line in requirements.splitlines()
        if line and not line.startswith("#")
    }
    installed = {path.name.removesuffix(".dist-info").lower() for path in asset.glob("*.dist-info")}
    assert installed == pinned


def test_asset_ships_bytecode_for_the_lambda_runtime_only(asset: Path) -> None:
    """Compiled by a python3.13 when this machine has one (unchecked hash: zip keeps no
    reliable timestamps); never bytecode of another version, which Lambda would ignore."""
    sources = sorted(asset.rglob("*.py"))
    compiled = sorted(asset.rglob("*.pyc"))
    if runtime_python() is None:
        assert compiled == []
        return
    expected = sorted(
        source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc" for source in sources
    )
    assert compiled == expected
    for path in compiled[:50]:
        flags = int.from_bytes(path.read_bytes()[4:8], "little")
        assert flags == 0b01  # hash-based, source not checked


def test_asset_leaves_out_what_the_runtime_provides_and_the_rest_of_the_repo(
    asset: Path,
) -> None:
    for package in RUNTIME_PROVIDED:
        assert not (asset / package).exists(), package
    for path in ("tests", "infra", "cdk.json", "bin", ".venv", "node_modules"):
        assert not (asset / path).exists(), path
    assert not list(asset.rglob("*.cpython-311.pyc"))  # this machine's bytecode
    assert not list(asset.glob("functions/*/requirements.txt"))
    functions = {p.name for p in (asset / "functions").iterdir() if p.is_dir()} - {"__pycache__"}
    assert functions == {"minting", "shared"}  # its own function and the shared edge
    assert not (asset / "ibi_tools").exists()  # the CLI and local mode stay out
    assert not (asset / "ibi" / "local").exists() and not (asset / "ibi" / "cli.py").exists()


def test_asset_hash_depends_only_on_the_function_sources(tmp_path: Path) -> None:
    """Files in .venv, cdk.out, tests or another function do not redeploy the Lambda."""
    root = tmp_path / "repo"
    for source in ("ibi/core/__init__.py", "functions/__init__.py", "functions/minting/h.py"):
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        (root / source).write_text("x = 1\n")
    requirements = root / "functions" / "minting" / "requirements.txt"
    requirements.write_text("aws-lambda-powertools==3.37.0\n")

    def asset_key() -> str:
        app = App(context=SKIP_BUNDLING)
        return _asset_key(_function_stack(app, function_code("minting", source_root=root)))

    first = asset_key()
    for unrelated in (
        ".venv/lib/site.py",
        "node_modules/x/index.js",
        "cdk.out/manifest.json",
        ".cache/wheelhouse/a.whl",
        "tests/test_x.py",
        "docs/notes.md",
        "functions/archive/handler.py",
        "ibi/core/__pycache__/labels.cpython-311.pyc",
    ):
        (root / unrelated).parent.mkdir(parents=True, exist_ok=True)
        (root / unrelated).write_text("changed\n")
    assert asset_key() == first

    (root / "ibi" / "core" / "__init__.py").write_text("x = 2\n")
    second = asset_key()
    assert second != first
    requirements.write_text("aws-lambda-powertools==3.36.0\n")
    assert asset_key() != second


def test_missing_wheelhouse_says_what_to_run(tmp_path: Path) -> None:
    bundler = LocalPythonBundling(
        sources=("ibi",),
        requirements=REPO_ROOT / "functions" / "minting" / "requirements.txt",
        wheelhouse=tmp_path / "empty",
    )
    with pytest.raises(BundlingError, match=r"make setup.*python -m infra.bundling --download"):
        bundler.try_bundle(str(tmp_path / "out"), image=DockerImage.from_registry("unused"))


def test_wheelhouse_is_filled() -> None:
    """`make setup` ran: without the wheelhouse, `cdk synth` cannot bundle offline."""
    wheels = sorted(path.name for path in WHEELHOUSE.glob("*.whl"))
    assert any(name.startswith("aws_lambda_powertools-3.37.0-") for name in wheels), (
        f"run `python -m infra.bundling --download` (make setup); {WHEELHOUSE} has {wheels}"
    )
