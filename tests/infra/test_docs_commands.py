"""Issue 13 item 9, issue 26: every `cdk` command of the deployment docs, run against the app.

Each fenced command line starting ``node_modules/.bin/cdk`` (continuations joined, comments
dropped) is parsed as the CLI would: its ``-c key=value`` context (a string, as the CLI passes
it, over cdk.json's) and the stacks it names. The stage settings files the docs show
(a ```json block after a line naming `stages/<stage>.json`) are written where the app reads
them. The app is synthesized with that context (cdk-nag on, bundling skipped), every named
stack must be in it — a command the docs show never answers "No stacks match" — and cfn-lint
passes on every template it wrote.

A production stage's file, as the docs write it, holds documentation values (example.org,
192.0.2.x) that the reader must replace: the command is run as written and must be refused,
naming them, then with the values an institution would put in their place, and must pass.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra import guardrails
from infra.config import PRODUCTION_STAGES, REPO_ROOT, ConfigError, cdk_json_context
from infra.stacks import build_app
from tests.infra.support import SKIP_BUNDLING
from tests.infra.test_checks import _lint

pytestmark = pytest.mark.infra

DOCS = ("deploy.md", "deploy-archive.md", "deploy-minting.md", "ci-minting.md")
FENCE = re.compile(r"```(?:sh|bash|console)?\n(.*?)```", re.DOTALL)
STAGE_FILE = re.compile(r"`stages/([a-z][a-z0-9]*)\.json`:\n\n(\s*)```json\n(.*?)```", re.DOTALL)
CDK = "node_modules/.bin/cdk"
# What an institution puts in place of the docs' examples (never deployed from here).
INSTITUTION = {"example.org": "inpe.br", "192.0.2.10": "150.163.34.243"}


def commands() -> list[tuple[str, str]]:
    """(document, command) for every cdk command in a fenced block of the docs."""
    found = []
    for name in DOCS:
        for block in FENCE.findall((REPO_ROOT / "docs" / name).read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                if line.strip().startswith(CDK):
                    found.append((name, line.strip()))
    return found


def stage_files() -> dict[str, str]:
    """stage -> the settings file the docs show for it, as written."""
    found: dict[str, str] = {}
    for name in DOCS:
        for stage, indent, block in STAGE_FILE.findall((REPO_ROOT / "docs" / name).read_text()):
            text = "\n".join(line.removeprefix(indent) for line in block.splitlines())
            found[stage] = text
    return found


def parse(command: str) -> tuple[str, dict[str, str], list[str]]:
    """The subcommand, the ``-c`` context and the stacks named (shlex, comments dropped)."""
    words = shlex.split(command, comments=True)
    assert words[0] == CDK
    subcommand, rest = words[1], words[2:]
    context: dict[str, str] = {}
    stacks: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-c", "--context"}:
            key, _, value = rest[index + 1].partition("=")
            context[key] = value
            index += 2
            continue
        assert not word.startswith("-") or word == "--all", f"unknown option {word}"
        if subcommand == "bootstrap" and word.startswith("aws://"):
            index += 1  # an environment to bootstrap (aws://ACCOUNT/REGION), not a stack
            continue
        stacks.append(word)
        index += 1
    return subcommand, context, stacks


COMMANDS = commands()
STAGE_FILES = stage_files()


def test_the_docs_have_cdk_commands_and_a_production_stage_file() -> None:
    subcommands = {parse(command)[0] for _, command in COMMANDS}
    assert {"synth", "deploy", "bootstrap"} <= subcommands
    assert len(COMMANDS) >= 8
    assert "prod" in STAGE_FILES
    settings = json.loads(STAGE_FILES["prod"])
    assert settings["ibi:region"] == "sa-east-1" and "ibi:waf" in settings
    assert settings["ibi:operations"]["page_email"]


def _synth(outdir: Path, context: dict[str, str]) -> App:
    app = build_app(
        App(outdir=str(outdir), context={**cdk_json_context(), **SKIP_BUNDLING, **context})
    )
    app.synth()  # raises on a ConfigError or an unacknowledged cdk-nag finding
    return app


@pytest.mark.parametrize(("document", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_each_command_names_stacks_the_app_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, document: str, command: str
) -> None:
    subcommand, context, stacks = parse(command)
    assert "--all" not in stacks, f"{document}: name the stacks, never --all"
    stages = tmp_path / "stages"
    stages.mkdir()
    monkeypatch.setattr(guardrails, "STAGES_DIR", stages)
    for stage, text in STAGE_FILES.items():
        (stages / f"{stage}.json").write_text(text)
    if context.get("ibi:stage") in PRODUCTION_STAGES:
        # as written: the examples are refused, each named
        with pytest.raises(ConfigError, match="documentation values") as refusal:
            _synth(tmp_path / "as-written", context)
        assert "ibi:minting.subsystems[default].ip = 192.0.2.10" in str(refusal.value)
        # with the institution's own values in their place
        for stage, text in STAGE_FILES.items():
            own_values = text
            for example, own in INSTITUTION.items():
                own_values = own_values.replace(example, own)
            (stages / f"{stage}.json").write_text(own_values)
    app = _synth(tmp_path / "out", context)
    present = {child.node.id for child in app.node.children if isinstance(child, Stack)}
    if subcommand == "deploy":
        assert stacks, f"{document}: {command} names no stack"
    assert set(stacks) <= present, f"{document}: {command}: the app has {sorted(present)}"
    for child in app.node.children:
        if isinstance(child, Stack):
            _lint(child)


def test_a_stack_the_app_lacks_is_caught() -> None:
    """Not vacuous: the old minting command (no ibi:stacks) names a stack the app lacks."""
    _, context, stacks = parse(f"{CDK} deploy IbiMinting")
    app = build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING, **context}))
    present = {child.node.id for child in app.node.children if isinstance(child, Stack)}
    assert not set(stacks) <= present


def test_cfn_lint_is_not_vacuous() -> None:
    """A template cfn-lint rejects is rejected by the same call the tests make."""
    app = App()
    stack = Stack(app, "Broken")
    from aws_cdk import CfnResource

    CfnResource(stack, "Queue", type="AWS::SQS::Queue", properties={"VisibilityTimeout": "soon"})
    with pytest.raises(AssertionError, match="E3012"):
        _lint(stack)
    assert Template.from_stack(stack).to_json()["Resources"]
