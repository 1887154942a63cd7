"""The deposit workflow (.github/workflows/deposit.yml): OIDC, the role, and its deposit step.

The step's script is run here, under bash, with a fake ``ibi`` on the PATH: what it passes to
``ibi deposit`` and what it writes to the step's outputs and the job summary are checked, and
every option it passes must be one the real ``ibi deposit`` parser accepts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ibi_tools.cli import build_parser
from infra.ci import AUDIENCE, MAX_SESSION

pytestmark = pytest.mark.infra

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "deposit.yml"
# A major version (v4) or a full commit SHA: never a branch, never a moving "latest".
PINNED = re.compile(r"aws-actions/configure-aws-credentials@(v\d+|[0-9a-f]{40})")

FAKE_IBI = """\
#!{python}
import json, pathlib, sys
pathlib.Path({calls!r}).open("a").write(json.dumps(sys.argv[1:]) + "\\n")
name = pathlib.Path(sys.argv[2]).name
label = "8JMKD3MGP8W/" + str(abs(hash(name)) % 10**6)
print(json.dumps({{"ibi": {{"rep": "sid.example.org/ibi/" + name, "ibip": label}},
                   "persistent_url": "https://urlib.example.org/" + label}}))
"""


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = workflow["jobs"]["deposit"]["steps"]
    return steps


def _step(workflow: dict[str, Any], name: str) -> dict[str, Any]:
    (step,) = [step for step in _steps(workflow) if step.get("name") == name]
    return step


def test_triggers(workflow: dict[str, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers == {"release": {"types": ["published"]}, "workflow_dispatch": None}


def test_oidc_permissions_and_nothing_more(workflow: dict[str, Any]) -> None:
    assert workflow["permissions"] == {"id-token": "write", "contents": "read"}
    for job in workflow["jobs"].values():
        assert "permissions" not in job  # no job widens them


def test_the_role_is_assumed_by_oidc_before_the_deposit(workflow: dict[str, Any]) -> None:
    names = [step.get("name") for step in _steps(workflow)]
    assert names.index("Assume the CI role") < names.index("Deposit")
    assume = _step(workflow, "Assume the CI role")
    assert PINNED.fullmatch(assume["uses"]), assume["uses"]
    assert assume["with"]["role-to-assume"] == "${{ vars.IBI_CI_ROLE_ARN }}"
    assert assume["with"]["aws-region"] == "${{ vars.AWS_REGION }}"
    assert assume["with"]["role-duration-seconds"] <= MAX_SESSION.to_seconds()
    # OIDC only: no stored keys anywhere (the action's audience default is the role's).
    assert not {"aws-access-key-id", "aws-secret-access-key"} & set(assume["with"])
    assert "audience" not in assume["with"] or assume["with"]["audience"] == AUDIENCE
    text = WORKFLOW.read_text()
    assert "AWS_SECRET_ACCESS_KEY" not in text and "secrets." not in text
    # The environment the CI role's trust policy names (docs/ci-minting.md).
    assert workflow["jobs"]["deposit"]["environment"] == "release"


def _install(workflow: dict[str, Any], checkout: Path, spec: str) -> tuple[int, str, str]:
    """Run the install step in ``checkout`` with a ``python`` that only says what it got."""
    bin_dir = checkout / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text('#!/bin/sh\necho "installed: $*"\n')
    python.chmod(0o755)
    install = _step(workflow, "Install the ibi command")
    result = subprocess.run(
        ["bash", "-e", "-c", install["run"]],
        cwd=checkout,
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "IBI_PIP_SPEC": spec},
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr


def test_ibi_is_installed_from_this_checkout_only_if_it_is_ibi(
    workflow: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 26 item 8: copied to another repository, the default installed that project."""
    install = _step(workflow, "Install the ibi command")
    assert install["env"] == {"IBI_PIP_SPEC": "${{ vars.IBI_PIP_SPEC }}"}
    names = [step.get("name") for step in _steps(workflow)]
    assert names.index("Install the ibi command") < names.index("Deposit")
    ibi = tmp_path / "ibi"
    ibi.mkdir()
    (ibi / "pyproject.toml").write_text((WORKFLOW.parents[2] / "pyproject.toml").read_text())
    assert _install(workflow, ibi, "") == (0, "installed: -m pip install .\n", "")
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "their-tool"\n')
    status, stdout, _ = _install(workflow, other, "")
    assert status == 1 and "installed" not in stdout
    assert "::error::set the repository variable IBI_PIP_SPEC" in stdout
    spec = "git+https://github.com/inpe/ibi@v0.1.0"
    assert _install(workflow, tmp_path / "other", spec)[:2] == (
        0,
        f"installed: -m pip install {spec}\n",
    )


