"""Issue 15: jsii's Node end-of-life banner is silenced outside make too (infra/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra import SILENCE_VARIABLE

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]


def test_loading_the_cdk_app_prints_no_node_banner() -> None:
    environment = {k: v for k, v in os.environ.items() if k != SILENCE_VARIABLE}
    run = subprocess.run(
        [sys.executable, "-c", "import infra.stacks; import aws_cdk; aws_cdk.App()"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=environment,
    )
    assert "end-of-life" not in run.stderr
    assert "!!!!" not in run.stderr


def test_a_setting_of_the_user_s_own_is_kept() -> None:
    environment = {**os.environ, SILENCE_VARIABLE: "custom"}
    run = subprocess.run(
        [sys.executable, "-c", f"import os, infra; print(os.environ['{SILENCE_VARIABLE}'])"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=environment,
    )
    assert run.stdout.strip() == "custom"
