"""The Archive's asset: its own code, the minting function's pinned wheels, no Docker."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.archive import HANDLER
from infra.bundling import function_code
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra


def _asset_key(app: App, code: lambda_.Code) -> tuple[Stack, str]:
    stack = Stack(app, "Bundled")
    lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        architecture=lambda_.Architecture.ARM_64,
        handler=HANDLER,
        code=code,
    )
    (function,) = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    key: str = function["Properties"]["Code"]["S3Key"]
    return stack, key


@pytest.fixture(scope="module")
def asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Archive asset as ``cdk synth`` stages it, built with no package index reachable."""
    outdir = tmp_path_factory.mktemp("bundled-archive")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        env.setenv("PIP_RETRIES", "0")
        app = App(outdir=str(outdir))
        _, key = _asset_key(app, function_code("archive", requirements_of="minting"))
        app.synth()
    return outdir / f"asset.{key.removesuffix('.zip')}"


def test_asset_holds_the_archive_the_core_and_its_wheels(asset: Path) -> None:
    assert (asset / "functions" / "archive" / "handler.py").is_file()
    assert (asset / "ibi" / "client" / "minting.py").is_file()  # the Archive mints through it
    assert (asset / "aws_lambda_powertools" / "__init__.py").is_file()
    assert not (asset / "aws_xray_sdk").exists()
    functions = {p.name for p in (asset / "functions").iterdir() if p.is_dir()} - {"__pycache__"}
    assert functions == {"archive", "shared"}  # its own function and the shared edge
    assert not (asset / "ibi_tools").exists()
    assert not list(asset.glob("functions/*/requirements.txt"))


def test_asset_hash_follows_the_archive_sources_and_the_borrowed_requirements(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    for source in (
        "ibi/core/__init__.py",
        "functions/__init__.py",
        "functions/archive/handler.py",
        "functions/minting/handler.py",
    ):
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        (root / source).write_text("x = 1\n")
    requirements = root / "functions" / "minting" / "requirements.txt"
    requirements.write_text("aws-lambda-powertools==3.37.0\n")

    def asset_key() -> str:
        code = function_code("archive", requirements_of="minting", source_root=root)
        return _asset_key(App(context=SKIP_BUNDLING), code)[1]

    first = asset_key()
    (root / "functions" / "minting" / "handler.py").write_text("x = 2\n")
    assert asset_key() == first  # the minting function's code is not the Archive's

    requirements.write_text("aws-lambda-powertools==3.36.0\n")
    second = asset_key()
    assert second != first
    (root / "functions" / "archive" / "handler.py").write_text("x = 2\n")
    assert asset_key() != second