def test_the_job_outputs_are_the_steps(workflow: dict[str, Any]) -> None:
    assert workflow["jobs"]["deposit"]["outputs"] == {
        "ibis": "${{ steps.deposit.outputs.ibis }}",
        "persistent_urls": "${{ steps.deposit.outputs.persistent_urls }}",
    }


def test_the_deposit_step(workflow: dict[str, Any], tmp_path: Path) -> None:
    if shutil.which("bash") is None or shutil.which("sha256sum") is None:
        pytest.skip("needs bash and sha256sum, as on GitHub's runners")
    step = _step(workflow, "Deposit")
    assert step["env"]["RUN_ID"] == "${{ github.run_id }}"
    bin_dir, dist = tmp_path / "bin", tmp_path / "dist"
    bin_dir.mkdir()
    dist.mkdir()
    calls = tmp_path / "calls.jsonl"
    fake = bin_dir / "ibi"
    fake.write_text(FAKE_IBI.format(python=sys.executable, calls=str(calls)))
    fake.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    files = {"ibi-0.1.0.tar.gz": b"sources", "ibi-0.1.0-py3-none-any.whl": b"wheel"}
    for name, content in files.items():
        (dist / name).write_bytes(content)
    output, summary = tmp_path / "output", tmp_path / "summary.md"
    environment = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "IBI_ARCHIVE_ENDPOINT": "https://archive.example.org/",
        "IBI_RESOLVER_URL": "https://urlib.example.org/",
        "RUN_ID": "4242",
    }
    subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=environment, check=True, timeout=60
    )

    invocations = [json.loads(line) for line in calls.read_text().splitlines()]
    assert sorted(args[1] for args in invocations) == sorted(f"dist/{name}" for name in files)
    parser = build_parser()
    for args in invocations:
        file = Path(args[1]).name
        digest = hashlib.sha256(files[file]).hexdigest()
        assert args[0] == "deposit"
        parsed = parser.parse_args(args)  # the real CLI accepts every option passed
        assert parsed.idempotency_key == f"gh-4242-{digest}"
        assert parsed.endpoint == "https://archive.example.org/"
        assert parsed.resolver == "https://urlib.example.org/"
        assert parsed.json is True

    lines = dict(line.split("=", 1) for line in output.read_text().splitlines())
    ibis, urls = json.loads(lines["ibis"]), json.loads(lines["persistent_urls"])
    assert len(ibis) == len(urls) == len(files)
    assert all(ibi.startswith("8JMKD3MGP8W/") for ibi in ibis)
    assert urls == [f"https://urlib.example.org/{ibi}" for ibi in ibis]
    table = summary.read_text()
    assert table.startswith("### Identified artefacts (IBI)")
    for name, ibi, url in zip(sorted(files), ibis, urls, strict=False):
        assert f"`dist/{name}`" in table
        assert f"`{ibi}`" in table and url in table


def test_every_documented_command_line_parses() -> None:
    """The commands docs/ci-minting.md shows run against the real parser too."""
    doc = (WORKFLOW.parents[2] / "docs" / "ci-minting.md").read_text()
    commands = re.findall(r"`ibi (deposit [^`]+)`", doc)
    assert commands
    for command in commands:
        build_parser().parse_args(shlex.split(command.rstrip("\\").strip()))
